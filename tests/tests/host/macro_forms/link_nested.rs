use kusari::link::{EltwiseParamProduct, Linear};
use kusari::prelude::*;

#[derive(Link)]
struct Block {
    fc: Linear,
    gate: Option<Parameter>,
}

#[derive(Link)]
struct Model {
    encoder: Block,
    blocks: Vec<Block>,
    scale: EltwiseParamProduct,
    head: Option<Linear>,
}

fn block(gate: bool) -> Result<Block> {
    Ok(Block {
        fc: Linear::new(Some(2), 2, false, DType::F32)?,
        gate: gate
            .then(|| Parameter::with_shape(kusari::link::initializers::One, &[2], DType::F32))
            .transpose()?,
    })
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let model = Model {
        encoder: block(true)?,
        blocks: vec![block(false)?, block(true)?],
        scale: EltwiseParamProduct::new(&[2], DType::F32)?,
        head: None,
    };
    let paths: Vec<String> = model.named_params().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            "/encoder/fc/W",
            "/encoder/fc/b",
            "/encoder/gate",
            "/blocks/0/fc/W",
            "/blocks/0/fc/b",
            "/blocks/1/fc/W",
            "/blocks/1/fc/b",
            "/blocks/1/gate",
            "/scale/W",
        ]
    );
    Ok(())
}
