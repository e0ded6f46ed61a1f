//! Links and parameters: what `#[derive(Link)]` finds, `Linear`'s lazy initialisation, forward
//! and gradients, gradient clearing, devices, and the initializers' statistics.

use kusari::gradient_check::{CheckOptions, check_backward};
use kusari::link::initializers::{
    Constant, GlorotUniform, HeNormal, Initializer, LeCunNormal, Normal, One, Uniform, Zero, fans,
};
use kusari::link::{EltwiseParamProduct, LayerNormalization, Linear, linear_function};
use kusari::prelude::*;
use kusari_tests::{arr, assert_close, uniform};

/// A Chainer `Chain`: two Linear layers (the first sized from its input), an elementwise
/// product, a list of layers, and a field with no parameters.
#[derive(Link)]
struct Chain {
    l1: Linear,
    l2: Linear,
    scale: EltwiseParamProduct,
    blocks: Vec<Linear>,
    #[kusari(skip)]
    slope: f64,
}

impl Chain {
    fn new() -> Result<Self> {
        Ok(Chain {
            l1: Linear::new(None, 4, false, DType::F64)?,
            l2: Linear::new(Some(4), 3, false, DType::F64)?,
            scale: EltwiseParamProduct::new(&[3], DType::F64)?,
            blocks: vec![
                Linear::new(Some(3), 3, false, DType::F64)?,
                Linear::new(Some(3), 2, true, DType::F64)?,
            ],
            slope: 0.5,
        })
    }

    fn forward(&self, x: &Variable) -> Result<Variable> {
        let h = F::tanh(&self.l1.forward(x)?)?;
        let mut h = self
            .scale
            .forward(&self.l2.forward(&h)?.mul_scalar(self.slope)?)?;
        for block in &self.blocks {
            h = block.forward(&h)?;
        }
        Ok(h)
    }
}

fn paths(link: &impl Link) -> Vec<String> {
    link.named_params().into_iter().map(|(p, _)| p).collect()
}

fn input(shape: &[usize], seed: u64) -> Variable {
    Variable::new(uniform(shape, seed))
}

#[test]
fn linear_is_initialised_from_its_first_input() -> Result<()> {
    let l = Linear::new(None, 4, false, DType::F32)?;
    assert!(!l.W.is_initialized());
    assert_eq!((l.in_size(), l.W.shape()), (None, None));
    assert_eq!(l.count_params(), 4, "only b before the first forward");

    let x = Variable::new(Array::ones(&[2, 3], DType::F32)?);
    let y = l.forward(&x)?;
    assert_eq!(y.shape(), [2, 4]);
    assert_eq!(l.W.shape(), Some(vec![4, 3]));
    assert_eq!((l.in_size(), l.out_size()), (Some(3), 4));
    assert_eq!(l.W.dtype(), DType::F32);
    assert_eq!(l.count_params(), 4 * 3 + 4);

    // A second input of the same size reuses W; another size is an error that names both.
    let w = l.W.array()?.to_vec::<f32>()?;
    l.forward(&Variable::new(Array::ones(&[5, 3], DType::F32)?))?;
    let err = l
        .forward(&Variable::new(Array::ones(&[2, 5], DType::F32)?))
        .unwrap_err();
    assert!(matches!(err, Error::Shape { op: "Linear", .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("5 features") && msg.contains("initialised for 3"),
        "{msg}"
    );
    assert_eq!(l.W.array()?.to_vec::<f32>()?, w, "W is left as it was");
    Ok(())
}

#[test]
fn linear_flattens_its_input_like_chainer() -> Result<()> {
    let l = Linear::new(None, 2, true, DType::F64)?;
    let y = l.forward(&input(&[3, 2, 5], 1))?;
    assert_eq!((y.shape(), l.in_size()), (&[3, 2][..], Some(10)));
    assert!(l.b.is_none());
    assert_eq!(paths(&l), ["/W"]);
    let scalar = Variable::new(arr(&[1.0], &[]));
    assert!(matches!(
        l.forward(&scalar),
        Err(Error::Shape { op: "Linear", .. })
    ));
    Ok(())
}

#[test]
fn linear_forward_is_x_w_transposed_plus_b() -> Result<()> {
    let (n, n_in, n_out) = (5, 3, 4);
    let l = Linear::new(Some(n_in), n_out, false, DType::F64)?;
    let b = l.b.as_ref().expect("a bias");
    b.set_array(uniform(&[n_out], 2))?;
    let x = input(&[n, n_in], 3);
    let y = l.forward(&x)?;

    let (xs, w, bs) = (
        x.array().to_f64_vec()?,
        l.W.array()?.to_f64_vec()?,
        b.array()?.to_f64_vec()?,
    );
    let mut expected = vec![0.0; n * n_out];
    for i in 0..n {
        for o in 0..n_out {
            expected[i * n_out + o] = bs[o]
                + (0..n_in)
                    .map(|k| xs[i * n_in + k] * w[o * n_in + k])
                    .sum::<f64>();
        }
    }
    assert_close(y.array(), &arr(&expected, &[n, n_out]), 1e-12, 1e-12);
    Ok(())
}

#[test]
fn linear_function_gradients_pass_check_backward() -> Result<()> {
    let l = Linear::new(Some(3), 4, false, DType::F64)?;
    let b = l.b.as_ref().expect("a bias");
    let x = uniform(&[5, 3], 4);
    let gy = uniform(&[5, 4], 5);
    let options = CheckOptions::default().params([l.W.variable()?, b.variable()?]);
    check_backward(
        |v: &[Variable]| linear_function(&v[0], &v[1], &v[2]),
        std::slice::from_ref(&x),
        Some(std::slice::from_ref(&gy)),
        &options,
    )?;

    // The link's forward sends the same gradients to its parameters.
    let y = l.forward(&Variable::new(x.clone()))?;
    y.set_grad_array(gy.clone())?;
    y.backward()?;
    let grad = |p: &Parameter| p.grad().expect("a gradient");
    assert_close(&grad(&l.W), &gy.t().matmul(&x)?, 1e-12, 1e-12);
    let ones = Array::ones(&[1, 5], DType::F64)?;
    assert_close(&grad(b), &ones.matmul(&gy)?.reshape(&[4])?, 1e-12, 1e-12);
    Ok(())
}

#[test]
fn derive_finds_parameters_through_nested_links() -> Result<()> {
    let chain = Chain::new()?;
    let expected = [
        "/l1/W",
        "/l1/b",
        "/l2/W",
        "/l2/b",
        "/scale/W",
        "/blocks/0/W",
        "/blocks/0/b",
        "/blocks/1/W",
    ];
    // The lazily initialised /l1/W is listed before its first forward, with no elements.
    assert_eq!(paths(&chain), expected);
    assert_eq!(chain.count_params(), 4 + (12 + 3) + 3 + (9 + 3) + 6);

    chain.forward(&input(&[2, 6], 6))?;
    assert_eq!(paths(&chain), expected);
    assert_eq!(chain.count_params(), (24 + 4) + (12 + 3) + 3 + (9 + 3) + 6);
    assert_eq!(chain.params().len(), expected.len());
    Ok(())
}

#[test]
fn cleargrads_clears_every_gradient_after_a_backward() -> Result<()> {
    let chain = Chain::new()?;
    let loss = F::sum(&chain.forward(&input(&[3, 5], 7))?)?;
    loss.backward()?;
    for (path, p) in chain.named_params() {
        assert!(p.grad().is_some(), "{path} has no gradient after backward");
    }
    chain.cleargrads();
    for (path, p) in chain.named_params() {
        assert!(p.grad().is_none(), "{path} still has a gradient");
    }
    Ok(())
}

#[test]
fn to_device_moves_every_parameter() -> Result<()> {
    let chain = Chain::new()?;
    chain.to_device(Device::Cpu)?;
    chain.forward(&input(&[2, 6], 8))?;
    assert!(chain.params().iter().all(|p| p.device() == Device::Cpu));

    if kusari::cuda::is_available() {
        println!("skipped: a GPU is present, so to_device(Cuda(0)) is not an error here");
        return Ok(());
    }
    let lazy = Linear::new(None, 2, false, DType::F32)?;
    let err = lazy.to_device(Device::Cuda(0)).unwrap_err();
    assert!(matches!(err, Error::CudaUnavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("Link::to_device(cuda:0)"), "{err}");
    // Nothing moved, not even the uninitialised W's future device.
    assert_eq!(
        (lazy.W.device(), lazy.b.as_ref().map(Parameter::device)),
        (Device::Cpu, Some(Device::Cpu))
    );
    Ok(())
}

#[test]
fn eltwise_param_product_multiplies_by_w() -> Result<()> {
    let l = EltwiseParamProduct::with_initializer(&[2, 3], Constant(3.0), DType::F64)?;
    let x = input(&[2, 3], 9);
    let y = l.forward(&x)?;
    assert_close(y.array(), &(x.array() * 3.0)?, 0.0, 1e-15);
    F::sum(&y)?.backward()?;
    assert_close(&l.W.grad().expect("a gradient"), x.array(), 0.0, 0.0);

    // The tutorial's default: W ~ N(0, 1).
    let l = EltwiseParamProduct::new(&[300, 300], DType::F64)?;
    let (mean, std) = moments(&l.W.array()?)?;
    assert!(
        mean.abs() < 0.02 && (std - 1.0).abs() < 0.02,
        "mean {mean}, std {std}"
    );
    Ok(())
}

/// Sample mean and standard deviation.
fn moments(a: &Array) -> Result<(f64, f64)> {
    let v = a.to_f64_vec()?;
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Ok((mean, var.sqrt()))
}

fn sample(init: &impl Initializer, shape: &[usize], seed: u64) -> Result<Array> {
    init.generate(shape, DType::F64, &mut Rng::seed(seed))
}

/// The sample std is within `rel` of `std`, and the mean within four standard errors of 0.
#[track_caller]
fn assert_normal(a: &Array, std: f64, rel: f64) {
    let (mean, s) = moments(a).expect("readable");
    let n = a.size() as f64;
    assert!(
        (s / std - 1.0).abs() < rel,
        "sample std {s}, expected {std}"
    );
    assert!(mean.abs() < 4.0 * std / n.sqrt(), "sample mean {mean}");
}

#[test]
fn fans_follow_chainer() -> Result<()> {
    assert_eq!(fans("x", &[4, 3])?, (3, 4));
    // Convolution weights (out, in, kh, kw): the receptive field multiplies both fans.
    assert_eq!(fans("x", &[8, 3, 5, 5])?, (75, 200));
    assert_eq!(fans("x", &[8, 3, 2, 2, 2])?, (24, 64));
    let err = HeNormal::default().initial(&[4], DType::F32).unwrap_err();
    assert!(err.to_string().contains("HeNormal"), "{err}");
    Ok(())
}

#[test]
fn he_and_lecun_normal_have_the_formula_std() -> Result<()> {
    let shape = [400, 500];
    assert_normal(
        &sample(&HeNormal::default(), &shape, 1)?,
        (2.0f64 / 500.0).sqrt(),
        0.01,
    );
    assert_normal(
        &sample(&LeCunNormal::default(), &shape, 2)?,
        (1.0f64 / 500.0).sqrt(),
        0.01,
    );
    let scaled = HeNormal { scale: 3.0 };
    assert_normal(
        &sample(&scaled, &shape, 3)?,
        3.0 * (2.0f64 / 500.0).sqrt(),
        0.01,
    );
    // A conv-like weight: fan_in = 32 * 3 * 3.
    let conv = [128, 32, 3, 3];
    assert_normal(
        &sample(&HeNormal::default(), &conv, 4)?,
        (2.0f64 / 288.0).sqrt(),
        0.02,
    );
    assert_normal(
        &sample(&LeCunNormal::default(), &conv, 5)?,
        (1.0f64 / 288.0).sqrt(),
        0.02,
    );
    Ok(())
}

#[test]
fn glorot_uniform_fills_its_limits() -> Result<()> {
    for (shape, fan_sum) in [(&[400usize, 500][..], 900.0), (&[64, 32, 3, 3][..], 864.0)] {
        let limit = (6.0f64 / fan_sum).sqrt();
        let v = sample(&GlorotUniform::default(), shape, 6)?.to_f64_vec()?;
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert!(lo >= -limit && hi <= limit, "[{lo}, {hi}] outside ±{limit}");
        assert!(
            lo < -0.99 * limit && hi > 0.99 * limit,
            "[{lo}, {hi}] does not fill ±{limit}"
        );
        let a = Array::from_vec(v, shape)?;
        assert_normal(&a, limit / 3f64.sqrt(), 0.02);
    }
    Ok(())
}

#[test]
fn normal_and_uniform_default_to_chainers_scale() -> Result<()> {
    assert_normal(&sample(&Normal::default(), &[300, 300], 7)?, 0.05, 0.01);
    let u = sample(&Uniform::default(), &[300, 300], 8)?;
    assert!(u.to_f64_vec()?.iter().all(|x| x.abs() <= 0.05));
    assert_normal(&u, 0.05 / 3f64.sqrt(), 0.01);
    Ok(())
}

#[test]
fn constant_zero_and_one_are_exact() -> Result<()> {
    for dtype in [DType::F32, DType::F64] {
        let c = Constant(0.25).initial(&[2, 3], dtype)?;
        assert_eq!((c.dtype(), c.to_f64_vec()?), (dtype, vec![0.25; 6]));
        assert_eq!(Zero.initial(&[4], dtype)?.to_f64_vec()?, vec![0.0; 4]);
        assert_eq!(One.initial(&[2, 2], dtype)?.to_f64_vec()?, vec![1.0; 4]);
    }
    Ok(())
}

/// `LayerNormalization` takes its size from its first input (gamma ones, beta zeros, paths
/// `/gamma` and `/beta`), normalizes each sample by its own mean and biased variance (checked
/// against values by hand), fixes its size, flattens an input of more axes and restores its
/// shape, and gives gamma and beta their gradients.
#[test]
fn layer_normalization_link_is_sized_by_its_first_input() -> Result<()> {
    let ln = LayerNormalization::new(None, 1e-6, DType::F64)?;
    assert_eq!((ln.size(), ln.count_params()), (None, 0));
    assert_eq!(paths(&ln), vec!["/gamma", "/beta"]);
    // Rows (1, 2, 3) and (2, 4, 9): means 2 and 5, variances 2/3 and 26/3.
    let x = Variable::new(arr(&[1.0, 2.0, 3.0, 2.0, 4.0, 9.0], &[2, 3]));
    let y = ln.forward(&x)?;
    assert_eq!(ln.size(), Some(3));
    assert_eq!(ln.gamma.array()?.to_vec::<f64>()?, vec![1.0; 3]);
    assert_eq!(ln.beta.array()?.to_vec::<f64>()?, vec![0.0; 3]);
    let (s0, s1) = ((2.0f64 / 3.0 + 1e-6).sqrt(), (26.0f64 / 3.0 + 1e-6).sqrt());
    let want = [-1.0 / s0, 0.0, 1.0 / s0, -3.0 / s1, -1.0 / s1, 4.0 / s1];
    assert_close(y.array(), &arr(&want, &[2, 3]), 1e-13, 1e-13);

    // d Σy / d beta_j = N; d Σy / d gamma_j = Σ_i normalized_ij.
    y.sum()?.backward()?;
    let gb = ln.beta.grad().expect("beta's gradient");
    assert_close(&gb, &arr(&[2.0, 2.0, 2.0], &[3]), 0.0, 0.0);
    let gg = ln.gamma.grad().expect("gamma's gradient");
    let gg_want = [want[0] + want[3], want[1] + want[4], want[2] + want[5]];
    assert_close(&gg, &arr(&gg_want, &[3]), 1e-13, 1e-13);

    // The size is fixed now.
    let err = ln
        .forward(&Variable::new(arr(&[1.0; 8], &[2, 4])))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Shape {
                op: "LayerNormalization",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("[2, 4]"), "{err}");

    // (2, 3, 1) has 3 units per sample: flattened, normalized, and given back its shape.
    let y3 = ln.forward(&Variable::new(arr(
        &[1.0, 2.0, 3.0, 2.0, 4.0, 9.0],
        &[2, 3, 1],
    )))?;
    assert_eq!(y3.shape(), &[2, 3, 1]);
    assert_close(y3.array(), &arr(&want, &[2, 3, 1]), 1e-13, 1e-13);

    // A size given up front; a 1-d input and a negative eps are errors.
    let sized = LayerNormalization::new(Some(5), 1e-6, DType::F32)?;
    assert_eq!(sized.gamma.shape(), Some(vec![5]));
    let err = sized
        .forward(&Variable::new(Array::ones(&[5], DType::F32)?))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Shape {
                op: "LayerNormalization",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(LayerNormalization::new(None, -1.0, DType::F32).is_err());
    Ok(())
}

/// `EmbedID`: `W` is `(in_size, out_size)` from `N(0, 1)` (Chainer's `Normal(1.0)`), its path is
/// `/W`, and forward looks rows up by id, ignored ids giving zeros and no gradient.
#[test]
fn embed_id_looks_up_rows_of_a_unit_normal_table() -> Result<()> {
    use kusari::link::EmbedID;
    kusari::random::seed(3);
    let big = EmbedID::new(100, 50, None, DType::F64)?;
    let w = big.W.variable()?.array().to_f64_vec()?;
    let mean = w.iter().sum::<f64>() / w.len() as f64;
    let var = w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / w.len() as f64;
    assert!(
        mean.abs() < 0.1 && (var.sqrt() - 1.0).abs() < 0.1,
        "{mean} {var}"
    );

    let embed = EmbedID::new(4, 2, Some(-1), DType::F32)?;
    assert_eq!(paths(&embed), ["/W"]);
    assert_eq!(embed.W.shape(), Some(vec![4, 2]));
    let table = embed.W.variable()?.array().to_vec::<f32>()?;
    let ids = Array::from_vec(vec![1i64, -1, 1, 3], &[2, 2])?;
    let y = embed.forward(&ids)?;
    assert_eq!(y.shape(), &[2, 2, 2]);
    let row = |i: usize| table[2 * i..2 * i + 2].to_vec();
    let want: Vec<f32> = [row(1), vec![0.0, 0.0], row(1), row(3)].concat();
    assert_eq!(y.array().to_vec::<f32>()?, want);
    F::sum(&y)?.backward()?;
    let g = embed.W.variable()?.grad().expect("W has a gradient");
    assert_eq!(
        g.array().to_vec::<f32>()?,
        vec![0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 1.0, 1.0]
    );
    assert!(embed.forward(&Array::from_vec(vec![4i32], &[1])?).is_err());
    Ok(())
}
