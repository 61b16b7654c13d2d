"""The What if prediction's memory (a long cell's RSS must not grow with it): it sweeps each
thread's spans as its queries reach them instead of keeping two pieces per span, so its
peak stays a few MB over the result's whatever the number of calls (was ~64 bytes a
span: 166 MB of a 60 s cell's 358 MB peak)."""

import os
import threading

import pytest

import giltracer
from conftest import needs_gil
from workloads import call_loop

pytestmark = [needs_gil,  # What if re-schedules GIL intervals
              pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's clear_refs")]


def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS starts again from the current RSS


def test_what_if_keeps_no_piece_per_span():
    with giltracer.trace(backend="hooks", c_calls=False) as t:
        ths = [threading.Thread(target=call_loop, args=(400_000,), name=f"w{k}") for k in range(2)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    spans = sum(len(t.spans(f"w{k}")) for k in range(2))
    assert spans >= 800_000
    t.summary()
    reset_hwm()
    before = hwm()
    w = t.what_if(cpus=2, ft_factor=1.0)
    grown = hwm() - before
    assert w.predicted_wall_s > 0
    # two 32-byte pieces a span would be 51 MB here
    print(f"what_if: peak RSS +{grown / 2**20:.1f} MB for {spans:,} spans")
    assert grown < 8 * 2**20, f"what_if grew the peak RSS by {grown / 2**20:.1f} MB for {spans:,} spans"
