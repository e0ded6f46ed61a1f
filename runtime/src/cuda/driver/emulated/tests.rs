//! The emulated device's execution model and launch checks, with hand-written kernels launched
//! through the same seam and upload path a GPU launch takes.

use std::sync::Arc;

use kusari_kernels::codegen::KernelSource;

use crate::cuda::device::{CudaDevice, device};
use crate::cuda::launch::{KernelArgs, Loaded, launch_source};
use crate::error::Error;

/// Emulated device `ordinal`, or `None` after printing why the test skips (no C++ compiler; a
/// failure under `KUSARI_REQUIRE_GPU`).
fn dev(ordinal: usize, test: &str) -> Option<Arc<CudaDevice>> {
    crate::cuda::emulate(2).unwrap();
    crate::testing::cuda_or_skip(test)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|_| device(ordinal, test).unwrap())
}

fn kernel(dev: &CudaDevice, name: &str, source: &str) -> crate::Result<Arc<Loaded>> {
    let src = KernelSource {
        entry: name.to_string(),
        source: source.to_string(),
    };
    launch_source(dev, name, &src)
}

fn upload_f32(dev: &CudaDevice, v: &[f32]) -> u64 {
    let p = dev.backend.alloc(v.len() * 4).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    // SAFETY: the allocation holds `v.len()` floats.
    unsafe { dev.backend.copy_htod(p, &bytes) }.unwrap();
    p
}

fn download_f32(dev: &CudaDevice, p: u64, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 4];
    // SAFETY: the allocation holds `n` floats.
    unsafe { dev.backend.copy_dtoh(&mut bytes, p) }.unwrap();
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Each thread writes its slot of shared memory, waits at the barrier, then reads its
/// neighbour's: without a real barrier (threads run one after another) thread t would read
/// slot t + 1 before thread t + 1 wrote it. Then a tree sum over shared memory.
const ROTATE_AND_SUM: &str = r#"
extern "C" __global__ void rotate_and_sum(const float* in, float* rotated, float* sums) {
  __shared__ float buf[256];
  const unsigned int t = threadIdx.x;
  const unsigned int base = blockIdx.x * 256;
  buf[t] = in[base + t];
  __syncthreads();
  const float next = buf[(t + 1) % 256];
  __syncthreads();
  rotated[base + t] = next;
  for (unsigned int s = 128; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = buf[0];
}
"#;

#[test]
fn barriers_are_real_and_shared_memory_is_per_block() {
    let Some(dev) = dev(0, "barriers_are_real_and_shared_memory_is_per_block") else {
        return;
    };
    let k = kernel(&dev, "rotate_and_sum", ROTATE_AND_SUM).unwrap();
    let blocks = 300usize;
    let input: Vec<f32> = (0..blocks * 256).map(|i| (i % 977) as f32).collect();
    let pin = upload_f32(&dev, &input);
    let prot = dev.backend.alloc(blocks * 256 * 4).unwrap();
    let psum = dev.backend.alloc(blocks * 4).unwrap();
    k.launch(
        &dev,
        blocks as u32,
        256,
        &mut [pin, prot, psum],
        "rotate_and_sum",
    )
    .unwrap();
    let rotated = download_f32(&dev, prot, blocks * 256);
    let sums = download_f32(&dev, psum, blocks);
    for b in 0..blocks {
        for t in 0..256 {
            assert_eq!(
                rotated[b * 256 + t],
                input[b * 256 + (t + 1) % 256],
                "block {b} thread {t}"
            );
        }
        let want: f32 = input[b * 256..(b + 1) * 256].iter().sum();
        assert_eq!(sums[b], want, "block {b}");
    }
    // SAFETY: allocated above, freed once.
    unsafe {
        for p in [pin, prot, psum] {
            dev.backend.free(p);
        }
    }
}

#[test]
fn a_barrier_some_threads_skip_is_an_error() {
    let Some(dev) = dev(0, "a_barrier_some_threads_skip_is_an_error") else {
        return;
    };
    let k = kernel(
        &dev,
        "divergent",
        r#"extern "C" __global__ void divergent(float* out) {
             if (threadIdx.x < 100) { __syncthreads(); }
             out[threadIdx.x] = 1.0f;
           }"#,
    )
    .unwrap();
    let p = dev.backend.alloc(256 * 4).unwrap();
    let e = k
        .launch(&dev, 1, 256, &mut [p], "divergent")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("__syncthreads was not reached by every thread"),
        "{e}"
    );
    assert!(e.contains("divergent"), "{e}");
    // SAFETY: allocated above, freed once.
    unsafe { dev.backend.free(p) };
}

#[test]
fn a_launch_after_a_failed_one_starts_its_threads_afresh() {
    let Some(dev) = dev(0, "a_launch_after_a_failed_one_starts_its_threads_afresh") else {
        return;
    };
    // Diverging leaves the block's fibers parked at a barrier; the next launch must not resume
    // them there.
    let k = kernel(
        &dev,
        "maybe_divergent",
        r#"extern "C" __global__ void maybe_divergent(float* out, long long diverge) {
             if (!diverge || threadIdx.x < 100) { __syncthreads(); }
             out[threadIdx.x] = (float)threadIdx.x;
             __syncthreads();
             out[threadIdx.x] += 1.0f;
           }"#,
    )
    .unwrap();
    let p = dev.backend.alloc(256 * 4).unwrap();
    for _ in 0..2 {
        let e = k.launch(&dev, 1, 256, &mut [p, 1], "maybe_divergent");
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("not reached by every thread")
        );
        k.launch(&dev, 1, 256, &mut [p, 0], "maybe_divergent")
            .unwrap();
        let want: Vec<f32> = (0..256).map(|t| t as f32 + 1.0).collect();
        assert_eq!(download_f32(&dev, p, 256), want);
    }
    // SAFETY: allocated above, freed once.
    unsafe { dev.backend.free(p) };
}

/// The number of memory mappings of this process.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

#[test]
fn kernel_libraries_share_the_host_threads_fiber_stacks() {
    let Some(dev) = dev(0, "kernel_libraries_share_the_host_threads_fiber_stacks") else {
        return;
    };
    // Each library used to map a stack (and its guard page) per thread of a block, for the life
    // of the process: 512 mappings per library here, so that a process with a few hundred
    // kernels reached the kernel's limit on mappings (65,530 by default).
    let libraries = 16;
    let kernels: Vec<_> = (0..libraries)
        .map(|i| {
            let name = format!("rotate_and_sum_{i}");
            let src = ROTATE_AND_SUM.replace("rotate_and_sum(", &format!("{name}("));
            (name.clone(), kernel(&dev, &name, &src).unwrap())
        })
        .collect();
    let input: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let pin = upload_f32(&dev, &input);
    let prot = dev.backend.alloc(256 * 4).unwrap();
    let psum = dev.backend.alloc(4).unwrap();
    let before = mappings();
    for (name, k) in &kernels {
        k.launch(&dev, 1, 256, &mut [pin, prot, psum], name)
            .unwrap();
        assert_eq!(
            download_f32(&dev, psum, 1),
            vec![(0..256).sum::<i32>() as f32]
        );
    }
    let grown = mappings().saturating_sub(before);
    // This thread ran every launch (one block each) on one set of 256 stacks.
    assert_eq!(super::run::fiber_stacks_of_this_thread(), 256);
    // At most that set (512 mappings with the guard pages) plus whatever tests running
    // meanwhile map (other threads' stacks among them); the old way took 16 * 512.
    assert!(
        grown < libraries * 512 / 2,
        "{libraries} kernel libraries added {grown} memory mappings"
    );
    // SAFETY: allocated above, freed once.
    unsafe {
        for p in [pin, prot, psum] {
            dev.backend.free(p);
        }
    }
}

#[test]
fn every_thread_and_block_index_of_a_3d_launch_runs_once() {
    let Some(dev) = dev(1, "every_thread_and_block_index_of_a_3d_launch_runs_once") else {
        return;
    };
    let k = kernel(
        &dev,
        "ids",
        r#"extern "C" __global__ void ids(int* out) {
             const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
             const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
             atomicAdd(&out[block * (blockDim.x * blockDim.y * blockDim.z) + thread], 1);
             atomicAdd(&out[0], 0);
           }"#,
    )
    .unwrap();
    let (grid, block) = ([3u32, 2, 2], [4u32, 2, 3]);
    let n = 12 * 24;
    let p = dev.backend.alloc(n * 4).unwrap();
    // SAFETY: the buffer holds `n` ints.
    unsafe { dev.backend.memset(p, 0, n * 4) }.unwrap();
    let mut args = KernelArgs::default();
    args.pointer(p);
    // SAFETY: one pointer parameter, valid for `n` ints.
    unsafe { k.launch_dims(&dev, grid, block, &mut args, "ids") }.unwrap();
    let mut bytes = vec![0u8; n * 4];
    // SAFETY: as above.
    unsafe { dev.backend.copy_dtoh(&mut bytes, p) }.unwrap();
    let counts: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    // SAFETY: allocated above, freed once.
    unsafe { dev.backend.free(p) };
}

#[test]
fn a_parameter_packed_in_the_wrong_width_is_caught() {
    let Some(dev) = dev(0, "a_parameter_packed_in_the_wrong_width_is_caught") else {
        return;
    };
    let k = kernel(
        &dev,
        "scale",
        r#"extern "C" __global__ void scale(float* x, const long long n, const float a) {
             for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] *= a;
           }"#,
    )
    .unwrap();
    let p = upload_f32(&dev, &[1.0, 2.0, 3.0]);
    let mut right = KernelArgs::default();
    right
        .pointer(p)
        .long(3)
        .value(u64::from(2.0f32.to_bits()), 4);
    // SAFETY: the parameters match the kernel.
    unsafe { k.launch_args(&dev, 1, 32, &mut right, "scale") }.unwrap();
    assert_eq!(download_f32(&dev, p, 3), [2.0, 4.0, 6.0]);

    // `n` packed as a 4-byte int: on a GPU the kernel would read 4 bytes of garbage with it.
    let mut wrong = KernelArgs::default();
    wrong
        .pointer(p)
        .value(3, 4)
        .value(u64::from(2.0f32.to_bits()), 4);
    // SAFETY: the emulated device checks the widths before running anything.
    let e = unsafe { k.launch_args(&dev, 1, 32, &mut wrong, "scale") }
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("parameter 1 is 8 bytes wide on the device, but the launch packed 4 bytes"),
        "{e}"
    );
    let mut short = KernelArgs::default();
    short.pointer(p).long(3);
    // SAFETY: as above.
    let e = unsafe { k.launch_args(&dev, 1, 32, &mut short, "scale") }
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("takes 3 parameters but the launch passed 2"),
        "{e}"
    );
    assert_eq!(download_f32(&dev, p, 3), [2.0, 4.0, 6.0], "nothing ran");
    // SAFETY: allocated above, freed once.
    unsafe { dev.backend.free(p) };
}

#[test]
fn pointers_must_address_memory_of_the_launching_device() {
    let (Some(d0), Some(d1)) = (
        dev(0, "pointers_must_address_memory_of_the_launching_device"),
        dev(1, "pointers_must_address_memory_of_the_launching_device"),
    ) else {
        return;
    };
    let k = kernel(
        &d0,
        "touch",
        r#"extern "C" __global__ void touch(float* x) { x[threadIdx.x] = 1.0f; }"#,
    )
    .unwrap();
    let on1 = d1.backend.alloc(64).unwrap();
    let e = k
        .launch(&d0, 1, 1, &mut [on1], "touch")
        .unwrap_err()
        .to_string();
    assert!(e.contains("memory of cuda:1, not of cuda:0"), "{e}");
    let host = [0f32; 4];
    let e = k
        .launch(&d0, 1, 1, &mut [host.as_ptr() as u64], "touch")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not memory of any emulated device"), "{e}");
    // SAFETY: allocated above, freed once.
    unsafe { d1.backend.free(on1) };
}

#[test]
fn launch_limits_and_what_is_not_emulated_are_errors_naming_them() {
    let Some(dev) = dev(
        0,
        "launch_limits_and_what_is_not_emulated_are_errors_naming_them",
    ) else {
        return;
    };
    let k = kernel(
        &dev,
        "noop",
        r#"extern "C" __global__ void noop(float* x) {}"#,
    )
    .unwrap();
    let p = dev.backend.alloc(4).unwrap();
    let e = k.launch(&dev, 1, 2048, &mut [p], "noop").unwrap_err();
    assert!(e.to_string().contains("CUDA_ERROR_INVALID_VALUE"), "{e}");
    let e = k.launch(&dev, 0, 32, &mut [p], "noop").unwrap_err();
    assert!(e.to_string().contains("no zero dimension"), "{e}");
    // SAFETY: allocated above, freed once.
    unsafe { dev.backend.free(p) };

    let e = kernel(
        &dev,
        "nap",
        r#"extern "C" __global__ void nap(float* x) {
             __nanosleep(100);
             x[threadIdx.x] = 1.0f;
           }"#,
    )
    .err()
    .expect("sleeping is not emulated");
    assert!(matches!(e, Error::KernelCompile { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("does not support sleeping (`__nanosleep`)"),
        "{msg}"
    );

    let e = kernel(
        &dev,
        "broken",
        "extern \"C\" __global__ void broken(float* x) {\n  x[0] = undefined_name;\n}\n",
    )
    .err()
    .expect("a compile error");
    let msg = e.to_string();
    // NVRTC, where it loads, compiles the kernel first and reports it; else the host compiler.
    let at_line_2 = if kusari_kernels::compile::nvrtc_available() {
        "broken.cu(2)"
    } else {
        "kernel:2"
    };
    assert!(
        msg.contains("undefined_name") && msg.contains(at_line_2),
        "{msg}"
    );
}

/// Every thread writes element 0 of `out`: a race whenever a block has two threads.
const ALL_WRITE_ONE: &str = r#"
extern "C" __global__ void all_write_one(float* out) {
  out[0] = (float)threadIdx.x;
}
"#;

#[test]
fn races_on_memory_past_the_shadow_budget_go_unchecked_with_a_warning() {
    use super::checks::SHADOW_BUDGET;
    use crate::cuda::sanitizer::{self, Checks};
    let Some(dev) = dev(
        0,
        "races_on_memory_past_the_shadow_budget_go_unchecked_with_a_warning",
    ) else {
        return;
    };
    let _checks = sanitizer::scoped(Checks::ALL);
    let k = kernel(&dev, "all_write_one", ALL_WRITE_ONE).unwrap();
    // 1 KiB (a 10 KiB shadow) and 1 MiB (a 10 MiB shadow).
    let small = upload_f32(&dev, &[0.0; 256]);
    let large = upload_f32(&dev, &vec![0.0; 1 << 18]);
    let run = |p: u64| k.launch(&dev, 1, 2, &mut [p], "all_write_one");
    SHADOW_BUDGET.with(|b| b.set(Some(4 << 20)));
    let e = run(small).unwrap_err().to_string();
    assert!(e.contains("data race on parameter 0, element 0"), "{e}");
    // Past the budget: the race goes unseen, and a warning says so.
    run(large).unwrap();
    let noted: Vec<String> = sanitizer::take_reports()
        .into_iter()
        .filter(|r| r.contains("all_write_one"))
        .collect();
    assert_eq!(noted.len(), 1, "{noted:?}");
    assert!(
        noted[0].contains(
            "kernel all_write_one: races on parameter 0 (1 MiB) go unchecked: its race shadow"
        ) && noted[0].contains("budget of 4 MiB"),
        "{noted:?}"
    );
    // With the machine's budget (a quarter of its memory), a 1 MiB allocation is checked, and
    // one of 65 MiB (a 650 MiB shadow, of which the kernel touches one page) where the budget
    // holds its shadow: there is no fixed limit on an allocation's size.
    SHADOW_BUDGET.with(|b| b.set(None));
    let e = run(large).unwrap_err().to_string();
    assert!(e.contains("data race on parameter 0, element 0"), "{e}");
    let huge_bytes = 65usize << 20;
    let huge = dev.backend.alloc(huge_bytes).unwrap();
    // SAFETY: the allocation holds `huge_bytes` bytes.
    unsafe { dev.backend.memset(huge, 0, huge_bytes) }.unwrap();
    match run(huge) {
        Err(e) => assert!(e.to_string().contains("data race on parameter 0"), "{e}"),
        Ok(()) => assert!(
            super::checks::shadow_budget() < 10 * huge_bytes as u64,
            "a race on the 65 MiB allocation went unchecked within the budget"
        ),
    }
    // SAFETY: allocated above, freed once.
    unsafe {
        for p in [small, large, huge] {
            dev.backend.free(p);
        }
    }
}
