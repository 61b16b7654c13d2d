"""The environment variables giltracer reads, each declared once.

``VARIABLES`` is the one table: its name, what it means, whether a user sets it (USER),
giltracer sets it for its own processes (INTERNAL), or only the tests or the bench do
(TEST, BENCH: switches on production paths, never needed in use), and who reads it.
giltracer's Python code reads them through get(); the C core and the start-up hook
(_giltracer_boot, which runs before giltracer can be imported) read their own, named here
(tests/test_reference.py holds every ``GILTRACER_*`` in the sources to this table, and
docs/reference.md lists the users' ones).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

USER = "user setting"
INTERNAL = "set by giltracer"
TEST = "test switch"
BENCH = "bench switch"


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str  # USER, INTERNAL, TEST or BENCH
    meaning: str
    read_by: str  # the module (Python) or the file (C) that reads it


VARIABLES: Tuple[Variable, ...] = (
    Variable("GILTRACER_EVENT_NS", USER, "What-if: the tracer's own cost per call event, "
             "ns, or `measure` (measured here once); default: the bench host's table",
             "giltracer.whatif_policy"),
    Variable("GILTRACER_FT_FACTOR", USER, "What-if: the free-threaded build's speed factor, a "
             "number > 0, or `measure` (with GILTRACER_FT_PYTHON, about 2 s once)",
             "giltracer.whatif_policy"),
    Variable("GILTRACER_PARALLEL_SPEED", USER, "What-if: each CPU's speed with all busy "
             "against one alone, a number in (0, 1], or `measure` (about 3.5 s once); "
             "default 1.0", "giltracer.whatif_policy"),
    Variable("GILTRACER_FT_PYTHON", USER, "the free-threaded interpreter that measures the "
             "free-threaded factor (default: python3.Nt on PATH or beside this one)",
             "giltracer.calibrate"),
    Variable("GILTRACER_LOCK_KINDS", USER, "`0`: free-threaded builds label no park with "
             "its lock's kind (no uprobe on the parking lot)", "giltracer.lockkinds"),
    Variable("GILTRACER_TLS", USER, "`dynamic`: load the core built for dynamic TLS from "
             "the start, leaving the static TLS surplus to a library loaded later",
             "_giltracer_boot"),
    Variable("GILTRACER_CLOCK", USER, "`monotonic`: timestamps from clock_gettime instead "
             "of the TSC", "core/support/gt_clock.c"),
    Variable("GILTRACER_SCHED_RING_KB", USER, "the scheduler probe's ring per thread, KiB "
             "(default 16)", "core/probes/sched/sched.c"),
    Variable("GILTRACER_SCHED_RING_MAX_KB", USER, "the largest ring a busy thread's grows to, "
             "KiB (default 256)", "core/probes/sched/sched.c"),
    Variable("GILTRACER_SCHED_GROWN_KB", USER, "all rings' growth together at most, KiB "
             "(default 1024)", "core/probes/sched/sched.c"),
    Variable("GILTRACER_CHILD", INTERNAL, "a trace that follows children: its session "
             "folder, token and options, for the child processes it starts",
             "giltracer._child (sets it), _giltracer_boot"),
    Variable("GILTRACER_BPF_LINGER_MS", TEST, "how long the bpf probe stays attached "
             "after a session, for the next one, ms", "core/py/session.c"),
    Variable("GILTRACER_SCHED_PERIOD_MS", TEST, "a longer drain period of the scheduler "
             "probe, so a test can overflow a ring", "core/probes/sched/sched.c"),
    Variable("GILTRACER_TEST_FAIL_CALIBRATIONS", TEST, "the next N clock calibrations fail",
             "core/py/session.c"),
    Variable("GILTRACER_TEST_PARK", TEST, "`1`: a GIL build records its lock waits as a "
             "free-threaded build's parks", "core/py/session.c"),
    Variable("GILTRACER_REQUIRE", TEST, "what the run installed (a comma list, e.g. "
             "`notebooks`): the tests that need it fail instead of skipping", "tests"),
    Variable("GILTRACER_TAKE_RECORD", BENCH, "`signal`: the hooks record a GIL take at the "
             "signal, not at the mutex's unlock (bench/churn_cost.py's comparison)",
             "core/probes/hooks/gilhook.c"),
    Variable("GILTRACER_HOOKS_FLOOR", BENCH, "`1`: the hooks record nothing (the bench's "
             "floor)", "core/probes/hooks/gilhook.c"),
    Variable("GILTRACER_BENCH_CACHE", BENCH, "the bench's cache folder", "bench"),
)

BY_NAME: Dict[str, Variable] = {v.name: v for v in VARIABLES}


def get(name: str, default: Optional[str] = None) -> Optional[str]:
    """The value of the table's variable `name` in the environment, or `default`."""
    assert name in BY_NAME, f"{name} is not in giltracer.env.VARIABLES"
    return os.environ.get(name, default)
