"""The work of `benches/ops.rs`, timed in PyTorch on the same machine, and the ratio table.

Runs `cargo bench -p kusari --bench ops` (unless `--no-run`), times the same operations in
PyTorch (CPU, as many threads as kusari uses: every CPU, unless `--threads N`), reads kusari's
medians from criterion's files (`target/criterion/ops_*/.../new/estimates.json`) and prints one
row per operation: kusari's time, PyTorch's, and kusari ÷ PyTorch (below 1: kusari is faster).

Each PyTorch figure is the median over 10 samples of a batch of calls long enough to take about
30 ms, after a warm-up, as criterion measures kusari's. Forward is the operation on tensors that
require no gradient; forward + backward is the operation on tensors that do, `.sum()`, and
`.backward()` (gradients cleared before each call), as `ops.rs` does with `F::sum` and
`Variable::backward`. An Adam row is one `optimizer.step()` over parameters whose gradients are
set, PyTorch's fastest of its three CPU implementations (the loop over parameters, `foreach`
and `fused`), against one `Adam::update` in `ops.rs`. An MLP-step row is one training step of
the same MLP as `torch.nn.Sequential` (zero_grad, forward, cross-entropy, backward, Adam's
step, its fastest variant), dropout in training mode.

    python3 runtime/benches/ops_peers.py                  # the bench, then the table
    python3 runtime/benches/ops_peers.py --no-run         # the table from the last bench run
    python3 runtime/benches/ops_peers.py --filter exp     # only rows whose name contains it
    python3 runtime/benches/ops_peers.py --markdown       # the table as Markdown

PyTorch from pip (`pip install torch` in a virtual environment); its version and the machine
are printed first.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

SIZES = [("4K", 1 << 12), ("64K", 1 << 16), ("1M", 1 << 20), ("16M", 1 << 24)]
COLS = 1024


def ops_table(torch):
    """name -> (range, second operand kind, function of (a, b))."""
    F = torch.nn.functional
    return {
        "add": ((-1, 1), "full", lambda a, b: a + b),
        "mul": ((-1, 1), "full", lambda a, b: a * b),
        "add_row": ((-1, 1), "row", lambda a, b: a + b),
        "div": ((0.5, 2), "full", lambda a, b: a / b),
        "maximum": ((-1, 1), "full", lambda a, b: torch.maximum(a, b)),
        "exp": ((-5, 5), None, lambda a, b: torch.exp(a)),
        "log": ((0.01, 10), None, lambda a, b: torch.log(a)),
        "expm1": ((-5, 5), None, lambda a, b: torch.expm1(a)),
        "log1p": ((-0.5, 10), None, lambda a, b: torch.log1p(a)),
        "erf": ((-3, 3), None, lambda a, b: torch.erf(a)),
        "tanh": ((-5, 5), None, lambda a, b: torch.tanh(a)),
        "sigmoid": ((-5, 5), None, lambda a, b: torch.sigmoid(a)),
        "sqrt": ((0.01, 10), None, lambda a, b: torch.sqrt(a)),
        "pow_scalar": ((0.01, 10), None, lambda a, b: torch.pow(a, 2.5)),
        "relu": ((-1, 1), None, lambda a, b: torch.relu(a)),
        "gelu": ((-3, 3), None, lambda a, b: F.gelu(a)),
        "dropout": ((-1, 1), None, lambda a, b: F.dropout(a, 0.2, training=True)),
        "elu": ((-3, 3), None, lambda a, b: F.elu(a, 1.0)),
        "leaky_relu": ((-1, 1), None, lambda a, b: F.leaky_relu(a, 0.2)),
        "sum": ((-1, 1), None, lambda a, b: a.sum()),
        "sum_axis0": ((-1, 1), None, lambda a, b: a.sum(0)),
        "sum_axis1": ((-1, 1), None, lambda a, b: a.sum(1)),
        "mean": ((-1, 1), None, lambda a, b: a.mean()),
        "max": ((-1, 1), None, lambda a, b: a.max()),
        "max_axis1": ((-1, 1), None, lambda a, b: a.amax(1)),
        "softmax": ((-5, 5), None, lambda a, b: torch.softmax(a, -1)),
        "log_softmax": ((-5, 5), None, lambda a, b: torch.log_softmax(a, -1)),
        "softmax_cross_entropy": ((-5, 5), "labels", lambda a, b: F.cross_entropy(a, b)),
    }


MATMULS = [
    ("mlp_64x784x256", (64, 784), (784, 256)),
    ("square_512x1024x1024", (512, 1024), (1024, 1024)),
    ("ffn_512x768x3072", (512, 768), (768, 3072)),
]


ADAM_SETS = [
    ("mlp_digits", [(64, 64), (64,), (64, 64), (64,), (10, 64), (10,)]),
    ("1M", [(1024, 1024)]),
    ("16M", [(16 * 1024, 1024)]),
]


def median_seconds(f, samples=10, target=0.03):
    """The median time of one call of `f`, criterion-style: batches of calls."""
    for _ in range(3):
        f()
    t = time.perf_counter()
    f()
    once = max(time.perf_counter() - t, 1e-7)
    reps = max(1, int(target / once))
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        times.append((time.perf_counter() - t) / reps)
    return statistics.median(times)


def torch_times(torch, threads, name_filter):
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    out = {}

    def uniform(shape, lo, hi, dtype):
        return torch.rand(shape, generator=g, dtype=dtype) * (hi - lo) + lo

    for dtype, short in ((torch.float32, "f32"), (torch.float64, "f64")):
        for name, ((lo, hi), second, f) in ops_table(torch).items():
            for label, n in SIZES:
                rows = n // COLS
                key_f = f"ops_{short}_fwd/{name}/{label}"
                key_b = f"ops_{short}_fwdbwd/{name}/{label}"
                if name_filter and name_filter not in key_f and name_filter not in key_b:
                    continue
                a = uniform((rows, COLS), lo, hi, dtype)
                if second == "row":
                    b = uniform((COLS,), lo, hi, dtype)
                elif second == "labels":
                    b = torch.tensor([(r * 7919) % COLS for r in range(rows)], dtype=torch.int64)
                else:
                    b = uniform((rows, COLS), lo, hi, dtype)
                with torch.no_grad():
                    out[key_f] = median_seconds(lambda: f(a, b))
                x = a.clone().requires_grad_()
                y = b if second == "labels" else b.clone().requires_grad_()

                def fwdbwd():
                    x.grad = None
                    if second != "labels":
                        y.grad = None
                    f(x, y).sum().backward()

                out[key_b] = median_seconds(fwdbwd)
    for dtype, short in ((torch.float32, "f32"), (torch.float64, "f64")):
        for name, sa, sb in MATMULS:
            key = f"ops_matmul/{name}_{short}"
            if name_filter and name_filter not in key:
                continue
            a = uniform(sa, -1, 1, dtype)
            b = uniform(sb, -1, 1, dtype)
            with torch.no_grad():
                out[key + "_fwd"] = median_seconds(lambda: a @ b)
            va, vb = a.clone().requires_grad_(), b.clone().requires_grad_()

            def mm():
                va.grad = None
                vb.grad = None
                (va @ vb).sum().backward()

            out[key + "_fwdbwd"] = median_seconds(mm)
    key = "ops_train_step/tanh_mul_add_sigmoid_sum_f32_1M"
    if not name_filter or name_filter in key:
        x = uniform((COLS, COLS), -1, 1, torch.float32).requires_grad_()
        w = uniform((COLS, COLS), -1, 1, torch.float32).requires_grad_()
        b = uniform((COLS,), -1, 1, torch.float32).requires_grad_()

        def step():
            for v in (x, w, b):
                v.grad = None
            h = torch.tanh(x * w + b)
            torch.sigmoid(h).sum().backward()

        out[key] = median_seconds(step)
    # One Adam step over parameters whose gradients are set; PyTorch's fastest of its three
    # implementations on the CPU (the loop over parameters, `foreach`, `fused`).
    for dtype, short in ((torch.float32, "f32"), (torch.float64, "f64")):
        for label, shapes in ADAM_SETS:
            key = f"ops_adam/{label}_{short}"
            if name_filter and name_filter not in key:
                continue
            best = None
            for variant in ({}, {"foreach": True}, {"fused": True}):
                params = [uniform(s, -1, 1, dtype).requires_grad_() for s in shapes]
                for p in params:
                    p.grad = uniform(p.shape, -1, 1, dtype)
                try:
                    opt = torch.optim.Adam(params, **variant)
                    t = median_seconds(opt.step)
                except RuntimeError:
                    continue  # a variant this build or dtype lacks
                best = t if best is None else min(best, t)
            out[key] = best
    # One training step of the digits MLP (ops_mlp_step): forward, loss, backward, Adam.
    for batch in (8, 64):
        key = f"ops_mlp_step/digits_b{batch}_f32"
        if name_filter and name_filter not in key:
            continue
        nn = torch.nn
        model = nn.Sequential(nn.Linear(64, 64), nn.LeakyReLU(0.1), nn.Dropout(0.2),
                              nn.Linear(64, 64), nn.LeakyReLU(0.1), nn.Dropout(0.2),
                              nn.Linear(64, 10))
        model.train()
        x = uniform((batch, 64), 0, 1, torch.float32)
        t = torch.tensor([(i * 7) % 10 for i in range(batch)], dtype=torch.int64)
        best = None
        for variant in ({}, {"foreach": True}, {"fused": True}):
            try:
                opt = torch.optim.Adam(model.parameters(), **variant)

                def train_step():
                    opt.zero_grad(set_to_none=True)
                    nn.functional.cross_entropy(model(x), t).backward()
                    opt.step()

                s = median_seconds(train_step)
            except RuntimeError:
                continue
            best = s if best is None else min(best, s)
        out[key] = best
    return out


def kusari_times(target):
    """Criterion's median (seconds) of every `ops_*` benchmark, by `group/function[/param]`."""
    root = os.path.join(target, "criterion")
    out = {}
    if not os.path.isdir(root):
        return out
    for group in os.listdir(root):
        if not group.startswith("ops_"):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, group)):
            if os.path.basename(dirpath) == "new" and "estimates.json" in filenames:
                with open(os.path.join(dirpath, "estimates.json")) as f:
                    est = json.load(f)
                bench_dir = os.path.dirname(dirpath)
                with open(os.path.join(bench_dir, "new", "benchmark.json")) as f:
                    meta = json.load(f)
                key = meta["full_id"]
                out[key] = est["median"]["point_estimate"] * 1e-9
    return out


def show(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-run", action="store_true", help="do not run the kusari bench first")
    p.add_argument("--filter", default="", help="only rows whose name contains this")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="PyTorch's threads")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    if not args.no_run:
        cmd = ["cargo", "bench", "-p", "kusari", "--bench", "ops"]
        if args.filter:
            cmd += ["--", args.filter]
        subprocess.run(cmd, cwd=repo, check=True)
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; PyTorch {torch.__version__}, {args.threads} threads")
    theirs = torch_times(torch, args.threads, args.filter)
    ours = kusari_times(target)
    rows = []
    for key, t_torch in theirs.items():
        t_ours = ours.get(key)
        rows.append((key, t_ours, t_torch))
    if args.markdown:
        print("| operation | kusari | PyTorch | kusari ÷ PyTorch |")
        print("|---|---|---|---|")
    for key, t_ours, t_torch in rows:
        ratio = f"{t_ours / t_torch:.2f}" if t_ours else "n/a (not benched)"
        ours_s = show(t_ours) if t_ours else "-"
        if args.markdown:
            print(f"| `{key}` | {ours_s} | {show(t_torch)} | {ratio} |")
        else:
            print(f"{key:60s} {ours_s:>12s} {show(t_torch):>12s} {ratio:>8s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
