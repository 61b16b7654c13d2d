"""Work for the lessons' workers that cannot see a notebook's functions: a task run in another
interpreter (lesson 11), or in a process started by 'spawn' or 'forkserver' (the default on
Linux since 3.14), is imported from a module; a function defined in a notebook cell cannot be.
"""

import time
from typing import Tuple


def count(rounds: int) -> Tuple[int, int, int]:
    """A fixed amount of pure-Python work. Returns when it started and ended (time.monotonic_ns,
    the clock of giltracer's traces) and the CPU time of the thread that ran it, in ns."""
    began, cpu = time.monotonic_ns(), time.thread_time_ns()
    n = 0
    for _ in range(rounds):
        for i in range(1000):
            n += i
    return began, time.monotonic_ns(), time.thread_time_ns() - cpu
