"""Workloads for the giltracer benchmarks.

Every workload is a zero-argument callable. Inputs are built by ``setup()`` before
any timed region, and sizes are fixed so the number of call events is the same
from run to run (and from one interpreter to another, apart from C calls that an
interpreter version inlines or not).

Tracer overhead:
  fib       recursive fib(25)                              Python calls, deep
  method    1e6 calls of a small method                    Python calls, flat
  builtins  1e6 iterations of len / isinstance / append     C calls only
  threads2  two threads, each running `method`             per-thread buffers
  mixed     json dumps/loads, re, sort with a key, small   a realistic mix
            classes and properties
GIL probe:
  churn2    two threads, each os.fstat(0) in a loop: every call releases and
            re-acquires the GIL
  churn1    the same in one thread (no contention: the probe's bare cost)
  cpu2      two threads running a pure-Python loop (the GIL changes hands every
            switch interval)
"""

from __future__ import annotations

import json
import os
import random
import re
import threading

# ------------------------------------------------------------------------- fib
FIB_N = 25


def _fib(n):
    if n < 2:
        return n
    return _fib(n - 1) + _fib(n - 2)


def fib():
    return _fib(FIB_N)


# ---------------------------------------------------------------------- method
METHOD_CALLS = 1_000_000


class Accumulator:
    __slots__ = ("total",)

    def __init__(self):
        self.total = 0

    def add(self, value):
        self.total += value
        return self.total


def method():
    acc = Accumulator()
    for _ in range(METHOD_CALLS):
        acc.add(1)
    return acc.total


# -------------------------------------------------------------------- builtins
BUILTIN_ITERS = 1_000_000


def builtins():
    probe = (1, 2, 3, 4)
    out = []
    n = 0
    for i in range(BUILTIN_ITERS):
        n += len(probe)                 # builtin function
        if isinstance(i, int):          # builtin function
            out.append(i)               # method of a builtin type
    return n + len(out)


# -------------------------------------------------------------------- threads2
def threads2():
    workers = [threading.Thread(target=method, name=f"method-{k}") for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


# ----------------------------------------------------------------------- mixed
_WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
          "omicron pi rho sigma tau upsilon phi chi psi omega").split()
_RECORDS: list = []
_EMAIL = re.compile(r"([a-z]+)\.([a-z]+)@([a-z]+)\.example")
_TOKEN = re.compile(r"[a-z]{4,}")


class Order:
    __slots__ = ("oid", "customer", "lines", "status")

    def __init__(self, oid, customer, lines, status):
        self.oid = oid
        self.customer = customer
        self.lines = lines
        self.status = status

    @property
    def amount(self):
        return sum(line.total() for line in self.lines)

    @classmethod
    def from_dict(cls, d):
        return cls(d["id"], d["customer"], [Line(**x) for x in d["lines"]], d["status"])


class Line:
    __slots__ = ("sku", "qty", "price")

    def __init__(self, sku, qty, price):
        self.sku = sku
        self.qty = qty
        self.price = price

    def total(self):
        return self.qty * self.price


def _setup_mixed(n=3000):
    rnd = random.Random(1234)
    _RECORDS.clear()
    for i in range(n):
        a, b, c = rnd.sample(_WORDS, 3)
        _RECORDS.append({
            "id": i,
            "customer": f"{a}.{b}@{c}.example",
            "note": " ".join(rnd.choice(_WORDS) for _ in range(8)),
            "status": rnd.choice(("new", "paid", "shipped", "returned")),
            "lines": [{"sku": f"{rnd.choice(_WORDS)}-{rnd.randrange(100)}",
                       "qty": rnd.randrange(1, 5), "price": round(rnd.uniform(1, 90), 2)}
                      for _ in range(rnd.randrange(1, 4))],
        })


def mixed():
    blob = json.dumps(_RECORDS)
    docs = json.loads(blob)
    orders = []
    domains: dict = {}
    words: dict = {}
    for d in docs:
        m = _EMAIL.match(d["customer"])
        if m:
            domains[m.group(3)] = domains.get(m.group(3), 0) + 1
        for w in _TOKEN.findall(d["note"]):
            words[w] = words.get(w, 0) + 1
        orders.append(Order.from_dict(d))
    orders.sort(key=lambda o: (o.status, -o.amount))
    by_status: dict = {}
    for o in orders:
        by_status.setdefault(o.status, []).append(o.oid)
    report = {s: {"count": len(ids), "first": ids[:5]} for s, ids in sorted(by_status.items())}
    top = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    return len(json.dumps({"report": report, "top": top, "domains": domains},
                          sort_keys=True, indent=2))


# ---------------------------------------------------------------- GIL workloads
CHURN_ITERS = 200_000
CPU_ITERS = 3_000_000


def _churn(n):
    fstat = os.fstat
    for _ in range(n):
        fstat(0)


def _spin(n):
    x = 0
    for i in range(n):
        x += i ^ 3
    return x


def _two(target, n):
    workers = [threading.Thread(target=target, args=(n,), name=f"worker-{k}") for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def churn2():
    _two(_churn, CHURN_ITERS)


def churn1():
    _churn(CHURN_ITERS)


def cpu2():
    _two(_spin, CPU_ITERS)


def scale(quick: bool) -> None:
    """--quick makes the GIL workloads smaller (the overhead workloads keep their
    sizes so event counts stay comparable)."""
    global CHURN_ITERS, CPU_ITERS
    if quick:
        CHURN_ITERS = 100_000
        CPU_ITERS = 1_500_000


WORKLOADS = {
    "fib": (fib, None),
    "method": (method, None),
    "builtins": (builtins, None),
    "threads2": (threads2, None),
    "mixed": (mixed, _setup_mixed),
    "churn2": (churn2, None),
    "churn1": (churn1, None),
    "cpu2": (cpu2, None),
}
OVERHEAD_WORKLOADS = ("fib", "method", "builtins", "threads2", "mixed")
GIL_WORKLOADS = ("churn2", "churn1", "cpu2")
