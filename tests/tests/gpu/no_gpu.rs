//! On a machine without a usable GPU (this one, CI's), every CUDA entry point returns a clear
//! error, [`Error::CudaUnavailable`] naming the operation, and never panics; host code is
//! unaffected. Each test that needs the GPU to be absent says it does not apply and returns where
//! one is present (the suite's other modules cover that machine). The default-device scoping
//! tests run everywhere.

use kusari::prelude::*;
use kusari::{ElementwiseKernel, config, cuda, default_device, using_device};
use kusari_examples::muladd_kernel;
use kusari_tests::{assert_close, uniform};

/// Whether this machine has no usable CUDA device; says otherwise that the test does not apply
/// (the suite's other modules cover a machine with one). Not a `SKIPPED` line: nothing is missing,
/// so `KUSARI_REQUIRE_GPU` and `.ci/gpu` do not count it as a skip.
fn no_gpu(test: &str) -> bool {
    if cuda::is_available() {
        eprintln!(
            "not applicable {test}: a CUDA device is present (the other gpu modules test it)"
        );
        return false;
    }
    true
}

/// Checks that `result` is `CudaUnavailable` for operation `op`, whose message contains every
/// one of `mentions`, and returns the message.
#[track_caller]
fn assert_unavailable<T: std::fmt::Debug>(
    result: Result<T>,
    op: &str,
    mentions: &[&str],
) -> String {
    let err = result.expect_err("CUDA is not available here");
    let Error::CudaUnavailable { op: actual, reason } = &err else {
        panic!("expected CudaUnavailable, got {err:?}");
    };
    assert_eq!(actual, op, "{err}");
    assert!(!reason.is_empty(), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(op), "the message names the operation: {msg}");
    assert!(msg.contains("CUDA is not available"), "{msg}");
    for m in mentions {
        assert!(msg.contains(m), "expected {m:?} in: {msg}");
    }
    msg
}

/// The reason CUDA is unavailable names the driver (or, in a build without the `cuda` feature,
/// the feature).
fn assert_names_driver_or_feature(reason: &str) {
    assert!(
        reason.contains("driver") || reason.contains("feature"),
        "the reason should name the driver or the feature: {reason}"
    );
}

#[test]
fn availability_is_reported_with_a_reason() {
    if !no_gpu("availability_is_reported_with_a_reason") {
        return;
    }
    assert!(!cuda::is_available());
    assert_eq!(cuda::device_count(), 0);
    let reason = cuda::unavailable_reason().expect("a reason without a GPU");
    assert_names_driver_or_feature(&reason);
    // Asking again gives the same answer (the probe is cached, never retried into a panic).
    assert_eq!(cuda::unavailable_reason(), Some(reason));
    assert_eq!(cuda::device_count(), 0);
}

#[test]
fn to_device_is_an_error_naming_the_device() {
    if !no_gpu("to_device_is_an_error_naming_the_device") {
        return;
    }
    let x = uniform(&[2, 3], 1).astype(DType::F32).unwrap();
    let msg = assert_unavailable(
        x.to_device(Device::Cuda(0)),
        "to_device(cuda:0)",
        &["cuda:0"],
    );
    assert_names_driver_or_feature(&msg);
    // Views, zero-size arrays and every dtype fail the same way.
    for a in [
        x.t(),
        x.flip(1).unwrap(),
        Array::zeros(&[0, 4], DType::F64).unwrap(),
        Array::scalar(true),
        Array::ones(&[3], DType::I64).unwrap(),
        Array::ones(&[3], DType::BF16).unwrap(),
    ] {
        assert_unavailable(a.to_device(Device::Cuda(0)), "to_device(cuda:0)", &[]);
    }
    // The host stays usable: to the host is the same array.
    let same = x.to_device(Device::Cpu).unwrap();
    assert!(same.shares_buffer(&x));
}

#[test]
fn a_device_far_beyond_the_count_is_named_in_the_error() {
    if !no_gpu("a_device_far_beyond_the_count_is_named_in_the_error") {
        return;
    }
    let x = Array::ones(&[2], DType::F32).unwrap();
    assert_unavailable(
        x.to_device(Device::Cuda(1000)),
        "to_device(cuda:1000)",
        &["cuda:1000"],
    );
    assert_unavailable(
        using_device(Device::Cuda(1000)),
        "using_device(cuda:1000)",
        &["cuda:1000"],
    );
    let e = "cuda:1000".parse::<Device>().unwrap();
    assert_eq!(e, Device::Cuda(1000));
    assert_unavailable(
        Array::zeros_on(&[2], DType::F32, e),
        "full_on(cuda:1000)",
        &[],
    );
    assert_unavailable(cuda::synchronize(e), "synchronize(cuda:1000)", &[]);
    assert_unavailable(cuda::properties(1000), "properties(cuda:1000)", &[]);
    assert_eq!(default_device(), Device::Cpu);
}

#[test]
fn full_on_and_zeros_on_a_gpu_are_errors() {
    if !no_gpu("full_on_and_zeros_on_a_gpu_are_errors") {
        return;
    }
    for dtype in DType::ALL {
        assert_unavailable(
            Array::full_on(&[2, 2], 3.0, dtype, Device::Cuda(0)),
            "full_on(cuda:0)",
            &[],
        );
        assert_unavailable(
            Array::zeros_on(&[2, 2], dtype, Device::Cuda(0)),
            "full_on(cuda:0)",
            &[],
        );
    }
    assert_unavailable(
        Array::zeros_on(&[0], DType::F32, Device::Cuda(0)),
        "full_on(cuda:0)",
        &[],
    );
    // On the host they work.
    let a = Array::full_on(&[2], 3.0, DType::I32, Device::Cpu).unwrap();
    assert_eq!(a.to_vec::<i32>().unwrap(), vec![3, 3]);
    let z = Array::zeros_on(&[2], DType::F64, Device::Cpu).unwrap();
    assert_eq!(z.to_vec::<f64>().unwrap(), vec![0.0, 0.0]);
}

#[test]
fn using_a_gpu_as_default_device_is_an_error_and_changes_nothing() {
    if !no_gpu("using_a_gpu_as_default_device_is_an_error_and_changes_nothing") {
        return;
    }
    assert_eq!(default_device(), Device::Cpu);
    let msg = assert_unavailable(
        using_device(Device::Cuda(0)),
        "using_device(cuda:0)",
        &["cuda:0"],
    );
    assert_names_driver_or_feature(&msg);
    assert_eq!(default_device(), Device::Cpu);
    // Inside a host scope too, and the scope still ends normally.
    {
        let _cpu = using_device(Device::Cpu).unwrap();
        assert!(using_device(Device::Cuda(0)).is_err());
        assert_eq!(default_device(), Device::Cpu);
        let a = Array::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        assert_eq!(a.device(), Device::Cpu);
    }
    assert_eq!(default_device(), Device::Cpu);
}

#[test]
fn synchronize_and_properties_are_errors_for_a_gpu() {
    if !no_gpu("synchronize_and_properties_are_errors_for_a_gpu") {
        return;
    }
    let msg = assert_unavailable(
        cuda::synchronize(Device::Cuda(0)),
        "synchronize(cuda:0)",
        &[],
    );
    assert_names_driver_or_feature(&msg);
    let msg = assert_unavailable(cuda::properties(0), "properties(cuda:0)", &[]);
    assert_names_driver_or_feature(&msg);
    // Synchronizing the host is a no-op.
    cuda::synchronize(Device::Cpu).unwrap();
}

#[test]
fn launching_a_kernel_on_host_arrays_is_an_error() {
    if !no_gpu("launching_a_kernel_on_host_arrays_is_an_error") {
        return;
    }
    static AXPY: ElementwiseKernel =
        ElementwiseKernel::new("axpy", "T x, T y", "T w", "T a", "w = a * x + y;");
    let x = Array::ones(&[3], DType::F32).unwrap();
    let msg = assert_unavailable(
        AXPY.launch(&[&x, &x], &[2.0.into()]),
        "kernel axpy",
        &["native:0"],
    );
    assert!(msg.contains("to_device"), "the message says how: {msg}");
    // Argument errors come first, and are not CudaUnavailable.
    let e = AXPY.launch(&[&x, &x], &[]).unwrap_err();
    assert!(e.to_string().contains("scalar parameter"), "{e}");
    let y = Array::ones(&[3], DType::F64).unwrap();
    let e = AXPY.launch(&[&x, &y], &[2.0.into()]).unwrap_err();
    assert!(!matches!(e, Error::CudaUnavailable { .. }), "{e:?}");
    assert!(
        e.to_string().contains("`T` was bound to float32 by `x`"),
        "{e}"
    );
    // The source is still generated (no GPU needed for that).
    let src = AXPY.source_for(&[&x, &x]).unwrap();
    assert_eq!(src.entry, "axpy__contiguous_i32");
}

#[test]
fn forward_gpu_ops_run_their_cpu_forward_on_host_arrays() -> Result<()> {
    if !no_gpu("forward_gpu_ops_run_their_cpu_forward_on_host_arrays") {
        return Ok(());
    }
    let fallbacks = cuda::host_fallback_count();
    let xs: Vec<Variable> = (0..3)
        .map(|k| Variable::new(uniform(&[2, 3], 10 + k)))
        .collect();
    let w = muladd_kernel::mul_add(&xs[0], &xs[1], &xs[2])?;
    assert_eq!(w.device(), Device::Cpu);
    let expected = xs[0].array().mul_add(xs[1].array(), xs[2].array())?;
    assert_close(w.array(), &expected, 0.0, 0.0);
    F::sum(&w)?.backward()?;
    assert_close(&xs[0].grad_array().expect("gx"), xs[1].array(), 0.0, 0.0);
    assert_close(&xs[1].grad_array().expect("gy"), xs[0].array(), 0.0, 0.0);
    // The built-ins with kernels, too.
    let e = F::exp(&xs[0])?;
    assert_close(e.array(), &xs[0].array().exp()?, 0.0, 0.0);
    // Forbidding the host fallback changes nothing for host inputs.
    {
        let _strict = config::using_host_fallback(false);
        muladd_kernel::mul_add(&xs[0], &xs[1], &xs[2])?;
    }
    assert_eq!(cuda::host_fallback_count(), fallbacks);

    // Called directly, the generated forward_gpu checks its inputs and reports no CUDA.
    let arrays: Vec<Array> = xs.iter().map(|v| v.array().clone()).collect();
    let err = FunctionNode::forward_gpu(
        &mut muladd_kernel::MulAdd,
        &mut ForwardContext::default(),
        &arrays,
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::CudaUnavailable { op, .. } if op == "kernel muladd_fwd"),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn nothing_was_launched_or_loaded() {
    if !no_gpu("nothing_was_launched_or_loaded") {
        return;
    }
    // Whatever the other tests of this binary tried, no kernel reached a device.
    let x = Array::ones(&[2], DType::F32).unwrap();
    assert!(x.to_device(Device::Cuda(0)).is_err());
    let stats = cuda::kernel_stats();
    assert_eq!(stats.launches, 0, "{stats:?}");
    assert_eq!(stats.module_loads, 0, "{stats:?}");
    assert_eq!(cuda::host_fallback_count(), 0);
}

// ----- the default device (needs no GPU) -----

#[test]
fn new_arrays_land_on_the_default_device() -> Result<()> {
    assert_eq!(default_device(), Device::Cpu);
    let _cpu = using_device(Device::Cpu)?;
    assert_eq!(default_device(), Device::Cpu);
    let a = Array::from_vec(vec![1i32, 2, 3], &[3])?;
    assert_eq!(a.device(), default_device());
    let r = Array::arange(0.0, 3.0, 1.0, DType::F64)?;
    assert_eq!(r.device(), default_device());
    assert_eq!(r.to_vec::<f64>()?, vec![0.0, 1.0, 2.0]);
    Ok(())
}

#[test]
fn the_guard_restores_the_previous_default_on_drop() -> Result<()> {
    assert_eq!(default_device(), Device::Cpu);
    {
        let outer = using_device(Device::Cpu)?;
        {
            let _inner = using_device(Device::Cpu)?;
            assert_eq!(default_device(), Device::Cpu);
        }
        assert_eq!(default_device(), Device::Cpu);
        drop(outer);
    }
    assert_eq!(default_device(), Device::Cpu);
    // With a GPU, a CUDA scope inside a host scope ends back on the host.
    if cuda::is_available() {
        let _cpu = using_device(Device::Cpu)?;
        {
            let _gpu = using_device(Device::Cuda(0))?;
            assert_eq!(default_device(), Device::Cuda(0));
            assert_eq!(
                Array::from_vec(vec![1.0f32], &[1])?.device(),
                Device::Cuda(0)
            );
        }
        assert_eq!(default_device(), Device::Cpu);
        assert_eq!(Array::from_vec(vec![1.0f32], &[1])?.device(), Device::Cpu);
    }
    Ok(())
}

#[test]
fn the_default_device_is_per_thread() -> Result<()> {
    let _cpu = using_device(Device::Cpu)?;
    let gpu = cuda::is_available();
    let _gpu = if gpu {
        Some(using_device(Device::Cuda(0))?)
    } else {
        None
    };
    let here = default_device();
    let there = std::thread::spawn(|| {
        let a = Array::arange(0.0, 2.0, 1.0, DType::F32).expect("arange");
        (default_device(), a.device())
    })
    .join()
    .expect("the thread ran");
    // A new thread starts on the host whatever this thread's scope says.
    assert_eq!(there, (Device::Cpu, Device::Cpu));
    assert_eq!(here, if gpu { Device::Cuda(0) } else { Device::Cpu });
    Ok(())
}
