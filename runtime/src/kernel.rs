//! Elementwise kernels as `#[function_node]`'s `#[forward_gpu(..)]` declares them (CuPy's
//! `ElementwiseKernel`): the signature, checked with the grammar the macro used at compile time,
//! and the binding of type placeholders to the dtypes of the arrays at launch.

use kusari_kernels::codegen::{generate, IndexWidth, Indexing, KernelSource};
use kusari_kernels::{ElementwiseSignature, ParamType, ScalarType};

use crate::error::{Error, Result};
use crate::{Array, DType};

/// A CUDA elementwise kernel: a name, the input, output and scalar-parameter signatures, and the
/// loop body (see [`kusari_kernels::signature`] for the grammar).
///
/// ```
/// use kusari::{Array, DType, ElementwiseKernel};
/// static MUL_ADD: ElementwiseKernel =
///     ElementwiseKernel::new("mul_add_fwd", "T x, T y, T z", "T w", "", "w = x * y + z;");
/// let x = Array::zeros(&[3], DType::F32);
/// let types = MUL_ADD.bind(&[&x, &x, &x]).unwrap();
/// assert_eq!(types, vec![('T', DType::F32)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementwiseKernel {
    /// The kernel's name (shown by profilers and in messages).
    pub name: &'static str,
    /// Array inputs, e.g. `"T x, T y"`.
    pub inputs: &'static str,
    /// Array outputs, e.g. `"T w"`.
    pub outputs: &'static str,
    /// Scalar parameters, e.g. `"T alpha"` (may be empty).
    pub params: &'static str,
    /// The loop body, in CUDA C.
    pub body: &'static str,
}

impl ElementwiseKernel {
    /// A kernel from its parts (usable in a `static`).
    pub const fn new(
        name: &'static str,
        inputs: &'static str,
        outputs: &'static str,
        params: &'static str,
        body: &'static str,
    ) -> Self {
        ElementwiseKernel {
            name,
            inputs,
            outputs,
            params,
            body,
        }
    }

    /// The parsed signature.
    pub fn signature(&self) -> Result<ElementwiseSignature> {
        ElementwiseSignature::new(self.inputs, self.outputs, self.params).map_err(|errors| {
            let source = |l| match l {
                kusari_kernels::SignatureList::Inputs => self.inputs,
                kusari_kernels::SignatureList::Outputs => self.outputs,
                kusari_kernels::SignatureList::Params => self.params,
            };
            Error::Msg(format!(
                "kernel {}: invalid signature:\n{}",
                self.name,
                errors
                    .iter()
                    .map(|e| format!("{}: {}", e.list, e.render(source(e.list))))
                    .collect::<Vec<_>>()
                    .join("\n")
            ))
        })
    }

    /// Binds each type placeholder to the dtype of the array inputs that use it, checking that a
    /// placeholder gets one dtype and that concrete types match. Returns `(placeholder, dtype)`
    /// pairs in order of first use.
    pub fn bind(&self, inputs: &[&Array]) -> Result<Vec<(char, DType)>> {
        let sig = self.signature()?;
        if inputs.len() != sig.inputs.len() {
            return Err(Error::InputCount {
                function: format!("kernel {}", self.name),
                expected: sig.inputs.len(),
                actual: inputs.len(),
            });
        }
        let mut bound: Vec<(char, DType, &str)> = Vec::new();
        for (param, array) in sig.inputs.iter().zip(inputs) {
            let dtype = array.dtype();
            match param.ty {
                ParamType::Concrete(t) if to_dtype(t) != dtype => {
                    return Err(Error::Msg(format!(
                        "kernel {}: argument `{}` is {dtype} {:?}, but the signature declares {t}",
                        self.name,
                        param.name,
                        array.shape()
                    )));
                }
                ParamType::Concrete(_) => {}
                ParamType::Placeholder(c) => match bound.iter().find(|(p, ..)| *p == c) {
                    Some((_, first, first_name)) if *first != dtype => {
                        return Err(Error::Msg(format!(
                            "kernel {}: argument `{}` is {dtype}, but placeholder `{c}` was bound to {first} by `{first_name}`",
                            self.name, param.name
                        )));
                    }
                    Some(_) => {}
                    None => bound.push((c, dtype, &param.name)),
                },
            }
        }
        Ok(bound.into_iter().map(|(c, d, _)| (c, d)).collect())
    }

    /// The CUDA source a launch over `inputs` compiles: placeholders bound from the inputs'
    /// dtypes, the contiguous variant when every non-`raw` input is C-contiguous in the loop's
    /// (broadcast) shape and the strided one otherwise, and 64-bit indexing from 2^31 elements.
    pub fn source_for(&self, inputs: &[&Array]) -> Result<KernelSource> {
        let sig = self.signature()?;
        let types: Vec<(char, ScalarType)> = self
            .bind(inputs)?
            .into_iter()
            .map(|(c, d)| (c, to_scalar_type(d)))
            .collect();
        let looped: Vec<&Array> = sig
            .inputs
            .iter()
            .zip(inputs)
            .filter(|(p, _)| !p.raw)
            .map(|(_, a)| *a)
            .collect();
        let mut shape: Vec<usize> = Vec::new();
        for a in &looped {
            shape = crate::layout::broadcast_shapes("ElementwiseKernel", &shape, a.shape())?;
        }
        let size: usize = shape.iter().product();
        let contiguous = looped
            .iter()
            .all(|a| a.shape() == shape.as_slice() && a.is_contiguous());
        let indexing = if contiguous {
            Indexing::Contiguous
        } else {
            Indexing::Strided { ndim: shape.len() }
        };
        generate(
            self.name,
            &sig,
            self.body,
            &types,
            indexing,
            IndexWidth::for_len(size),
        )
        .map_err(Error::Msg)
    }

    /// Runs the kernel over `inputs` (broadcast together) with the scalar `params`, returning
    /// the outputs. Requires CUDA arrays; this build has no CUDA backend, so after checking the
    /// arguments and generating the source it returns [`Error::CudaUnavailable`].
    pub fn launch(&self, inputs: &[&Array], params: &[f64]) -> Result<Vec<Array>> {
        self.source_for(inputs)?;
        let expected = self.signature()?.params.len();
        if params.len() != expected {
            return Err(Error::Msg(format!(
                "kernel {}: {} scalar parameter(s) given, the signature declares {expected}",
                self.name,
                params.len()
            )));
        }
        Err(Error::CudaUnavailable {
            op: format!("kernel {}", self.name),
            reason: "this build of kusari has no CUDA backend".to_string(),
        })
    }
}

fn to_scalar_type(d: DType) -> ScalarType {
    match d {
        DType::Bool => ScalarType::Bool,
        DType::I32 => ScalarType::Int32,
        DType::I64 => ScalarType::Int64,
        DType::F16 => ScalarType::Float16,
        DType::BF16 => ScalarType::BFloat16,
        DType::F32 => ScalarType::Float32,
        DType::F64 => ScalarType::Float64,
    }
}

fn to_dtype(t: ScalarType) -> DType {
    match t {
        ScalarType::Bool => DType::Bool,
        ScalarType::Int32 => DType::I32,
        ScalarType::Int64 => DType::I64,
        ScalarType::Float16 => DType::F16,
        ScalarType::BFloat16 => DType::BF16,
        ScalarType::Float32 => DType::F32,
        ScalarType::Float64 => DType::F64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: ElementwiseKernel =
        ElementwiseKernel::new("k", "T x, U y, float32 s", "T w", "T alpha", "w = x;");

    #[test]
    fn binds_placeholders_and_rejects_conflicts() {
        let f32a = Array::zeros(&[2], DType::F32);
        let f64a = Array::zeros(&[2], DType::F64);
        assert_eq!(
            K.bind(&[&f64a, &f32a, &f32a]).unwrap(),
            vec![('T', DType::F64), ('U', DType::F32)]
        );
        let e = K.bind(&[&f32a, &f32a, &f64a]).unwrap_err().to_string();
        assert!(
            e.contains("argument `s` is float64") && e.contains("declares float32"),
            "{e}"
        );
        let two = ElementwiseKernel::new("k2", "T x, T y", "T w", "", "w = x + y;");
        let e = two.bind(&[&f32a, &f64a]).unwrap_err().to_string();
        assert!(
            e.contains("`y` is float64") && e.contains("`T` was bound to float32 by `x`"),
            "{e}"
        );
        assert!(matches!(
            two.bind(&[&f32a]),
            Err(Error::InputCount {
                expected: 2,
                actual: 1,
                ..
            })
        ));
    }

    #[test]
    fn the_source_follows_the_inputs_layouts_and_dtypes() {
        let k = ElementwiseKernel::new("madd", "T x, T y", "T w", "", "w = x + y;");
        let a = Array::zeros(&[2, 3], DType::F64);
        let src = k.source_for(&[&a, &a]).unwrap();
        assert_eq!(src.entry, "madd__contiguous_i32");
        assert!(src.source.contains("typedef double T;"));
        // A transposed or broadcast operand takes the strided path, with the loop's rank.
        let t = Array::zeros(&[3, 2], DType::F64).t();
        assert_eq!(k.source_for(&[&a, &t]).unwrap().entry, "madd__strided2_i32");
        let row = Array::zeros(&[3], DType::F64);
        assert_eq!(
            k.source_for(&[&a, &row]).unwrap().entry,
            "madd__strided2_i32"
        );
        let bad = Array::zeros(&[4], DType::F64);
        assert!(matches!(
            k.source_for(&[&a, &bad]),
            Err(Error::Broadcast { .. })
        ));
    }

    #[test]
    fn launch_checks_arguments_then_reports_no_cuda() {
        let a = Array::zeros(&[2], DType::F32);
        let k = ElementwiseKernel::new("k", "T x", "T w", "T alpha", "w = x * alpha;");
        assert!(k
            .launch(&[&a], &[])
            .unwrap_err()
            .to_string()
            .contains("0 scalar parameter(s) given"));
        assert!(matches!(
            k.launch(&[&a], &[2.0]),
            Err(Error::CudaUnavailable { .. })
        ));
    }
}
