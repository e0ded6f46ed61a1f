//! What a kernel has compiled (CuPy's `cached_codes` role): `ElementwiseKernel`'s and
//! `ReductionKernel`'s `cached_variants` and `RawKernel::loaded_devices`, on two emulated
//! devices; and kernels built at run time from owned strings (`try_new`, `kusari::intern`),
//! which share their variants with the same definition built again.

use kusari::prelude::*;
use kusari::{ElementwiseKernel, RawKernel, ReductionDef, ReductionKernel, intern};

use super::emulated;

static SQUARE: ElementwiseKernel =
    ElementwiseKernel::new("cached_square", "T x", "T y", "", "y = x * x");

static SUM_SQUARES: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "cached_sum_squares",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x * x",
    reduce_expr: "a + b",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
});

fn on(device: usize, v: Vec<f64>, shape: &[usize]) -> Array {
    Array::from_vec(v, shape)
        .unwrap()
        .to_device(Device::Cuda(device))
        .unwrap()
}

/// A variant's device, placeholders' types and form.
type Listed = (Device, Vec<(char, DType)>, String);

/// `(device, types, form)` of each variant, sorted.
fn listed(v: Vec<kusari::CachedVariant>) -> Vec<Listed> {
    let mut l: Vec<_> = v
        .into_iter()
        .map(|c| {
            assert!(
                c.source
                    .source
                    .contains(&format!("void {}(", c.source.entry)),
                "the source defines its entry point: {}",
                c.source.entry
            );
            (c.device, c.types, c.form)
        })
        .collect();
    l.sort_by_key(|(d, t, f)| (format!("{d:?}"), format!("{t:?}"), f.clone()));
    l
}

#[test]
fn each_kernel_lists_the_variants_it_compiled_and_where() {
    if !emulated("each_kernel_lists_the_variants_it_compiled_and_where") {
        return;
    }
    assert!(
        SQUARE.cached_variants().is_empty(),
        "nothing before a launch"
    );
    let x = on(0, vec![1.0, -2.0, 3.0, 4.0, 5.0, -6.0], &[2, 3]);
    let y = SQUARE.launch(&[&x], &[]).unwrap().remove(0);
    assert_eq!(
        y.to_vec::<f64>().unwrap(),
        vec![1.0, 4.0, 9.0, 16.0, 25.0, 36.0]
    );
    // The same form again compiles nothing new; a transposed view is strided.
    SQUARE.launch(&[&x], &[]).unwrap();
    let t = SQUARE.launch(&[&x.t()], &[]).unwrap().remove(0);
    assert_eq!(
        t.to_vec::<f64>().unwrap(),
        vec![1.0, 16.0, 4.0, 25.0, 9.0, 36.0]
    );
    // float32 on the second device, written in place.
    let x1 = on(1, vec![0.5, 2.0], &[2]).astype(DType::F32).unwrap();
    SQUARE.call().arg(&x1).out(&x1).run().unwrap();
    assert_eq!(x1.to_vec::<f32>().unwrap(), vec![0.25, 4.0]);
    let f64s = vec![('T', DType::F64)];
    assert_eq!(
        listed(SQUARE.cached_variants()),
        vec![
            (Device::Cuda(0), f64s.clone(), "contiguous".to_string()),
            (Device::Cuda(0), f64s, "strided, 2 axes".to_string()),
            (
                Device::Cuda(1),
                vec![('T', DType::F32)],
                "contiguous, in place".to_string()
            ),
        ]
    );

    assert!(SUM_SQUARES.cached_variants().is_empty());
    let s = SUM_SQUARES
        .launch(&[&x], &[], None, false)
        .unwrap()
        .remove(0);
    assert_eq!(s.to_vec::<f64>().unwrap(), vec![91.0]);
    let v = SUM_SQUARES.cached_variants();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(
        (v[0].device, &v[0].types[..]),
        (Device::Cuda(0), &[('T', DType::F64)][..])
    );
    assert!(v[0].form.starts_with("layouts of up to "), "{}", v[0].form);

    let fill = RawKernel::new(
        r#"extern "C" __global__ void cached_fill(float* x, float v, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] = v;
        }"#,
        "cached_fill",
    )
    .unwrap();
    assert!(fill.loaded_devices().is_empty());
    let z = on(1, vec![0.0; 3], &[3]).astype(DType::F32).unwrap();
    fill.launch(1, 32, &[(&z).into(), 7.0f32.into(), 3.into()])
        .unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![7.0; 3]);
    assert_eq!(fill.loaded_devices(), vec![Device::Cuda(1)]);
}

#[test]
fn a_kernel_built_from_owned_strings_shares_its_variants_with_its_twin() {
    if !emulated("a_kernel_built_from_owned_strings_shares_its_variants") {
        return;
    }
    // Parts built at run time, as a CuPy user builds them from a config.
    let build = |factor: i32| {
        ElementwiseKernel::try_new(
            format!("owned_scale_{factor}"),
            String::from("T x"),
            String::from("T y"),
            "",
            format!("y = x * (T){factor}"),
        )
        .unwrap()
    };
    let x = on(0, vec![1.0, -2.5], &[2]);
    let k = build(3);
    assert_eq!(
        k.launch(&[&x], &[]).unwrap()[0].to_vec::<f64>().unwrap(),
        vec![3.0, -7.5]
    );
    // The same definition built again holds the same interned strings: one variant.
    let twin = build(3);
    assert!(std::ptr::eq(k.body, twin.body));
    assert_eq!(twin.cached_variants().len(), 1);
    let other = build(4);
    assert!(other.cached_variants().is_empty());
    assert_eq!(
        other.launch(&[&x], &[]).unwrap()[0]
            .to_vec::<f64>()
            .unwrap(),
        vec![4.0, -10.0]
    );
    // A reduction's parts through intern.
    let op = "max";
    let r = ReductionKernel::checked(ReductionDef {
        name: intern(&format!("owned_{op}")),
        in_params: "T x",
        out_params: "T y",
        map_expr: "x",
        reduce_expr: intern(&format!("{op}(a, b)")),
        post_map_expr: "y = a",
        ..ReductionDef::DEFAULT
    })
    .unwrap();
    let m = r.launch(&[&x], &[], None, false).unwrap().remove(0);
    assert_eq!(m.to_vec::<f64>().unwrap(), vec![1.0]);
    // A definition's mistakes are reported as for a static one.
    let e = ElementwiseKernel::try_new("bad", "T x", "T y", String::new(), "y = (x;").unwrap_err();
    assert!(e.to_string().contains("invalid body"), "{e}");
}
