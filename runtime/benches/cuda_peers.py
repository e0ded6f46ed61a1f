"""The work of `benches/cuda.rs`, timed in PyTorch and CuPy on the same GPU, for the ratio table.

Each figure is measured the way cuda.rs measures kusari's:

- bandwidth: a fused MulAdd (w = x * y + z) over 16M float32 elements (16 bytes an element)
  and a copy (8 bytes an element), back to back: 20 calls, then one synchronize, divided by 20
  (the median of 11), the device's throughput;
- reduction: the sum of the same 16M float32 elements, all of them, each row and each column
  of a 4096x4096 view (4 bytes an element), timed the same way, as a share of the copy's
  bandwidth;
- launch: host time per 3x2 MulAdd with every cache warm: 10,000 calls without waiting, then
  one synchronize, divided by 10,000 (median of 11). For PyTorch: `torch.addcmul` (one fused
  kernel) and the autograd op `x * y + z` on tensors that require grad (the analogue of a
  FunctionNode apply); for CuPy: an `ElementwiseKernel` with MulAdd's body.

- nn: the layer of `benches/conv.rs` (cuda.rs's `cuda_nn` group): a float32 (32, 64, 32, 32)
  input, `conv2d` with a (64, 64, 3, 3) weight and a bias, pad 1, forward (no_grad) and
  forward + sum + backward; `batch_norm` (training, eps 2e-5) forward + sum(y * c) + backward;
  2x2 max pooling forward + sum + backward; in PyTorch (cuDNN), the median of 21 synchronized
  runs. The convolutions are timed twice: with PyTorch's default (cuDNN may use TF32) and with
  TF32 off (float32 arithmetic throughout, as kusari's).

- fuse: the two chains of `benches/fuse.rs` (cuda.rs's `cuda_fuse` group) on a 16384x1024
  float32 `x` and `a`: `relu(x * a + 0.5) * a - 0.25 * x` and `tanh(x * a + 0.5) * sigmoid(x) + a`,
  forward (no_grad) and forward + `torch.autograd.grad` for a given output gradient, back to back
  like the bandwidth, in PyTorch eager (six kernels), `torch.compile` (Triton, fused; compiled
  before timing) and, forward only, `cupy.fuse`: times only, read against kusari's times and
  bound in cuda.rs's summary (a peer's own copy kernel measured a different bandwidth).

Results are checked against float64 host sums before anything is timed. A peer that is not
installed is reported as missing; the script needs a CUDA GPU.

Run: `python3 runtime/benches/cuda_peers.py` (on the GPU machine; .ci/gpu's bundle does not
need it).
"""

import statistics
import sys
import time

ELEMENTS = 16 << 20
SIDE = 1 << 12


def median_time(f, sync, reps=21):
    f()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def back_to_back(f, sync, n=20, reps=11):
    """Seconds per call of `f` launched `n` times without waiting, then synchronized."""
    return per_call(f, sync, n=n, reps=reps)


def per_call(f, sync, n=10_000, reps=11):
    for _ in range(100):
        f()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            f()
        sync()
        times.append((time.perf_counter() - t) / n)
    return statistics.median(times)


def gbps(nbytes, t):
    return nbytes / t / 1e9


def report(peer, t_muladd, t_copy, sums, launches):
    bw_copy = gbps(8 * ELEMENTS, t_copy)
    bw_muladd = gbps(16 * ELEMENTS, t_muladd)
    print(
        f"peer {peer} bandwidth: MulAdd 16M f32 {t_muladd * 1e6:.0f} us = {bw_muladd:.0f} GB/s "
        f"({100 * bw_muladd / bw_copy:.0f} % of copy), copy {t_copy * 1e6:.0f} us = {bw_copy:.0f} GB/s"
    )
    parts = []
    for what, t in sums:
        bw = gbps(4 * ELEMENTS, t)
        parts.append(f"{what} {t * 1e6:.0f} us = {bw:.0f} GB/s ({100 * bw / bw_copy:.0f} % of copy)")
    print(f"peer {peer} reduction: sum of 16M f32: " + ", ".join(parts))
    print(f"peer {peer} launch: host time per 3x2 call, warm: " +
          ", ".join(f"{what} {t * 1e6:.2f} us" for what, t in launches))


def check_sums(total, rows, cols, h):
    import numpy as np

    h64 = h.astype(np.float64)
    assert abs(float(total) - h64.sum()) <= 1e-5 * ELEMENTS + 1e-4 * abs(h64.sum())
    m = h64.reshape(SIDE, SIDE)
    assert np.allclose(np.asarray(rows, dtype=np.float64), m.sum(axis=1), rtol=1e-4, atol=1e-5 * SIDE)
    assert np.allclose(np.asarray(cols, dtype=np.float64), m.sum(axis=0), rtol=1e-4, atol=1e-5 * SIDE)


def torch_peer():
    import torch

    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    g = torch.Generator(device=dev).manual_seed(1)
    x, y, z = (torch.rand(ELEMENTS, device=dev, generator=g) * 2 - 1 for _ in range(3))
    w = torch.addcmul(z, x, y)
    assert torch.allclose(w, x * y + z, atol=1e-6)
    m = x.view(SIDE, SIDE)
    check_sums(x.sum().item(), m.sum(1).cpu().numpy(), m.sum(0).cpu().numpy(), x.cpu().numpy())
    t_muladd = back_to_back(lambda: torch.addcmul(z, x, y), sync)
    t_copy = back_to_back(lambda: x.clone(), sync)
    sums = [
        ("all", back_to_back(lambda: x.sum(), sync)),
        ("rows", back_to_back(lambda: m.sum(1), sync)),
        ("columns", back_to_back(lambda: m.sum(0), sync)),
    ]
    a, b, c = (torch.rand(3, 2, device=dev) for _ in range(3))
    va, vb, vc = (t.clone().requires_grad_() for t in (a, b, c))
    launches = [
        ("torch.addcmul", per_call(lambda: torch.addcmul(c, a, b), sync)),
        ("autograd x*y+z", per_call(lambda: va * vb + vc, sync)),
    ]
    report(f"PyTorch {torch.__version__} ({torch.cuda.get_device_name(0)})", t_muladd, t_copy, sums, launches)


def torch_nn_peer():
    import torch
    import torch.nn.functional as tf

    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    g = torch.Generator(device=dev).manual_seed(1)
    shape = (32, 64, 32, 32)

    def uniform(*s, scale=1.0):
        return (torch.rand(*s, device=dev, generator=g) * 2 - 1) * scale

    x = uniform(*shape).requires_grad_()
    w = uniform(64, 64, 3, 3, scale=0.05).requires_grad_()
    b = uniform(64).requires_grad_()
    c = uniform(*shape)
    gamma, beta = uniform(64).requires_grad_(), uniform(64).requires_grad_()
    # The forward against float64 on the same device before anything is timed.
    with torch.no_grad():
        y = tf.conv2d(x, w, b, padding=1)
        y64 = tf.conv2d(x.double(), w.double(), b.double(), padding=1)
        assert float((y.double() - y64).abs().max()) <= 1e-2

    def fwd():
        with torch.no_grad():
            return tf.conv2d(x, w, b, padding=1)

    def fwdbwd():
        for v in (x, w, b):
            v.grad = None
        tf.conv2d(x, w, b, padding=1).sum().backward()

    def bn():
        for v in (x, gamma, beta):
            v.grad = None
        y = tf.batch_norm(x, None, None, gamma, beta, training=True, eps=2e-5)
        (y * c).sum().backward()

    def pool():
        x.grad = None
        tf.max_pool2d(x, 2).sum().backward()

    times = [(what, median_time(f, sync)) for what, f in
             (("conv fwd", fwd), ("conv fwdbwd", fwdbwd), ("batch_norm fwdbwd", bn),
              ("max_pooling fwdbwd", pool))]
    tf32 = "TF32 on" if torch.backends.cudnn.allow_tf32 else "TF32 off"
    print(f"peer PyTorch {torch.__version__} nn (cuDNN {torch.backends.cudnn.version()}, "
          f"convolutions {tf32}): " + ", ".join(f"{what} {t * 1e6:.0f} us" for what, t in times))
    # The same with TF32 off for convolutions: float32 arithmetic throughout, as kusari does.
    torch.backends.cudnn.allow_tf32 = False
    times = [(what, median_time(f, sync)) for what, f in (("conv fwd", fwd), ("conv fwdbwd", fwdbwd))]
    torch.backends.cudnn.allow_tf32 = True
    print(f"peer PyTorch {torch.__version__} nn (convolutions TF32 off): " +
          ", ".join(f"{what} {t * 1e6:.0f} us" for what, t in times))


FUSE_SHAPE = (ELEMENTS // 1024, 1024)


def fuse_line(peer, rows):
    """Times only: each peer's own copy kernel gave a different bandwidth, so the bound is
    kusari's (cuda.rs's summary), and the ratios are read against its times."""
    print(f"peer {peer} fuse (16M f32): " + ", ".join(f"{what} {t * 1e6:.0f} us" for what, t in rows))


def torch_fuse_peer():
    import torch

    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    g = torch.Generator(device=dev).manual_seed(1)
    x, a = ((torch.rand(FUSE_SHAPE, device=dev, generator=g) * 2 - 1) * 2 for _ in range(2))
    gy = torch.rand(FUSE_SHAPE, device=dev, generator=g) * 2 - 1
    chains = {
        "arith": lambda x, a: torch.relu(x * a + 0.5) * a - 0.25 * x,
        "tanh": lambda x, a: torch.tanh(x * a + 0.5) * torch.sigmoid(x) + a,
    }
    xv, av = x.clone().requires_grad_(), a.clone().requires_grad_()

    def timed(f):
        def fwd():
            with torch.no_grad():
                return f(x, a)

        return [("fwd", back_to_back(fwd, sync)),
                ("fwdbwd", back_to_back(lambda: torch.autograd.grad(f(xv, av), (xv, av), gy), sync))]

    rows = []
    for name, f in chains.items():
        rows += [(f"{name} eager {w}", t) for w, t in timed(f)]
    fuse_line(f"PyTorch {torch.__version__} eager", rows)
    rows = []
    for name, f in chains.items():
        compiled = torch.compile(f)
        with torch.no_grad():
            assert torch.allclose(compiled(x, a), f(x, a), atol=1e-5)
        g1 = torch.autograd.grad(compiled(xv, av), (xv, av), gy)
        g2 = torch.autograd.grad(f(xv, av), (xv, av), gy)
        assert all(torch.allclose(p, q, atol=1e-4) for p, q in zip(g1, g2))
        rows += [(f"{name} compiled {w}", t) for w, t in timed(compiled)]
    fuse_line(f"PyTorch {torch.__version__} torch.compile", rows)


def cupy_fuse_peer():
    import cupy as cp

    sync = cp.cuda.Device().synchronize
    rng = cp.random.default_rng(1)
    x, a = ((rng.random(FUSE_SHAPE, dtype=cp.float32) * 2 - 1) * 2 for _ in range(2))

    @cp.fuse()
    def arith(x, a):
        return cp.maximum(x * a + 0.5, 0) * a - 0.25 * x

    @cp.fuse()
    def tanh(x, a):
        return cp.tanh(x * a + 0.5) * (1 / (1 + cp.exp(-x))) + a

    references = {
        "arith": lambda: cp.maximum(x * a + 0.5, 0) * a - 0.25 * x,
        "tanh": lambda: cp.tanh(x * a + 0.5) * (1 / (1 + cp.exp(-x))) + a,
    }
    rows = []
    for name, f in (("arith", arith), ("tanh", tanh)):
        # One chain failing (CuPy 14's fused `tanh` did not compile with NVRTC 13) must not
        # hide the other.
        try:
            assert bool(cp.allclose(f(x, a), references[name](), atol=1e-5))
            rows.append((f"{name} cupy.fuse fwd", back_to_back(lambda f=f: f(x, a), sync)))
        except Exception as e:  # noqa: BLE001
            print(f"peer CuPy fuse {name}: FAILED: {type(e).__name__}: {str(e).splitlines()[0]}")
    fuse_line(f"CuPy {cp.__version__}", rows)


def cupy_peer():
    import cupy as cp

    sync = cp.cuda.Device().synchronize
    rng = cp.random.default_rng(1)
    x, y, z = (rng.random(ELEMENTS, dtype=cp.float32) * 2 - 1 for _ in range(3))
    muladd = cp.ElementwiseKernel("T x, T y, T z", "T w", "w = x * y + z;", "kusari_peer_muladd")
    copy = cp.ElementwiseKernel("T a", "T out", "out = a;", "kusari_peer_copy")
    assert bool(cp.allclose(muladd(x, y, z), x * y + z, atol=1e-6))
    m = x.reshape(SIDE, SIDE)
    check_sums(float(x.sum()), cp.asnumpy(m.sum(1)), cp.asnumpy(m.sum(0)), cp.asnumpy(x))
    t_muladd = back_to_back(lambda: muladd(x, y, z), sync)
    t_copy = back_to_back(lambda: copy(x), sync)
    sums = [
        ("all", back_to_back(lambda: x.sum(), sync)),
        ("rows", back_to_back(lambda: m.sum(1), sync)),
        ("columns", back_to_back(lambda: m.sum(0), sync)),
    ]
    a, b, c = (rng.random((3, 2), dtype=cp.float32) for _ in range(3))
    launches = [("ElementwiseKernel", per_call(lambda: muladd(a, b, c), sync))]
    report(f"CuPy {cp.__version__}", t_muladd, t_copy, sums, launches)


def main():
    ok = True
    peers = (("PyTorch", torch_peer), ("PyTorch nn", torch_nn_peer), ("PyTorch fuse", torch_fuse_peer),
             ("CuPy", cupy_peer), ("CuPy fuse", cupy_fuse_peer))
    for name, peer in peers:
        try:
            peer()
        except ImportError as e:
            print(f"peer {name}: not installed ({e})")
        except Exception as e:  # noqa: BLE001 - one peer failing must not hide the other
            print(f"peer {name}: FAILED: {type(e).__name__}: {e}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
