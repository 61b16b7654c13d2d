"""Two CPU-bound threads and one sleeping thread: only one CPU-bound thread can
run Python at a time (they take turns holding the GIL), while the sleeper
releases the GIL and never waits for it."""

import threading
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def compute(rounds=6):
    for _ in range(rounds):
        fib(20)


def sleeper(naps=20):
    for _ in range(naps):
        time.sleep(0.01)


def main():
    threads = [threading.Thread(target=compute, name=f"cpu-{i}") for i in range(2)]
    threads.append(threading.Thread(target=sleeper, name="sleeper"))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
