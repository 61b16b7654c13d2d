/* SPDX-License-Identifier: MIT */
/* Just enough x86-64 decoding to place uprobes: a prologue's first call and where a
 * probe is emulated rather than single-stepped. Bytes in, no I/O: tested alone. */
#ifndef GT_X86_INSN_H
#define GT_X86_INSN_H

#include <stddef.h>
#include <stdint.h>

/**
 * gtp_x86__first_call() - follow straight-line x86-64 code at `code` (n bytes,
 * loaded at `vaddr`) to its first `call rel32` and return the call target in
 * *target. Only the instruction forms that prologues use are decoded; an unknown
 * one, a return or an unconditional jump ends the search.
 * Returns 0, or -ENOENT.
 */
int gtp_x86__first_call(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t *target);

/**
 * gtp_x86__first_call_offset() - like gtp_x86__first_call(), but the offset of
 * that `call rel32` instruction from `code` (a call is emulated by the kernel's
 * uprobes, and straight-line code before it runs on every path).
 * Returns 0, or -ENOENT.
 */
int gtp_x86__first_call_offset(const uint8_t *code, size_t n, size_t *offset);

/**
 * gtp_x86__probe_skip() - where to put a uprobe on the function at `code` so that
 * the kernel emulates the probed instruction (push) instead of single-stepping
 * it out of line (~11 us per hit instead of ~0.7 us): 0 when the function starts
 * with a push, 4 when it starts with endbr64 followed by a push (every call passes
 * there too, and the return address is still on top of the stack), else -1.
 */
int gtp_x86__probe_skip(const uint8_t *code, size_t n);

#endif /* GT_X86_INSN_H */
