/* A small JavaScript minifier for the viewer's own script, run at build time
 * (core/viewer/README.md): comments and inessential whitespace go; strings, template
 * literals and regular expression literals are copied byte for byte. A line break stays
 * wherever automatic semicolon insertion could depend on it. It knows our code's subset,
 * not all of JavaScript: a template literal with a substitution (`${`) is refused. */
#ifndef GT_JSMIN_H
#define GT_JSMIN_H

#include <stddef.h>

/* Minify js[0..n) into out (room for n bytes: the result is never longer); *out_len is
 * its length. Returns 0, or -EINVAL for an unterminated string, comment or regular
 * expression, or a template substitution (at *err_at, the offset where it starts). */
int gt_jsmin(const char *js, size_t n, char *out, size_t *out_len, size_t *err_at);

#endif
