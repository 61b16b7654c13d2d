/* SPDX-License-Identifier: MIT */
/* Just enough ELF (libelf) for placing uprobes: function symbols from .symtab or
 * .dynsym (default symbol version only), build ids, and virtual address -> file
 * offset through PT_LOAD. Internal to the bpf probe. Files are read with pread
 * (see elfsym.c for why not mmap). */
#ifndef GT_ELFSYM_H
#define GT_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct gtp_elf;

enum gtp_elf_table {
    GTP_ELF_SYMTAB = 1, /* .symtab: local symbols too (absent when stripped) */
    GTP_ELF_DYNSYM = 2, /* .dynsym: exported symbols */
};

/**
 * gtp_elf__open() - open an ELF file for reading.
 * Returns 0 and sets *out, or -errno (-ENOENT, -EACCES, -ENOEXEC: not ELF64).
 */
int gtp_elf__open(struct gtp_elf **out, const char *path);

/** gtp_elf__free() - close; accepts NULL. */
void gtp_elf__free(struct gtp_elf *e);

/**
 * gtp_elf__find_func() - the address (st_value: a link-time virtual address) of
 * the defined function `name` in `table`. With `clones`, compiler clones named
 * name.lto_priv.N, name.constprop.N, name.isra.N (and chains of these) match too,
 * an exact name winning; split-off parts (.cold, .part) never match. In .dynsym
 * only the default version (name@@VER, not hidden) of a versioned symbol matches.
 * Returns 0, or -ENOENT (no such symbol / no such table).
 */
int gtp_elf__find_func(const struct gtp_elf *e, enum gtp_elf_table table,
                       const char *name, int clones, uint64_t *vaddr);

/**
 * gtp_elf__exports_at() - whether a function exported in .dynsym starts at
 * `vaddr`. Returns 1 or 0.
 */
int gtp_elf__exports_at(const struct gtp_elf *e, uint64_t vaddr);

/**
 * gtp_elf__offset() - the file offset of `vaddr`, and whether its segment is
 * executable. Returns 0, or -ERANGE when no PT_LOAD maps it from the file.
 */
int gtp_elf__offset(const struct gtp_elf *e, uint64_t vaddr, uint64_t *off, int *exec);

/**
 * gtp_elf__is_call_target() - whether some `call rel32` (e8) in an executable
 * PT_LOAD targets `vaddr`: a byte scan, no decoding, so a cheap sanity check that
 * `vaddr` starts a (directly called) function. Returns 1 or 0.
 */
int gtp_elf__is_call_target(const struct gtp_elf *e, uint64_t vaddr);

/**
 * gtp_elf__read() - copy the file's n bytes at `vaddr` (all from one PT_LOAD).
 * Returns 0, or -ERANGE / -EIO / -errno.
 */
int gtp_elf__read(const struct gtp_elf *e, uint64_t vaddr, void *buf, size_t n);

/**
 * gtp_elf__func_bounds() - the function that contains `vaddr`, by the unwind table
 * (.eh_frame_hdr's sorted FDE index, present in stripped binaries): [*start, *end).
 * Only the layout GCC and clang emit on x86-64 is read (pcrel/datarel sdata4
 * encodings, 32-bit FDE lengths). A hot/cold split function has one FDE per part.
 * Returns 0, -ENOENT (no unwind entry covers vaddr), -ENOTSUP (another encoding).
 */
int gtp_elf__func_bounds(const struct gtp_elf *e, uint64_t vaddr, uint64_t *start,
                         uint64_t *end);

/**
 * gtp_elf__build_id() - the GNU build id (NT_GNU_BUILD_ID note).
 * Returns its length (copied into out up to max bytes), or -ENOENT.
 */
int gtp_elf__build_id(const struct gtp_elf *e, uint8_t *out, size_t max);

#endif /* GT_ELFSYM_H */
