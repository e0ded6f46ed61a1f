//! Saving and loading links as safetensors: round trips of every dtype through files and bytes
//! (bit for bit), nested paths, lazy parameters, the file as the safetensors crate reads it, and
//! every error, each of which must leave the link as it was.
//!
//! The links are written by hand (`visit_params`), so these tests do not depend on the derive.

use std::path::{Path, PathBuf};

use half::{bf16, f16};
use kusari::link::initializers::{Constant, HeNormal};
use kusari::link::{
    Linear, LoadOptions, load, load_from_bytes, load_from_bytes_with, load_with, save,
    save_to_bytes,
};
use kusari::prelude::*;
use safetensors::tensor::{Dtype, SafeTensors};

// ----- links and helpers -----

/// Parameters under names of their own (which may contain `/`).
struct Params(Vec<(&'static str, Parameter)>);

impl Link for Params {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        for (name, p) in &self.0 {
            f(format!("{prefix}/{name}"), p);
        }
    }
}

impl Params {
    fn get(&self, name: &str) -> &Parameter {
        let found = self.0.iter().find(|(n, _)| *n == name);
        &found.unwrap_or_else(|| panic!("no parameter {name}")).1
    }
}

/// A chain of two child links and a parameter of its own: paths `/enc/..`, `/dec/..`, `/step`.
struct Net {
    enc: Params,
    dec: Params,
    step: Parameter,
}

impl Link for Net {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        self.enc.visit_params(&format!("{prefix}/enc"), f);
        self.dec.visit_params(&format!("{prefix}/dec"), f);
        f(format!("{prefix}/step"), &self.step);
    }
}

fn param<T: kusari::Element>(values: Vec<T>, shape: &[usize]) -> Parameter {
    Parameter::from_array(Array::from_vec(values, shape).expect("values fill the shape"))
}

fn lazy(dtype: DType) -> Parameter {
    Parameter::new(Constant(7.0), dtype)
}

fn f32s(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 * scale - 1.0).collect()
}

/// One parameter of every dtype, floats with values that must survive bit for bit.
fn every_dtype() -> Params {
    Params(vec![
        ("mask", param(vec![true, false, true], &[3])),
        ("ids", param(vec![i32::MIN, -1, 0, i32::MAX], &[2, 2])),
        ("step", param(vec![i64::MAX], &[])),
        ("q8", param(vec![i8::MIN, -1, i8::MAX], &[3])),
        ("q16", param(vec![i16::MIN, 7, i16::MAX], &[3])),
        ("pixels", param(vec![0u8, 128, 255], &[1, 3])),
        ("u16s", param(vec![0u16, u16::MAX], &[2])),
        ("u32s", param(vec![u32::MAX, 1], &[2])),
        ("u64s", param(vec![u64::MAX, 1 << 63], &[2])),
        (
            "half",
            param(
                vec![f16::MIN_POSITIVE_SUBNORMAL, f16::NEG_INFINITY, f16::NAN],
                &[3],
            ),
        ),
        (
            "brain",
            param(
                vec![bf16::from_f32(1.5), bf16::NAN, bf16::from_f32(-0.0)],
                &[1, 3],
            ),
        ),
        (
            "W",
            param(
                vec![0.1f32, f32::NAN, -0.0, 1e-45, f32::INFINITY, 3.25],
                &[2, 3],
            ),
        ),
        (
            "b",
            param(vec![std::f64::consts::PI, -f64::MIN_POSITIVE, 5e-324], &[3]),
        ),
    ])
}

/// The same names, dtypes and shapes as [`every_dtype`], other values.
fn every_dtype_zeroed() -> Params {
    Params(
        every_dtype()
            .0
            .into_iter()
            .map(|(name, p)| {
                let a = p.array().expect("initialised");
                (
                    name,
                    Parameter::from_array(Array::zeros(a.shape(), a.dtype()).unwrap()),
                )
            })
            .collect(),
    )
}

/// A parameter's dtype, shape and elements as bit patterns.
fn bits(p: &Parameter) -> (DType, Vec<usize>, Vec<u64>) {
    let a = p.array().expect("initialised");
    let v = match a.dtype() {
        DType::Bool => a
            .to_vec::<bool>()
            .map(|v| v.into_iter().map(u64::from).collect()),
        DType::I32 => a
            .to_vec::<i32>()
            .map(|v| v.into_iter().map(|x| x as u32 as u64).collect()),
        DType::I64 => a
            .to_vec::<i64>()
            .map(|v| v.into_iter().map(|x| x as u64).collect()),
        DType::I8 => a
            .to_vec::<i8>()
            .map(|v| v.into_iter().map(|x| x as u8 as u64).collect()),
        DType::I16 => a
            .to_vec::<i16>()
            .map(|v| v.into_iter().map(|x| x as u16 as u64).collect()),
        DType::U8 => a
            .to_vec::<u8>()
            .map(|v| v.into_iter().map(u64::from).collect()),
        DType::U16 => a
            .to_vec::<u16>()
            .map(|v| v.into_iter().map(u64::from).collect()),
        DType::U32 => a
            .to_vec::<u32>()
            .map(|v| v.into_iter().map(u64::from).collect()),
        DType::U64 => a.to_vec::<u64>(),
        DType::F16 => a
            .to_vec::<f16>()
            .map(|v| v.into_iter().map(|x| x.to_bits().into()).collect()),
        DType::BF16 => a
            .to_vec::<bf16>()
            .map(|v| v.into_iter().map(|x| x.to_bits().into()).collect()),
        DType::F32 => a
            .to_vec::<f32>()
            .map(|v| v.into_iter().map(|x| x.to_bits().into()).collect()),
        DType::F64 => a
            .to_vec::<f64>()
            .map(|v| v.into_iter().map(f64::to_bits).collect()),
    };
    (a.dtype(), a.shape().to_vec(), v.expect("readable"))
}

/// Every parameter's state: its path and, if initialised, its bits.
type Snapshot = Vec<(String, Option<(DType, Vec<usize>, Vec<u64>)>)>;

fn snapshot(link: &dyn Link) -> Snapshot {
    link.named_params()
        .into_iter()
        .map(|(path, p)| (path, p.is_initialized().then(|| bits(p))))
        .collect()
}

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("kusari-serialize-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .expect("temp dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[track_caller]
fn assert_contains(msg: &str, parts: &[&str]) {
    for part in parts {
        assert!(msg.contains(part), "{part:?} is not in the message:\n{msg}");
    }
}

// ----- round trips -----

#[test]
fn every_dtype_round_trips_through_a_file_bit_for_bit() -> Result<()> {
    let dir = TempDir::new("file-round-trip");
    let path = dir.path("model.safetensors");
    let saved = every_dtype();
    save(&saved, &path)?;

    let restored = every_dtype_zeroed();
    assert_ne!(snapshot(&restored), snapshot(&saved));
    load(&restored, &path)?;
    assert_eq!(snapshot(&restored), snapshot(&saved));

    // Saving again replaces the file whole, through a temporary file that does not stay behind.
    let other = every_dtype_zeroed();
    save(&other, &path)?;
    load(&restored, &path)?;
    assert_eq!(snapshot(&restored), snapshot(&other));
    assert_eq!(dir.entries(), ["model.safetensors"]);
    Ok(())
}

#[test]
fn every_dtype_round_trips_through_bytes_bit_for_bit() -> Result<()> {
    let saved = every_dtype();
    let bytes = save_to_bytes(&saved)?;
    let restored = every_dtype_zeroed();
    load_from_bytes(&restored, &bytes)?;
    assert_eq!(snapshot(&restored), snapshot(&saved));

    // The file and the bytes are the same.
    let dir = TempDir::new("bytes-round-trip");
    save(&saved, dir.path("m.safetensors"))?;
    assert_eq!(
        std::fs::read(dir.path("m.safetensors")).expect("saved"),
        bytes
    );
    Ok(())
}

#[test]
fn nested_links_are_saved_under_their_paths() -> Result<()> {
    let net = Net {
        enc: Params(vec![
            ("W", param(f32s(6, 0.5), &[2, 3])),
            ("b", param(f32s(2, 1.0), &[2])),
        ]),
        dec: Params(vec![("inner/W", param(vec![1.0f64, 2.0], &[1, 2]))]),
        step: param(vec![42i64], &[]),
    };
    let bytes = save_to_bytes(&net)?;
    let file = SafeTensors::deserialize(&bytes).expect("a safetensors file");
    let mut names = file.names();
    names.sort_unstable();
    assert_eq!(names, ["dec/inner/W", "enc/W", "enc/b", "step"]);

    let restored = Net {
        enc: Params(vec![("W", lazy(DType::F32)), ("b", lazy(DType::F32))]),
        dec: Params(vec![("inner/W", lazy(DType::F64))]),
        step: lazy(DType::I64),
    };
    load_from_bytes(&restored, &bytes)?;
    assert_eq!(snapshot(&restored), snapshot(&net));
    Ok(())
}

#[test]
fn the_file_is_what_the_safetensors_crate_reads() -> Result<()> {
    let dir = TempDir::new("safetensors-reads");
    let path = dir.path("model.safetensors");
    save(&every_dtype(), &path)?;
    let bytes = std::fs::read(&path).expect("saved");
    let file = SafeTensors::deserialize(&bytes).expect("a safetensors file");

    let mut found: Vec<(String, Dtype, Vec<usize>)> = file
        .tensors()
        .into_iter()
        .map(|(name, t)| (name, t.dtype(), t.shape().to_vec()))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let expected = [
        ("W", Dtype::F32, vec![2, 3]),
        ("b", Dtype::F64, vec![3]),
        ("brain", Dtype::BF16, vec![1, 3]),
        ("half", Dtype::F16, vec![3]),
        ("ids", Dtype::I32, vec![2, 2]),
        ("mask", Dtype::BOOL, vec![3]),
        ("pixels", Dtype::U8, vec![1, 3]),
        ("q16", Dtype::I16, vec![3]),
        ("q8", Dtype::I8, vec![3]),
        ("step", Dtype::I64, vec![]),
        ("u16s", Dtype::U16, vec![2]),
        ("u32s", Dtype::U32, vec![2]),
        ("u64s", Dtype::U64, vec![2]),
    ]
    .map(|(n, d, s)| (n.to_string(), d, s));
    assert_eq!(found, expected);

    // Little-endian, C order.
    let data = |name: &str| file.tensor(name).expect("saved").data().to_vec();
    assert_eq!(data("step"), i64::MAX.to_le_bytes());
    assert_eq!(data("mask"), [1, 0, 1]);
    assert_eq!(data("pixels"), [0, 128, 255]);
    assert_eq!(data("q8"), [0x80, 0xff, 0x7f]);
    assert_eq!(data("q16"), [0x00, 0x80, 7, 0, 0xff, 0x7f]);
    assert_eq!(data("u16s"), [0, 0, 0xff, 0xff]);
    assert_eq!(data("u32s"), [0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0]);
    let mut u64s = u64::MAX.to_le_bytes().to_vec();
    u64s.extend((1u64 << 63).to_le_bytes());
    assert_eq!(data("u64s"), u64s);
    assert_eq!(&data("W")[..4], 0.1f32.to_le_bytes());
    assert_eq!(&data("ids")[12..], i32::MAX.to_le_bytes());
    Ok(())
}

#[test]
fn a_lazy_parameter_takes_the_file_shape() -> Result<()> {
    let trained = Linear::new(Some(3), 4, false, DType::F32)?;
    let bytes = save_to_bytes(&trained)?;

    // The shapes are unknown before loading.
    let model = Params(vec![
        ("W", Parameter::new(HeNormal::default(), DType::F32)),
        ("b", lazy(DType::F32)),
    ]);
    assert!(!model.get("W").is_initialized());
    load_from_bytes(&model, &bytes)?;
    assert_eq!(model.get("W").shape(), Some(vec![4, 3]));
    assert_eq!(snapshot(&model), snapshot(&trained));

    // A lazy Linear loaded this way computes what the trained one does.
    let restored = Linear::new(None, 4, false, DType::F32)?;
    load_from_bytes(&restored, &bytes)?;
    let x = Variable::new(Array::from_vec(f32s(6, 0.25), &[2, 3])?);
    assert_eq!(
        restored.forward(&x)?.array().to_vec::<f32>()?,
        trained.forward(&x)?.array().to_vec::<f32>()?
    );
    Ok(())
}

#[test]
fn values_go_to_the_parameters_device() -> Result<()> {
    let Some(gpu) = kusari::testing::cuda_or_skip("values_go_to_the_parameters_device")? else {
        return Ok(());
    };
    let saved = every_dtype();
    saved.to_device(gpu)?;
    let bytes = save_to_bytes(&saved)?;

    let restored = every_dtype_zeroed();
    restored.to_device(gpu)?;
    let lazy_one = Params(vec![("W", lazy(DType::F32))]);
    lazy_one.to_device(gpu)?;
    load_from_bytes(&restored, &bytes)?;
    load_from_bytes_with(&lazy_one, &bytes, LoadOptions { strict: false })?;

    assert_eq!(snapshot(&restored), snapshot(&every_dtype()));
    assert_eq!(lazy_one.get("W").array()?.device(), gpu);
    for p in restored.params() {
        assert_eq!(p.array()?.device(), gpu);
    }
    Ok(())
}

// ----- errors -----

#[test]
fn a_missing_tensor_names_the_parameter_and_what_the_file_has() -> Result<()> {
    let bytes = save_to_bytes(&Params(vec![
        ("l1/W", param(f32s(2, 1.0), &[2])),
        ("l1/b", param(f32s(1, 1.0), &[1])),
    ]))?;
    let model = Params(vec![
        ("l1/W", param(f32s(2, 3.0), &[2])),
        ("l2/W", param(f32s(2, 3.0), &[2])),
    ]);
    let before = snapshot(&model);

    let err = load_from_bytes(&model, &bytes).unwrap_err();
    assert!(
        matches!(
            err,
            Error::CheckpointMismatch {
                op: "load_from_bytes",
                ..
            }
        ),
        "{err:?}"
    );
    assert_contains(
        &err.to_string(),
        &[
            "no tensor for parameter(s) l2/W",
            "the file has 2 tensor(s): l1/W, l1/b",
            "nothing was loaded",
        ],
    );
    // Not strict still needs every parameter; the one that matched is not loaded either.
    let err = load_from_bytes_with(&model, &bytes, LoadOptions { strict: false }).unwrap_err();
    assert_contains(&err.to_string(), &["no tensor for parameter(s) l2/W"]);
    assert_eq!(snapshot(&model), before);
    Ok(())
}

#[test]
fn the_names_listed_for_a_missing_tensor_are_capped() -> Result<()> {
    let names = [
        "t00", "t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09", "t10",
    ];
    let many = Params(
        names
            .iter()
            .map(|&n| (n, param(vec![1i32], &[1])))
            .collect(),
    );
    let model = Params(vec![("other", param(vec![1i32], &[1]))]);
    let err = load_from_bytes_with(
        &model,
        &save_to_bytes(&many)?,
        LoadOptions { strict: false },
    )
    .unwrap_err();
    assert_contains(
        &err.to_string(),
        &["the file has 11 tensor(s): t00, t01, t02, t03, t04, t05, t06, t07 and 3 more"],
    );
    Ok(())
}

#[test]
fn extra_tensors_are_an_error_only_when_strict() -> Result<()> {
    let bytes = save_to_bytes(&Params(vec![
        ("W", param(f32s(2, 1.0), &[2])),
        ("aux/mean", param(vec![0.5f64], &[1])),
        ("aux/var", param(vec![2.0f64], &[1])),
    ]))?;
    let model = Params(vec![("W", param(f32s(2, 3.0), &[2]))]);
    let before = snapshot(&model);

    let err = load_from_bytes(&model, &bytes).unwrap_err();
    assert!(matches!(err, Error::CheckpointMismatch { .. }), "{err:?}");
    assert_contains(
        &err.to_string(),
        &[
            "tensor(s) the link has no parameter for: aux/mean, aux/var",
            "strict: false",
        ],
    );
    assert_eq!(snapshot(&model), before);

    load_from_bytes_with(&model, &bytes, LoadOptions { strict: false })?;
    assert_eq!(model.get("W").array()?.to_vec::<f32>()?, f32s(2, 1.0));

    // Through a file too.
    let dir = TempDir::new("extra");
    let path = dir.path("extra.safetensors");
    std::fs::write(&path, &bytes).expect("written");
    assert!(load(&model, &path).is_err());
    load_with(&model, &path, LoadOptions { strict: false })?;
    Ok(())
}

#[test]
fn a_wrong_shape_names_both_shapes() -> Result<()> {
    let bytes = save_to_bytes(&Params(vec![("l1/W", param(f32s(6, 1.0), &[2, 3]))]))?;
    let model = Params(vec![("l1/W", param(f32s(6, 2.0), &[3, 2]))]);
    let before = snapshot(&model);
    let err = load_from_bytes(&model, &bytes).unwrap_err();
    assert!(matches!(err, Error::CheckpointMismatch { .. }), "{err:?}");
    assert_contains(
        &err.to_string(),
        &["l1/W: shape [3, 2] in the link, [2, 3] in the file"],
    );
    assert_eq!(snapshot(&model), before);
    Ok(())
}

#[test]
fn a_wrong_dtype_names_both_dtypes() -> Result<()> {
    let bytes = save_to_bytes(&Params(vec![("W", param(vec![1.0f64, 2.0], &[2]))]))?;
    for model in [
        Params(vec![("W", param(f32s(2, 1.0), &[2]))]),
        Params(vec![("W", lazy(DType::F32))]),
    ] {
        let before = snapshot(&model);
        let err = load_from_bytes(&model, &bytes).unwrap_err();
        assert_contains(
            &err.to_string(),
            &["W: dtype float32 in the link, float64 (F64) in the file"],
        );
        assert_eq!(snapshot(&model), before);
    }
    Ok(())
}

#[test]
fn a_failed_load_changes_nothing_and_reports_every_problem() -> Result<()> {
    let bytes = save_to_bytes(&Params(vec![
        ("a", param(f32s(4, 1.0), &[4])),
        ("b", param(vec![1i64, 2], &[2])),
        ("c", param(vec![1i32, 2], &[2])),
        ("extra", param(vec![true], &[1])),
        ("z", param(f32s(2, 1.0), &[2])),
    ]))?;
    // `a` and the lazy `z` fit; `b` has the wrong shape, `c` the wrong dtype, `lazy` and `e` are
    // missing, `extra` is extra.
    let model = Params(vec![
        ("a", param(f32s(4, 9.0), &[4])),
        ("b", param(vec![0i64, 0, 0], &[3])),
        ("c", param(vec![0i64, 0], &[2])),
        ("lazy", lazy(DType::F32)),
        ("e", param(vec![0.5f32], &[1])),
        ("z", lazy(DType::F32)),
    ]);
    let before = snapshot(&model);
    let err = load_from_bytes(&model, &bytes).unwrap_err();
    let Error::CheckpointMismatch { problems, .. } = &err else {
        panic!("expected CheckpointMismatch, got {err:?}");
    };
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert_contains(
        &err.to_string(),
        &[
            "no tensor for parameter(s) lazy, e",
            "b: shape [3] in the link, [2] in the file",
            "c: dtype int64 in the link, int32 (I32) in the file",
            "has no parameter for: extra",
        ],
    );
    assert_eq!(snapshot(&model), before);
    assert!(!model.get("z").is_initialized());
    Ok(())
}

#[test]
fn saving_an_uninitialised_parameter_names_it_and_writes_nothing() -> Result<()> {
    let model = Net {
        enc: Params(vec![
            ("W", lazy(DType::F32)),
            ("b", param(f32s(2, 1.0), &[2])),
        ]),
        dec: Params(vec![("W", lazy(DType::F64))]),
        step: param(vec![0i64], &[]),
    };
    let err = save_to_bytes(&model).unwrap_err();
    assert_eq!(
        err,
        Error::UninitializedParams {
            op: "save_to_bytes",
            names: vec!["enc/W".into(), "dec/W".into()]
        }
    );
    assert_contains(
        &err.to_string(),
        &["2 parameter(s) not initialised: enc/W, dec/W"],
    );

    let dir = TempDir::new("uninitialised");
    let err = save(&model, dir.path("model.safetensors")).unwrap_err();
    assert!(
        matches!(err, Error::UninitializedParams { op: "save", .. }),
        "{err:?}"
    );
    assert!(dir.entries().is_empty());
    Ok(())
}

#[test]
fn garbage_and_truncated_files_are_errors_naming_the_file() -> Result<()> {
    let model = every_dtype_zeroed();
    let before = snapshot(&model);

    let err = load_from_bytes(&model, b"not a safetensors file").unwrap_err();
    assert!(
        matches!(
            err,
            Error::CheckpointFile {
                op: "load_from_bytes",
                ..
            }
        ),
        "{err:?}"
    );
    assert_contains(
        &err.to_string(),
        &[
            "load_from_bytes(<22 bytes>)",
            "not a valid safetensors file",
        ],
    );
    assert!(load_from_bytes(&model, &[]).is_err());

    let dir = TempDir::new("garbage");
    let bytes = save_to_bytes(&every_dtype())?;
    let cases: [(&str, &[u8]); 3] = [
        ("garbage.safetensors", &[0xff; 64]),
        ("truncated.safetensors", &bytes[..bytes.len() - 3]),
        ("header-only.safetensors", &bytes[..20]),
    ];
    for (name, content) in cases {
        let path = dir.path(name);
        std::fs::write(&path, content).expect("written");
        let err = load(&model, &path).unwrap_err();
        assert!(
            matches!(err, Error::CheckpointFile { op: "load", .. }),
            "{err:?}"
        );
        assert_contains(
            &err.to_string(),
            &[&path.display().to_string(), "not a valid safetensors file"],
        );
    }
    assert_eq!(snapshot(&model), before);
    Ok(())
}

#[test]
fn missing_files_and_directories_are_errors_naming_the_path() -> Result<()> {
    let dir = TempDir::new("missing");
    let model = every_dtype();
    let path = dir.path("absent.safetensors");
    let err = load(&model, &path).unwrap_err();
    assert!(
        matches!(err, Error::CheckpointFile { op: "load", .. }),
        "{err:?}"
    );
    assert_contains(
        &err.to_string(),
        &[&path.display().to_string(), "cannot read the file"],
    );

    let path: &Path = &dir.path("no/such/dir/model.safetensors");
    let err = save(&model, path).unwrap_err();
    assert!(
        matches!(err, Error::CheckpointFile { op: "save", .. }),
        "{err:?}"
    );
    assert_contains(
        &err.to_string(),
        &[&path.display().to_string(), "cannot write the file"],
    );
    Ok(())
}

// ----- checkpoints a team can share: file modes and temporary files (issue 22) -----

/// The variable through which a test hands its child process the checkpoint's path.
const CHECKPOINT_VAR: &str = "KUSARI_TEST_CHECKPOINT";

/// A one-parameter link of `n` float32 values, all `value`.
fn filled(n: usize, value: f32) -> Params {
    Params(vec![("w", param(vec![value; n], &[n]))])
}

/// The values of `path` loaded into a fresh link of `n` float32 values.
fn loaded(path: &Path, n: usize) -> Result<Vec<f32>> {
    let link = filled(n, 0.0);
    load(&link, path)?;
    link.get("w").array()?.to_vec::<f32>()
}

/// The names in `dir` of the temporary files kusari's save writes beside `name`.
fn temp_files(dir: &TempDir, name: &str) -> Vec<String> {
    let prefix = format!(".{name}.kusari-tmp-");
    dir.entries()
        .into_iter()
        .filter(|e| e.starts_with(&prefix))
        .collect()
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("the file exists")
        .permissions()
        .mode()
        & 0o7777
}

/// A new checkpoint gets `0666` less the umask, as any file a program creates (the umask is set
/// in a child process, since it is the whole process's): `0644` under `022`, `0640` under
/// `027`, `0664` under `002`. Formerly every checkpoint was `0600`.
#[cfg(unix)]
#[test]
fn a_new_checkpoint_gets_the_mode_the_umask_gives() -> Result<()> {
    const NAME: &str = "serialize::a_new_checkpoint_gets_the_mode_the_umask_gives";
    if kusari_tests::in_child() {
        let path = std::env::var(CHECKPOINT_VAR).expect("the parent gives the path");
        return save(&filled(4, 1.5), path);
    }
    let dir = TempDir::new("umask");
    for (umask, want) in [
        ("022", 0o644),
        ("027", 0o640),
        ("002", 0o664),
        ("077", 0o600),
    ] {
        let path = dir.path(&format!("model-{umask}.safetensors"));
        let (status, out) =
            kusari_tests::run_test_in_child(NAME, &format!("umask {umask};"), |c| {
                c.env(CHECKPOINT_VAR, &path);
            });
        assert!(status.success(), "umask {umask}:\n{out}");
        assert_eq!(mode(&path), want, "umask {umask}: mode {:o}", mode(&path));
        assert_eq!(loaded(&path, 4)?, vec![1.5; 4]);
    }
    assert!(temp_files(&dir, "model-022.safetensors").is_empty());
    Ok(())
}

/// Replacing a checkpoint keeps the mode it had (a shared `0644` one stays `0644`, instead of
/// becoming `0600` as it formerly did), read-only included.
#[cfg(unix)]
#[test]
fn a_replaced_checkpoint_keeps_its_mode() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("replaced-mode");
    for (i, old_mode) in [0o644, 0o604, 0o640, 0o444].into_iter().enumerate() {
        let path = dir.path(&format!("model-{i}.safetensors"));
        save(&filled(3, 1.0), &path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(old_mode)).expect("chmod");
        save(&filled(3, 2.0), &path)?;
        assert_eq!(
            mode(&path),
            old_mode,
            "mode {:o} after replacing",
            mode(&path)
        );
        assert_eq!(loaded(&path, 3)?, vec![2.0; 3]);
    }
    assert_eq!(dir.entries().len(), 4, "{:?}", dir.entries());
    Ok(())
}

/// A save killed half-way (by the file-size limit: `ulimit -f 1` lets the child write 512 bytes
/// of its 40 KB checkpoint, then SIGXFSZ kills it) leaves the old checkpoint as it was, and its
/// temporary file is removed by the next load, and after another killed save by the next save.
#[cfg(unix)]
#[test]
fn a_killed_save_leaves_the_old_checkpoint_and_the_next_save_or_load_cleans_up() -> Result<()> {
    const NAME: &str =
        "serialize::a_killed_save_leaves_the_old_checkpoint_and_the_next_save_or_load_cleans_up";
    const N: usize = 10_000;
    if kusari_tests::in_child() {
        let path = std::env::var(CHECKPOINT_VAR).expect("the parent gives the path");
        // Killed in here by SIGXFSZ; where that signal is ignored the write fails instead.
        let result = save(&filled(N, 9.0), path);
        println!("SAVE RETURNED: {}", result.is_ok());
        return Ok(());
    }
    let dir = TempDir::new("killed-save");
    let path = dir.path("model.safetensors");
    save(&filled(N, 1.0), &path)?;
    for next in ["load", "save"] {
        let (status, out) = kusari_tests::run_test_in_child(NAME, "ulimit -f 1;", |c| {
            c.env(CHECKPOINT_VAR, &path);
        });
        if out.contains("SAVE RETURNED") {
            // SIGXFSZ is ignored here: the write failed, and the save cleaned up itself.
            assert!(out.contains("SAVE RETURNED: false"), "{out}");
            assert!(temp_files(&dir, "model.safetensors").is_empty());
        } else {
            assert!(!status.success(), "the child was not killed:\n{out}");
            let left = temp_files(&dir, "model.safetensors");
            assert_eq!(left.len(), 1, "the killed save's temporary file: {left:?}");
            let partial = std::fs::metadata(dir.path(&left[0])).expect("exists").len();
            assert!(partial <= 512, "the child wrote {partial} bytes");
        }
        // The old checkpoint is intact.
        assert_eq!(std::fs::metadata(&path).expect("exists").len() as usize, {
            save_to_bytes(&filled(N, 1.0))?.len()
        });
        match next {
            "load" => assert_eq!(loaded(&path, N)?, vec![1.0; N]),
            _ => save(&filled(N, 1.0), &path)?,
        }
        assert!(
            temp_files(&dir, "model.safetensors").is_empty(),
            "after the next {next}: {:?}",
            dir.entries()
        );
    }
    assert_eq!(dir.entries(), vec!["model.safetensors".to_string()]);
    Ok(())
}

/// This host's name as the temporary files' names carry it (Linux).
#[cfg(target_os = "linux")]
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host's name")
        .trim()
        .to_string()
}

/// The id of a process that has exited and been waited for.
#[cfg(target_os = "linux")]
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    pid
}

/// Which temporary files the next save and the next load remove: those of a process of this
/// host that is gone, and those a day old from anywhere; not those of a running process, of
/// this process, of another host (until a day old), of another checkpoint, nor other files.
#[cfg(target_os = "linux")]
#[test]
fn stale_temporary_files_are_removed_by_the_next_save_and_load() -> Result<()> {
    let host = host_name();
    // A running process, killed and waited for however the test ends.
    struct Sleeper(std::process::Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
    let sleeper = Sleeper(
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep"),
    );
    let me = std::process::id();
    for next in ["save", "load"] {
        let dir = TempDir::new(&format!("stale-{next}"));
        let path = dir.path("m.safetensors");
        save(&filled(2, 3.0), &path)?;
        let tmp =
            |host: &str, pid: u32, n: u32| format!(".m.safetensors.kusari-tmp-{host}-{pid}-{n}");
        let stale = [tmp(&host, dead_pid(), 0), tmp(&host, dead_pid(), 7)];
        let kept = [
            tmp(&host, sleeper.0.id(), 0),
            tmp(&host, me, 99),
            tmp("some-other-host", dead_pid(), 1),
            ".n.safetensors.kusari-tmp-x-1-0"
                .to_string()
                .replace("x", &host),
            "m.safetensors.bak".to_string(),
        ];
        let old = tmp("yet-another-host", 1, 2);
        for name in stale.iter().chain(&kept).chain([&old]) {
            std::fs::write(dir.path(name), b"partial").expect("written");
        }
        let two_days_ago =
            std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86_400);
        std::fs::File::options()
            .write(true)
            .open(dir.path(&old))
            .and_then(|f| f.set_modified(two_days_ago))
            .expect("set the time");
        match next {
            "save" => save(&filled(2, 4.0), &path)?,
            _ => assert_eq!(loaded(&path, 2)?, vec![3.0; 2]),
        }
        let mut want: Vec<String> = kept.to_vec();
        want.push("m.safetensors".to_string());
        want.sort();
        assert_eq!(dir.entries(), want, "after the next {next}");
    }
    drop(sleeper);
    Ok(())
}

/// A save that fails at its last step (the path is a folder, so the rename fails) leaves no
/// temporary file, and the folder as it was.
#[test]
fn a_failed_save_leaves_no_temporary_file() -> Result<()> {
    let dir = TempDir::new("failed-save");
    let path = dir.path("model.safetensors");
    std::fs::create_dir(&path).expect("a folder where the file would go");
    let err = save(&filled(2, 1.0), &path).unwrap_err();
    assert!(
        matches!(err, Error::CheckpointFile { op: "save", .. }),
        "{err:?}"
    );
    assert_contains(
        &err.to_string(),
        &[&path.display().to_string(), "cannot write the file"],
    );
    assert_eq!(dir.entries(), vec!["model.safetensors".to_string()]);
    assert!(path.is_dir());
    Ok(())
}

/// A `LayerNormalization` is saved as `gamma` and `beta`, and a lazy one takes its size from the
/// file.
#[test]
fn layer_normalization_round_trips_and_a_lazy_one_takes_the_files_size() -> Result<()> {
    use kusari::link::LayerNormalization;
    let dir = TempDir::new("layer-norm");
    let path = dir.path("ln.safetensors");
    let trained = LayerNormalization::new(Some(3), 1e-6, DType::F32)?;
    trained
        .gamma
        .set_array(Array::from_vec(vec![0.5f32, 2.0, -1.0], &[3])?)?;
    trained
        .beta
        .set_array(Array::from_vec(vec![0.25f32, 0.0, 3.0], &[3])?)?;
    save(&trained, &path)?;
    let file = std::fs::read(&path).expect("saved");
    let tensors = SafeTensors::deserialize(&file).expect("valid");
    let mut names = tensors.names();
    names.sort_unstable();
    assert_eq!(names, vec!["beta", "gamma"]);

    let restored = LayerNormalization::new(None, 1e-6, DType::F32)?;
    load(&restored, &path)?;
    assert_eq!(restored.size(), Some(3));
    assert_eq!(
        restored.gamma.array()?.to_vec::<f32>()?,
        vec![0.5, 2.0, -1.0]
    );
    assert_eq!(
        restored.beta.array()?.to_vec::<f32>()?,
        vec![0.25, 0.0, 3.0]
    );
    Ok(())
}
