"""The what-if model's settings and where each comes from: free-threading's single-thread
cost (``ft_factor``), each CPU's speed with all busy (``parallel_speed``), the tracer's own
cost per call event (``event_ns``) and a hand-off's wake-up cost (``handoff_us``).

Each is given, set in the environment (``GILTRACER_FT_FACTOR``, ``GILTRACER_PARALLEL_SPEED``,
``GILTRACER_EVENT_NS``), measured here now (calibrate.py) or the bench host's
(whatif_cost.py); Trace.what_if() and the viewer's What-if tab take them from here.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Optional, Tuple, Union


def _measured_cost(name: str, absent: float) -> float:
    """A free-threading cost measured on this machine (``giltracer.whatif_cost.<name>``,
    written by bench/), or `absent` where it was never measured."""
    import importlib
    try:
        mod = importlib.import_module(".whatif_cost", __package__)
    except ImportError:
        return absent
    return float(getattr(mod, name, absent))


def ft_factor_for(how: Union[None, float, str] = None) -> Tuple[float, str]:
    """Free-threading's single-thread cost factor (the what-if model's ``ft_factor``) and
    where it comes from. `how`: a number > 0 is taken as given; "measure" measures it on
    this machine now against this Python's free-threaded build
    (giltracer.calibrate.ft_factor; where that cannot be done, the bench host's, saying
    why); None: ``GILTRACER_FT_FACTOR`` decides ("measure" or a number), else the factor
    measured on the bench host (``FT_SINGLE_THREAD_FACTOR``; 1.0 where there is none)."""
    source = "given"
    if how is None:
        how = _env_setting("GILTRACER_FT_FACTOR", lambda v: 0 < v < float("inf"),
                           "a number > 0")
        source = "GILTRACER_FT_FACTOR"
    bench = _measured_cost("FT_SINGLE_THREAD_FACTOR", 0.0)
    if how == "measure":
        from . import calibrate
        v, why = calibrate.ft_factor()
        if v is not None:
            return v, why
        return (bench or 1.0), (f"{'measured on the bench host' if bench else 'taken as 1.0'} "
                                f"(measuring it here failed: {why})")
    if how is None:
        return (bench, "measured on the bench host (bench/ft_cost.py; it depends on the CPU: "
                "ft_factor=\"measure\" measures it here)") if bench else (
            1.0, "not measured for this build (taken as 1.0)")
    from math import isfinite
    if (isinstance(how, bool) or not isinstance(how, (int, float)) or not isfinite(how)
            or how <= 0):
        raise ValueError(f"ft_factor must be a finite number > 0 (free-threading's "
                         f"single-thread cost; 1.0 = no slowdown without the GIL) or "
                         f"\"measure\" (measure it here against this Python's free-threaded "
                         f"build), got {how!r}")
    return float(how), source


def default_handoff_us() -> float:
    """A hand-off's wake-up cost without the GIL, us: the measured one (``FT_HANDOFF_US``)
    where it exists, else 0."""
    return _measured_cost("FT_HANDOFF_US", 0.0)


def _env_setting(name: str, valid: Callable[[float], bool],
                 numbers: str) -> Union[None, float, str]:
    """A what-if default set in the environment variable `name`: "measure", a number that
    `valid` accepts, or None (unset, or neither: then with a warning naming `numbers`, the
    numbers it takes)."""
    from . import env as variables
    env = (variables.get(name) or "").strip()
    if not env or env == "measure":
        return env or None
    try:
        value = float(env)
    except ValueError:
        value = float("nan")
    if valid(value):
        return value
    warnings.warn(f"giltracer: {name}={env!r} is neither 'measure' nor {numbers}: ignored",
                  RuntimeWarning, stacklevel=4)
    return None


def parallel_speed_for(cpus: int, how: Union[None, float, str] = None) -> Tuple[float, str]:
    """Each CPU's speed with all `cpus` busy, against one alone (the what-if model's
    ``parallel_speed``), and where it comes from. `how`: a number in (0, 1] is taken as
    given; "measure" measures it on this machine now (giltracer.calibrate.parallel_speed);
    None: ``GILTRACER_PARALLEL_SPEED`` decides ("measure" or a number), else 1.0 (CPUs as
    fast together as alone)."""
    source = "given"
    if how is None:
        how = _env_setting("GILTRACER_PARALLEL_SPEED", lambda v: 0 < v <= 1, "a number in (0, 1]")
        if how is None:
            return 1.0, "assumed (CPUs as fast together as alone)"
        source = "GILTRACER_PARALLEL_SPEED"
    if how == "measure":
        from . import calibrate
        return calibrate.parallel_speed(cpus)
    from math import isfinite
    if (isinstance(how, bool) or not isinstance(how, (int, float)) or not isfinite(how)
            or not 0 < how <= 1):
        raise ValueError(f"parallel_speed must be a number in (0, 1] (each CPU's speed with "
                         f"all busy, against one alone; 1 = CPUs independent) or \"measure\" "
                         f"(measure it on this machine now), got {how!r}")
    return float(how), source


def default_event_ns(options: Dict[str, Any]) -> float:
    """The tracer's own cost per call event, ns, for a trace made with `options` (0 where
    calls were not traced: sampling, or functions=False): see event_ns_for()."""
    return event_ns_for(options)[0]


def event_ns_for(options: Dict[str, Any], how: Optional[str] = None) -> Tuple[float, str]:
    """The tracer's cost per call event for a trace made with `options`, ns, and where it
    comes from. `how`: "measure" measures it on this machine now (giltracer.calibrate);
    None: ``GILTRACER_EVENT_NS`` decides ("measure", or a number of ns), else the table
    measured on the bench host (``whatif_cost.TRACER_EVENT_NS``, by this interpreter's
    tracing API and whether C calls were traced; 0 where it has none)."""
    from .options import records_calls
    if not records_calls(options):
        return 0.0, "no call events traced"
    if how is None:
        env = _env_setting("GILTRACER_EVENT_NS", lambda ns: 0 <= ns < float("inf"),
                           "a number of ns >= 0")
        if isinstance(env, float):
            return env, "GILTRACER_EVENT_NS"
        how = env
    from . import calibrate
    c_calls = bool(options.get("c_calls", True))
    if how == "measure":
        return calibrate.event_ns(c_calls)
    table = calibrate.table_ns(c_calls)
    return (table, "measured on the bench host") if table is not None else (
        0.0, "not measured for this interpreter")
