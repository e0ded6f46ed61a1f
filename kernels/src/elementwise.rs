//! An elementwise kernel's definition (CuPy's `ElementwiseKernel` arguments: a name, the input,
//! output and scalar-parameter lists, the loop body, and the optional `preamble`, `loop_prep` and
//! `after_loop` code), the check of the whole definition, and
//! the binding of its type placeholders to the element types of the arrays it runs over. Pure:
//! strings and types in, values or typed errors out.

use std::fmt;

use crate::signature::{ElementwiseSignature, ParamType, ScalarType, SignatureList};

/// How many signature mistakes an [`InvalidKernel`] shows (the rest are counted).
const MAX_REPORTED: usize = 20;

/// An elementwise kernel as written: every part a `'static` string, so a definition is a
/// `const` value and two launches of one `static` are recognised by the strings' addresses.
///
/// ```
/// use kusari_kernels::{ElementwiseDef, ScalarType};
/// const SCALE: ElementwiseDef = ElementwiseDef::new("scale", "T x", "T y", "T a", "y = a * x;");
/// let sig = SCALE.signature().unwrap();
/// assert_eq!(sig.params[0].name, "a");
/// let types = SCALE.bind(&sig, &[(ScalarType::Float32, &[3][..])]).unwrap();
/// assert_eq!(types, vec![('T', ScalarType::Float32)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementwiseDef {
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
    /// Code at file scope before the kernel (CuPy's `preamble`): `__device__` helper functions,
    /// constants, structs. The placeholders' `typedef`s come before it, so it may use `T`.
    /// Empty by default.
    pub preamble: &'static str,
    /// Code in the kernel before the loop (CuPy's `loop_prep`), run once by each thread; `n` and
    /// the scalar parameters are in scope, `i` is not. Empty by default.
    pub loop_prep: &'static str,
    /// Code in the kernel after the loop (CuPy's `after_loop`), run once by each thread; what
    /// `loop_prep` declared is in scope. Empty by default.
    pub after_loop: &'static str,
}

/// A kernel definition with mistakes: every one of them, one per line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidKernel {
    /// The kernel's name.
    pub kernel: &'static str,
    /// What is wrong: the name, the signature (each mistake rendered under its list), the body.
    pub problems: Vec<String>,
}

impl fmt::Display for InvalidKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("\n"))
    }
}

impl std::error::Error for InvalidKernel {}

/// What binding sees of the argument given for an array input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputArg<'a> {
    /// An array of this element type and shape (the shape only names it in messages).
    Array(ScalarType, &'a [usize]),
    /// A scalar of this element type, broadcast as a 0-d value; it binds its placeholder only
    /// where no array does ([`ElementwiseDef::bind_args`]).
    Scalar(ScalarType),
}

/// Arguments that do not fit a kernel's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgumentError {
    /// Not one array per input.
    InputCount {
        /// The kernel's name.
        kernel: &'static str,
        /// Inputs the signature declares.
        expected: usize,
        /// Arrays given.
        actual: usize,
    },
    /// An array's element type differs from the declared type or from its placeholder's
    /// binding, or the scalar parameters are not one per declared parameter.
    Mismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// What does not fit, naming the argument.
        msg: String,
    },
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgumentError::InputCount {
                kernel,
                expected,
                actual,
            } => write!(
                f,
                "kernel {kernel}: expected {expected} input(s), got {actual}"
            ),
            ArgumentError::Mismatch { kernel, msg } => write!(f, "kernel {kernel}: {msg}"),
        }
    }
}

impl std::error::Error for ArgumentError {}

impl ElementwiseDef {
    /// A definition from its parts (usable in a `const` or `static`); nothing is checked until
    /// [`signature`](Self::signature).
    pub const fn new(
        name: &'static str,
        inputs: &'static str,
        outputs: &'static str,
        params: &'static str,
        body: &'static str,
    ) -> Self {
        ElementwiseDef {
            name,
            inputs,
            outputs,
            params,
            body,
            preamble: "",
            loop_prep: "",
            after_loop: "",
        }
    }

    /// This definition with `preamble` (see [`preamble`](Self::preamble)).
    pub const fn with_preamble(mut self, preamble: &'static str) -> Self {
        self.preamble = preamble;
        self
    }

    /// This definition with `loop_prep` (see [`loop_prep`](Self::loop_prep)).
    pub const fn with_loop_prep(mut self, loop_prep: &'static str) -> Self {
        self.loop_prep = loop_prep;
        self
    }

    /// This definition with `after_loop` (see [`after_loop`](Self::after_loop)).
    pub const fn with_after_loop(mut self, after_loop: &'static str) -> Self {
        self.after_loop = after_loop;
        self
    }

    /// The code parts [`codegen::generate_code`](crate::codegen::generate_code) pastes in.
    pub fn code(&self) -> crate::codegen::KernelCode<'static> {
        crate::codegen::KernelCode {
            preamble: self.preamble,
            loop_prep: self.loop_prep,
            body: self.body,
            after_loop: self.after_loop,
        }
    }

    /// The parsed signature, once the whole definition is checked: the name must be a C
    /// identifier and not a keyword ([`crate::names`]), the signature must parse with names the
    /// generated code can use ([`crate::signature`]), and the brackets of the body, the
    /// preamble, `loop_prep` and `after_loop` must each balance ([`crate::body`]). Every mistake
    /// is reported at once.
    ///
    /// ```
    /// use kusari_kernels::ElementwiseDef;
    /// let bad = ElementwiseDef::new("k", "T x, T int", "T w", "", "w = x;");
    /// let e = bad.signature().unwrap_err();
    /// assert!(e.to_string().contains("`int` is a C++ keyword"), "{e}");
    /// ```
    pub fn signature(&self) -> Result<ElementwiseSignature, InvalidKernel> {
        let mut problems = Vec::new();
        if let Err(e) = crate::names::check_kernel_name(self.name) {
            problems.push(e.to_string());
        }
        let sig = ElementwiseSignature::new(self.inputs, self.outputs, self.params);
        if let Err(errors) = &sig {
            let source = |l| match l {
                SignatureList::Inputs => self.inputs,
                SignatureList::Outputs => self.outputs,
                SignatureList::Params => self.params,
            };
            let mut lines: Vec<String> = errors
                .iter()
                .take(MAX_REPORTED)
                .map(|e| format!("{}: {}", e.list, e.render(source(e.list))))
                .collect();
            if errors.len() > MAX_REPORTED {
                lines.push(format!(
                    "... and {} more mistakes",
                    errors.len() - MAX_REPORTED
                ));
            }
            problems.push(format!("invalid signature:\n{}", lines.join("\n")));
        }
        for (part, code) in self.code().parts() {
            if let Err(e) = crate::body::check_body(code) {
                problems.push(format!("invalid {part}: {}", e.render_in(part, code)));
            }
        }
        match sig {
            Ok(sig) if problems.is_empty() => Ok(sig),
            _ => Err(InvalidKernel {
                kernel: self.name,
                problems,
            }),
        }
    }

    /// Binds each type placeholder of `sig` (this kernel's) to the element type of the inputs
    /// that use it, given as `(element type, shape)` per input (the shape only names the array
    /// in messages). A placeholder must get one type and concrete types must match. Returns
    /// `(placeholder, type)` pairs in order of first use.
    pub fn bind(
        &self,
        sig: &ElementwiseSignature,
        inputs: &[(ScalarType, &[usize])],
    ) -> Result<Vec<(char, ScalarType)>, ArgumentError> {
        let args: Vec<InputArg<'_>> = inputs
            .iter()
            .map(|&(ty, shape)| InputArg::Array(ty, shape))
            .collect();
        self.bind_args(sig, &args)
    }

    /// [`bind`](Self::bind) where an input may be given a scalar ([`InputArg::Scalar`], CuPy's
    /// Python scalar for a `T x` input). Arrays bind first, as in `bind`. A scalar binds weakly:
    /// a placeholder that an array binds keeps the array's type (the launch converts the scalar
    /// to it), and a placeholder that only scalars bind takes their type when they agree and is
    /// an error naming the placeholder when they do not. A scalar for a concrete type is left to
    /// the launch to convert; a scalar for a `raw` input is an error (the body indexes it).
    /// The outputs are allocated: [`bind_call`](Self::bind_call) binds with outputs given.
    ///
    /// ```
    /// use kusari_kernels::elementwise::InputArg;
    /// use kusari_kernels::{ElementwiseDef, ScalarType::{Float32, Float64, Int64}};
    /// let k = ElementwiseDef::new("axpy", "T a, T x, T y", "T w", "", "w = a * x + y;");
    /// let sig = k.signature().unwrap();
    /// let x = InputArg::Array(Float32, &[3]);
    /// let t = k.bind_args(&sig, &[InputArg::Scalar(Float64), x, x]).unwrap();
    /// assert_eq!(t, vec![('T', Float32)]); // the arrays' type, not the scalar's
    /// let s = |t| InputArg::Scalar(t);
    /// assert_eq!(k.bind_args(&sig, &[s(Float64), s(Float64), s(Float64)]).unwrap(), vec![('T', Float64)]);
    /// let e = k.bind_args(&sig, &[s(Int64), s(Float64), s(Float64)]).unwrap_err();
    /// assert!(e.to_string().contains("placeholder `T` is bound only by scalars"), "{e}");
    /// ```
    pub fn bind_args(
        &self,
        sig: &ElementwiseSignature,
        inputs: &[InputArg<'_>],
    ) -> Result<Vec<(char, ScalarType)>, ArgumentError> {
        self.bind_call(sig, inputs, &[])
    }

    /// [`bind_args`](Self::bind_args) for a call that gives its outputs, as `(element type,
    /// shape)` per output (all of them, or none: empty when the launch allocates them). A given
    /// output binds its placeholder as an array input does (CuPy's `'X x, Y y' -> 'Z z'` with
    /// `z` passed in): arrays, inputs and outputs, must agree on each placeholder and match
    /// concrete types; scalars then take the placeholder's type. A placeholder that only
    /// outputs use is an error naming them when the outputs are not given.
    ///
    /// ```
    /// use kusari_kernels::elementwise::InputArg;
    /// use kusari_kernels::{ElementwiseDef, ScalarType::{Float32, Float64, Int32}};
    /// let k = ElementwiseDef::new("add", "X x, Y y", "Z z", "", "z = x + y;");
    /// let sig = k.signature().unwrap();
    /// let (x, y) = (InputArg::Array(Int32, &[3]), InputArg::Scalar(Float32));
    /// let t = k.bind_call(&sig, &[x, y], &[(Float64, &[3])]).unwrap();
    /// assert_eq!(t, vec![('X', Int32), ('Y', Float32), ('Z', Float64)]);
    /// let e = k.bind_args(&sig, &[x, y]).unwrap_err(); // z not given: Z has no type
    /// assert!(e.to_string().contains("`Z` is bound only by output `z`"), "{e}");
    /// ```
    pub fn bind_call(
        &self,
        sig: &ElementwiseSignature,
        inputs: &[InputArg<'_>],
        outputs: &[(ScalarType, &[usize])],
    ) -> Result<Vec<(char, ScalarType)>, ArgumentError> {
        if inputs.len() != sig.inputs.len() {
            return Err(ArgumentError::InputCount {
                kernel: self.name,
                expected: sig.inputs.len(),
                actual: inputs.len(),
            });
        }
        if !outputs.is_empty() && outputs.len() != sig.outputs.len() {
            return Err(self.mismatch(format!(
                "{} output(s) given, the signature declares {} (give all of them or none)",
                outputs.len(),
                sig.outputs.len()
            )));
        }
        let arrays = (sig.inputs.iter().zip(inputs))
            .filter_map(|(param, &arg)| match arg {
                InputArg::Array(ty, shape) => Some(Ok((param, "argument", ty, shape))),
                InputArg::Scalar(ty) if param.raw => Some(Err(self.mismatch(format!(
                    "argument `{}` is a scalar ({ty}), but the signature declares it `raw`: \
                     a raw input is indexed by the body, so it must be an array",
                    param.name
                )))),
                InputArg::Scalar(_) => None,
            })
            .chain(
                (sig.outputs.iter().zip(outputs))
                    .map(|(param, &(ty, shape))| Ok((param, "output", ty, shape))),
            );
        let mut bound: Vec<(char, ScalarType, &str)> = Vec::new();
        for arg in arrays {
            let (param, what, ty, shape) = arg?;
            match param.ty {
                ParamType::Concrete(t) if t != ty => {
                    return Err(self.mismatch(format!(
                        "{what} `{}` is {ty} {shape:?}, but the signature declares {t}",
                        param.name,
                    )));
                }
                ParamType::Concrete(_) => {}
                ParamType::Placeholder(c) => match bound.iter().find(|(p, ..)| *p == c) {
                    Some((_, first, first_name)) if *first != ty => {
                        return Err(self.mismatch(format!(
                            "{what} `{}` is {ty}, but placeholder `{c}` was bound to {first} by `{first_name}`",
                            param.name
                        )));
                    }
                    Some(_) => {}
                    None => bound.push((c, ty, &param.name)),
                },
            }
        }
        // Placeholders no array bound: their scalars must agree.
        let mut weak: Vec<(char, ScalarType, &str)> = Vec::new();
        for (param, &arg) in sig.inputs.iter().zip(inputs) {
            let (ParamType::Placeholder(c), InputArg::Scalar(ty)) = (param.ty, arg) else {
                continue;
            };
            if bound.iter().any(|(p, ..)| *p == c) {
                continue;
            }
            match weak.iter().find(|(p, ..)| *p == c) {
                Some((_, first, first_name)) if *first != ty => {
                    return Err(self.mismatch(format!(
                        "placeholder `{c}` is bound only by scalars, and they disagree: `{first_name}` \
                         is {first}, `{}` is {ty} (give them one type, or an array for one of them)",
                        param.name
                    )));
                }
                Some(_) => {}
                None => weak.push((c, ty, &param.name)),
            }
        }
        // In order of first use among the inputs, then the outputs.
        let mut types: Vec<(char, ScalarType)> = Vec::new();
        for param in sig.inputs.iter().chain(&sig.outputs) {
            let ParamType::Placeholder(c) = param.ty else {
                continue;
            };
            if types.iter().any(|(p, _)| *p == c) {
                continue;
            }
            match bound.iter().chain(&weak).find(|(p, ..)| *p == c) {
                Some(&(_, t, _)) => types.push((c, t)),
                None => {
                    let users: Vec<String> = (sig.outputs.iter())
                        .filter(|p| p.ty == param.ty)
                        .map(|p| format!("`{}`", p.name))
                        .collect();
                    return Err(self.mismatch(format!(
                        "type placeholder `{c}` is bound only by output {}, which the call does \
                         not give: give the outputs (their dtypes bind it), or use `{c}` for an \
                         input",
                        users.join(", ")
                    )));
                }
            }
        }
        Ok(types)
    }

    /// An error unless `given` scalar parameters are one per parameter of `sig` (this kernel's).
    pub fn check_param_count(
        &self,
        sig: &ElementwiseSignature,
        given: usize,
    ) -> Result<(), ArgumentError> {
        let expected = sig.params.len();
        if given != expected {
            return Err(self.mismatch(format!(
                "{given} scalar parameter(s) given, the signature declares {expected}"
            )));
        }
        Ok(())
    }

    /// An error unless the loop's size is decided one way, as CuPy decides it from the
    /// arguments of a call: by the arrays given for non-`raw` parameters (`arrays_in[k]`: an
    /// array, not a scalar, was given for input `k` of `sig`, this kernel's; `arrays_out[k]`:
    /// an array was given for output `k`, empty when the outputs are allocated), broadcast
    /// together, or else by `size` (then `i` runs over `0..size` and `n` is `size`). Both is
    /// CuPy's "Specified 'size' can be used only if all of the ndarray are 'raw'", neither its
    /// "Loop size is undecided"; each error names the arguments involved. A scalar given for a
    /// non-`raw` input decides nothing: it is broadcast over the loop.
    ///
    /// ```
    /// use kusari_kernels::ElementwiseDef;
    /// let k = ElementwiseDef::new("k", "raw T a, T c", "T y", "", "y = a[n - 1 - i] + c;");
    /// let sig = k.signature().unwrap();
    /// // An array for `c` decides the size; a scalar for it does not.
    /// assert!(k.check_loop_size_for(&sig, None, &[true, true], &[]).is_ok());
    /// assert!(k.check_loop_size_for(&sig, Some(4), &[true, false], &[]).is_ok());
    /// let e = k.check_loop_size_for(&sig, None, &[true, false], &[]).unwrap_err().to_string();
    /// assert!(e.contains("the loop's size is undecided"), "{e}");
    /// let e = k.check_loop_size_for(&sig, Some(4), &[true, true], &[]).unwrap_err().to_string();
    /// assert!(e.contains("a size (4) is given, but input `c` is given an array"), "{e}");
    /// ```
    pub fn check_loop_size_for(
        &self,
        sig: &ElementwiseSignature,
        size: Option<usize>,
        arrays_in: &[bool],
        arrays_out: &[bool],
    ) -> Result<(), ArgumentError> {
        let deciding: Vec<String> = (sig.inputs.iter().zip(arrays_in))
            .map(|(p, &a)| ("input", p, a))
            .chain(
                sig.outputs
                    .iter()
                    .zip(arrays_out)
                    .map(|(p, &a)| ("output", p, a)),
            )
            .filter(|&(_, p, array)| array && !p.raw)
            .map(|(what, p, _)| format!("{what} `{}`", p.name))
            .collect();
        match (size, deciding.is_empty()) {
            (Some(size), false) => Err(self.mismatch(format!(
                "a size ({size}) is given, but {} {} given an array, which decides the loop's \
                 size: a size is only for a launch whose arrays are all raw (as CuPy's \
                 \"Specified 'size' can be used only if all of the ndarray are 'raw'\")",
                list(&deciding),
                if deciding.len() == 1 { "is" } else { "are" }
            ))),
            (None, true) => {
                let scalars: Vec<String> = (sig.inputs.iter().zip(arrays_in))
                    .filter(|&(p, &a)| !p.raw && !a)
                    .map(|(p, _)| format!("`{}`", p.name))
                    .collect();
                let why = if scalars.is_empty() {
                    "every array argument is raw (or there is none)".to_string()
                } else {
                    format!(
                        "no non-raw argument is given an array ({} {} given a scalar, which is \
                         broadcast over the loop and decides nothing)",
                        list(&scalars),
                        if scalars.len() == 1 { "is" } else { "are" }
                    )
                };
                Err(self.mismatch(format!(
                    "the loop's size is undecided: {why}; give it as the launch's size \
                     (ElementwiseKernel::launch_sized, or call().size(n))"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The check of [`check_loop_size_for`](Self::check_loop_size_for) as if an array were
    /// given for every input and no output: from the signature, not from the arguments.
    #[deprecated(
        since = "0.2.0",
        note = "CuPy decides the loop's size from the arguments given: use check_loop_size_for"
    )]
    pub fn check_loop_size(
        &self,
        sig: &ElementwiseSignature,
        size: Option<usize>,
    ) -> Result<(), ArgumentError> {
        self.check_loop_size_for(sig, size, &vec![true; sig.inputs.len()], &[])
    }

    fn mismatch(&self, msg: String) -> ArgumentError {
        ArgumentError::Mismatch {
            kernel: self.name,
            msg,
        }
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::{Float32, Float64};

    const K: ElementwiseDef =
        ElementwiseDef::new("k", "T x, U y, float32 s", "T w", "T alpha", "w = x;");

    #[test]
    fn binds_placeholders_and_rejects_conflicts() {
        let sig = K.signature().unwrap();
        let s: &[usize] = &[2];
        assert_eq!(
            K.bind(&sig, &[(Float64, s), (Float32, s), (Float32, s)])
                .unwrap(),
            vec![('T', Float64), ('U', Float32)]
        );
        let e = K
            .bind(&sig, &[(Float32, s), (Float32, s), (Float64, s)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("argument `s` is float64 [2]") && e.contains("declares float32"),
            "{e}"
        );
        let two = ElementwiseDef::new("k2", "T x, T y", "T w", "", "w = x + y;");
        let sig2 = two.signature().unwrap();
        let e = two
            .bind(&sig2, &[(Float32, s), (Float64, s)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`y` is float64") && e.contains("`T` was bound to float32 by `x`"),
            "{e}"
        );
        assert_eq!(
            two.bind(&sig2, &[(Float32, s)]),
            Err(ArgumentError::InputCount {
                kernel: "k2",
                expected: 2,
                actual: 1
            })
        );
    }

    #[test]
    fn given_outputs_bind_their_placeholders_as_array_inputs_do() {
        use InputArg::{Array, Scalar};
        use ScalarType::{Int32, Int64};
        let k = ElementwiseDef::new("k", "X x, Y y", "Z z, X w", "Z alpha", "z = x + y;");
        let sig = k.signature().unwrap();
        let s: &[usize] = &[2];
        let t = k
            .bind_call(
                &sig,
                &[Array(Int32, s), Scalar(Float32)],
                &[(Float64, s), (Int32, s)],
            )
            .unwrap();
        assert_eq!(t, vec![('X', Int32), ('Y', Float32), ('Z', Float64)]);
        // An output that contradicts an input's binding, or a concrete type, names both.
        let e = k
            .bind_call(
                &sig,
                &[Array(Int32, s), Scalar(Float32)],
                &[(Float64, s), (Int64, s)],
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("output `w` is int64, but placeholder `X` was bound to int32 by `x`"),
            "{e}"
        );
        let c = ElementwiseDef::new("c", "T x", "float32 w", "", "w = x;");
        let e = c
            .bind_call(&c.signature().unwrap(), &[Array(Int32, s)], &[(Float64, s)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("output `w` is float64 [2], but the signature declares float32"),
            "{e}"
        );
        // An output binds a placeholder its scalar inputs use: the scalar takes its type.
        let sc = ElementwiseDef::new("sc", "T a", "T w", "", "w = a;");
        let sig = sc.signature().unwrap();
        assert_eq!(
            sc.bind_call(&sig, &[Scalar(Int64)], &[(Float32, s)])
                .unwrap(),
            vec![('T', Float32)]
        );
        // Without the outputs, Z has no type; the message names the outputs that bind it.
        let e = k
            .bind_args(&k.signature().unwrap(), &[Array(Int32, s), Scalar(Float32)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`Z` is bound only by output `z`, which the call does not give"),
            "{e}"
        );
        let e = k
            .bind_call(
                &k.signature().unwrap(),
                &[Array(Int32, s), Scalar(Float32)],
                &[(Float64, s)],
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 output(s) given, the signature declares 2"),
            "{e}"
        );
    }

    #[test]
    fn scalars_bind_weakly_and_never_a_raw_input() {
        use InputArg::{Array, Scalar};
        use ScalarType::Int64;
        let k = ElementwiseDef::new("k", "T a, T b, U c, raw T r", "T w", "", "w = a;");
        let sig = k.signature().unwrap();
        let s: &[usize] = &[2];
        // An array binds T whatever the scalars are; U only has its scalar.
        let args = [
            Scalar(Float64),
            Array(Float32, s),
            Scalar(Int64),
            Array(Float32, s),
        ];
        assert_eq!(
            k.bind_args(&sig, &args).unwrap(),
            vec![('T', Float32), ('U', Int64)]
        );
        // Only scalars bind T (the raw input is an array of their type).
        let args = [
            Scalar(Int64),
            Scalar(Int64),
            Scalar(Float64),
            Array(Int64, s),
        ];
        assert_eq!(
            k.bind_args(&sig, &args).unwrap(),
            vec![('T', Int64), ('U', Float64)]
        );
        let pair = ElementwiseDef::new("pair", "T a, T b", "T w", "", "w = a + b;");
        let pair_sig = pair.signature().unwrap();
        let e = pair
            .bind_args(&pair_sig, &[Scalar(Int64), Scalar(Float64)])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "kernel pair: placeholder `T` is bound only by scalars, and they disagree: `a` is \
             int64, `b` is float64 (give them one type, or an array for one of them)"
        );
        let e = k
            .bind_args(
                &sig,
                &[
                    Array(Int64, s),
                    Array(Int64, s),
                    Scalar(Float64),
                    Scalar(Int64),
                ],
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("argument `r` is a scalar (int64), but the signature declares it `raw`"),
            "{e}"
        );
    }

    #[test]
    fn counts_scalar_parameters() {
        let sig = K.signature().unwrap();
        assert!(K.check_param_count(&sig, 1).is_ok());
        let e = K.check_param_count(&sig, 0).unwrap_err().to_string();
        assert_eq!(
            e,
            "kernel k: 0 scalar parameter(s) given, the signature declares 1"
        );
    }

    #[test]
    fn reports_every_mistake_of_a_definition() {
        let bad = ElementwiseDef::new("int", "T x, T x", "T w", "", "w = x; }");
        let e = bad.signature().unwrap_err();
        assert_eq!(e.kernel, "int");
        assert_eq!(e.problems.len(), 3, "{e}");
        assert!(
            e.problems[1].contains("duplicate parameter name `x`"),
            "{e}"
        );
        assert!(e.problems[2].starts_with("invalid body"), "{e}");
    }

    #[test]
    fn the_loop_size_is_decided_by_the_arrays_given_as_in_cupy() {
        let raw = ElementwiseDef::new("r", "raw T a, raw T b", "T y", "", "y = a[i] + b[i];");
        let sig = raw.signature().unwrap();
        let check = |k: &ElementwiseDef, sig, size, i: &[bool], o: &[bool]| {
            k.check_loop_size_for(sig, size, i, o)
                .map_err(|e| e.to_string())
        };
        assert!(check(&raw, &sig, Some(0), &[true, true], &[]).is_ok());
        let e = check(&raw, &sig, None, &[true, true], &[]).unwrap_err();
        assert_eq!(
            e,
            "kernel r: the loop's size is undecided: every array argument is raw (or there is \
             none); give it as the launch's size (ElementwiseKernel::launch_sized, or \
             call().size(n))"
        );
        // A non-raw output given decides the size, and then a size contradicts it.
        assert!(check(&raw, &sig, None, &[true, true], &[true]).is_ok());
        let e = check(&raw, &sig, Some(2), &[true, true], &[true]).unwrap_err();
        assert!(
            e.contains("a size (2) is given, but output `y` is given an array"),
            "{e}"
        );

        let mixed = ElementwiseDef::new("m", "raw T a, T x, T z", "T y", "", "y = a[i] + x;");
        let sig = mixed.signature().unwrap();
        assert!(check(&mixed, &sig, None, &[true, true, false], &[]).is_ok());
        let e = check(&mixed, &sig, Some(3), &[true, true, true], &[true]).unwrap_err();
        assert!(
            e.contains("a size (3) is given, but input `x`, input `z` and output `y` are given"),
            "{e}"
        );
        // Scalars for the non-raw inputs: a size is needed, and allowed.
        assert!(check(&mixed, &sig, Some(3), &[true, false, false], &[]).is_ok());
        let e = check(&mixed, &sig, None, &[true, false, false], &[]).unwrap_err();
        assert!(
            e.contains("no non-raw argument is given an array (`x` and `z` are given a scalar"),
            "{e}"
        );

        let none = ElementwiseDef::new("z", "", "float32 y", "float32 v", "y = v;");
        let sig = none.signature().unwrap();
        assert!(check(&none, &sig, None, &[], &[]).is_err());
        assert!(check(&none, &sig, Some(2), &[], &[]).is_ok());
        #[allow(deprecated)]
        let old = none.check_loop_size(&sig, Some(2));
        assert!(old.is_ok());
    }

    #[test]
    fn checks_the_preamble_loop_prep_and_after_loop_like_the_body() {
        let k = ElementwiseDef::new("k", "T x", "T w", "", "w = f(x);")
            .with_preamble("__device__ T f(T v) { return v; }")
            .with_loop_prep("int c = 0;")
            .with_after_loop("(void)c;");
        assert!(k.signature().is_ok());
        assert_eq!(k.code().preamble, "__device__ T f(T v) { return v; }");
        let bad = k
            .with_preamble("__device__ T f(T v) { return v; } }")
            .with_loop_prep("#define X 1")
            .with_after_loop("(");
        let e = bad.signature().unwrap_err();
        assert_eq!(e.problems.len(), 3, "{e}");
        assert!(e.problems[0].starts_with("invalid preamble"), "{e}");
        assert!(e.problems[1].starts_with("invalid loop_prep"), "{e}");
        assert!(e.problems[2].starts_with("invalid after_loop"), "{e}");
    }
}
