#!/usr/bin/env python3
"""The data-parallel speed of kusari-mn: the digits MLP's training (mn/examples/
data_parallel.rs) on 2 ranks against 1 rank, at the same global batch, each rank on one
thread (RAYON_NUM_THREADS=1), with the exchange overlapped with backward, after it, and
double-buffered.

Build first, then run on a quiet machine:

    cargo build --release -p kusari-mn --features mpi --example data_parallel
    python3 mn/benches/data_parallel.py [--epochs 100] [--runs 7] [--batches 64,256,1024] \\
        [--torch /path/to/venv/bin/python]

The configurations alternate run by run, so drift on the machine affects them alike; the
table gives each configuration's median time and the ratios of medians, and the share of the
all-reduce time hidden behind backward (the example's own measure, median over runs).

The bound: the best ratio any implementation of the exchange could reach on this machine. One
process trains at the per-rank batch (`--communicator single`, batch B/2, in the same rotation),
which gives each rank's own work and its time a step; allreduce_floor.c (built with mpicc)
then runs that much deterministic arithmetic a step on 2 ranks with an all-reduce of the MLP's
gradients after each, with no kusari involved, and what its steps cost beyond their arithmetic
is the floor: the all-reduce and the waiting for the other rank's delays. The bound is
(half the per-rank-batch time + the 2-rank run's steps × the floor) ÷ the 1-rank time.

That bound takes a rank's work at the speed of one process alone on the machine. Two such
processes at once, one on each core, run slower (they share the caches and memory, and on a
virtual machine whatever the host shares beneath its two cores), so the script also times two
of them started together, pinned to a core each, doing one rank's work (the per-rank
batch for half the epochs); the slower one's time in place of half the per-rank-batch time
gives the bound with both cores busy, the one two ranks actually face.

With `--torch`, the same training in PyTorch (data_parallel_peers.py: one process, and two
under DistributedDataParallel on Gloo, one thread each) runs in the same rotation, and a second
table sets its 2 ÷ 1 ratio beside kusari's, with kusari's time over PyTorch's for each.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "..", "..", "target")
EXAMPLE = os.path.join(TARGET, "release", "examples", "data_parallel")
FLOOR_SRC = os.path.join(HERE, "allreduce_floor.c")
FLOOR = os.path.join(TARGET, "allreduce_floor")
PEER = os.path.join(HERE, "data_parallel_peers.py")
# The MLP's parameters: weights 64 × 64, 64 × 64, 64 × 10 and their biases.
GRADIENTS = 8970
ENV = dict(os.environ, RAYON_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def trained(stdout):
    """(seconds, steps) from the example's or the peer's last line."""
    m = re.search(r"trained \d+ epochs in ([0-9.]+) s(?: \((\d+) steps)?", stdout)
    return float(m.group(1)), int(m.group(2) or 0)


def run(ranks, batch, epochs, mode):
    if mode == "single":
        cmd = [EXAMPLE, "--communicator", "single"]
    else:
        cmd = ["mpirun", "-np", str(ranks), EXAMPLE]
    # The last epoch's line only: under mpirun each line wakes mpirun to forward it, on a core
    # the ranks need.
    cmd += ["--epochs", str(epochs), "--batch-size", str(batch), "--log-every", str(epochs)]
    if mode == "after":
        cmd.append("--no-overlap")
    elif mode == "double":
        cmd.append("--double-buffering")
    out = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600, check=True)
    seconds, steps = trained(out.stdout)
    hidden = re.search(r"of which (\d+)% hidden", out.stdout)
    return seconds, steps, (int(hidden.group(1)) if hidden else None)


def together(batch, epochs):
    """The slower of two processes started at once, each pinned to its own core (the first two
    this script may use), each doing one rank's work: `batch` (the per-rank batch) for half of
    `epochs`."""
    cmd = [EXAMPLE, "--communicator", "single", "--epochs", str(epochs // 2), "--batch-size",
           str(batch), "--log-every", str(epochs)]
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        sys.exit("the bound with both cores busy needs two cores")
    procs = [subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}))
             for core in cores]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"{cmd} failed")
    return max(trained(out)[0] for out in outs)


def floor(compute_us, steps):
    """The floor's microseconds a step beyond `compute_us` of arithmetic, over `steps` steps."""
    out = subprocess.run(["mpirun", "-np", "2", FLOOR, f"{compute_us:.1f}", str(steps),
                          str(GRADIENTS)], env=ENV, capture_output=True, text=True,
                         timeout=600, check=True)
    return float(re.search(r"floor: ([0-9.]+) us", out.stdout).group(1))


def run_torch(python, ranks, batch, epochs):
    cmd = [python, PEER, "--ranks", str(ranks), "--batch-size", str(batch), "--epochs",
           str(epochs)]
    # The peer picks a free port and then binds it: another program may take it between the
    # two (PyTorch's rendezvous then fails), so a failed run is tried again, twice at most.
    for attempt in range(3):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if out.returncode == 0:
            return trained(out.stdout)[0]
        print(f"PyTorch peer failed (attempt {attempt + 1} of 3): {out.stderr.strip()[-300:]}",
              file=sys.stderr)
    sys.exit("the PyTorch peer failed three times")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--batches", default="64,256,1024")
    p.add_argument("--torch", metavar="PYTHON",
                   help="a Python with torch: run PyTorch's DDP peer in the same rotation")
    args = p.parse_args()
    if not os.path.exists(EXAMPLE):
        sys.exit(f"build the example first: {EXAMPLE} is missing")
    subprocess.run(["mpicc", "-O2", FLOOR_SRC, "-o", FLOOR], check=True)
    configs = [("1 rank", 1, "overlap"), ("2 ranks, overlapped", 2, "overlap"),
               ("2 ranks, after backward", 2, "after"), ("2 ranks, double buffering", 2, "double"),
               ("per-rank batch, 1 process", 1, "single")]
    print("| global batch | 1 rank | 2 ranks overlapped ÷ 1 rank | 2 ranks after backward ÷ "
          "1 rank | 2 ranks double-buffered ÷ 1 rank | bound | bound, both cores busy | "
          "all-reduce hidden (overlapped) |")
    print("|---|---|---|---|---|---|---|---|")
    peers = []
    for batch in [int(b) for b in args.batches.split(",")]:
        times = {name: [] for name, _, _ in configs}
        steps = {}
        torch_times = {1: [], 2: []}
        hidden = []
        busy = []
        for _ in range(args.runs):
            busy.append(together(batch // 2, args.epochs))
            for name, ranks, mode in configs:
                t, n, h = run(ranks, batch // 2 if mode == "single" else batch, args.epochs,
                              mode)
                times[name].append(t)
                steps[name] = n
                if ranks == 2 and mode == "overlap" and h is not None:
                    hidden.append(h)
            if args.torch:
                for ranks in (1, 2):
                    torch_times[ranks].append(run_torch(args.torch, ranks, batch, args.epochs))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        own = med["per-rank batch, 1 process"]
        per_step_us = own / steps["per-rank batch, 1 process"] * 1e6
        two_steps = steps["2 ranks, after backward"]
        floor_us = statistics.median(floor(per_step_us, two_steps) for _ in range(3))
        one = med["1 rank"]
        bound = (own / 2 + two_steps * floor_us * 1e-6) / one
        busy_bound = (statistics.median(busy) + two_steps * floor_us * 1e-6) / one
        if args.torch:
            t1, t2 = (statistics.median(torch_times[r]) for r in (1, 2))
            peers.append((batch, med["2 ranks, overlapped"] / one, t2 / t1, one / t1,
                          med["2 ranks, overlapped"] / t2))
        print(f"| {batch} | {one:.3f} s | {med['2 ranks, overlapped'] / one:.2f} | "
              f"{med['2 ranks, after backward'] / one:.2f} | "
              f"{med['2 ranks, double buffering'] / one:.2f} | {bound:.2f} "
              f"({per_step_us:.0f} + {floor_us:.0f} µs a step) | {busy_bound:.2f} | "
              f"{statistics.median(hidden) if hidden else 0:.0f}% |", flush=True)
    if peers:
        print()
        print("| global batch | kusari 2 ranks ÷ 1 | PyTorch DDP 2 ranks ÷ 1 | kusari ÷ PyTorch, "
              "1 rank | kusari ÷ PyTorch, 2 ranks |")
        print("|---|---|---|---|---|")
        for batch, k, t, one, two in peers:
            print(f"| {batch} | {k:.2f} | {t:.2f} | {one:.2f} | {two:.2f} |")


if __name__ == "__main__":
    main()
