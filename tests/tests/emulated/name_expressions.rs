//! Template kernels asked for by name expressions (CuPy's `RawModule(name_expressions=..)`):
//! each instance runs on the emulated device against values worked out by hand, its arguments
//! are checked against the template's parameters with the expression's arguments put in, and
//! every mistake (an expression not compiled in, one that is no expression, one naming a type
//! that does not exist) is an error naming it. With NVRTC, each expression's lowered name is
//! the entry its PTX holds, with the parameters kusari read, and the names survive the binary
//! cache on disk.

use kusari::kernels::cache::BinaryCache;
use kusari::kernels::codegen::KernelSource;
use kusari::kernels::compile::{Target, compile_binary_named, compile_binary_named_cached};
use kusari::kernels::raw::{CType, RawParamType, parse_instance, ptx_kernels};
use kusari::prelude::*;
use kusari::{Error, RawModule};

use super::emulated;
use super::raw_kernels::compiled_as;

/// Two templates, one with a default argument and `__launch_bounds__`, and a plain kernel.
const TEMPLATES: &str = r#"
template <typename T, int N = 1>
__global__ void times(T* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * N;
}

template <class In, class Out>
__global__ void __launch_bounds__(256)
convert(const In* __restrict__ in, Out* out, Out offset, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (Out)in[i] + offset;
}

extern "C" __global__ void plain(float* x) { x[0] = 1.0f; }
"#;

const INSTANCES: [&str; 4] = [
    "times<float, 3>",
    "times<double>",
    "convert<int, double>",
    "convert<unsigned char, float>",
];

fn on_gpu(a: Array) -> Array {
    a.to_device(Device::Cuda(0)).unwrap()
}

#[test]
fn each_instance_runs_with_its_own_types() {
    if !emulated("each_instance_runs_with_its_own_types") {
        return;
    }
    let module = RawModule::with_name_expressions(TEMPLATES, &[], &INSTANCES).unwrap();
    assert_eq!(module.name_expressions(), INSTANCES);
    assert_eq!(module.kernel_names(), ["plain"]);
    module.compile(Device::Cuda(0)).unwrap();

    // times<float, 3>: x * 3.
    let x = on_gpu(Array::from_vec(vec![1.5f32, -2.0, 0.25], &[3]).unwrap());
    let k = module.get_function("times<float, 3>").unwrap();
    assert_eq!(k.name(), "times<float, 3>");
    assert_eq!(k.unchecked_reason(), None);
    k.launch(1, 32, &[(&x).into(), 3.into()]).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [4.5, -6.0, 0.75]);

    // times<double>: the default N = 1 leaves x as it is; only the first 2 of 3 are touched
    // by either instance, so a wrong N would show.
    let y = on_gpu(Array::from_vec(vec![2.5f64, -1.0, 7.0], &[3]).unwrap());
    let k = module.get_function("times<double>").unwrap();
    k.launch(1, 32, &[(&y).into(), 2.into()]).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), [2.5, -1.0, 7.0]);
    // Its pointer is a double*: a float32 array is refused before anything runs.
    let e = k.launch(1, 32, &[(&x).into(), 3.into()]).unwrap_err();
    assert!(
        e.to_string().contains(
            "parameter 0 `x` (declared `T* x`) points to double, but argument 0 is a float32 array"
        ),
        "{e}"
    );

    // convert<int, double>: (double)in + 0.5, with the offset a double and n unsigned.
    let input = on_gpu(Array::from_vec(vec![1i32, -2, 3], &[3]).unwrap());
    let out = on_gpu(Array::zeros(&[3], DType::F64).unwrap());
    let k = module.get_function("convert<int, double>").unwrap();
    let types: Vec<RawParamType> = k.params().unwrap().iter().map(|p| p.ty).collect();
    assert_eq!(
        types,
        [
            RawParamType::Pointer(Some(CType::Int(4))),
            RawParamType::Pointer(Some(CType::Double)),
            RawParamType::Scalar(CType::Double),
            RawParamType::Scalar(CType::UInt(4)),
        ]
    );
    k.launch(
        1,
        32,
        &[(&input).into(), (&out).into(), 0.5.into(), 3.into()],
    )
    .unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), [1.5, -1.5, 3.5]);
    let e = k
        .launch(
            1,
            32,
            &[(&input).into(), (&out).into(), 0.5.into(), (-1).into()],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("parameter 3 `n` (declared `unsigned int n`) cannot hold"),
        "{e}"
    );

    // convert<unsigned char, float>: uint8 in, float out.
    let bytes = on_gpu(Array::from_vec(vec![0u8, 200, 255], &[3]).unwrap());
    let out = on_gpu(Array::zeros(&[3], DType::F32).unwrap());
    let k = module
        .get_function("convert<unsigned char, float>")
        .unwrap();
    k.launch(
        1,
        32,
        &[(&bytes).into(), (&out).into(), 1.0f32.into(), 3.into()],
    )
    .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [1.0, 201.0, 256.0]);
    assert_eq!(k.loaded_devices(), [Device::Cuda(0)]);
}

#[test]
fn mistakes_with_name_expressions_name_them() {
    // An expression that is not one, when the module is made.
    for bad in ["times<float", "times<float>; int x", "<float>"] {
        let e = RawModule::with_name_expressions(TEMPLATES, &[], &[bad]).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidKernel { .. })
                && e.to_string().contains("is not a name expression"),
            "{bad}: {e}"
        );
    }
    let module = RawModule::with_name_expressions(TEMPLATES, &[], &INSTANCES[..2]).unwrap();
    // An instance not compiled in.
    let e = module.get_function("times<int, 2>").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("`times<int, 2>` is not among the module's name expressions (times<float, 3>, times<double>)"),
        "{msg}"
    );
    // The template by its bare name: found by nobody, and the message says what to do.
    let k = module.get_function("times").unwrap();
    let why = k.unchecked_reason().unwrap();
    assert!(why.contains("name expression (`times<float>`"), "{why}");
    // A module without expressions says it has none.
    let e = RawModule::new(TEMPLATES)
        .unwrap()
        .get_function("times<float>")
        .unwrap_err();
    assert!(e.to_string().contains("(it has none)"), "{e}");
}

#[test]
fn an_expression_the_compiler_rejects_is_a_compile_error_naming_it() {
    if !emulated("an_expression_the_compiler_rejects_is_a_compile_error_naming_it") {
        return;
    }
    let module = RawModule::with_name_expressions(TEMPLATES, &[], &["times<NoSuchType>"]).unwrap();
    let k = module.get_function("times<NoSuchType>").unwrap();
    // Its type is not one kusari reads: the pointer takes any array, and it says so.
    assert_eq!(k.params().unwrap()[0].ty, RawParamType::Pointer(None));
    let x = on_gpu(Array::zeros(&[2], DType::F32).unwrap());
    let e = k.launch(1, 1, &[(&x).into(), 2.into()]).unwrap_err();
    assert!(matches!(e, Error::KernelCompile { .. }), "{e:?}");
    assert!(e.to_string().contains("NoSuchType"), "{e}");
}

/// The instances NVRTC compiles: each expression's lowered name is an entry of the PTX, with
/// the parameters kusari read from the template, and the cache keeps the names with the binary.
#[test]
fn nvrtc_lowers_each_expression_to_the_entry_it_compiled() {
    if !kusari_tests::nvrtc_or_skip("nvrtc_lowers_each_expression_to_the_entry_it_compiled") {
        return;
    }
    let module = RawModule::with_name_expressions(TEMPLATES, &[], &INSTANCES).unwrap();
    let src = KernelSource {
        entry: "templates".into(),
        source: module.source(),
    };
    let names: Vec<String> = INSTANCES.iter().map(|s| s.to_string()).collect();
    let (_, ptx) = compile_binary_named(&src, &Target::Ptx { major: 8, minor: 0 }, &names).unwrap();
    let lowered = ptx.lowered;
    let ptx = String::from_utf8_lossy(&ptx.binary);
    // Itanium mangling: `times<float, 3>` is `void times<float, 3>(float*, int)`.
    assert_eq!(lowered[0], "_Z5timesIfLi3EEvPT_i");
    let entries = ptx_kernels(&ptx);
    for (expr, name) in INSTANCES.iter().zip(&lowered) {
        let entry = entries
            .iter()
            .find(|f| &f.name == name)
            .unwrap_or_else(|| panic!("{expr} as {name} in the PTX"));
        let declared = parse_instance(&src.source, expr).unwrap();
        assert_eq!(declared.params.len(), entry.params.len(), "{expr}");
        for (d, c) in declared.params.iter().zip(&entry.params) {
            assert!(
                compiled_as(d, c),
                "{expr}: `{}` compiled as `{}`",
                d.decl,
                c.decl
            );
        }
    }
    // Through a cache on disk, read back by a second cache (another process's view).
    let dir = std::env::temp_dir().join(format!("kusari-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let target = Target::Cubin { major: 9, minor: 0 };
    let first = BinaryCache::new(Some(dir.clone()));
    let (_, made) = compile_binary_named_cached(&src, &target, &names, &first).unwrap();
    assert_eq!(made.lowered, lowered);
    assert!(
        made.binary.starts_with(b"\x7fELF"),
        "the binary alone, without the names"
    );
    let second = BinaryCache::new(Some(dir.clone()));
    let (_, again) = compile_binary_named_cached(&src, &target, &names, &second).unwrap();
    assert_eq!(second.stats().disk_hits, 1);
    assert_eq!(second.stats().compiles, 0);
    assert_eq!(again, made);
    let _ = std::fs::remove_dir_all(&dir);
}
