//! The communicators' algorithms with threads as ranks (no MPI needed): every collective, the
//! gradient buckets and their order, the mean, the broadcast, the data split, and the rules a
//! job must follow (the same collectives on every rank, no rank left behind, no endless wait).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kusari::link::optimizers::{Optimizer, SGD};
use kusari::link::{Linear, Link, Parameter, initializers::Constant};
use kusari::{Array, DType};
use kusari_mn::{
    Algorithm, Communicator, Error, Options, ThreadTransport, Transport, check,
    create_communicator_with, create_multi_node_optimizer, run_threads, run_threads_with,
    scatter_dataset, scatter_index,
};

fn all_ok<T: std::fmt::Debug>(results: Vec<kusari_mn::Result<T>>) -> Vec<T> {
    results
        .into_iter()
        .enumerate()
        .map(|(r, res)| res.unwrap_or_else(|e| panic!("rank {r}: {e}")))
        .collect()
}

#[test]
fn every_collective_gives_its_hand_computed_result() {
    for ranks in 1..=4 {
        all_ok(run_threads(ranks, "flat", |comm| check::collectives(&comm)));
    }
}

#[test]
fn data_parallel_training_matches_one_process_with_the_whole_batch() {
    for name in ["naive", "flat"] {
        for ranks in [1, 2, 3, 4] {
            let rel = all_ok(run_threads(ranks, name, |comm| {
                check::equivalence(&comm, 6, 24)
            }));
            for r in rel {
                assert!(
                    r < 1e-13,
                    "{name}, {ranks} ranks: relative difference {r:e}"
                );
            }
        }
    }
}

#[test]
fn the_exchange_in_float32_still_matches_to_float32_rounding() {
    let options = Options {
        allreduce_grad_dtype: Some(DType::F32),
        ..Options::default()
    };
    let rel = all_ok(run_threads_with(
        ThreadTransport::world(2),
        "flat",
        options,
        |comm| check::equivalence(&comm, 6, 24),
    ));
    for r in rel {
        // float64 parameters whose gradients travel as float32: float32's rounding, no more.
        assert!(r < 1e-6 && r > 0.0, "relative difference {r:e}");
    }
}

/// A link of parameters `/p0`, `/p1`, ... of the given sizes and dtypes.
struct Params(Vec<Parameter>);

impl Link for Params {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        for (i, p) in self.0.iter().enumerate() {
            f(format!("{prefix}/p{i}"), p);
        }
    }
}

fn params(specs: &[(usize, DType)], value: f64) -> Params {
    Params(
        specs
            .iter()
            .map(|&(n, dtype)| Parameter::with_shape(Constant(value), &[n], dtype).unwrap())
            .collect(),
    )
}

fn comm_with(name: &str, options: Options) -> Communicator {
    let t = ThreadTransport::world(1).pop().unwrap();
    create_communicator_with(name, Box::new(t), options).unwrap()
}

#[test]
fn buckets_go_in_reverse_parameter_order_with_a_small_first_one() {
    use DType::{F16, F32, F64};
    // float32 exchange: 4 bytes an element. First cap 16 bytes (4 elements), then 40 (10).
    let options = Options {
        allreduce_grad_dtype: None,
        bucket_cap_bytes: 40,
        first_bucket_cap_bytes: 16,
        overlap: true,
    };
    let link = params(
        &[
            (3, F32),
            (6, F32),
            (4, F32),
            (2, F16),
            (2, F32),
            (1, F64),
            (2, F64),
        ],
        0.0,
    );
    let comm = comm_with("flat", options.clone());
    let got: Vec<(Vec<String>, DType, usize)> = comm
        .buckets(&link)
        .into_iter()
        .map(|b| (b.params, b.dtype, b.len))
        .collect();
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            // float64 parameters travel in float64: p6 and p5 together would be 3 elements,
            // 24 bytes, over the first cap of 16, so p6 goes alone.
            (names(&["/p6"]), F64, 2),
            (names(&["/p5"]), F64, 1),
            // float16 travels as float32, with its float32 neighbours, up to 10 elements.
            (names(&["/p4", "/p3", "/p2"]), F32, 8),
            (names(&["/p1", "/p0"]), F32, 9),
        ]
    );
    // Naive: one per parameter, same order.
    let naive = comm_with("naive", options.clone());
    let order: Vec<Vec<String>> = naive.buckets(&link).into_iter().map(|b| b.params).collect();
    let expected: Vec<Vec<String>> = (0..7).rev().map(|i| vec![format!("/p{i}")]).collect();
    assert_eq!(order, expected);
    // A parameter larger than the cap travels alone; everything in float64 when asked.
    let big = params(&[(1, F32), (100, F32), (1, F32)], 0.0);
    let f64_comm = comm_with(
        "flat",
        Options {
            allreduce_grad_dtype: Some(F64),
            ..options
        },
    );
    let got: Vec<(Vec<String>, DType)> = f64_comm
        .buckets(&big)
        .into_iter()
        .map(|b| (b.params, b.dtype))
        .collect();
    assert_eq!(
        got,
        vec![
            (names(&["/p2"]), F64),
            (names(&["/p1"]), F64),
            (names(&["/p0"]), F64)
        ]
    );
}

#[test]
fn the_mean_gradient_replaces_each_ranks_keeping_dtype_and_treating_none_as_zero() {
    for name in ["naive", "flat"] {
        let got = all_ok(run_threads(3, name, |comm| {
            let r = comm.rank() as f64;
            let link = params(&[(2, DType::F32), (3, DType::F64), (1, DType::F16)], 0.0);
            link.0[0]
                .variable()?
                .set_grad_array(Array::from_vec(vec![r as f32, 1.0], &[2])?)?;
            // Rank 1 has no gradient for p1: it counts as zeros.
            if comm.rank() != 1 {
                link.0[1]
                    .variable()?
                    .set_grad_array(Array::from_vec(vec![r, -r, 3.0], &[3])?)?;
            }
            link.0[2]
                .variable()?
                .set_grad_array(Array::from_vec(vec![half::f16::from_f64(r)], &[1])?)?;
            comm.multi_node_mean_grad(&link)?;
            let g: Vec<(DType, Vec<f64>)> = link
                .0
                .iter()
                .map(|p| {
                    let g = p.grad().unwrap();
                    (g.dtype(), g.astype(DType::F64).unwrap().to_vec().unwrap())
                })
                .collect();
            Ok(g)
        }));
        for g in got {
            assert_eq!(g[0], (DType::F32, vec![1.0, 1.0]), "{name}");
            // (0 + 2) / 3 and 3 + 3 over 3 ranks (rank 1 adds nothing).
            assert_eq!(g[1].0, DType::F64);
            for (v, want) in g[1].1.iter().zip([2.0 / 3.0, -2.0 / 3.0, 2.0]) {
                assert!((v - want).abs() < 1e-15, "{name}: {v} vs {want}");
            }
            assert_eq!(g[2], (DType::F16, vec![1.0]), "{name}");
        }
    }
}

#[test]
fn the_first_update_broadcasts_rank_0s_values_and_takes_no_step() {
    let got = all_ok(run_threads(3, "flat", |comm| {
        let link = params(&[(2, DType::F64)], 1.0 + comm.rank() as f64);
        link.0[0]
            .variable()?
            .set_grad_array(Array::from_vec(vec![1.0, 1.0], &[2])?)?;
        let mut opt = create_multi_node_optimizer(SGD::new().lr(0.5), &comm);
        opt.update(&link)?;
        let first = (link.0[0].array()?.to_vec::<f64>()?, opt.t());
        opt.update(&link)?;
        let second = (link.0[0].array()?.to_vec::<f64>()?, opt.t());
        Ok((first, second))
    }));
    for (first, second) in got {
        assert_eq!(first, (vec![1.0, 1.0], 0));
        assert_eq!(second, (vec![0.5, 0.5], 1));
    }
}

#[test]
fn ranks_with_different_parameters_get_an_error_naming_the_difference() {
    let got = run_threads(2, "flat", |comm| {
        let n = if comm.rank() == 0 { 3 } else { 4 };
        let link = params(&[(2, DType::F32), (n, DType::F32)], 0.0);
        let mut opt = create_multi_node_optimizer(SGD::new(), &comm);
        Ok(opt.update(&link)?)
    });
    for res in got {
        let msg = res.unwrap_err().to_string();
        assert!(
            msg.contains("entry 1 is /p1 (float32 [3]) on rank 0 and /p1 (float32 [4]) on rank 1"),
            "{msg}"
        );
    }
}

#[test]
fn ranks_calling_different_collectives_get_a_mismatch_not_a_hang() {
    let got = run_threads(2, "flat", |comm| {
        let x = Array::from_vec(vec![1.0f32, 2.0], &[2])?;
        if comm.rank() == 0 {
            comm.allreduce(&x).map(|_| ())
        } else {
            comm.bcast(Some(&x), 1).map(|_| ())
        }
    });
    for res in got {
        match res.unwrap_err() {
            Error::Mismatch { detail, .. } => {
                assert!(
                    detail.contains("rank 0 called allreduce")
                        && detail.contains("rank 1 called bcast (root 1)"),
                    "{detail}"
                );
            }
            other => panic!("{other}"),
        }
    }
    // Arrays of different shapes in one allreduce.
    let got = run_threads(2, "flat", |comm| {
        let x = Array::zeros(&[2 + comm.rank()], DType::F32)?;
        comm.allreduce(&x)
    });
    for res in got {
        let msg = res.unwrap_err().to_string();
        assert!(
            msg.contains("rank 0 has float32 [2], rank 1 has float32 [3]"),
            "{msg}"
        );
    }
}

#[test]
fn a_rank_that_returns_or_panics_early_fails_the_others_promptly() {
    let start = Instant::now();
    let got = run_threads(3, "flat", |comm| {
        if comm.rank() == 2 {
            return Ok(());
        }
        comm.allreduce(&Array::from_vec(vec![1.0f64], &[1])?)
            .map(|_| ())
    });
    assert!(got[2].is_ok());
    for res in &got[..2] {
        let msg = res.as_ref().unwrap_err().to_string();
        assert!(
            msg.contains("rank 2 returned without calling allreduce"),
            "{msg}"
        );
    }
    let got = run_threads(2, "flat", |comm| {
        if comm.rank() == 1 {
            panic!("out of data");
        }
        comm.allgather_obj(&1u8).map(|_| ())
    });
    assert!(
        got[1]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("the rank panicked: out of data")
    );
    let msg = got[0].as_ref().unwrap_err().to_string();
    assert!(msg.contains("rank 1 panicked without calling"), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn no_wait_is_longer_than_the_worlds_time_limit() {
    let ranks = ThreadTransport::world_with(2, 2, Duration::from_millis(200));
    let start = Instant::now();
    let got = run_threads_with(ranks, "flat", Options::default(), |comm| {
        if comm.rank() == 1 {
            std::thread::sleep(Duration::from_millis(800));
            return Ok(());
        }
        comm.recv(1, 0).map(|_| ())
    });
    let msg = got[0].as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("waited 200ms for rank(s) [1] to call recv"),
        "{msg}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn an_abort_stops_every_rank() {
    let got = run_threads(2, "flat", |comm| {
        if comm.rank() == 0 {
            comm.abort(3);
        }
        comm.allgather_obj(&0u8).map(|_| ())
    });
    assert!(
        got[0]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("aborted the job with code 3")
    );
    let msg = got[1].as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("aborted") || msg.contains("panicked without calling"),
        "{msg}"
    );
}

#[test]
fn intra_rank_counts_within_a_node() {
    let ranks = ThreadTransport::world_with(5, 2, Duration::from_secs(10));
    let got: Vec<(usize, usize)> = ranks
        .iter()
        .map(|t| (t.intra_rank(), t.intra_size()))
        .collect();
    assert_eq!(got, vec![(0, 2), (1, 2), (0, 2), (1, 2), (0, 1)]);
}

#[test]
fn scatter_index_gives_equal_shares_that_cover_every_example() {
    for ranks in [1, 2, 3, 4] {
        for n in [0, 1, 7, 12] {
            let parts = all_ok(run_threads(ranks, "flat", |comm| {
                scatter_index(&comm, n, Some(5))
            }));
            let per = n.div_ceil(ranks);
            assert!(
                parts.iter().all(|p| p.len() == per),
                "{ranks} ranks, {n}: {parts:?}"
            );
            let mut seen: Vec<usize> = parts.concat();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{ranks} ranks, {n}");
        }
    }
    // The seed decides the order; the same seed, the same shares.
    let a = all_ok(run_threads(2, "flat", |comm| {
        scatter_index(&comm, 10, Some(1))
    }));
    let b = all_ok(run_threads(2, "flat", |comm| {
        scatter_index(&comm, 10, Some(1))
    }));
    let c = all_ok(run_threads(2, "flat", |comm| {
        scatter_index(&comm, 10, Some(2))
    }));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a[0], (0..5).collect::<Vec<_>>());
}

#[test]
fn scatter_dataset_sends_each_rank_its_examples() {
    let data: Vec<(u32, String)> = (0..9).map(|i| (i, format!("example {i}"))).collect();
    let got = all_ok(run_threads(3, "flat", |comm| {
        let mine = scatter_dataset(&comm, (comm.rank() == 0).then_some(&data[..]), None)?;
        let index = scatter_index(&comm, data.len(), None)?;
        Ok((mine, index))
    }));
    for (mine, index) in got {
        let want: Vec<(u32, String)> = index.iter().map(|&i| data[i].clone()).collect();
        assert_eq!(mine, want);
    }
}

#[test]
fn mean_metrics_averages_and_checks_the_names() {
    let got = all_ok(run_threads(4, "flat", |comm| {
        let r = comm.rank() as f64;
        let m = BTreeMap::from([
            ("loss".to_string(), r),
            ("accuracy".to_string(), 1.0 - r / 8.0),
        ]);
        comm.mean_metrics(&m)
    }));
    for m in got {
        assert_eq!(m["loss"], 1.5);
        assert_eq!(m["accuracy"], 1.0 - 1.5 / 8.0);
    }
    let got = run_threads(2, "flat", |comm| {
        let name = if comm.rank() == 0 { "loss" } else { "lost" };
        comm.mean_metrics(&BTreeMap::from([(name.to_string(), 1.0)]))
    });
    for res in got {
        let msg = res.unwrap_err().to_string();
        assert!(
            msg.contains("rank 0 has [\"loss\"], rank 1 has [\"lost\"]"),
            "{msg}"
        );
    }
}

#[test]
fn bcast_data_copies_rank_0s_parameters_to_every_rank() {
    let got = all_ok(run_threads(3, "naive", |comm| {
        kusari::random::seed(comm.rank() as u64);
        let model = Linear::new(Some(3), 2, false, DType::F32)?;
        comm.bcast_data(&model)?;
        Ok(model
            .named_params()
            .iter()
            .map(|(_, p)| p.array().unwrap().to_vec::<f32>().unwrap())
            .collect::<Vec<_>>())
    }));
    assert!(got.iter().all(|g| g == &got[0]));
    kusari::random::seed(0);
    let rank0 = Linear::new(Some(3), 2, false, DType::F32).unwrap();
    let want: Vec<Vec<f32>> = rank0
        .named_params()
        .iter()
        .map(|(_, p)| p.array().unwrap().to_vec().unwrap())
        .collect();
    assert_eq!(got[0], want);
}

#[test]
fn wrong_arguments_are_errors_that_say_what_to_do() {
    let t = || Box::new(ThreadTransport::world(1).pop().unwrap());
    let err = |name: &str, options: Options| {
        create_communicator_with(name, t(), options)
            .err()
            .unwrap()
            .to_string()
    };
    assert!(err("mpi", Options::default()).contains("unknown communicator \"mpi\""));
    assert!(err("hierarchical", Options::default()).contains("use `pure_nccl`"));
    // Without the feature, `pure_nccl` says which feature it needs; with it, this host-only
    // world (no emulated device asked for) cannot join NCCL.
    #[cfg(not(feature = "nccl"))]
    assert!(err("pure_nccl", Options::default()).contains("needs kusari-mn's feature `nccl`"));
    let f16 = Options {
        allreduce_grad_dtype: Some(DType::F16),
        ..Options::default()
    };
    assert!(err("flat", f16).contains("allreduce_grad_dtype float16 is not float32 or float64"));
    let two = ThreadTransport::world(2).pop().unwrap();
    let msg = create_communicator_with("single", Box::new(two), Options::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("`single` is one rank, but the transport has 2"),
        "{msg}"
    );
    let got = run_threads(2, "flat", |comm| {
        comm.scatter(None, 5).map(|_| ())?;
        Ok(())
    });
    for res in got {
        assert!(
            res.unwrap_err()
                .to_string()
                .contains("root 5 is outside the 2 ranks")
        );
    }
    let single = Communicator::single();
    assert_eq!(
        (single.rank(), single.size(), single.algorithm()),
        (0, 1, Algorithm::Flat)
    );
    let msg = single
        .send(&Array::zeros(&[1], DType::F32).unwrap(), 0, 0)
        .unwrap_err();
    assert!(
        msg.to_string()
            .contains("peer 0 must be another of the 1 ranks")
    );
}

// ----- communicating functions and links -----

use kusari::link::BatchNormalization;
use kusari::prelude::{BackwardOptions, F, Variable};
use kusari_mn::{MultiNodeBatchNormalization, functions};

fn seq(n: usize, f: impl Fn(usize) -> f64) -> Vec<f64> {
    (0..n).map(f).collect()
}

/// What a rank of `multi_node_bn` reports: its y, its x gradient, its gamma and beta gradients
/// and the running averages, each flattened.
type BnOut = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

/// The normalization of (8, 3, 2) inputs in one process, with loss sum(y * w).
fn bn_reference(x: &Array, w: &Array, gamma: &Array, beta: &Array) -> BnOut {
    let bn = BatchNormalization::new(&[3], 0.9, 1e-5, DType::F64).unwrap();
    bn.gamma.set_array(gamma.clone()).unwrap();
    bn.beta.set_array(beta.clone()).unwrap();
    let xv = Variable::new(x.clone());
    let y = bn.forward(&xv).unwrap();
    F::sum(&(&y * &Variable::constant(w.clone())).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let v = |a: &Array| a.to_vec::<f64>().unwrap();
    (
        v(y.array()),
        v(&xv.grad_array().unwrap()),
        v(&bn.gamma.grad().unwrap()),
        v(&bn.beta.grad().unwrap()),
        v(&bn.avg_mean.array().unwrap()),
        v(&bn.avg_var.array().unwrap()),
    )
}

#[test]
fn multi_node_batch_normalization_matches_one_process_on_the_whole_batch() {
    let x = Array::from_vec(seq(48, |i| (i as f64 * 0.61).sin() * 3.0 + 1.0), &[8, 3, 2]).unwrap();
    let w = Array::from_vec(seq(48, |i| (i as f64 * 0.23).cos()), &[8, 3, 2]).unwrap();
    let gamma = Array::from_vec(vec![1.5, 0.5, -2.0], &[3]).unwrap();
    let beta = Array::from_vec(vec![0.1, -0.2, 0.3], &[3]).unwrap();
    let reference = bn_reference(&x, &w, &gamma, &beta);
    for ranks in [1, 2, 4] {
        let rows = 8 / ranks;
        let got = all_ok(run_threads(ranks, "flat", |comm| {
            let r = comm.rank();
            let part = |a: &Array| {
                let v = a.to_vec::<f64>().unwrap();
                Array::from_vec(v[r * rows * 6..(r + 1) * rows * 6].to_vec(), &[rows, 3, 2])
            };
            let bn = MultiNodeBatchNormalization::new(&[3], &comm, 0.9, 1e-5, DType::F64)?;
            bn.gamma().set_array(gamma.clone())?;
            bn.beta().set_array(beta.clone())?;
            let xv = Variable::new(part(&x)?);
            let y = bn.forward(&xv)?;
            F::sum(&(&y * &Variable::constant(part(&w)?))?)?.backward()?;
            let v = |a: &Array| a.to_vec::<f64>();
            Ok((
                v(y.array())?,
                v(&xv.grad_array().unwrap())?,
                v(&bn.gamma().grad().unwrap())?,
                v(&bn.beta().grad().unwrap())?,
                v(&bn.avg_mean().array()?)?,
                v(&bn.avg_var().array()?)?,
            ))
        }));
        let close = |a: &[f64], b: &[f64], what: &str| {
            assert_eq!(a.len(), b.len(), "{what}");
            for (u, v) in a.iter().zip(b) {
                assert!(
                    (u - v).abs() < 1e-12 * (1.0 + v.abs()),
                    "{ranks} ranks, {what}: {u} vs {v}"
                );
            }
        };
        // y and x's gradient: each rank has its rows of the whole batch's.
        let ys: Vec<f64> = got.iter().flat_map(|g| g.0.clone()).collect();
        let gxs: Vec<f64> = got.iter().flat_map(|g| g.1.clone()).collect();
        close(&ys, &reference.0, "y");
        close(&gxs, &reference.1, "x's gradient");
        // gamma's and beta's: the ranks' parts add up to the whole batch's.
        let sum = |k: usize| -> Vec<f64> {
            (0..3)
                .map(|c| {
                    got.iter()
                        .map(|g| if k == 2 { g.2[c] } else { g.3[c] })
                        .sum()
                })
                .collect()
        };
        close(&sum(2), &reference.2, "gamma's gradient");
        close(&sum(3), &reference.3, "beta's gradient");
        for g in &got {
            close(&g.4, &reference.4, "running mean");
            close(&g.5, &reference.5, "running variance");
        }
    }
}

#[test]
fn allreduce_is_differentiable_twice() {
    // Rank r: x_r, S = sum of x, loss_r = S². The gradient of the ranks' total loss in x_r is
    // N 2S, and its derivative in every x_s, summed over the ranks' gradients, is 2 N².
    let n = 3;
    let got = all_ok(run_threads(n, "flat", |comm| {
        let x = Variable::new(Array::from_vec(vec![1.0 + comm.rank() as f64], &[1])?);
        let s = functions::allreduce(&comm, &x)?;
        F::sum(&(&s * &s)?)?.backward_with(BackwardOptions {
            enable_double_backprop: true,
            ..BackwardOptions::default()
        })?;
        let gx = x.grad().unwrap();
        let first = gx.array().to_vec::<f64>()?;
        x.cleargrad();
        F::sum(&gx)?.backward()?;
        Ok((first, x.grad_array().unwrap().to_vec::<f64>()?))
    }));
    for (first, second) in got {
        assert_eq!(first, vec![(n * 2) as f64 * 6.0]);
        assert_eq!(second, vec![(2 * n * n) as f64]);
    }
}

#[test]
fn a_model_split_over_two_ranks_gets_the_gradients_of_the_whole_model() {
    let x = Array::from_vec(seq(15, |i| (i as f64 * 0.7).sin()), &[5, 3]).unwrap();
    let layers = || {
        kusari::random::seed(11);
        let l1 = Linear::new(Some(3), 4, false, DType::F64).unwrap();
        let l2 = Linear::new(Some(4), 2, false, DType::F64).unwrap();
        (l1, l2)
    };
    let grads = |l: &Linear| -> Vec<Vec<f64>> {
        l.named_params()
            .iter()
            .map(|(_, p)| p.grad().unwrap().to_vec::<f64>().unwrap())
            .collect()
    };
    // One process: loss = sum(l2(tanh(l1(x)))²).
    let (l1, l2) = layers();
    let h = l1
        .forward(&Variable::constant(x.clone()))
        .unwrap()
        .tanh()
        .unwrap();
    let y = l2.forward(&h).unwrap();
    F::sum(&(&y * &y).unwrap()).unwrap().backward().unwrap();
    let want = (grads(&l1), grads(&l2));
    // Rank 0 holds l1, rank 1 holds l2; the activations and their gradient cross over.
    let got = all_ok(run_threads(2, "flat", |comm| {
        let (l1, l2) = layers();
        if comm.rank() == 0 {
            let h = l1.forward(&Variable::constant(x.clone()))?.tanh()?;
            functions::send(&comm, &h, 1, 3)?.backward()?;
            Ok(grads(&l1))
        } else {
            let h = functions::recv(&comm, 0, 3, None)?;
            let y = l2.forward(&h)?;
            F::sum(&(&y * &y)?)?.backward()?;
            Ok(grads(&l2))
        }
    }));
    for (g, w) in got[0].iter().zip(&want.0).chain(got[1].iter().zip(&want.1)) {
        for (u, v) in g.iter().zip(w) {
            assert!((u - v).abs() < 1e-14, "{u} vs {v}");
        }
    }
}

#[test]
fn allreduce_persistent_averages_the_running_statistics() {
    let got = all_ok(run_threads(4, "flat", |comm| {
        let bn = BatchNormalization::new(&[2], 0.9, 1e-5, DType::F32)?;
        let r = comm.rank() as f32;
        bn.avg_mean
            .set_array(Array::from_vec(vec![r, 2.0 * r], &[2])?)?;
        comm.allreduce_persistent(&bn)?;
        Ok((
            bn.avg_mean.array()?.to_vec::<f32>()?,
            bn.avg_var.array()?.to_vec::<f32>()?,
        ))
    }));
    for (mean, var) in got {
        assert_eq!(mean, vec![1.5, 3.0]);
        assert_eq!(var, vec![1.0, 1.0]);
    }
}

// ----- the exchange overlapped with backward -----

/// `check::accumulated_means` on 3 `flat` ranks, the exchange overlapped or not.
fn accumulated_means(overlap: bool, passes: usize, no_sync: bool) -> Vec<Vec<Vec<f64>>> {
    all_ok(run_threads_with(
        ThreadTransport::world(3),
        "flat",
        check::small_buckets(overlap),
        |comm| check::accumulated_means(&comm, passes, no_sync),
    ))
}

#[test]
fn the_overlapped_exchange_gives_the_mean_gradients_of_the_plain_one() {
    for passes in [1, 2, 3] {
        let plain = accumulated_means(false, passes, false);
        let overlapped = accumulated_means(true, passes, true);
        let dirty = accumulated_means(true, passes, false);
        // Every rank holds the same means, and they are those of the exchange after backward.
        for got in [&overlapped, &dirty] {
            for rank in got {
                assert_eq!(rank, &plain[0], "{passes} passes");
            }
        }
        // The unused parameter got the mean of nothing: zeros.
        assert_eq!(plain[0][4], vec![0.0, 0.0]);
    }
}

#[test]
fn buckets_are_exchanged_while_backward_runs_not_at_the_update() {
    let exposed = all_ok(run_threads_with(
        ThreadTransport::world(2),
        "flat",
        check::small_buckets(true),
        |comm| {
            let model = check::Net::new(1)?;
            let mut opt = create_multi_node_optimizer(SGD::new(), &comm);
            opt.setup(&model)?;
            let (x, t) = check::examples(0..4)?;
            model.loss(&x, &t)?.backward()?;
            // All buckets but the last were started by backward: given time, they finish
            // without the update, which then waits only for its own all-reduce of the last.
            std::thread::sleep(Duration::from_millis(300));
            opt.update(&model)?;
            let stats = opt.overlap_stats().unwrap();
            assert!(stats.allreduce > Duration::ZERO);
            Ok(stats.exposed)
        },
    ));
    for e in exposed {
        assert!(e < Duration::from_millis(150), "the update waited {e:?}");
    }
}

/// A transport that notes which thread runs each of its all-reduces (and those of its splits,
/// where the overlapped exchange runs), then hands the call on.
struct Noting {
    inner: Box<dyn Transport>,
    threads: Arc<Mutex<Vec<String>>>,
}

impl Noting {
    fn note(&self) {
        let name = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        self.threads.lock().unwrap().push(name);
    }
}

impl Transport for Noting {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn intra_rank(&self) -> usize {
        self.inner.intra_rank()
    }
    fn intra_size(&self) -> usize {
        self.inner.intra_size()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn allreduce_sum_f32(&self, op: &str, buf: &mut [f32]) -> kusari_mn::Result<()> {
        self.note();
        self.inner.allreduce_sum_f32(op, buf)
    }
    fn allreduce_sum_f64(&self, op: &str, buf: &mut [f64]) -> kusari_mn::Result<()> {
        self.note();
        self.inner.allreduce_sum_f64(op, buf)
    }
    fn bcast(&self, op: &str, buf: &mut Vec<u8>, root: usize) -> kusari_mn::Result<()> {
        self.inner.bcast(op, buf, root)
    }
    fn allgather(&self, op: &str, mine: &[u8]) -> kusari_mn::Result<Vec<Vec<u8>>> {
        self.inner.allgather(op, mine)
    }
    fn gather(
        &self,
        op: &str,
        mine: &[u8],
        root: usize,
    ) -> kusari_mn::Result<Option<Vec<Vec<u8>>>> {
        self.inner.gather(op, mine, root)
    }
    fn scatter(
        &self,
        op: &str,
        parts: Option<&[Vec<u8>]>,
        root: usize,
    ) -> kusari_mn::Result<Vec<u8>> {
        self.inner.scatter(op, parts, root)
    }
    fn alltoall(&self, op: &str, parts: &[Vec<u8>]) -> kusari_mn::Result<Vec<Vec<u8>>> {
        self.inner.alltoall(op, parts)
    }
    fn send(&self, op: &str, bytes: &[u8], dest: usize, tag: u16) -> kusari_mn::Result<()> {
        self.inner.send(op, bytes, dest, tag)
    }
    fn recv(&self, op: &str, source: usize, tag: u16) -> kusari_mn::Result<Vec<u8>> {
        self.inner.recv(op, source, tag)
    }
    fn split(&self, op: &str, color: u32, key: u32) -> kusari_mn::Result<Box<dyn Transport>> {
        Ok(Box::new(Noting {
            inner: self.inner.split(op, color, key)?,
            threads: self.threads.clone(),
        }))
    }
    fn abort(&self, code: i32) -> ! {
        self.inner.abort(code)
    }
}

/// The threads that ran each rank's all-reduces over `updates` steps of `check::Net` in
/// 4 buckets, overlapped, with or without double buffering.
fn allreduce_threads(double_buffering: bool, updates: usize) -> Vec<Vec<String>> {
    let ranks = ThreadTransport::world(2);
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|t| {
                s.spawn(move || -> kusari_mn::Result<Vec<String>> {
                    let threads = Arc::new(Mutex::new(Vec::new()));
                    let noting = Noting {
                        inner: Box::new(t),
                        threads: threads.clone(),
                    };
                    let comm = create_communicator_with(
                        "flat",
                        Box::new(noting),
                        check::small_buckets(true),
                    )?;
                    let model = check::Net::new(1)?;
                    assert_eq!(comm.buckets(&model).len(), 4);
                    let mut opt = create_multi_node_optimizer(SGD::new(), &comm)
                        .double_buffering(double_buffering);
                    opt.setup(&model)?;
                    let (x, t) = check::examples(0..4)?;
                    threads.lock().unwrap().clear();
                    for _ in 0..updates {
                        model.cleargrads();
                        model.loss(&x, &t)?.backward()?;
                        opt.update(&model)?;
                    }
                    // Dropped, the optimizer's communication thread finishes the exchanges
                    // still under way (double buffering leaves the last round's running).
                    drop(opt);
                    let noted = threads.lock().unwrap().clone();
                    Ok(noted)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    })
}

#[test]
fn the_bucket_complete_only_as_backward_ends_is_all_reduced_by_the_update_itself() {
    // Without double buffering the update needs the last bucket at once: handing it to the
    // communication thread would hide nothing and cost two thread switches.
    for (rank, threads) in allreduce_threads(false, 2).iter().enumerate() {
        let comm_thread = format!("kusari-mn allreduce, rank {rank}");
        assert_eq!(threads.len(), 8, "rank {rank}: {threads:?}");
        for (i, name) in threads.iter().enumerate() {
            let by_update = i % 4 == 3;
            assert_eq!(
                name != &comm_thread,
                by_update,
                "rank {rank}, all-reduce {i}: {threads:?}"
            );
        }
    }
    // With double buffering the update uses the previous round's means, so this round's
    // buckets, the last included, all travel on the communication thread.
    for (rank, threads) in allreduce_threads(true, 3).iter().enumerate() {
        let comm_thread = format!("kusari-mn allreduce, rank {rank}");
        assert_eq!(threads.len(), 12, "rank {rank}: {threads:?}");
        assert!(
            threads.iter().all(|t| t == &comm_thread),
            "rank {rank}: {threads:?}"
        );
    }
}

// ----- a model placed on several ranks -----

use kusari_mn::MultiNodeChainList;

/// Three layers seeded the same way in every process.
fn three_layers() -> (Linear, Linear, Linear) {
    kusari::random::seed(21);
    let l = |i, o| Linear::new(Some(i), o, false, DType::F64).unwrap();
    (l(3, 4), l(4, 4), l(4, 2))
}

fn grads_of(link: &dyn Link) -> Vec<Vec<f64>> {
    link.named_params()
        .iter()
        .map(|(_, p)| p.grad().unwrap().to_vec::<f64>().unwrap())
        .collect()
}

fn assert_close(got: &[Vec<f64>], want: &[Vec<f64>]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        for (u, v) in g.iter().zip(w) {
            assert!((u - v).abs() < 1e-14 * (1.0 + v.abs()), "{u} vs {v}");
        }
    }
}

#[test]
fn a_chain_through_two_ranks_and_back_gets_the_gradients_of_the_whole_model() {
    let x = Array::from_vec(seq(6, |i| (i as f64 * 0.9).cos()), &[2, 3]).unwrap();
    // One process: y = l3(tanh(l2(tanh(l1(x))))), loss = sum(y²).
    let (l1, l2, l3) = three_layers();
    let h = l1
        .forward(&Variable::constant(x.clone()))
        .unwrap()
        .tanh()
        .unwrap();
    let h = l2.forward(&h).unwrap().tanh().unwrap();
    let y = l3.forward(&h).unwrap();
    F::sum(&(&y * &y).unwrap()).unwrap().backward().unwrap();
    let want = [grads_of(&l1), grads_of(&l2), grads_of(&l3)];
    // Rank 0 holds l1 and l3, rank 1 holds l2.
    let got = all_ok(run_threads(2, "flat", |comm| {
        let (l1, l2, l3) = three_layers();
        let mut chain = MultiNodeChainList::new(&comm);
        if comm.rank() == 0 {
            chain.add_link(l1, |l, x| l.forward(x)?.tanh(), None, Some(1));
            chain.add_link(l3, Linear::forward, Some(1), None);
        } else {
            chain.add_link(l2, |l, x| l.forward(x)?.tanh(), Some(0), Some(0));
        }
        let y = chain.forward(&Variable::constant(x.clone()))?;
        if comm.rank() == 0 {
            F::sum(&(&y * &y)?)?.backward()?;
        } else {
            y.backward()?;
        }
        Ok(grads_of(&chain))
    }));
    assert_close(&got[0], &[want[0].clone(), want[2].clone()].concat());
    assert_close(&got[1], &want[1]);
}

#[test]
fn a_rank_that_sends_and_computes_a_loss_gets_both_gradients_from_one_backward() {
    let x = Array::from_vec(seq(6, |i| (i as f64 * 0.4).sin()), &[2, 3]).unwrap();
    // One process: loss = sum(l3'(x)²) + sum(l2(tanh(l1(x)))²), with l3' taking x (3 -> 2).
    let build = || {
        let (l1, l2, _) = three_layers();
        let l3 = Linear::new(Some(3), 2, false, DType::F64).unwrap();
        (l1, l2, l3)
    };
    let (l1, l2, l3) = build();
    let xv = Variable::constant(x.clone());
    let a = l3.forward(&xv).unwrap();
    let b = l2
        .forward(&l1.forward(&xv).unwrap().tanh().unwrap())
        .unwrap();
    let loss =
        (&F::sum(&(&a * &a).unwrap()).unwrap() + &F::sum(&(&b * &b).unwrap()).unwrap()).unwrap();
    loss.backward().unwrap();
    let want = [grads_of(&l1), grads_of(&l2), grads_of(&l3)];
    let got = all_ok(run_threads(2, "flat", |comm| {
        let (l1, l2, l3) = build();
        let mut chain = MultiNodeChainList::new(&comm);
        if comm.rank() == 0 {
            chain.add_link(l1, |l, x| l.forward(x)?.tanh(), None, Some(1));
            chain.add_link(l3, Linear::forward, None, None);
        } else {
            chain.add_link(l2, Linear::forward, Some(0), None);
        }
        let y = chain.forward(&Variable::constant(x.clone()))?;
        // Each rank's own loss; rank 0's backward also carries rank 1's gradient into l1.
        F::sum(&(&y * &y)?)?.backward()?;
        Ok(grads_of(&chain))
    }));
    assert_close(&got[0], &[want[0].clone(), want[2].clone()].concat());
    assert_close(&got[1], &want[1]);
}

#[test]
fn double_buffering_steps_with_the_previous_updates_mean_gradients() {
    for ranks in [2, 4] {
        let got = all_ok(run_threads_with(
            ThreadTransport::world(ranks),
            "flat",
            check::small_buckets(true),
            |comm| check::double_buffering_equivalence(&comm, 5, 8),
        ));
        for rel in got {
            assert!(rel < 1e-14, "{ranks} ranks: relative difference {rel:e}");
        }
    }
    // Without the overlapped exchange there is nothing to double-buffer.
    let got = run_threads_with(
        ThreadTransport::world(2),
        "naive",
        Options::default(),
        |comm| {
            let net = check::Net::new(1)?;
            let mut opt = create_multi_node_optimizer(SGD::new(), &comm).double_buffering(true);
            opt.setup(&net)
        },
    );
    for res in got {
        let msg = res.unwrap_err().to_string();
        assert!(
            msg.contains("double buffering needs the exchange overlapped"),
            "{msg}"
        );
    }
}
