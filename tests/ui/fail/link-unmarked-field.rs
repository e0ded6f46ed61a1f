use kusari::link::Linear;
use kusari::prelude::*;

#[derive(Link)]
struct Mlp {
    l1: Linear,
    ratio: f64,
}

fn main() {}
