//! `kusari::fuse`: a closure of elementwise functions traced into one op. The fused closure
//! gives the unfused closure's values and gradients (first and second order, broadcast inputs,
//! float32 and float64), runs through `op_tests!` on every device present, caches one trace per
//! dtype and numbers of dimensions, and refuses what is not elementwise with an error naming
//! the function.

use std::sync::{Arc, LazyLock};

use kusari::prelude::*;
use kusari::testing::OpTest;
use kusari::{FusedFn, fuse};

/// A chain of six elementwise functions and a scalar: tanh(x·a + b)·σ(x) − e^(−x²)·0.5 + |a|.
pub fn chain(v: &[Variable]) -> Result<Variable> {
    let (x, a, b) = (&v[0], &v[1], &v[2]);
    let t = F::tanh(&((x * a)? + b)?)?;
    let s = F::sigmoid(x)?;
    let g = F::exp(&(-(x * x)?)?)?;
    ((&t * &s)? - (g * 0.5)?)? + F::absolute(a)?
}

static FUSED_CHAIN: LazyLock<FusedFn> = LazyLock::new(|| fuse("chain", chain));

fn fused_chain() -> &'static FusedFn {
    &FUSED_CHAIN
}

fn uniforms(
    shapes: &'static [&'static [usize]],
) -> impl Fn(&mut kusari::random::Rng, DType) -> Vec<Array> {
    move |rng, dtype| {
        shapes
            .iter()
            .map(|s| Array::uniform(s, -1.5, 1.5, dtype, rng).unwrap())
            .collect()
    }
}

kusari::op_tests!(fused_chain_op => OpTest::new("fuse(chain)", uniforms(&[&[3, 4], &[4], &[3, 1]]))
    .forward(|v| fused_chain().apply(&[&v[0], &v[1], &v[2]]))
    .expected(|x| {
        let shape = x[0].shape().to_vec();
        let a = x[1].broadcast(shape.clone()).unwrap();
        let b = x[2].broadcast(shape).unwrap();
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        vec![ndarray::Zip::from(&x[0]).and(&a).and(&b).map_collect(|&x, &a, &b| {
            (x * a + b).tanh() * sig(x) - (-x * x).exp() * 0.5 + a.abs()
        })]
    })
    .avoid(|x| x[1].iter().any(|a| a.abs() < 0.02)));

/// Values, gradients and second-order gradients of the fused closure equal the unfused
/// closure's, to within rounding.
#[test]
fn fused_equals_unfused_to_second_order() -> Result<()> {
    for dtype in [DType::F32, DType::F64] {
        let mut rng = kusari::random::Rng::seed(11);
        let data: Vec<Array> = [&[8, 16][..], &[16], &[8, 1]]
            .iter()
            .map(|s| Array::uniform(s, -2.0, 2.0, dtype, &mut rng))
            .collect::<Result<_>>()?;
        let gy = Variable::new(Array::uniform(&[8, 16], -1.0, 1.0, dtype, &mut rng)?);
        let run = |fused: bool| -> Result<Vec<Vec<f64>>> {
            let v: Vec<Variable> = data.iter().cloned().map(Variable::new).collect();
            let refs: Vec<&Variable> = v.iter().collect();
            let y = if fused {
                fused_chain().apply(&refs)?
            } else {
                chain(&v)?
            };
            let double = kusari::GradOptions {
                enable_double_backprop: true,
                ..Default::default()
            };
            let gs = kusari::grad(&[&y], &refs, &[&gy], double)?;
            let gx = gs[0].clone().unwrap();
            let s = F::sum(&(&gx * &gx)?)?;
            let ggs = kusari::grad(&[&s], &refs, None, Default::default())?;
            let mut out = vec![y.array().to_f64_vec()?];
            for g in gs.into_iter().chain(ggs) {
                out.push(g.unwrap().array().to_f64_vec()?);
            }
            Ok(out)
        };
        let (fused, unfused) = (run(true)?, run(false)?);
        let tol = if dtype == DType::F32 { 2e-5 } else { 1e-12 };
        for (k, (f, u)) in fused.iter().zip(&unfused).enumerate() {
            assert_eq!(f.len(), u.len());
            for (a, b) in f.iter().zip(u) {
                assert!(
                    (a - b).abs() <= tol * (1.0 + b.abs()),
                    "{dtype}, result {k}: fused {a}, unfused {b}"
                );
            }
        }
    }
    Ok(())
}

/// One trace per dtype and numbers of dimensions: the body is the chain's, over the inputs.
#[test]
fn a_trace_is_made_once_per_dtype_and_rank() -> Result<()> {
    let f = fuse("twice", |v: &[Variable]| (&v[0] * 2.0)? + &v[1]);
    let x32 = Variable::new(Array::from_vec(vec![1.0f32, 2.0], &[2])?);
    let x64 = Variable::new(Array::from_vec(vec![1.0f64, 2.0], &[2])?);
    let m64 = Variable::new(Array::from_vec(vec![1.0f64, 2.0], &[1, 2])?);
    let a = f.trace(&[&x32, &x32])?;
    assert!(Arc::ptr_eq(&a, &f.trace(&[&x32, &x32])?));
    assert!(!Arc::ptr_eq(&a, &f.trace(&[&x64, &x64])?));
    assert!(!Arc::ptr_eq(
        &f.trace(&[&x64, &x64])?,
        &f.trace(&[&m64, &x64])?
    ));
    // One statement per function, then the output.
    assert_eq!(a.kernel().inputs, "T x0, T x1");
    assert_eq!(
        a.kernel().body,
        "T f0_out = x0 * 2;\nT f1_out = f0_out + x1;\ny0 = f1_out;\n"
    );
    assert_eq!(f.apply(&[&x64, &m64])?.array().to_vec::<f64>()?, [3.0, 6.0]);
    Ok(())
}

/// An op declared by its body, an `ElementwiseOp`, and operators all fuse; an input the
/// closure ignores takes no part and gets no gradient.
#[test]
fn body_ops_and_elementwise_ops_fuse() -> Result<()> {
    static CUBE: kusari::ElementwiseOp =
        kusari::ElementwiseOp::new("cube", "T x", "T y", "", "y = x * x * x");
    let f = fuse("mixed", |v: &[Variable]| {
        let c = CUBE.apply(&[&v[0]], &[])?.remove(0);
        super::body_ops::body_mul_add(&c, &v[0], &v[2])
    });
    let x = Variable::new(Array::from_vec(vec![1.0f64, -2.0], &[2])?);
    let unused = Variable::new(Array::from_vec(vec![7.0f64; 5], &[5])?);
    let z = Variable::new(Array::from_vec(vec![0.5f64], &[1])?);
    let y = f.apply(&[&x, &unused, &z])?;
    // x³·x + z
    assert_eq!(y.array().to_vec::<f64>()?, [1.5, 16.5]);
    F::sum(&y)?.backward()?;
    // d(x⁴)/dx = 4x³
    assert_eq!(x.grad().unwrap().array().to_vec::<f64>()?, [4.0, -32.0]);
    assert!(unused.grad().is_none());
    assert_eq!(z.grad().unwrap().array().to_vec::<f64>()?, [2.0]);
    assert_eq!(f.trace(&[&x, &unused, &z])?.kernel().inputs, "T x0, T x1");
    Ok(())
}

/// What is not elementwise is refused at trace time, naming the function; so is a captured
/// variable, and an integer input.
#[test]
fn what_cannot_be_fused_is_refused_naming_it() {
    let x = Variable::new(Array::from_vec(vec![1.0f32, 2.0], &[2]).unwrap());
    let with_sum = fuse("with_sum", |v: &[Variable]| F::sum(&F::exp(&v[0])?));
    let e = with_sum.apply(&[&x]).unwrap_err().to_string();
    assert!(
        e.contains("with_sum") && e.contains("`Sum`") && e.contains("not elementwise"),
        "{e}"
    );
    let captured = x.clone();
    let capturing = fuse("capturing", move |v: &[Variable]| &v[0] + &captured);
    let e = capturing.apply(&[&x]).unwrap_err().to_string();
    assert!(e.contains("none of its inputs"), "{e}");
    let ints = Variable::new(Array::from_vec(vec![1i32, 2], &[2]).unwrap());
    let twice = fuse("twice", |v: &[Variable]| &v[0] * 2.0);
    let e = twice.apply(&[&ints]).unwrap_err().to_string();
    assert!(e.contains("int32") && e.contains("fuse"), "{e}");
}

type Unary = fn(&[Variable]) -> Result<Variable>;

/// The gradient of `f` at `v[0]` for the output gradient `v[1]`, differentiable again.
fn grad_of(f: fn(&Variable) -> Result<Variable>, v: &[Variable]) -> Result<Variable> {
    let y = f(&v[0])?;
    let double = kusari::GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    Ok(kusari::grad(&[&y], &[&v[0]], &[&v[1]], double)?
        .remove(0)
        .unwrap())
}

/// Every built-in elementwise function's formula, fused alone, gives the function's value,
/// its backward and double backward, to within rounding. This test held each derived backward
/// against the hand-written one before the built-ins switched to their derived backwards; it
/// now holds the formulas against the functions' forwards (kusari's SIMD math) and the
/// hand-written backwards that remain, and `derived_builtins` holds the derived ones against
/// hand-derived derivatives. (The 28 formulas: 25 functions and the backward nodes of tanh,
/// sigmoid and relu.)
#[test]
fn every_builtin_formula_matches_its_function() -> Result<()> {
    // (name, function, low, high): inputs drawn in [low, high], away from kinks and poles.
    let cases: Vec<(&str, Unary, f64, f64)> = vec![
        ("exp", |v| F::exp(&v[0]), -2.0, 2.0),
        ("log", |v| F::log(&v[0]), 0.2, 3.0),
        ("expm1", |v| F::expm1(&v[0]), -2.0, 2.0),
        ("log1p", |v| F::log1p(&v[0]), -0.5, 3.0),
        ("erf", |v| F::erf(&v[0]), -2.0, 2.0),
        ("sqrt", |v| F::sqrt(&v[0]), 0.2, 3.0),
        ("tanh", |v| F::tanh(&v[0]), -2.0, 2.0),
        ("sigmoid", |v| F::sigmoid(&v[0]), -4.0, 4.0),
        ("relu", |v| F::relu(&v[0]), 0.1, 2.0),
        ("relu_negative", |v| F::relu(&v[0]), -2.0, -0.1),
        ("sin", |v| F::sin(&v[0]), -3.0, 3.0),
        ("cos", |v| F::cos(&v[0]), -3.0, 3.0),
        ("pow", |v| F::pow(&v[0], &v[1]), 0.3, 2.0),
        ("add", |v| F::add(&v[0], &v[1]), -2.0, 2.0),
        ("sub", |v| F::sub(&v[0], &v[1]), -2.0, 2.0),
        ("mul", |v| F::mul(&v[0], &v[1]), -2.0, 2.0),
        ("div", |v| F::div(&v[0], &v[1]), 0.5, 2.0),
        ("neg", |v| F::neg(&v[0]), -2.0, 2.0),
        ("add_scalar", |v| F::add_scalar(&v[0], 0.3), -2.0, 2.0),
        ("mul_scalar", |v| F::mul_scalar(&v[0], -1.7), -2.0, 2.0),
        ("rsub_scalar", |v| F::rsub_scalar(&v[0], 0.3), -2.0, 2.0),
        ("rdiv_scalar", |v| F::rdiv_scalar(&v[0], 1.5), 0.5, 2.0),
        ("pow_scalar", |v| F::pow_scalar(&v[0], 2.5), 0.3, 2.0),
        ("maximum", |v| F::maximum(&v[0], &v[1]), -2.0, 2.0),
        ("absolute", |v| F::absolute(&v[0]), -2.0, 2.0),
        ("clip", |v| F::clip(&v[0], Some(-0.5), Some(0.7)), -2.0, 2.0),
        // The backward nodes of tanh, sigmoid and relu (derived ops, and SigmoidGrad),
        // reached by a gradient taken inside the closure.
        ("tanh_grad", |v| grad_of(F::tanh, v), -2.0, 2.0),
        ("sigmoid_grad", |v| grad_of(F::sigmoid, v), -2.0, 2.0),
        ("relu_grad", |v| grad_of(F::relu, v), 0.1, 2.0),
    ];
    for (name, f, lo, hi) in cases {
        let fused = fuse(name, f);
        for dtype in [DType::F32, DType::F64] {
            let mut rng = kusari::random::Rng::seed(17);
            let mut data: Vec<Array> = (0..2)
                .map(|_| Array::uniform(&[64], lo, hi, dtype, &mut rng))
                .collect::<Result<_>>()?;
            // Ties of maximum, and the kinks of absolute and clip, are left out.
            let keep = |a: f64, b: f64| {
                (a - b).abs() > 0.02
                    && a.abs() > 0.02
                    && (a + 0.5).abs() > 0.02
                    && (a - 0.7).abs() > 0.02
            };
            let (a, b) = (data[0].to_f64_vec()?, data[1].to_f64_vec()?);
            let kept: Vec<usize> = (0..64).filter(|&i| keep(a[i], b[i])).collect();
            for d in data.iter_mut() {
                let v = d.to_f64_vec()?;
                let picked: Vec<f64> = kept.iter().map(|&i| v[i]).collect();
                *d = Array::from_vec(picked, &[kept.len()])?.astype(dtype)?;
            }
            let gy = Variable::new(Array::uniform(&[kept.len()], -1.0, 1.0, dtype, &mut rng)?);
            let run = |fused_: bool| -> Result<Vec<Vec<f64>>> {
                let v: Vec<Variable> = data.iter().cloned().map(Variable::new).collect();
                let refs: Vec<&Variable> = v.iter().collect();
                let y = if fused_ { fused.apply(&refs)? } else { f(&v)? };
                let double = kusari::GradOptions {
                    enable_double_backprop: true,
                    ..Default::default()
                };
                let gs = kusari::grad(&[&y], &refs, &[&gy], double)?;
                let mut out = vec![y.array().to_f64_vec()?];
                let mut sq = Vec::new();
                // No gradient (the built-in's `None` where the derivative is 0, or an input
                // not read) counts as zeros, kept in the graph for the second order.
                for (g, x) in gs.into_iter().zip(&v) {
                    let g = match g {
                        Some(g) => g,
                        None => (x * 0.0)?,
                    };
                    out.push(g.array().to_f64_vec()?);
                    sq.push(F::sum(&(&g * &g)?)?);
                }
                for s in sq {
                    let ggs = kusari::grad(&[&s], &refs, None, Default::default())?;
                    for g in ggs {
                        out.push(match g {
                            Some(g) => g.array().to_f64_vec()?,
                            None => vec![0.0; kept.len()],
                        });
                    }
                }
                Ok(out)
            };
            let (got, want) = (run(true)?, run(false)?);
            assert_eq!(got.len(), want.len(), "{name} {dtype}: result count");
            let tol = if dtype == DType::F32 { 1e-5 } else { 1e-13 };
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                for (a, b) in g.iter().zip(w) {
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{name} {dtype}, result {k}: fused {a}, hand-written {b}"
                    );
                }
            }
        }
    }
    Ok(())
}
