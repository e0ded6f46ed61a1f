//! The training example's model and training loop, imported from `kusari_examples::mlp_digits`
//! (what `examples/11_mlp_digits.rs` runs): a short training on the handwritten digits reaches a
//! stated accuracy, dropout acts in training mode only, and the example's leaky ReLU has the right
//! gradients and a CUDA kernel that compiles.

use kusari::gradient_check::{CheckOptions, check_backward};
use kusari::prelude::*;
use kusari::{config, random};
use kusari_examples::Digits;
use kusari_examples::mlp_digits::{LeakyRelu, Mlp, leaky_relu, train};
use kusari_kernels::compile::compile_ptx;

/// Five epochs instead of the example's twenty: 95.5% on the host; the example gets 97.2%.
#[test]
fn a_short_training_reaches_93_percent() -> Result<()> {
    let mut epochs = 0;
    let (losses, accuracy) = train(5, Device::Cpu, |_| epochs += 1)?;
    assert_eq!((epochs, losses.len()), (5, 5));
    assert!(losses[4] < losses[0] / 2.0, "the loss fell: {losses:?}");
    assert!(accuracy >= 0.93, "test accuracy {accuracy}");
    // Seeded: the same configuration trains to the same model.
    assert_eq!(train(5, Device::Cpu, |_| {})?, (losses, accuracy));
    Ok(())
}

#[test]
fn dropout_acts_in_training_mode_only() -> Result<()> {
    random::seed(0);
    let model = Mlp::new(16)?;
    let (x, _) = Digits::load()?.batch(&[0, 1, 2, 3])?;
    let x = Variable::constant(x);
    let scores = || -> Result<Vec<f32>> { model.forward(&x)?.array().to_vec() };
    assert_ne!(scores()?, scores()?, "a new dropout mask each time");
    let _test = config::using_train(false);
    assert_eq!(scores()?, scores()?, "no dropout in test mode");
    Ok(())
}

#[test]
fn leaky_relu_gradients_match_finite_differences() -> Result<()> {
    // Away from 0, where the function has no derivative.
    let x = Array::from_vec(vec![-2.0f64, -0.5, 0.3, 1.5, -1.0, 2.5], &[2, 3])?;
    let gy = Array::from_vec(vec![1.0f64, -0.5, 2.0, 0.25, -1.5, 1.0], &[2, 3])?;
    let options = CheckOptions::default();
    check_backward(|v| leaky_relu(&v[0], 0.1), &[x], Some(&[gy]), &options)
}

/// What the model runs on a GPU, compiled for Hopper in float32 (CI has NVRTC but no GPU).
#[test]
fn leaky_relu_kernel_compiles() -> Result<()> {
    if !kusari_tests::nvrtc_or_skip("leaky_relu_kernel_compiles") {
        return Ok(());
    }
    let x = Array::zeros(&[32, 64], DType::F32)?;
    for kernel in LeakyRelu::KERNELS {
        let source = kernel.source_for(&[&x])?;
        compile_ptx(&source, "compute_90").map_err(|e| Error::msg(e.to_string()))?;
    }
    Ok(())
}
