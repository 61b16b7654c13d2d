"""ThreadSanitizer reports that concern giltracer's own code (make test-tsan-ft).

The interpreter is not instrumented, so TSan also reports CPython's internal hand-offs
(mimalloc pages, biased refcount queues) whose synchronisation it cannot see. A report
counts here when one of its accesses is made by our code: the first frame of that access
outside the sanitizer runtime is in a core/ source file.

    python tools/tsan_ours.py LOG...   -> prints those reports; exit 1 if any
"""

import re
import sys

ACCESS = re.compile(r"^  (Previous )?(atomic )?(write|read) of size", re.I)
FRAME = re.compile(r"^\s+#\d+ (\S+) (\S+)")


def ours(report):
    lines = report.splitlines()
    for i, line in enumerate(lines):
        if not ACCESS.match(line):
            continue
        for frame in lines[i + 1:]:
            m = FRAME.match(frame)
            if not m:
                break
            if "libsanitizer" in m.group(2):
                continue
            if "/core/" in m.group(2):
                return True
            break
    return False


def main(paths):
    found = 0
    for path in paths:
        text = open(path, errors="replace").read()
        for report in text.split("==================\n"):
            if "WARNING: ThreadSanitizer" in report and ours(report):
                found += 1
                print(report)
    print(f"tsan_ours: {found} report(s) in giltracer's code", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
