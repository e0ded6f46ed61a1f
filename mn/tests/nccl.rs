//! The `pure_nccl` communicator (feature `nccl`), its ranks threads of this process on emulated
//! devices, NCCL's calls going to kusari's NCCL stand-in (a test double enforcing NCCL's rules).
//! With `KUSARI_CUDA_EMULATE=0` and a GPU, `world_size_one_against_the_device_s_nccl` runs
//! against the real NCCL library (`.ci/gpu` does so).
#![cfg(feature = "nccl")]

use std::time::{Duration, Instant};

use kusari::link::optimizers::{Optimizer, SGD};
use kusari::link::{Linear, Link};
use kusari::prelude::*;
use kusari_mn::{
    Algorithm, Options, ThreadTransport, check, create_multi_node_optimizer, run_threads_with,
};

/// Whether NCCL (or its stand-in) can run `ranks` ranks here; prints why not, and fails instead
/// under `KUSARI_REQUIRE_GPU`. Without `KUSARI_CUDA_EMULATE` the process takes 4 emulated
/// devices.
fn can_run(test: &str, ranks: usize) -> bool {
    if std::env::var_os("KUSARI_CUDA_EMULATE").is_none() {
        kusari::cuda::emulate(4).unwrap();
    }
    let why = kusari::nccl::unavailable_reason().or_else(|| {
        let n = kusari::cuda::device_count();
        (n < ranks).then(|| format!("{ranks} ranks need {ranks} CUDA devices; there are {n}"))
    });
    match why {
        None => true,
        Some(why) if kusari::testing::gpu_required() => panic!(
            "{test}: {why} ({} is set, so it may not skip)",
            kusari::testing::REQUIRE_GPU_VAR
        ),
        Some(why) => {
            eprintln!("SKIPPED {test}: {why}");
            false
        }
    }
}

fn nccl_ranks<T: Send + std::fmt::Debug>(
    n: usize,
    options: Options,
    f: impl Fn(kusari_mn::Communicator) -> kusari_mn::Result<T> + Sync,
) -> Vec<T> {
    run_threads_with(ThreadTransport::world(n), "pure_nccl", options, f)
        .into_iter()
        .enumerate()
        .map(|(r, res)| res.unwrap_or_else(|e| panic!("rank {r}: {e}")))
        .collect()
}

#[test]
fn collectives_of_gpu_arrays_go_through_nccl() {
    if !can_run("collectives_of_gpu_arrays_go_through_nccl", 3) {
        return;
    }
    let got = nccl_ranks(3, Options::default(), |comm| {
        assert_eq!(comm.algorithm(), Algorithm::PureNccl);
        let (r, dev) = (comm.rank(), comm.device());
        assert_eq!(dev, Device::Cuda(r));
        let rf = r as f64;
        let mut sums = Vec::new();
        for dtype in [DType::F32, DType::F16, DType::I32, DType::F64] {
            let x = Array::from_vec(vec![rf, 1.0, -2.0 * rf], &[3])?
                .astype(dtype)?
                .to_device(dev)?;
            let s = comm.allreduce(&x)?;
            assert_eq!((s.device(), s.dtype()), (dev, dtype));
            sums.push(s.astype(DType::F64)?.to_vec::<f64>()?);
        }
        // The root's GPU array arrives on each rank's GPU.
        let x = Array::from_vec(vec![7.0f32 + r as f32, -1.0], &[2])?.to_device(dev)?;
        let b = comm.bcast((r == 2).then_some(&x), 2)?;
        assert_eq!(b.device(), dev);
        // One shape on every rank: NCCL's all-gather; per-rank shapes: the transport's.
        let g = comm.allgather(&Array::from_vec(vec![rf; 2], &[1, 2])?.to_device(dev)?)?;
        let uneven =
            comm.allgather(&Array::from_vec(vec![rf; r + 1], &[r + 1])?.to_device(dev)?)?;
        let gathered: Vec<Vec<f64>> = g
            .iter()
            .map(|a| a.to_vec::<f64>())
            .collect::<kusari::Result<_>>()?;
        let uneven: Vec<Vec<f64>> = uneven
            .iter()
            .map(|a| a.to_vec::<f64>())
            .collect::<kusari::Result<_>>()?;
        // Everything else (host arrays, objects, split) through the transport.
        check::collectives(&comm)?;
        Ok((sums, b.to_vec::<f32>()?, gathered, uneven))
    });
    for (sums, b, gathered, uneven) in got {
        for s in sums {
            assert_eq!(s, vec![3.0, 3.0, -6.0]);
        }
        assert_eq!(b, vec![9.0, -1.0]);
        assert_eq!(
            gathered,
            vec![vec![0.0, 0.0], vec![1.0, 1.0], vec![2.0, 2.0]]
        );
        assert_eq!(uneven, vec![vec![0.0], vec![1.0, 1.0], vec![2.0, 2.0, 2.0]]);
    }
}

/// `check::equivalence` with the model on each rank's GPU.
fn equivalence_on_gpus(ranks: usize, options: Options) -> Vec<f64> {
    nccl_ranks(ranks, options, |comm| {
        let _on = kusari::using_device(comm.device())?;
        check::equivalence(&comm, 4, 12)
    })
}

#[test]
fn pure_nccl_training_matches_one_process_with_the_whole_batch() {
    if !can_run(
        "pure_nccl_training_matches_one_process_with_the_whole_batch",
        3,
    ) {
        return;
    }
    // float64 parameters exchange float64 gradients: rounding level, during backward on
    // NCCL's stream (the default) or after it.
    for ranks in [2, 3] {
        for overlap in [true, false] {
            let options = Options {
                overlap,
                ..check::small_buckets(overlap)
            };
            for rel in equivalence_on_gpus(ranks, options) {
                assert!(
                    rel < 1e-13,
                    "{ranks} ranks, overlap {overlap}: relative difference {rel:e}"
                );
            }
        }
    }
    // float16 and bfloat16 on the wire: the gradients' rounding to 11 and 8 bits shows, and
    // is all that shows.
    for (dtype, bound) in [(DType::F32, 1e-6), (DType::F16, 3e-3), (DType::BF16, 2e-2)] {
        let options = Options {
            allreduce_grad_dtype: Some(dtype),
            ..Options::default()
        };
        for rel in equivalence_on_gpus(2, options) {
            assert!(
                rel < bound,
                "{dtype} on the wire: relative difference {rel:e}"
            );
            assert!(
                rel > 0.0 || dtype == DType::F32,
                "{dtype}: no rounding at all?"
            );
        }
    }
}

#[test]
fn host_parameters_are_refused_naming_the_parameter() {
    if !can_run("host_parameters_are_refused_naming_the_parameter", 2) {
        return;
    }
    // Overlapped, `setup` finds them; after backward, the update's exchange does.
    for overlap in [true, false] {
        let options = Options {
            overlap,
            ..Options::default()
        };
        let errs = run_threads_with(ThreadTransport::world(2), "pure_nccl", options, |comm| {
            let model = Linear::new(Some(3), 2, false, DType::F32)?;
            let mut opt = create_multi_node_optimizer(SGD::new(), &comm);
            opt.setup(&model)?;
            let x = Variable::constant(Array::ones(&[4, 3], DType::F32)?);
            F::sum(&model.forward(&x)?)?.backward()?;
            opt.update(&model)?;
            Ok(())
        });
        for e in errs {
            let e = e.unwrap_err().to_string();
            assert!(
                // Setup checks in parameter order, the exchange in bucket (reverse) order.
                e.contains(if overlap {
                    "parameter /W"
                } else {
                    "parameter /b"
                }) && e.contains("is on native:0")
                    && e.contains("use `flat`"),
                "overlap {overlap}: {e}"
            );
        }
    }
}

#[test]
fn pure_nccl_overlapped_exchange_gives_the_plain_ones_means() {
    if !can_run(
        "pure_nccl_overlapped_exchange_gives_the_plain_ones_means",
        3,
    ) {
        return;
    }
    let run = |overlap: bool, passes: usize, no_sync: bool| {
        nccl_ranks(3, check::small_buckets(overlap), |comm| {
            let _on = kusari::using_device(comm.device())?;
            check::accumulated_means(&comm, passes, no_sync)
        })
    };
    for passes in [1, 2, 3] {
        let plain = run(false, passes, false);
        // Every rank holds the same means, those of the exchange after backward, bit for bit:
        // clean (`no_sync`) or dirty (two passes outside it: exchanged again after backward).
        for got in [run(true, passes, true), run(true, passes, false)] {
            for rank in &got {
                assert_eq!(rank, &plain[0], "{passes} passes");
            }
        }
        // The parameter no loss uses got the mean of nothing: zeros.
        assert_eq!(plain[0][4], vec![0.0, 0.0]);
    }
}

#[test]
fn pure_nccl_starts_each_bucket_during_backward() {
    if !can_run("pure_nccl_starts_each_bucket_during_backward", 2) {
        return;
    }
    // Rank 1 waits between its backward and its update. Rank 0's update needs only rank 1's
    // backward, which started rank 1's half of every all-reduce: an exchange at the update
    // would keep rank 0 waiting for rank 1's update.
    let pause = Duration::from_millis(500);
    let took = nccl_ranks(2, check::small_buckets(true), |comm| {
        let _on = kusari::using_device(comm.device())?;
        let model = check::Net::new(1)?;
        model.to_device(comm.device())?;
        let mut opt = create_multi_node_optimizer(SGD::new(), &comm);
        opt.setup(&model)?;
        let (x, t) = check::examples(0..4)?;
        model.loss(&x, &t)?.backward()?;
        if comm.rank() == 1 {
            std::thread::sleep(pause);
        }
        let start = Instant::now();
        opt.update(&model)?;
        let took = start.elapsed();
        assert_eq!(opt.overlap_stats().map(|s| s.rounds), Some(1));
        Ok(took)
    });
    assert!(took[0] < pause / 2, "rank 0's update took {:?}", took[0]);
}

#[test]
fn pure_nccl_double_buffering_steps_with_the_previous_means() {
    if !can_run(
        "pure_nccl_double_buffering_steps_with_the_previous_means",
        4,
    ) {
        return;
    }
    for ranks in [2, 4] {
        let got = nccl_ranks(ranks, check::small_buckets(true), |comm| {
            let _on = kusari::using_device(comm.device())?;
            check::double_buffering_equivalence(&comm, 5, 8)
        });
        for rel in got {
            assert!(rel < 1e-13, "{ranks} ranks: relative difference {rel:e}");
        }
    }
}

#[test]
fn a_rank_without_a_gpu_fails_every_rank() {
    if !can_run("a_rank_without_a_gpu_fails_every_rank", 1) {
        return;
    }
    let n = kusari::cuda::device_count() + 1;
    let errs = run_threads_with(
        ThreadTransport::world(n),
        "pure_nccl",
        Options::default(),
        |_| Ok(()),
    );
    for e in errs {
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "rank {} cannot join: it takes cuda:{}",
                n - 1,
                n - 1
            )),
            "{e}"
        );
    }
}

#[test]
fn float16_on_the_wire_needs_pure_nccl() {
    let options = Options {
        allreduce_grad_dtype: Some(DType::F16),
        ..Options::default()
    };
    let errs = run_threads_with(ThreadTransport::world(1), "flat", options, |_| Ok(()));
    let e = errs[0].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("float16 and bfloat16 travel with `pure_nccl`"),
        "{e}"
    );
}

/// What `.ci/gpu` runs on a lent GPU (`KUSARI_CUDA_EMULATE=0`): one rank against the device's
/// NCCL library; elsewhere, against the stand-in.
#[test]
fn world_size_one_against_the_device_s_nccl() {
    if !can_run("world_size_one_against_the_device_s_nccl", 1) {
        return;
    }
    let got = nccl_ranks(1, Options::default(), |comm| {
        let dev = comm.device();
        let x = Array::from_vec(vec![1.5f32, -2.0, 3.25], &[3])?.to_device(dev)?;
        let s = comm.allreduce(&x)?;
        let _on = kusari::using_device(dev)?;
        let model = Linear::new(Some(3), 2, false, DType::F32)?;
        let mut opt = create_multi_node_optimizer(SGD::new().lr(0.5), &comm);
        opt.setup(&model)?;
        let before = model.named_params()[0].1.array()?.to_vec::<f32>()?;
        let xs = Variable::constant(Array::ones(&[4, 3], DType::F32)?);
        F::sum(&model.forward(&xs)?)?.backward()?;
        let grad = model.named_params()[0].1.grad().unwrap().to_vec::<f32>()?;
        comm.multi_node_mean_grad(&model)?;
        let mean = model.named_params()[0].1.grad().unwrap().to_vec::<f32>()?;
        opt.update(&model)?;
        let after = model.named_params()[0].1.array()?.to_vec::<f32>()?;
        // An all-reduce on NCCL's own stream (events against the device's stream), with
        // kernels queued on the device's stream meanwhile.
        let id = kusari::nccl::UniqueId::new()?;
        let own = kusari::nccl::NcclComm::new(dev, 1, 0, &id)?;
        let started = own.start_all_reduce(x.mul_scalar(2.0)?, kusari::nccl::ReduceOp::Sum)?;
        let beside = x.add_scalar(1.0)?;
        let started = started.wait()?.add(&beside)?.to_vec::<f32>()?;
        Ok((s.to_vec::<f32>()?, grad, mean, before, after, started))
    });
    let (s, grad, mean, before, after, started) = &got[0];
    assert_eq!(s, &vec![1.5, -2.0, 3.25]);
    // 2x + (x + 1) = 3x + 1.
    assert_eq!(started, &vec![5.5, -5.0, 10.75]);
    // d(sum of x W^T)/dW is the column sums of x: 4 everywhere; one rank's mean is itself.
    assert_eq!(grad, &vec![4.0; 6]);
    assert_eq!(mean, grad);
    for (b, a) in before.iter().zip(after) {
        assert_eq!(*a, b - 0.5 * 4.0);
    }
}
