use kusari::link::Linear;
use kusari::prelude::*;

#[derive(Link)]
struct Mlp(Linear, Linear);

fn main() {}
