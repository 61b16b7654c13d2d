# The C core (core/module.c) as Python sees it. The aliases and TypedDicts name the
# shapes of its values that only the core declares.
from types import CodeType
from typing import Any, Callable, Dict, List, Literal, Mapping, NoReturn, Optional, Sequence, Tuple, TypedDict, Union, final

RELEASED_MESSAGE: str

SessionState = Literal["new", "recording", "stopped", "finished", "released"]
# (start_ns, end_ns, state): GIL 0 released, 1 wait, 2 held; OS 0 on-cpu, 1 preempted, 2 blocked
Interval = Tuple[int, int, int]
# (start_ns, end_ns, name, depth, flags)
Span = Tuple[int, int, str, int, int]
# (name, file, line, is_c), indexed by function id
Function = Tuple[str, str, int, bool]
# Time per profile state (running, held_off_cpu, waiting, released, unknown).
States = Tuple[int, int, int, int, int]
# (parent, func, calls, total_ns, self_ns, total_states, self_states); -1: the root
ProfileNode = Tuple[int, int, int, int, int, States, States]
# (func, calls, total_ns, self_ns, total_states, self_states, wait_caused_ns)
ProfileFunction = Tuple[int, int, int, int, States, States, int]

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
    def park_wakers(self, tid: int, /) -> List[Tuple[int, int, int]]: ...
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
                event_ns: float = 0.0, parallel_speed: float = 1.0, /) -> Tuple[
        int, float, float, float, float, int,
        List[Tuple[int, str, float, float, float]],  # tid, name, measured/predicted/wait ns
        List[Tuple[int, float, float, float]],  # func, wait caused, saving, release wall ns
        List[str], float, int, int,  # assumptions, handoff_ns, queue_handoffs, waited
        float, float, float, float]: ...  # event_ns, events, tracer_ns, parallel_speed
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
