//! The neural-network layer's functions (convolution, deconvolution, pooling, batch
//! normalization) through `op_tests!` — on every device present, float32 and float64,
//! contiguous and strided inputs, backward and double backward by finite differences — against
//! naive float64 loops written here, plus hand-derived small cases and the errors of shapes
//! that cannot work.

use kusari::functions::{ConvOptions, PoolOptions};
use kusari::prelude::*;
use kusari::testing::OpTest;
use ndarray::{ArrayD, IxDyn};

/// Inputs of `shapes`, uniform in [-1, 1).
fn uniforms(shapes: &'static [&'static [usize]]) -> impl Fn(&mut Rng, DType) -> Vec<Array> {
    move |rng, dtype| {
        shapes
            .iter()
            .map(|s| Array::uniform(s, -1.0, 1.0, dtype, rng).unwrap())
            .collect()
    }
}

/// The geometry of a reference loop: per spatial axis stride, pad, dilate.
#[derive(Clone, Copy)]
struct Geo<'a> {
    stride: &'a [usize],
    pad: &'a [usize],
    dilate: &'a [usize],
}

/// Every multi-index of `shape`.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    ndarray::indices(IxDyn(shape))
        .into_iter()
        .map(|i| ndarray::Dimension::slice(&i).to_vec())
        .collect()
}

/// Input position of kernel element `k` of the window at output `o`, if inside `size`.
fn source(o: &[usize], k: &[usize], g: Geo<'_>, size: &[usize]) -> Option<Vec<usize>> {
    (0..o.len())
        .map(|a| {
            let p = (o[a] * g.stride[a] + k[a] * g.dilate[a]) as isize - g.pad[a] as isize;
            (p >= 0 && (p as usize) < size[a]).then_some(p as usize)
        })
        .collect()
}

/// `(N, C) + spatial` as an index.
fn at(n: usize, c: usize, s: &[usize]) -> IxDyn {
    let mut i = vec![n, c];
    i.extend(s);
    IxDyn(&i)
}

/// Convolution's output size on one axis, Chainer's `get_conv_outsize`.
fn outsize(size: usize, k: usize, s: usize, p: usize, d: usize, cover_all: bool) -> usize {
    let dk = d * (k - 1) + 1;
    let extra = if cover_all { s - 1 } else { 0 };
    (size + 2 * p - dk + extra) / s + 1
}

/// Direct convolution: `y[n, o, q] = b[o] + Σ_{c in o's group, k} x[n, c, q s - p + k d] W[o, c, k]`.
fn conv_ref(
    x: &ArrayD<f64>,
    w: &ArrayD<f64>,
    b: Option<&ArrayD<f64>>,
    g: Geo<'_>,
    groups: usize,
    cover_all: bool,
) -> ArrayD<f64> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let (oc, cg) = (w.shape()[0], w.shape()[1]);
    let size = &x.shape()[2..];
    let ks = &w.shape()[2..];
    let out: Vec<usize> = (0..size.len())
        .map(|a| {
            outsize(
                size[a],
                ks[a],
                g.stride[a],
                g.pad[a],
                g.dilate[a],
                cover_all,
            )
        })
        .collect();
    let mut shape = vec![n, oc];
    shape.extend(&out);
    let mut y = ArrayD::zeros(IxDyn(&shape));
    for i in 0..n {
        for o in 0..oc {
            let group = o / (oc / groups);
            for q in indices(&out) {
                let mut acc = b.map_or(0.0, |b| b[[o]]);
                for ci in 0..cg {
                    for k in indices(ks) {
                        if let Some(p) = source(&q, &k, g, size) {
                            acc += x[at(i, group * cg + ci, &p)] * w[at(o, ci, &k)];
                        }
                    }
                }
                y[at(i, o, &q)] = acc;
            }
        }
    }
    let _ = c;
    y
}

/// Direct transposed convolution: every `x[n, c, q] W[c, o, k]` added to
/// `y[n, o', q s - p + k d]`, `o'` the output channel `o` of `c`'s group.
fn deconv_ref(
    x: &ArrayD<f64>,
    w: &ArrayD<f64>,
    b: Option<&ArrayD<f64>>,
    g: Geo<'_>,
    groups: usize,
    out: &[usize],
) -> ArrayD<f64> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let ocg = w.shape()[1];
    let ks = &w.shape()[2..];
    let mut shape = vec![n, ocg * groups];
    shape.extend(out);
    let mut y = ArrayD::zeros(IxDyn(&shape));
    for i in 0..n {
        for ci in 0..c {
            let group = ci / (c / groups);
            for q in indices(&x.shape()[2..]) {
                for o in 0..ocg {
                    for k in indices(ks) {
                        if let Some(p) = source(&q, &k, g, out) {
                            y[at(i, group * ocg + o, &p)] += x[at(i, ci, &q)] * w[at(ci, o, &k)];
                        }
                    }
                }
            }
        }
    }
    if let Some(b) = b {
        for (idx, v) in y.indexed_iter_mut() {
            *v += b[[idx[1]]];
        }
    }
    y
}

const G21: Geo<'static> = Geo {
    stride: &[2, 1],
    pad: &[1, 0],
    dilate: &[1, 2],
};

// Groups, a stride, padding and a dilation that differ per axis, and a bias.
kusari::op_tests!(convolution_2d => OpTest::new(
    "convolution_2d",
    uniforms(&[&[2, 4, 5, 6], &[6, 2, 3, 2], &[6]]),
)
.forward(|v| {
    let o = ConvOptions::default().stride([2, 1]).pad([1, 0]).dilate([1, 2]).groups(2);
    F::convolution_2d(&v[0], &v[1], Some(&v[2]), &o)
})
.expected(|x| vec![conv_ref(&x[0], &x[1], Some(&x[2]), G21, 2, false)]));

const G1: Geo<'static> = Geo {
    stride: &[2],
    pad: &[1],
    dilate: &[1],
};

// cover_all adds the window that reaches past the padded input: (7 + 2 - 3 + 1) / 2 + 1 = 4.
kusari::op_tests!(convolution_1d_cover_all => OpTest::new(
    "convolution_nd (1-d, cover_all)",
    uniforms(&[&[2, 3, 7], &[4, 3, 3]]),
)
.forward(|v| {
    let o = ConvOptions::default().stride(2).pad(1).cover_all(true);
    let y = F::convolution_nd(&v[0], &v[1], None, &o)?;
    assert_eq!(y.shape(), &[2, 4, 4]);
    Ok(y)
})
.expected(|x| vec![conv_ref(&x[0], &x[1], None, G1, 1, true)]));

const G3: Geo<'static> = Geo {
    stride: &[1, 2, 1],
    pad: &[1, 0, 1],
    dilate: &[1, 1, 1],
};

kusari::op_tests!(convolution_3d => OpTest::new(
    "convolution_nd (3-d)",
    uniforms(&[&[1, 2, 3, 4, 3], &[2, 2, 2, 2, 2], &[2]]),
)
.forward(|v| {
    let o = ConvOptions::default().stride([1, 2, 1]).pad([1, 0, 1]);
    F::convolution_nd(&v[0], &v[1], Some(&v[2]), &o)
})
.expected(|x| vec![conv_ref(&x[0], &x[1], Some(&x[2]), G3, 1, false)]));

const G22: Geo<'static> = Geo {
    stride: &[2, 2],
    pad: &[1, 1],
    dilate: &[1, 1],
};

// Output 2 (3 - 1) + 3 - 2 = 5 per axis, with a bias.
kusari::op_tests!(deconvolution_2d => OpTest::new(
    "deconvolution_2d",
    uniforms(&[&[2, 4, 3, 3], &[4, 3, 3, 3], &[3]]),
)
.forward(|v| {
    let o = ConvOptions::default().stride(2).pad(1);
    F::deconvolution_2d(&v[0], &v[1], Some(&v[2]), &o)
})
.expected(|x| vec![deconv_ref(&x[0], &x[1], Some(&x[2]), G22, 1, &[5, 5])]));

// Two groups and a given outsize one larger than the smallest (6 convolves back to 3 too).
kusari::op_tests!(deconvolution_2d_groups_outsize => OpTest::new(
    "deconvolution_2d (groups, outsize)",
    uniforms(&[&[1, 4, 3, 2], &[4, 2, 3, 3]]),
)
.forward(|v| {
    let o = ConvOptions::default().stride(2).pad(1).groups(2).outsize([6, 4]);
    F::deconvolution_2d(&v[0], &v[1], None, &o)
})
.expected(|x| vec![deconv_ref(&x[0], &x[1], None, G22, 2, &[6, 4])]));

/// Pooling by a direct loop: `max` or the mean (`count_pad`: over the whole window, else over
/// the elements inside the input) of each window.
fn pool_ref(
    x: &ArrayD<f64>,
    k: &[usize],
    g: Geo<'_>,
    cover_all: bool,
    kind: &str,
    count_pad: bool,
) -> ArrayD<f64> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let size = &x.shape()[2..];
    let out: Vec<usize> = (0..size.len())
        .map(|a| outsize(size[a], k[a], g.stride[a], g.pad[a], 1, cover_all))
        .collect();
    let mut shape = vec![n, c];
    shape.extend(&out);
    let mut y = ArrayD::zeros(IxDyn(&shape));
    for i in 0..n {
        for ch in 0..c {
            for q in indices(&out) {
                let vals: Vec<f64> = indices(k)
                    .iter()
                    .filter_map(|kk| source(&q, kk, g, size).map(|p| x[at(i, ch, &p)]))
                    .collect();
                y[at(i, ch, &q)] = match kind {
                    "max" => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    _ => {
                        let count = if count_pad {
                            k.iter().product::<usize>()
                        } else {
                            vals.len()
                        };
                        vals.iter().sum::<f64>() / count as f64
                    }
                };
            }
        }
    }
    y
}

/// Distinct values in [-1, 1) in a random order (each 2 / size from the next), so that no
/// window's maximum is near a tie that finite differences would cross.
fn distinct(shape: &'static [usize]) -> impl Fn(&mut Rng, DType) -> Vec<Array> {
    move |rng, dtype| {
        let u = Array::uniform(shape, 0.0, 1.0, DType::F64, rng).unwrap();
        let u = u.to_vec::<f64>().unwrap();
        let mut order: Vec<usize> = (0..u.len()).collect();
        order.sort_by(|&a, &b| u[a].total_cmp(&u[b]));
        let mut v = vec![0.0; u.len()];
        for (rank, &i) in order.iter().enumerate() {
            v[i] = -1.0 + 2.0 * rank as f64 / u.len() as f64;
        }
        vec![Array::from_vec(v, shape).unwrap().astype(dtype).unwrap()]
    }
}

const P2: Geo<'static> = Geo {
    stride: &[2, 2],
    pad: &[0, 0],
    dilate: &[1, 1],
};

// 5×5 with 2×2 windows and cover_all (Chainer's default): a third window per axis reaches
// past the input and takes the maximum of what it covers.
kusari::op_tests!(max_pooling_2d => OpTest::new("max_pooling_2d", distinct(&[2, 3, 5, 5]))
.forward(|v| F::max_pooling_2d(&v[0], &PoolOptions::new(2)))
.expected(|x| vec![pool_ref(&x[0], &[2, 2], P2, true, "max", true)]));

const P1: Geo<'static> = Geo {
    stride: &[2],
    pad: &[1],
    dilate: &[1],
};

// 1-d, padded, overlapping windows (an element can be the maximum of two), no cover_all.
kusari::op_tests!(max_pooling_1d => OpTest::new("max_pooling_nd (1-d)", distinct(&[2, 2, 7]))
.forward(|v| F::max_pooling_nd(&v[0], &PoolOptions::new(3).stride(2).pad(1).cover_all(false)))
.expected(|x| vec![pool_ref(&x[0], &[3], P1, false, "max", true)]));

const P22: Geo<'static> = Geo {
    stride: &[2, 2],
    pad: &[1, 1],
    dilate: &[1, 1],
};

// Padding counted as zeros in the mean (average_pooling_2d always does).
kusari::op_tests!(average_pooling_2d => OpTest::new(
    "average_pooling_2d",
    uniforms(&[&[2, 3, 5, 4]]),
)
.forward(|v| F::average_pooling_2d(&v[0], &PoolOptions::new(3).stride(2).pad(1)))
.expected(|x| vec![pool_ref(&x[0], &[3, 3], P22, false, "mean", true)]));

// pad_value=None: each window's mean over the elements inside the input.
kusari::op_tests!(average_pooling_1d_no_pad_count => OpTest::new(
    "average_pooling_nd (1-d, pad_value None)",
    uniforms(&[&[2, 2, 7]]),
)
.forward(|v| F::average_pooling_nd(&v[0], &PoolOptions::new(3).stride(2).pad(1).pad_value(None)))
.expected(|x| vec![pool_ref(&x[0], &[3], P1, false, "mean", false)]));

/// Batch normalization per channel (axis 1) over every other axis, in float64.
fn bn_ref(x: &ArrayD<f64>, gamma: &ArrayD<f64>, beta: &ArrayD<f64>, eps: f64) -> ArrayD<f64> {
    let c = x.shape()[1];
    let mut y = x.clone();
    for ch in 0..c {
        let vals: Vec<f64> = x
            .indexed_iter()
            .filter(|(i, _)| i[1] == ch)
            .map(|(_, v)| *v)
            .collect();
        let m = vals.iter().sum::<f64>() / vals.len() as f64;
        let var = vals.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / vals.len() as f64;
        for (i, v) in y.indexed_iter_mut() {
            if i[1] == ch {
                *v = gamma[[ch]] * (*v - m) / (var + eps).sqrt() + beta[[ch]];
            }
        }
    }
    y
}

kusari::op_tests!(batch_normalization => OpTest::new(
    "batch_normalization",
    uniforms(&[&[5, 3, 2, 2], &[3], &[3]]),
)
.forward(|v| F::batch_normalization(&v[0], &v[1], &v[2], 2e-5))
.expected(|x| vec![bn_ref(&x[0], &x[1], &x[2], 2e-5)]));

// Rows of 300 elements: the fused host path's float32 sums run whole blocks of 256, lanes of 16
// and a tail of 12 one at a time.
kusari::op_tests!(batch_normalization_long_rows => OpTest::new(
    "batch_normalization (rows of 300)",
    uniforms(&[&[3, 2, 20, 15], &[2], &[2]]),
)
.forward(|v| F::batch_normalization(&v[0], &v[1], &v[2], 2e-5))
.expected(|x| vec![bn_ref(&x[0], &x[1], &x[2], 2e-5)]));

// (N, C) input: statistics over the batch axis only.
kusari::op_tests!(batch_normalization_2d_input => OpTest::new(
    "batch_normalization ((N, C))",
    uniforms(&[&[6, 4], &[4], &[4]]),
)
.forward(|v| F::batch_normalization(&v[0], &v[1], &v[2], 1e-3))
.expected(|x| vec![bn_ref(&x[0], &x[1], &x[2], 1e-3)]));

fn fixed_inputs(rng: &mut Rng, dtype: DType) -> Vec<Array> {
    let u = |s: &[usize], lo, hi, rng: &mut Rng| Array::uniform(s, lo, hi, dtype, rng).unwrap();
    vec![
        u(&[4, 3, 2], -1.0, 1.0, rng),
        u(&[3], -1.0, 1.0, rng),
        u(&[3], -1.0, 1.0, rng),
        u(&[3], -1.0, 1.0, rng),
        u(&[3], 0.5, 1.5, rng), // a variance
    ]
}

kusari::op_tests!(fixed_batch_normalization => OpTest::new(
    "fixed_batch_normalization",
    fixed_inputs,
)
.forward(|v| F::fixed_batch_normalization(&v[0], &v[1], &v[2], &v[3], &v[4], 1e-5))
.expected(|x| {
    let mut y = x[0].clone();
    for (i, v) in y.indexed_iter_mut() {
        let c = i[1];
        *v = x[1][[c]] * (*v - x[3][[c]]) / (x[4][[c]] + 1e-5).sqrt() + x[2][[c]];
    }
    vec![y]
}));

/// A 1-channel 3×3 input against a hand-computed result: the 2×2 kernel [[1, 2], [3, 4]] over
/// [[1, 2, 3], [4, 5, 6], [7, 8, 9]] gives [[37, 47], [67, 77]] (1·1 + 2·2 + 3·4 + 4·5 = 37).
#[test]
fn convolution_by_hand() -> Result<()> {
    let x = Variable::new(Array::arange(1.0, 10.0, 1.0, DType::F64)?.reshape(&[1, 1, 3, 3])?);
    let w = Variable::new(Array::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[1, 1, 2, 2])?);
    let y = F::convolution_2d(&x, &w, None, &ConvOptions::default())?;
    assert_eq!(y.array().to_vec::<f64>()?, vec![37.0, 47.0, 67.0, 77.0]);
    // The gradient of the sum: each input element times the kernel elements that saw it.
    F::sum(&y)?.backward()?;
    let gx = x.grad_array().expect("x.grad").to_vec::<f64>()?;
    assert_eq!(gx, vec![1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 3.0, 7.0, 4.0]);
    Ok(())
}

/// Max pooling's gradient goes to the first of tied maxima only, as in Chainer.
#[test]
fn max_pooling_ties_go_to_the_first() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![3.0f32, 3.0, 1.0, 3.0], &[1, 1, 2, 2])?);
    let y = F::max_pooling_2d(&x, &PoolOptions::new(2))?;
    assert_eq!(y.array().to_vec::<f32>()?, vec![3.0]);
    y.backward()?;
    let gx = x.grad_array().expect("x.grad").to_vec::<f32>()?;
    assert_eq!(gx, vec![1.0, 0.0, 0.0, 0.0]);
    Ok(())
}

fn var(shape: &[usize]) -> Variable {
    Variable::new(Array::zeros(shape, DType::F32).unwrap())
}

/// Shapes that cannot work are errors naming the function, the shapes and the parameter.
#[test]
fn shapes_that_cannot_work_are_errors() {
    let msg = |r: Result<Variable>| r.expect_err("an error").to_string();
    let d = ConvOptions::default();
    // A kernel larger than the padded input.
    let e = msg(F::convolution_2d(
        &var(&[1, 1, 2, 2]),
        &var(&[1, 1, 3, 3]),
        None,
        &d,
    ));
    assert!(
        e.contains("convolution_2d") && e.contains("larger than the padded input"),
        "{e}"
    );
    assert!(e.contains("[2, 2]") && e.contains("[3, 3]"), "{e}");
    // Channels not divisible by groups.
    let e = msg(F::convolution_2d(
        &var(&[1, 3, 4, 4]),
        &var(&[2, 1, 3, 3]),
        None,
        &d.clone().groups(2),
    ));
    assert!(
        e.contains("not divisible by groups (2)") && e.contains("(3)"),
        "{e}"
    );
    // A weight whose in_c does not match.
    let e = msg(F::convolution_2d(
        &var(&[1, 3, 4, 4]),
        &var(&[2, 2, 3, 3]),
        None,
        &d,
    ));
    assert!(
        e.contains("[1, 3, 4, 4]") && e.contains("[2, 2, 3, 3]") && e.contains("has 3"),
        "{e}"
    );
    // A bias of the wrong length.
    let e = msg(F::convolution_2d(
        &var(&[1, 3, 4, 4]),
        &var(&[2, 3, 3, 3]),
        Some(&var(&[3])),
        &d,
    ));
    assert!(e.contains("b must be (2,)") && e.contains("[3]"), "{e}");
    // 2-d form given 1 spatial axis; 4 spatial axes.
    let e = msg(F::convolution_2d(
        &var(&[1, 3, 4]),
        &var(&[2, 3, 3]),
        None,
        &d,
    ));
    assert!(e.contains("takes 2"), "{e}");
    let e = msg(F::convolution_nd(
        &var(&[1, 1, 2, 2, 2, 2]),
        &var(&[1, 1, 1, 1, 1, 1]),
        None,
        &d,
    ));
    assert!(e.contains("4 spatial axes"), "{e}");
    // Zero stride; a deconvolution whose outsize does not convolve back.
    let e = msg(F::convolution_2d(
        &var(&[1, 1, 4, 4]),
        &var(&[1, 1, 3, 3]),
        None,
        &d.clone().stride(0),
    ));
    assert!(e.contains("stride must be at least 1"), "{e}");
    let o = d.clone().stride(2).outsize([9, 9]);
    let e = msg(F::deconvolution_2d(
        &var(&[1, 1, 3, 3]),
        &var(&[1, 1, 3, 3]),
        None,
        &o,
    ));
    assert!(
        e.contains("deconvolution_2d") && e.contains("outsize [9, 9] does not fit"),
        "{e}"
    );
    // An output that would be empty: a 1-wide deconvolution input with pad larger than the kernel.
    let o = d.clone().pad(2);
    let e = msg(F::deconvolution_2d(
        &var(&[1, 1, 1, 1]),
        &var(&[1, 1, 3, 3]),
        None,
        &o,
    ));
    assert!(e.contains("empty or negative"), "{e}");
    // Pooling: window larger than the input; cover_all for average pooling.
    let e = msg(F::max_pooling_2d(
        &var(&[1, 1, 2, 2]),
        &PoolOptions::new(3).cover_all(false),
    ));
    assert!(
        e.contains("max_pooling_2d") && e.contains("larger than the padded input"),
        "{e}"
    );
    let e = msg(F::average_pooling_2d(
        &var(&[1, 1, 4, 4]),
        &PoolOptions::new(2).cover_all(true),
    ));
    assert!(
        e.contains("average_pooling_2d") && e.contains("cover_all"),
        "{e}"
    );
    // Batch normalization: gamma of the wrong size; a negative eps.
    let e = msg(F::batch_normalization(
        &var(&[2, 3, 4]),
        &var(&[4]),
        &var(&[4]),
        1e-5,
    ));
    assert!(
        e.contains("batch_normalization") && e.contains("[4]") && e.contains("[2, 3, 4]"),
        "{e}"
    );
    let e = msg(F::batch_normalization(
        &var(&[2, 3]),
        &var(&[3]),
        &var(&[3]),
        -1.0,
    ));
    assert!(e.contains("eps"), "{e}");
}
