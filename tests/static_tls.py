"""Fills what is left of glibc's static TLS surplus, as native extensions loaded before
giltracer may have (tests/test_static_tls.py and bench/tls_cost.py)."""
import ctypes
import os
import shutil
import subprocess


def fill_static_tls(folder):
    """Loads tiny libraries of initial-exec thread-locals built in `folder`: copies of each
    size (a copy is a new file: dlopen() loads a path once) until one no longer loads,
    largest first, down to 8 bytes. What is left then is below 8 bytes; the core needs 56.
    Returns (the loaded libraries, to keep them loaded; the bytes used)."""
    loaded, used = [], 0
    for size in (1024, 256, 64, 8):
        src = os.path.join(folder, "ie%d.c" % size)
        with open(src, "w") as f:
            f.write("__thread long gt_fill[%d] __attribute__((tls_model(\"initial-exec\")));\n"
                    "long *gt_fill_get(void) { return gt_fill; }\n" % (size // 8))
        lib = src[:-2] + ".so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], check=True)
        for i in range(4096 // size + 1):
            copy = "%s.%d.so" % (lib[:-3], i)
            shutil.copyfile(lib, copy)
            try:
                loaded.append(ctypes.CDLL(copy))
            except OSError as e:
                if "static TLS" not in str(e):
                    raise
                break
            used += size
    return loaded, used
