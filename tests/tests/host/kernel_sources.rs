//! Every CUDA kernel kusari can launch compiles with NVRTC, for Ampere (`compute_80`) and Hopper
//! (`compute_90`), on the contiguous path (32-bit indexing) and the strided one (64-bit
//! indexing). No GPU is needed. Without NVRTC the test prints why it skips, unless
//! `KUSARI_REQUIRE_NVRTC=1` (set by `.ci/run`), which makes a missing NVRTC a failure.
//!
//! The kernels, each in every dtype it is launched with:
//! - the example ops' `#[forward_gpu(..)]` kernels, in float32 and float64, and the example
//!   MulAdd kernels in float16 and bfloat16 too;
//! - the kernels of kusari's own array operations ([`kusari::array_kernels`]), in each dtype
//!   listed for them: the built-in functions run these, and declare no kernels of their own;
//! - the built-in reductions ([`kusari::array_reduction_kernels`]: sum, max and min, which
//!   `mean` uses too), in each dtype they run in;
//! - in a test of their own, the test kernels with a preamble, `loop_prep` and `after_loop`
//!   and the all-`raw` one ([`kusari_tests::code_part_kernels`]), in float32 and float64;
//! - in another, the kernels the tests launch with the full call
//!   ([`kusari_tests::launch_form_kernels`]), in float32, float64 and int64, and the strided variants
//!   with collapsed and uncollapsed axes they run.
//!
//! The expected number of compilations is computed from those lists, so a kernel that silently
//! drops out fails the test. Compilation runs on a few threads: NVRTC compiles separate programs
//! concurrently.

use std::sync::Mutex;
use std::time::Instant;

use kusari::{DType, ElementwiseKernel};
use kusari_examples::{mlp_digits, muladd_kernel, muladd_kernel_float32};
use kusari_kernels::codegen::{IndexWidth, Indexing, KernelCode, KernelSource, generate_code};
use kusari_kernels::compile::{compile_ptx, nvrtc_version};
use kusari_kernels::reduction::generate_reduction;
use kusari_kernels::{ElementwiseSignature, ParamType, ScalarType};
use kusari_tests::nvrtc_or_skip;

/// The architectures every kernel is compiled for.
const ARCHS: [&str; 2] = ["compute_80", "compute_90"];

/// The launch paths every elementwise kernel is compiled for.
const VARIANTS: [(Indexing, IndexWidth); 2] = [
    (Indexing::Contiguous, IndexWidth::I32),
    (Indexing::Strided { ndim: 2 }, IndexWidth::I64),
];

/// The kernels of the example ops (the float32 example's signatures are concrete: each of its
/// two bindings compiles the same source).
fn project_kernels() -> Vec<ElementwiseKernel> {
    let mut all = example_kernels().to_vec();
    all.extend_from_slice(muladd_kernel_float32::MulAdd::KERNELS);
    all.extend_from_slice(muladd_kernel_float32::MulAddGrad::KERNELS);
    all.extend_from_slice(mlp_digits::LeakyRelu::KERNELS);
    all
}

/// The example MulAdd's kernels (forward, and the two-output backward).
fn example_kernels() -> &'static [ElementwiseKernel] {
    static ALL: std::sync::OnceLock<Vec<ElementwiseKernel>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        [
            muladd_kernel::MulAdd::KERNELS,
            muladd_kernel::MulAddGrad::KERNELS,
        ]
        .concat()
    })
}

fn scalar_type(d: DType) -> ScalarType {
    ScalarType::from_name(d.name()).unwrap_or_else(|| panic!("dtype {d} has no kernel scalar type"))
}

/// One NVRTC compilation to do.
struct Job {
    /// What is compiled, for messages: the kernel, its types and variant.
    what: String,
    src: KernelSource,
    arch: &'static str,
}

/// The type placeholders `k`'s signature uses.
fn placeholders(k: &ElementwiseKernel) -> (ElementwiseSignature, Vec<char>) {
    let sig = ElementwiseSignature::new(k.inputs, k.outputs, k.params)
        .unwrap_or_else(|e| panic!("kernel {}: invalid signature: {e:?}", k.name));
    let mut used = Vec::new();
    for (_, p) in sig.lists() {
        if let ParamType::Placeholder(c) = p.ty
            && !used.contains(&c)
        {
            used.push(c);
        }
    }
    (sig, used)
}

/// Jobs compiling `k` with every placeholder bound to `t` (`None`: `k` has only concrete
/// types), on every variant for every architecture.
fn elementwise_jobs(k: &ElementwiseKernel, t: Option<ScalarType>, jobs: &mut Vec<Job>) {
    let (sig, used) = placeholders(k);
    let types: Vec<(char, ScalarType)> = match t {
        Some(t) => used.iter().map(|&c| (c, t)).collect(),
        None => {
            assert!(
                used.is_empty(),
                "kernel {} uses placeholders {used:?} but is listed without dtypes",
                k.name
            );
            Vec::new()
        }
    };
    for (indexing, width) in VARIANTS {
        let code = KernelCode {
            preamble: k.preamble,
            loop_prep: k.loop_prep,
            body: k.body,
            after_loop: k.after_loop,
        };
        let src = generate_code(k.name, &sig, code, &types, indexing, width)
            .unwrap_or_else(|e| panic!("kernel {}: {e}", k.name));
        for arch in ARCHS {
            jobs.push(Job {
                what: format!(
                    "{} [{}] {:?} {:?} for {arch}",
                    k.name,
                    t.map_or("concrete types", ScalarType::name),
                    indexing,
                    width
                ),
                src: src.clone(),
                arch,
            });
        }
    }
}

/// Compiles every job on `threads` threads; returns the failures (NVRTC's message for each).
fn compile_all(jobs: &[Job], threads: usize) -> Vec<String> {
    let failures = Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let outcome = compile_ptx(&job.src, job.arch).map_err(|e| e.to_string());
                    let problem = match outcome {
                        Ok(ptx) if ptx.contains(&job.src.entry) => None,
                        Ok(_) => Some(format!("the PTX lacks the entry {}", job.src.entry)),
                        Err(e) => Some(e),
                    };
                    if let Some(p) = problem {
                        failures
                            .lock()
                            .expect("failures")
                            .push(format!("{}:\n{p}", job.what));
                    }
                }
            });
        }
    });
    failures.into_inner().expect("failures")
}

#[test]
fn kernels_with_a_preamble_loop_prep_and_after_loop_compile() {
    if !nvrtc_or_skip("kernels_with_a_preamble_loop_prep_and_after_loop_compile") {
        return;
    }
    let kernels = kusari_tests::code_part_kernels::all();
    assert_eq!(
        kernels.len(),
        4,
        "CUBE_PLUS, MEAN_SHARE, PAIR_SUMS and ScaledCube's kernel"
    );
    let mut jobs = Vec::new();
    for k in &kernels {
        for t in [ScalarType::Float32, ScalarType::Float64] {
            elementwise_jobs(k, Some(t), &mut jobs);
        }
    }
    assert_eq!(jobs.len(), kernels.len() * 2 * VARIANTS.len() * ARCHS.len());
    assert!(
        jobs.iter()
            .any(|j| j.src.source.contains("cube_plus_preamble"))
    );
    let failures = compile_all(&jobs, 2);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn kernels_launched_with_the_full_call_compile() {
    if !nvrtc_or_skip("kernels_launched_with_the_full_call_compile") {
        return;
    }
    let kernels = kusari_tests::launch_form_kernels::all();
    assert_eq!(kernels.len(), 8, "the kernels of launch_form_kernels.rs");
    let mut jobs = Vec::new();
    let mut expected = 0;
    for k in &kernels {
        let types: &[Option<ScalarType>] = match placeholders(k).1.is_empty() {
            true => &[None],
            false => &[
                Some(ScalarType::Float32),
                Some(ScalarType::Float64),
                Some(ScalarType::Int64),
            ],
        };
        for &t in types {
            elementwise_jobs(k, t, &mut jobs);
            expected += VARIANTS.len() * ARCHS.len();
        }
    }
    // The strided variants with collapsed (1) and uncollapsed (3) axes the tests launch.
    for (k, ndim) in [
        (&kusari_tests::launch_form_kernels::MUL_PLUS_INDEX, 1),
        (
            &kusari_tests::launch_form_kernels::MUL_PLUS_INDEX_ALL_AXES,
            3,
        ),
    ] {
        let (sig, _) = placeholders(k);
        let types = [('T', ScalarType::Float64)];
        let indexing = Indexing::Strided { ndim };
        let src = generate_code(k.name, &sig, k.code(), &types, indexing, IndexWidth::I32)
            .unwrap_or_else(|e| panic!("kernel {}: {e}", k.name));
        for arch in ARCHS {
            jobs.push(Job {
                what: format!("{} strided{ndim} for {arch}", k.name),
                src: src.clone(),
                arch,
            });
            expected += 1;
        }
    }
    assert_eq!(jobs.len(), expected);
    let failures = compile_all(&jobs, 2);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_kernel_in_the_project_compiles_for_compute_80_and_compute_90() {
    if !nvrtc_or_skip("every_kernel_in_the_project_compiles") {
        return;
    }
    let per_binding = VARIANTS.len() * ARCHS.len();
    let mut jobs = Vec::new();

    // The examples' kernels in float32 and float64.
    let functions = project_kernels();
    assert_eq!(
        functions.len(),
        5,
        "the examples declare 5 kernels: MulAdd and MulAddGrad twice (generic and float32) and LeakyRelu"
    );
    for k in &functions {
        for t in [ScalarType::Float32, ScalarType::Float64] {
            elementwise_jobs(k, Some(t), &mut jobs);
        }
    }
    let expected_functions = functions.len() * 2 * per_binding;
    assert_eq!(jobs.len(), expected_functions);

    // The example MulAdd kernels in the half types.
    let examples = example_kernels();
    assert_eq!(
        examples.len(),
        2,
        "MulAdd and MulAddGrad declare one kernel each"
    );
    for k in examples {
        for t in [ScalarType::Float16, ScalarType::BFloat16] {
            elementwise_jobs(k, Some(t), &mut jobs);
        }
    }
    let expected_halves = examples.len() * 2 * per_binding;
    assert_eq!(jobs.len(), expected_functions + expected_halves);

    // The array operations' kernels in each dtype they are launched with.
    let array_kernels = kusari::array_kernels();
    let mut bindings = 0;
    for (k, dtypes) in &array_kernels {
        if dtypes.is_empty() {
            elementwise_jobs(k, None, &mut jobs);
            bindings += 1;
        }
        for &d in *dtypes {
            elementwise_jobs(k, Some(scalar_type(d)), &mut jobs);
            bindings += 1;
        }
    }
    let expected_array: usize = array_kernels
        .iter()
        .map(|(_, dtypes)| dtypes.len().max(1) * per_binding)
        .sum();
    assert_eq!(bindings * per_binding, expected_array);
    // Fill (one per dtype) and cast (one per pair of dtypes) are among them, with copy and
    // matmul: at least 7 + 49 + 2 kernels besides the arithmetic.
    assert!(
        array_kernels.len() >= 7 + 49 + 2 + 30,
        "array_kernels() lists only {} kernels",
        array_kernels.len()
    );
    assert_eq!(
        jobs.len(),
        expected_functions + expected_halves + expected_array
    );

    // The built-in reductions (sum, max, min; mean divides a sum), in each dtype they run in,
    // with layouts of up to 4 and up to 8 dimensions.
    let reduction_kernels = kusari::array_reduction_kernels();
    let mut expected_reductions = 0;
    for (k, dtypes) in &reduction_kernels {
        let sig = k
            .signature()
            .unwrap_or_else(|e| panic!("reduction {}: {e}", k.name));
        for &d in *dtypes {
            for (kept, reduced) in [(1, 1), (5, 1)] {
                let types = [('T', scalar_type(d))];
                let src = generate_reduction(k, &sig, &types, kept, reduced)
                    .unwrap_or_else(|e| panic!("reduction {} {d}: {e}", k.name));
                for arch in ARCHS {
                    jobs.push(Job {
                        what: format!("{} ({d}, {kept}+{reduced} dims) for {arch}", k.name),
                        src: src.clone(),
                        arch,
                    });
                    expected_reductions += 1;
                }
            }
        }
    }
    assert!(
        expected_reductions >= 12 * 2 * ARCHS.len(),
        "sum, max and min in at least 4 dtypes each"
    );

    let threads = std::thread::available_parallelism()
        .map_or(2, usize::from)
        .clamp(2, 8);
    let start = Instant::now();
    let failures = compile_all(&jobs, threads);
    let elapsed = start.elapsed();
    let (major, minor) = nvrtc_version().expect("NVRTC loaded");
    eprintln!(
        "compiled {} kernel variants with NVRTC {major}.{minor} on {threads} threads in {:.1} s: \
         {expected_functions} of {} example kernels, {expected_halves} half-precision \
         MulAdd, {expected_array} of {} array-op kernels ({bindings} dtype bindings), \
         {expected_reductions} built-in reductions",
        jobs.len() - failures.len(),
        elapsed.as_secs_f64(),
        functions.len(),
        array_kernels.len(),
    );
    assert!(
        failures.is_empty(),
        "{} of {} kernel variants do not compile:\n\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n\n")
    );
}
