#!/usr/bin/env python3
"""benchmarks/torch_gemm.py — PyTorch's float matrix product (torch.mm: MKL in PyPI's CPU wheels) over
the products of benchmarks/gemm.cpp, the peer column of docs/performance.md's GEMM tables.

Each product m×k×n is timed as bench_gemm times it: C (m x n) = A · B with A stored transposed
("aT", a k x m tensor viewed through .t()) or B ("bT") where the row says so, into a preallocated C.
Prints one JSON object per (product, threads): the median GFLOP/s of the repetitions (each at least
--min-time seconds), and one object that names the build (PyTorch version, its BLAS, the CPU).

    python3 benchmarks/torch_gemm.py --threads 1 2 --repetitions 5
"""
import argparse
import json
import platform
import statistics
import time

import torch

# m, k, n, a stored transposed, b stored transposed: the rows of benchmarks/gemm.cpp
PRODUCTS = [
    (1024, 1024, 1024, False, False),
    (128, 784, 500, False, False), (128, 500, 10, False, False), (784, 128, 500, True, False),
    (500, 128, 10, True, False), (128, 10, 500, False, True),
    (2616, 25, 32, False, False), (25, 2616, 32, True, False),
    (72, 800, 64, False, False), (800, 72, 64, True, False), (72, 64, 800, False, True),
    (128, 1024, 500, False, False), (1024, 128, 500, True, False), (128, 500, 1024, False, True),
]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def rate(m, k, n, ta, tb, repetitions, min_time):
    g = torch.Generator().manual_seed(1)
    a = torch.rand(k, m, generator=g).t() if ta else torch.rand(m, k, generator=g)
    b = torch.rand(n, k, generator=g).t() if tb else torch.rand(k, n, generator=g)
    c = torch.empty(m, n)
    torch.mm(a, b, out=c)
    rates = []
    for _ in range(repetitions):
        calls, start = 0, time.perf_counter()
        while True:
            torch.mm(a, b, out=c)
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        rates.append(2.0 * m * k * n * calls / elapsed * 1e-9)
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.2)
    args = p.parse_args()
    config = torch.__config__.show()
    print(json.dumps({"torch": torch.__version__, "mkl": torch.backends.mkl.is_available(),
                      "blas": "MKL" if "Math Kernel Library" in config else "other", "cpu": cpu_name()}), flush=True)
    for threads in args.threads:
        torch.set_num_threads(threads)
        for m, k, n, ta, tb in PRODUCTS:
            name = f"{m}x{k}x{n}" + (" aT" if ta else "") + (" bT" if tb else "")
            gflops = rate(m, k, n, ta, tb, args.repetitions, args.min_time)
            print(json.dumps({"product": name, "threads": threads, "gflops": round(gflops, 1)}), flush=True)


if __name__ == "__main__":
    main()
