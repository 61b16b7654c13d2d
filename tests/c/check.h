/* SPDX-License-Identifier: MIT */
/* The C unit tests' check macro: counts passed and failed checks; a failure prints where
 * and why (printf-style message) and the test goes on. Each test's main() reports
 * `passed`/`failed` and exits non-zero when anything failed. */
#ifndef GT_TEST_CHECK_H
#define GT_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

#endif /* GT_TEST_CHECK_H */
