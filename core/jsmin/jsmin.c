#include "jsmin.h"

#include <errno.h>
#include <string.h>

static int is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '\\' || c >= 0x80;
}

/* Words after which a '/' starts a regular expression, not a division. */
static int regex_may_follow(const char *w, size_t n)
{
    static const char *const kw[] = {"return", "typeof", "instanceof", "in", "of", "new", "delete",
                                     "void", "throw", "case", "do", "else", "yield", "await"};
    for (size_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
        if (strlen(kw[i]) == n && !memcmp(kw[i], w, n))
            return 1;
    return 0;
}

/* A line break before c, after last, can go: neither side can end a statement there. */
static int break_can_go(char last, char c)
{
    return (last && strchr("{([,;:=?&|<>*%!~^", last)) || strchr(").,;:?]}", c);
}

/* Two tokens that would read as one without a space between them. */
static int need_space(char last, char c)
{
    return (is_word((unsigned char)last) && is_word((unsigned char)c)) || (last == '+' && c == '+') ||
           (last == '-' && c == '-') || (last == '/' && (c == '/' || c == '*'));
}

/* A block comment from js[*i] to past its end; *ws becomes 2 if it spans a line break,
 * else at least 1. -EINVAL: unterminated. */
static int skip_block_comment(const char *js, size_t n, size_t *i, int *ws)
{
    const char *e = NULL;
    for (size_t k = *i + 2; k + 1 < n; k++)
        if (js[k] == '*' && js[k + 1] == '/') {
            e = js + k;
            break;
        }
    if (!e)
        return -EINVAL;
    if (memchr(js + *i, '\n', (size_t)(e - (js + *i))))
        *ws = 2;
    else if (!*ws)
        *ws = 1;
    *i = (size_t)(e - js) + 2;
    return 0;
}

/* A string literal at js[*i] ('...', "..." or a template without substitutions) copied
 * as it is. -EINVAL: unterminated, or a template with ${. */
static int copy_string(const char *js, size_t n, size_t *i, char *out, size_t *o)
{
    unsigned char c = (unsigned char)js[*i];
    out[(*o)++] = js[(*i)++];
    for (;;) {
        if (*i >= n || (c != '`' && js[*i] == '\n'))
            return -EINVAL;
        if (c == '`' && js[*i] == '$' && *i + 1 < n && js[*i + 1] == '{')
            return -EINVAL;
        char d = js[*i];
        out[(*o)++] = js[(*i)++];
        if (d == '\\') {
            if (*i >= n)
                return -EINVAL;
            out[(*o)++] = js[(*i)++];
        } else if ((unsigned char)d == c) {
            return 0;
        }
    }
}

/* A regular expression literal at js[*i] copied as it is (a '/' in a class does not
 * end it). -EINVAL: unterminated on its line. */
static int copy_regex(const char *js, size_t n, size_t *i, char *out, size_t *o)
{
    int in_class = 0;
    out[(*o)++] = js[(*i)++];
    for (;;) {
        if (*i >= n || js[*i] == '\n')
            return -EINVAL;
        char d = js[*i];
        out[(*o)++] = js[(*i)++];
        if (d == '\\') {
            if (*i >= n || js[*i] == '\n')
                return -EINVAL;
            out[(*o)++] = js[(*i)++];
        } else if (d == '[') {
            in_class = 1;
        } else if (d == ']') {
            in_class = 0;
        } else if (d == '/' && !in_class) {
            return 0;
        }
    }
}

int gt_jsmin(const char *js, size_t n, char *out, size_t *out_len, size_t *err_at)
{
    size_t i = 0, o = 0, start = 0;
    int ws = 0;      /* whitespace seen since the last token: 1 a space, 2 a line break */
    int operand = 0; /* the last token ends an operand: a '/' after it divides */
    char last = 0;   /* the last byte written */

    while (i < n) {
        unsigned char c = (unsigned char)js[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
            if (c == '\n')
                ws = 2;
            else if (!ws)
                ws = 1;
            i++;
            continue;
        }
        start = i;
        if (c == '/' && i + 1 < n && js[i + 1] == '/') {
            while (i < n && js[i] != '\n')
                i++;
            if (!ws)
                ws = 1;
            continue;
        }
        if (c == '/' && i + 1 < n && js[i + 1] == '*') {
            if (skip_block_comment(js, n, &i, &ws) < 0)
                goto bad;
            continue;
        }
        /* a token begins: the whitespace before it first */
        if (o && ws == 2 && !break_can_go(last, (char)c))
            out[o++] = '\n';
        else if (o && ws && need_space(last, (char)c))
            out[o++] = ' ';
        ws = 0;
        if (c == '\'' || c == '"' || c == '`') {
            if (copy_string(js, n, &i, out, &o) < 0)
                goto bad;
            operand = 1;
        } else if (c == '/' && !operand) { /* a regular expression literal */
            if (copy_regex(js, n, &i, out, &o) < 0)
                goto bad;
            operand = 1;
        } else if (is_word(c)) {
            size_t w = o;
            while (i < n && is_word((unsigned char)js[i])) {
                if (js[i] == '\\' && i + 1 < n) /* \uXXXX in a name */
                    out[o++] = js[i++];
                out[o++] = js[i++];
            }
            operand = !regex_may_follow(out + w, o - w);
        } else {
            out[o++] = js[i++];
            operand = c == ')' || c == ']';
        }
        last = out[o - 1];
    }
    if (o && out[o - 1] != '\n' && ws == 2)
        out[o++] = '\n';
    *out_len = o;
    return 0;
bad:
    if (err_at)
        *err_at = start;
    return -EINVAL;
}
