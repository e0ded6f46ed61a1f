"""The work of `benches/derived.rs`, timed in PyTorch on the same machine, and the ratio table.

Runs `cargo bench -p kusari --bench derived` (unless `--no-run`), times the same work in
PyTorch (CPU, every CPU's thread unless `--threads N`): swish as `x * sigmoid(beta * x)`, gelu
as `torch.nn.functional.gelu` (the exact, erf form), forward with no gradient and forward +
`.sum().backward()`. Reads kusari's medians from criterion's files and prints, per row,
kusari's time, PyTorch's and kusari ÷ PyTorch (below 1: kusari is faster), the derived op
beside the built-in.

    python3 runtime/benches/derived_peers.py             # the bench, then the table
    python3 runtime/benches/derived_peers.py --no-run    # the table from the last bench run
"""

import argparse
import json
import os
import subprocess
import sys

from ops_peers import median_seconds  # the same criterion-style timing

SIZES = [("64K", 1 << 16), ("1M", 1 << 20), ("16M", 1 << 24)]
COLS = 1024
ROWS = ["swish_derived", "swish_builtin", "gelu_derived", "gelu_builtin"]


def kusari_seconds(root, group, row, label):
    path = os.path.join(root, "target", "criterion", group, row, label, "new", "estimates.json")
    try:
        with open(path) as f:
            return json.load(f)["median"]["point_estimate"] / 1e9
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not args.no_run:
        subprocess.run(["cargo", "bench", "-p", "kusari", "--bench", "derived"], cwd=root, check=True)
    import torch

    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, {args.threads} threads", file=sys.stderr)
    g = torch.Generator().manual_seed(1)
    F = torch.nn.functional
    funcs = {
        "swish": lambda x, b: x * torch.sigmoid(b * x),
        "gelu": lambda x, b: F.gelu(x),
    }
    print(f"{'row':<24}{'size':>6}{'kusari fwd':>12}{'torch fwd':>12}{'ratio':>7}"
          f"{'kusari f+b':>12}{'torch f+b':>12}{'ratio':>7}")
    for row in ROWS:
        f = funcs[row.split("_")[0]]
        for label, n in SIZES:
            x = torch.rand((n // COLS, COLS), generator=g) * 6 - 3
            b = torch.rand((COLS,), generator=g) * 6 - 3
            with torch.no_grad():
                tf = median_seconds(lambda: f(x, b))
            xv, bv = x.clone().requires_grad_(), b.clone().requires_grad_()

            def fwdbwd():
                xv.grad = None
                bv.grad = None
                f(xv, bv).sum().backward()

            tb = median_seconds(fwdbwd)
            kf = kusari_seconds(root, "derived_f32_fwd", row, label)
            kb = kusari_seconds(root, "derived_f32_fwdbwd", row, label)
            fmt = lambda s: "-" if s is None else f"{s * 1e3:.3f}ms"
            ratio = lambda k, t: "-" if k is None else f"{k / t:.2f}"
            print(f"{row:<24}{label:>6}{fmt(kf):>12}{fmt(tf):>12}{ratio(kf, tf):>7}"
                  f"{fmt(kb):>12}{fmt(tb):>12}{ratio(kb, tb):>7}")


if __name__ == "__main__":
    main()
