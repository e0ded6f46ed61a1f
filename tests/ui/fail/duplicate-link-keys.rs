//! #[kusari(..)] keys given twice, in one attribute or across two: an error at each second key.
use kusari::link::Linear;
use kusari::prelude::*;

#[derive(Link)]
#[kusari(crate = "::kusari")]
#[kusari(crate = "::kusari")]
struct Mlp {
    l1: Linear,
    #[kusari(skip, skip)]
    ratio: f64,
    #[kusari(skip)]
    #[kusari(skip)]
    scale: f64,
}

fn main() {}
