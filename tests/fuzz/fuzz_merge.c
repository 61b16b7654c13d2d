/* SPDX-License-Identifier: MIT */
/* libFuzzer target: gt_merge__run on arbitrary per-thread call/GIL/scheduler streams.
 * The result must satisfy the invariants the emitters and the viewer rely on. */
#include <errno.h>
#include <stdint.h>

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_trace t;
    struct gt_result *r = NULL;

    fz_trace__decode(data, size, 0, &t);
    int err = gt_merge__run(&t.in, &r);
    if (t.in.t1 < t.in.t0 || t.in.t1 > INT64_MAX) {
        FZ_ASSERT(err == -EINVAL && !r);
    } else {
        FZ_ASSERT(err == 0 && r);
        fz_check_result(&t.in, r);
    }
    gt_result__free(r);
    fz_trace__free(&t);
    return 0;
}
