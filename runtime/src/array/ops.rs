//! Operators on arrays (see `ops_macros`).

use crate::Array;
use crate::ops_macros::impl_arith_ops;

impl_arith_ops!(Array);

#[cfg(test)]
mod tests {
    use crate::{Array, Result};

    #[test]
    fn operators_chain_through_results() -> Result<()> {
        let x = Array::from_vec(vec![1.0f64, 2.0], &[2])?;
        let y = Array::from_vec(vec![3.0f64, 4.0], &[2])?;
        let w = ((&x * &y + &x)? - 1.0)? / 2.0;
        assert_eq!(w?.to_vec::<f64>()?, vec![1.5, 4.5]);
        let r = (2.0 - &x)?;
        assert_eq!(r.to_vec::<f64>()?, vec![1.0, 0.0]);
        Ok(())
    }
}
