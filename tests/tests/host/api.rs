//! What a Chainer or PyTorch user writes first (issue 15): `Variable`'s math methods, mixed
//! operands (`&x * &array`, `&x * 2`), the short forms of `grad`'s `grad_outputs`, uniform
//! reductions, and double backprop through `backward_with`. Every value is checked against a
//! float64 formula written here, never against kusari's own functions.

use kusari::prelude::*;
use kusari_tests::{arr, assert_close};

fn vals(a: &Array) -> Vec<f64> {
    a.to_f64_vec().expect("host values")
}

const X: [f64; 6] = [0.5, -1.25, 2.0, 0.75, -0.5, 1.5];

fn x() -> Variable {
    Variable::new(arr(&X, &[2, 3]))
}

fn map(f: impl Fn(f64) -> f64) -> Vec<f64> {
    X.iter().map(|&v| f(v)).collect()
}

/// The value and the gradient (of the sum of the output) of a unary method, against `f` and
/// its derivative `df`.
fn check_unary(
    name: &str,
    method: impl Fn(&Variable) -> Result<Variable>,
    f: impl Fn(f64) -> f64,
    df: impl Fn(f64) -> f64,
    positive: bool,
) -> Result<()> {
    let input: Vec<f64> = if positive {
        X.iter().map(|v| v.abs()).collect()
    } else {
        X.to_vec()
    };
    let x = Variable::new(arr(&input, &[2, 3]));
    let y = method(&x)?;
    let want: Vec<f64> = input.iter().map(|&v| f(v)).collect();
    let dwant: Vec<f64> = input.iter().map(|&v| df(v)).collect();
    assert_close(y.array(), &arr(&want, &[2, 3]), 1e-14, 1e-14);
    y.sum()?.backward()?;
    let gx = x.grad_array().expect("a gradient");
    assert_close(&gx, &arr(&dwant, &[2, 3]), 1e-14, 1e-14);
    eprintln!("{name}: value and gradient match");
    Ok(())
}

#[test]
fn variable_has_the_math_methods_of_array() -> Result<()> {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    check_unary("exp", |x| x.exp(), f64::exp, f64::exp, false)?;
    check_unary("log", |x| x.log(), f64::ln, |v| 1.0 / v, true)?;
    check_unary("sqrt", |x| x.sqrt(), f64::sqrt, |v| 0.5 / v.sqrt(), true)?;
    check_unary(
        "tanh",
        |x| x.tanh(),
        f64::tanh,
        |v| 1.0 - v.tanh().powi(2),
        false,
    )?;
    check_unary(
        "sigmoid",
        |x| x.sigmoid(),
        sig,
        |v| sig(v) * (1.0 - sig(v)),
        false,
    )?;
    check_unary(
        "relu",
        |x| x.relu(),
        |v| v.max(0.0),
        |v| if v > 0.0 { 1.0 } else { 0.0 },
        false,
    )?;
    check_unary(
        "pow_scalar",
        |x| x.pow_scalar(3.0),
        |v| v.powi(3),
        |v| 3.0 * v * v,
        false,
    )?;
    check_unary("neg", |x| x.neg(), |v| -v, |_| -1.0, false)?;
    check_unary("sin", |x| x.sin(), f64::sin, f64::cos, false)?;
    check_unary("cos", |x| x.cos(), f64::cos, |v| -v.sin(), false)?;
    // X has no 0, where the gradient of |x| is 0 (sign(0)).
    check_unary(
        "abs",
        |x| x.abs(),
        |v| if v < 0.0 { -v } else { v },
        |v| if v < 0.0 { -1.0 } else { 1.0 },
        false,
    )?;
    let two = Variable::constant(Array::full(&[2, 3], 2.0, DType::F64)?);
    check_unary("pow", |x| x.pow(&two), |v| v * v, |v| 2.0 * v, true)?;
    let one = Variable::constant(Array::ones(&[2, 3], DType::F64)?); // no ties with X
    check_unary(
        "maximum",
        |x| x.maximum(&one),
        |v| v.max(1.0),
        |v| if v > 1.0 { 1.0 } else { 0.0 },
        false,
    )?;

    // Shape methods: reshape, transpose / t, expand_dims, squeeze, broadcast_to, sum_to, astype.
    let x = x();
    assert_eq!(x.reshape(&[3, 2])?.shape(), &[3, 2]);
    let t = x.t()?;
    assert_eq!(t.shape(), &[3, 2]);
    assert_eq!(vals(t.array()), vec![0.5, 0.75, -1.25, -0.5, 2.0, 1.5]);
    assert_eq!(x.transpose(Some(&[1, 0]))?.shape(), &[3, 2]);
    let e = x.expand_dims(0)?;
    assert_eq!(e.shape(), &[1, 2, 3]);
    assert_eq!(e.squeeze(None)?.shape(), &[2, 3]);
    let b = x.reshape(&[1, 2, 3])?.broadcast_to(&[4, 2, 3])?;
    assert_eq!(b.shape(), &[4, 2, 3]);
    assert_close(
        b.sum_to(&[2, 3])?.array(),
        &arr(&map(|v| 4.0 * v), &[2, 3]),
        0.0,
        1e-15,
    );
    assert_eq!(x.astype(DType::F32)?.dtype(), DType::F32);

    // matmul: [2,3]·[3,2], against the sum of products by hand.
    let w = Variable::new(arr(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]));
    let p = x.matmul(&w)?;
    let want = [
        0.5 * 1.0 - 1.25 * 3.0 + 2.0 * 5.0,
        0.5 * 2.0 - 1.25 * 4.0 + 2.0 * 6.0,
        0.75 * 1.0 - 0.5 * 3.0 + 1.5 * 5.0,
        0.75 * 2.0 - 0.5 * 4.0 + 1.5 * 6.0,
    ];
    assert_close(p.array(), &arr(&want, &[2, 2]), 1e-14, 1e-14);
    Ok(())
}

#[test]
fn reductions_take_one_pattern() -> Result<()> {
    let x = x();
    let total: f64 = X.iter().sum();
    // All elements: F::sum(&x), x.mean(), ...; over axes: F::sum_axes(&x, &[1], keepdims), ...
    assert_eq!(vals(F::sum(&x)?.array()), vec![total]);
    assert_eq!(x.sum()?.ndim(), 0);
    assert_close(x.mean()?.array(), &Array::scalar(total / 6.0), 1e-15, 1e-15);
    assert_eq!(vals(x.max()?.array()), vec![2.0]);
    assert_eq!(vals(F::min(&x)?.array()), vec![-1.25]);
    let rows = [X[0] + X[1] + X[2], X[3] + X[4] + X[5]];
    assert_close(
        x.sum_axes(&[1], false)?.array(),
        &arr(&rows, &[2]),
        1e-15,
        1e-15,
    );
    assert_eq!(F::sum_axes(&x, &[-1], true)?.shape(), &[2, 1]);
    let means = [rows[0] / 3.0, rows[1] / 3.0];
    assert_close(
        x.mean_axes(&[1], false)?.array(),
        &arr(&means, &[2]),
        1e-15,
        1e-15,
    );
    assert_eq!(
        vals(x.max_axes(&[0], false)?.array()),
        vec![0.75, -0.5, 2.0]
    );
    assert_eq!(
        vals(F::min_axes(&x, &[1], true)?.array()),
        vec![-1.25, -0.5]
    );
    // No axes: nothing is reduced (NumPy's axis=()).
    assert_eq!(x.sum_axes(&[], false)?.shape(), &[2, 3]);
    // The gradient of a mean over rows: 1/3 to each element.
    let m = x.mean_axes(&[1], false)?;
    m.sum()?.backward()?;
    assert_close(
        &x.grad_array().expect("grad"),
        &arr(&[1.0 / 3.0; 6], &[2, 3]),
        1e-15,
        1e-15,
    );
    Ok(())
}

#[test]
fn variables_mix_with_arrays_and_integer_literals() -> Result<()> {
    let a = arr(&[2.0, 3.0, -1.0, 0.5, 4.0, -2.0], &[2, 3]);
    let av = vals(&a);
    let x = x();
    let y = (&x * &a)?;
    let want: Vec<f64> = X.iter().zip(&av).map(|(x, a)| x * a).collect();
    assert_close(y.array(), &arr(&want, &[2, 3]), 0.0, 1e-15);
    y.sum()?.backward()?;
    // d(x·a)/dx = a; the array is a constant.
    assert_close(&x.grad_array().expect("grad"), &a, 0.0, 0.0);

    x.cleargrad();
    let y = ((&a - &x)? / &a)?; // (a - x) / a, gradient -1/a
    y.sum()?.backward()?;
    let want: Vec<f64> = av.iter().map(|a| -1.0 / a).collect();
    assert_close(
        &x.grad_array().expect("grad"),
        &arr(&want, &[2, 3]),
        0.0,
        1e-15,
    );

    // Integer literals, on either side.
    x.cleargrad();
    let y = ((&x * 2)? + 1)?; // 2x + 1
    assert_close(
        y.array(),
        &arr(&map(|v| 2.0 * v + 1.0), &[2, 3]),
        0.0,
        1e-15,
    );
    let z = (3 - &y)?; // 3 - (2x + 1), gradient -2
    z.sum()?.backward()?;
    assert_close(
        &x.grad_array().expect("grad"),
        &arr(&[-2.0; 6], &[2, 3]),
        0.0,
        0.0,
    );
    let h = (1 / &Variable::new(arr(&[4.0], &[1])))?;
    assert_eq!(vals(h.array()), vec![0.25]);
    // Arrays take integer literals too.
    assert_eq!(
        vals(&(&a * 2)?),
        av.iter().map(|v| v * 2.0).collect::<Vec<_>>()
    );
    Ok(())
}

#[test]
fn grad_outputs_in_short_forms() -> Result<()> {
    // y0 = x², y1 = 3x: with gy0 = 0.5 and gy1 = 2, dx = 0.5·2x + 2·3.
    let x = Variable::new(arr(&[1.5], &[1]));
    let y0 = (&x * &x)?;
    let y1 = (&x * 3)?;
    let gy0 = Variable::new(arr(&[0.5], &[1]));
    let gy1 = Variable::new(arr(&[2.0], &[1]));
    let want = 0.5 * 2.0 * 1.5 + 2.0 * 3.0;
    let opts = GradOptions::default;
    let dx = |g: Vec<Option<Variable>>| vals(g[0].as_ref().expect("grad").array())[0];
    assert_eq!(dx(grad(&[&y0, &y1], &[&x], &[&gy0, &gy1], opts())?), want);
    let owned = [gy0.clone(), gy1.clone()];
    assert_eq!(dx(grad(&[&y0, &y1], &[&x], &owned, opts())?), want);
    let v = owned.to_vec();
    assert_eq!(dx(grad(&[&y0, &y1], &[&x], &v, opts())?), want);
    // Chainer's list with a None: that output's gradient is ones (it has one element).
    let chainer = [Some(gy0.clone()), None];
    assert_eq!(
        dx(grad(&[&y0, &y1], &[&x], &chainer[..], opts())?),
        0.5 * 2.0 * 1.5 + 3.0
    );
    assert_eq!(
        dx(grad(&[&y0, &y1], &[&x], Some(&chainer[..]), opts())?),
        0.5 * 2.0 * 1.5 + 3.0
    );
    // None: ones for both.
    assert_eq!(dx(grad(&[&y0, &y1], &[&x], None, opts())?), 2.0 * 1.5 + 3.0);
    // A count that does not match the outputs is an error, not a panic.
    let err = grad(&[&y0, &y1], &[&x], &[&gy0], opts()).expect_err("1 for 2");
    assert!(
        err.to_string().contains("1 grad_outputs for 2 outputs"),
        "{err}"
    );
    Ok(())
}

#[test]
fn double_backprop_through_backward_with() -> Result<()> {
    // Chainer: y.backward(enable_double_backprop=True); gx = x.grad_var; x.cleargrad();
    // gx.backward() gives x.grad = d(3x²)/dx = 6x.
    let x = Variable::new(arr(&[2.0, -1.0], &[2]));
    let y = x.pow_scalar(3.0)?.sum()?;
    y.backward_with(BackwardOptions {
        enable_double_backprop: true,
        ..Default::default()
    })?;
    let gx = x.grad().expect("x.grad after backward");
    assert_eq!(vals(gx.array()), vec![12.0, 3.0]); // 3x²
    assert!(gx.has_creator(), "the gradient carries a graph");
    x.cleargrad();
    gx.sum()?.backward()?;
    assert_eq!(
        vals(&x.grad_array().expect("second-order grad")),
        vec![12.0, -6.0]
    ); // 6x
    Ok(())
}

/// The public functions of `kusari::functions`, read from its `pub use` lines.
fn public_functions() -> Vec<String> {
    let src = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../runtime/src/functions/mod.rs"
    ));
    let mut names = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("pub use ") {
        let item = &rest[i + 8..];
        let end = item.find(';').expect("a `pub use` ends with `;`");
        let list = &item[..end];
        let list = list.rsplit("::").next().expect("a path").trim();
        let list = list.trim_start_matches('{').trim_end_matches('}');
        for name in list.split(',').map(str::trim) {
            // Functions are snake_case; node types (Exp, Mul) and the module alias are not.
            if name.starts_with(|c: char| c.is_ascii_lowercase()) && !name.contains(" as ") {
                names.push(name.to_string());
            }
        }
        rest = &item[end..];
    }
    for line in src.lines() {
        if let Some(def) = line.strip_prefix("pub fn ") {
            names.push(def.split('(').next().expect("a name").to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn readme_reference_lists_every_function() {
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
    let start = readme
        .find("### The built-in functions (`F::`)")
        .expect("README has the reference of the built-in functions");
    let table = &readme[start..];
    let table = &table[..table.find("\n### ").unwrap_or(table.len())];
    let functions = public_functions();
    assert!(
        functions.len() >= 40,
        "read {} functions: {functions:?}",
        functions.len()
    );
    let missing: Vec<&String> = functions
        .iter()
        .filter(|f| !table.contains(&format!("F::{f}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "README's reference lacks F::{missing:?}"
    );
    // And the table names no function that does not exist.
    for part in table.split("F::").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // (`F::` alone, as in the heading, names nothing.)
        assert!(
            name.is_empty() || functions.contains(&name),
            "README's reference names F::{name}, which does not exist"
        );
    }
}
