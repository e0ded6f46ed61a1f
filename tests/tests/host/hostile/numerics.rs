//! Half-precision means of many elements, and scalars an integer array cannot hold.

use kusari::Error;
use kusari::prelude::*;

/// float16 and bfloat16 means are summed and divided in float32 and rounded once: the mean of
/// 100,000 ones is 1 (the float16 sum overflows at 65,504, and 100,000 itself is not a float16).
#[test]
fn half_precision_means_of_many_elements() -> Result<()> {
    for dtype in [DType::F16, DType::BF16] {
        let ones = Array::ones(&[100_000], dtype)?;
        assert_eq!(ones.mean()?.to_f64_vec()?, vec![1.0], "{dtype}");
        let v = Variable::new(ones);
        let m = F::mean(&v)?;
        assert_eq!(m.array().to_f64_vec()?, vec![1.0], "F::mean {dtype}");
        // Its gradient is 1/n in every element (rounded to the dtype).
        m.backward()?;
        let g = v.grad_array().unwrap().to_f64_vec()?;
        let expected = Array::full(&[1], 1e-5, dtype)?.to_f64_vec()?[0];
        assert!(g.iter().all(|&x| x == expected), "{dtype}: {:?}", &g[..3]);
        // 70,000 halves: the divisor 70,000 overflows float16 (it used to give 0).
        let halves = Array::full(&[70_000], 0.5, dtype)?;
        assert_eq!(halves.mean()?.to_f64_vec()?, vec![0.5], "{dtype}");
        // Over an axis, with keepdims.
        let rows = Array::full(&[2, 80_000], 2.0, dtype)?;
        let m = rows.mean_axes(&[1], true)?;
        assert_eq!((m.shape(), m.to_f64_vec()?), (&[2, 1][..], vec![2.0, 2.0]));
    }
    Ok(())
}

#[test]
fn fractional_scalars_on_integer_arrays_are_errors() -> Result<()> {
    let a = Array::from_vec(vec![4i32, 6], &[2])?;
    for (what, r) in [
        ("div", &a / 0.5),
        ("mul", &a * 0.5),
        ("add", &a + 0.25),
        ("sub", &a - f64::NAN),
        ("mul", &a * f64::INFINITY),
        ("add", &a + 1e10),
    ] {
        match r {
            Err(e @ Error::ScalarNotRepresentable { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.starts_with(what) && msg.contains("int32[2]") && msg.contains("astype"),
                    "{msg}"
                );
            }
            other => panic!("{what}: expected ScalarNotRepresentable, got {other:?}"),
        }
    }
    let b = Array::from_vec(vec![4i64, 6], &[2])?;
    assert!((&b * 9.3e18).is_err(), "out of int64's range");
    // Integral scalars are exact and allowed.
    assert_eq!((&a * 2.0)?.to_vec::<i32>()?, vec![8, 12]);
    assert_eq!((&a / 2.0)?.to_vec::<i32>()?, vec![2, 3]);
    assert_eq!(
        (&b + (-(2f64.powi(62))))?.to_vec::<i64>()?[0],
        4 - (1 << 62)
    );
    // Through the differentiable functions too.
    let v = Variable::constant(a.clone());
    assert!(F::mul_scalar(&v, 0.5).is_err());
    Ok(())
}

/// Comparisons take the scalar exactly (NumPy): `[0, 1] > -0.5` is `[true, true]`, where the
/// scalar truncated to 0 gave `[false, true]`.
#[test]
fn comparisons_with_scalars_the_dtype_cannot_hold_are_exact() -> Result<()> {
    let a = Array::from_vec(vec![-1i32, 0, 1], &[3])?;
    assert_eq!(
        a.gt_scalar(-0.5)?.to_vec::<bool>()?,
        vec![false, true, true]
    );
    assert_eq!(
        a.gt_scalar(0.5)?.to_vec::<bool>()?,
        vec![false, false, true]
    );
    assert_eq!(a.gt_scalar(-1e30)?.to_vec::<bool>()?, vec![true; 3]);
    assert_eq!(a.gt_scalar(1e30)?.to_vec::<bool>()?, vec![false; 3]);
    assert_eq!(a.gt_scalar(f64::NAN)?.to_vec::<bool>()?, vec![false; 3]);
    let flags = Array::from_vec(vec![false, true], &[2])?;
    assert_eq!(flags.gt_scalar(0.5)?.to_vec::<bool>()?, vec![false, true]);
    // 0.1 is not a float16; the float16 nearest 0.1 lies below it, the next one above.
    let h = Array::from_vec(vec![0.1f64, 0.10004], &[2])?.astype(DType::F16)?;
    let hv = h.to_f64_vec()?;
    assert!(hv[0] < 0.1 && hv[1] > 0.1, "{hv:?}");
    assert_eq!(h.gt_scalar(0.1)?.to_vec::<bool>()?, vec![false, true]);
    assert_eq!(h.gt_scalar(hv[0])?.to_vec::<bool>()?, vec![false, true]);
    // 0.10003 rounds up to the second element: rounded, `x > s` would be `x > x`.
    assert_eq!(h.gt_scalar(0.10003)?.to_vec::<bool>()?, vec![false, true]);
    Ok(())
}

/// The same answers from a CUDA device (the emulated one in CI): half-precision means, refused
/// fractional scalars, exact comparisons.
#[test]
fn the_cuda_device_gives_the_same_answers() -> Result<()> {
    let Some(gpu) = kusari::testing::cuda_or_skip("hostile numerics on CUDA")? else {
        return Ok(());
    };
    for dtype in [DType::F16, DType::BF16] {
        let ones = Array::ones(&[100_000], dtype)?.to_device(gpu)?;
        let m = ones.mean()?;
        assert_eq!((m.device(), m.to_f64_vec()?), (gpu, vec![1.0]), "{dtype}");
        let halves = Array::full(&[70_000], 0.5, dtype)?.to_device(gpu)?;
        let m = F::mean(&Variable::new(halves))?;
        assert_eq!(m.array().to_f64_vec()?, vec![0.5], "F::mean {dtype}");
    }
    let a = Array::from_vec(vec![-1i32, 0, 1], &[3])?.to_device(gpu)?;
    assert!(matches!(
        &a * 0.5,
        Err(Error::ScalarNotRepresentable { .. })
    ));
    assert_eq!((&a * 3.0)?.to_vec::<i32>()?, vec![-3, 0, 3]);
    assert_eq!(
        a.gt_scalar(-0.5)?.to_vec::<bool>()?,
        vec![false, true, true]
    );
    let h = Array::from_vec(vec![0.1f64, 0.10004], &[2])?
        .astype(DType::F16)?
        .to_device(gpu)?;
    assert_eq!(h.gt_scalar(0.10003)?.to_vec::<bool>()?, vec![false, true]);
    Ok(())
}
