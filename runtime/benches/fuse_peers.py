"""The work of `benches/fuse.rs` beside its bandwidth bound and PyTorch, and the ratio table.

Runs `cargo bench -p kusari --bench fuse` (unless `--no-run`), times the same chain in
PyTorch (CPU, eager: six operators each, `relu(x * a + 0.5) * a - 0.25 * x` and
`tanh(x * a + 0.5) * sigmoid(x) + a`, every CPU's thread unless `--threads N`), forward with no
gradient and forward + `torch.autograd.grad` for a given output gradient, and prints, for
kusari's fused and unfused chains and PyTorch's:

- the time ÷ the bound (kusari's `add` row, three passes over 64 MB: forward ×1, forward +
  backward ×8/3), where 1.2 is the issue's budget for the fused chain;
- the time ÷ PyTorch's (below 1: faster than PyTorch).

    python3 runtime/benches/fuse_peers.py             # the bench, then the table
    python3 runtime/benches/fuse_peers.py --no-run    # the table from the last bench run
"""

import argparse
import os
import subprocess
import sys

from derived_peers import kusari_seconds
from ops_peers import median_seconds

N = 1 << 24
COLS = 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not args.no_run:
        subprocess.run(["cargo", "bench", "-p", "kusari", "--bench", "fuse"], cwd=root, check=True)
    import torch

    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, {args.threads} threads", file=sys.stderr)
    g = torch.Generator().manual_seed(1)
    x = torch.rand((N // COLS, COLS), generator=g) * 4 - 2
    a = torch.rand((N // COLS, COLS), generator=g) * 4 - 2
    gy = torch.rand((N // COLS, COLS), generator=g) * 4 - 2

    chains = {
        "arith": lambda x, a: torch.relu(x * a + 0.5) * a - 0.25 * x,
        "tanh": lambda x, a: torch.tanh(x * a + 0.5) * torch.sigmoid(x) + a,
    }
    print(f"{'work':<8}{'row':<16}{'time':>10}{'÷ bound':>9}{'÷ torch':>9}")
    for chain, f in chains.items():
        with torch.no_grad():
            torch_fwd = median_seconds(lambda: f(x, a))
        xv, av = x.clone().requires_grad_(), a.clone().requires_grad_()
        torch_fwdbwd = median_seconds(lambda: torch.autograd.grad(f(xv, av), (xv, av), gy))
        for group, passes, torch_s in [("fwd", 3, torch_fwd), ("fwdbwd", 8, torch_fwdbwd)]:
            add = kusari_seconds(root, f"fuse_f32_16M_{group}", "add", "")
            bound = None if add is None else add * passes / 3
            rows = [(r, kusari_seconds(root, f"fuse_f32_16M_{group}", f"{chain}_{r}", ""))
                    for r in ["fused", "unfused"]]
            rows.append(("torch", torch_s))
            for row, s in rows:
                name = f"{chain}_{row}"
                if s is None:
                    print(f"{group:<8}{name:<16}{'-':>10}")
                    continue
                b = "-" if bound is None else f"{s / bound:.2f}"
                print(f"{group:<8}{name:<16}{s * 1e3:>8.2f}ms{b:>9}{s / torch_s:>9.2f}")
    add = kusari_seconds(root, "fuse_f32_16M_fwd", "add", "")
    alone = kusari_seconds(root, "fuse_f32_16M_fwd", "tanh_alone", "")
    if add and alone:
        print(f"tanh of 16M alone: {alone * 1e3:.2f}ms = {alone / add:.2f} x the forward's bound")


if __name__ == "__main__":
    main()
