//! Every user mistake gives a clear `Err` (never a panic) whose variant and message name the
//! operation or function, the input index, the shapes and the dtypes involved.
//!
//! A device *mismatch* between two arrays cannot be constructed in this build (there are no CUDA
//! arrays yet), so `Error::DeviceMismatch` is not exercised here.

use kusari::GradOptions;
use kusari::config;
use kusari::prelude::*;
use kusari_tests::arr;

/// A float32 array of `shape` filled with `1, 2, 3, ...`.
fn f32s(shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    Array::from_vec((1..=n).map(|i| i as f32).collect(), shape).expect("fills the shape")
}

#[track_caller]
fn assert_mentions(err: &Error, parts: &[&str]) {
    let text = err.to_string();
    for part in parts {
        assert!(
            text.contains(part),
            "message {text:?} should mention {part:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Array operations
// ---------------------------------------------------------------------------------------------

#[test]
fn broadcast_mismatch_names_the_op_and_both_shapes() {
    let err = f32s(&[3, 2]).add(&f32s(&[4])).expect_err("[3, 2] + [4]");
    assert_eq!(
        err,
        Error::Broadcast {
            op: "add",
            lhs: vec![3, 2],
            rhs: vec![4],
        }
    );
    assert_mentions(&err, &["add", "[3, 2]", "[4]", "broadcast"]);

    let err = f32s(&[2, 3])
        .broadcast_to(&[4, 3])
        .expect_err("[2, 3] to [4, 3]");
    assert!(matches!(err, Error::Broadcast { .. }), "{err:?}");
    assert_mentions(&err, &["broadcast_to", "[2, 3]", "[4, 3]"]);
}

#[test]
fn broadcast_mismatch_in_a_function_names_the_function_and_inputs() {
    let a = Variable::new(f32s(&[3, 2]));
    let b = Variable::new(f32s(&[4]));
    let err = (&a * &b).expect_err("[3, 2] * [4]");
    let Error::Forward {
        function, inputs, ..
    } = &err
    else {
        panic!("expected Error::Forward, got {err:?}");
    };
    assert_eq!(function, "Mul");
    assert_eq!(inputs, "float32[3, 2], float32[4]");
    assert!(matches!(
        err.root_cause(),
        Error::Broadcast { op: "mul", .. }
    ));
    assert_mentions(
        &err,
        &[
            "Mul.forward(float32[3, 2], float32[4])",
            "mul: shapes [3, 2] and [4]",
        ],
    );
}

#[test]
fn dtype_mismatch_names_both_dtypes() {
    let a = f32s(&[2]);
    let b = Array::from_vec(vec![1.0f64, 2.0], &[2]).expect("fills");
    let err = a.sub(&b).expect_err("float32 - float64");
    assert_eq!(
        err,
        Error::DTypeMismatch {
            op: "sub",
            lhs: DType::F32,
            lhs_shape: vec![2],
            rhs: DType::F64,
            rhs_shape: vec![2],
        }
    );
    assert_mentions(&err, &["sub", "float32", "float64", "astype"]);

    // Through variables: wrapped with the function and the inputs' dtypes.
    let err = (&Variable::new(a) + &Variable::new(b)).expect_err("float32 + float64");
    assert!(matches!(err.root_cause(), Error::DTypeMismatch { .. }));
    assert_mentions(&err, &["Add.forward(float32[2], float64[2])"]);
}

#[test]
fn from_vec_with_the_wrong_length() {
    let err = Array::from_vec(vec![1.0f32; 5], &[2, 3]).expect_err("5 elements for 6");
    assert!(
        matches!(err, Error::Shape { op: "from_vec", .. }),
        "{err:?}"
    );
    assert_mentions(&err, &["from_vec", "5", "float32", "[2, 3]", "6 elements"]);
}

#[test]
fn reshape_to_a_different_size() {
    let err = f32s(&[2, 3]).reshape(&[4, 2]).expect_err("6 into 8");
    assert!(matches!(err, Error::Shape { op: "reshape", .. }), "{err:?}");
    assert_mentions(
        &err,
        &["reshape", "[2, 3]", "6 elements", "[4, 2]", "8 elements"],
    );

    let err = F::reshape(&Variable::new(f32s(&[2, 3])), &[5]).expect_err("6 into 5");
    assert!(matches!(
        err.root_cause(),
        Error::Shape { op: "reshape", .. }
    ));
    assert_mentions(&err, &["Reshape", "[2, 3]", "[5]"]);
}

#[test]
fn axis_out_of_range() {
    let err = f32s(&[3, 2])
        .sum_axes(&[2], false)
        .expect_err("axis 2 of 2-d");
    assert_eq!(
        err,
        Error::Axis {
            op: "sum",
            axis: 2,
            shape: vec![3, 2],
        }
    );
    assert_mentions(&err, &["sum", "axis 2", "[3, 2]", "2 dimensions"]);

    let err = f32s(&[3, 2])
        .max_axes(&[-3], false)
        .expect_err("axis -3 of 2-d");
    assert!(
        matches!(
            err,
            Error::Axis {
                op: "max",
                axis: -3,
                ..
            }
        ),
        "{err:?}"
    );

    let x = Variable::new(f32s(&[3, 2]));
    let err = F::sum_axes(&x, &[5], false).expect_err("axis 5");
    assert!(
        matches!(err.root_cause(), Error::Axis { axis: 5, .. }),
        "{err:?}"
    );
    let err = F::softmax(&x, 2).expect_err("axis 2");
    assert!(
        matches!(err.root_cause(), Error::Axis { axis: 2, .. }),
        "{err:?}"
    );
    assert_mentions(&err, &["softmax", "[3, 2]"]);
    let err = f32s(&[3]).expand_dims(3).expect_err("axis 3 for 1-d");
    assert!(
        matches!(
            err,
            Error::Axis {
                op: "expand_dims",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn matmul_batch_mismatch_names_both_shapes() {
    // Batch axes [2] and [3] do not broadcast: the message gives the whole shapes.
    let err = f32s(&[2, 3, 4])
        .matmul(&f32s(&[3, 4, 5]))
        .expect_err("batch 2 vs 3");
    assert!(matches!(err, Error::Shape { op: "matmul", .. }), "{err:?}");
    assert_mentions(
        &err,
        &["matmul", "[2, 3, 4]", "[3, 4, 5]", "batch [2] vs [3]"],
    );
    let a = Variable::new(f32s(&[2, 3, 4]));
    let b = Variable::new(f32s(&[3, 4, 5]));
    let err = F::matmul(&a, &b).expect_err("batch 2 vs 3");
    assert_mentions(&err, &["[2, 3, 4]", "[3, 4, 5]"]);
    // Batch axes that broadcast are fine: [2, 1] with [3].
    let ok = f32s(&[2, 1, 3, 4])
        .matmul(&f32s(&[3, 4, 5]))
        .expect("broadcasts");
    assert_eq!(ok.shape(), &[2, 3, 3, 5]);
}

#[test]
fn matmul_inner_dimension_mismatch() {
    let err = f32s(&[2, 3]).matmul(&f32s(&[4, 5])).expect_err("3 vs 4");
    assert!(matches!(err, Error::Shape { op: "matmul", .. }), "{err:?}");
    assert_mentions(&err, &["matmul", "[2, 3]", "[4, 5]", "3 vs 4"]);

    let a = Variable::new(f32s(&[2, 3]));
    let b = Variable::new(f32s(&[2, 3]));
    let err = F::matmul(&a, &b).expect_err("3 vs 2");
    assert!(matches!(
        err.root_cause(),
        Error::Shape { op: "matmul", .. }
    ));
    assert_mentions(&err, &["[2, 3]", "3 vs 2"]);

    let w = Variable::new(f32s(&[4, 5]));
    let err = F::linear(&a, &w, None).expect_err("3 features vs 5");
    assert!(matches!(err, Error::Shape { op: "linear", .. }), "{err:?}");
    assert_mentions(&err, &["linear", "[2, 3]", "[4, 5]"]);
}

#[test]
fn unsupported_dtypes() {
    let ints = Array::from_vec(vec![1i32, 2], &[2]).expect("fills");
    let err = ints.exp().expect_err("exp of int32");
    assert_eq!(
        err,
        Error::UnsupportedDType {
            op: "exp",
            dtype: DType::I32,
            shape: vec![2],
            expected: "a floating-point dtype (float16, bfloat16, float32, float64)",
        }
    );
    assert_mentions(&err, &["exp", "int32", "[2]", "floating-point"]);

    let err = F::exp(&Variable::new(ints)).expect_err("F::exp of int32");
    assert!(matches!(
        err.root_cause(),
        Error::UnsupportedDType {
            op: "exp",
            dtype: DType::I32,
            ..
        }
    ));
    assert_mentions(
        &err,
        &["Exp.forward(int32[2])", "exp: not defined for dtype int32"],
    );

    let bools = Array::from_vec(vec![true, false], &[2]).expect("fills");
    let err = bools.add(&bools).expect_err("bool + bool");
    assert!(
        matches!(
            err,
            Error::UnsupportedDType {
                op: "add",
                dtype: DType::Bool,
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["add", "bool", "numeric"]);
    let err = bools.mul_scalar(2.0).expect_err("bool * 2");
    assert!(matches!(
        err,
        Error::UnsupportedDType {
            dtype: DType::Bool,
            ..
        }
    ));
}

#[test]
fn reading_an_array_as_the_wrong_element_type() {
    let err = f32s(&[2]).to_vec::<f64>().expect_err("float32 read as f64");
    assert_eq!(
        err,
        Error::ElementType {
            op: "to_vec",
            requested: DType::F64,
            actual: DType::F32,
        }
    );
    assert_mentions(&err, &["float32", "float64"]);
    let err = f32s(&[2]).item::<f32>().expect_err("two elements");
    assert_mentions(&err, &["item", "[2]"]);
}

// ---------------------------------------------------------------------------------------------
// User-written functions
// ---------------------------------------------------------------------------------------------

/// f(x, y, z) = x * y + z, as in the tutorial.
struct MulAdd;

impl FunctionNode for MulAdd {
    fn forward_cpu(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![(&inputs[0] * &inputs[1] + &inputs[2])?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let gw = gys[0].as_ref().ok_or_else(|| Error::msg("no gradient"))?;
        Ok(vec![Some((&y * gw)?), Some((&x * gw)?), Some(gw.clone())])
    }
}

#[test]
fn forward_errors_name_the_function_and_its_inputs() {
    let x = Variable::new(f32s(&[3, 2]));
    let y = Variable::new(f32s(&[3, 2]));
    let z = Variable::new(f32s(&[4]));
    let err = MulAdd
        .apply(&[&x, &y, &z])
        .expect_err("z does not broadcast");
    let Error::Forward {
        function,
        inputs,
        source,
    } = &err
    else {
        panic!("expected Error::Forward, got {err:?}");
    };
    assert_eq!(function, "MulAdd");
    assert_eq!(inputs, "float32[3, 2], float32[3, 2], float32[4]");
    assert!(matches!(**source, Error::Broadcast { op: "add", .. }));
    assert_mentions(
        &err,
        &[
            "MulAdd.forward(float32[3, 2], float32[3, 2], float32[4])",
            "[3, 2]",
            "[4]",
        ],
    );
}

/// How a test function's backward goes wrong.
#[derive(Clone, Copy)]
enum Mistake {
    /// One gradient for two inputs.
    TooFewGradients,
    /// Three gradients for two inputs.
    TooManyGradients,
    /// Input 1's gradient flattened.
    WrongShape,
    /// Input 0's gradient in float64.
    WrongDType,
    /// Reads input 1, which forward did not retain.
    ReadsUnretained,
    /// A NaN gradient for input 0.
    NanGradient,
}

/// x + y (two float32 inputs of the same shape) whose backward makes `mistake`.
struct Faulty {
    mistake: Mistake,
}

impl FunctionNode for Faulty {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0]);
        Ok(vec![inputs[0].add(&inputs[1])?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let g = gys[0].as_ref().ok_or_else(|| Error::msg("no gradient"))?;
        Ok(match self.mistake {
            Mistake::TooFewGradients => vec![Some(g.clone())],
            Mistake::TooManyGradients => vec![Some(g.clone()), Some(g.clone()), None],
            Mistake::WrongShape => vec![Some(g.clone()), Some(F::reshape(g, &[g.size()])?)],
            Mistake::WrongDType => vec![Some(F::astype(g, DType::F64)?), Some(g.clone())],
            Mistake::ReadsUnretained => {
                let y = ctx.retained_input(1)?;
                vec![Some(g.clone()), Some((g * &y)?)]
            }
            Mistake::NanGradient => {
                let nan = Array::full(g.shape(), f64::NAN, g.dtype())?;
                vec![Some(Variable::constant(nan)), Some(g.clone())]
            }
        })
    }
}

/// Applies `Faulty` to two float32 [3, 2] inputs and runs backward.
fn run_faulty(mistake: Mistake) -> Result<()> {
    let x = Variable::new(f32s(&[3, 2]));
    let y = Variable::new(f32s(&[3, 2]));
    let out = Faulty { mistake }.apply(&[&x, &y])?.remove(0);
    F::sum(&out)?.backward()
}

#[test]
fn backward_returning_the_wrong_number_of_gradients() {
    let err = run_faulty(Mistake::TooFewGradients).expect_err("1 gradient for 2 inputs");
    assert_eq!(
        err,
        Error::GradientCount {
            function: "Faulty".into(),
            expected: 2,
            actual: 1,
        }
    );
    assert_mentions(&err, &["Faulty", "returned 1 gradient", "(2)"]);

    let err = run_faulty(Mistake::TooManyGradients).expect_err("3 gradients for 2 inputs");
    assert!(
        matches!(
            err,
            Error::GradientCount {
                expected: 2,
                actual: 3,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn backward_returning_a_gradient_of_the_wrong_shape() {
    let err = run_faulty(Mistake::WrongShape).expect_err("[6] for [3, 2]");
    assert_eq!(
        err,
        Error::GradientMismatch {
            function: "Faulty".into(),
            input: 1,
            what: "shape",
            expected: "[3, 2]".into(),
            actual: "[6]".into(),
        }
    );
    assert_mentions(&err, &["Faulty", "input 1", "shape [6]", "[3, 2]"]);
}

#[test]
fn backward_returning_a_gradient_of_the_wrong_dtype() {
    let err = run_faulty(Mistake::WrongDType).expect_err("float64 for float32");
    assert_eq!(
        err,
        Error::GradientMismatch {
            function: "Faulty".into(),
            input: 0,
            what: "dtype",
            expected: "float32".into(),
            actual: "float64".into(),
        }
    );
    assert_mentions(&err, &["Faulty", "input 0", "dtype float64", "float32"]);
}

#[test]
fn backward_reading_an_input_it_did_not_retain() {
    let err = run_faulty(Mistake::ReadsUnretained).expect_err("input 1 not retained");
    let Error::Backward {
        function,
        grad_outputs,
        ..
    } = &err
    else {
        panic!("expected Error::Backward, got {err:?}");
    };
    assert_eq!(function, "Faulty");
    assert_eq!(grad_outputs, "float32[3, 2]");
    assert!(
        matches!(
            err.root_cause(),
            Error::NotRetained {
                what: "input",
                index: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(
        &err,
        &[
            "Faulty.backward(grad_outputs: float32[3, 2])",
            "reads input 1",
            "did not retain",
            "retain_inputs",
        ],
    );
}

/// Retains an input or output index that does not exist.
struct BadRetain {
    outputs: bool,
}

impl FunctionNode for BadRetain {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        if self.outputs {
            ctx.retain_outputs(&[0, 1]);
        } else {
            ctx.retain_inputs(&[0, 2]);
        }
        Ok(vec![inputs[0].add(&inputs[1])?])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        _: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        Err(Error::msg("not reached"))
    }
}

#[test]
fn retain_index_out_of_range() {
    let (x, y) = (Variable::new(f32s(&[2])), Variable::new(f32s(&[2])));
    let err = BadRetain { outputs: false }
        .apply(&[&x, &y])
        .expect_err("input 2 of 2");
    assert_eq!(
        err,
        Error::RetainOutOfRange {
            function: "BadRetain".into(),
            what: "input",
            index: 2,
            count: 2
        }
    );
    assert_eq!(
        err.to_string(),
        "BadRetain: retain_inputs index 2 is out of range for 2 input(s)"
    );
    let err = BadRetain { outputs: true }
        .apply(&[&x, &y])
        .expect_err("output 1 of 1");
    assert_mentions(
        &err,
        &["BadRetain", "retain_outputs index 1", "1 output(s)"],
    );
}

/// A function whose forward returns no output.
struct NoOutput;

impl FunctionNode for NoOutput {
    fn forward(&mut self, _: &mut ForwardContext, _: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        _: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        Ok(vec![None])
    }
}

/// A function that implements neither `forward` nor `forward_cpu`.
struct NoForward;

impl FunctionNode for NoForward {
    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        _: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        Ok(vec![None])
    }
}

#[test]
fn forward_with_no_output_or_no_implementation() {
    let x = Variable::new(f32s(&[2]));
    let err = NoOutput.apply(&[&x]).expect_err("no output");
    assert_eq!(
        err,
        Error::OutputCount {
            function: "NoOutput".into(),
            expected: 1,
            actual: 0,
        }
    );
    let err = NoForward.apply(&[&x]).expect_err("no forward_cpu");
    assert!(
        matches!(
            err.root_cause(),
            Error::NotImplemented {
                method: "forward_cpu",
                device: Device::Cpu,
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["NoForward", "forward_cpu", "native:0"]);
}

// ---------------------------------------------------------------------------------------------
// Backward and grad() arguments
// ---------------------------------------------------------------------------------------------

#[test]
fn backward_on_a_non_scalar_output_without_grad() {
    let x = Variable::new(f32s(&[3, 2]));
    let y = (&x * 2.0).expect("mul");
    let err = y.backward().expect_err("[3, 2] output without grad");
    assert_eq!(err, Error::GradRequired { shape: vec![3, 2] });
    assert_mentions(&err, &["[3, 2]", "grad"]);
    assert!(x.grad().is_none(), "nothing happened");
}

#[test]
fn set_grad_with_a_mismatched_gradient() {
    let w = Variable::new(f32s(&[3])).with_name("w");
    let err = w.set_grad_array(f32s(&[2])).expect_err("[2] for [3]");
    assert_eq!(
        err,
        Error::GradDoesNotMatch {
            name: " (w)".into(),
            what: "shape",
            expected: "[3]".into(),
            actual: "[2]".into(),
        }
    );
    assert_mentions(&err, &["set_grad (w)", "shape [2]", "[3]"]);

    let err = w
        .set_grad_array(Array::zeros(&[3], DType::F64).unwrap())
        .expect_err("float64 for float32");
    assert!(
        matches!(err, Error::GradDoesNotMatch { what: "dtype", .. }),
        "{err:?}"
    );
    assert_mentions(&err, &["float64", "float32"]);
    assert!(w.grad().is_none(), "a rejected gradient is not stored");
}

#[test]
fn grad_with_mismatched_argument_counts() {
    let x = Variable::new(f32s(&[2]));
    let y = F::sum(&(&x * &x).expect("mul")).expect("sum");
    let one = Variable::constant(Array::ones(&[], DType::F32).unwrap());
    let err = grad(&[&y], &[&x], &[one.clone(), one], GradOptions::default())
        .expect_err("2 grad_outputs for 1 output");
    assert!(matches!(err, Error::GradArguments { .. }), "{err:?}");
    assert_mentions(&err, &["grad", "2 grad_outputs for 1 outputs"]);

    let err = grad(
        &[&y],
        &[&x],
        None,
        GradOptions {
            grad_inputs: Some(vec![None, None]),
            ..Default::default()
        },
    )
    .expect_err("2 grad_inputs for 1 input");
    assert_mentions(&err, &["2 grad_inputs for 1 inputs"]);

    let err = grad(&[], &[&x], None, GradOptions::default()).expect_err("no outputs");
    assert!(matches!(err, Error::GradArguments { .. }), "{err:?}");
}

#[test]
fn grad_with_a_non_scalar_output_and_no_grad_outputs() {
    let x = Variable::new(f32s(&[3]));
    let y = (&x * &x).expect("mul");
    let err = grad(&[&y], &[&x], None, GradOptions::default()).expect_err("[3] output");
    assert_eq!(err, Error::GradRequired { shape: vec![3] });
}

#[test]
fn grad_with_a_mismatched_grad_output_or_grad_input() {
    let x = Variable::new(f32s(&[3]));
    let y = (&x * &x).expect("mul");
    // A one-element gradient for a [3] output would silently broadcast; a [2] one would fail
    // deep inside Mul's backward. Both are the caller's mistake, reported up front.
    for (bad, shown) in [(f32s(&[1]), "[1]"), (f32s(&[2]), "[2]")] {
        let err = grad(
            &[&y],
            &[&x],
            &[Variable::constant(bad)],
            GradOptions::default(),
        )
        .expect_err("grad_outputs[0] of the wrong shape");
        assert!(matches!(err, Error::GradArguments { .. }), "{err:?}");
        assert_mentions(&err, &["grad_outputs[0]", shown, "[3]"]);
    }
    // For a leaf output nothing else would notice: the result would have the wrong shape.
    let err = grad(
        &[&x],
        &[&x],
        &[Variable::constant(f32s(&[2]))],
        GradOptions::default(),
    )
    .expect_err("grad_outputs[0] of the wrong shape");
    assert_mentions(&err, &["grad_outputs[0]", "[2]", "[3]"]);

    let err = grad(
        &[&y],
        &[&x],
        &[Variable::constant(Array::ones(&[3], DType::F64).unwrap())],
        GradOptions::default(),
    )
    .expect_err("grad_outputs[0] of the wrong dtype");
    assert_mentions(&err, &["grad_outputs[0]", "float64", "float32"]);

    let err = grad(
        &[&y],
        &[&x],
        &[Variable::constant(f32s(&[3]))],
        GradOptions {
            grad_inputs: Some(vec![Some(Variable::constant(f32s(&[3, 1])))]),
            set_grad: true,
            ..Default::default()
        },
    )
    .expect_err("grad_inputs[0] of the wrong shape");
    assert_mentions(&err, &["grad_inputs[0]", "[3, 1]", "[3]"]);
    assert!(x.grad().is_none(), "nothing was stored");
}

// ---------------------------------------------------------------------------------------------
// Debug mode
// ---------------------------------------------------------------------------------------------

#[test]
fn debug_mode_detects_nan_in_a_forward_output() {
    let x = Variable::new(arr(&[1.0, -1.0], &[2]));
    {
        let _off = config::using_debug(false);
        let y = F::log(&x).expect("NaN passes silently without debug mode");
        assert!(y.array().has_nan().expect("float"));
    }
    let _debug = config::using_debug(true);
    let err = F::log(&x).expect_err("log(-1) is NaN");
    assert_eq!(
        err,
        Error::NanDetected {
            function: "Log".into(),
            stage: "forward",
            index: 0,
            shape: vec![2],
        }
    );
    assert_mentions(&err, &["Log", "NaN", "forward", "[2]", "debug"]);
}

#[test]
fn debug_mode_detects_nan_in_a_backward_gradient() {
    {
        let _off = config::using_debug(false);
        run_faulty(Mistake::NanGradient).expect("NaN passes silently without debug mode");
    }
    let _debug = config::using_debug(true);
    let err = run_faulty(Mistake::NanGradient).expect_err("NaN gradient");
    assert_eq!(
        err,
        Error::NanDetected {
            function: "Faulty".into(),
            stage: "backward",
            index: 0,
            shape: vec![3, 2],
        }
    );
    assert_mentions(&err, &["Faulty", "NaN", "backward", "[3, 2]"]);

    // A built-in: d sqrt(x)/dx at 0 is 1/0, times a zero upstream gradient gives 0/0 = NaN.
    let x = Variable::new(arr(&[0.0, 4.0], &[2]));
    let y = F::sum(&(&F::sqrt(&x).expect("sqrt") * 0.0).expect("mul")).expect("sum");
    let err = y.backward().expect_err("NaN in Sqrt's backward");
    assert!(
        matches!(err.root_cause(), Error::NanDetected { .. }),
        "{err:?}"
    );
    assert_mentions(&err, &["Sqrt", "NaN"]);
}

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_device_names() {
    for name in ["gpu:0", "cuda", "cuda:x", "cuda:-1", ""] {
        let parse = name.parse::<Device>().expect_err(name);
        assert_eq!(parse.name, name);
        // `?` in a function returning kusari's Result turns it into Error::InvalidDevice.
        let err = Error::from(parse.clone());
        assert_eq!(
            err,
            Error::InvalidDevice {
                name: name.to_string(),
            }
        );
        assert_eq!(parse.to_string(), err.to_string());
        assert_mentions(&err, &[&format!("{name:?}"), "cuda:N"]);
    }
}

/// A device this machine does not have (none without a GPU; cuda:1000 with one, or on the
/// emulated device) is `CudaUnavailable`, naming the operation and the device.
#[test]
fn cuda_is_unavailable_in_this_build() {
    let err = f32s(&[2])
        .to_device(Device::Cuda(1000))
        .expect_err("no cuda:1000");
    let Error::CudaUnavailable { op, .. } = &err else {
        panic!("expected CudaUnavailable, got {err:?}");
    };
    assert_eq!(op, "to_device(cuda:1000)");
    assert_mentions(&err, &["cuda:1000", "CUDA is not available"]);
}

// ---------------------------------------------------------------------------------------------
// Built-in functions' arguments
// ---------------------------------------------------------------------------------------------

#[test]
fn dropout_ratio_outside_zero_to_one() {
    let x = Variable::new(f32s(&[4]));
    for ratio in [1.0, 1.5, -0.1, f64::NAN] {
        let err = F::dropout(&x, ratio).expect_err("bad ratio");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert_mentions(&err, &["dropout", "[0, 1)", &ratio.to_string()]);
    }
    // Also in test mode, where dropout would otherwise do nothing.
    let _test = using_train(false);
    assert!(F::dropout(&x, 1.0).is_err());
}

#[test]
fn softmax_cross_entropy_with_bad_labels() {
    let x = Variable::new(f32s(&[2, 3]));
    let labels = Array::from_vec(vec![0i32, 3], &[2]).expect("fills");
    let err = F::softmax_cross_entropy(&x, &labels).expect_err("label 3 of 3 classes");
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "softmax_cross_entropy: label 3 at index 1 is outside 0..3 (use -1 to ignore a sample)"
    );
    let labels = Array::from_vec(vec![-2i64, 0], &[2]).expect("fills");
    let err = F::softmax_cross_entropy(&x, &labels).expect_err("label -2");
    assert_mentions(&err, &["label -2 at index 0"]);

    let labels = Array::from_vec(vec![0i32, 1, 2], &[3]).expect("fills");
    let err = F::softmax_cross_entropy(&x, &labels).expect_err("3 labels for 2 rows");
    assert!(
        matches!(
            err,
            Error::Shape {
                op: "softmax_cross_entropy",
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["[2, 3]", "[3]"]);

    let labels = Array::from_vec(vec![0.0f32, 1.0], &[2]).expect("fills");
    let err = F::softmax_cross_entropy(&x, &labels).expect_err("float labels");
    assert!(
        matches!(
            err,
            Error::UnsupportedDType {
                dtype: DType::F32,
                ..
            }
        ),
        "{err:?}"
    );
}

/// Reads an input index the function does not have.
struct ReadsPastInputs;

impl FunctionNode for ReadsPastInputs {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![inputs[0].add(&inputs[1])?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext,
        _: &[usize],
        _: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        ctx.retained_input(99)?;
        unreachable!("input 99 of 2")
    }
}

#[test]
fn backward_reading_an_input_past_the_last_says_out_of_range() {
    let (x, y) = (Variable::new(f32s(&[2])), Variable::new(f32s(&[2])));
    let z = ReadsPastInputs.apply(&[&x, &y]).unwrap().remove(0);
    let err = F::sum(&z).unwrap().backward().expect_err("input 99");
    assert_eq!(
        err.root_cause(),
        &Error::IndexOutOfRange {
            function: "ReadsPastInputs".into(),
            what: "input",
            index: 99,
            count: 2
        }
    );
    assert_mentions(&err, &["backward asks for input 99", "has 2 input(s)"]);
}

// ---------------------------------------------------------------------------------------------
// Activations, clip and layer normalization (issue 22)

/// Bad arguments are `Err`s naming the function and the parameter or the shapes: integer
/// inputs, non-finite or zero parameters, clip bounds that cannot work, a swish `beta` that does
/// not fit, layer normalization's shapes and `eps`.
#[test]
fn activations_and_layer_normalization_refuse_bad_arguments() -> Result<()> {
    let x = Variable::new(f32s(&[2, 3]));
    let ints = Variable::new(Array::from_vec(vec![1i32, -2, 3], &[3])?);
    type Unary = (&'static str, fn(&Variable) -> Result<Variable>);
    let unary: [Unary; 9] = [
        ("leaky_relu", |x| F::leaky_relu(x, 0.2)),
        ("elu", |x| F::elu(x, 1.0)),
        ("softplus", |x| F::softplus(x, 1.0)),
        ("gelu", F::gelu),
        ("absolute", F::absolute),
        ("clip", |x| F::clip(x, Some(0.0), Some(1.0))),
        ("sin", F::sin),
        ("cos", F::cos),
        ("swish", |x| F::swish(x, x)),
    ];
    for (name, f) in unary {
        let err = f(&ints).unwrap_err();
        assert!(
            matches!(
                err.root_cause(),
                Error::UnsupportedDType {
                    dtype: DType::I32,
                    ..
                }
            ),
            "{name}: {err:?}"
        );
        assert_mentions(&err, &[name, "int32"]);
    }

    for (err, parts) in [
        (
            F::leaky_relu(&x, f64::NAN).unwrap_err(),
            &["leaky_relu", "slope"][..],
        ),
        (F::elu(&x, f64::INFINITY).unwrap_err(), &["elu", "alpha"]),
        (
            F::softplus(&x, 0.0).unwrap_err(),
            &["softplus", "beta", "0"],
        ),
        (
            F::clip(&x, None, None).unwrap_err(),
            &["clip", "x_min", "x_max"],
        ),
        (
            F::clip(&x, Some(2.0), Some(1.0)).unwrap_err(),
            &["clip", "x_min 2", "x_max 1"],
        ),
        (
            F::clip(&x, Some(f64::NAN), None).unwrap_err(),
            &["clip", "NaN"],
        ),
    ] {
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert_mentions(&err, parts);
    }

    // swish: beta must be a prefix of x.shape[1..] and of x's dtype.
    let beta = Variable::new(f32s(&[2]));
    let err = F::swish(&x, &beta).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "swish", .. }), "{err:?}");
    assert_mentions(&err, &["beta [2]", "[2, 3]"]);
    let beta64 = Variable::new(Array::ones(&[3], DType::F64)?);
    let err = F::swish(&x, &beta64).unwrap_err();
    assert!(
        matches!(err, Error::DTypeMismatch { op: "swish", .. }),
        "{err:?}"
    );

    // layer_normalization: x of 2 axes or more, gamma and beta of x.shape[1..], eps >= 0.
    let (g, b) = (Variable::new(f32s(&[3])), Variable::new(f32s(&[3])));
    let err = F::layer_normalization(&Variable::new(f32s(&[3])), &g, &b, 1e-5).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Shape {
                op: "layer_normalization",
                ..
            }
        ),
        "{err:?}"
    );
    let err = F::layer_normalization(&x, &Variable::new(f32s(&[2])), &b, 1e-5).unwrap_err();
    assert_mentions(&err, &["layer_normalization", "gamma [2]", "[2, 3]", "[3]"]);
    let err = F::layer_normalization(&x, &g, &Variable::new(f32s(&[3, 1])), 1e-5).unwrap_err();
    assert_mentions(&err, &["layer_normalization", "beta [3, 1]"]);
    let err = F::layer_normalization(&x, &g, &b, -1.0).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert_mentions(&err, &["layer_normalization", "eps"]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Indexing, joining, splitting, padding, embeddings
// ---------------------------------------------------------------------------------------------

#[test]
fn an_index_out_of_range_names_get_item_the_index_the_axis_and_the_shape() {
    let x = f32s(&[2, 3]);
    let err = x
        .get_item(&[Ix::all(), Ix::Int(3)])
        .expect_err("axis 1 has 3");
    assert_mentions(&err, &["get_item", "index 3", "axis 1", "[2, 3]"]);
    let err = x.get_item(&[Ix::Int(-3)]).expect_err("axis 0 has 2");
    assert_mentions(&err, &["get_item", "index -3", "axis 0", "[2, 3]"]);
    let idx = Array::from_vec(vec![0i64, 5], &[2]).unwrap();
    let v = Variable::new(x.clone());
    let err = v.get_item(&[Ix::Array(&idx)]).expect_err("row 5 of 2");
    assert_mentions(&err, &["get_item", "index 5", "axis 0", "[2, 3]"]);
    let err = x
        .get_item(&[Ix::Int(0), Ix::Int(0), Ix::Int(0)])
        .expect_err("three indices for two axes");
    assert_mentions(&err, &["get_item", "3 indices", "[2, 3]"]);
    let err = x
        .get_item(&[Ix::Ellipsis, Ix::Ellipsis])
        .expect_err("two ellipses");
    assert_mentions(&err, &["get_item", "ellipsis"]);
    let err = x
        .get_item(&[Ix::slice(None, None, 0)])
        .expect_err("zero step");
    assert_mentions(&err, &["get_item", "step", "zero"]);
    let fidx = Array::from_vec(vec![0.0f32], &[1]).unwrap();
    let err = x.get_item(&[Ix::Array(&fidx)]).expect_err("float index");
    assert_mentions(&err, &["get_item", "float32", "an integer index array"]);
    let err = x
        .get_item(&[Ix::Array(&idx), Ix::Array(&idx)])
        .expect_err("two index arrays");
    assert_mentions(&err, &["get_item", "one integer-array index"]);
}

#[test]
fn concat_and_stack_of_mismatched_shapes_name_the_function_and_shapes() {
    let a = Variable::new(f32s(&[2, 3]));
    let b = Variable::new(f32s(&[3, 3]));
    let err = F::concat(&[&a, &b], 1).expect_err("rows differ");
    assert_mentions(&err, &["concat", "array 1", "[3, 3]", "[2, 3]", "axis 1"]);
    assert!(F::concat(&[&a, &b], 0).is_ok());
    let err = F::concat(&[&a, &b], 2).expect_err("no axis 2");
    assert_mentions(&err, &["concat", "axis 2", "[2, 3]"]);
    let err = F::concat(&[], 0).expect_err("nothing to join");
    assert_mentions(&err, &["concat", "at least one"]);
    let c = Variable::new(f32s(&[3]));
    let err = F::concat(&[&a, &c], 0).expect_err("ranks differ");
    assert_mentions(&err, &["concat", "[3]", "[2, 3]"]);
    let i = Variable::new(Array::from_vec(vec![1i32; 6], &[2, 3]).unwrap());
    let err = F::concat(&[&a, &i], 0).expect_err("dtypes differ");
    assert_mentions(&err, &["concat", "float32", "int32"]);
    let err = F::stack(&[&a, &b], 0).expect_err("shapes differ");
    assert_mentions(&err, &["stack", "array 1", "[3, 3]", "[2, 3]"]);
    let err = F::stack(&[&a, &a], 3).expect_err("no axis 3 in the stacked rank 3");
    assert_mentions(&err, &["stack", "axis 3"]);
}

#[test]
fn bad_split_indices_name_split_axis_and_the_parameter() {
    let x = Variable::new(f32s(&[2, 5]));
    let err = F::split_axis(&x, 2, 1).expect_err("5 is odd");
    assert_mentions(
        &err,
        &[
            "split_axis",
            "indices_or_sections 2",
            "axis 1",
            "length 5",
            "[2, 5]",
        ],
    );
    let err = F::split_axis(&x, &[3, 1], 1).expect_err("decreasing");
    assert_mentions(&err, &["split_axis", "[3, 1]", "non-decreasing", "[2, 5]"]);
    let err = F::split_axis(&x, &[6], 1).expect_err("past the end");
    assert_mentions(&err, &["split_axis", "[6]", "length 5"]);
    let err = F::split_axis(&x, 0, 0).expect_err("zero sections");
    assert_mentions(&err, &["split_axis", "indices_or_sections 0"]);
}

#[test]
fn bad_pad_widths_and_modes_name_pad() {
    let x = Variable::new(f32s(&[2, 3]));
    let err = F::pad(&x, &[(0, 0), (-1, 2)], "constant", 0.0).expect_err("negative");
    assert_mentions(&err, &["pad", "(-1, 2)", "axis 1", "negative", "[2, 3]"]);
    let err = F::pad(&x, &[(0, 0), (1, 1), (1, 1)], "constant", 0.0).expect_err("3 pairs");
    assert_mentions(&err, &["pad", "3", "[2, 3]"]);
    let err = F::pad(&x, &[(1, 1)], "edge", 0.0).expect_err("mode");
    assert_mentions(&err, &["pad", "\"edge\"", "constant"]);
}

#[test]
fn embed_id_labels_out_of_range_name_embed_id_the_id_and_n_vocab() {
    let w = Variable::new(f32s(&[4, 2]));
    let x = Array::from_vec(vec![0i32, 4], &[2]).unwrap();
    let err = F::embed_id(&x, &w, None).expect_err("id 4 of 4");
    assert_mentions(&err, &["embed_id", "id 4", "n_vocab 4", "[4, 2]"]);
    let x = Array::from_vec(vec![-1i64, 1], &[2]).unwrap();
    let err = F::embed_id(&x, &w, None).expect_err("-1 without ignore_label");
    assert_mentions(&err, &["embed_id", "id -1", "n_vocab 4"]);
    assert!(F::embed_id(&x, &w, Some(-1)).is_ok());
    let err = F::embed_id(&x, &w, Some(-2)).expect_err("-1 is not the ignore_label");
    assert_mentions(&err, &["embed_id", "id -1", "ignore_label -2"]);
    let xf = Array::from_vec(vec![0.0f32], &[1]).unwrap();
    let err = F::embed_id(&xf, &w, None).expect_err("float ids");
    assert_mentions(&err, &["embed_id", "float32", "integer ids"]);
    let w3 = Variable::new(f32s(&[2, 2, 2]));
    let err =
        F::embed_id(&Array::from_vec(vec![0i32], &[1]).unwrap(), &w3, None).expect_err("3-D W");
    assert_mentions(&err, &["embed_id", "(n_vocab, n_units)", "[2, 2, 2]"]);
}
