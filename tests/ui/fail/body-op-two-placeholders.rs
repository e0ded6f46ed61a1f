use kusari::prelude::*;

struct Mixed;

#[function_node(kernel(inputs = "T x, U y", outputs = "T z", body = "z = x * y"))]
impl Mixed {}

fn main() {}
