#include "note.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void gt_note__add(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n && n + 2 < len) {
        memcpy(buf + n, "; ", 3);
        n += 2;
    }
    if (n + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}
