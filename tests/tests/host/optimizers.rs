//! Optimizers against their formulas: every update rule and hook is checked over a few steps
//! against the same rule written here with plain f64 loops, on a hand-written two-parameter link
//! whose gradients come from a backward pass of `Σ a·ca + Σ b·cb` (so `∇a = ca`, `∇b = cb`).

use kusari::link::optimizers::{
    Adam, GradientClipping, Hook, MomentumSGD, Optimizer, ParamGrad, SGD, WeightDecay,
};
use kusari::link::{Link, Parameter, initializers::Zero};
use kusari::prelude::*;
use kusari_tests::arr;

// ----- the link -----

/// Two parameters, `/a` and `/b`, visited by hand.
struct Tiny {
    a: Parameter,
    b: Parameter,
}

impl Link for Tiny {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        f(format!("{prefix}/a"), &self.a);
        f(format!("{prefix}/b"), &self.b);
    }
}

/// Two `Tiny`s under `/l1` and `/l2`.
struct Pair {
    l1: Tiny,
    l2: Tiny,
}

impl Link for Pair {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        self.l1.visit_params(&format!("{prefix}/l1"), f);
        self.l2.visit_params(&format!("{prefix}/l2"), f);
    }
}

fn array(values: &[f64], dtype: DType, device: Device) -> Result<Array> {
    arr(values, &[values.len()])
        .astype(dtype)?
        .to_device(device)
}

fn param(values: &[f64], dtype: DType, device: Device) -> Result<Parameter> {
    Ok(Parameter::from_array(array(values, dtype, device)?))
}

const A0: [f64; 3] = [0.5, -1.0, 2.0];
const B0: [f64; 2] = [1.5, -0.25];

fn tiny_on(dtype: DType, device: Device) -> Result<Tiny> {
    Ok(Tiny {
        a: param(&A0, dtype, device)?,
        b: param(&B0, dtype, device)?,
    })
}

fn tiny(dtype: DType) -> Result<Tiny> {
    tiny_on(dtype, Device::Cpu)
}

/// Clears the gradients and runs backward of `Σ a·ca + Σ b·cb`.
fn backprop(link: &Tiny, ca: &[f64], cb: &[f64]) -> Result<()> {
    link.cleargrads();
    let (dtype, device) = (link.a.dtype(), link.a.device());
    let ca = Variable::constant(array(ca, dtype, device)?);
    let cb = Variable::constant(array(cb, dtype, device)?);
    let la = F::sum(&(&link.a.variable()? * &ca)?)?;
    let lb = F::sum(&(&link.b.variable()? * &cb)?)?;
    (&la + &lb)?.backward()
}

fn values(p: &Parameter) -> Vec<f64> {
    p.array().and_then(|a| a.to_f64_vec()).expect("initialised")
}

/// The gradients of three steps, for `a` and for `b`.
const GRADS: [([f64; 3], [f64; 2]); 3] = [
    ([1.0, -2.0, 0.5], [0.25, 3.0]),
    ([-0.5, 1.5, 0.25], [2.0, -1.0]),
    ([2.0, 0.125, -1.0], [-0.75, 0.5]),
];

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        _ => 1e-5,
    }
}

/// `actual` close to `expected` within `tol * (1 + |expected|)`, by the tests' closeness rule.
#[track_caller]
fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    let array = |v: &[f64]| Array::from_vec(v.to_vec(), &[v.len()]).expect("a 1-D array");
    kusari_tests::assert_close(&array(actual), &array(expected), tol, tol);
}

// ----- the rules in plain f64 -----

fn sgd_ref(w: &mut [f64], g: &[f64], lr: f64) {
    for (w, g) in w.iter_mut().zip(g) {
        *w -= lr * g;
    }
}

fn momentum_ref(w: &mut [f64], v: &mut [f64], g: &[f64], lr: f64, momentum: f64) {
    for ((w, v), g) in w.iter_mut().zip(v.iter_mut()).zip(g) {
        *v = momentum * *v - lr * g;
        *w += *v;
    }
}

#[derive(Clone, Copy)]
struct AdamHp {
    alpha: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    eta: f64,
    weight_decay_rate: f64,
    amsgrad: bool,
}

impl AdamHp {
    fn of(adam: &Adam) -> Self {
        AdamHp {
            alpha: adam.alpha,
            beta1: adam.beta1,
            beta2: adam.beta2,
            eps: adam.eps,
            eta: adam.eta,
            weight_decay_rate: adam.weight_decay_rate,
            amsgrad: adam.amsgrad,
        }
    }
}

/// Adam's moments of one parameter.
struct AdamRef {
    m: Vec<f64>,
    v: Vec<f64>,
    vhat: Vec<f64>,
}

impl AdamRef {
    fn new(n: usize) -> Self {
        AdamRef {
            m: vec![0.0; n],
            v: vec![0.0; n],
            vhat: vec![0.0; n],
        }
    }

    fn step(&mut self, w: &mut [f64], g: &[f64], t: u64, hp: AdamHp) {
        let t = t as f64;
        let lr = hp.alpha * (1.0 - hp.beta2.powf(t)).sqrt() / (1.0 - hp.beta1.powf(t));
        for i in 0..w.len() {
            self.m[i] += (1.0 - hp.beta1) * (g[i] - self.m[i]);
            self.v[i] += (1.0 - hp.beta2) * (g[i] * g[i] - self.v[i]);
            self.vhat[i] = self.vhat[i].max(self.v[i]);
            let second = if hp.amsgrad { self.vhat[i] } else { self.v[i] };
            w[i] -=
                hp.eta * (lr * self.m[i] / (second.sqrt() + hp.eps) + hp.weight_decay_rate * w[i]);
        }
    }
}

// ----- update rules -----

#[test]
fn defaults_are_chainers() {
    assert_eq!(SGD::new().lr, 0.01);
    assert_eq!(SGD::default().lr, 0.01);
    let m = MomentumSGD::default();
    assert_eq!((m.lr, m.momentum), (0.01, 0.9));
    let a = Adam::default();
    assert_eq!(
        (a.alpha, a.beta1, a.beta2, a.eps),
        (0.001, 0.9, 0.999, 1e-8)
    );
    assert_eq!((a.eta, a.weight_decay_rate, a.amsgrad), (1.0, 0.0, false));
    let b = Adam::new()
        .alpha(0.5)
        .beta1(0.25)
        .beta2(0.75)
        .eps(1e-3)
        .eta(2.0)
        .weight_decay_rate(0.125)
        .amsgrad(true);
    assert_eq!((b.alpha, b.beta1, b.beta2, b.eps), (0.5, 0.25, 0.75, 1e-3));
    assert_eq!((b.eta, b.weight_decay_rate, b.amsgrad), (2.0, 0.125, true));
}

#[test]
fn sgd_follows_its_rule() -> Result<()> {
    for dtype in [DType::F32, DType::F64] {
        let link = tiny(dtype)?;
        let mut opt = SGD::new().lr(0.1);
        let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
        for (ga, gb) in &GRADS {
            backprop(&link, ga, gb)?;
            opt.update(&link)?;
            sgd_ref(&mut a, ga, 0.1);
            sgd_ref(&mut b, gb, 0.1);
            assert_close(&values(&link.a), &a, tolerance(dtype));
            assert_close(&values(&link.b), &b, tolerance(dtype));
        }
        assert_eq!(link.a.array()?.dtype(), dtype);
        assert_eq!(opt.t(), 3);
    }
    Ok(())
}

#[test]
fn momentum_sgd_follows_its_rule() -> Result<()> {
    for dtype in [DType::F32, DType::F64] {
        let link = tiny(dtype)?;
        let mut opt = MomentumSGD::new().lr(0.1).momentum(0.75);
        let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
        let (mut va, mut vb) = (vec![0.0; 3], vec![0.0; 2]);
        for (ga, gb) in &GRADS {
            backprop(&link, ga, gb)?;
            opt.update(&link)?;
            momentum_ref(&mut a, &mut va, ga, 0.1, 0.75);
            momentum_ref(&mut b, &mut vb, gb, 0.1, 0.75);
            assert_close(&values(&link.a), &a, tolerance(dtype));
            assert_close(&values(&link.b), &b, tolerance(dtype));
        }
    }
    Ok(())
}

#[test]
fn adam_follows_its_rule() -> Result<()> {
    let variants: [fn() -> Adam; 3] = [
        Adam::new,
        || Adam::new().alpha(0.05).beta1(0.5).beta2(0.75).eps(1e-3),
        || Adam::new().alpha(0.05).weight_decay_rate(0.1).eta(0.5),
    ];
    for dtype in [DType::F32, DType::F64] {
        for make in variants {
            let mut opt = make();
            let hp = AdamHp::of(&opt);
            let link = tiny(dtype)?;
            let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
            let (mut sa, mut sb) = (AdamRef::new(3), AdamRef::new(2));
            for (t, (ga, gb)) in (1..).zip(&GRADS) {
                backprop(&link, ga, gb)?;
                opt.update(&link)?;
                sa.step(&mut a, ga, t, hp);
                sb.step(&mut b, gb, t, hp);
                assert_close(&values(&link.a), &a, tolerance(dtype));
                assert_close(&values(&link.b), &b, tolerance(dtype));
            }
        }
    }
    Ok(())
}

/// Adam's step at `t` as array operations (the rule's array form): the new `w`, with the
/// moments `m` and `v` moved on.
fn adam_array_form(
    opt: &Adam,
    t: u64,
    g: &Array,
    w: Array,
    m: &mut Array,
    v: &mut Array,
) -> Result<Array> {
    *m = m.add(&g.sub(m)?.mul_scalar(1.0 - opt.beta1)?)?;
    *v = v.add(&g.mul(g)?.sub(v)?.mul_scalar(1.0 - opt.beta2)?)?;
    let step = m
        .mul_scalar(opt.lr(t))?
        .div(&v.sqrt()?.add_scalar(opt.eps)?)?;
    let step = step.add(&w.mul_scalar(opt.weight_decay_rate)?)?;
    w.sub(&step.mul_scalar(opt.eta)?)
}

/// Adam without AMSGrad updates in one elementwise pass (one kernel on CUDA): on the host it
/// must give the bits of the rule written as array operations, on CUDA the same values to
/// the last places (NVRTC may fuse a multiply and an add).
#[test]
fn adam_in_one_pass_gives_its_array_form() -> Result<()> {
    let mut devices = vec![Device::Cpu];
    devices.extend(kusari::testing::cuda_or_skip(
        "adam_in_one_pass_gives_its_array_form",
    )?);
    for device in devices {
        for dtype in [DType::F32, DType::F64] {
            let mut opt = Adam::new().alpha(0.05).weight_decay_rate(0.1).eta(0.5);
            let link = tiny_on(dtype, device)?;
            let mut w = link.a.array()?;
            let (mut m, mut v) = (w.zeros_like()?, w.zeros_like()?);
            for (t, (ga, gb)) in (1..).zip(&GRADS) {
                backprop(&link, ga, gb)?;
                let g = link.a.grad().unwrap();
                opt.update(&link)?;
                w = adam_array_form(&opt, t, &g, w, &mut m, &mut v)?;
                let (got, want) = (values(&link.a), w.to_f64_vec()?);
                if device == Device::Cpu {
                    assert_eq!(got, want, "{dtype} step {t}");
                } else {
                    assert_close(&got, &want, tolerance(dtype));
                }
            }
        }
    }
    Ok(())
}

/// One parameter of `n` elements, for the host's fused step over several threads' chunks.
struct Wide {
    w: Parameter,
}

impl Link for Wide {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        f(format!("{prefix}/w"), &self.w);
    }
}

/// The host's Adam step on a parameter large enough to be split into chunks run in parallel
/// (with a last chunk shorter than the others) gives, element for element, the bits of the rule
/// written as array operations.
#[test]
fn adam_on_a_large_host_parameter_gives_its_array_form() -> Result<()> {
    let n = 70_001;
    let wave = |k: f64| -> Vec<f64> { (0..n).map(|i| (i as f64 * k).sin()).collect() };
    for dtype in [DType::F32, DType::F64] {
        let mut opt = Adam::new().alpha(0.05).weight_decay_rate(0.1).eta(0.5);
        let link = Wide {
            w: param(&wave(0.37), dtype, Device::Cpu)?,
        };
        let mut w = link.w.array()?;
        let (mut m, mut v) = (w.zeros_like()?, w.zeros_like()?);
        for t in 1..=3u64 {
            link.cleargrads();
            let c = Variable::constant(array(&wave(0.11 * t as f64), dtype, Device::Cpu)?);
            F::sum(&(&link.w.variable()? * &c)?)?.backward()?;
            let g = link.w.grad().unwrap();
            opt.update(&link)?;
            w = adam_array_form(&opt, t, &g, w, &mut m, &mut v)?;
            let (got, want) = (values(&link.w), w.to_f64_vec()?);
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(
                differ, 0,
                "{dtype} step {t}: {differ} of {n} elements differ"
            );
        }
    }
    Ok(())
}

#[test]
fn adam_lr_is_the_bias_corrected_step() {
    let adam = Adam::new();
    for t in 1..5u64 {
        let expected =
            0.001 * (1.0 - 0.999f64.powi(t as i32)).sqrt() / (1.0 - 0.9f64.powi(t as i32));
        assert!((adam.lr(t) - expected).abs() < 1e-15);
    }
}

#[test]
fn amsgrad_keeps_the_largest_second_moment() -> Result<()> {
    // With beta2 = 0.5, v falls after the first large gradient: AMSGrad keeps the maximum.
    let grads = [
        [2.0, -3.0, 1.0],
        [0.125, 0.25, -0.125],
        [0.125, 0.25, -0.125],
    ];
    let mut finals = Vec::new();
    for amsgrad in [false, true] {
        let mut opt = Adam::new().alpha(0.1).beta2(0.5).amsgrad(amsgrad);
        let hp = AdamHp::of(&opt);
        let link = tiny(DType::F64)?;
        let mut a = A0.to_vec();
        let mut sa = AdamRef::new(3);
        for (t, ga) in (1..).zip(&grads) {
            backprop(&link, ga, &[0.0, 0.0])?;
            opt.update(&link)?;
            sa.step(&mut a, ga, t, hp);
            assert_close(&values(&link.a), &a, 1e-12);
        }
        finals.push(a);
    }
    assert!(
        finals[0]
            .iter()
            .zip(&finals[1])
            .all(|(x, y)| (x - y).abs() > 1e-3),
        "AMSGrad should change these steps: {finals:?}"
    );
    Ok(())
}

#[test]
fn adam_eps_that_rounds_to_zero_is_an_error() -> Result<()> {
    let link = tiny(DType::F16)?;
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;
    let before = values(&link.a);
    let err = Adam::new().update(&link).unwrap_err().to_string();
    assert!(
        err.contains("eps") && err.contains("/a") && err.contains("float16"),
        "{err}"
    );
    assert_eq!(values(&link.a), before);
    // A representable eps works in float16.
    let mut opt = Adam::new().eps(1e-4);
    opt.update(&link)?;
    assert_ne!(values(&link.a), before);
    Ok(())
}

#[test]
fn adam_rejects_betas_outside_the_unit_interval() -> Result<()> {
    let link = tiny(DType::F64)?;
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;
    for bad in [Adam::new().beta1(1.0), Adam::new().beta2(-0.5)] {
        let mut bad = bad;
        let err = bad.update(&link).unwrap_err().to_string();
        assert!(err.contains("must be in [0, 1)"), "{err}");
        assert_eq!(bad.t(), 0);
    }
    assert_eq!(values(&link.a), A0.to_vec());
    Ok(())
}

#[test]
fn learning_rate_can_change_between_steps() -> Result<()> {
    let link = tiny(DType::F64)?;
    let mut opt = SGD::new().lr(0.5);
    backprop(&link, &[1.0, 1.0, 1.0], &[0.0, 0.0])?;
    opt.update(&link)?;
    opt.lr = 0.25;
    opt.update(&link)?;
    assert_eq!(values(&link.a), vec![-0.25, -1.75, 1.25]);
    Ok(())
}

// ----- hooks -----

#[test]
fn weight_decay_adds_rate_times_w_to_the_gradient_the_rule_uses() -> Result<()> {
    for dtype in [DType::F32, DType::F64] {
        let link = tiny(dtype)?;
        let mut opt = SGD::new().lr(0.1).with_hook(WeightDecay::new(0.5));
        let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
        for (ga, gb) in &GRADS {
            backprop(&link, ga, gb)?;
            opt.update(&link)?;
            for (w, g) in [(&mut a, &ga[..]), (&mut b, &gb[..])] {
                let decayed: Vec<f64> = g.iter().zip(w.iter()).map(|(g, w)| g + 0.5 * w).collect();
                sgd_ref(w, &decayed, 0.1);
            }
            assert_close(&values(&link.a), &a, tolerance(dtype));
            assert_close(&values(&link.b), &b, tolerance(dtype));
            // The stored gradient is what backward computed.
            assert_close(&link.a.grad().expect("grad").to_f64_vec()?, ga, 0.0);
        }
    }
    Ok(())
}

#[test]
fn gradient_clipping_scales_by_threshold_over_global_norm_only_above() -> Result<()> {
    // ∇a = [3, 0, 0], ∇b = [0, 4]: the global norm is 5.
    let (ga, gb) = ([3.0, 0.0, 0.0], [0.0, 4.0]);
    for (threshold, scale) in [(2.5, 0.5), (5.0, 1.0), (10.0, 1.0)] {
        for dtype in [DType::F32, DType::F64] {
            let link = tiny(dtype)?;
            let mut opt = SGD::new()
                .lr(1.0)
                .with_hook(GradientClipping::new(threshold));
            backprop(&link, &ga, &gb)?;
            opt.update(&link)?;
            let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
            sgd_ref(&mut a, &ga.map(|g| g * scale), 1.0);
            sgd_ref(&mut b, &gb.map(|g| g * scale), 1.0);
            assert_close(&values(&link.a), &a, tolerance(dtype));
            assert_close(&values(&link.b), &b, tolerance(dtype));
            assert_close(&link.b.grad().expect("grad").to_f64_vec()?, &gb, 0.0);
        }
    }
    Ok(())
}

#[test]
fn gradient_clipping_norm_covers_only_parameters_with_gradients() -> Result<()> {
    let link = tiny(DType::F64)?;
    backprop(&link, &[3.0, 4.0, 0.0], &[100.0, 100.0])?;
    link.b.cleargrad();
    SGD::new()
        .lr(1.0)
        .with_hook(GradientClipping::new(1.0))
        .update(&link)?;
    assert_close(&values(&link.a), &[0.5 - 0.6, -1.0 - 0.8, 2.0], 1e-15);
    assert_eq!(values(&link.b), B0.to_vec());
    Ok(())
}

#[test]
fn hooks_run_in_the_order_added() -> Result<()> {
    let (ga, gb) = ([1.0, 0.0, 0.0], [0.0, 0.0]);
    let decay =
        |w: &[f64], g: &[f64]| -> Vec<f64> { g.iter().zip(w).map(|(g, w)| g + 0.5 * w).collect() };
    let clip = |gs: [Vec<f64>; 2]| -> [Vec<f64>; 2] {
        let norm = gs.iter().flatten().map(|g| g * g).sum::<f64>().sqrt();
        let scale = if norm > 1.0 { 1.0 / norm } else { 1.0 };
        gs.map(|g| g.iter().map(|x| x * scale).collect())
    };
    let decay_then_clip = clip([decay(&A0, &ga), decay(&B0, &gb)]);
    let [ca, cb] = clip([ga.to_vec(), gb.to_vec()]);
    let clip_then_decay = [decay(&A0, &ca), decay(&B0, &cb)];
    assert!((decay_then_clip[0][0] - clip_then_decay[0][0]).abs() > 0.1);

    for (hooks, expected) in [
        (
            (
                Box::new(WeightDecay::new(0.5)) as Box<dyn Hook>,
                Box::new(GradientClipping::new(1.0)) as Box<dyn Hook>,
            ),
            decay_then_clip,
        ),
        (
            (
                Box::new(GradientClipping::new(1.0)) as Box<dyn Hook>,
                Box::new(WeightDecay::new(0.5)) as Box<dyn Hook>,
            ),
            clip_then_decay,
        ),
    ] {
        let link = tiny(DType::F64)?;
        let mut opt = SGD::new().lr(1.0);
        opt.add_hook(hooks.0);
        opt.add_hook(hooks.1);
        backprop(&link, &ga, &gb)?;
        opt.update(&link)?;
        let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
        sgd_ref(&mut a, &expected[0], 1.0);
        sgd_ref(&mut b, &expected[1], 1.0);
        assert_close(&values(&link.a), &a, 1e-15);
        assert_close(&values(&link.b), &b, 1e-15);
    }
    Ok(())
}

#[test]
fn a_closure_is_a_hook_and_sees_paths_values_and_gradients() -> Result<()> {
    let link = tiny(DType::F64)?;
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;
    let mut opt = SGD::new()
        .lr(1.0)
        .with_hook(|params: &mut [ParamGrad]| -> Result<()> {
            let paths: Vec<&str> = params.iter().map(|p| p.path.as_str()).collect();
            assert_eq!(paths, ["/a", "/b"]);
            assert_eq!(params[0].value.to_f64_vec()?, A0.to_vec());
            assert_eq!(params[1].grad.to_f64_vec()?, GRADS[0].1.to_vec());
            for p in params {
                p.grad = p.grad.neg()?;
            }
            Ok(())
        });
    opt.update(&link)?;
    let mut a = A0.to_vec();
    sgd_ref(&mut a, &GRADS[0].0.map(|g| -g), 1.0);
    assert_close(&values(&link.a), &a, 1e-15);
    Ok(())
}

#[test]
fn a_hook_error_or_a_hook_changing_a_gradients_shape_changes_nothing() -> Result<()> {
    let link = tiny(DType::F64)?;
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;

    let mut opt = MomentumSGD::new().with_hook(GradientClipping::new(-1.0));
    let err = opt.update(&link).unwrap_err().to_string();
    assert!(
        err.contains("GradientClipping") && err.contains("-1"),
        "{err}"
    );

    let mut opt = SGD::new().with_hook(|params: &mut [ParamGrad]| -> Result<()> {
        params[1].grad = Array::zeros(&[7], DType::F64)?;
        Ok(())
    });
    let err = opt.update(&link).unwrap_err().to_string();
    assert!(err.contains("/b") && err.contains("[7]"), "{err}");
    assert_eq!(opt.t(), 0);
    assert_eq!(values(&link.a), A0.to_vec());
    assert_eq!(values(&link.b), B0.to_vec());
    Ok(())
}

// ----- what is updated, and the state -----

#[test]
fn parameters_without_gradients_are_skipped_and_get_state_when_they_first_have_one() -> Result<()> {
    let link = tiny(DType::F64)?;
    let mut opt = MomentumSGD::new().lr(0.1).momentum(0.5);
    let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
    let (mut va, mut vb) = (vec![0.0; 3], vec![0.0; 2]);

    // Step 1: only `a` has a gradient.
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;
    link.b.cleargrad();
    opt.update(&link)?;
    momentum_ref(&mut a, &mut va, &GRADS[0].0, 0.1, 0.5);
    assert_close(&values(&link.a), &a, 1e-15);
    assert_eq!(values(&link.b), B0.to_vec());

    // Step 2: both; `b`'s velocity starts at zero.
    backprop(&link, &GRADS[1].0, &GRADS[1].1)?;
    opt.update(&link)?;
    momentum_ref(&mut a, &mut va, &GRADS[1].0, 0.1, 0.5);
    momentum_ref(&mut b, &mut vb, &GRADS[1].1, 0.1, 0.5);
    assert_close(&values(&link.a), &a, 1e-15);
    assert_close(&values(&link.b), &b, 1e-15);
    assert_eq!(opt.t(), 2);
    Ok(())
}

#[test]
fn adam_corrects_a_late_parameter_with_the_optimizers_step_count() -> Result<()> {
    let link = tiny(DType::F64)?;
    let mut opt = Adam::new().alpha(0.05);
    let hp = AdamHp::of(&opt);
    let (mut a, mut b) = (A0.to_vec(), B0.to_vec());
    let (mut sa, mut sb) = (AdamRef::new(3), AdamRef::new(2));
    link.b.cleargrad();
    link.a
        .variable()?
        .set_grad_array(array(&GRADS[0].0, DType::F64, Device::Cpu)?)?;
    opt.update(&link)?;
    sa.step(&mut a, &GRADS[0].0, 1, hp);
    backprop(&link, &GRADS[1].0, &GRADS[1].1)?;
    opt.update(&link)?;
    sa.step(&mut a, &GRADS[1].0, 2, hp);
    sb.step(&mut b, &GRADS[1].1, 2, hp);
    assert_close(&values(&link.a), &a, 1e-12);
    assert_close(&values(&link.b), &b, 1e-12);
    Ok(())
}

#[test]
fn uninitialised_parameters_are_skipped() -> Result<()> {
    let link = Tiny {
        a: param(&A0, DType::F32, Device::Cpu)?,
        b: Parameter::new(Zero, DType::F32),
    };
    link.a
        .variable()?
        .set_grad_array(array(&GRADS[0].0, DType::F32, Device::Cpu)?)?;
    let mut opt = Adam::new();
    opt.update(&link)?;
    assert!(!link.b.is_initialized());
    assert_ne!(values(&link.a), A0.to_vec());
    // Initialised later, it is updated from then on.
    link.b.initialize(&[2])?;
    link.b
        .variable()?
        .set_grad_array(array(&[1.0, -1.0], DType::F32, Device::Cpu)?)?;
    opt.update(&link)?;
    assert_ne!(values(&link.b), vec![0.0, 0.0]);
    Ok(())
}

#[test]
fn t_counts_every_update_even_without_gradients() -> Result<()> {
    let link = tiny(DType::F64)?;
    let mut opts: Vec<Box<dyn Optimizer>> = vec![
        Box::new(SGD::new()),
        Box::new(MomentumSGD::new()),
        Box::new(Adam::new()),
    ];
    for opt in &mut opts {
        assert_eq!(opt.t(), 0);
        opt.update(&link)?;
        assert_eq!(opt.t(), 1);
        assert_eq!(values(&link.a), A0.to_vec());
    }
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;
    for opt in &mut opts {
        opt.update(&link)?;
        opt.update(&link)?;
        assert_eq!(opt.t(), 3);
    }
    Ok(())
}

#[test]
fn state_is_kept_by_path() -> Result<()> {
    // `/l1/a` and `/l2/a` have different shapes and separate state.
    let pair = Pair {
        l1: tiny(DType::F64)?,
        l2: Tiny {
            a: param(&[1.0], DType::F64, Device::Cpu)?,
            b: param(&[2.0], DType::F64, Device::Cpu)?,
        },
    };
    let mut opt = MomentumSGD::new().lr(0.5).momentum(0.5);
    let mut expected = [A0.to_vec(), vec![1.0]];
    let mut velocity = [vec![0.0; 3], vec![0.0]];
    for _ in 0..2 {
        backprop(&pair.l1, &GRADS[0].0, &GRADS[0].1)?;
        backprop(&pair.l2, &[1.0], &[1.0])?;
        opt.update(&pair)?;
        momentum_ref(&mut expected[0], &mut velocity[0], &GRADS[0].0, 0.5, 0.5);
        momentum_ref(&mut expected[1], &mut velocity[1], &[1.0], 0.5, 0.5);
    }
    assert_close(&values(&pair.l1.a), &expected[0], 1e-15);
    assert_close(&values(&pair.l2.a), &expected[1], 1e-15);
    Ok(())
}

#[test]
fn a_state_of_another_shape_is_an_error_naming_the_parameter() -> Result<()> {
    for mut opt in [
        Box::new(MomentumSGD::new()) as Box<dyn Optimizer>,
        Box::new(Adam::new()),
    ] {
        let first = tiny(DType::F64)?;
        backprop(&first, &GRADS[0].0, &GRADS[0].1)?;
        opt.update(&first)?;

        // Another link whose `/b` has three elements.
        let second = Tiny {
            a: param(&A0, DType::F64, Device::Cpu)?,
            b: param(&A0, DType::F64, Device::Cpu)?,
        };
        backprop(&second, &GRADS[0].0, &GRADS[0].0)?;
        let err = opt.update(&second).unwrap_err().to_string();
        assert!(
            err.contains("/b") && err.contains("[3]") && err.contains("[2]"),
            "{err}"
        );
        // Nothing was updated, not even `/a`, whose state fits.
        assert_eq!(values(&second.a), A0.to_vec());
        assert_eq!(opt.t(), 1);
    }
    Ok(())
}

#[test]
fn a_state_of_another_dtype_is_an_error() -> Result<()> {
    let mut opt = MomentumSGD::new();
    let first = tiny(DType::F64)?;
    backprop(&first, &GRADS[0].0, &GRADS[0].1)?;
    opt.update(&first)?;
    let second = tiny(DType::F32)?;
    backprop(&second, &GRADS[0].0, &GRADS[0].1)?;
    let err = opt.update(&second).unwrap_err().to_string();
    assert!(err.contains("/a") && err.contains("float32"), "{err}");
    Ok(())
}

#[test]
fn duplicate_paths_are_an_error() -> Result<()> {
    struct Twice(Parameter);
    impl Link for Twice {
        fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
            f(format!("{prefix}/w"), &self.0);
            f(format!("{prefix}/w"), &self.0);
        }
    }
    let link = Twice(param(&A0, DType::F64, Device::Cpu)?);
    let err = SGD::new().update(&link).unwrap_err().to_string();
    assert!(err.contains("/w"), "{err}");
    Ok(())
}

// ----- convergence -----

/// Steps of `opt` on `Σ (w - target)²` from zeros until every element is within 1e-3 of
/// `target`, or `None` after `max_steps`.
fn steps_to_converge(
    opt: &mut dyn Optimizer,
    dtype: DType,
    max_steps: usize,
) -> Result<Option<usize>> {
    let target = [1.0, -2.0, 0.5, 3.0];
    let w = Parameter::from_array(Array::zeros(&[4], dtype)?);
    let link = Tiny {
        a: w,
        b: Parameter::new(Zero, dtype),
    };
    let t = Variable::constant(array(&target, dtype, Device::Cpu)?);
    for step in 1..=max_steps {
        link.cleargrads();
        let d = (&link.a.variable()? - &t)?;
        F::sum(&(&d * &d)?)?.backward()?;
        opt.update(&link)?;
        let w = values(&link.a);
        if w.iter().zip(&target).all(|(w, t)| (w - t).abs() < 1e-3) {
            return Ok(Some(step));
        }
    }
    Ok(None)
}

#[test]
fn sgd_and_adam_minimise_a_quadratic() -> Result<()> {
    for dtype in [DType::F32, DType::F64] {
        let sgd = steps_to_converge(&mut SGD::new().lr(0.1), dtype, 200)?;
        assert!(sgd.is_some(), "SGD did not converge in {dtype}");
        let momentum = steps_to_converge(&mut MomentumSGD::new().lr(0.05), dtype, 500)?;
        assert!(
            momentum.is_some(),
            "MomentumSGD did not converge in {dtype}"
        );
        let adam = steps_to_converge(&mut Adam::new().alpha(0.1), dtype, 2000)?;
        assert!(adam.is_some(), "Adam did not converge in {dtype}");
    }
    Ok(())
}

// ----- CUDA -----

#[test]
fn on_cuda_the_update_matches_the_host() -> Result<()> {
    let Some(gpu) = kusari::testing::cuda_or_skip("on_cuda_the_update_matches_the_host")? else {
        return Ok(());
    };
    let make = || -> Vec<Box<dyn Optimizer>> {
        vec![
            Box::new(SGD::new().lr(0.1).with_hook(WeightDecay::new(0.1))),
            Box::new(MomentumSGD::new().with_hook(GradientClipping::new(1.0))),
            Box::new(
                Adam::new()
                    .alpha(0.05)
                    .weight_decay_rate(0.01)
                    .amsgrad(true),
            ),
        ]
    };
    for dtype in [DType::F32, DType::F64] {
        for (mut on_host, mut on_gpu) in make().into_iter().zip(make()) {
            let host = tiny(dtype)?;
            let device = tiny_on(dtype, gpu)?;
            for (ga, gb) in &GRADS {
                backprop(&host, ga, gb)?;
                backprop(&device, ga, gb)?;
                on_host.update(&host)?;
                on_gpu.update(&device)?;
            }
            assert_eq!(device.a.array()?.device(), gpu);
            assert_close(&values(&device.a), &values(&host.a), tolerance(dtype));
            assert_close(&values(&device.b), &values(&host.b), tolerance(dtype));
        }
    }
    // State follows a parameter moved between steps.
    let link = tiny(DType::F32)?;
    let mut opt = Adam::new();
    backprop(&link, &GRADS[0].0, &GRADS[0].1)?;
    opt.update(&link)?;
    link.to_device(gpu)?;
    backprop(&link, &GRADS[1].0, &GRADS[1].1)?;
    opt.update(&link)?;
    assert_eq!(link.a.array()?.device(), gpu);
    Ok(())
}

#[test]
fn on_cuda_sgd_and_momentum_sgd_update_the_parameter_in_place() -> Result<()> {
    let Some(gpu) = kusari::testing::cuda_or_skip("on_cuda_sgd_updates_in_place")? else {
        return Ok(());
    };
    let (ga, gb) = &GRADS[0];
    for dtype in [DType::F32, DType::F64, DType::F16] {
        let make = || -> Vec<Box<dyn Optimizer>> {
            vec![
                Box::new(SGD::new().lr(0.5)),
                Box::new(MomentumSGD::new().lr(0.5).momentum(0.5)),
            ]
        };
        for (mut on_host, mut on_gpu) in make().into_iter().zip(make()) {
            let host = tiny(dtype)?;
            let device = tiny_on(dtype, gpu)?;
            let before = device.a.array()?;
            for _ in 0..2 {
                backprop(&host, ga, gb)?;
                backprop(&device, ga, gb)?;
                on_host.update(&host)?;
                on_gpu.update(&device)?;
            }
            let after = device.a.array()?;
            // float32 and float64 parameters are written in place, as Chainer's kernels do:
            // an array taken before the step sees the new values. The half types are not.
            let in_place = dtype != DType::F16;
            assert_eq!(after.shares_buffer(&before), in_place, "{dtype}");
            let seen = before.to_f64_vec()?;
            let expected = values(&host.a);
            let tol = match dtype {
                DType::F16 => 1e-2,
                _ => tolerance(dtype),
            };
            if in_place {
                assert_close(&seen, &expected, tol);
            } else {
                assert_close(&seen, &A0, 0.0);
            }
            assert_close(&values(&device.a), &expected, tol);
            assert_close(&values(&device.b), &values(&host.b), tol);
        }
    }
    Ok(())
}
