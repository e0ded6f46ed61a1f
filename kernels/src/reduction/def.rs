//! A reduction kernel's definition ([`ReductionDef`]): its parts as written, the check of all
//! of them, its reduce type, and the binding of its placeholders (shared with elementwise
//! kernels).

use crate::body::check_body;
use crate::codegen::c_type;
use crate::elementwise::{ArgumentError, ElementwiseDef, InvalidKernel};
use crate::names::{check_kernel_name, is_c_identifier};
use crate::signature::{ElementwiseSignature, ParamType, ScalarType};

/// A reduction kernel as written (CuPy's `ReductionKernel` arguments): every part a `'static`
/// string, so that a definition is a `const` value. A part built at run time is given as
/// [`intern`](crate::intern)`(&text)`, kept for the life of the process once per distinct
/// text (see [`crate::interner`] for why).
///
/// ```
/// use kusari_kernels::{ReductionDef, intern};
/// let op = "max";
/// let def = ReductionDef {
///     name: intern(&format!("my_{op}")),
///     in_params: "T x",
///     out_params: "T y",
///     map_expr: "x",
///     reduce_expr: intern(&format!("{op}(a, b)")),
///     post_map_expr: "y = a",
///     ..ReductionDef::DEFAULT
/// };
/// assert!(def.signature().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReductionDef {
    /// The kernel's name (a C identifier; shown by profilers and in messages).
    pub name: &'static str,
    /// Array inputs, e.g. `"T x"` (CuPy's `in_params`; no `raw` arrays).
    pub in_params: &'static str,
    /// Array outputs, e.g. `"T y"` (CuPy's `out_params`), one element per reduction.
    pub out_params: &'static str,
    /// Scalar parameters, e.g. `"T p"` (in CuPy part of `in_params`), in scope in every
    /// expression. Empty by default.
    pub params: &'static str,
    /// The value each element contributes, in terms of the inputs' names and `_J`.
    pub map_expr: &'static str,
    /// Two values combined, in terms of `a` and `b`. It must be associative and commutative,
    /// as in CuPy: each thread folds every `group`-th element of a reduction, and the threads'
    /// values then combine by shuffles and in shared memory, in an order the launch plan picks
    /// (`a` need not be the earlier element).
    pub reduce_expr: &'static str,
    /// Statements writing the outputs from `a`, the reduced value (e.g. `y = a`).
    pub post_map_expr: &'static str,
    /// The value a reduction starts from (e.g. `0` for a sum), or `None`: then each reduction
    /// starts from its first value, and a reduction of no element is an error.
    pub identity: Option<&'static str>,
    /// The type values are reduced in: a type of the signature grammar (`float64`, `T`), a C
    /// type (`double`, `float`, `int`, `long long`, `bool`), or a type the preamble defines.
    /// Empty (the default) means the first output's type, as in CuPy.
    pub reduce_type: &'static str,
    /// Code at file scope before the kernels (CuPy's `preamble`), after the placeholders'
    /// `typedef`s. Empty by default.
    pub preamble: &'static str,
}

/// The type values are reduced in, resolved from [`ReductionDef::reduce_type`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReduceType {
    /// A placeholder of the signature.
    Placeholder(char),
    /// A concrete element type.
    Concrete(ScalarType),
    /// A type the preamble defines (its size is unknown to the host).
    Defined(String),
}

impl Default for ReductionDef {
    fn default() -> Self {
        ReductionDef::DEFAULT
    }
}

impl ReductionDef {
    /// The base of a definition written field by field (usable in a `const` or `static`): the
    /// optional parts at their defaults (no scalar parameters, the first output's type as the
    /// reduce type, no preamble, no identity) and the required ones empty, which
    /// [`signature`](Self::signature) reports until they are given. Nothing is checked until
    /// then.
    ///
    /// ```
    /// use kusari_kernels::reduction::ReductionDef;
    /// const L2: ReductionDef = ReductionDef {
    ///     name: "l2norm",
    ///     in_params: "T x",
    ///     out_params: "T y",
    ///     map_expr: "x * x",
    ///     reduce_expr: "a + b",
    ///     post_map_expr: "y = sqrt(a)",
    ///     identity: Some("0"),
    ///     ..ReductionDef::DEFAULT
    /// };
    /// assert!(L2.signature().is_ok());
    /// let e = ReductionDef { name: "half_done", ..ReductionDef::DEFAULT }.signature().unwrap_err();
    /// assert!(e.to_string().contains("map_expr is empty"), "{e}");
    /// ```
    pub const DEFAULT: ReductionDef = ReductionDef {
        name: "",
        in_params: "",
        out_params: "",
        params: "",
        map_expr: "",
        reduce_expr: "",
        post_map_expr: "",
        identity: None,
        reduce_type: "",
        preamble: "",
    };

    /// A definition from its parts in this order (usable in a `const` or `static`); nothing is
    /// checked until [`signature`](Self::signature).
    #[deprecated(
        since = "0.2.0",
        note = "name the fields: `ReductionDef { name, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, ..ReductionDef::DEFAULT }`"
    )]
    pub const fn new(
        name: &'static str,
        in_params: &'static str,
        out_params: &'static str,
        map_expr: &'static str,
        reduce_expr: &'static str,
        post_map_expr: &'static str,
        identity: Option<&'static str>,
    ) -> Self {
        ReductionDef {
            name,
            in_params,
            out_params,
            map_expr,
            reduce_expr,
            post_map_expr,
            identity,
            ..ReductionDef::DEFAULT
        }
    }

    /// This definition with scalar parameters (see [`params`](Self::params)).
    pub const fn with_params(mut self, params: &'static str) -> Self {
        self.params = params;
        self
    }

    /// This definition with a reduce type (see [`reduce_type`](Self::reduce_type)).
    pub const fn with_reduce_type(mut self, reduce_type: &'static str) -> Self {
        self.reduce_type = reduce_type;
        self
    }

    /// This definition with a preamble (see [`preamble`](Self::preamble)).
    pub const fn with_preamble(mut self, preamble: &'static str) -> Self {
        self.preamble = preamble;
        self
    }

    /// The user's code parts with their names, in the order they appear in the source.
    pub fn parts(&self) -> [(&'static str, &'static str); 5] {
        [
            ("preamble", self.preamble),
            ("reduce_expr", self.reduce_expr),
            ("map_expr", self.map_expr),
            ("identity", self.identity.unwrap_or("")),
            ("post_map_expr", self.post_map_expr),
        ]
    }

    /// The definition as an elementwise one, whose check and placeholder binding a reduction
    /// shares.
    fn as_elementwise(&self) -> ElementwiseDef {
        ElementwiseDef::new(self.name, self.in_params, self.out_params, self.params, "")
    }

    /// The parsed signature, once the whole definition is checked: the name is a C identifier
    /// and not a keyword, the signature parses ([`crate::signature`]) with no `raw` array and
    /// no parameter named `a` or `b` (the names of the values `reduce_expr` combines), every
    /// expression and the preamble balance their brackets ([`crate::body`]), the reduce type is
    /// one the generated code can name, and the expressions are not empty. Every mistake is
    /// reported at once.
    ///
    /// ```
    /// use kusari_kernels::reduction::ReductionDef;
    /// let bad = ReductionDef {
    ///     name: "k",
    ///     in_params: "T a",
    ///     out_params: "T y",
    ///     map_expr: "a",
    ///     reduce_expr: "(a + b",
    ///     post_map_expr: "y = a",
    ///     ..ReductionDef::DEFAULT
    /// };
    /// let e = bad.signature().unwrap_err().to_string();
    /// assert!(e.contains("`a` names a value of reduce_expr"), "{e}");
    /// assert!(e.contains("invalid reduce_expr"), "{e}");
    /// ```
    pub fn signature(&self) -> Result<ElementwiseSignature, InvalidKernel> {
        let mut problems = match self.as_elementwise().signature() {
            Ok(_) => Vec::new(),
            Err(e) => e.problems,
        };
        let sig = ElementwiseSignature::new(self.in_params, self.out_params, self.params);
        if let Ok(sig) = &sig {
            for (list, p) in sig.lists() {
                if p.raw {
                    problems.push(format!(
                        "{list}: `{}` is raw: a reduction kernel reads its arrays element by element",
                        p.name
                    ));
                }
                if p.name == "a" || p.name == "b" {
                    problems.push(format!(
                        "{list}: `{}` names a value of reduce_expr (`a`, `b`) and post_map_expr (`a`): \
                         rename the parameter",
                        p.name
                    ));
                }
            }
            for e in sig.unbound_by_inputs("a reduction kernel allocates its outputs") {
                problems.push(format!("{}: {}", e.list, e.message));
            }
            if sig.inputs.is_empty() {
                problems.push("inputs: a reduction kernel needs an array input".to_string());
            }
            if let Err(e) = self.reduce_type(sig) {
                problems.push(e);
            }
        }
        for (part, code) in self.parts() {
            if let Err(e) = check_body(code) {
                problems.push(format!("invalid {part}: {}", e.render(code)));
            }
        }
        for (part, code) in [
            ("map_expr", self.map_expr),
            ("reduce_expr", self.reduce_expr),
            ("post_map_expr", self.post_map_expr),
        ] {
            if code.trim().is_empty() {
                problems.push(format!("{part} is empty"));
            }
        }
        if self.identity.is_some_and(|i| i.trim().is_empty()) {
            problems.push("identity is empty (give None for a reduction without one)".to_string());
        }
        match sig {
            Ok(sig) if problems.is_empty() => Ok(sig),
            _ => Err(InvalidKernel {
                kernel: self.name,
                problems,
            }),
        }
    }

    /// The reduce type of this kernel, whose signature is `sig`.
    pub fn reduce_type(&self, sig: &ElementwiseSignature) -> Result<ReduceType, String> {
        let text = self.reduce_type.trim();
        if text.is_empty() {
            return Ok(match sig.outputs.first().map(|p| p.ty) {
                Some(ParamType::Placeholder(c)) => ReduceType::Placeholder(c),
                Some(ParamType::Concrete(t)) => ReduceType::Concrete(t),
                None => ReduceType::Concrete(ScalarType::Float64),
            });
        }
        let mut chars = text.chars();
        if let (Some(c @ 'A'..='Z'), None) = (chars.next(), chars.next()) {
            return match sig.lists().any(|(_, p)| p.ty == ParamType::Placeholder(c)) {
                true => Ok(ReduceType::Placeholder(c)),
                false => Err(format!(
                    "reduce_type `{c}` is a placeholder the signature does not use"
                )),
            };
        }
        if let Some(t) = ScalarType::from_name(text)
            .or_else(|| ScalarType::ALL.into_iter().find(|&t| c_type(t) == text))
        {
            return Ok(ReduceType::Concrete(t));
        }
        if is_c_identifier(text) && check_kernel_name(text).is_ok() && !text.starts_with('_') {
            return Ok(ReduceType::Defined(text.to_string()));
        }
        Err(format!(
            "reduce_type `{text}` is neither a type of the signature grammar, a C type (double, \
             float, int, long long, bool) nor the name of a type the preamble defines"
        ))
    }

    /// Binds each placeholder to the element type of the inputs that use it, as an elementwise
    /// kernel does ([`ElementwiseDef::bind`]).
    pub fn bind(
        &self,
        sig: &ElementwiseSignature,
        inputs: &[(ScalarType, &[usize])],
    ) -> Result<Vec<(char, ScalarType)>, ArgumentError> {
        self.as_elementwise().bind(sig, inputs)
    }

    /// An error unless `given` scalar parameters are one per parameter of `sig`.
    pub fn check_param_count(
        &self,
        sig: &ElementwiseSignature,
        given: usize,
    ) -> Result<(), ArgumentError> {
        self.as_elementwise().check_param_count(sig, given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::CodegenError;
    use crate::reduction::generate_reduction;
    use ScalarType::{Float32, Float64};

    const SUM: ReductionDef = ReductionDef {
        name: "s",
        in_params: "T x",
        out_params: "T y",
        map_expr: "x",
        reduce_expr: "a + b",
        post_map_expr: "y = a",
        identity: Some("0"),
        ..ReductionDef::DEFAULT
    };

    #[test]
    fn the_reduce_type_is_the_first_output_s_unless_given() {
        let sig = SUM.signature().unwrap();
        assert_eq!(SUM.reduce_type(&sig), Ok(ReduceType::Placeholder('T')));
        let wide = SUM.with_reduce_type("double");
        assert_eq!(wide.reduce_type(&sig), Ok(ReduceType::Concrete(Float64)));
        let src = generate_reduction(&wide, &sig, &[('T', Float32)], 1, 1).unwrap();
        assert!(src.source.contains("typedef double _type_reduce;"));
        assert_eq!(
            SUM.with_reduce_type("float32").reduce_type(&sig),
            Ok(ReduceType::Concrete(Float32))
        );
        assert_eq!(
            SUM.with_reduce_type("ArgMax").reduce_type(&sig),
            Ok(ReduceType::Defined("ArgMax".to_string()))
        );
        for bad in ["U", "long long long", "_x", "int*"] {
            let e = SUM.with_reduce_type(bad).signature().unwrap_err();
            assert!(e.to_string().contains("reduce_type"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_mistake_of_a_definition_is_reported() {
        let bad = ReductionDef {
            name: "int",
            in_params: "raw T x, T b",
            out_params: "T y, U z",
            map_expr: "",
            reduce_expr: "a + b)",
            post_map_expr: "y = a",
            identity: Some(" "),
            ..ReductionDef::DEFAULT
        };
        let e = bad.signature().unwrap_err();
        let text = e.to_string();
        for want in [
            "`int` is a C++ keyword",
            "`x` is raw",
            "`b` names a value",
            "invalid reduce_expr",
            "map_expr is empty",
            "identity is empty",
            "outputs: type placeholder `U` is bound by no array input (a reduction kernel allocates its outputs)",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        let e = generate_reduction(&SUM, &SUM.signature().unwrap(), &[], 1, 1).unwrap_err();
        assert!(matches!(
            e,
            CodegenError::UnboundPlaceholder {
                placeholder: 'T',
                ..
            }
        ));
        let unbalanced = ReductionDef {
            map_expr: "x }",
            ..SUM
        };
        let e = generate_reduction(
            &unbalanced,
            &SUM.signature().unwrap(),
            &[('T', Float32)],
            1,
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("kernel s: map_expr: "), "{e}");
    }

    #[test]
    fn binds_and_counts_as_an_elementwise_kernel_does() {
        let k = SUM.with_params("T p");
        let sig = k.signature().unwrap();
        let s: &[usize] = &[2];
        assert_eq!(k.bind(&sig, &[(Float32, s)]).unwrap(), vec![('T', Float32)]);
        assert!(k.check_param_count(&sig, 1).is_ok());
        assert!(
            k.check_param_count(&sig, 0)
                .unwrap_err()
                .to_string()
                .contains("0 scalar parameter(s) given")
        );
    }
}
