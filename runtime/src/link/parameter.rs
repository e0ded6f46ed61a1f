//! [`Parameter`]: a variable a model learns, with the initializer that gives it its first values.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::initializers::Initializer;
use crate::error::{Error, Result};
use crate::layout::first_difference;
use crate::{Array, DType, Device, Variable};

struct State {
    var: Option<Variable>,
    device: Device,
}

/// A learnable variable (Chainer's `Parameter`). Created with an initializer and, when its
/// shape is not known yet, left uninitialised until [`initialize`](Self::initialize) is called
/// with one (typically by the link's first forward, from the input's shape).
///
/// Gradients accumulate across backward passes until [`cleargrad`](Self::cleargrad): an
/// uninitialised or cleared gradient is `None`, never an array of NaN.
///
/// ```
/// use kusari::link::{initializers::Constant, Parameter};
/// use kusari::{DType, Result};
/// # fn main() -> Result<()> {
/// let w = Parameter::new(Constant(0.5), DType::F32);
/// assert!(!w.is_initialized());
/// w.initialize(&[2, 3])?;
/// assert_eq!(w.array()?.to_vec::<f32>()?, vec![0.5; 6]);
/// # Ok(()) }
/// ```
pub struct Parameter {
    state: Mutex<State>,
    initializer: Arc<dyn Initializer>,
    dtype: DType,
    persistent: bool,
}

impl std::fmt::Debug for Parameter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        match &s.var {
            Some(v) => write!(
                f,
                "Parameter({}{:?} on {})",
                v.dtype(),
                v.shape(),
                v.device()
            ),
            None => write!(f, "Parameter(uninitialised {})", self.dtype),
        }
    }
}

impl Parameter {
    /// An uninitialised parameter of `dtype`: its values come from `initializer` once its shape
    /// is known.
    pub fn new(initializer: impl Initializer + 'static, dtype: DType) -> Self {
        Parameter {
            state: Mutex::new(State {
                var: None,
                device: Device::Cpu,
            }),
            initializer: Arc::new(initializer),
            dtype,
            persistent: false,
        }
    }

    /// A parameter initialised now, with `shape`.
    pub fn with_shape(
        initializer: impl Initializer + 'static,
        shape: &[usize],
        dtype: DType,
    ) -> Result<Self> {
        let p = Parameter::new(initializer, dtype);
        p.initialize(shape)?;
        Ok(p)
    }

    /// A parameter holding `array` (its dtype is the array's; re-initialising is an error).
    pub fn from_array(array: Array) -> Self {
        let dtype = array.dtype();
        let device = array.device();
        Parameter {
            state: Mutex::new(State {
                var: Some(Variable::new(array)),
                device,
            }),
            initializer: Arc::new(super::initializers::Zero),
            dtype,
            persistent: false,
        }
    }

    /// A persistent value holding `array` (Chainer's `register_persistent`): state a link keeps
    /// that is not learned by gradients — a `BatchNormalization`'s running mean and variance.
    /// It is saved, loaded and moved between devices with the link's parameters
    /// ([`Link::named_state`](super::Link::named_state)), but [`Link::params`](super::Link::params)
    /// leaves it out, so optimizers, `cleargrads` and `count_params` never see it.
    ///
    /// ```
    /// use kusari::link::Parameter;
    /// use kusari::{Array, DType};
    /// let p = Parameter::persistent(Array::zeros(&[3], DType::F32).unwrap());
    /// assert!(p.is_persistent());
    /// ```
    pub fn persistent(array: Array) -> Self {
        Parameter {
            persistent: true,
            ..Parameter::from_array(array)
        }
    }

    /// Whether this is a persistent value rather than a learned parameter.
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the values exist yet.
    pub fn is_initialized(&self) -> bool {
        self.lock().var.is_some()
    }

    /// The dtype the parameter has (or will have).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device the parameter is (or will be initialised) on.
    pub fn device(&self) -> Device {
        self.lock().device
    }

    /// The shape, once initialised.
    pub fn shape(&self) -> Option<Vec<usize>> {
        self.lock().var.as_ref().map(|v| v.shape().to_vec())
    }

    /// Gives the parameter its values from the initializer, with `shape`, on its device. A
    /// parameter already initialised with that shape is left as it is; with another shape this
    /// is an error.
    pub fn initialize(&self, shape: &[usize]) -> Result<()> {
        let mut s = self.lock();
        if let Some(v) = &s.var {
            if v.shape() == shape {
                return Ok(());
            }
            return Err(Error::Shape {
                op: "Parameter::initialize",
                msg: format!(
                    "the parameter already has shape {:?}, not {shape:?}",
                    v.shape()
                ),
            });
        }
        let values = self
            .initializer
            .initial(shape, self.dtype)?
            .to_device(s.device)?;
        s.var = Some(Variable::new(values));
        Ok(())
    }

    /// Sets the values of a parameter, initialising it with `array` (its shape) when it is not
    /// initialised yet, without running the initializer. `array` must have the parameter's dtype
    /// and device (the caller converted it).
    pub(crate) fn assign(&self, array: Array) -> Result<()> {
        {
            let mut s = self.lock();
            if s.var.is_none() {
                s.device = array.device();
                s.var = Some(Variable::new(array));
                return Ok(());
            }
        }
        self.set_array(array)
    }

    /// The parameter as a variable in the graph (gradients flow to it), or an error when it is
    /// not initialised yet.
    pub fn variable(&self) -> Result<Variable> {
        self.lock()
            .var
            .clone()
            .ok_or(Error::ParameterUninitialized {
                op: "Parameter::variable",
                dtype: self.dtype,
            })
    }

    /// The values.
    pub fn array(&self) -> Result<Array> {
        Ok(self.variable()?.array().clone())
    }

    /// The accumulated gradient, if any.
    pub fn grad(&self) -> Option<Array> {
        self.lock().var.as_ref().and_then(Variable::grad_array)
    }

    /// Replaces the values (an optimizer's step). The shape, dtype and device must stay; the
    /// gradient is kept.
    pub fn set_array(&self, array: Array) -> Result<()> {
        let mut s = self.lock();
        let v = s.var.as_ref().ok_or(Error::ParameterUninitialized {
            op: "Parameter::set_array",
            dtype: self.dtype,
        })?;
        if let Some((what, expected, actual)) = first_difference(
            (v.shape(), v.dtype(), v.device()),
            (array.shape(), array.dtype(), array.device()),
        ) {
            return Err(Error::Mismatch {
                op: "Parameter::set_array".to_string(),
                subject: "the new array".to_string(),
                what,
                actual,
                expected,
            });
        }
        let updated = Variable::from_node(v.node.clone(), array);
        s.var = Some(updated);
        Ok(())
    }

    /// Clears the gradient.
    pub fn cleargrad(&self) {
        if let Some(v) = &self.lock().var {
            v.cleargrad();
        }
    }

    /// Moves the values (and later initialisation) to `device`. The gradient is dropped. A
    /// device that does not exist is an error even for an uninitialised parameter.
    pub fn to_device(&self, device: Device) -> Result<()> {
        crate::cuda::check_device(device, &format!("Parameter::to_device({device})"))?;
        let mut s = self.lock();
        if let Some(v) = &s.var
            && v.device() != device
        {
            s.var = Some(Variable::new(v.array().to_device(device)?));
        }
        s.device = device;
        Ok(())
    }

    /// Number of elements (0 while uninitialised).
    pub fn size(&self) -> usize {
        self.lock().var.as_ref().map_or(0, Variable::size)
    }
}
