/* gt_jsmin OUT IN...: the files IN, joined in order, minified into OUT (the build's step
 * for the viewer's script; core/jsmin/jsmin.h). */
#include "jsmin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    char *src = NULL, *out;
    size_t n = 0, len = 0, at = 0;

    if (argc < 3) {
        fprintf(stderr, "usage: %s OUT IN...\n", argv[0]);
        return 2;
    }
    for (int a = 2; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            perror(argv[a]);
            return 1;
        }
        char buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
            char *p = realloc(src, n + got);
            if (!p) {
                fclose(f);
                return 1;
            }
            src = p;
            memcpy(src + n, buf, got);
            n += got;
        }
        if (ferror(f)) {
            perror(argv[a]);
            fclose(f);
            return 1;
        }
        fclose(f);
    }
    out = malloc(n ? n : 1);
    if (!out)
        return 1;
    if (gt_jsmin(src, n, out, &len, &at)) {
        size_t line = 1;
        for (size_t k = 0; k < at; k++)
            line += src[k] == '\n';
        fprintf(stderr, "%s: unterminated string, comment or regex, or a ${ in a template, at line %zu "
                        "of the joined script\n", argv[0], line);
        return 1;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(out, 1, len, f) != len || fclose(f)) {
        perror(argv[1]);
        return 1;
    }
    free(src);
    free(out);
    return 0;
}
