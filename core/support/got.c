/* SPDX-License-Identifier: MIT */
/* ELF dynamic tables and GOT stores (see got.h). */
#define _GNU_SOURCE
#include "got.h"

#include <elf.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

static int find_phdrs_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    struct gt_elf_obj *o = ctx;
    (void)size;
    if (info->dlpi_addr != o->bias)
        return 0;
    /* Same bias is not enough (several objects may have bias 0 in odd setups):
     * require that its PT_DYNAMIC is the link map's l_ld. */
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_DYNAMIC &&
            info->dlpi_addr + p->p_vaddr == (uintptr_t)o->lm->l_ld) {
            o->phdr = info->dlpi_phdr;
            o->phnum = info->dlpi_phnum;
            return 1;
        }
    }
    return 0;
}

/* glibc rewrites some d_ptr values of a loaded object's dynamic section in place
 * (DT_STRTAB, DT_SYMTAB, DT_JMPREL, DT_RELA, DT_VERSYM, ...: already absolute) but not
 * others (DT_VERNEED), and leaves read-only dynamic sections alone. An object's own
 * addresses are far below its bias, so a value below the bias is unrelocated. */
static const void *dyn_ptr(const struct gt_elf_obj *o, ElfW(Addr) v)
{
    if (o->bias && v < o->bias)
        return (const void *)(o->bias + v);
    return (const void *)v;
}

static int read_dynamic(struct gt_elf_obj *o, const char **why)
{
    size_t jmprelsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela));
    for (const ElfW(Dyn) *d = o->lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_JMPREL: o->jmprel = dyn_ptr(o, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprelsz = d->d_un.d_val; break;
        case DT_PLTREL: o->pltrel = (int)d->d_un.d_val; break;
        case DT_RELA: o->rela = dyn_ptr(o, d->d_un.d_ptr); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_RELAENT: relaent = d->d_un.d_val; break;
        case DT_SYMTAB: o->symtab = dyn_ptr(o, d->d_un.d_ptr); break;
        case DT_STRTAB: o->strtab = dyn_ptr(o, d->d_un.d_ptr); break;
        case DT_STRSZ: o->strsz = d->d_un.d_val; break;
        case DT_VERSYM: o->versym = dyn_ptr(o, d->d_un.d_ptr); break;
        case DT_VERNEED: o->verneed = dyn_ptr(o, d->d_un.d_ptr); break;
        case DT_VERNEEDNUM: o->verneed_n = d->d_un.d_val; break;
        }
    }
    if (!o->symtab || !o->strtab) {
        *why = "the interpreter object has no dynamic symbol table";
        return -ENOENT;
    }
    if (relaent != sizeof(ElfW(Rela)) || (o->jmprel && o->pltrel != DT_RELA)) {
        *why = "the interpreter object's relocations are not RELA";
        return -ENOTSUP;
    }
    o->jmprel_n = o->jmprel ? jmprelsz / sizeof(ElfW(Rela)) : 0;
    o->rela_n = o->rela ? relasz / sizeof(ElfW(Rela)) : 0;
    return 0;
}

int gt_elf_obj__open(struct gt_elf_obj *o, struct link_map *lm, const char **why)
{
    o->lm = lm;
    o->bias = lm->l_addr;
    if (!dl_iterate_phdr(find_phdrs_cb, o)) {
        *why = "the interpreter object's program headers were not found";
        return -ENOENT;
    }
    return read_dynamic(o, why);
}

/* The symbol version the object binds for dynamic symbol `idx` (e.g. GLIBC_2.3.2
 * for pthread_cond_*: the old GLIBC_2.2.5 ones take a different cond layout), or
 * NULL when unversioned. */
const char *gt_elf_obj__needed_version(const struct gt_elf_obj *o, size_t idx)
{
    if (!o->versym || !o->verneed)
        return NULL;
    ElfW(Half) v = o->versym[idx] & 0x7fff;
    if (v < 2) /* local or global: no version */
        return NULL;
    const ElfW(Verneed) *n = o->verneed;
    for (size_t i = 0; i < o->verneed_n; i++) {
        const ElfW(Vernaux) *a = (const void *)((const char *)n + n->vn_aux);
        for (size_t j = 0; j < n->vn_cnt; j++) {
            if (a->vna_other == v)
                return a->vna_name < o->strsz ? o->strtab + a->vna_name : NULL;
            a = (const void *)((const char *)a + a->vna_next);
        }
        if (!n->vn_next)
            break;
        n = (const void *)((const char *)n + n->vn_next);
    }
    return NULL;
}

/* The page protection the loader left on `addr`: its PT_LOAD's flags, read-only
 * inside the whole pages of PT_GNU_RELRO (glibc rounds the end down). */
int gt_elf_obj__page_prot(const struct gt_elf_obj *o, uintptr_t addr)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    int prot = PROT_READ | PROT_WRITE;
    for (size_t i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *p = &o->phdr[i];
        uintptr_t lo = o->bias + p->p_vaddr;
        if (p->p_type == PT_LOAD && addr >= lo && addr < lo + p->p_memsz) {
            prot = ((p->p_flags & PF_R) ? PROT_READ : 0) |
                   ((p->p_flags & PF_W) ? PROT_WRITE : 0) |
                   ((p->p_flags & PF_X) ? PROT_EXEC : 0);
            break;
        }
    }
    for (size_t i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *p = &o->phdr[i];
        if (p->p_type != PT_GNU_RELRO)
            continue;
        uintptr_t lo = (o->bias + p->p_vaddr) & ~(page - 1);
        uintptr_t hi = (o->bias + p->p_vaddr + p->p_memsz) & ~(page - 1);
        if (addr >= lo && addr < hi)
            prot &= ~PROT_WRITE;
    }
    return prot;
}

/* Store `val` into a GOT slot, making its page writable for the store if the loader
 * left it read-only (RELRO, e.g. BIND_NOW or -fno-plt builds). The store is one
 * aligned word: a concurrent caller jumps either to the old or the new target. */
int gt_got__store(void **addr, int prot, void *val)
{
    if (prot & PROT_WRITE) {
        __atomic_store_n(addr, val, __ATOMIC_RELEASE);
        return 0;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *lo = (void *)((uintptr_t)addr & ~(page - 1));
    if (mprotect(lo, page, prot | PROT_WRITE) != 0)
        return -errno;
    __atomic_store_n(addr, val, __ATOMIC_RELEASE);
    if (mprotect(lo, page, prot) != 0)
        return -errno;
    return 0;
}
