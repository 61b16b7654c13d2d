/* SPDX-License-Identifier: MIT */
/* Just enough of an x86-64 instruction decoder to follow a prologue (see x86_insn.h). */
#include "x86_insn.h"

#include <errno.h>
#include <string.h>

/* Length of a ModRM operand (ModRM byte, SIB, displacement) at p, or 0. */
static size_t modrm_len(const uint8_t *p, size_t n)
{
    if (n < 1)
        return 0;
    uint8_t m = p[0], mod = m >> 6, rm = m & 7;
    size_t len = 1;
    if (mod == 3)
        return 1;
    if (rm == 4) {
        if (n < 2)
            return 0;
        len++;
        if (mod == 0 && (p[1] & 7) == 5)
            len += 4;
    } else if (mod == 0 && rm == 5) {
        len += 4; /* rip-relative */
    }
    if (mod == 1)
        len += 1;
    else if (mod == 2)
        len += 4;
    return len <= n ? len : 0;
}

enum insn_flow { FLOW_NEXT, FLOW_CALL, FLOW_END };

/* i + k when the k bytes after offset i are there, else 0 (not an instruction). */
static inline size_t fits(size_t i, size_t k, size_t n)
{
    return i + k <= n ? i + k : 0;
}

/* i + the ModRM operand's length (+ imm bytes), or 0. */
static inline size_t with_modrm(const uint8_t *p, size_t n, size_t i, size_t imm)
{
    size_t m = i < n ? modrm_len(p + i, n - i) : 0;
    return m ? fits(i + m, imm, n) : 0;
}

/* Length of a two-byte (0x0f-escaped) instruction whose second byte is at p[i - 1]. */
static size_t two_byte_len(const uint8_t *p, size_t n, size_t i, int rep)
{
    uint8_t op2 = p[i - 1];
    if (op2 == 0x1e && rep && i < n && p[i] == 0xfa) /* endbr64 */
        return i + 1;
    if (op2 >= 0x80 && op2 <= 0x8f) /* jcc rel32 */
        return fits(i, 4, n);
    if (op2 == 0x1f || (op2 >= 0x40 && op2 <= 0x4f) || (op2 >= 0x90 && op2 <= 0x9f) ||
        op2 == 0xaf || op2 == 0xb6 || op2 == 0xb7 || op2 == 0xbe || op2 == 0xbf ||
        op2 == 0x10 || op2 == 0x11 || op2 == 0x28 || op2 == 0x29 || op2 == 0x6f ||
        op2 == 0x7f || op2 == 0xd6 || op2 == 0xef || op2 == 0x57)
        return with_modrm(p, n, i, 0);
    return 0;
}

/* Length of a one-byte-opcode instruction whose opcode `op` is at p[i - 1]; imm_z is the
 * size of a full immediate (2 with the 0x66 prefix, else 4). */
static size_t one_byte_len(const uint8_t *p, size_t n, size_t i, uint8_t op, int rex_w,
                           size_t imm_z, enum insn_flow *flow)
{
    if (op < 0x40 && (op & 7) < 4) /* add/or/adc/sbb/and/sub/xor/cmp r/m */
        return with_modrm(p, n, i, 0);
    if (op < 0x40 && (op & 7) == 4) /* op al, imm8 */
        return fits(i, 1, n);
    if (op < 0x40 && (op & 7) == 5) /* op eax, imm */
        return fits(i, imm_z, n);
    if (op >= 0x50 && op <= 0x5f) /* push/pop */
        return i;
    if ((op >= 0x70 && op <= 0x7f) || (op >= 0xb0 && op <= 0xb7)) /* jcc rel8, mov r8, imm8 */
        return fits(i, 1, n);
    if (op >= 0xb8 && op <= 0xbf) /* mov r, imm (imm64 with REX.W) */
        return fits(i, rex_w ? 8 : imm_z, n);
    switch (op) {
    case 0x63:
    case 0x84:
    case 0x85:
    case 0x86:
    case 0x87:
    case 0x88:
    case 0x89:
    case 0x8a:
    case 0x8b:
    case 0x8d:
    case 0xd1:
    case 0xd3:
        return with_modrm(p, n, i, 0);
    case 0x80:
    case 0x83:
    case 0xc0:
    case 0xc1:
    case 0xc6:
        return with_modrm(p, n, i, 1);
    case 0x69:
    case 0x81:
    case 0xc7:
        return with_modrm(p, n, i, imm_z);
    case 0xf6:
    case 0xf7: /* test r/m, imm has an immediate; not/neg/mul/div do not */
        if (i >= n)
            return 0;
        return with_modrm(p, n, i, ((p[i] >> 3) & 7) == 0 ? (op == 0xf6 ? 1 : imm_z) : 0);
    case 0xff:
        if (i >= n)
            return 0;
        if (((p[i] >> 3) & 7) >= 2 && ((p[i] >> 3) & 7) <= 5)
            *flow = FLOW_END; /* indirect call/jmp: not followed */
        return with_modrm(p, n, i, 0);
    case 0x6a:
    case 0xa8:
        return fits(i, 1, n);
    case 0x68:
    case 0xa9:
        return fits(i, imm_z, n);
    case 0x90:
    case 0x98:
    case 0x99:
    case 0xc9:
        return i;
    case 0xeb:
        *flow = FLOW_END;
        return fits(i, 1, n);
    case 0xe9:
        *flow = FLOW_END;
        return fits(i, 4, n);
    case 0xe8:
        *flow = FLOW_CALL;
        return fits(i, 4, n);
    case 0xc3:
    case 0xcc:
        *flow = FLOW_END;
        return i;
    default:
        return 0;
    }
}

/* Length of the instruction at p, or 0 when it is not one of the common integer
 * forms above. *flow tells calls (rel32 at p[len-4]) and ends of straight-line
 * code (ret, jmp) apart. */
static size_t insn_len(const uint8_t *p, size_t n, enum insn_flow *flow)
{
    size_t i = 0;
    int opsize16 = 0, rex_w = 0, rep = 0;

    *flow = FLOW_NEXT;
    while (i < n && (p[i] == 0x66 || p[i] == 0xf2 || p[i] == 0xf3 || p[i] == 0x2e ||
                     p[i] == 0x3e)) {
        opsize16 |= p[i] == 0x66;
        rep |= p[i] == 0xf3;
        i++;
    }
    if (i < n && (p[i] & 0xf0) == 0x40) {
        rex_w = (p[i] & 8) != 0;
        i++;
    }
    if (i >= n)
        return 0;
    uint8_t op = p[i++];
    if (op == 0x0f)
        return i < n ? two_byte_len(p, n, i + 1, rep) : 0;
    return one_byte_len(p, n, i, op, rex_w, opsize16 ? 2 : 4, flow);
}

int gtp_x86__first_call_offset(const uint8_t *code, size_t n, size_t *offset)
{
    size_t pos = 0;
    while (pos < n) {
        enum insn_flow flow;
        size_t len = insn_len(code + pos, n - pos, &flow);
        if (!len)
            return -ENOENT;
        if (flow == FLOW_CALL) {
            *offset = pos;
            return 0;
        }
        if (flow == FLOW_END)
            return -ENOENT;
        pos += len;
    }
    return -ENOENT;
}

int gtp_x86__first_call(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t *target)
{
    size_t pos;
    int err = gtp_x86__first_call_offset(code, n, &pos);
    if (err)
        return err;
    enum insn_flow flow;
    size_t len = insn_len(code + pos, n - pos, &flow); /* a call rel32: its last 4 bytes */
    int32_t rel;
    memcpy(&rel, code + pos + len - 4, 4);
    *target = vaddr + pos + len + (int64_t)rel;
    return 0;
}

static int is_push(const uint8_t *p, size_t n)
{
    if (n >= 1 && p[0] >= 0x50 && p[0] <= 0x57)
        return 1;
    return n >= 2 && p[0] == 0x41 && p[1] >= 0x50 && p[1] <= 0x57;
}

int gtp_x86__probe_skip(const uint8_t *code, size_t n)
{
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    if (is_push(code, n))
        return 0;
    if (n >= 4 && memcmp(code, endbr64, 4) == 0 && is_push(code + 4, n - 4))
        return 4;
    return -1;
}
