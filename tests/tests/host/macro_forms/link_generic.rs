use kusari::link::Linear;
use kusari::prelude::*;

/// A stack of any links, with a final layer of another type.
#[derive(Link)]
struct Stack<L, H: Link> {
    layers: Vec<L>,
    head: H,
}

/// A generic parameter that holds no parameters, skipped: it needs no bound.
#[derive(Link)]
struct Tagged<'a, T> {
    inner: Linear,
    #[kusari(skip)]
    tag: &'a T,
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let linear = |n| Linear::new(Some(n), n, true, DType::F64);
    let stack = Stack {
        layers: vec![linear(2)?, linear(3)?],
        head: Tagged {
            inner: linear(1)?,
            tag: &"head",
        },
    };
    let paths: Vec<String> = stack.named_params().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/layers/0/W", "/layers/1/W", "/head/inner/W"]);
    assert_eq!(stack.count_params(), 4 + 9 + 1);
    assert_eq!(
        *stack.head.tag, "head",
        "the skipped field is kept as it was"
    );
    Ok(())
}
