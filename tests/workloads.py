"""Small deterministic workloads with known ground truth."""

import os
import socket
import threading
import time


def pin_to_own_cpu(index):
    """Pin the calling thread to CPU `index` (mod the CPUs we may use), so that CPU-bound
    test threads do not preempt each other: then what is measured is the GIL, not CPU
    contention (the OS-state tests look at that separately)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            os.sched_setaffinity(threading.get_native_id(), {cpus[index % len(cpus)]})
    except (AttributeError, OSError):
        pass


def spin_on_cpu(index, seconds, barrier=None):
    pin_to_own_cpu(index)
    if barrier is not None:
        barrier.wait()
    return spin_for(seconds)


def cpu_pair(seconds, names=("cpu-a", "cpu-b")):
    """Two CPU-bound threads on distinct CPUs that start spinning together (a barrier),
    so neither runs alone for long: each should hold the GIL about half the time."""
    barrier = threading.Barrier(2)
    return run_threads([lambda: spin_on_cpu(0, seconds, barrier),
                        lambda: spin_on_cpu(1, seconds, barrier)], names=list(names))


def spin_for(seconds):
    """Pure-Python CPU work (holds the GIL) for about `seconds` of wall time."""
    deadline = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < deadline:
        for i in range(2000):
            x += i * i
    return x


def run_threads(targets, names=None):
    threads = [threading.Thread(target=fn, name=(names[i] if names else None))
               for i, fn in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return threads


def sleeper(naps=30, nap=0.01):
    for _ in range(naps):
        time.sleep(nap)


def socket_waiter(messages=20, gap=0.01):
    """Blocks in recv() while a peer thread sends a message every `gap` seconds."""
    a, b = socket.socketpair()

    def send():
        for _ in range(messages):
            time.sleep(gap)
            b.send(b"x")

    sender = threading.Thread(target=send, name="sender")
    sender.start()
    for _ in range(messages):
        a.recv(1)
    sender.join()
    a.close()
    b.close()
