use kusari::prelude::*;

struct NoBody;

#[function_node(kernel(inputs = "T x", outputs = "T y"))]
impl NoBody {}

fn main() {}
