//! `#[retain(meta(..))]`: backward receives an input's shape, dtype and device as `&InputMeta`,
//! without its data, in `#[retain]` order among the retained values.
use kusari::prelude::*;

/// `a + b`, broadcasting: the gradients are summed back to the inputs' shapes.
struct BroadcastAdd;

#[function_node]
impl BroadcastAdd {
    #[retain(meta(a, b))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a + b
    }

    fn backward(
        &self,
        a: &InputMeta,
        b: &InputMeta,
        gy: &Variable,
    ) -> Result<(Variable, Variable)> {
        Ok((F::sum_to(gy, a.shape())?, F::sum_to(gy, b.shape())?))
    }
}

/// `a * b` for a constant `b`: `a`'s meta and `b`'s value, mixed in `#[retain]` order.
struct Scale;

#[function_node]
impl Scale {
    #[retain(meta(a), b)]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a * b
    }

    fn backward(
        &self,
        a: &InputMeta,
        b: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Variable, Option<Variable>)> {
        assert_eq!(a.dtype(), b.dtype());
        assert_eq!(needs, [0]);
        Ok((F::sum_to(&(gy * b)?, a.shape())?, None))
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let a = Variable::new(Array::zeros(&[2, 3], DType::F32)?);
    let b = Variable::new(Array::zeros(&[3], DType::F32)?);
    F::sum(&broadcast_add(&a, &b)?)?.backward()?;
    assert_eq!(
        a.grad_array().expect("a.grad").to_vec::<f32>()?,
        vec![1.0; 6]
    );
    assert_eq!(
        b.grad_array().expect("b.grad").to_vec::<f32>()?,
        vec![2.0; 3]
    );

    let x = Variable::new(Array::ones(&[2, 3], DType::F64)?);
    let s = Variable::constant(Array::full(&[3], 2.0, DType::F64)?);
    F::sum(&scale(&x, &s)?)?.backward()?;
    assert_eq!(
        x.grad_array().expect("x.grad").to_vec::<f64>()?,
        vec![2.0; 6]
    );
    Ok(())
}
