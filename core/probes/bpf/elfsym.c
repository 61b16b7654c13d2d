/* SPDX-License-Identifier: MIT */
/* ELF symbol lookup for the bpf probe (see elfsym.h; its x86-64 prologue walker is
 * support/x86_insn.c). libbpf 1.1 cannot resolve versioned libc symbols or .lto_priv
 * clones by name, so the probe resolves offsets itself. */
#define _GNU_SOURCE
#include "elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The file is read with pread, never mmapped: a system-wide uprobe on this file
 * (another tool's, or a follow_children probe still being detached) is also
 * installed into every private mapping of it that could be made executable,
 * and an mmapped copy would then show int3 bytes where the code is. */
struct gtp_elf {
    int fd;
    Elf *elf;
    size_t phnum;
};

int gtp_elf__open(struct gtp_elf **out, const char *path)
{
    struct gtp_elf *e = NULL;
    GElf_Ehdr eh;
    int err = 0;

    *out = NULL;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return -ENOSYS;
    e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->fd = -1;
    e->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (e->fd < 0) {
        err = -errno;
        goto cleanup;
    }
    e->elf = elf_begin(e->fd, ELF_C_READ, NULL);
    if (!e->elf || elf_kind(e->elf) != ELF_K_ELF || gelf_getclass(e->elf) != ELFCLASS64 ||
        !gelf_getehdr(e->elf, &eh) || elf_getphdrnum(e->elf, &e->phnum) != 0) {
        err = -ENOEXEC;
        goto cleanup;
    }
    *out = e;
    return 0;
cleanup:
    gtp_elf__free(e);
    return err;
}

void gtp_elf__free(struct gtp_elf *e)
{
    if (!e)
        return;
    if (e->elf)
        elf_end(e->elf);
    if (e->fd >= 0)
        close(e->fd);
    free(e);
}

static Elf_Scn *find_section(const struct gtp_elf *e, Elf64_Word type, GElf_Shdr *sh)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e->elf, scn)) != NULL) {
        if (gelf_getshdr(scn, sh) && sh->sh_type == type)
            return scn;
    }
    return NULL;
}

/* "name", or "name" followed by clone suffixes: 2 for an exact match, 1 for a
 * clone, 0 for anything else. */
static int name_match(const char *sym, const char *name)
{
    static const char *const clones[] = {".lto_priv.", ".constprop.", ".isra."};
    size_t n = strlen(name);
    if (strncmp(sym, name, n) != 0)
        return 0;
    sym += n;
    if (*sym == '\0')
        return 2;
    while (*sym) {
        size_t i, k = 0;
        for (i = 0; i < sizeof(clones) / sizeof(clones[0]); i++) {
            k = strlen(clones[i]);
            if (strncmp(sym, clones[i], k) == 0)
                break;
        }
        if (i == sizeof(clones) / sizeof(clones[0]))
            return 0;
        sym += k;
        if (*sym < '0' || *sym > '9')
            return 0;
        while (*sym >= '0' && *sym <= '9')
            sym++;
    }
    return 1;
}

int gtp_elf__find_func(const struct gtp_elf *e, enum gtp_elf_table table,
                       const char *name, int clones, uint64_t *vaddr)
{
    GElf_Shdr sh, vsh;
    Elf_Scn *scn =
        find_section(e, table == GTP_ELF_DYNSYM ? SHT_DYNSYM : SHT_SYMTAB, &sh);
    Elf_Data *data, *vdata = NULL;
    int best = 0;

    if (!scn || sh.sh_entsize == 0)
        return -ENOENT;
    data = elf_getdata(scn, NULL);
    if (!data)
        return -ENOENT;
    if (table == GTP_ELF_DYNSYM) {
        Elf_Scn *vscn = find_section(e, SHT_GNU_versym, &vsh);
        if (vscn)
            vdata = elf_getdata(vscn, NULL);
    }
    size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, (int)i, &sym))
            continue;
        if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
            sym.st_value == 0)
            continue;
        const char *s = elf_strptr(e->elf, sh.sh_link, sym.st_name);
        if (!s)
            continue;
        int m = clones ? name_match(s, name) : (strcmp(s, name) == 0 ? 2 : 0);
        if (m <= best)
            continue;
        if (vdata) {
            GElf_Versym v;
            /* Bit 15 marks a hidden (non-default) version: name@VER. */
            if (gelf_getversym(vdata, (int)i, &v) && (v & 0x8000))
                continue;
        }
        best = m;
        *vaddr = sym.st_value;
        if (best == 2)
            break;
    }
    return best ? 0 : -ENOENT;
}

int gtp_elf__exports_at(const struct gtp_elf *e, uint64_t vaddr)
{
    GElf_Shdr sh;
    Elf_Scn *scn = find_section(e, SHT_DYNSYM, &sh);
    Elf_Data *data;

    if (!scn || sh.sh_entsize == 0 || !(data = elf_getdata(scn, NULL)))
        return 0;
    size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; i++) {
        GElf_Sym sym;
        if (gelf_getsym(data, (int)i, &sym) && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
            sym.st_shndx != SHN_UNDEF && sym.st_value == vaddr)
            return 1;
    }
    return 0;
}

static int find_load(const struct gtp_elf *e, uint64_t vaddr, GElf_Phdr *ph)
{
    for (size_t i = 0; i < e->phnum; i++) {
        if (!gelf_getphdr(e->elf, (int)i, ph) || ph->p_type != PT_LOAD)
            continue;
        if (vaddr >= ph->p_vaddr && vaddr < ph->p_vaddr + ph->p_filesz)
            return 0;
    }
    return -ERANGE;
}

int gtp_elf__offset(const struct gtp_elf *e, uint64_t vaddr, uint64_t *off, int *exec)
{
    GElf_Phdr ph;
    int err = find_load(e, vaddr, &ph);
    if (err)
        return err;
    *off = vaddr - ph.p_vaddr + ph.p_offset;
    if (exec)
        *exec = (ph.p_flags & PF_X) != 0;
    return 0;
}

int gtp_elf__is_call_target(const struct gtp_elf *e, uint64_t vaddr)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK + 8);
    GElf_Phdr ph;
    int found = 0;

    if (!buf)
        return 0;
    for (size_t i = 0; i < e->phnum && !found; i++) {
        if (!gelf_getphdr(e->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
            !(ph.p_flags & PF_X))
            continue;
        /* Chunks overlap by 4 bytes so that no call straddles a boundary unseen. */
        for (uint64_t pos = 0; pos + 5 <= ph.p_filesz && !found; pos += CHUNK) {
            size_t want = ph.p_filesz - pos < CHUNK + 4 ? ph.p_filesz - pos : CHUNK + 4;
            ssize_t got = pread(e->fd, buf, want, (off_t)(ph.p_offset + pos));
            if (got < 5)
                break;
            for (size_t k = 0; k + 5 <= (size_t)got; k++) {
                int32_t rel;
                if (buf[k] != 0xe8)
                    continue;
                memcpy(&rel, buf + k + 1, 4);
                if (ph.p_vaddr + pos + k + 5 + (int64_t)rel == vaddr) {
                    found = 1;
                    break;
                }
            }
        }
    }
    free(buf);
    return found;
}

int gtp_elf__read(const struct gtp_elf *e, uint64_t vaddr, void *buf, size_t n)
{
    GElf_Phdr ph;
    if (find_load(e, vaddr, &ph) || vaddr + n > ph.p_vaddr + ph.p_filesz)
        return -ERANGE;
    ssize_t got = pread(e->fd, buf, n, (off_t)(vaddr - ph.p_vaddr + ph.p_offset));
    if (got < 0)
        return -errno;
    return (size_t)got == n ? 0 : -EIO;
}

/* DWARF exception-header pointer encodings (LSB Core, .eh_frame_hdr). */
#define EH_PE_udata4 0x03
#define EH_PE_sdata4 0x0b
#define EH_PE_pcrel 0x10
#define EH_PE_datarel 0x30

static int read_s32(const struct gtp_elf *e, uint64_t vaddr, int32_t *v)
{
    return gtp_elf__read(e, vaddr, v, sizeof(*v));
}

int gtp_elf__func_bounds(const struct gtp_elf *e, uint64_t vaddr, uint64_t *start,
                         uint64_t *end)
{
    GElf_Phdr ph;
    uint8_t hdr[4];
    uint32_t count, len;
    int32_t loc, fde, begin, range;
    size_t i;
    int found = 0;

    for (i = 0; i < e->phnum; i++) {
        if (gelf_getphdr(e->elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
            found = 1;
            break;
        }
    }
    if (!found)
        return -ENOENT;
    const uint64_t base = ph.p_vaddr;
    /* version 1; eh_frame_ptr pcrel sdata4; fde_count udata4; table datarel sdata4 */
    if (gtp_elf__read(e, base, hdr, sizeof(hdr)) != 0)
        return -ENOENT;
    if (hdr[0] != 1 || hdr[1] != (EH_PE_pcrel | EH_PE_sdata4) || hdr[2] != EH_PE_udata4 ||
        hdr[3] != (EH_PE_datarel | EH_PE_sdata4))
        return -ENOTSUP;
    if (gtp_elf__read(e, base + 8, &count, sizeof(count)) != 0 || count == 0)
        return -ENOENT;
    /* The last entry whose initial location is <= vaddr. */
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (read_s32(e, base + 12 + 8 * mid, &loc) != 0)
            return -ENOENT;
        if (base + (int64_t)loc <= vaddr)
            lo = mid;
        else
            hi = mid;
    }
    if (read_s32(e, base + 12 + 8 * lo, &loc) != 0 ||
        read_s32(e, base + 12 + 8 * lo + 4, &fde) != 0)
        return -ENOENT;
    const uint64_t f = base + (int64_t)fde, fn = base + (int64_t)loc;
    if (fn > vaddr)
        return -ENOENT;
    /* FDE: length, CIE pointer, pc_begin (pcrel sdata4), pc_range (sdata4). The
     * begin must say what the index said, else the CIE uses another encoding. */
    if (gtp_elf__read(e, f, &len, sizeof(len)) != 0 || len == 0 || len == 0xffffffffu ||
        read_s32(e, f + 8, &begin) != 0 || read_s32(e, f + 12, &range) != 0)
        return -ENOENT;
    if (f + 8 + (int64_t)begin != fn || range <= 0)
        return -ENOTSUP;
    if (vaddr >= fn + (uint64_t)range)
        return -ENOENT;
    *start = fn;
    *end = fn + (uint64_t)range;
    return 0;
}

int gtp_elf__build_id(const struct gtp_elf *e, uint8_t *out, size_t max)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;

    while ((scn = elf_nextscn(e->elf, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data)
            continue;
        GElf_Nhdr nh;
        size_t pos = 0, name_off, desc_off;
        while ((pos = gelf_getnote(data, pos, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                memcmp((const char *)data->d_buf + name_off, "GNU", 4) == 0) {
                size_t n = nh.n_descsz < max ? nh.n_descsz : max;
                memcpy(out, (const char *)data->d_buf + desc_off, n);
                return (int)nh.n_descsz;
            }
        }
    }
    return -ENOENT;
}
