/* Notes: sentences for a trace's output, appended to a fixed buffer. */
#ifndef GT_NOTE_H
#define GT_NOTE_H

#include <stddef.h>

/**
 * gt_note__add() - append a printf-formatted sentence to the NUL-terminated note in
 * `buf` (of `len` bytes), after "; " when the note is not empty; cut at the buffer's end.
 */
void gt_note__add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
