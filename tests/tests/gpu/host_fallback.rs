//! Host fallback: a function without a GPU forward runs its CPU forward on host copies, counted,
//! and refused where the configuration forbids it.

use super::*;

/// x³ with only a CPU forward: on CUDA inputs it runs on host copies (the host fallback).
struct Cube;

#[function_node]
impl Cube {
    #[retain(x)]
    fn forward_cpu(&self, x: &Array) -> Result<Array> {
        x.mul(&x.mul(x)?)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        F::mul(gy, &F::mul_scalar(&F::mul(x, x)?, 3.0)?)
    }
}

#[test]
fn functions_without_forward_gpu_fall_back_to_the_host() {
    let Some(dev) = gpu("functions_without_forward_gpu_fall_back_to_the_host") else {
        return;
    };
    let _suite = exclusive();
    let hx = smooth(&[3, 4], DType::F32, 1);
    let expected = cube(&Variable::new(hx.clone())).unwrap();
    let x = Variable::new(on(dev, &hx));
    let t = tol(DType::F32, Math::Arith);

    let before = cuda::host_fallback_count();
    let y = cube(&x).unwrap();
    assert_eq!(cuda::host_fallback_count(), before + 1);
    assert_eq!(
        y.device(),
        dev,
        "the fallback's output is moved back to {dev}"
    );
    close(y.array(), expected.array(), t, "Cube on the GPU");
    // Backward (written with built-ins) runs on the GPU with the retained GPU input.
    F::sum(&y).unwrap().backward().unwrap();
    let g = x.grad_array().expect("x.grad");
    assert_eq!(g.device(), dev);
    close(
        &g,
        &hx.mul(&hx).unwrap().mul_scalar(3.0).unwrap(),
        t,
        "Cube's gradient",
    );

    // Forbidden: a typed error naming the function and the device, and no copy.
    {
        let _strict = config::using_host_fallback(false);
        let err = cube(&x).unwrap_err();
        match err.root_cause() {
            Error::HostFallbackForbidden { function, device } => {
                assert_eq!(function, "Cube");
                assert_eq!(*device, dev);
            }
            other => panic!("expected HostFallbackForbidden, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("Cube") && msg.contains("cuda:0"), "{msg}");
        // Host inputs are not a fallback.
        cube(&Variable::new(hx.clone())).unwrap();
    }
    assert_eq!(cuda::host_fallback_count(), before + 1);
    // Allowed again once the guard drops.
    cube(&x).unwrap();
    assert_eq!(cuda::host_fallback_count(), before + 2);
}
