"""Small deterministic workloads with known ground truth."""

import os
import socket
import threading
import time


def pin_to_own_cpu(index, native_id=None):
    """Pin the calling thread (or thread `native_id`) to CPU `index` (mod the CPUs we may
    use), so that CPU-bound test threads do not preempt each other: then what is measured
    is the GIL, not CPU contention (the OS-state tests look at that separately). A thread
    that pins itself holds the GIL while it migrates, which on a loaded machine can take
    milliseconds: pinning another thread does not stall it."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            tid = threading.get_native_id() if native_id is None else native_id
            os.sched_setaffinity(tid, {cpus[index % len(cpus)]})
    except (AttributeError, OSError):
        pass


def spin(n):
    """n additions in a Python loop: CPU-bound work that holds the GIL."""
    x = 0
    for i in range(n):
        x += i
    return x


def leaf(i):
    return i


def call_loop(n):
    """n Python calls of leaf(): two call events each (its start and its end)."""
    for i in range(n):
        leaf(i)


def spin_on_cpu(index, seconds, barrier=None):
    pin_to_own_cpu(index)
    if barrier is not None:
        barrier.wait()
    return spin_for(seconds)


MIN_TURNS = 8  # each of cpu_pair's threads sees the other run at least this often


def cpu_pair(seconds, names=("cpu-a", "cpu-b")):
    """Two CPU-bound threads on distinct CPUs that start spinning together (a barrier),
    so neither runs alone for long: each should hold the GIL about half the time.
    Each spins `seconds`, and on, up to 10 x as long, until it has seen the other run
    MIN_TURNS times (GIL hand-offs: a loaded machine gives fewer per second).
    Each returned thread has `spin_ns`: (start, end) of its spinning, CLOCK_MONOTONIC ns
    (giltracer's clock); the wait at the barrier before it releases the GIL."""
    barrier = threading.Barrier(2)
    spans = {}
    progress = [0, 0]

    def spin(index):
        pin_to_own_cpu(index)
        barrier.wait()
        start = time.monotonic_ns()
        spin_for(seconds, turns_of=(progress, index))
        spans[index] = (start, time.monotonic_ns())

    threads = run_threads([lambda: spin(0), lambda: spin(1)], names=list(names))
    for i, th in enumerate(threads):
        th.spin_ns = spans.get(i)
    return threads


def gil_shares(t, tid, window):
    """{state: % of `window` (start, end ns)} from the thread's GIL intervals."""
    lo, hi = window
    ns = {"held": 0, "wait": 0, "released": 0}
    for a, b, state in t.gil_intervals(tid):
        ns[state] += max(0, min(b, hi) - max(a, lo))
    return {k: 100.0 * v / (hi - lo) for k, v in ns.items()}


def spin_for(seconds, turns_of=None):
    """Pure-Python CPU work (holds the GIL) for about `seconds` of wall time. With
    `turns_of` = (progress, index) (a list shared by two spinners, this one's slot): on
    after `seconds`, up to 10 x as long, until it has seen the other advance MIN_TURNS times."""
    now = time.perf_counter()
    deadline, last_chance = now + seconds, now + 10 * seconds
    turns, x = 0, 0
    if turns_of:
        progress, index = turns_of
        seen = progress[1 - index]
    while now < deadline or (turns_of and turns < MIN_TURNS and now < last_chance):
        for i in range(2000):
            x += i * i
        if turns_of:
            progress[index] += 1
            if progress[1 - index] != seen:
                seen = progress[1 - index]
                turns += 1
        now = time.perf_counter()
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


def overlap_ns(a, b):
    """Total overlap of two lists of (start, end) intervals."""
    return sum(max(0, min(e0, e1) - max(s0, s1)) for s0, e0 in a for s1, e1 in b)


def held_while_preempted(t, tids, states=("held",)):
    """Fraction of the threads' traced life during which one of them was in one of the GIL
    `states` while the OS kept it off a CPU although it was runnable (0 when OS states are
    unknown)."""
    stalled = wall = 0
    for row in t.summary():
        if row.tid not in tids:
            continue
        wall += row.wall_ns
        stalled += preempted_ns(t, row.tid, states)
    return stalled / wall if wall else 0.0


def preempted_ns(t, tid, states, window=None):
    """ns during which thread `tid` was in one of the GIL `states` (within `window`, if
    given) while the OS kept it runnable but off a CPU."""
    lo, hi = window or (0, 1 << 63)
    in_states = [(max(a, lo), min(b, hi)) for a, b, s in t.gil_intervals(tid) if s in states]
    preempted = [(a, b) for a, b, s in t.os_intervals(tid) if s == "preempted"]
    return overlap_ns(in_states, preempted)


def traced_cpu_pair(seconds=0.6, names=("cpu-a", "cpu-b"), attempts=4, **options):
    """cpu_pair() inside giltracer.trace(**options), measured again (up to `attempts`
    runs) when other load on the machine disturbed it: a pinned thread that the OS
    preempts while it holds the GIL stalls its partner for the whole preemption, which
    says nothing about the GIL's own hand-offs. Returns the least disturbed run as
    (trace, threads)."""
    import giltracer

    best = None
    for _ in range(attempts):
        with giltracer.trace(**options) as t:
            threads = cpu_pair(seconds, names=names)
        # Held while preempted stalls the partner; released while preempted (between a
        # forced switch and the next take) shows as neither holding nor waiting.
        disturbed = held_while_preempted(t, {th.native_id for th in threads}, ("held", "released"))
        if best is None or disturbed < best[0]:
            best = (disturbed, t, threads)
        if disturbed <= 0.05:
            break
    return best[1], best[2]


def park_lock_trace(threads=3, rounds=60, work=3000, parked_threads=2, tries=5):
    """A trace of `threads` threads (app-0, ...) each taking one shared lock `rounds`
    times around a short loop, with the park probe forced on (GILTRACER_TEST_PARK: the
    free-threaded path on any build), so that they park on one another. On a GIL build a
    thread parks only when the GIL switches away from the lock's holder while it holds
    it: a barrier lines the threads up, and the run is made again (up to `tries` times)
    until at least `parked_threads` of them parked."""
    import giltracer

    def parked(t):
        return sum(1 for r in t.summary() if r.name.startswith("app-") and r.parked_ns > 0)

    os.environ["GILTRACER_TEST_PARK"] = "1"
    try:
        for _ in range(tries):
            lock, go = threading.Lock(), threading.Barrier(threads)

            def body():
                go.wait()
                for _ in range(rounds):
                    with lock:
                        spin(work)

            with giltracer.trace(sched=False) as t:
                run_threads([body] * threads, [f"app-{i}" for i in range(threads)])
            if parked(t) >= parked_threads:
                break
    finally:
        del os.environ["GILTRACER_TEST_PARK"]
    assert t.free_threaded
    assert parked(t) >= parked_threads, t.summary()
    return t


def traced_producer_consumer(n, produce_spins, consume_spins):
    """A trace (default options) of a producer thread putting n items on a queue.Queue,
    spinning `produce_spins` before each put, and a consumer getting them, spinning
    `consume_spins` after each get, until the producer's closing None."""
    import queue

    import giltracer

    q = queue.Queue()

    def producer():
        for i in range(n):
            spin(produce_spins)
            q.put(i)
        q.put(None)

    def consumer():
        while q.get() is not None:
            spin(consume_spins)

    with giltracer.trace() as t:
        run_threads([producer, consumer], ["producer", "consumer"])
    return t

