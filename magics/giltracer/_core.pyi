# The C core (core/module.c) as Python sees it. The aliases and TypedDicts name the
# shapes of its values that only the core declares.
from types import CodeType
from typing import Any, Callable, Dict, List, Literal, Mapping, NamedTuple, NoReturn, Optional, Sequence, Tuple, TypedDict, Union, final

RELEASED_MESSAGE: str

SessionState = Literal["new", "recording", "stopped", "finished", "released"]
# The positional rows of Result's methods: struct sequences in the core (tuples with named
# fields; each field's doc is in core/py/module.c), declared here as the named tuples they
# behave as.
class Interval(NamedTuple):
    """gil_intervals(tid) and os_intervals(tid) rows."""
    start_ns: int
    end_ns: int
    state: int  # GIL: 0 released, 1 wait, 2 held; OS: 0 on-cpu, 1 preempted, 2 blocked

class Span(NamedTuple):
    """spans(tid) rows: one function call."""
    start_ns: int
    end_ns: int
    name: str
    depth: int
    flags: int

class ParkWaker(NamedTuple):
    """park_wakers(tid) rows: a free-threaded build's parked interval and its waker."""
    start_ns: int
    end_ns: int
    waker_tid: int

class Function(NamedTuple):
    """functions() rows, indexed by function id."""
    name: str
    file: str
    line: int
    is_c: bool

class States(NamedTuple):
    """Time per profile state."""
    running: int
    held_off_cpu: int
    waiting: int
    released: int
    unknown: int

class ProfileNode(NamedTuple):
    """profile() rows: call-tree nodes, parents first."""
    parent: int  # -1: the root
    func: int  # -1: none
    calls: int
    total_ns: int
    self_ns: int
    total_states: States
    self_states: States

class ProfileFunction(NamedTuple):
    """profile_functions() rows: per function."""
    func: int
    calls: int
    total_ns: int
    self_ns: int
    total_states: States
    self_states: States
    wait_caused_ns: int

class WhatIfThread(NamedTuple):
    """what_if() per-thread rows."""
    tid: int
    name: str
    measured_ns: float
    predicted_ns: float
    gil_wait_ns: float

class WhatIfFunction(NamedTuple):
    """what_if() per-function rows."""
    func: int
    wait_caused_ns: float
    saving_ns: float
    release_wall_ns: float

class WhatIf(NamedTuple):
    """what_if(): the no-GIL prediction."""
    cpus: int
    ft_factor: float
    measured_ns: float
    predicted_ns: float
    gil_replay_ns: float
    handoffs: int
    threads: List[WhatIfThread]
    functions: List[WhatIfFunction]
    assumptions: List[str]
    handoff_ns: float
    queue_handoffs: int
    waited: int
    event_ns: float
    events: float
    tracer_ns: float
    parallel_speed: float

# A row of Result.threads(), summary(), crosscheck() or blame(): the keyword arguments of
# giltracer.api's ThreadInfo, ThreadSummary and BlameRow. Those dataclasses are the one
# declaration of the fields; tests/test_core_rows.py holds the core's keys to them.
Row = Dict[str, Any]

class BuildInfo(TypedDict):
    clock: str
    tracer: str
    bpf_available: bool
    bpf_why: str
    free_threaded: bool

@final
class Result:
    backend: str
    backend_reason: str
    sched_status: str
    python: str
    title: str
    t0_ns: int
    t1_ns: int
    duration_ns: int
    event_count: int
    dropped_events: int
    gil_events: int
    gil_dropped: int
    sched_lost: int
    gil_aggregated: int
    calls_aggregated: int
    sched_aggregated: int
    gil_known: bool
    free_threaded: bool
    tracer_note: Optional[str]
    sampling: Optional[str]
    sampler: Optional[Dict[str, int]]
    tool_note: Optional[str]
    def threads(self) -> List[Row]: ...
    def summary(self) -> List[Row]: ...
    def tool(self) -> Dict[str, Any]: ...
    def blame(self) -> List[Row]: ...
    def crosscheck(self) -> Optional[List[Row]]: ...
    def spans(self, tid: int, /) -> List[Span]: ...
    def gil_intervals(self, tid: int, /) -> List[Interval]: ...
    def os_intervals(self, tid: int, /) -> List[Interval]: ...
    def park_wakers(self, tid: int, /) -> List[ParkWaker]: ...
    def functions(self) -> List[Function]: ...
    def profile(self, tid: Optional[int] = None, outer_frames: bool = False,
                all_threads: bool = False, /) -> List[ProfileNode]: ...
    def profile_functions(self, tid: Optional[int] = None, outer_frames: bool = False,
                          all_threads: bool = False, /) -> List[ProfileFunction]: ...
    def save(self, path: str, format: str, tab: Optional[str] = None,
             theme: Optional[str] = None, /) -> None: ...
    def text(self, top_n: int = 5, all_threads: bool = False, /) -> str: ...
    def payload(self) -> str: ...
    def what_if(self, cpus: int, ft_factor: float, top: int = 5, handoff_ns: float = 0.0,
                event_ns: float = 0.0, parallel_speed: float = 1.0, /) -> WhatIf: ...
    def set_what_if(self, cpus: int, ft_factor: float, handoff_ns: float = 0.0,
                    event_ns: float = 0.0, parallel_speed: float = 1.0, /) -> None: ...
    def set_lock_kinds(self, json: Optional[str], /) -> None: ...

@final
class Session:
    state: SessionState
    def __init__(self, *, functions: bool = True, c_calls: bool = True, max_depth: int = 0,
                 max_events: int = 0, include: Optional[Sequence[str]] = None,
                 exclude: Optional[Sequence[str]] = None, own_dir: Optional[str] = None,
                 gil: bool = True, sched: bool = True, backend: str = "auto",
                 follow_children: bool = False, crosscheck: bool = False,
                 sample_ns: int = 0, spool: Optional[str] = None,
                 children: Optional[str] = None, keep: str = "first") -> None: ...
    # (ident, native_id[, kind]) of each running thread; kind 1: the host's (background),
    # 2: giltracer's own (in no view, its cost Result.tool_note)
    def start(self, threads: Optional[Sequence[Union[Tuple[int, Optional[int]], Tuple[int, Optional[int], int]]]] = None, /) -> None: ...
    def stop(self) -> None: ...
    # the recording's facts so far (None when it does not record): elapsed_ns, calls,
    # gil_events, sched_events, dropped, budget_reached, threads: [{native_id, ident,
    # service, held_ns, wait_ns, released_ns, state}]
    def progress(self) -> Optional[Dict[str, Any]]: ...
    def spool(self, names: Optional[Callable[[], Dict[int, str]]] = None, every_ms: int = 0,
              ready: Any = None, /) -> int: ...
    def finish(self, names: Optional[Mapping[int, str]] = None, title: Optional[str] = None,
               files: Optional[Dict[str, str]] = None, /) -> Result: ...

def probe_info() -> Dict[str, Any]: ...
def build_info() -> BuildInfo: ...
def stop_active() -> bool: ...
def run_code(code: CodeType, globals: Dict[str, Any],
             locals: Optional[Mapping[str, Any]] = None, /) -> Any: ...
def call_untraced(f: Callable[..., Any], /, *args: Any) -> Any: ...
def watch_sigterm() -> bool: ...
def sigterm_default() -> bool: ...
def die_of_sigterm() -> NoReturn: ...
def _after_fork_child() -> None: ...
def _live_profiles() -> int: ...

# The lock-kind probe (free-threaded builds, root; magics/giltracer/lockkinds.py).
def _lock_kinds_open() -> Tuple[bool, str]: ...
def _lock_kinds_start() -> bool: ...
def _lock_kinds_stop() -> Tuple[Optional[List[Tuple[int, int, int, int, int, bytes]]], int]: ...
