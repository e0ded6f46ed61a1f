//! `ReductionKernel` (CuPy's `ReductionKernel`) on the emulated CUDA device, against references
//! computed here in f64 by plain loops: sums, max with and without identity, a user-defined L2
//! norm, a mean over several axes, an argmax through a preamble's struct, over leading,
//! trailing, middle and all axes, with keepdims, on strided and broadcast inputs, with typed
//! scalar parameters; every launch strategy of the plan; empty reductions; and the errors.
//! NVRTC compiles every kernel here and the softmax example's (a skip without NVRTC, unless
//! `KUSARI_REQUIRE_NVRTC=1`).

use kusari::kernels::ScalarType;
use kusari::kernels::codegen::{IndexWidth, Indexing, generate};
use kusari::kernels::compile::compile_ptx;
use kusari::kernels::reduction::{ReductionPlan, Strategy, generate_reduction};
use kusari::prelude::*;
use kusari::{Error, ReductionDef, ReductionKernel, Scalar, cuda};
use kusari_tests::{unravel, views_whose_loop_overflows};

use super::emulated;

fn on_gpu(a: &Array) -> Array {
    a.to_device(Device::Cuda(0)).unwrap()
}

/// Values of `shape` in C order: distinct, of both signs, exact in float32.
fn values(shape: &[usize], seed: usize) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| (((i * 37 + seed * 11) % 101) as f64 - 50.0) / 8.0)
        .collect();
    Array::from_vec(v, shape).unwrap()
}

/// The logical elements of `a` (any layout, any device) as f64, in C order.
fn host_f64(a: &Array) -> Vec<f64> {
    a.to_device(Device::Cpu)
        .unwrap()
        .astype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

/// The reduction of `x` (shape `shape`, C order) over `axes`: each output `o` folds
/// `map(element, o, index within its reduction)` with `f` from `init`.
fn reference(
    x: &[f64],
    shape: &[usize],
    axes: &[usize],
    init: f64,
    map: impl Fn(f64, usize, usize) -> f64,
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let n_out: usize = kept.iter().map(|&d| shape[d]).product();
    let mut out = vec![init; n_out];
    for (flat, &v) in x.iter().enumerate() {
        let idx = unravel(flat, shape);
        let o = kept.iter().fold(0, |o, &d| o * shape[d] + idx[d]);
        let j = axes.iter().fold(0, |j, &d| j * shape[d] + idx[d]);
        out[o] = f(out[o], map(v, o, j));
    }
    out
}

fn close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= tol * (1.0 + e.abs()),
            "element {i}: {a}, expected {e}\nactual:   {actual:?}\nexpected: {expected:?}"
        );
    }
}

static SUM: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_sum",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a + b",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
});
static MAX: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_max",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a > b ? a : b",
    post_map_expr: "y = a",
    identity: None,
    ..ReductionDef::DEFAULT
});
/// max(0, max(x)): the identity takes part in every reduction.
static MAX0: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_max0",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a > b ? a : b",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
});
static L2_NORM: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_l2",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x * x",
    reduce_expr: "a + b",
    post_map_expr: "y = sqrt(a)",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
})
.with_reduce_type("double");
static MEAN: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_mean",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a + b",
    post_map_expr: "y = a / _N",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
});
static ARGMAX: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_argmax",
    in_params: "T x",
    out_params: "int64 index, T value",
    map_expr: "ValueIndex{(double)x, _J}",
    reduce_expr: "better(a, b)",
    post_map_expr: "index = a.index; value = (T)a.value",
    identity: None,
    ..ReductionDef::DEFAULT
})
.with_reduce_type("ValueIndex")
.with_preamble(
    "struct ValueIndex { double value; long long index; };\n\
     // The larger value; the first index among equal ones.\n\
     __device__ ValueIndex better(ValueIndex a, ValueIndex b) {\n\
       return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;\n\
     }",
);
/// A tally of each reduction's elements in an 8-byte struct: how many, and the wrapping sum
/// of a hash of each element and its index. A part lost or counted twice changes it; so does
/// an empty accumulator taken for a value where there is no identity, as a default-constructed
/// tally counts a million.
const TALLY_PREAMBLE: &str = "struct Tally {\n\
       unsigned int n; unsigned int h;\n\
       __device__ Tally() : n(1000000u), h(7u) {}\n\
       __device__ Tally(unsigned int n_, unsigned int h_) : n(n_), h(h_) {}\n\
     };";
const TALLY_DEF: ReductionDef = ReductionDef {
    name: "rk_tally",
    in_params: "T x",
    out_params: "int64 count, int64 hash",
    map_expr: "Tally{1u, (2u * (unsigned int)(long long)x + 1u) * ((unsigned int)_J * 2654435761u + 1u)}",
    reduce_expr: "Tally{a.n + b.n, a.h + b.h}",
    post_map_expr: "count = a.n; hash = a.h",
    identity: None,
    ..ReductionDef::DEFAULT
};
static TALLY: ReductionKernel = ReductionKernel::from_def(TALLY_DEF)
    .with_reduce_type("Tally")
    .with_preamble(TALLY_PREAMBLE);
/// [`TALLY`] with the empty tally as identity.
static TALLY_ID: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_tally_id",
    identity: Some("Tally{0u, 0u}"),
    ..TALLY_DEF
})
.with_reduce_type("Tally")
.with_preamble(TALLY_PREAMBLE);

/// [`TALLY`] of `x` (C order, 2-d `shape`) along `axis`.
fn tally_reference(x: &[f64], shape: &[usize], axis: usize) -> (Vec<f64>, Vec<f64>) {
    let n_out = shape[1 - axis];
    let mut tallies = vec![(0u32, 0u32); n_out];
    for (flat, &v) in x.iter().enumerate() {
        let idx = unravel(flat, shape);
        let (o, j) = (idx[1 - axis], idx[axis] as u32);
        let mix = 2u32
            .wrapping_mul(v as i64 as u32)
            .wrapping_add(1)
            .wrapping_mul(j.wrapping_mul(2654435761).wrapping_add(1));
        let (n, h) = tallies[o];
        tallies[o] = (n + 1, h.wrapping_add(mix));
    }
    tallies.iter().map(|&(n, h)| (n as f64, h as f64)).unzip()
}

/// sum(x * w) * scale + offset, with scalar parameters of two types.
static WEIGHTED: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_weighted",
    in_params: "T x, T w",
    out_params: "T y",
    map_expr: "x * w",
    reduce_expr: "a + b",
    post_map_expr: "y = a * scale + (T)offset",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
})
.with_params("T scale, int64 offset");

#[test]
fn sums_over_every_kind_of_axis_set_with_and_without_keepdims() {
    if !emulated("sums_over_every_kind_of_axis_set_with_and_without_keepdims") {
        return;
    }
    let shape = [3, 4, 5];
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64] {
        let hx = values(&shape, 1).astype(dtype).unwrap();
        let x = on_gpu(&hx);
        let data = host_f64(&hx);
        let cases: [(Option<&[isize]>, Vec<usize>); 7] = [
            (None, vec![0, 1, 2]),
            (Some(&[0]), vec![0]),
            (Some(&[1]), vec![1]),
            (Some(&[-1]), vec![2]),
            (Some(&[0, 2]), vec![0, 2]),
            (Some(&[-1, -2]), vec![1, 2]),
            (Some(&[]), vec![]),
        ];
        for (axis, axes) in cases {
            let expected = reference(&data, &shape, &axes, 0.0, |v, _, _| v, |a, b| a + b);
            for keepdims in [false, true] {
                let y = SUM.launch(&[&x], &[], axis, keepdims).unwrap().remove(0);
                assert_eq!(y.dtype(), dtype);
                let want: Vec<usize> = (0..3)
                    .filter_map(|d| match (axes.contains(&d), keepdims) {
                        (true, true) => Some(1),
                        (true, false) => None,
                        (false, _) => Some(shape[d]),
                    })
                    .collect();
                assert_eq!(y.shape(), &want[..], "{axis:?} keepdims {keepdims}");
                close(&host_f64(&y), &expected, 1e-6);
            }
        }
    }
}

#[test]
fn max_without_identity_starts_from_the_first_value_and_with_one_from_it() {
    if !emulated("max_without_identity_starts_from_the_first_value_and_with_one_from_it") {
        return;
    }
    let shape = [6, 7];
    // All negative: a max that started from 0 would be wrong.
    let hx = values(&shape, 2).add_scalar(-100.0).unwrap();
    for dtype in [DType::F32, DType::F64, DType::I64] {
        let data = host_f64(&hx.astype(dtype).unwrap());
        let x = on_gpu(&hx.astype(dtype).unwrap());
        for axes in [vec![0], vec![1], vec![0, 1]] {
            let axis: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            let y = MAX
                .launch(&[&x], &[], Some(&axis), false)
                .unwrap()
                .remove(0);
            let expected = reference(
                &data,
                &shape,
                &axes,
                f64::NEG_INFINITY,
                |v, _, _| v,
                f64::max,
            );
            close(&host_f64(&y), &expected, 0.0);
            let y = MAX0
                .launch(&[&x], &[], Some(&axis), false)
                .unwrap()
                .remove(0);
            assert!(host_f64(&y).iter().all(|&v| v == 0.0), "{y:?}");
        }
    }
}

#[test]
fn a_user_defined_l2_norm_mean_and_argmax() {
    if !emulated("a_user_defined_l2_norm_mean_and_argmax") {
        return;
    }
    let shape = [4, 3, 6];
    let hx = values(&shape, 3);
    let data = host_f64(&hx);
    for dtype in [DType::F32, DType::F64, DType::F16] {
        let x = on_gpu(&hx.astype(dtype).unwrap());
        let data = host_f64(&hx.astype(dtype).unwrap());
        let tol = if dtype == DType::F16 { 1e-3 } else { 1e-6 };
        // L2 norm over the middle axis, accumulated in double.
        let y = L2_NORM
            .launch(&[&x], &[], Some(&[1]), false)
            .unwrap()
            .remove(0);
        assert_eq!((y.shape(), y.dtype()), (&[4, 6][..], dtype));
        let sq = reference(&data, &shape, &[1], 0.0, |v, _, _| v * v, |a, b| a + b);
        let expected: Vec<f64> = sq.iter().map(|s| s.sqrt()).collect();
        close(&host_f64(&y), &expected, tol);
        // Mean over the first and last axes, kept as length 1.
        let y = MEAN
            .launch(&[&x], &[], Some(&[0, 2]), true)
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[1, 3, 1]);
        let sums = reference(&data, &shape, &[0, 2], 0.0, |v, _, _| v, |a, b| a + b);
        let expected: Vec<f64> = sums.iter().map(|s| s / 24.0).collect();
        close(&host_f64(&y), &expected, tol);
    }
    // Argmax over the last axis and over everything: the index within the reduction.
    let x = on_gpu(&hx);
    for axes in [vec![2], vec![0, 1, 2], vec![0]] {
        let axis: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        let out = ARGMAX.launch(&[&x], &[], Some(&axis), false).unwrap();
        assert_eq!(out[0].dtype(), DType::I64);
        let best = reference(
            &data,
            &shape,
            &axes,
            f64::NEG_INFINITY,
            |v, _, _| v,
            f64::max,
        );
        close(&host_f64(&out[1]), &best, 0.0);
        // The first index of the maximum, found by a host loop.
        let first = reference(
            &data,
            &shape,
            &axes,
            f64::INFINITY,
            |v, o, j| {
                if v == best[o] {
                    j as f64
                } else {
                    f64::INFINITY
                }
            },
            f64::min,
        );
        close(&host_f64(&out[0]), &first, 0.0);
    }
}

#[test]
fn strided_and_broadcast_inputs_are_read_in_place() {
    if !emulated("strided_and_broadcast_inputs_are_read_in_place") {
        return;
    }
    let hx = values(&[5, 8], 4);
    let x = on_gpu(&hx);
    // A transposed view, a flipped one, a strided slice: the same results as their copies.
    let views = [
        x.t(),
        x.flip(1).unwrap(),
        x.slice_axis(1, 1, 8, 3).unwrap(),
        x.t().flip(0).unwrap(),
    ];
    for v in &views {
        let data = host_f64(v);
        let shape = v.shape().to_vec();
        for axes in [vec![0], vec![1], vec![0, 1]] {
            let axis: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            let y = SUM.launch(&[v], &[], Some(&axis), false).unwrap().remove(0);
            let expected = reference(&data, &shape, &axes, 0.0, |v, _, _| v, |a, b| a + b);
            close(&host_f64(&y), &expected, 1e-12);
        }
    }
    // A weighted sum whose weights broadcast along axis 0 ([8] against [5, 8]), and
    // whose input is itself broadcast ([1, 8] to [5, 8]); scalar parameters of two types.
    let hw = values(&[8], 5);
    let w = on_gpu(&hw);
    let wd = host_f64(&hw);
    let xd = host_f64(&hx);
    let offset = (1i64 << 40) + 1;
    for axes in [vec![0], vec![1]] {
        let axis: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        let y = WEIGHTED
            .launch(
                &[&x, &w],
                &[Scalar::from(0.5), Scalar::from(offset)],
                Some(&axis),
                false,
            )
            .unwrap()
            .remove(0);
        let products: Vec<f64> = xd.iter().enumerate().map(|(i, v)| v * wd[i % 8]).collect();
        let sums = reference(&products, &[5, 8], &axes, 0.0, |v, _, _| v, |a, b| a + b);
        let expected: Vec<f64> = sums.iter().map(|s| s * 0.5 + offset as f64).collect();
        close(&host_f64(&y), &expected, 1e-15);
    }
    let row = on_gpu(&hw.reshape(&[1, 8]).unwrap())
        .broadcast_to(&[5, 8])
        .unwrap();
    let y = SUM
        .launch(&[&row], &[], Some(&[0]), false)
        .unwrap()
        .remove(0);
    close(
        &host_f64(&y),
        &wd.iter().map(|v| v * 5.0).collect::<Vec<_>>(),
        1e-12,
    );
}

#[test]
fn every_strategy_of_the_plan_gives_the_host_result() {
    if !emulated("every_strategy_of_the_plan_gives_the_host_result") {
        return;
    }
    let sm = cuda::device_properties(0).unwrap().sm_count as usize;
    // (shape, reduced axis, whether the reduction runs along memory, the strategy).
    let cases: [(&[usize], usize, bool, &str); 9] = [
        (&[3000, 8], 1, true, "thread"),
        (&[64, 300], 1, true, "warp"),
        (&[40, 5000], 1, true, "block"),
        (&[2, 20000], 1, true, "split"),
        (&[3, 9000], 0, false, "thread"),
        (&[300, 5], 0, false, "block"),
        (&[300, 70], 0, false, "column"),
        (&[1000, 4099], 0, false, "column"),
        (&[20000, 2], 0, false, "split"),
    ];
    for (shape, axis, inner, strategy) in cases {
        let n_out = shape[1 - axis];
        let len = shape[axis];
        let plan = ReductionPlan::new(n_out, len, inner, true, sm);
        let got = match plan.strategy {
            Strategy::ThreadPerOutput => "thread",
            Strategy::WarpPerOutput => "warp",
            Strategy::BlockPerOutput => "block",
            Strategy::ColumnBlock => "column",
            Strategy::Split { .. } => "split",
        };
        assert_eq!(got, strategy, "{shape:?} axis {axis}: {plan:?}");
        let hx = values(shape, 6);
        let data = host_f64(&hx);
        let x = on_gpu(&hx.astype(DType::F32).unwrap());
        let y = SUM
            .launch(&[&x], &[], Some(&[axis as isize]), false)
            .unwrap()
            .remove(0);
        let expected = reference(&data, shape, &[axis], 0.0, |v, _, _| v, |a, b| a + b);
        close(&host_f64(&y), &expected, 1e-5);
        // Without identity, through the same strategy.
        let y = MAX
            .launch(&[&x], &[], Some(&[axis as isize]), false)
            .unwrap()
            .remove(0);
        let expected = reference(
            &data,
            shape,
            &[axis],
            f64::NEG_INFINITY,
            |v, _, _| v,
            f64::max,
        );
        close(&host_f64(&y), &expected, 0.0);
        // Every element counted once, through a struct of two words (lanes combine by
        // shuffles, warps through shared memory), with and without identity.
        let hi = hx.astype(DType::I64).unwrap();
        let (count, hash) = tally_reference(&host_f64(&hi), shape, axis);
        let xi = on_gpu(&hi);
        for kernel in [&TALLY, &TALLY_ID] {
            let out = kernel
                .launch(&[&xi], &[], Some(&[axis as isize]), false)
                .unwrap();
            close(&host_f64(&out[0]), &count, 0.0);
            close(&host_f64(&out[1]), &hash, 0.0);
        }
    }
}

#[test]
fn empty_reductions_give_the_identity_or_an_error() {
    if !emulated("empty_reductions_give_the_identity_or_an_error") {
        return;
    }
    let x = on_gpu(&Array::zeros(&[3, 0], DType::F32).unwrap());
    let y = SUM.launch(&[&x], &[], Some(&[1]), false).unwrap().remove(0);
    assert_eq!(y.shape(), &[3]);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0; 3]);
    let y = MEAN.launch(&[&x], &[], None, false).unwrap().remove(0);
    assert!(y.to_vec::<f32>().unwrap()[0].is_nan(), "0 / 0");
    let e = MAX.launch(&[&x], &[], Some(&[1]), false).unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("kernel rk_max: reducing axes [1] of shape [3, 0] combines zero elements"),
        "{e}"
    );
    // A 0-dimensional array, and axes of length 1: one element per reduction.
    let scalar = on_gpu(&Array::from_vec(vec![-2.5f64], &[]).unwrap());
    for k in [&SUM, &MAX] {
        let y = k.launch(&[&scalar], &[], None, false).unwrap().remove(0);
        assert_eq!(
            (y.shape(), y.to_vec::<f64>().unwrap()),
            (&[][..], vec![-2.5])
        );
    }
    let ones = on_gpu(&Array::from_vec(vec![7i32], &[1, 1]).unwrap());
    let y = MAX
        .launch(&[&ones], &[], Some(&[0]), true)
        .unwrap()
        .remove(0);
    assert_eq!(
        (y.shape(), y.to_vec::<i32>().unwrap()),
        (&[1, 1][..], vec![7])
    );
    // No output element: nothing to reduce, no identity needed.
    let y = MAX.launch(&[&x], &[], Some(&[0]), true).unwrap().remove(0);
    assert_eq!(y.shape(), &[1, 0]);
}

#[test]
fn errors_name_the_kernel_the_argument_and_the_expression_line() {
    if !emulated("errors_name_the_kernel_the_argument_and_the_expression_line") {
        return;
    }
    let x = on_gpu(&values(&[2, 3], 7));
    let bad = ReductionKernel::from_def(ReductionDef {
        name: "rk_broken",
        in_params: "T x",
        out_params: "T y",
        map_expr: "x *\n undefined_thing",
        reduce_expr: "a + b",
        post_map_expr: "y = a",
        identity: Some("0"),
        ..ReductionDef::DEFAULT
    });
    let e = bad.launch(&[&x], &[], None, false).unwrap_err();
    assert!(matches!(e, Error::KernelCompile { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&kusari_tests::compiler_line("rk_broken_map_expr", 2))
            && text.contains("undefined_thing"),
        "{text}"
    );
    // Dtypes that do not bind, devices that differ, host arrays.
    let w = on_gpu(&values(&[3], 8).astype(DType::F32).unwrap());
    let e = WEIGHTED
        .launch(
            &[&x, &w],
            &[Scalar::from(1.0), Scalar::from(0i64)],
            None,
            false,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("kernel rk_weighted: argument `w` is float32")
            && e.contains("`T` was bound to float64 by `x`"),
        "{e}"
    );
    let host = values(&[3], 8);
    let e = WEIGHTED
        .launch(
            &[&x, &host],
            &[Scalar::from(1.0), Scalar::from(0i64)],
            None,
            false,
        )
        .unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch { .. }), "{e}");
    let e = SUM.launch(&[&host], &[], None, false).unwrap_err();
    assert!(matches!(e, Error::CudaUnavailable { .. }), "{e}");
    // An int64 parameter that a float cannot hold exactly reaches the kernel exactly.
    let big = (1i64 << 53) + 1;
    let offset_only = ReductionKernel::from_def(ReductionDef {
        name: "rk_offset",
        in_params: "T x",
        out_params: "int64 y",
        map_expr: "x",
        reduce_expr: "a + b",
        post_map_expr: "y = (long long)a + offset",
        identity: Some("0"),
        ..ReductionDef::DEFAULT
    })
    .with_params("int64 offset");
    let zeros = on_gpu(&Array::zeros(&[4], DType::I64).unwrap());
    let y = offset_only
        .launch(&[&zeros], &[Scalar::from(big)], None, false)
        .unwrap()
        .remove(0);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![big]);
    let e = offset_only
        .launch(&[&zeros], &[Scalar::from(0.5)], None, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("parameter `offset` is"), "{e}");
    let e = SUM.launch(&[&x], &[], Some(&[0, 0]), false).unwrap_err();
    assert!(e.to_string().contains("repeated axis"), "{e}");
    let e = SUM.launch(&[&x], &[], Some(&[-3]), false).unwrap_err();
    assert!(matches!(e, Error::Axis { axis: -3, .. }), "{e}");
}

#[test]
fn every_reduction_kernel_here_in_the_softmax_example_and_built_in_compiles_with_nvrtc() {
    if !kusari_tests::nvrtc_or_skip(
        "every_reduction_kernel_here_in_the_softmax_example_and_built_in_compiles_with_nvrtc",
    ) {
        return;
    }
    use kusari_examples::softmax::{EXP_SHIFTED, NORMALIZE, ROW_MAX, ROW_SUM};
    let reductions = [
        &SUM, &MAX, &MAX0, &L2_NORM, &MEAN, &ARGMAX, &WEIGHTED, &ROW_MAX, &ROW_SUM,
    ];
    let mut compiled = 0;
    for k in reductions {
        let sig = k.signature().unwrap();
        for t in [ScalarType::Float32, ScalarType::Float64] {
            // Layouts of up to 4 dimensions (every launch above) and of up to 8.
            for (kept, reduced) in [(1, 1), (5, 1)] {
                let src = generate_reduction(k, &sig, &[('T', t)], kept, reduced).unwrap();
                compile_ptx(&src, "compute_90").unwrap_or_else(|e| panic!("{}: {e}", k.name));
                compiled += 1;
            }
        }
    }
    for k in [&EXP_SHIFTED, &NORMALIZE] {
        let sig = k.signature().unwrap();
        for t in [ScalarType::Float32, ScalarType::Float64] {
            for indexing in [Indexing::Contiguous, Indexing::Strided { ndim: 2 }] {
                let src =
                    generate(k.name, &sig, k.body, &[('T', t)], indexing, IndexWidth::I32).unwrap();
                compile_ptx(&src, "compute_90").unwrap_or_else(|e| panic!("{}: {e}", k.name));
                compiled += 1;
            }
        }
    }
    assert_eq!(compiled, 9 * 2 * 2 + 2 * 2 * 2);

    // The built-in sum, max and min, in each dtype they run in.
    let builtins = kusari::array_reduction_kernels();
    assert_eq!(builtins.len(), 5, "sum (generic, int32, int64), max, min");
    let mut compiled = 0;
    for (k, dtypes) in &builtins {
        let sig = k.signature().unwrap();
        for &d in *dtypes {
            let t = ScalarType::from_name(d.name()).unwrap();
            for (kept, reduced) in [(1, 1), (5, 1)] {
                let src = generate_reduction(k, &sig, &[('T', t)], kept, reduced).unwrap();
                compile_ptx(&src, "compute_90").unwrap_or_else(|e| panic!("{}: {e}", k.name));
                compiled += 1;
            }
        }
    }
    // Sum in 8 dtypes generically, int32 and int64 through unsigned, max and min in 10.
    assert_eq!(compiled, (8 + 1 + 1 + 10 + 10) * 2);
}

static DOT: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "rk_dot",
    in_params: "T x, T y",
    out_params: "T z",
    map_expr: "x * y",
    reduce_expr: "a + b",
    post_map_expr: "z = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
});

#[test]
fn a_broadcast_loop_whose_size_overflows_is_an_error() {
    if !emulated("a_broadcast_loop_whose_size_overflows_is_an_error") {
        return;
    }
    // 2⁶⁴ products, whose count wrapped to 0 and gave the identity.
    let (tall, wide) = views_whose_loop_overflows(Device::Cuda(0));
    let e = DOT.launch(&[&tall, &wide], &[], None, false).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeOverflow { op: "rk_dot", shape, .. } if shape == &[1 << 32, 1 << 32]),
        "{e:?}"
    );
    // A product that fits is computed: 3 · 2 over a broadcast [4, 1] and [1, 5].
    let (a, b) = (
        on_gpu(&Array::full(&[4, 1], 3.0, DType::F32).unwrap()),
        on_gpu(&Array::full(&[1, 5], 2.0, DType::F32).unwrap()),
    );
    let z = DOT.launch(&[&a, &b], &[], None, false).unwrap().remove(0);
    assert_eq!(z.to_vec::<f32>().unwrap(), [120.0]);
}
