//! Helpers shared by kusari's test suites (`tests/host`, `tests/gpu`, `tests/emulated`): finite
//! differences, closeness checks, re-running one test in a child process, the check that every
//! file of a suite is one of its modules, and the kernels the suites launch and compile
//! ([`launch_form_kernels`], [`code_part_kernels`]).
//!
//! The numerical gradient here is deliberately independent of the graph machinery: it only
//! calls a forward closure on perturbed f64 copies of the inputs.

pub mod code_part_kernels;
pub mod launch_form_kernels;

use kusari::{Array, DType, Device, Result};

/// Central-difference gradient of `Σ gy · f(inputs)` with respect to each input, in f64.
///
/// `f` gets the inputs cast back to their own dtypes and returns one output array.
pub fn numerical_grad(
    f: impl Fn(&[Array]) -> Result<Array>,
    inputs: &[Array],
    gy: &Array,
    eps: f64,
) -> Result<Vec<Array>> {
    let gy = gy.to_f64_vec()?;
    let base: Vec<Vec<f64>> = inputs
        .iter()
        .map(|a| a.to_f64_vec())
        .collect::<Result<_>>()?;
    let rebuild = |values: &[Vec<f64>]| -> Result<Vec<Array>> {
        inputs
            .iter()
            .zip(values)
            .map(|(a, v)| Array::from_vec(v.clone(), a.shape())?.astype(a.dtype()))
            .collect()
    };
    let weighted = |values: &[Vec<f64>]| -> Result<f64> {
        let out = f(&rebuild(values)?)?.to_f64_vec()?;
        assert_eq!(out.len(), gy.len(), "gy must have the output's size");
        Ok(out.iter().zip(&gy).map(|(o, g)| o * g).sum())
    };
    let mut grads = Vec::new();
    for (k, input) in inputs.iter().enumerate() {
        let mut g = vec![0.0; base[k].len()];
        for (j, gj) in g.iter_mut().enumerate() {
            let mut plus = base.clone();
            plus[k][j] += eps;
            let mut minus = base.clone();
            minus[k][j] -= eps;
            *gj = (weighted(&plus)? - weighted(&minus)?) / (2.0 * eps);
        }
        grads.push(Array::from_vec(g, input.shape())?);
    }
    Ok(grads)
}

/// The one closeness rule of the tests: `|actual - expected| <= atol + rtol * |expected|`
/// elementwise (any dtypes, any devices), NaN only where NaN is expected, infinities equal.
/// `Err` names the first failing element and shows both arrays.
pub fn check_close(actual: &Array, expected: &Array, atol: f64, rtol: f64) -> Result<(), String> {
    if actual.shape() != expected.shape() {
        return Err(format!(
            "shapes differ: {:?} vs expected {:?}",
            actual.shape(),
            expected.shape()
        ));
    }
    let a = actual
        .to_f64_vec()
        .map_err(|e| format!("reading actual: {e}"))?;
    let e = expected
        .to_f64_vec()
        .map_err(|e| format!("reading expected: {e}"))?;
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        let ok = if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() || x.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        if !ok {
            return Err(format!(
                "element {i} is {x}, expected {y} (atol {atol}, rtol {rtol})\nactual:   {a:?}\nexpected: {e:?}"
            ));
        }
    }
    Ok(())
}

/// Panics unless [`check_close`] accepts `actual`.
#[track_caller]
pub fn assert_close(actual: &Array, expected: &Array, atol: f64, rtol: f64) {
    if let Err(msg) = check_close(actual, expected, atol, rtol) {
        panic!("{msg}");
    }
}

/// An f64 array from values and a shape.
pub fn arr(values: &[f64], shape: &[usize]) -> Array {
    Array::from_vec(values.to_vec(), shape).expect("values fill the shape")
}

/// Seeded uniform f64 values in `[-1, 1)`.
pub fn uniform(shape: &[usize], seed: u64) -> Array {
    let mut rng = kusari::random::Rng::seed(seed);
    Array::uniform(shape, -1.0, 1.0, DType::F64, &mut rng).expect("a small uniform array")
}

/// Two broadcast views of one float32 element on `device`, `[2³², 1]` and `[1, 2³²]`: a loop
/// over both has 2⁶⁴ elements, a count that does not fit a `usize`.
pub fn views_whose_loop_overflows(device: Device) -> (Array, Array) {
    let one = Array::ones(&[1, 1], DType::F32)
        .and_then(|a| a.to_device(device))
        .expect("one element");
    let view = |shape: &[usize]| one.broadcast_to(shape).expect("a broadcast view");
    (view(&[1 << 32, 1]), view(&[1, 1 << 32]))
}

/// The multi-index of C-order position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = flat % shape[a];
        flat /= shape[a];
    }
    idx
}

/// C-order position in `shape` of the output index `idx`, reading broadcast (length-1 or missing
/// leading) axes at index 0: NumPy's broadcasting written out.
pub fn broadcast_pos(idx: &[usize], shape: &[usize]) -> usize {
    let lead = idx.len() - shape.len();
    shape.iter().enumerate().fold(0, |pos, (a, &d)| {
        pos * d + if d == 1 { 0 } else { idx[lead + a] }
    })
}

/// The variable a child test process is started with ([`run_test_in_child`]): the name of the
/// test it runs. The only `KUSARI_*` variable the test suites read themselves.
pub const CHILD_VAR: &str = "KUSARI_TEST_CHILD";

/// Whether this process is a child started by [`run_test_in_child`] to run one test.
pub fn in_child() -> bool {
    std::env::var_os(CHILD_VAR).is_some()
}

/// Runs test `name` of the current test binary again in a child process (ignored or not) and
/// returns its exit status and its stdout and stderr together. `name` is the test's full path in
/// its binary, `module::test`: a name that matches no test fails here rather than passing with
/// nothing run. The child starts through `sh` with core dumps off (an expected crash leaves no
/// core file) after `shell_prefix`, e.g. `ulimit -v 1048576;`, with [`CHILD_VAR`] set to `name`;
/// `configure` sets more of its environment or its directory.
pub fn run_test_in_child(
    name: &str,
    shell_prefix: &str,
    configure: impl FnOnce(&mut std::process::Command),
) -> (std::process::ExitStatus, String) {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -c 0; {shell_prefix} exec \"$0\" \"$@\""))
        .arg(std::env::current_exe().expect("the test binary's path"))
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, name);
    configure(&mut cmd);
    let out = cmd.output().expect("spawn the child test");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("running 1 test"),
        "the child process ran no test named {name:?} (give its full path, `module::test`):\n{text}"
    );
    (out.status, text)
}

/// Fails unless every `.rs` file under `dir` (a test binary's folder) is declared as a module:
/// a file of `dir` itself in `main_source` (its `main.rs`), a file of a subfolder in that
/// folder's `mod.rs`. A file without its `mod` line would never compile nor run.
pub fn assert_every_file_is_a_module(dir: &str, main_source: &str) {
    fn check(dir: &std::path::Path, declaring: &str, missing: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let module = if path.is_dir() {
                let inner = std::fs::read_to_string(path.join("mod.rs")).unwrap_or_default();
                check(&path, &inner, missing);
                name
            } else if let Some(stem) = name.strip_suffix(".rs") {
                if stem == "main" || stem == "mod" {
                    continue;
                }
                stem.to_string()
            } else {
                continue;
            };
            let declared = declaring.lines().any(|l| {
                let l = l.trim();
                let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
                l == format!("mod {module};")
            });
            if !declared {
                missing.push(path.display().to_string());
            }
        }
    }
    let mut missing = Vec::new();
    check(std::path::Path::new(dir), main_source, &mut missing);
    assert!(
        missing.is_empty(),
        "files that are not modules of their test binary (add their `mod` line): {missing:?}"
    );
}

/// An array reduction by name (`"sum"`, `"mean"`, `"max"`, `"min"`) over `axes`, where `None`
/// means every axis: `a.sum()` (0-dimensional) or, with `keepdims`, `a.sum_axes` over all axes.
/// Lets a test loop over axis lists that include "all".
pub fn reduce(
    a: &Array,
    op: &str,
    axes: Option<&[isize]>,
    keepdims: bool,
) -> kusari::Result<Array> {
    let all: Vec<isize> = (0..a.ndim() as isize).collect();
    match (op, axes, keepdims) {
        ("sum", None, false) => a.sum(),
        ("mean", None, false) => a.mean(),
        ("max", None, false) => a.max(),
        ("min", None, false) => a.min(),
        (_, axes, keepdims) => {
            let axes = axes.unwrap_or(&all);
            match op {
                "sum" => a.sum_axes(axes, keepdims),
                "mean" => a.mean_axes(axes, keepdims),
                "max" => a.max_axes(axes, keepdims),
                "min" => a.min_axes(axes, keepdims),
                _ => panic!("no reduction named {op}"),
            }
        }
    }
}

/// How the compiler that reports a kernel's errors names line `line` of `file`: NVRTC's
/// `file(line)` where it loads (the emulated device then compiles each kernel with it first),
/// else the host C++ compiler's `file:line`.
pub fn compiler_line(file: &str, line: usize) -> String {
    if kusari_kernels::compile::nvrtc_available() {
        format!("{file}({line})")
    } else {
        format!("{file}:{line}")
    }
}

/// Whether NVRTC can be loaded; false (after printing why `test` skips) where it cannot,
/// unless `KUSARI_REQUIRE_NVRTC` is set, which makes that a failure.
pub fn nvrtc_or_skip(test: &str) -> bool {
    if kusari_kernels::compile::nvrtc_available() {
        return true;
    }
    assert!(
        !kusari_kernels::env::require_nvrtc(),
        "KUSARI_REQUIRE_NVRTC is set, but NVRTC cannot be loaded: check LD_LIBRARY_PATH"
    );
    eprintln!(
        "SKIPPED {test}: NVRTC is not installed \
         (pip install nvidia-cuda-nvrtc; put nvidia/cu13/lib on LD_LIBRARY_PATH)"
    );
    false
}
