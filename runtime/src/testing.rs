//! A declarative test of an op (Chainer's `FunctionTestCase`): give an input generator, the
//! function and the expected forward in ndarray, and [`op_tests!`](crate::op_tests) generates the
//! tests:
//!
//! - `forward`: the outputs match the expected ones, and forward leaves its inputs unchanged;
//! - `backward`: [`check_backward`];
//! - `double_backward`: [`check_double_backward`].
//!
//! Each runs on the host and, when one exists, on `cuda:0` (printing why it skips otherwise), in
//! float32 and float64, with C-contiguous inputs, transposed views and negative-stride views.
//! An op with a non-differentiable point can ask for inputs drawn away from it
//! ([`OpTest::avoid`]); the draw is retried a bounded number of times.
//!
//! ```
//! use kusari::prelude::*;
//! use kusari::testing::OpTest;
//!
//! let relu = OpTest::new("relu", |rng, dtype| vec![Array::uniform(&[3, 4], -1.0, 1.0, dtype, rng).unwrap()])
//!     .forward(|x| F::relu(&x[0]))
//!     .expected(|x| vec![x[0].mapv(|v| v.max(0.0))])
//!     // The kink at 0: finite differences across it are wrong, so draw inputs away from it.
//!     .avoid(|x| x[0].iter().any(|v| v.abs() < 0.01));
//! relu.check_forward().unwrap();
//! relu.check_backward().unwrap();
//! relu.check_double_backward().unwrap();
//! ```

use ndarray::ArrayD;

use crate::error::{Error, Result};
use crate::gradient_check::{CheckOptions, assert_allclose, check_backward, check_double_backward};
use crate::random::Rng;
use crate::{Array, DType, Device, Variable};

type Generate = Box<dyn Fn(&mut Rng, DType) -> Vec<Array>>;
type Forward = Box<dyn Fn(&[Variable]) -> Result<Vec<Variable>>>;
type Expected = Box<dyn Fn(&[ArrayD<f64>]) -> Vec<ArrayD<f64>>>;
type Avoid = Box<dyn Fn(&[ArrayD<f64>]) -> bool>;

/// How many times inputs are drawn again while [`OpTest::avoid`] rejects them.
pub const MAX_RESAMPLES: usize = 20;

/// How inputs are laid out in memory for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputLayout {
    /// C-contiguous.
    Contiguous,
    /// The same values as a transposed view of a buffer laid out the other way.
    Transposed,
    /// The same values as a view with a negative stride on the first axis.
    Flipped,
}

impl InputLayout {
    /// Every layout.
    pub const ALL: [InputLayout; 3] = [
        InputLayout::Contiguous,
        InputLayout::Transposed,
        InputLayout::Flipped,
    ];

    /// `a` with the same values, laid out this way (arrays of fewer than two elements, or of
    /// rank 0, stay as they are).
    pub fn apply(self, a: &Array) -> Result<Array> {
        if a.ndim() == 0 || a.size() < 2 {
            return Ok(a.clone());
        }
        match self {
            InputLayout::Contiguous => a.contiguous(),
            InputLayout::Transposed => a.t().contiguous().map(|c| c.t()),
            InputLayout::Flipped => a.flip(0)?.contiguous()?.flip(0),
        }
    }
}

/// One op under test: see the [module docs](self).
pub struct OpTest {
    name: String,
    generate: Generate,
    forward: Option<Forward>,
    expected: Option<Expected>,
    avoid: Option<Avoid>,
    dtypes: Vec<DType>,
    layouts: Vec<InputLayout>,
    no_grads: Option<Vec<bool>>,
    /// The gradient checks' numerical dtype, when not the default float64.
    numerical_dtype: Option<Option<DType>>,
    forward_tol: [(f64, f64); 2],
    backward_tol: [(f64, f64); 2],
    double_backward: bool,
    seed: u64,
}

/// Where a check failed: the op, the device, the dtype and the layout, then the error.
fn context(name: &str, device: Device, dtype: DType, layout: InputLayout, e: Error) -> Error {
    Error::OpTestCase {
        name: name.to_string(),
        device,
        dtype,
        layout: format!("{layout:?}"),
        source: Box::new(e),
    }
}

impl OpTest {
    /// A test of the op `name` whose inputs `generate` draws (on the host) for a dtype.
    /// Integer inputs (labels, indexes) keep their own dtype and get no gradient.
    pub fn new(name: &str, generate: impl Fn(&mut Rng, DType) -> Vec<Array> + 'static) -> Self {
        OpTest {
            name: name.to_string(),
            generate: Box::new(generate),
            forward: None,
            expected: None,
            avoid: None,
            dtypes: vec![DType::F32, DType::F64],
            layouts: InputLayout::ALL.to_vec(),
            no_grads: None,
            numerical_dtype: None,
            forward_tol: [(1e-5, 1e-4), (1e-12, 1e-10)],
            backward_tol: [(1e-3, 1e-2), (1e-6, 1e-5)],
            double_backward: true,
            seed: 0,
        }
    }

    /// The function under test, on variables (one output, or several through a `Vec`).
    pub fn forward<O: crate::gradient_check::IntoOutputs<Variable>>(
        mut self,
        f: impl Fn(&[Variable]) -> Result<O> + 'static,
    ) -> Self {
        self.forward = Some(Box::new(move |v| f(v).map(|o| o.into_outputs())));
        self
    }

    /// The expected outputs, computed independently in float64 from the inputs' values.
    pub fn expected(mut self, f: impl Fn(&[ArrayD<f64>]) -> Vec<ArrayD<f64>> + 'static) -> Self {
        self.expected = Some(Box::new(f));
        self
    }

    /// Rejects drawn inputs for which `reject` is true (near a non-differentiable point); they
    /// are drawn again, at most [`MAX_RESAMPLES`] times.
    pub fn avoid(mut self, reject: impl Fn(&[ArrayD<f64>]) -> bool + 'static) -> Self {
        self.avoid = Some(Box::new(reject));
        self
    }

    /// The float dtypes to test (default float32 and float64).
    pub fn dtypes(mut self, dtypes: &[DType]) -> Self {
        self.dtypes = dtypes.to_vec();
        self
    }

    /// Inputs that get no gradient (see [`CheckOptions::no_grads`]).
    pub fn no_grads(mut self, no_grads: &[bool]) -> Self {
        self.no_grads = Some(no_grads.to_vec());
        self
    }

    /// Tolerances `(atol, rtol)` of the backward checks, for float32 and for float64.
    pub fn backward_tolerance(mut self, f32: (f64, f64), f64: (f64, f64)) -> Self {
        self.backward_tol = [f32, f64];
        self
    }

    /// Tolerances `(atol, rtol)` of the forward check, for float32 and for float64.
    pub fn forward_tolerance(mut self, f32: (f64, f64), f64: (f64, f64)) -> Self {
        self.forward_tol = [f32, f64];
        self
    }

    /// The dtype the gradient checks evaluate finite differences in: by default float64 (the
    /// inputs are cast), `None` for each input's own dtype — for an op that takes only some
    /// dtypes, such as a kernel declared for `float32`.
    pub fn numerical_dtype(mut self, dtype: Option<DType>) -> Self {
        self.numerical_dtype = Some(dtype);
        self
    }

    /// Skips the double-backward check (for ops whose gradient is not differentiable).
    pub fn no_double_backward(mut self) -> Self {
        self.double_backward = false;
        self
    }

    /// The seed inputs are drawn with (default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    fn f(&self) -> Result<&Forward> {
        self.forward.as_ref().ok_or_else(|| Error::OpTest {
            name: self.name.clone(),
            msg: "no forward was given".to_string(),
        })
    }

    /// Inputs for `dtype`, drawn until `avoid` accepts them.
    fn draw(&self, dtype: DType) -> Result<Vec<Array>> {
        let mut rng = Rng::seed(self.seed);
        for _ in 0..=MAX_RESAMPLES {
            let inputs = (self.generate)(&mut rng, dtype);
            match &self.avoid {
                Some(reject) if reject(&as_f64(&inputs)?) => continue,
                _ => return Ok(inputs),
            }
        }
        Err(Error::OpTest {
            name: self.name.clone(),
            msg: format!(
                "{MAX_RESAMPLES} draws of the inputs all fell near a point `avoid` rejects; \
                 change the generator"
            ),
        })
    }

    fn tol(table: &[(f64, f64); 2], dtype: DType) -> (f64, f64) {
        if dtype == DType::F64 {
            table[1]
        } else {
            table[0]
        }
    }

    /// Runs `check` for every device, dtype and layout, with the inputs on that device and in
    /// that layout.
    fn each(&self, check: impl Fn(&[Array], DType) -> Result<()>) -> Result<()> {
        let mut devices = vec![Device::Cpu];
        devices.extend(cuda_or_skip(&format!("{} on cuda:0", self.name))?);
        for &device in &devices {
            for &dtype in &self.dtypes {
                let drawn = self.draw(dtype)?;
                for &layout in &self.layouts {
                    let inputs = drawn
                        .iter()
                        .map(|a| layout.apply(&a.to_device(device)?))
                        .collect::<Result<Vec<Array>>>()
                        .map_err(|e| context(&self.name, device, dtype, layout, e))?;
                    check(&inputs, dtype)
                        .map_err(|e| context(&self.name, device, dtype, layout, e))?;
                }
            }
        }
        Ok(())
    }

    /// Forward against the expected outputs, and the inputs unchanged by it.
    pub fn check_forward(&self) -> Result<()> {
        let f = self.f()?;
        let expected = self.expected.as_ref().ok_or_else(|| Error::OpTest {
            name: self.name.clone(),
            msg: "no expected forward was given".to_string(),
        })?;
        self.each(|inputs, dtype| {
            let before = as_f64(inputs)?;
            let vars: Vec<Variable> = inputs.iter().cloned().map(Variable::new).collect();
            let outputs = f(&vars)?;
            let want = expected(&before);
            if outputs.len() != want.len() {
                return Err(Error::OpTest {
                    name: self.name.clone(),
                    msg: format!(
                        "forward returned {} output(s), the expected forward {}",
                        outputs.len(),
                        want.len()
                    ),
                });
            }
            let (atol, rtol) = Self::tol(&self.forward_tol, dtype);
            for (i, (y, w)) in outputs.iter().zip(want).enumerate() {
                assert_allclose(y.array(), &Array::from_ndarray(w), atol, rtol).map_err(|e| {
                    Error::OpTest {
                        name: self.name.clone(),
                        msg: format!("output {i}: {e}"),
                    }
                })?;
            }
            if as_f64(inputs)? != before {
                return Err(Error::OpTest {
                    name: self.name.clone(),
                    msg: "forward changed its inputs".to_string(),
                });
            }
            Ok(())
        })
    }

    fn options(&self, dtype: DType) -> CheckOptions {
        let (atol, rtol) = Self::tol(&self.backward_tol, dtype);
        let mut o = CheckOptions::default()
            .atol(atol)
            .rtol(rtol)
            .seed(self.seed);
        if let Some(n) = &self.no_grads {
            o = o.no_grads(n);
        }
        if let Some(d) = self.numerical_dtype {
            o = o.dtype(d);
        }
        o
    }

    /// Output gradients drawn like the outputs (ones are avoided so that mistakes in scaling
    /// show).
    fn grad_outputs(&self, inputs: &[Array], salt: u64) -> Result<Vec<Array>> {
        let f = self.f()?;
        let vars: Vec<Variable> = inputs.iter().cloned().map(Variable::new).collect();
        let mut rng = Rng::seed(self.seed ^ salt);
        f(&vars)?
            .iter()
            .map(|y| {
                Array::uniform(y.shape(), -1.0, 1.0, y.dtype(), &mut rng)?.to_device(y.device())
            })
            .collect()
    }

    /// [`check_backward`] with random output gradients.
    pub fn check_backward(&self) -> Result<()> {
        let f = self.f()?;
        self.each(|inputs, dtype| {
            let gys = self.grad_outputs(inputs, 0x9e37)?;
            check_backward(
                |v: &[Variable]| f(v),
                inputs,
                Some(&gys),
                &self.options(dtype),
            )
        })
    }

    /// [`check_double_backward`] with random output gradients and second-order gradients
    /// (a success without running when [`no_double_backward`](Self::no_double_backward) was
    /// asked).
    pub fn check_double_backward(&self) -> Result<()> {
        if !self.double_backward {
            return Ok(());
        }
        let f = self.f()?;
        self.each(|inputs, dtype| {
            let gys = self.grad_outputs(inputs, 0x51ed)?;
            let options = self.options(dtype);
            let differentiated: Vec<&Array> = inputs
                .iter()
                .enumerate()
                .filter(|(i, a)| {
                    let marked = self.no_grads.as_ref().and_then(|n| n.get(*i).copied());
                    a.dtype().is_float() && marked != Some(true)
                })
                .map(|(_, a)| a)
                .collect();
            let mut rng = Rng::seed(self.seed ^ 0x2545);
            let ggxs = differentiated
                .iter()
                .map(|x| {
                    Array::uniform(x.shape(), -1.0, 1.0, x.dtype(), &mut rng)?.to_device(x.device())
                })
                .collect::<Result<Vec<Array>>>()?;
            check_double_backward(|v: &[Variable]| f(v), inputs, Some(&gys), &ggxs, &options)
        })
    }
}

/// The arrays' values as float64 ndarrays (on the host).
fn as_f64(arrays: &[Array]) -> Result<Vec<ArrayD<f64>>> {
    arrays
        .iter()
        .map(|a| a.astype(DType::F64)?.to_ndarray::<f64>())
        .collect()
}

/// Declares the tests of an op next to it: `forward`, `backward` and `double_backward`, in a
/// module named after the op. The expression builds the [`OpTest`].
///
/// ```
/// use kusari::prelude::*;
/// use kusari::testing::OpTest;
///
/// kusari::op_tests!(relu => OpTest::new("relu", |rng, d| {
///         vec![Array::uniform(&[3], -1.0, 1.0, d, rng).unwrap()]
///     })
///     .forward(|x| F::relu(&x[0]))
///     .expected(|x| vec![x[0].mapv(|v| v.max(0.0))])
///     .avoid(|x| x[0].iter().any(|v| v.abs() < 0.01)));
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! op_tests {
    ($name:ident => $case:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn case() -> $crate::testing::OpTest {
                $case
            }

            #[test]
            fn forward() {
                if let Err(e) = case().check_forward() {
                    panic!("{e}");
                }
            }

            #[test]
            fn backward() {
                if let Err(e) = case().check_backward() {
                    panic!("{e}");
                }
            }

            #[test]
            fn double_backward() {
                if let Err(e) = case().check_double_backward() {
                    panic!("{e}");
                }
            }
        }
    };
}

/// The environment variable that turns every "SKIPPED: no GPU" into a failure: CI sets it where
/// the emulated CUDA device (or a GPU) must run every CUDA test.
pub const REQUIRE_GPU_VAR: &str = crate::env::REQUIRE_GPU;

/// Whether `KUSARI_REQUIRE_GPU` is set (to anything but empty or `0`).
pub fn gpu_required() -> bool {
    crate::env::require_gpu()
}

/// `cuda:0` when a CUDA device (a GPU or the emulated device) can be used; otherwise why not:
/// an error when [`gpu_required`], else `Ok(None)` after printing `SKIPPED {what}: {reason}`.
pub fn cuda_or_skip(what: &str) -> Result<Option<Device>> {
    let Some(reason) = crate::cuda::unavailable_reason() else {
        return Ok(Some(Device::Cuda(0)));
    };
    if gpu_required() {
        return Err(Error::CudaUnavailable {
            op: format!("{what} ({REQUIRE_GPU_VAR} is set, so it may not skip)"),
            reason,
        });
    }
    eprintln!("SKIPPED {what}: {reason}");
    Ok(None)
}
