//! Devices: a mismatch between devices is an error naming both, device queries, and the default
//! device.

use super::*;
use crate::kernels::SUM_DIFF;

#[track_caller]
fn assert_mismatch<T: std::fmt::Debug>(result: Result<T>, dev: Device, what: &str) {
    let err = result.expect_err(what);
    let Error::DeviceMismatch { lhs, rhs, .. } = err.root_cause() else {
        panic!("{what}: expected DeviceMismatch, got {err:?}");
    };
    let mut devices = [*lhs, *rhs];
    devices.sort_by_key(|d| d.to_string());
    let mut expected = [dev, Device::Cpu];
    expected.sort_by_key(|d| d.to_string());
    assert_eq!(devices, expected, "{what}: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&dev.to_string()) && msg.contains("native:0"),
        "{what}: the message names both devices: {msg}"
    );
}

#[test]
fn mixing_devices_is_a_device_mismatch() {
    let Some(dev) = gpu("mixing_devices_is_a_device_mismatch") else {
        return;
    };
    let _suite = shared();
    let h = values(&[3, 4], DType::F32, 1);
    let g = on(dev, &h);
    let cond = values(&[3, 4], DType::Bool, 2);
    let gcond = on(dev, &cond);
    assert_mismatch(g.add(&h), dev, "add");
    assert_mismatch(h.mul(&g), dev, "mul");
    assert_mismatch(g.pow(&h), dev, "pow");
    assert_mismatch(g.maximum(&h), dev, "maximum");
    assert_mismatch(g.lt(&h), dev, "lt");
    assert_mismatch(g.matmul(&h.t()), dev, "matmul");
    assert_mismatch(g.mul_add(&h, &g), dev, "mul_add");
    assert_mismatch(
        Array::where_cond(&cond, &g, &g),
        dev,
        "where with a host condition",
    );
    assert_mismatch(
        Array::where_cond(&gcond, &g, &h),
        dev,
        "where with a host operand",
    );
    if let Err(Error::DeviceMismatch { op, lhs, rhs }) = g.add(&h) {
        assert_eq!((op.as_str(), lhs, rhs), ("add", dev, Device::Cpu));
    }

    let (vg, vh) = (Variable::new(g.clone()), Variable::new(h.clone()));
    assert_mismatch(F::add(&vg, &vh), dev, "F::add");
    assert_mismatch(F::mul(&vh, &vg), dev, "F::mul");
    assert_mismatch(
        F::matmul(&vg, &F::transpose(&vh, None).unwrap()),
        dev,
        "F::matmul",
    );
    assert_mismatch(muladd_kernel::mul_add(&vg, &vh, &vg), dev, "MulAdd");
    assert_mismatch(Array::concat(&[&g, &h], 0), dev, "concat");
    assert_mismatch(Array::concat(&[&h, &g], 1), dev, "concat, the host first");
    assert_mismatch(Array::stack(&[&g, &h], 0), dev, "stack");
    assert_mismatch(F::concat(&[&vh, &vg], 0), dev, "F::concat");
    // A kernel launched on a mix of devices is refused too, naming both.
    let err = SUM_DIFF.launch(&[&g, &h], &[]).unwrap_err();
    assert!(
        matches!(&err, Error::DeviceMismatch { lhs, rhs, .. } if *lhs == dev && *rhs == Device::Cpu),
        "{err:?}"
    );
}

#[test]
fn device_queries_and_devices_that_do_not_exist() {
    let Some(dev) = gpu("device_queries_and_devices_that_do_not_exist") else {
        return;
    };
    let _suite = shared();
    let n = cuda::device_count();
    assert!(n >= 1);
    assert_eq!(cuda::unavailable_reason(), None);
    let (name, (major, minor)) = cuda::properties(0).unwrap();
    eprintln!("cuda:0 is {name}, compute capability {major}.{minor}, one of {n} device(s)");
    assert!(!name.is_empty());
    assert!(major >= 5, "compute capability {major}.{minor}");
    cuda::synchronize(dev).unwrap();
    cuda::synchronize(Device::Cpu).unwrap();

    let far = Device::Cuda(n + 1000);
    let x = values(&[2], DType::F32, 1);
    let err = x.to_device(far).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, Error::CudaUnavailable { op, .. } if op.contains(&far.to_string())),
        "{err:?}"
    );
    assert!(
        msg.contains(&far.to_string()) && msg.contains("does not exist"),
        "{msg}"
    );
    assert!(using_device(far).is_err());
    assert_eq!(default_device(), Device::Cpu);
    assert!(Array::zeros_on(&[2], DType::F32, far).is_err());
    assert!(cuda::properties(n + 1000).is_err());
    assert!(cuda::synchronize(far).is_err());
    // A GPU array cannot go there either.
    assert!(on(dev, &x).to_device(far).is_err());
}

#[test]
fn using_device_puts_new_arrays_on_the_gpu() {
    let Some(dev) = gpu("using_device_puts_new_arrays_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    assert_eq!(default_device(), Device::Cpu);
    let hx = smooth(&[6, 5], DType::F32, 3);
    let t = host(&[1.0, -1.0, 4.0, 0.0, 2.0, 2.0], &[6], DType::I64);
    let expected = F::softmax_cross_entropy(&Variable::new(hx.clone()), &t).unwrap();
    {
        let _gpu = using_device(dev).unwrap();
        assert_eq!(default_device(), dev);
        let a = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        assert_eq!(a.device(), dev);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        let r = Array::arange(0.0, 4.0, 1.0, DType::I64).unwrap();
        assert_eq!(r.device(), dev);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
        // The default is per thread: a new thread starts on the host.
        let there = std::thread::spawn(|| {
            let a = Array::arange(0.0, 2.0, 1.0, DType::F32).expect("arange");
            (default_device(), a.device())
        })
        .join()
        .expect("the thread ran");
        assert_eq!(there, (Device::Cpu, Device::Cpu));
        {
            let _cpu = using_device(Device::Cpu).unwrap();
            let b = Array::from_vec(vec![1i32], &[1]).unwrap();
            assert_eq!(b.device(), Device::Cpu);
        }
        assert_eq!(default_device(), dev);
        // Functions that build arrays from host values place them on the default device.
        let loss = F::softmax_cross_entropy(&Variable::new(on(dev, &hx)), &t).unwrap();
        assert_eq!(loss.device(), dev);
        close(
            loss.array(),
            expected.array(),
            tol(DType::F32, Math::Transcendental),
            "softmax_cross_entropy in a GPU scope",
        );
    }
    assert_eq!(default_device(), Device::Cpu);
    assert_eq!(
        Array::from_vec(vec![1.0f64], &[1]).unwrap().device(),
        Device::Cpu
    );
}
