use kusari::prelude::*;

struct Triple;

#[function_node(kernel(
    inputs = "T x",
    outputs = "T y",
    body = "y = 0; for (int k = 0; k < 3; k++) y += x;"
))]
impl Triple {}

fn main() {}
