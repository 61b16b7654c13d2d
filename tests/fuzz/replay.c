/* SPDX-License-Identifier: MIT */
/* Runs a fuzz target's LLVMFuzzerTestOneInput on every file of the given files or
 * directories, without libFuzzer: ctest replays the checked-in corpus (and every
 * crash the fuzzer found) with gcc, under ASan and under valgrind. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = p;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}


int main(int argc, char **argv)
{
    size_t runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]))
                return 1;
            runs++;
            continue;
        }
        struct dirent **ents = NULL;
        int n = scandir(argv[i], &ents, NULL, alphasort);
        if (n < 0) {
            perror(argv[i]);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            if (ents[k]->d_name[0] != '.') {
                snprintf(path, sizeof(path), "%s/%s", argv[i], ents[k]->d_name);
                if (run_file(path))
                    return 1;
                runs++;
            }
            free(ents[k]);
        }
        free(ents);
    }
    printf("replayed %zu inputs\n", runs);
    return runs ? 0 : 1; /* an empty corpus is a broken test */
}
