//! Graphs are freed when their variables go, double backprop included; a function of very many
//! inputs is applied and differentiated in time linear in their number.

use kusari::WeakArray;
use kusari::prelude::*;

/// One gradient-penalty-style step: y = sum(exp(x)), backward with double backprop (x.grad
/// carries a graph through exp(x) back to x's node), then everything dropped.
fn double_backprop_step(n: usize) -> (WeakArray, WeakArray, WeakArray) {
    let x = Variable::new(Array::full(&[n], 0.5, DType::F32).unwrap());
    let e = F::exp(&x).unwrap();
    let y = F::sum(&e).unwrap();
    y.backward_with(BackwardOptions {
        enable_double_backprop: true,
        ..Default::default()
    })
    .unwrap();
    let gx = x.grad().expect("x has a gradient");
    assert!(
        gx.has_creator(),
        "the gradient has a graph (double backprop)"
    );
    let weak = (
        x.array().downgrade(),
        e.array().downgrade(),
        gx.array().downgrade(),
    );
    drop((x, e, y, gx));
    weak
}

#[test]
fn double_backprop_then_dropping_the_variables_frees_everything() {
    let (x, exp_x, gx) = double_backprop_step(1 << 10);
    assert!(!x.is_alive(), "x's buffer outlived x");
    assert!(!exp_x.is_alive(), "exp(x) was kept by x.grad's graph");
    assert!(!gx.is_alive(), "x.grad outlived x");
}

#[test]
fn a_gradient_kept_by_the_user_keeps_its_graph() {
    // Dropping x must not take a gradient the user still holds.
    let x = Variable::new(Array::full(&[3], 2.0, DType::F64).unwrap());
    let y = F::sum(&(&x * &x).unwrap()).unwrap();
    y.backward_with(BackwardOptions {
        enable_double_backprop: true,
        ..Default::default()
    })
    .unwrap();
    let gx = x.grad().unwrap();
    let x_data = x.array().downgrade();
    drop((x, y));
    // gx = 2x still has its graph, which holds x's data (retained by the multiplication).
    assert!(gx.has_creator());
    assert!(x_data.is_alive());
    assert_eq!(gx.array().to_vec::<f64>().unwrap(), vec![4.0; 3]);
    drop(gx);
    assert!(!x_data.is_alive());
}

/// Resident set size in bytes (Linux; `None` elsewhere).
fn rss() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn rss_stays_flat_over_many_double_backprop_steps() {
    // In a child process: other tests of this binary allocate in parallel and would move RSS.
    super::run_child("memory::child_rss_over_1000_steps", None);
}

#[test]
#[ignore = "run by rss_stays_flat_over_many_double_backprop_steps in a child process"]
fn child_rss_over_1000_steps() {
    let n = 1 << 16; // 256 KiB per buffer: a leak of three buffers a step is 768 MiB
    for _ in 0..50 {
        double_backprop_step(n);
    }
    let Some(before) = rss() else {
        println!("SKIPPED: no /proc/self/statm on this system; the weak-count test still runs");
        return;
    };
    for _ in 0..1000 {
        double_backprop_step(n);
    }
    let after = rss().unwrap();
    let grown = after.saturating_sub(before);
    println!("RSS over 1000 double-backprop steps: {before} -> {after} bytes");
    assert!(
        grown < 32 << 20,
        "RSS grew by {grown} bytes over 1000 steps"
    );
}

/// Sums its inputs (each of shape [1]), retaining all of them.
struct SumMany;

impl FunctionNode for SumMany {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        let all: Vec<usize> = (0..inputs.len()).collect();
        ctx.retain_inputs(&all);
        let mut total = 0.0;
        for a in inputs {
            total += a.item::<f64>()?;
        }
        Ok(vec![Array::from_vec(vec![total], &[1])?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let gy = gys[0].clone().expect("one output");
        let mut out = vec![None; ctx.n_inputs()];
        for &i in targets {
            out[i] = Some(gy.clone());
        }
        Ok(out)
    }
}

/// 10⁵ inputs: recording and backward were quadratic in the number of inputs (about 45 s each
/// in a debug build); they are linear now, and every input gets its gradient.
#[test]
fn a_function_of_many_inputs_is_applied_and_differentiated() {
    let n = 100_000;
    let xs: Vec<Variable> = (0..n)
        .map(|i| Variable::new(Array::from_vec(vec![i as f64], &[1]).unwrap()))
        .collect();
    let refs: Vec<&Variable> = xs.iter().collect();
    let y = SumMany.apply(&refs).unwrap().remove(0);
    let expected = (n * (n - 1) / 2) as f64;
    assert_eq!(y.array().to_vec::<f64>().unwrap(), vec![expected]);
    // Scale by 3 so the gradient is not the seed itself.
    (&y * 3.0).unwrap().backward().unwrap();
    for x in [&xs[0], &xs[n / 2], &xs[n - 1]] {
        assert_eq!(x.grad_array().unwrap().to_vec::<f64>().unwrap(), vec![3.0]);
    }
    assert!(xs.iter().all(|x| x.grad().is_some()));
}
