use kusari::prelude::*;

struct Deref;

#[function_node(kernel(inputs = "T x", outputs = "T y", body = "y = *(&x);"))]
impl Deref {}

fn main() {}
