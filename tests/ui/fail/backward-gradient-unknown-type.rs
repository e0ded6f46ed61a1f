//! A gradient of a type the macro cannot judge (it could be an alias of `Variable`): the
//! compiler's mismatch is reported at that type.
use kusari::prelude::*;

struct Grad;

struct Twice;

#[function_node]
impl Twice {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Grad) -> Result<Variable> {
        let _ = gy;
        unimplemented!()
    }
}

fn main() {}
