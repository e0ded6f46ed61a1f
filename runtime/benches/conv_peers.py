"""The work of `benches/conv.rs`, timed in PyTorch (and Chainer 7.8.1 where given) on the same
machine, and the ratio table.

Runs `cargo bench -p kusari --bench conv` (unless `--no-run`), times the same layers in
PyTorch (CPU, as many threads as kusari uses) and, with `--chainer PYTHON` (a Python that has
Chainer 7.8.1: see `shared/reference/chainer_bench.py` for its set-up), in Chainer, reads
kusari's medians from criterion's files and prints kusari's time, each peer's and the ratios
(below 1: kusari is faster).

- conv: `conv2d` of a float32 (32, 64, 32, 32) input with a (64, 64, 3, 3) weight and a bias,
  pad 1; forward without autograd, and forward + `sum` + backward.
- batch_norm: `batch_norm` in training mode of the same input with 64 channels, forward +
  `(y * c).sum()` + backward; and one copy of the input (`x * 1`), the bandwidth yardstick.
  Batch normalization's minimum traffic, forward and backward, is 5 passes over the array
  (forward: read x, write y; backward: read gy and x, write gx) with the statistics in cache;
  a copy is 2 passes, so the bound is 2.5 copies; `batch_norm/fwdbwd_alone` (kusari only) is
  that work alone, without the product and sum of the comparison with PyTorch. Two yardsticks:
  `batch_norm/copy` copies the 8 MB array itself, which runs from the L3 cache (it holds the
  array and the copy, though not the four arrays of batch normalization's 32 MB working set);
  `batch_norm/copy_x8` copies an array 8 times as large, from memory, and its time ÷ 8 is the
  memory-bandwidth bound of one copy.
- max_pooling: 2×2 max pooling of the same input, forward + backward.

    python3 runtime/benches/conv_peers.py [--no-run] [--chainer /path/to/python] [--markdown]
"""

import argparse
import json
import os
import platform
import subprocess
import sys

from ops_peers import median_seconds  # the same criterion-style batches, beside this file

SHAPE = (32, 64, 32, 32)
# Each call of these layers takes milliseconds: batches of about 0.2 s.
TARGET = 0.2


def torch_times(threads):
    import torch
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    u = lambda *s: torch.rand(*s, generator=g) * 2 - 1
    x, w, b = u(*SHAPE), u(64, 64, 3, 3) * 0.05, u(64)
    F = torch.nn.functional
    out = {}
    with torch.no_grad():
        out["conv/fwd"] = median_seconds(lambda: F.conv2d(x, w, b, padding=1), target=TARGET)
    xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))

    def conv_step():
        for t in (xg, wg, bg):
            t.grad = None
        F.conv2d(xg, wg, bg, padding=1).sum().backward()

    out["conv/fwdbwd"] = median_seconds(conv_step, target=TARGET)
    c = u(*SHAPE)
    gamma, beta = u(64).requires_grad_(), u(64).requires_grad_()

    def bn_step():
        for t in (xg, gamma, beta):
            t.grad = None
        (F.batch_norm(xg, None, None, gamma, beta, training=True, eps=2e-5) * c).sum().backward()

    out["batch_norm/fwdbwd"] = median_seconds(bn_step, target=TARGET)
    out["batch_norm/copy"] = median_seconds(lambda: x * 1.0, target=TARGET)

    def pool_step():
        xg.grad = None
        F.max_pool2d(xg, 2).sum().backward()

    out["max_pooling/fwdbwd"] = median_seconds(pool_step, target=TARGET)
    return torch.__version__, out


CHAINER = r'''
import json, statistics, sys, time
import numpy as np
import chainer, chainer.functions as F
SHAPE = (32, 64, 32, 32)
rng = np.random.RandomState(0)
u = lambda *s: (rng.rand(*s) * 2 - 1).astype(np.float32)
x, w, b, c = u(*SHAPE), u(64, 64, 3, 3) * 0.05, u(64), u(*SHAPE)
def median(f, samples=5):
    f(); f()
    ts = []
    for _ in range(samples):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
out = {}
with chainer.no_backprop_mode():
    out["conv/fwd"] = median(lambda: F.convolution_2d(x, w, b, pad=1))
def conv_step():
    xv, wv, bv = chainer.Variable(x), chainer.Variable(w), chainer.Variable(b)
    F.sum(F.convolution_2d(xv, wv, bv, pad=1)).backward()
out["conv/fwdbwd"] = median(conv_step)
def bn_step():
    xv, g, be = chainer.Variable(x), chainer.Variable(u(64)), chainer.Variable(u(64))
    F.sum(F.batch_normalization(xv, g, be, eps=2e-5) * c).backward()
out["batch_norm/fwdbwd"] = median(bn_step)
def pool_step():
    xv = chainer.Variable(x)
    F.sum(F.max_pooling_2d(xv, 2)).backward()
out["max_pooling/fwdbwd"] = median(pool_step)
print(json.dumps({"version": chainer.__version__, "times": out}))
'''


def chainer_times(python):
    r = subprocess.run([python, "-c", CHAINER], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit(f"the Chainer timing failed:\n{r.stderr}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return d["version"], d["times"]


def kusari_times(target):
    """Criterion's median (seconds) of every benchmark of conv.rs, by `group/function`."""
    out = {}
    for group in ("conv", "batch_norm", "max_pooling"):
        root = os.path.join(target, "criterion", group)
        if not os.path.isdir(root):
            continue
        for name in os.listdir(root):
            est = os.path.join(root, name, "new", "estimates.json")
            if os.path.isfile(est):
                with open(est) as f:
                    out[f"{group}/{name}"] = json.load(f)["median"]["point_estimate"] * 1e-9
    return out


def show(s):
    return "—" if s is None else (f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-run", action="store_true", help="do not run the kusari bench first")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="PyTorch's threads")
    p.add_argument("--chainer", help="a Python with Chainer 7.8.1, to time it too")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    if not args.no_run:
        subprocess.run(["cargo", "bench", "-p", "kusari", "--bench", "conv"], cwd=repo, check=True)
    tv, torch_t = torch_times(args.threads)
    cv, chainer_t = chainer_times(args.chainer) if args.chainer else (None, {})
    ours = kusari_times(target)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"PyTorch {tv}, {args.threads} threads" + (f"; Chainer {cv}" if cv else ""))
    head = ["bench", "kusari", "PyTorch", "kusari ÷ PyTorch", "Chainer", "kusari ÷ Chainer"]
    rows = []
    for key in ["conv/fwd", "conv/fwdbwd", "batch_norm/fwdbwd", "batch_norm/copy",
                "max_pooling/fwdbwd"]:
        k, t, c = ours.get(key), torch_t.get(key), chainer_t.get(key)
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "—"
        rows.append([key, show(k), show(t), ratio(k, t), show(c), ratio(k, c)])
    bn, copy = ours.get("batch_norm/fwdbwd_alone"), ours.get("batch_norm/copy")
    copy_mem = ours.get("batch_norm/copy_x8")
    if bn and copy:
        rows.append(["batch_norm/fwdbwd_alone", show(bn), "", "", "", ""])
        rows.append(["batch_norm alone ÷ 2.5 copies from L3", f"{bn / (2.5 * copy):.2f}", "", "", "", ""])
    if bn and copy_mem:
        rows.append(["batch_norm alone ÷ 2.5 copies from memory", f"{bn / (2.5 * copy_mem / 8):.2f}", "", "", "", ""])
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in [head] + rows:
            print("  ".join(f"{c:>18}" for c in r))


if __name__ == "__main__":
    main()
