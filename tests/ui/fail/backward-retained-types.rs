//! A retained input taken as `&Array` and a retained output taken by value.
use kusari::prelude::*;

struct XExp;

#[function_node]
impl XExp {
    #[retain(x, output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x * &x.exp()?
    }

    fn backward(&self, x: &Array, z: Variable, gz: &Variable) -> Result<Variable> {
        let x = Variable::constant(x.clone());
        (&(&z / &x)? + &z)? * gz
    }
}

fn main() {}
