/* SPDX-License-Identifier: MIT */
/* The loaders' messages of why a probe cannot run: why_fmt() composes one into the
 * including file's static `why_buf` (opening runs once per process, and the caller copies
 * the message before anything opens again); a long path is cut, never overflows. */
#ifndef GT_BPF_WHY_H
#define GT_BPF_WHY_H
#include <stdarg.h>
#include <stdio.h>

__attribute__((format(printf, 3, 4))) static inline const char *
why_into(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return buf;
}

#define why_fmt(...) why_into(why_buf, sizeof(why_buf), __VA_ARGS__)

#endif
