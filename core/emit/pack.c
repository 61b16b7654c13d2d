/* SPDX-License-Identifier: MIT */
#include "pack.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t span_dur(const struct gt_span *s)
{
    return s->end > s->start ? s->end - s->start : 0;
}

static uint64_t pixel_of(const struct gt_pack *p, uint64_t t)
{
    return t > p->origin ? (t - p->origin) / p->px : 0;
}

void gt_pack__init(struct gt_pack *p, const struct gt_span *s, size_t n, uint64_t origin, uint64_t px_ns)
{
    *p = (struct gt_pack){.s = s, .n = n, .i = 0, .origin = origin, .px = px_ns};
}

int gt_pack__next(struct gt_pack *p, struct gt_span *out, uint64_t *calls)
{
    if (p->i >= p->n)
        return 0;
    const struct gt_span *a = &p->s[p->i], *longest = a;
    if (!p->px || span_dur(a) >= p->px) {
        *out = *a;
        *calls = 1;
        p->i++;
        return 1;
    }
    uint64_t pixel = pixel_of(p, a->start), end = a->end, count = 1;
    size_t j = p->i + 1;
    for (; j < p->n; j++) {
        const struct gt_span *b = &p->s[j];
        if (b->depth < a->depth)
            break;
        if (b->depth == a->depth) {
            if (span_dur(b) >= p->px || pixel_of(p, b->start) != pixel)
                break;
            if (span_dur(b) > span_dur(longest))
                longest = b;
        }
        if (b->end > end)
            end = b->end;
        count++;
    }
    if (count == 1) {
        *out = *a;
    } else {
        *out = (struct gt_span){.start = a->start, .end = end, .func = longest->func, .depth = a->depth,
                                .flags = (uint16_t)((longest->flags & GT_SPAN_C) | GT_SPAN_PACKED)};
    }
    *calls = count;
    p->i = j;
    return 1;
}

int gt_pack__stats(const struct gt_span *s, size_t n, uint32_t nfuncs, struct gt_fstat *out)
{
    /* the function open at each depth, -1: none (a gap in the nesting) */
    int64_t *stack = malloc((UINT16_MAX + 2) * sizeof(*stack));
    size_t top = 0;
    if (!stack)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t d = s[i].depth;
        uint32_t f = s[i].func < nfuncs ? s[i].func : nfuncs;
        int64_t du = (int64_t)span_dur(&s[i]);
        while (top > d) {
            top--;
            if (stack[top] >= 0)
                out[stack[top]].active--;
        }
        while (top < d)
            stack[top++] = -1;
        if (d > 0 && stack[d - 1] >= 0)
            out[stack[d - 1]].self -= du;
        out[f].calls++;
        out[f].self += du;
        if (!out[f].active)
            out[f].total += du;
        out[f].active++;
        stack[top++] = f;
    }
    free(stack);
    return 0;
}
