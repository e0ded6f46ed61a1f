use kusari::link::Linear;
use kusari::prelude::*;

#[derive(Link)]
enum Layer {
    Dense(Linear),
    Identity,
}

fn main() {}
