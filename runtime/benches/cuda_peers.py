"""The work of `benches/cuda.rs`, timed in PyTorch and CuPy on the same GPU, for the ratio table.

Each figure is measured the way cuda.rs measures kusari's:

- bandwidth: a fused MulAdd (w = x * y + z) over 16M float32 elements (16 bytes an element)
  and a copy (8 bytes an element), the median of 21 synchronized runs;
- reduction: the sum of the same 16M float32 elements, all of them, each row and each column
  of a 4096x4096 view (4 bytes an element), as a share of the copy's bandwidth;
- launch: host time per 3x2 MulAdd with every cache warm: 10,000 calls without waiting, then
  one synchronize, divided by 10,000 (median of 11). For PyTorch: `torch.addcmul` (one fused
  kernel) and the autograd op `x * y + z` on tensors that require grad (the analogue of a
  FunctionNode apply); for CuPy: an `ElementwiseKernel` with MulAdd's body.

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
    t_muladd = median_time(lambda: torch.addcmul(z, x, y), sync)
    t_copy = median_time(lambda: x.clone(), sync)
    sums = [
        ("all", median_time(lambda: x.sum(), sync)),
        ("rows", median_time(lambda: m.sum(1), sync)),
        ("columns", median_time(lambda: m.sum(0), sync)),
    ]
    a, b, c = (torch.rand(3, 2, device=dev) for _ in range(3))
    va, vb, vc = (t.clone().requires_grad_() for t in (a, b, c))
    launches = [
        ("torch.addcmul", per_call(lambda: torch.addcmul(c, a, b), sync)),
        ("autograd x*y+z", per_call(lambda: va * vb + vc, sync)),
    ]
    report(f"PyTorch {torch.__version__} ({torch.cuda.get_device_name(0)})", t_muladd, t_copy, sums, launches)


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
    t_muladd = median_time(lambda: muladd(x, y, z), sync)
    t_copy = median_time(lambda: copy(x), sync)
    sums = [
        ("all", median_time(lambda: x.sum(), sync)),
        ("rows", median_time(lambda: m.sum(1), sync)),
        ("columns", median_time(lambda: m.sum(0), sync)),
    ]
    a, b, c = (rng.random((3, 2), dtype=cp.float32) for _ in range(3))
    launches = [("ElementwiseKernel", per_call(lambda: muladd(a, b, c), sync))]
    report(f"CuPy {cp.__version__}", t_muladd, t_copy, sums, launches)


def main():
    ok = True
    for name, peer in (("PyTorch", torch_peer), ("CuPy", cupy_peer)):
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
