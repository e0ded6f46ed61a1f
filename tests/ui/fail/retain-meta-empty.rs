use kusari::prelude::*;

struct Identity;

#[function_node]
impl Identity {
    #[retain(meta())]
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(x.clone())
    }

    fn backward(&self, gy: &Variable) -> Variable {
        gy.clone()
    }
}

fn main() {}
