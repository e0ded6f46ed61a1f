#!/usr/bin/env python3
"""The data-parallel speed of kusari-mn: the digits MLP's training (mn/examples/
data_parallel.rs) on 2 ranks against 1 rank, at the same global batch, each rank on one
thread (RAYON_NUM_THREADS=1), with the exchange overlapped with backward, after it, and
double-buffered.

Build first, then run on a quiet machine:

    cargo build --release -p kusari-mn --features mpi --example data_parallel
    python3 mn/benches/data_parallel.py [--epochs 100] [--runs 7] [--batches 64,256,1024]

The configurations alternate run by run, so drift on the machine affects them alike; the
table gives each configuration's median time and the ratios of medians, and the share of the
all-reduce time hidden behind backward (the example's own measure, median over runs).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "examples",
                       "data_parallel")


def run(ranks, batch, epochs, mode):
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", str(ranks), EXAMPLE, "--epochs", str(epochs),
           "--batch-size", str(batch)]
    if mode == "after":
        cmd.append("--no-overlap")
    elif mode == "double":
        cmd.append("--double-buffering")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
    seconds = float(re.search(r"trained \d+ epochs in ([0-9.]+) s", out.stdout).group(1))
    hidden = re.search(r"of which (\d+)% hidden", out.stdout)
    return seconds, (int(hidden.group(1)) if hidden else None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--batches", default="64,256,1024")
    args = p.parse_args()
    if not os.path.exists(EXAMPLE):
        sys.exit(f"build the example first: {EXAMPLE} is missing")
    configs = [("1 rank", 1, "overlap"), ("2 ranks, overlapped", 2, "overlap"),
               ("2 ranks, after backward", 2, "after"), ("2 ranks, double buffering", 2, "double")]
    print("| global batch | 1 rank | 2 ranks overlapped ÷ 1 rank | 2 ranks after backward ÷ "
          "1 rank | 2 ranks double-buffered ÷ 1 rank | all-reduce hidden (overlapped) |")
    print("|---|---|---|---|---|---|")
    for batch in [int(b) for b in args.batches.split(",")]:
        times = {name: [] for name, _, _ in configs}
        hidden = []
        for _ in range(args.runs):
            for name, ranks, mode in configs:
                t, h = run(ranks, batch, args.epochs, mode)
                times[name].append(t)
                if ranks == 2 and mode == "overlap" and h is not None:
                    hidden.append(h)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        one = med["1 rank"]
        print(f"| {batch} | {one:.3f} s | {med['2 ranks, overlapped'] / one:.2f} | "
              f"{med['2 ranks, after backward'] / one:.2f} | "
              f"{med['2 ranks, double buffering'] / one:.2f} | "
              f"{statistics.median(hidden) if hidden else 0:.0f}% |")


if __name__ == "__main__":
    main()
