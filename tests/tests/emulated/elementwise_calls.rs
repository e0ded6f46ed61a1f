//! `ElementwiseKernel::call` on the emulated CUDA device, against host results: typed scalar
//! parameters (an int64 beyond 2^53 arrives exactly; a value that does not fit is an error),
//! outputs the caller gives (written in place, strided views included; mismatches and unsafe
//! aliasing refused), scalars where array inputs are declared, launches without array
//! arguments on the default or a given device, `no_return`, and `reduce_dims` (fewer axes in
//! the strided variant, the same results); a broadcast loop too large to count is an error.

use kusari::prelude::*;
use kusari::{ElementwiseKernel, Error, Scalar, using_device};
use kusari_tests::launch_form_kernels::{
    AXPY, IOTA, MUL_PLUS_INDEX, MUL_PLUS_INDEX_ALL_AXES, RAW_PLUS, SGD_STEP, SHIFT_I64,
    SUM_AND_DIFF,
};
use kusari_tests::{assert_close, uniform, views_whose_loop_overflows};

use super::emulated;

fn on_gpu(a: &Array) -> Array {
    a.to_device(Device::Cuda(0)).unwrap()
}

fn message(r: Result<Vec<Array>>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e @ Error::KernelArguments { .. }) => e.to_string(),
        Err(e) => panic!("expected Error::KernelArguments, got {e:?}"),
    }
}

#[test]
fn an_int64_parameter_keeps_every_bit_and_a_value_that_does_not_fit_is_refused() {
    if !emulated("an_int64_parameter_keeps_every_bit") {
        return;
    }
    let xs = vec![0i64, 1, -3];
    let x = on_gpu(&Array::from_vec(xs.clone(), &[3]).unwrap());
    let d = (1i64 << 60) + 1; // not an f64: as one it would round to 2^60
    let y = SHIFT_I64
        .launch(&[&x], &[Scalar::from(d)])
        .unwrap()
        .remove(0);
    let expected: Vec<i64> = xs.iter().map(|v| v + d).collect();
    assert_eq!(y.to_vec::<i64>().unwrap(), expected);
    // The builder's `param` takes plain numbers; an integral float converts.
    let y = SHIFT_I64.call().arg(&x).param(2.0).run().unwrap().remove(0);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![2, 3, -1]);
    let e = message(SHIFT_I64.launch(&[&x], &[2.5.into()]));
    assert_eq!(
        e,
        "kernel shift_i64: parameter `d` is 2.5 (float64), which does not fit its type int64"
    );
    let e = message(
        AXPY.call()
            .arg(&on_gpu(&Array::zeros(&[2], DType::I32).unwrap()))
            .arg(&on_gpu(&Array::zeros(&[2], DType::I32).unwrap()))
            .arg(Scalar::from(1i64 << 40))
            .run(),
    );
    assert!(
        e.contains("argument `y` is 1099511627776 (int64), which does not fit its type int32 (placeholder `T`)"),
        "{e}"
    );
    let e = message(SHIFT_I64.launch(&[&x], &[]));
    assert!(
        e.contains("0 scalar parameter(s) given, the signature declares 1"),
        "{e}"
    );
}

#[test]
fn an_output_given_is_written_in_place_and_every_view_of_it_sees_the_values() {
    if !emulated("an_output_given_is_written_in_place") {
        return;
    }
    let (hw, hg) = (uniform(&[3, 4], 1), uniform(&[3, 4], 2));
    let lr = 0.25;
    let expected = hw.sub(&hg.mul_scalar(lr).unwrap()).unwrap();
    let w = on_gpu(&hw);
    let alias = w.clone();
    let g = on_gpu(&hg);
    let returned = SGD_STEP
        .call()
        .args(&[&w, &g])
        .param(lr)
        .out(&w)
        .run()
        .unwrap();
    assert!(returned.is_empty(), "no_return: nothing comes back");
    assert_close(&w.to_device(Device::Cpu).unwrap(), &expected, 0.0, 0.0);
    assert_close(&alias.to_device(Device::Cpu).unwrap(), &expected, 0.0, 0.0);

    // A strided output view (a transpose of a fresh buffer) is written through its strides.
    let (hx, hy) = (uniform(&[4, 3], 3), uniform(&[4, 3], 4));
    let base = on_gpu(&Array::zeros(&[3, 4], DType::F64).unwrap());
    let view = base.t();
    let out = SUM_AND_DIFF
        .call()
        .args(&[&on_gpu(&hx), &on_gpu(&hy)])
        .out(&view)
        .out(&on_gpu(&Array::zeros(&[4, 3], DType::F64).unwrap()))
        .run()
        .unwrap();
    assert_eq!(out.len(), 2, "the outputs given come back");
    assert!(out[0].shares_buffer(&base));
    assert_close(
        &out[0].to_device(Device::Cpu).unwrap(),
        &hx.add(&hy).unwrap(),
        0.0,
        0.0,
    );
    assert_close(
        &base.to_device(Device::Cpu).unwrap(),
        &hx.add(&hy).unwrap().t(),
        0.0,
        0.0,
    );
    assert_close(
        &out[1].to_device(Device::Cpu).unwrap(),
        &hx.sub(&hy).unwrap(),
        0.0,
        0.0,
    );
}

#[test]
fn outputs_that_do_not_fit_the_loop_are_errors_naming_them() {
    if !emulated("outputs_that_do_not_fit_the_loop_are_errors") {
        return;
    }
    let w = on_gpu(&uniform(&[2, 3], 1));
    let g = on_gpu(&uniform(&[2, 3], 2));
    let run = |out: &Array| SGD_STEP.call().args(&[&w, &g]).param(0.5).out(out).run();
    let e = message(run(&on_gpu(&Array::zeros(&[3], DType::F64).unwrap())));
    assert!(
        e.contains("output `out` has shape [3], but the loop's shape is [2, 3]"),
        "{e}"
    );
    let e = message(run(&on_gpu(&Array::zeros(&[2, 3], DType::F32).unwrap())));
    assert!(
        e.contains("output `out` is float32, but placeholder `T` was bound to float64 by `w`"),
        "{e}"
    );
    let e = message(run(&on_gpu(&Array::zeros(&[3], DType::F64).unwrap())
        .broadcast_to(&[2, 3])
        .unwrap()));
    assert!(
        e.contains("output `out` [2, 3] (strides [0, 1]) holds some elements more than once"),
        "{e}"
    );
    let e = run(&Array::zeros(&[2, 3], DType::F64).unwrap()).unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch { .. }), "{e:?}");
    let e = message(
        SUM_AND_DIFF
            .call()
            .args(&[&w, &g])
            .out(&on_gpu(&uniform(&[2, 3], 3)))
            .run(),
    );
    assert!(
        e.contains("1 output(s) given, the signature declares 2"),
        "{e}"
    );
}

#[test]
fn an_input_may_be_its_own_output_only_as_the_very_same_view() {
    if !emulated("an_input_may_be_its_own_output_only_as_the_same_view") {
        return;
    }
    let w = on_gpu(&uniform(&[3, 3], 1));
    let g = on_gpu(&uniform(&[3, 3], 2));
    let before = w.to_vec::<f64>().unwrap();
    let step = |w: &Array, out: &Array| SGD_STEP.call().args(&[w, &g]).param(1.0).out(out).run();
    // The transpose of the input: thread i would overwrite what thread j has yet to read.
    let e = message(step(&w, &w.t()));
    assert!(
        e.contains("output `out` shares memory with input `w`, which is unsafe here"),
        "{e}"
    );
    // Overlapping slices of one buffer.
    let flat = on_gpu(&uniform(&[6], 3));
    let (a, b) = (
        flat.slice_axis(0, 0, 4, 1).unwrap(),
        flat.slice_axis(0, 2, 6, 1).unwrap(),
    );
    let g4 = on_gpu(&uniform(&[4], 4));
    let e = message(SGD_STEP.call().args(&[&a, &g4]).param(1.0).out(&b).run());
    assert!(e.contains("shares memory with input `w`"), "{e}");
    // Disjoint slices of one buffer are fine.
    let (lo, hi) = (
        flat.slice_axis(0, 0, 3, 1).unwrap(),
        flat.slice_axis(0, 3, 6, 1).unwrap(),
    );
    let g3 = on_gpu(&uniform(&[3], 5));
    let expected = lo
        .to_device(Device::Cpu)
        .unwrap()
        .sub(&g3.to_device(Device::Cpu).unwrap())
        .unwrap();
    SGD_STEP
        .call()
        .args(&[&lo, &g3])
        .param(1.0)
        .out(&hi)
        .run()
        .unwrap();
    assert_close(&hi.to_device(Device::Cpu).unwrap(), &expected, 0.0, 0.0);
    // A raw input sharing the output's memory, and two outputs sharing memory.
    let e = message(RAW_PLUS.call().args(&[&w, &g]).out(&w).run());
    assert!(
        e.contains("a raw array's elements may be read or written by any thread"),
        "{e}"
    );
    let e = message(SUM_AND_DIFF.call().args(&[&g, &g]).out(&w).out(&w).run());
    assert!(e.contains("outputs `s` and `d` share memory"), "{e}");
    // Nothing was written by the refused launches.
    assert_eq!(w.to_vec::<f64>().unwrap(), before);
}

#[test]
fn scalars_broadcast_where_array_inputs_are_declared() {
    if !emulated("scalars_broadcast_where_array_inputs_are_declared") {
        return;
    }
    let (hx, hy) = (
        uniform(&[2, 3], 1).astype(DType::F32).unwrap(),
        uniform(&[3], 2).astype(DType::F32).unwrap(),
    );
    // `a` is an f64 scalar, but the arrays bind `T` to float32: it is converted.
    let w = AXPY
        .call()
        .arg(2.5)
        .arg(&on_gpu(&hx))
        .arg(&on_gpu(&hy))
        .run()
        .unwrap()
        .remove(0);
    assert_eq!(w.dtype(), DType::F32);
    let expected = hx.mul_scalar(2.5).unwrap().add(&hy).unwrap();
    assert_close(&w.to_device(Device::Cpu).unwrap(), &expected, 0.0, 0.0);
    // Only scalars: `T` takes their type, and the loop's size is undecided (CuPy's "Loop size
    // is undecided") unless a size or an output gives it.
    let scalars = || {
        AXPY.call()
            .arg(2i64)
            .arg(3i64)
            .arg(4i64)
            .device(Device::Cuda(0))
    };
    let e = message(scalars().run());
    assert!(e.contains("the loop's size is undecided"), "{e}");
    let w = scalars().size(3).run().unwrap().remove(0);
    assert_eq!((w.dtype(), w.shape().to_vec()), (DType::I64, vec![3]));
    assert_eq!(w.to_vec::<i64>().unwrap(), vec![10; 3]);
    let out = on_gpu(&Array::zeros(&[2, 2], DType::I64).unwrap());
    AXPY.call()
        .arg(2i64)
        .arg(3i64)
        .arg(-1i64)
        .out(&out)
        .run()
        .unwrap();
    assert_eq!(out.to_vec::<i64>().unwrap(), vec![5; 4]);
    // Scalars that disagree, a scalar for a raw input, a scalar that does not fit.
    let e = message(
        AXPY.call()
            .arg(2i64)
            .arg(3.0)
            .arg(4.0)
            .device(Device::Cuda(0))
            .run(),
    );
    assert!(e.contains("placeholder `T` is bound only by scalars, and they disagree: `a` is int64, `x` is float64"), "{e}");
    let e = message(RAW_PLUS.call().arg(1.0).arg(&on_gpu(&hx)).run());
    assert!(
        e.contains("argument `a` is a scalar (float64), but the signature declares it `raw`"),
        "{e}"
    );
    let ints = on_gpu(&Array::zeros(&[2], DType::I32).unwrap());
    let e = message(AXPY.call().arg(0.5).arg(&ints).arg(&ints).run());
    assert!(
        e.contains(
            "argument `a` is 0.5 (float64), which does not fit its type int32 (placeholder `T`)"
        ),
        "{e}"
    );
}

#[test]
fn a_launch_without_arrays_runs_on_the_default_or_the_given_device() {
    if !emulated("a_launch_without_arrays_runs_on_the_default_or_the_given_device") {
        return;
    }
    let base = Scalar::from((1i64 << 55) + 1);
    let expected: Vec<i64> = (0..5).map(|i| (1i64 << 55) + 1 + i).collect();
    // The default device is the host: there, no kernel runs.
    let e = IOTA.launch_sized(&[], &[base], 5).unwrap_err();
    assert!(matches!(e, Error::CudaUnavailable { .. }), "{e:?}");
    let host = format!(
        "has no array argument, and the device it runs on is {}",
        Device::Cpu
    );
    assert!(e.to_string().contains(&host), "{e}");
    let y = IOTA
        .call()
        .param(base)
        .size(5)
        .device(Device::Cuda(0))
        .run()
        .unwrap()
        .remove(0);
    assert_eq!(
        (y.device(), y.to_vec::<i64>().unwrap()),
        (Device::Cuda(0), expected.clone())
    );
    let _guard = using_device(Device::Cuda(0)).unwrap();
    let y = IOTA.launch_sized(&[], &[base], 5).unwrap().remove(0);
    assert_eq!(
        (y.device(), y.to_vec::<i64>().unwrap()),
        (Device::Cuda(0), expected)
    );
}

#[test]
fn collapsed_axes_give_the_same_results_with_fewer_axes_in_the_source() {
    if !emulated("collapsed_axes_give_the_same_results") {
        return;
    }
    // A contiguous [4, 5, 6] array times a row of 6: the two leading axes step as one.
    let (hx, hrow) = (uniform(&[4, 5, 6], 1), uniform(&[6], 2));
    let (x, row) = (on_gpu(&hx), on_gpu(&hrow));
    let collapsed = MUL_PLUS_INDEX.call().args(&[&x, &row]).source().unwrap();
    let all_axes = MUL_PLUS_INDEX_ALL_AXES
        .call()
        .args(&[&x, &row])
        .source()
        .unwrap();
    assert_eq!(collapsed.entry, "mul_plus_index__strided2_i32");
    assert_eq!(all_axes.entry, "mul_plus_index_all_axes__strided3_i32");
    let index = Array::arange(0.0, 120.0, 1.0, DType::F64)
        .unwrap()
        .reshape(&[4, 5, 6])
        .unwrap();
    let expected = hx.mul(&hrow).unwrap().add(&index).unwrap();
    for k in [&MUL_PLUS_INDEX, &MUL_PLUS_INDEX_ALL_AXES] {
        let w = k.launch(&[&x, &row], &[]).unwrap().remove(0);
        assert_close(&w.to_device(Device::Cpu).unwrap(), &expected, 0.0, 0.0);
    }
    // A flipped array collapses to one axis; a transposed one keeps both.
    let flipped = on_gpu(&uniform(&[3, 4], 3))
        .flip(0)
        .unwrap()
        .flip(1)
        .unwrap();
    let ones = on_gpu(&Array::ones(&[3, 4], DType::F64).unwrap());
    let src = MUL_PLUS_INDEX
        .call()
        .args(&[&flipped, &ones])
        .source()
        .unwrap();
    assert_eq!(src.entry, "mul_plus_index__strided1_i32");
    let expected = flipped
        .to_device(Device::Cpu)
        .unwrap()
        .add(
            &Array::arange(0.0, 12.0, 1.0, DType::F64)
                .unwrap()
                .reshape(&[3, 4])
                .unwrap(),
        )
        .unwrap();
    let w = MUL_PLUS_INDEX
        .launch(&[&flipped, &ones], &[])
        .unwrap()
        .remove(0);
    assert_close(&w.to_device(Device::Cpu).unwrap(), &expected, 0.0, 0.0);
    let t = on_gpu(&uniform(&[4, 3], 4)).t();
    let src = MUL_PLUS_INDEX.call().args(&[&t, &ones]).source().unwrap();
    assert_eq!(src.entry, "mul_plus_index__strided2_i32");
}

#[test]
fn only_a_launch_given_its_outputs_drops_restrict_from_its_pointers() {
    if !emulated("only_a_launch_given_its_outputs_drops_restrict") {
        return;
    }
    let (w, g) = (on_gpu(&uniform(&[3, 4], 1)), on_gpu(&uniform(&[3, 4], 2)));
    // Outputs the launch allocates are distinct from every input: all pointers restrict, so
    // the compiler may batch loads ahead of stores.
    let fresh = SUM_AND_DIFF.call().args(&[&w, &g]).source().unwrap().source;
    assert!(fresh.contains("const T* __restrict__ _in_"), "{fresh}");
    assert!(fresh.contains("T* __restrict__ _out_"), "{fresh}");
    // Given outputs may be an input itself (here `w`): no restrict on the looped arrays.
    let in_place = SGD_STEP
        .call()
        .args(&[&w, &g])
        .param(0.5)
        .out(&w)
        .source()
        .unwrap()
        .source;
    assert!(!in_place.contains("__restrict__ _in_w"), "{in_place}");
    assert!(!in_place.contains("__restrict__ _out_out"), "{in_place}");
    assert!(in_place.contains("const T* _in_w"), "{in_place}");
}

#[test]
fn a_broadcast_loop_whose_size_overflows_is_an_error() {
    if !emulated("a_broadcast_loop_whose_size_overflows_is_an_error") {
        return;
    }
    // 2⁶⁴ elements, a count that wrapped to 0.
    let (tall, wide) = views_whose_loop_overflows(Device::Cuda(0));
    let e = SUM_AND_DIFF.launch(&[&tall, &wide], &[]).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeOverflow { op: "sum_and_diff", shape, .. } if shape == &[1 << 32, 1 << 32]),
        "{e:?}"
    );
    // One of them alone is a loop that fits (2³² elements need 64-bit indexing).
    let plan = SUM_AND_DIFF.call().args(&[&tall, &tall]).plan().unwrap();
    assert_eq!(plan.shape, [1 << 32, 1]);
}

/// CuPy's `'X x, Y y' -> 'Z z'`: only the output uses `Z`, so the output the caller gives
/// binds it.
static ADD_INTO: ElementwiseKernel = ElementwiseKernel::new(
    "add_into",
    "X x, Y y",
    "Z z",
    "Z scale",
    "z = scale * ((Z)x + (Z)y);",
);

#[test]
fn an_output_given_binds_a_placeholder_that_no_input_uses() {
    if !emulated("an_output_given_binds_a_placeholder_that_no_input_uses") {
        return;
    }
    let xs = [1i32, -2, 3, 40];
    let x = on_gpu(&Array::from_vec(xs.to_vec(), &[2, 2]).unwrap());
    let ys = [0.25f32, -0.5];
    let y = on_gpu(&Array::from_vec(ys.to_vec(), &[2]).unwrap());
    // Z = float64 from z: the sum is taken in float64 and the parameter converts to it.
    let z = on_gpu(&Array::zeros(&[2, 2], DType::F64).unwrap());
    ADD_INTO
        .call()
        .args(&[&x, &y])
        .param(2.0)
        .out(&z)
        .run()
        .unwrap();
    let expected: Vec<f64> = (0..4)
        .map(|k| 2.0 * (f64::from(xs[k]) + f64::from(ys[k % 2])))
        .collect();
    assert_eq!(z.to_vec::<f64>().unwrap(), expected);
    // Z = int64 from another output: the float32 y truncates in the body's cast.
    let zi = on_gpu(&Array::zeros(&[2, 2], DType::I64).unwrap());
    ADD_INTO
        .call()
        .args(&[&x, &y])
        .param(3)
        .out(&zi)
        .run()
        .unwrap();
    let expected: Vec<i64> = (0..4)
        .map(|k| 3 * (i64::from(xs[k]) + ys[k % 2] as i64))
        .collect();
    assert_eq!(zi.to_vec::<i64>().unwrap(), expected);
    // The parameter must fit Z as bound by the output.
    let e = message(ADD_INTO.call().args(&[&x, &y]).param(0.5).out(&zi).run());
    assert!(
        e.contains("parameter `scale` is 0.5 (float64), which does not fit its type int64 (placeholder `Z`)"),
        "{e}"
    );
    // Without the output nothing binds Z: the error names the output to give.
    let e = message(ADD_INTO.call().args(&[&x, &y]).param(2.0).run());
    assert_eq!(
        e,
        "kernel add_into: type placeholder `Z` is bound only by output `z`, which the call does \
         not give: give the outputs (their dtypes bind it), or use `Z` for an input"
    );
    // An output that contradicts an input's binding names both.
    let same: ElementwiseKernel = ElementwiseKernel::new("same", "T x", "T w", "", "w = x;");
    let e = message(same.call().arg(&x).out(&z).run());
    assert!(
        e.contains("output `w` is float64, but placeholder `T` was bound to int32 by `x`"),
        "{e}"
    );
}
