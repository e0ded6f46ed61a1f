#!/usr/bin/env python3
"""PyTorch's side of mn/benches/data_parallel.py: the same digits MLP (64 → 64 → 64 → 10,
leaky ReLU with slope 0.1, dropout 0.2, Adam with alpha 0.005, softmax cross-entropy) trained
on the same 80% of scikit-learn's digits, one process on one thread, or N processes on one
thread each under `DistributedDataParallel` on the Gloo backend (PyTorch's host transport),
at the same global batch split evenly over the processes. Each epoch, as in the kusari example:
every rank takes an equal share of a seeded permutation, steps over its minibatches, measures
the accuracy of its share of the test set, and the ranks average loss and accuracy.

    python3 mn/benches/data_parallel_peers.py --ranks 2 --batch-size 64 --epochs 100

prints `trained E epochs in S s` (rank 0's wall time over the epochs, set-up excluded).
data_parallel.py runs it beside the kusari example with `--torch PYTHON`.
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "..", "..", "examples", "data", "digits.csv")
HIDDEN = 64
SEED = 0


def load():
    rows = [list(map(int, line.split(","))) for line in open(CSV) if line.strip()]
    data = torch.tensor(rows, dtype=torch.int64)
    x = data[:, :64].to(torch.float32) / 16.0
    t = data[:, 64]
    order = torch.randperm(len(t), generator=torch.Generator().manual_seed(SEED))
    n_test = round(len(t) * 0.2)
    train, test = order[: len(t) - n_test], order[len(t) - n_test:]
    return (x[train], t[train]), (x[test], t[test])


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(64, HIDDEN)
        self.l2 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, 10)

    def forward(self, x):
        h = F.dropout(F.leaky_relu(self.l1(x), 0.1), 0.2, self.training)
        h = F.dropout(F.leaky_relu(self.l2(h), 0.1), 0.2, self.training)
        return self.out(h)


def share(n, size, rank, seed):
    """An equal share of a seeded permutation of range(n), padded by wrapping as
    `scatter_index` pads."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)) if seed is not None \
        else torch.arange(n)
    per = -(-n // size)
    order = torch.cat([order, order[: per * size - n]])
    return order[rank * per:(rank + 1) * per]


def train(rank, size, batch, epochs, port, result):
    torch.set_num_threads(1)
    torch.manual_seed(SEED + rank)
    if size > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=size)
    (xs, ts), (xt, tt) = load()
    model = Mlp()
    net = torch.nn.parallel.DistributedDataParallel(model) if size > 1 else model
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    local = batch // size
    test_part = share(len(tt), size, rank, None)
    if size > 1:
        dist.barrier()
    start = time.perf_counter()
    for epoch in range(epochs):
        mine = share(len(ts), size, rank, SEED + epoch)
        total = 0.0
        net.train()
        for b in mine.split(local):
            loss = F.cross_entropy(net(xs[b]), ts[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        net.eval()
        with torch.no_grad():
            correct = (model(xt[test_part]).argmax(1) == tt[test_part]).sum().item()
        metrics = torch.tensor([total / len(mine), correct / len(test_part)], dtype=torch.float64)
        if size > 1:
            dist.all_reduce(metrics)
            metrics /= size
    seconds = time.perf_counter() - start
    if rank == 0:
        result.put(seconds)
    if size > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=10)
    args = p.parse_args()
    if args.batch_size % args.ranks:
        raise SystemExit(f"the batch size {args.batch_size} does not split over {args.ranks} ranks")
    ctx = mp.get_context("spawn")
    result = ctx.SimpleQueue()
    if args.ranks == 1:
        train(0, 1, args.batch_size, args.epochs, None, result)
    else:
        mp.start_processes(train, args=(args.ranks, args.batch_size, args.epochs, free_port(), result),
                           nprocs=args.ranks, start_method="spawn")
    print(f"trained {args.epochs} epochs in {result.get():.3f} s")


if __name__ == "__main__":
    main()
