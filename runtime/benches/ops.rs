//! Every family of host operations at the sizes models run, for the ratio table beside PyTorch
//! (`ops_peers.py` times the same work in PyTorch and prints the table).
//!
//! Groups, each op at 4K, 64K, 1M and 16M elements (a `[n / 1024, 1024]` array), in float32
//! and float64:
//!
//! - `ops_{f32,f64}_fwd`: the array operation alone (`Array::exp`, `&x * &w`, `Array::sum`,
//!   ...; softmax, its loss, dropout and the activations `gelu`, `elu`, `leaky_relu` through
//!   their functions with backprop off).
//! - `ops_{f32,f64}_fwdbwd`: the differentiable function on a `Variable`, its sum, and the
//!   backward pass: `F::sum(&F::exp(&x)?)?.backward()`.
//! - `ops_matmul`: `a @ b` at an MLP's shape (64×784 · 784×256), the square one
//!   (512×1024 · 1024×1024) and a transformer block's feed-forward (512×768 · 768×3072), float32
//!   and float64, forward and forward + backward.
//! - `ops_train_step`: `h = tanh(x * w + b); sum(sigmoid(h)).backward()` on 1024×1024 float32.
//! - `ops_adam`: one `Adam::update` over a set of parameters whose gradients are set: the digits
//!   MLP's six (64×64, 64, 64×64, 64, 10×64, 10: small parameters, where a call's overhead
//!   counts), one of 1M and one of 16M elements, float32 and float64.
//! - `ops_mlp_step`: one training step of that MLP (three `F::linear`, leaky ReLU and dropout
//!   between, softmax cross-entropy, backward, `Adam::update`) at batch 8 and 64, float32: the
//!   work of one rank of `mn/examples/data_parallel.rs`, mostly fixed costs per step.
//!
//! Run: `cargo bench -p kusari --bench ops` (a criterion filter picks some:
//! `cargo bench -p kusari --bench ops -- 'ops_f32_fwd/exp'`), then
//! `python3 runtime/benches/ops_peers.py --no-run` for the table; `ops_peers.py` alone runs both.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kusari::link::optimizers::{Adam, Optimizer};
use kusari::link::{Link, Parameter};
use kusari::prelude::*;
use kusari::random::Rng;

/// The sizes of the table, with their labels.
const SIZES: [(&str, usize); 4] = [
    ("4K", 1 << 12),
    ("64K", 1 << 16),
    ("1M", 1 << 20),
    ("16M", 1 << 24),
];

/// Columns of every benched array (rows = elements / COLS).
const COLS: usize = 1024;

/// A seeded uniform array in `[low, high)`.
fn uniform(shape: &[usize], low: f64, high: f64, dtype: DType, seed: u64) -> Array {
    let mut rng = Rng::seed(seed);
    Array::uniform(shape, low, high, dtype, &mut rng).expect("a bench array")
}

/// An array operation, on one or two operands.
type ArrayOp = fn(&Array, &Array) -> Result<Array>;
/// A differentiable function, on one or two variables.
type VarOp = fn(&Variable, &Variable) -> Result<Variable>;

/// One row of the table: a name, the range its operands are drawn from, and the array and
/// variable forms. The second operand is a full array (`ROW` operands are one row, broadcast).
struct Op {
    name: &'static str,
    range: (f64, f64),
    second: Second,
    array: ArrayOp,
    var: VarOp,
}

#[derive(Clone, Copy, PartialEq)]
enum Second {
    /// A unary op: the second operand is ignored.
    None,
    /// An operand of the same shape.
    Full,
    /// One row (`[1024]`), broadcast over the rows.
    Row,
    /// Integer labels, one per row, for the loss.
    Labels,
}

const OPS: &[Op] = &[
    Op {
        name: "add",
        range: (-1.0, 1.0),
        second: Second::Full,
        array: |a, b| a + b,
        var: |a, b| a + b,
    },
    Op {
        name: "mul",
        range: (-1.0, 1.0),
        second: Second::Full,
        array: |a, b| a * b,
        var: |a, b| a * b,
    },
    Op {
        name: "add_row",
        range: (-1.0, 1.0),
        second: Second::Row,
        array: |a, b| a + b,
        var: |a, b| a + b,
    },
    Op {
        name: "div",
        range: (0.5, 2.0),
        second: Second::Full,
        array: |a, b| a / b,
        var: |a, b| a / b,
    },
    Op {
        name: "maximum",
        range: (-1.0, 1.0),
        second: Second::Full,
        array: |a, b| a.maximum(b),
        var: |a, b| F::maximum(a, b),
    },
    Op {
        name: "exp",
        range: (-5.0, 5.0),
        second: Second::None,
        array: |a, _| a.exp(),
        var: |a, _| F::exp(a),
    },
    Op {
        name: "log",
        range: (0.01, 10.0),
        second: Second::None,
        array: |a, _| a.log(),
        var: |a, _| F::log(a),
    },
    Op {
        name: "expm1",
        range: (-5.0, 5.0),
        second: Second::None,
        array: |a, _| a.expm1(),
        var: |a, _| F::expm1(a),
    },
    Op {
        name: "log1p",
        range: (-0.5, 10.0),
        second: Second::None,
        array: |a, _| a.log1p(),
        var: |a, _| F::log1p(a),
    },
    Op {
        name: "erf",
        range: (-3.0, 3.0),
        second: Second::None,
        array: |a, _| a.erf(),
        var: |a, _| F::erf(a),
    },
    Op {
        name: "tanh",
        range: (-5.0, 5.0),
        second: Second::None,
        array: |a, _| a.tanh(),
        var: |a, _| F::tanh(a),
    },
    Op {
        name: "sigmoid",
        range: (-5.0, 5.0),
        second: Second::None,
        array: |a, _| a.sigmoid(),
        var: |a, _| F::sigmoid(a),
    },
    Op {
        name: "sqrt",
        range: (0.01, 10.0),
        second: Second::None,
        array: |a, _| a.sqrt(),
        var: |a, _| F::sqrt(a),
    },
    Op {
        name: "pow_scalar",
        range: (0.01, 10.0),
        second: Second::None,
        array: |a, _| a.pow_scalar(2.5),
        var: |a, _| F::pow_scalar(a, 2.5),
    },
    Op {
        name: "relu",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.relu(),
        var: |a, _| F::relu(a),
    },
    // The activations, one node each with a derived backward; their forward rows run the
    // function with backprop off.
    Op {
        name: "gelu",
        range: (-3.0, 3.0),
        second: Second::None,
        array: |a, _| no_graph(|| F::gelu(&Variable::new(a.clone()))),
        var: |a, _| F::gelu(a),
    },
    // Dropout in training mode (ratio 0.2): the mask drawn on the host, then the product.
    Op {
        name: "dropout",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| no_graph(|| F::dropout(&Variable::new(a.clone()), 0.2)),
        var: |a, _| F::dropout(a, 0.2),
    },
    Op {
        name: "elu",
        range: (-3.0, 3.0),
        second: Second::None,
        array: |a, _| no_graph(|| F::elu(&Variable::new(a.clone()), 1.0)),
        var: |a, _| F::elu(a, 1.0),
    },
    Op {
        name: "leaky_relu",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| no_graph(|| F::leaky_relu(&Variable::new(a.clone()), 0.2)),
        var: |a, _| F::leaky_relu(a, 0.2),
    },
    Op {
        name: "sum",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.sum(),
        var: |a, _| F::sum(a),
    },
    Op {
        name: "sum_axis0",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.sum_axes(&[0], false),
        var: |a, _| F::sum_axes(a, &[0], false),
    },
    Op {
        name: "sum_axis1",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.sum_axes(&[1], false),
        var: |a, _| F::sum_axes(a, &[1], false),
    },
    Op {
        name: "mean",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.mean(),
        var: |a, _| F::mean(a),
    },
    Op {
        name: "max",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.max(),
        var: |a, _| F::max(a),
    },
    Op {
        name: "max_axis1",
        range: (-1.0, 1.0),
        second: Second::None,
        array: |a, _| a.max_axes(&[1], false),
        var: |a, _| F::max_axes(a, &[1], false),
    },
    Op {
        name: "softmax",
        range: (-5.0, 5.0),
        second: Second::None,
        array: |a, _| no_graph(|| F::softmax(&Variable::new(a.clone()), -1)),
        var: |a, _| F::softmax(a, -1),
    },
    Op {
        name: "log_softmax",
        range: (-5.0, 5.0),
        second: Second::None,
        array: |a, _| no_graph(|| F::log_softmax(&Variable::new(a.clone()), -1)),
        var: |a, _| F::log_softmax(a, -1),
    },
    Op {
        name: "softmax_cross_entropy",
        range: (-5.0, 5.0),
        second: Second::Labels,
        array: |a, t| no_graph(|| F::softmax_cross_entropy(&Variable::new(a.clone()), t)),
        var: |a, t| F::softmax_cross_entropy(a, t.array()),
    },
];

/// `f`'s output array, computed with backprop off (no graph recorded), as PyTorch's
/// `torch.no_grad()` forward.
fn no_graph(f: impl FnOnce() -> Result<Variable>) -> Result<Array> {
    let _off = no_backprop_mode();
    Ok(f()?.array().clone())
}

/// The operands of `op` at `n` elements of `dtype`.
fn operands(op: &Op, n: usize, dtype: DType) -> (Array, Array) {
    let rows = n / COLS;
    let (low, high) = op.range;
    let a = uniform(&[rows, COLS], low, high, dtype, 1);
    let b = match op.second {
        Second::None | Second::Full => uniform(&[rows, COLS], low, high, dtype, 2),
        Second::Row => uniform(&[COLS], low, high, dtype, 2),
        Second::Labels => {
            let labels: Vec<i32> = (0..rows).map(|r| ((r * 7919) % COLS) as i32).collect();
            Array::from_vec(labels, &[rows]).expect("labels")
        }
    };
    (a, b)
}

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
}

fn bench_ops(c: &mut Criterion) {
    for dtype in [DType::F32, DType::F64] {
        let mut fwd = c.benchmark_group(format!("ops_{dtype}_fwd").replace("float", "f"));
        configure(&mut fwd);
        for op in OPS {
            for (label, n) in SIZES {
                let (a, b) = operands(op, n, dtype);
                fwd.bench_function(BenchmarkId::new(op.name, label), |bench| {
                    bench.iter(|| black_box((op.array)(&a, &b).expect(op.name)))
                });
            }
        }
        fwd.finish();

        let mut fwdbwd = c.benchmark_group(format!("ops_{dtype}_fwdbwd").replace("float", "f"));
        configure(&mut fwdbwd);
        for op in OPS {
            for (label, n) in SIZES {
                let (a, b) = operands(op, n, dtype);
                let x = Variable::new(a);
                // The second operand takes a gradient too, except labels.
                let y = Variable::with_requires_grad(b, op.second != Second::Labels);
                fwdbwd.bench_function(BenchmarkId::new(op.name, label), |bench| {
                    bench.iter(|| {
                        x.cleargrad();
                        y.cleargrad();
                        let out = (op.var)(&x, &y).expect(op.name);
                        F::sum(&out).and_then(|s| s.backward()).expect("backward");
                        black_box(x.grad());
                    })
                });
            }
        }
        fwdbwd.finish();
    }
}

/// The matrix products of the table: `(name, [n, k], [k, m])`.
const MATMULS: [(&str, [usize; 2], [usize; 2]); 3] = [
    ("mlp_64x784x256", [64, 784], [784, 256]),
    ("square_512x1024x1024", [512, 1024], [1024, 1024]),
    ("ffn_512x768x3072", [512, 768], [768, 3072]),
];

fn bench_matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("ops_matmul");
    configure(&mut group);
    for dtype in [DType::F32, DType::F64] {
        let short = dtype.to_string().replace("float", "f");
        for (name, sa, sb) in MATMULS {
            let a = uniform(&sa, -1.0, 1.0, dtype, 3);
            let b = uniform(&sb, -1.0, 1.0, dtype, 4);
            group.bench_function(format!("{name}_{short}_fwd"), |bench| {
                bench.iter(|| black_box(a.matmul(&b).expect("matmul")))
            });
            let (va, vb) = (Variable::new(a.clone()), Variable::new(b.clone()));
            group.bench_function(format!("{name}_{short}_fwdbwd"), |bench| {
                bench.iter(|| {
                    va.cleargrad();
                    vb.cleargrad();
                    let out = F::matmul(&va, &vb).expect("matmul");
                    F::sum(&out).and_then(|s| s.backward()).expect("backward");
                    black_box(va.grad());
                })
            });
        }
    }
    group.finish();
}

fn bench_train_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("ops_train_step");
    configure(&mut group);
    let x = Variable::new(uniform(&[COLS, COLS], -1.0, 1.0, DType::F32, 5));
    let w = Variable::new(uniform(&[COLS, COLS], -1.0, 1.0, DType::F32, 6));
    let b = Variable::new(uniform(&[COLS], -1.0, 1.0, DType::F32, 7));
    group.bench_function("tanh_mul_add_sigmoid_sum_f32_1M", |bench| {
        bench.iter(|| {
            for v in [&x, &w, &b] {
                v.cleargrad();
            }
            let h = F::tanh(&((&x * &w)? + &b)?)?;
            F::sum(&F::sigmoid(&h)?)?.backward()?;
            black_box(w.grad());
            Ok::<(), kusari::Error>(())
        })
    });
    group.finish();
}

/// The parameter sets of `ops_adam`: a label and the shapes.
const ADAM_SETS: [(&str, &[&[usize]]); 3] = [
    (
        "mlp_digits",
        &[&[64, 64], &[64], &[64, 64], &[64], &[10, 64], &[10]],
    ),
    ("1M", &[&[1024, 1024]]),
    ("16M", &[&[16 * 1024, 1024]]),
];

/// Parameters visited under `/0`, `/1`, ...
struct Params(Vec<Parameter>);

impl Link for Params {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        for (i, p) in self.0.iter().enumerate() {
            f(format!("{prefix}/{i}"), p);
        }
    }
}

fn bench_adam(c: &mut Criterion) {
    let mut group = c.benchmark_group("ops_adam");
    configure(&mut group);
    for dtype in [DType::F32, DType::F64] {
        let short = dtype.to_string().replace("float", "f");
        for (label, shapes) in ADAM_SETS {
            let params = Params(
                shapes
                    .iter()
                    .zip(10..)
                    .map(|(shape, seed)| {
                        let p = Parameter::from_array(uniform(shape, -1.0, 1.0, dtype, seed));
                        let g = uniform(shape, -1.0, 1.0, dtype, seed + 100);
                        p.variable()
                            .and_then(|v| v.set_grad_array(g))
                            .expect("a gradient");
                        p
                    })
                    .collect(),
            );
            let mut opt = Adam::new();
            group.bench_function(format!("{label}_{short}"), |bench| {
                bench.iter(|| opt.update(&params).expect("update"))
            });
        }
    }
    group.finish();
}

/// An MLP of the digits' sizes (64 → 64 → 64 → 10, leaky ReLU and dropout between), its
/// weights as parameters.
#[derive(kusari::Link)]
struct MlpParams {
    w1: Parameter,
    b1: Parameter,
    w2: Parameter,
    b2: Parameter,
    w3: Parameter,
    b3: Parameter,
}

impl MlpParams {
    fn new() -> MlpParams {
        let p = |shape: &[usize], seed| {
            Parameter::from_array(uniform(shape, -0.1, 0.1, DType::F32, seed))
        };
        MlpParams {
            w1: p(&[64, 64], 20),
            b1: p(&[64], 21),
            w2: p(&[64, 64], 22),
            b2: p(&[64], 23),
            w3: p(&[10, 64], 24),
            b3: p(&[10], 25),
        }
    }

    fn loss(&self, x: &Variable, t: &Array) -> Result<Variable> {
        let layer = |h: &Variable, w: &Parameter, b: &Parameter| {
            F::linear(h, &w.variable()?, Some(&b.variable()?))
        };
        let hidden = |h: &Variable, w, b| F::dropout(&F::leaky_relu(&layer(h, w, b)?, 0.1)?, 0.2);
        let h = hidden(x, &self.w1, &self.b1)?;
        let h = hidden(&h, &self.w2, &self.b2)?;
        F::softmax_cross_entropy(&layer(&h, &self.w3, &self.b3)?, t)
    }
}

/// One training step of the digits MLP (forward, loss, backward, Adam) at batch 8 and 64, float32:
/// what one rank of `mn/examples/data_parallel.rs` repeats, its fixed cost per step the
/// multi-node speed budget turns on.
fn bench_mlp_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("ops_mlp_step");
    configure(&mut group);
    for batch in [8usize, 64] {
        let model = MlpParams::new();
        let x = Variable::constant(uniform(&[batch, 64], 0.0, 1.0, DType::F32, 26));
        let labels: Vec<i64> = (0..batch as i64).map(|i| (i * 7) % 10).collect();
        let t = Array::from_vec(labels, &[batch]).expect("labels");
        let mut opt = Adam::new();
        group.bench_function(format!("digits_b{batch}_f32"), |bench| {
            bench.iter(|| {
                model.cleargrads();
                model.loss(&x, &t)?.backward()?;
                opt.update(&model)
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_ops,
    bench_matmul,
    bench_train_step,
    bench_adam,
    bench_mlp_step
);
criterion_main!(benches);
