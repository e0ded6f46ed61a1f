//! Matrix products.

use crate::error::{Error, Result};
use crate::layout::{Layout, broadcast_shapes};
use crate::{Array, DType};

use super::elementwise::{check_binary, unsupported};

impl Array {
    /// Matrix product with NumPy's `matmul` rules: 1-D operands are promoted to a row (left) or a
    /// column (right) and the added axis removed; leading axes are batch axes and broadcast.
    ///
    /// ```
    /// use kusari::Array;
    /// let a = Array::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// let v = Array::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
    /// assert_eq!(a.matmul(&v).unwrap().to_vec::<f32>().unwrap(), vec![3.0, 7.0]);
    /// ```
    pub fn matmul(&self, rhs: &Array) -> Result<Array> {
        const OP: &str = "matmul";
        check_binary(OP, self, rhs).or_else(|e| match e {
            // Shapes are checked below with matmul's own rules.
            Error::Broadcast { .. } => Ok(ndarray::IxDyn(&[])),
            e => Err(e),
        })?;
        if self.ndim() == 0 || rhs.ndim() == 0 {
            return Err(Error::Shape {
                op: OP,
                msg: format!(
                    "operands must have at least one dimension, got {:?} and {:?}",
                    self.shape(),
                    rhs.shape()
                ),
            });
        }
        let a = if self.ndim() == 1 {
            self.expand_dims(0)?
        } else {
            self.clone()
        };
        let b = if rhs.ndim() == 1 {
            rhs.expand_dims(-1)?
        } else {
            rhs.clone()
        };
        let (n, k) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
        let (k2, m) = (b.shape()[b.ndim() - 2], b.shape()[b.ndim() - 1]);
        let mismatch = || Error::Shape {
            op: OP,
            msg: format!(
                "inner dimensions differ: {:?} @ {:?} ({k} vs {k2})",
                self.shape(),
                rhs.shape()
            ),
        };
        if k != k2 {
            return Err(mismatch());
        }
        let batch = broadcast_shapes(OP, &a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2])
            .map_err(|_| Error::Shape {
                op: OP,
                msg: format!(
                    "batch dimensions do not broadcast: {:?} @ {:?} (batch {:?} vs {:?})",
                    self.shape(),
                    rhs.shape(),
                    &a.shape()[..a.ndim() - 2],
                    &b.shape()[..b.ndim() - 2]
                ),
            })?;
        let mut out_shape = batch.clone();
        out_shape.extend([n, m]);
        crate::layout::checked_size(OP, &out_shape, self.dtype())?;
        let out = match self.dtype() {
            d if !d.is_float() && !matches!(d, DType::I32 | DType::I64) => {
                return Err(unsupported(
                    OP,
                    self,
                    "int32, int64, float32 or float64 (convert with astype)",
                ));
            }
            // Half precision multiplies in f32 (as on the GPU, accumulating in f32).
            DType::F16 | DType::BF16 => {
                return a
                    .astype(DType::F32)?
                    .matmul(&b.astype(DType::F32)?)
                    .and_then(|r| r.astype(self.dtype()))
                    .and_then(|r| squeeze_promoted(r, self.ndim(), rhs.ndim()));
            }
            _ => {
                let out =
                    a.storage()
                        .matmul(a.layout(), b.storage(), b.layout(), &batch, (n, k, m))?;
                Array::from_storage(out, Layout::contiguous(&out_shape))
            }
        };
        squeeze_promoted(out, self.ndim(), rhs.ndim())
    }
}

/// Removes the axes that 1-D operands were promoted with.
fn squeeze_promoted(out: Array, lhs_ndim: usize, rhs_ndim: usize) -> Result<Array> {
    let out = if rhs_ndim == 1 {
        out.squeeze(Some(&[-1]))?
    } else {
        out
    };
    if lhs_ndim == 1 {
        out.squeeze(Some(&[-2 + (rhs_ndim == 1) as isize]))
    } else {
        Ok(out)
    }
}
