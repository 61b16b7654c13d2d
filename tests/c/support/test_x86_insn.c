/* SPDX-License-Identifier: MIT */
/* Unit test of the prologue decoder (core/support/x86_insn.c) on real prologues: where
 * the bpf probe's uprobes go so that the kernel emulates the probed instruction. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "x86_insn.h"

#include "check.h"

/* Debian sid's python3.14 (3.14.10, GCC 16, LTO): take_gil.lto_priv.0 starts with
 * endbr64; sub $0x88,%rsp; two stores; then call __errno_location@plt. */
static const uint8_t take_gil_314[] = {
    0xf3, 0x0f, 0x1e, 0xfa,                   /* endbr64 */
    0x48, 0x81, 0xec, 0x88, 0x00, 0x00, 0x00, /* sub $0x88,%rsp */
    0x48, 0x89, 0x5c, 0x24, 0x58,             /* mov %rbx,0x58(%rsp) */
    0x48, 0x89, 0xfb,                         /* mov %rdi,%rbx */
    0x4c, 0x89, 0x6c, 0x24, 0x70,             /* mov %r13,0x70(%rsp) */
    0xe8, 0xa3, 0x2f, 0xee, 0xff,             /* call __errno_location@plt */
    0x49, 0x89, 0xc5,                         /* mov %rax,%r13 */
};

/* python3.15 (3.15.2): endbr64; push %rbp: the push is probed. */
static const uint8_t take_gil_315[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5,
                                       0x41, 0x57};

/* A jump before any call: no straight-line call to probe. */
static const uint8_t jumps_first[] = {0xf3, 0x0f, 0x1e, 0xfa, 0xeb, 0x10,
                                      0xe8, 0x00, 0x00, 0x00, 0x00};

static void test_single_stepped_entry_has_a_call_to_probe(void)
{
    size_t at = 0;
    CHECK(gtp_x86__probe_skip(take_gil_314, sizeof(take_gil_314)) == -1, "no push");
    CHECK(gtp_x86__first_call_offset(take_gil_314, sizeof(take_gil_314), &at) == 0,
          "a call");
    CHECK(at == 24, "at %zu", at);
    uint64_t target = 0;
    CHECK(gtp_x86__first_call(take_gil_314, sizeof(take_gil_314), 0x540620, &target) == 0,
          "first_call");
    CHECK(target == 0x4235e0, "target %#llx", (unsigned long long)target);
}

static void test_push_after_endbr64(void)
{
    CHECK(gtp_x86__probe_skip(take_gil_315, sizeof(take_gil_315)) == 4, "push at +4");
}

static void test_no_call_past_a_jump(void)
{
    size_t at = 0;
    CHECK(gtp_x86__first_call_offset(jumps_first, sizeof(jumps_first), &at) != 0,
          "found one at %zu", at);
}

int main(void)
{
    test_single_stepped_entry_has_a_call_to_probe();
    test_push_after_endbr64();
    test_no_call_past_a_jump();
    printf("x86_insn: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
