use kusari::prelude::*;

struct Helper;

#[function_node(kernel(
    inputs = "T x",
    outputs = "T y",
    preamble = "__device__ float sq(float v) { return v * v; }",
    dtypes = "float",
    body = "y = x * x"
))]
impl Helper {}

fn main() {}
