/* SPDX-License-Identifier: MIT */
/* A loaded ELF object's dynamic linking tables, read from its mapped image (no file
 * access), and stores into its GOT: what a probe that interposes on an object's
 * imports needs. 64-bit Linux (glibc's link.h). The `why` texts name the interpreter
 * object, the one object the hooks probe reads. */
#ifndef GT_GOT_H
#define GT_GOT_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* A loaded object's dynamic linking tables (pointers into its mapped image). */
struct gt_elf_obj {
    struct link_map *lm;
    uintptr_t bias;
    const ElfW(Phdr) *phdr;
    size_t phnum;
    /* from PT_DYNAMIC */
    const ElfW(Rela) *jmprel, *rela;
    size_t jmprel_n, rela_n;
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const ElfW(Half) *versym;
    const ElfW(Verneed) *verneed;
    size_t verneed_n;
    int pltrel;
};

/**
 * gt_elf_obj__open() - fill o for the object of link map lm: its program headers and
 * the tables in its PT_DYNAMIC. Returns 0, or -ENOENT / -ENOTSUP with *why set.
 */
int gt_elf_obj__open(struct gt_elf_obj *o, struct link_map *lm, const char **why);

/* The symbol version o binds for dynamic symbol idx, or NULL when unversioned. */
const char *gt_elf_obj__needed_version(const struct gt_elf_obj *o, size_t idx);

/* The page protection (PROT_*) the loader left on addr inside o. */
int gt_elf_obj__page_prot(const struct gt_elf_obj *o, uintptr_t addr);

/* Store val into the GOT slot at addr whose page has protection prot (as
 * gt_elf_obj__page_prot says). Returns 0 or -errno (mprotect refused). */
int gt_got__store(void **addr, int prot, void *val);

#endif /* GT_GOT_H */
