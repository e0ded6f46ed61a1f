//! The emulated device's sanitizer: a gallery of broken kernels, each a known class of GPU bug,
//! each caught with a message that points at it (the kernel, the memory and element, the
//! threads, the source line), and its fixed version passing with the right result. Also what
//! holds without the checks: a kernel named like a C library function runs, and a kernel's
//! crash is an error naming it and the memory it reached.

use kusari::RawKernel;
use kusari::cuda::sanitizer::{self, Checks, InitCheck};
use kusari::prelude::*;

use super::emulated;

fn on_gpu(a: &Array) -> Array {
    a.to_device(Device::Cuda(0)).unwrap()
}

fn f32s(v: &[f32]) -> Array {
    Array::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

/// The message of a launch that must fail.
fn failure(r: kusari::Result<()>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(()) => panic!("the launch passed"),
    }
}

/// A shared-memory tree reduction of each block's 64 values; `SYNC` is the barrier in the loop.
fn tree_reduction(sync_in_loop: bool) -> String {
    format!(
        r#"
extern "C" __global__ void block_sum(const float* x, float* out) {{
    __shared__ float partial[64];
    const unsigned int t = threadIdx.x;
    partial[t] = x[blockIdx.x * 64 + t];
    __syncthreads();
    for (unsigned int half = 32; half > 0; half /= 2) {{
        if (t < half) partial[t] += partial[t + half];
        {}
    }}
    if (t == 0) out[blockIdx.x] = partial[0];
}}
"#,
        if sync_in_loop { "__syncthreads();" } else { "" }
    )
}

#[test]
fn a_tree_reduction_missing_a_barrier_is_a_race_on_its_shared_array() {
    if !emulated("a_tree_reduction_missing_a_barrier_is_a_race_on_its_shared_array") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let values: Vec<f32> = (0..128).map(|i| (i % 13) as f32 - 4.0).collect();
    let x = on_gpu(&f32s(&values));
    let out = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());

    let broken = RawKernel::new(&tree_reduction(false), "block_sum").unwrap();
    let e = failure(broken.launch(2u32, 64u32, &[(&x).into(), (&out).into()]));
    assert!(
        e.contains("kernel block_sum: data race on __shared__ `partial`"),
        "{e}"
    );
    // Without the barrier, thread 0 runs the whole loop first and reads partial[1] (when half
    // is 1); thread 1 then writes partial[1] in its first step: a read and a write of one
    // element by two threads, with no barrier between them, both on the line of the `+=`.
    assert!(
        e.contains("thread (1, 0, 0) of block (0, 0, 0) wrote it at block_sum:8"),
        "{e}"
    );
    assert!(
        e.contains("thread (0, 0, 0) of block (0, 0, 0) read it at block_sum:8"),
        "{e}"
    );
    assert!(
        e.contains(
            "with no __syncthreads between them (both after 1 barrier(s) of the block) and no \
             __syncwarp ordering lane 0 before lane 1 of warp 0"
        ),
        "{e}"
    );

    let fixed = RawKernel::new(&tree_reduction(true), "block_sum").unwrap();
    fixed
        .launch(2u32, 64u32, &[(&x).into(), (&out).into()])
        .unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for b in 0..2 {
        let want: f32 = values[b * 64..(b + 1) * 64].iter().sum();
        assert_eq!(got[b], want, "block {b}");
    }
}

#[test]
fn a_kernel_named_like_a_c_library_function_is_the_one_that_runs() {
    if !emulated("a_kernel_named_like_a_c_library_function_is_the_one_that_runs") {
        return;
    }
    for name in ["index", "sync", "truncate"] {
        let src = format!(
            "extern \"C\" __global__ void {name}(float* y) {{ y[threadIdx.x] = 2.0f * threadIdx.x; }}"
        );
        let k = RawKernel::new(&src, name).unwrap();
        let y = on_gpu(&Array::zeros(&[8], DType::F32).unwrap());
        k.launch(1u32, 8u32, &[(&y).into()]).unwrap();
        let want: Vec<f32> = (0..8).map(|i| 2.0 * i as f32).collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), want, "kernel {name}");
    }
}

#[test]
fn a_crash_in_a_kernel_is_an_error_naming_the_kernel_and_the_memory() {
    if !emulated("a_crash_in_a_kernel_is_an_error_naming_the_kernel_and_the_memory") {
        return;
    }
    let src = r#"
extern "C" __global__ void overrun(float* y, int n) {
    y[threadIdx.x + n] = 1.0f;
}
extern "C" __global__ void divide(int* y, int d) {
    y[threadIdx.x] = 100 / (d - (int)threadIdx.x);
}
"#;
    let y = on_gpu(&Array::zeros(&[1024], DType::F32).unwrap());
    let k = RawKernel::new(src, "overrun").unwrap();
    // Element 1024 + 5 lies on the guard page after the 4 KiB allocation.
    let e = failure(k.launch(1u32, 8u32, &[(&y).into(), 1024i32.into()]));
    assert!(e.contains("kernel overrun: SIGSEGV"), "{e}");
    assert!(e.contains("thread (0, 0, 0) of block (0, 0, 0)"), "{e}");
    assert!(
        e.contains("byte 4096 of the allocation of 4096 bytes"),
        "{e}"
    );
    assert!(e.contains("1 past its end"), "{e}");
    // The device works on.
    k.launch(1u32, 8u32, &[(&y).into(), 0i32.into()]).unwrap();
    assert_eq!(
        &y.to_vec::<f32>().unwrap()[..9],
        &[1., 1., 1., 1., 1., 1., 1., 1., 0.]
    );

    let yi = on_gpu(&Array::zeros(&[8], DType::I32).unwrap());
    let k = RawKernel::new(src, "divide").unwrap();
    let e = failure(k.launch(1u32, 8u32, &[(&yi).into(), 3i32.into()]));
    assert!(e.contains("kernel divide: SIGFPE"), "{e}");
    assert!(e.contains("thread (3, 0, 0)"), "{e}");
}

#[test]
fn two_threads_writing_one_output_race_and_atomics_do_not() {
    if !emulated("two_threads_writing_one_output_race_and_atomics_do_not") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let src = r#"
extern "C" __global__ void pairs(const float* x, float* out) {
    out[threadIdx.x / 2] = x[threadIdx.x];
}
extern "C" __global__ void pairs_atomic(const float* x, float* out) {
    atomicAdd(&out[threadIdx.x / 2], x[threadIdx.x]);
}
"#;
    let values: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let x = on_gpu(&f32s(&values));
    let out = on_gpu(&Array::zeros(&[8], DType::F32).unwrap());
    let broken = RawKernel::new(src, "pairs").unwrap();
    let e = failure(broken.launch(1u32, 16u32, &[(&x).into(), (&out).into()]));
    assert!(
        e.contains("kernel pairs: data race on parameter 1, element 0 (4-byte elements)"),
        "{e}"
    );
    assert!(
        e.contains("thread (1, 0, 0) of block (0, 0, 0) wrote it at pairs:3")
            && e.contains("thread (0, 0, 0) of block (0, 0, 0) wrote it at pairs:3"),
        "{e}"
    );
    let fixed = RawKernel::new(src, "pairs_atomic").unwrap();
    fixed
        .launch(1u32, 16u32, &[(&x).into(), (&out).into()])
        .unwrap();
    let want: Vec<f32> = (0..8).map(|i| (4 * i + 1) as f32).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
}

/// A 3-point stencil through shared memory: each thread loads its element, and reads its
/// neighbours' after the barrier (without it, a neighbour's value is read before it is written).
fn stencil(with_barrier: bool) -> String {
    format!(
        r#"
extern "C" __global__ void smooth(const float* x, float* y, int n) {{
    __shared__ float tile[34];
    const int t = threadIdx.x, i = blockIdx.x * 32 + t;
    tile[t + 1] = x[i];
    if (t == 0) tile[0] = i > 0 ? x[i - 1] : 0.0f;
    if (t == 31) tile[33] = i + 1 < n ? x[i + 1] : 0.0f;
    {}
    y[i] = tile[t] + tile[t + 1] + tile[t + 2];
}}
"#,
        if with_barrier { "__syncthreads();" } else { "" }
    )
}

#[test]
fn a_stencil_reading_its_neighbour_before_the_barrier_is_caught() {
    if !emulated("a_stencil_reading_its_neighbour_before_the_barrier_is_caught") {
        return;
    }
    let values: Vec<f32> = (0..64).map(|i| ((i * 7) % 11) as f32).collect();
    let x = on_gpu(&f32s(&values));
    let y = on_gpu(&Array::zeros(&[64], DType::F32).unwrap());
    let args = || [(&x).into(), (&y).into(), 64i32.into()];
    let broken = RawKernel::new(&stencil(false), "smooth").unwrap();
    {
        // The race detector alone: thread 0 read tile[2] before thread 1 wrote it.
        let _races = sanitizer::scoped(Checks {
            races: true,
            ..Checks::NONE
        });
        let e = failure(broken.launch(2u32, 32u32, &args()));
        assert!(
            e.contains("data race on __shared__ `tile`, element 2"),
            "{e}"
        );
        assert!(
            e.contains("thread (1, 0, 0) of block (0, 0, 0) wrote it at smooth:5")
                && e.contains("thread (0, 0, 0) of block (0, 0, 0) read it at smooth:9"),
            "{e}"
        );
    }
    {
        // The initialization check sees the same read first: nothing had written tile[2].
        let _init = sanitizer::scoped(Checks::ALL);
        let e = failure(broken.launch(2u32, 32u32, &args()));
        assert!(e.contains("read of uninitialized memory"), "{e}");
        assert!(e.contains("__shared__ `tile`, element 2"), "{e}");
        assert!(e.contains("at smooth:9"), "{e}");
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let fixed = RawKernel::new(&stencil(true), "smooth").unwrap();
    fixed.launch(2u32, 32u32, &args()).unwrap();
    let at = |j: i64| {
        if (0..64).contains(&j) {
            values[j as usize]
        } else {
            0.0
        }
    };
    for (i, got) in y.to_vec::<f32>().unwrap().into_iter().enumerate() {
        let i = i as i64;
        assert_eq!(got, at(i - 1) + at(i) + at(i + 1), "y[{i}]");
    }
}

static ACCUMULATE: kusari::ElementwiseKernel =
    kusari::ElementwiseKernel::new("accumulate", "T x", "T y", "", "y += x;");

#[test]
fn a_kernel_reading_an_output_it_never_wrote_is_caught_or_reported() {
    if !emulated("a_kernel_reading_an_output_it_never_wrote_is_caught_or_reported") {
        return;
    }
    let x = on_gpu(&f32s(&[1.0, 2.0, 3.0, 4.0]));
    {
        // `y` is allocated by the call and never written before the body reads it.
        let _checks = sanitizer::scoped(Checks::ALL);
        let e = ACCUMULATE.call().arg(&x).run().unwrap_err().to_string();
        assert!(e.contains("kernel accumulate__"), "{e}");
        assert!(e.contains("read of uninitialized memory"), "{e}");
        assert!(
            e.contains("parameter 1, element 0 (4-byte elements)"),
            "{e}"
        );
        assert!(
            e.contains("a kernel reading an output it never wrote"),
            "{e}"
        );
    }
    {
        // Report mode: the launch goes on, and the finding is kept, once for the instruction.
        let _report = sanitizer::scoped(Checks {
            initialization: InitCheck::Report,
            ..Checks::NONE
        });
        let _ = sanitizer::take_reports();
        let y = ACCUMULATE.call().arg(&x).run().unwrap().remove(0);
        assert_eq!(y.shape(), &[4]);
        let reports = sanitizer::take_reports();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(
            reports[0].contains("read of uninitialized memory"),
            "{reports:?}"
        );
    }
    // Given a written output, it passes.
    let _checks = sanitizer::scoped(Checks::ALL);
    let y = on_gpu(&f32s(&[10.0, 20.0, 30.0, 40.0]));
    ACCUMULATE.call().arg(&x).out(&y).run().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [11.0, 22.0, 33.0, 44.0]);
}

#[test]
fn reads_before_a_buffer_and_past_the_dynamic_shared_bytes_are_out_of_bounds() {
    if !emulated("reads_before_a_buffer_and_past_the_dynamic_shared_bytes_are_out_of_bounds") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let src = r#"
extern "C" __global__ void shift(const float* x, float* y) {
    y[threadIdx.x] = x[(int)threadIdx.x - 1];
}
extern "C" __global__ void staged(const float* x, float* y) {
    extern __shared__ float stage[];
    stage[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = stage[blockDim.x - 1 - threadIdx.x];
}
"#;
    let x = on_gpu(&f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]));
    let y = on_gpu(&Array::zeros(&[8], DType::F32).unwrap());
    let shift = RawKernel::new(src, "shift").unwrap();
    let e = failure(shift.launch(1u32, 8u32, &[(&x).into(), (&y).into()]));
    assert!(e.contains("kernel shift: out-of-bounds access"), "{e}");
    assert!(
        e.contains("thread (0, 0, 0) of block (0, 0, 0) read 4 bytes"),
        "{e}"
    );
    assert!(e.contains("parameter 0, element -1"), "{e}");
    assert!(
        e.contains("4 bytes before the first byte of its allocation"),
        "{e}"
    );
    assert!(e.contains("at shift:3"), "{e}");

    let staged = RawKernel::new(src, "staged").unwrap();
    // The forgotten sizeof: 8 bytes for 8 floats.
    let e = failure(staged.launch_with_shared_mem(1u32, 8u32, 8, &[(&x).into(), (&y).into()]));
    assert!(e.contains("kernel staged: out-of-bounds access"), "{e}");
    assert!(
        e.contains("thread (2, 0, 0) of block (0, 0, 0) wrote 4 bytes"),
        "{e}"
    );
    assert!(
        e.contains("byte 8 of extern __shared__ memory, but the launch gave 8 bytes"),
        "{e}"
    );
    staged
        .launch_with_shared_mem(1u32, 8u32, 32, &[(&x).into(), (&y).into()])
        .unwrap();
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    );
}

/// Each warp sums its lanes with shuffles, lane 0 of each writes the warp's sum to shared
/// memory, and the first warp sums those: CUDA's fastest block reduction.
const WARP_REDUCE: &str = r#"
extern "C" __global__ void warp_reduce(const float* x, float* out, int n) {
    __shared__ float warp_sums[32];
    const unsigned int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const unsigned int i = blockIdx.x * blockDim.x + t;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

extern "C" __global__ void votes(const int* x, unsigned int* out) {
    const unsigned int t = threadIdx.x;
    const int positive = x[t] > 0;
    const unsigned int ballot = __ballot_sync(0xffffffffu, positive);
    const int any = __any_sync(0xffffffffu, positive);
    const int all = __all_sync(0xffffffffu, positive);
    const unsigned int total = __reduce_add_sync(0xffffffffu, (unsigned int)x[t]);
    const int lowest = __reduce_min_sync(0xffffffffu, x[t]);
    const unsigned int same = __match_any_sync(0xffffffffu, x[t] % 3);
    // Inclusive scan within segments of 8 lanes.
    int scan = x[t];
    for (int d = 1; d < 8; d *= 2) {
        const int up = __shfl_up_sync(0xffffffffu, scan, d, 8);
        if (t % 8 >= d) scan += up;
    }
    __syncwarp();
    out[t * 8 + 0] = ballot;
    out[t * 8 + 1] = any;
    out[t * 8 + 2] = all;
    out[t * 8 + 3] = total;
    out[t * 8 + 4] = (unsigned int)lowest;
    out[t * 8 + 5] = same;
    out[t * 8 + 6] = (unsigned int)scan;
    out[t * 8 + 7] = __activemask();
}
"#;

#[test]
fn warp_intrinsics_give_cuda_s_results() {
    if !emulated("warp_intrinsics_give_cuda_s_results") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let n = 1000usize;
    let values: Vec<f32> = (0..n).map(|i| ((i * 37) % 19) as f32 - 9.0).collect();
    let x = on_gpu(&f32s(&values));
    let out = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
    let k = RawKernel::new(WARP_REDUCE, "warp_reduce").unwrap();
    k.launch(
        4u32,
        256u32,
        &[(&x).into(), (&out).into(), (n as i32).into()],
    )
    .unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for b in 0..4 {
        // Small integers: every order of summing them is exact.
        let want: f32 = values[(b * 256).min(n)..((b + 1) * 256).min(n)]
            .iter()
            .sum();
        assert_eq!(got[b], want, "block {b}");
    }

    let ints: Vec<i32> = (0..32).map(|i| (i * 7) % 11 - 3).collect();
    let xi = on_gpu(&Array::from_vec(ints.clone(), &[32]).unwrap());
    let res = on_gpu(&Array::zeros(&[32 * 8], DType::U32).unwrap());
    let k = RawKernel::new(WARP_REDUCE, "votes").unwrap();
    k.launch(1u32, 32u32, &[(&xi).into(), (&res).into()])
        .unwrap();
    let got = res.to_vec::<u32>().unwrap();
    let ballot = (0..32).fold(0u32, |m, l| m | (u32::from(ints[l] > 0) << l));
    let total = ints.iter().fold(0u32, |s, &v| s.wrapping_add(v as u32));
    let lowest = *ints.iter().min().unwrap();
    for t in 0..32 {
        let row = &got[t * 8..t * 8 + 8];
        assert_eq!(row[0], ballot, "ballot, lane {t}");
        assert_eq!(row[1], 1, "any, lane {t}");
        assert_eq!(row[2], 0, "all, lane {t}");
        assert_eq!(row[3], total, "reduce_add, lane {t}");
        assert_eq!(row[4] as i32, lowest, "reduce_min, lane {t}");
        let same = (0..32).fold(0u32, |m, l| {
            m | (u32::from(ints[l] % 3 == ints[t] % 3) << l)
        });
        assert_eq!(row[5], same, "match_any, lane {t}");
        let seg = t / 8 * 8;
        let scan: i32 = ints[seg..=t].iter().sum();
        assert_eq!(row[6] as i32, scan, "segmented scan, lane {t}");
        assert_eq!(row[7], u32::MAX, "activemask, lane {t}");
    }
}

/// A shuffle under a branch that only half the warp takes, with the full warp's mask (the
/// classic bug), and the mask fixed.
fn half_warp_shuffle(mask: &str) -> String {
    format!(
        r#"
extern "C" __global__ void half_warp(float* x) {{
    float v = x[threadIdx.x];
    if (threadIdx.x < 16) {{
        v += __shfl_down_sync({mask}, v, 8);
        x[threadIdx.x] = v;
    }}
}}
"#
    )
}

#[test]
fn a_shuffle_with_a_wrong_mask_is_an_error_naming_the_lanes() {
    if !emulated("a_shuffle_with_a_wrong_mask_is_an_error_naming_the_lanes") {
        return;
    }
    let values: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let x = on_gpu(&f32s(&values));
    let broken = RawKernel::new(&half_warp_shuffle("0xffffffffu"), "half_warp").unwrap();
    let e = failure(broken.launch(1u32, 32u32, &[(&x).into()]));
    assert!(
        e.contains(
            "kernel half_warp: __shfl_down_sync: lane 0 of warp 0 waits for lane 16 (mask \
             0xffffffff), which has exited: an inactive lane named in the mask"
        ),
        "{e}"
    );
    // A mask without the calling lane.
    let e = failure(
        RawKernel::new(&half_warp_shuffle("0x000000ffu"), "half_warp")
            .unwrap()
            .launch(1u32, 32u32, &[(&x).into()]),
    );
    assert!(
        e.contains("lane 8 of warp 0 calls it with mask 0x000000ff, which does not name the lane"),
        "{e}"
    );
    // A full mask in a block whose last warp is partial.
    let e = failure(RawKernel::new(WARP_REDUCE, "warp_reduce").unwrap().launch(
        1u32,
        48u32,
        &[(&x).into(), (&x).into(), 32i32.into()],
    ));
    assert!(
        e.contains("names lane 16 in mask 0xffffffff, but the block has 48 threads"),
        "{e}"
    );

    // The fix: the half warp's mask, and its width, so that lanes 8..16 keep their own value
    // instead of reading lanes outside the mask.
    let fixed = RawKernel::new(&half_warp_shuffle("0x0000ffffu"), "half_warp").unwrap();
    let e = failure(fixed.launch(1u32, 32u32, &[(&x).into()]));
    assert!(
        e.contains("lane 8 of warp 0 reads lane 16, which is not in the mask 0x0000ffff"),
        "{e}"
    );
    let x = on_gpu(&f32s(&values));
    let src = half_warp_shuffle("0x0000ffffu").replace("v, 8)", "v, 8, 16)");
    let fixed = RawKernel::new(&src, "half_warp").unwrap();
    fixed.launch(1u32, 32u32, &[(&x).into()]).unwrap();
    let got = x.to_vec::<f32>().unwrap();
    for (t, &got) in got.iter().enumerate() {
        let want = match t {
            0..8 => values[t] + values[t + 8],
            8..16 => 2.0 * values[t],
            _ => values[t],
        };
        assert_eq!(got, want, "x[{t}]");
    }
}

/// Each thread of a 64-thread block puts its value in shared memory, meets at a `__syncwarp`,
/// and reads another thread's value: mode 0 the whole warp's `__syncwarp()` and its neighbour
/// lane's value; 1 each half warp's own `__syncwarp(half)` and the neighbour in its half; 2 the
/// same `__syncwarp(half)` and the lane 16 away, in the other half; 3 the whole warp's and the
/// thread 32 away, in the other warp.
const EXCHANGE: &str = r#"
extern "C" __global__ void exchange(const float* x, float* y, int mode) {
    __shared__ float buf[64];
    const unsigned int t = threadIdx.x, lane = t % 32;
    buf[t] = x[t];
    __syncwarp(mode == 0 || mode == 3 ? 0xffffffffu : lane < 16 ? 0x0000ffffu : 0xffff0000u);
    y[t] = buf[mode == 2 ? t ^ 16 : mode == 3 ? t ^ 32 : t ^ 1];
}
"#;

/// Lane 0 writes, meets lane 1 (mask 0x3); lane 1 then meets `{second}`; lane 2 reads what
/// lane 0 wrote, ordered after it only if lane 1's second meeting includes it.
fn relay(second: &str) -> String {
    format!(
        r#"
extern "C" __global__ void relay(const float* x, float* y) {{
    __shared__ float buf[1];
    const unsigned int t = threadIdx.x;
    if (t == 0) buf[0] = x[0];
    if (t < 2) __syncwarp(0x3u);
    if (({second} >> t) & 1u) __syncwarp({second});
    if (t == 2) y[0] = buf[0];
}}
"#
    )
}

#[test]
fn a_syncwarp_orders_the_accesses_of_exactly_the_lanes_its_mask_names() {
    if !emulated("a_syncwarp_orders_the_accesses_of_exactly_the_lanes_its_mask_names") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let values: Vec<f32> = (0..64).map(|i| (i * 3 % 17) as f32).collect();
    let x = on_gpu(&f32s(&values));
    let y = on_gpu(&Array::zeros(&[64], DType::F32).unwrap());
    let k = RawKernel::new(EXCHANGE, "exchange").unwrap();
    // A half warp's __syncwarp orders the accesses of its 16 lanes, as the whole warp's does
    // for 32.
    for mode in [0i32, 1] {
        k.launch(1u32, 64u32, &[(&x).into(), (&y).into(), mode.into()])
            .unwrap_or_else(|e| panic!("mode {mode}: {e}"));
        let got = y.to_vec::<f32>().unwrap();
        for (t, &got) in got.iter().enumerate() {
            assert_eq!(got, values[t ^ 1], "mode {mode}: y[{t}]");
        }
    }
    // Nothing orders lane 16's write before lane 0's read: each half met by itself.
    let e = failure(k.launch(1u32, 64u32, &[(&x).into(), (&y).into(), 2i32.into()]));
    assert_shared_race(&e, 16, 16, 0);
    assert!(
        e.contains("no __syncwarp ordering lane 16 before lane 0 of warp 0"),
        "{e}"
    );
    // A __syncwarp orders nothing between warps.
    let e = failure(k.launch(1u32, 64u32, &[(&x).into(), (&y).into(), 3i32.into()]));
    assert_shared_race(&e, 32, 32, 0);
    assert!(!e.contains("__syncwarp"), "{e}");

    // The order is transitive: lane 0 -> lane 1 (0x3), lane 1 -> lane 2 (0x6).
    let y = on_gpu(&Array::zeros(&[1], DType::F32).unwrap());
    let args = [(&x).into(), (&y).into()];
    let relay_with = |second| RawKernel::new(&relay(second), "relay").unwrap();
    relay_with("0x6u").launch(1u32, 32u32, &args).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![values[0]]);
    // Lane 2 meeting lane 3 instead learns nothing of lane 0's write.
    let e = failure(relay_with("0xcu").launch(1u32, 32u32, &args));
    assert_shared_race(&e, 0, 0, 2);
    assert!(
        e.contains("no __syncwarp ordering lane 0 before lane 2 of warp 0"),
        "{e}"
    );
}

/// Asserts that `e` reports a race on element `element` of the shared `buf`, thread `writer`
/// of block 0 having written it and thread `reader` then read it.
fn assert_shared_race(e: &str, element: usize, writer: u32, reader: u32) {
    assert!(
        e.contains(&format!("data race on __shared__ `buf`, element {element}"))
            && e.contains(&format!(
                "thread ({writer}, 0, 0) of block (0, 0, 0) wrote it"
            ))
            && e.contains(&format!(
                "thread ({reader}, 0, 0) of block (0, 0, 0) read it"
            )),
        "{e}"
    );
}

/// Asserts that `e` names two writes of the racing element, by threads 1 and 0 of block 0.
fn assert_threads_0_and_1_wrote(e: &str) {
    assert!(
        e.contains("thread (1, 0, 0) of block (0, 0, 0) wrote it")
            && e.contains("thread (0, 0, 0) of block (0, 0, 0) wrote it"),
        "{e}"
    );
}

/// Kernels that reach their arrays through a table of pointers in device memory: `fill`
/// stores two arrays' addresses in `table`; `sum_through` adds element `t + shift` of the
/// first to element `t` of the second; `write_through` has every thread write element 0 of the
/// second; `odds_through` has thread `t` write element `2t + 1` of the first.
const THROUGH_TABLE: &str = r#"
extern "C" __global__ void fill(float* a, float* b, float** table) {
    if (threadIdx.x == 0) {
        table[0] = a;
        table[1] = b;
    }
}
extern "C" __global__ void sum_through(float* const* table, float* out, int shift) {
    const int t = threadIdx.x;
    out[t] = table[0][t + shift] + table[1][t];
}
extern "C" __global__ void write_through(float* const* table) {
    table[1][0] = (float)threadIdx.x;
}
extern "C" __global__ void odds_through(float* const* table) {
    table[0][2 * threadIdx.x + 1] = -(float)threadIdx.x;
}
"#;

/// A kernel of [`THROUGH_TABLE`].
fn through(name: &str) -> RawKernel {
    RawKernel::new(THROUGH_TABLE, name).unwrap()
}

/// A table in device memory holding the addresses of `a` and `b` (stored by a kernel).
fn table_of(a: &Array, b: &Array) -> Array {
    let table = on_gpu(&Array::zeros(&[2], DType::U64).unwrap());
    through("fill")
        .launch(1u32, 1u32, &[a.into(), b.into(), (&table).into()])
        .unwrap();
    table
}

/// `sum_through` of `table`, shifted by `shift`, into `out` (4 elements).
fn sum_through(table: &Array, out: &Array, shift: i32) -> kusari::Result<()> {
    through("sum_through").launch(1u32, 4u32, &[table.into(), out.into(), shift.into()])
}

#[test]
fn memory_reached_through_pointers_stored_in_memory_is_checked() {
    if !emulated("memory_reached_through_pointers_stored_in_memory_is_checked") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let a_values = [1.0, 2.0, 3.0, 4.0];
    let b_values = [10.0, 20.0, 30.0, 40.0];
    let (a, b) = (on_gpu(&f32s(&a_values)), on_gpu(&f32s(&b_values)));
    let out = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
    let sum = |table: &Array, shift: i32| sum_through(table, &out, shift);
    let both = table_of(&a, &b);
    sum(&both, 0).unwrap();
    let want: Vec<f32> = a_values.iter().zip(&b_values).map(|(x, y)| x + y).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);

    let reached = "which the kernel reached through a pointer stored in memory (no parameter points \
                   into it)";
    // x[-1] through the table.
    let e = failure(sum(&both, -1));
    assert!(e.contains("out-of-bounds access"), "{e}");
    assert!(e.contains(reached) && e.contains("element -1"), "{e}");
    assert!(e.contains("thread (0, 0, 0) of block (0, 0, 0)"), "{e}");
    // An array whose odd elements nothing wrote, read through the table.
    let evens = EVENS.call().arg(&a).run().unwrap().remove(0);
    let e = failure(sum(&table_of(&evens, &b), 0));
    assert!(e.contains("read of uninitialized memory"), "{e}");
    assert!(
        e.contains(reached) && e.contains("element 1 (4-byte elements)"),
        "{e}"
    );
    assert!(e.contains("thread (1, 0, 0) of block (0, 0, 0)"), "{e}");
    // Two threads writing one element through the table.
    let e = failure(through("write_through").launch(1u32, 2u32, &[(&both).into()]));
    assert!(e.contains("data race on the allocation at"), "{e}");
    assert!(
        e.contains(reached) && e.contains("element 0 (4-byte elements)"),
        "{e}"
    );
    assert_threads_0_and_1_wrote(&e);
    // One thread writing it is no race, and what it wrote counts as written.
    through("write_through")
        .launch(1u32, 1u32, &[(&both).into()])
        .unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap()[0], 0.0);
}

#[test]
fn what_launches_without_the_init_check_wrote_is_not_called_unwritten() {
    if !emulated("what_launches_without_the_init_check_wrote_is_not_called_unwritten") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let x = [1.0, 2.0, 3.0, 4.0];
    let b = on_gpu(&f32s(&[10.0, 20.0, 30.0, 40.0]));
    let out = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
    let sum = |table: &Array| sum_through(table, &out, 0);
    // `x` at even elements and `odds_through`'s `-t` at odd ones, plus `b`.
    let want = [1.0 + 10.0, -0.0 + 20.0, 3.0 + 30.0, -1.0 + 40.0];
    // The odd elements of `evens` are written by a launch without checks, which reaches them
    // only through the table: the checked read after it must not call them unwritten.
    let evens = EVENS
        .call()
        .arg(&on_gpu(&f32s(&x)))
        .run()
        .unwrap()
        .remove(0);
    let table = table_of(&evens, &b);
    {
        let _off = sanitizer::scoped(Checks::NONE);
        through("odds_through")
            .launch(1u32, 2u32, &[(&table).into()])
            .unwrap();
    }
    sum(&table).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
    // What the thread allocates after that launch is tracked again: its unwritten odd elements,
    // read through a table, are found.
    let fresh = EVENS
        .call()
        .arg(&on_gpu(&f32s(&x)))
        .run()
        .unwrap()
        .remove(0);
    let fresh_table = table_of(&fresh, &b);
    let e = failure(sum(&fresh_table));
    assert!(e.contains("read of uninitialized memory"), "{e}");
    assert!(e.contains("element 1 (4-byte elements)"), "{e}");
    // A launch with some checks but not `init` records what it writes, as a checked one does:
    // the odd elements it writes are read as written, and nothing is untracked by it.
    {
        let _races = sanitizer::scoped(Checks {
            races: true,
            ..Checks::NONE
        });
        through("odds_through")
            .launch(1u32, 1u32, &[(&fresh_table).into()])
            .unwrap();
    }
    let e = failure(sum(&fresh_table));
    assert!(
        e.contains("element 3 (4-byte elements)") && e.contains("thread (3, 0, 0)"),
        "{e}"
    );
    through("odds_through")
        .launch(1u32, 2u32, &[(&fresh_table).into()])
        .unwrap();
    sum(&fresh_table).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
}

/// Writes only the even elements of its new output.
static EVENS: kusari::ElementwiseKernel =
    kusari::ElementwiseKernel::new("evens", "T x", "T y", "", "if (i % 2 == 0) y = x;");

#[test]
fn const_inputs_are_read_without_a_race_shadow_and_still_checked() {
    if !emulated("const_inputs_are_read_without_a_race_shadow_and_still_checked") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let src = r#"
extern "C" __global__ void shift(const float* x, float* y) {
    const int i = threadIdx.x;
    y[i] = x[i + 1];
}
extern "C" __global__ void scale(const float* x, float* y) {
    y[threadIdx.x] = 2.0f * x[threadIdx.x];
}
extern "C" __global__ void sneaky(const float* x, float* y) {
    y[threadIdx.x] = x[threadIdx.x];
    ((float*)x)[threadIdx.x] = 0.0f;
}
"#;
    let values: Vec<f32> = (0..33).map(|i| (i * 3 % 7) as f32).collect();
    let a = on_gpu(&f32s(&values));
    let b = on_gpu(&Array::zeros(&[33], DType::F32).unwrap());
    // A const input that aliases the output is tracked like any written memory: in place,
    // thread 0 reads a[1] and thread 1 writes it, unordered.
    let shift = RawKernel::new(src, "shift").unwrap();
    let e = failure(shift.launch(1u32, 32u32, &[(&a).into(), (&a).into()]));
    assert!(
        e.contains("kernel shift: data race on parameter 0, element 1 (4-byte elements)"),
        "{e}"
    );
    assert!(
        e.contains("thread (1, 0, 0) of block (0, 0, 0) wrote it at shift:4")
            && e.contains("thread (0, 0, 0) of block (0, 0, 0) read it at shift:4"),
        "{e}"
    );
    // Out of place it is right.
    shift
        .launch(1u32, 32u32, &[(&a).into(), (&b).into()])
        .unwrap();
    let got = b.to_vec::<f32>().unwrap();
    assert_eq!(&got[..32], &values[1..]);
    // A write through a cast-away const is an error naming the memory and the line.
    let sneaky = RawKernel::new(src, "sneaky").unwrap();
    let e = failure(sneaky.launch(1u32, 32u32, &[(&a).into(), (&b).into()]));
    assert!(
        e.contains("kernel sneaky: thread (0, 0, 0) of block (0, 0, 0) wrote parameter 0, element 0 (4-byte elements) at sneaky:11"),
        "{e}"
    );
    assert!(e.contains("is a pointer to const"), "{e}");
    // A const input is still checked for reads of bytes nothing wrote: `half` has only its
    // even elements written (its odd ones are poison).
    let half = EVENS.call().arg(&a).run().unwrap().remove(0);
    let scale = RawKernel::new(src, "scale").unwrap();
    let e = failure(scale.launch(1u32, 32u32, &[(&half).into(), (&b).into()]));
    assert!(
        e.contains("kernel scale: read of uninitialized memory"),
        "{e}"
    );
    assert!(
        e.contains("read parameter 0, element 1 (4-byte elements) at scale:7"),
        "{e}"
    );
    // Fully written, it passes with the right values (a fresh copy: the failed in-place
    // launch above wrote some of `a` before it was stopped, as a GPU's would).
    let a = on_gpu(&f32s(&values));
    scale
        .launch(1u32, 32u32, &[(&a).into(), (&b).into()])
        .unwrap();
    let got = b.to_vec::<f32>().unwrap();
    for i in 0..32 {
        assert_eq!(got[i], 2.0 * values[i], "b[{i}]");
    }
}

/// Kernels indexing arrays whose size their type gives, which no allocation's bounds cover:
/// `weigh` a `__constant__` table at `t + shift`, `rotate` a `__shared__` array at `t + shift`
/// (modulo `wrap`), `window_sum` a thread's own array of 4 over its first `n` elements.
const FIXED_ARRAYS: &str = r#"
__constant__ float taps[4] = {1.0f, 2.0f, 3.0f, 4.0f};
extern "C" __global__ void weigh(const float* x, float* out, int shift) {
    const int t = threadIdx.x;
    out[t] = x[t] * taps[t + shift];
}
extern "C" __global__ void rotate(const float* x, float* out, int shift, int wrap) {
    __shared__ float s[32];
    const int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    out[t] = s[(t + shift) % wrap];
}
extern "C" __global__ void window_sum(const float* x, float* out, int n) {
    float window[4];
    for (int k = 0; k < 4; ++k) window[k] = x[threadIdx.x + k];
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += window[k];
    out[threadIdx.x] = sum;
}
"#;

#[test]
fn indices_outside_constant_shared_and_local_arrays_are_caught() {
    if !emulated("indices_outside_constant_shared_and_local_arrays_are_caught") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let kernel = |name| RawKernel::new(FIXED_ARRAYS, name).unwrap();
    let values: Vec<f32> = (0..36).map(|i| (i * 5 % 11) as f32 - 3.0).collect();
    let x = on_gpu(&f32s(&values));
    let out = on_gpu(&Array::zeros(&[32], DType::F32).unwrap());
    let stopped = "the access was stopped before it happened";

    // A __constant__ table of 4, read at t + 1 by 4 threads: thread 3 reads taps[4].
    let weigh = |threads: u32, shift: i32| {
        kernel("weigh").launch(1u32, threads, &[(&x).into(), (&out).into(), shift.into()])
    };
    let e = failure(weigh(4, 1));
    assert!(
        e.contains(
            "kernel weigh: index out of bounds: thread (3, 0, 0) of block (0, 0, 0) used index 4 \
             into an array of type 'float [4]', whose indices run from 0 to 3 at weigh:5"
        ),
        "{e}"
    );
    assert!(e.contains(stopped), "{e}");
    // An index before the table is caught as well.
    let e = failure(weigh(4, -1));
    assert!(
        e.contains("thread (0, 0, 0) of block (0, 0, 0) used index -1"),
        "{e}"
    );
    weigh(3, 1).unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for t in 0..3 {
        assert_eq!(got[t], values[t] * (t + 2) as f32, "out[{t}]");
    }

    // A __shared__ array of 32 read one past the end by the last thread: without the check the
    // read lands in whatever the block's shared memory holds next.
    let rotate = |wrap: i32| {
        kernel("rotate").launch(
            1u32,
            32u32,
            &[(&x).into(), (&out).into(), 1i32.into(), wrap.into()],
        )
    };
    let e = failure(rotate(33));
    assert!(
        e.contains(
            "kernel rotate: index out of bounds: thread (31, 0, 0) of block (0, 0, 0) used index \
             32 into an array of type 'float [32]', whose indices run from 0 to 31 at rotate:12"
        ),
        "{e}"
    );
    rotate(32).unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for t in 0..32 {
        assert_eq!(got[t], values[(t + 1) % 32], "out[{t}]");
    }

    // A thread's own array of 4 summed over 5 elements.
    let window =
        |n: i32| kernel("window_sum").launch(1u32, 32u32, &[(&x).into(), (&out).into(), n.into()]);
    let e = failure(window(5));
    assert!(
        e.contains(
            "kernel window_sum: index out of bounds: thread (0, 0, 0) of block (0, 0, 0) used \
             index 4 into an array of type 'float [4]', whose indices run from 0 to 3 at \
             window_sum:18"
        ),
        "{e}"
    );
    window(4).unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for t in 0..32 {
        let want: f32 = values[t..t + 4].iter().sum();
        assert_eq!(got[t], want, "out[{t}]");
    }

    // It is the bounds check's: with races and initialization alone, the read past the
    // __constant__ table goes unseen (it reads what the library holds next), as on a GPU.
    let _races = sanitizer::scoped(Checks {
        bounds: false,
        ..Checks::ALL
    });
    weigh(4, 1).unwrap();
}

/// Stores `a`'s address at `table[k]`; `touch_each` has thread `t` read element 1 of array `t`
/// of the table (element -1 for thread `bad`), then every thread write element 0 of array
/// `racy` (when not negative).
const MANY_REACHED: &str = r#"
extern "C" __global__ void store(float* a, float** table, int k) {
    table[k] = a;
}
extern "C" __global__ void touch_each(float* const* table, float* out, int bad, int racy) {
    const int t = threadIdx.x;
    out[t] = table[t][t == bad ? -1 : 1];
    if (racy >= 0) table[racy][0] = (float)t;
}
"#;

#[test]
fn every_allocation_a_kernel_reaches_through_stored_pointers_is_checked_however_many() {
    if !emulated(
        "every_allocation_a_kernel_reaches_through_stored_pointers_is_checked_however_many",
    ) {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    let kernel = |name| RawKernel::new(MANY_REACHED, name).unwrap();
    // 100 arrays in a table: more than the 64 a launch tracked before.
    let n = 100usize;
    let arrays: Vec<Array> = (0..n)
        .map(|k| on_gpu(&f32s(&[k as f32, k as f32 + 0.5])))
        .collect();
    let table = on_gpu(&Array::zeros(&[n], DType::U64).unwrap());
    for (k, a) in arrays.iter().enumerate() {
        kernel("store")
            .launch(1u32, 1u32, &[a.into(), (&table).into(), (k as i32).into()])
            .unwrap();
    }
    let address = table.to_vec::<u64>().unwrap();
    let out = on_gpu(&Array::zeros(&[n], DType::F32).unwrap());
    let touch = |bad: i32, racy: i32| {
        kernel("touch_each").launch(
            1u32,
            n as u32,
            &[(&table).into(), (&out).into(), bad.into(), racy.into()],
        )
    };
    touch(-1, -1).unwrap();
    let want: Vec<f32> = (0..n).map(|k| k as f32 + 0.5).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);

    let reached = |k: usize| {
        format!(
            "the allocation at {:#x}, which the kernel reached through a pointer stored in \
             memory (no parameter points into it)",
            address[k]
        )
    };
    // Thread 80 reads before its array, the 81st the launch reaches.
    let e = failure(touch(80, -1));
    assert!(e.contains("out-of-bounds access"), "{e}");
    assert!(
        e.contains("thread (80, 0, 0) of block (0, 0, 0) read 4 bytes"),
        "{e}"
    );
    assert!(e.contains(&format!("{}, element -1", reached(80))), "{e}");
    // Every thread writing element 0 of array 99 (threads 0 and 1 first, one after the other,
    // with no barrier between them).
    let e = failure(touch(-1, 99));
    assert!(
        e.contains(&format!("data race on {}, element 0", reached(99))),
        "{e}"
    );
    assert_threads_0_and_1_wrote(&e);
}

#[test]
fn races_through_any_of_a_kernel_s_many_pointer_parameters_are_caught() {
    if !emulated("races_through_any_of_a_kernel_s_many_pointer_parameters_are_caught") {
        return;
    }
    let _checks = sanitizer::scoped(Checks::ALL);
    // 70 pointer parameters (more than the 64 whose races were checked before); every thread
    // writes element 0 of the one `which` names.
    let n = 70;
    let params: Vec<String> = (0..n).map(|k| format!("float* p{k}")).collect();
    let cases: String = (0..n)
        .map(|k| format!("        case {k}: p{k}[0] = 100.0f + threadIdx.x; break;\n"))
        .collect();
    let src = format!(
        "extern \"C\" __global__ void many({}, int which) {{\n    switch (which) {{\n{cases}    }}\n}}\n",
        params.join(", ")
    );
    let kernel = RawKernel::new(&src, "many").unwrap();
    let arrays: Vec<Array> = (0..n).map(|k| on_gpu(&f32s(&[k as f32]))).collect();
    let launch = |threads: u32, which: i32| {
        let mut args: Vec<kusari::KernelArg> = arrays.iter().map(Into::into).collect();
        args.push(which.into());
        kernel.launch(1u32, threads, &args)
    };
    // One thread writing it is no race.
    launch(1, 69).unwrap();
    assert_eq!(arrays[69].to_vec::<f32>().unwrap(), vec![100.0]);
    assert_eq!(arrays[68].to_vec::<f32>().unwrap(), vec![68.0]);
    // Each parameter in turn (the launch orders their allocations by address, so which of
    // them were past the 64th depends on where they lie).
    for which in 0..n {
        let e = failure(launch(2, which));
        assert!(
            e.contains(&format!(
                "kernel many: data race on parameter {which}, element 0 (4-byte elements)"
            )),
            "{e}"
        );
        assert_threads_0_and_1_wrote(&e);
    }
}
