"""Two CPU-bound threads and one sleeping thread: the CPU-bound threads cannot run
Python at the same time (they take turns holding the GIL), while the sleeper
releases the GIL and only waits for it briefly each time it wakes up."""

import threading
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def compute(start, seconds=0.25):
    start.wait()  # both CPU-bound threads begin together
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        fib(15)


def sleeper(naps=20):
    for _ in range(naps):
        time.sleep(0.01)


def main():
    start = threading.Barrier(2)
    threads = [threading.Thread(target=compute, args=(start,), name=f"cpu-{i}") for i in range(2)]
    threads.append(threading.Thread(target=sleeper, name="sleeper"))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
