use kusari::link::Linear;
use kusari::prelude::*;

/// Fields that hold no parameters are marked `#[kusari(skip)]`; the empty struct is a link
/// with no parameters.
#[derive(Link)]
struct Dropout {
    #[kusari(skip)]
    ratio: f64,
    #[kusari(skip)]
    name: String,
    fc: Linear,
}

#[derive(Link)]
struct Identity;

#[test]
fn accepted_and_runs() -> Result<()> {
    let d = Dropout {
        ratio: 0.5,
        name: "dropout".to_string(),
        fc: Linear::new(Some(3), 2, false, DType::F32)?,
    };
    let paths: Vec<String> = d.named_params().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/fc/W", "/fc/b"]);
    assert_eq!((d.ratio, d.name.as_str()), (0.5, "dropout"));
    assert_eq!(Identity.count_params(), 0);
    Ok(())
}
