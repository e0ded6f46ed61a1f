//! A user's reduction kernel (CuPy's `ReductionKernel`, Chainer's `cuda.reduce`): its
//! definition and checks ([`ReductionDef`]), the plan of a launch from the shape
//! ([`ReductionPlan`], [`coalesce`]), and its CUDA source ([`generate_reduction`]). Pure: strings,
//! shapes and types in, values or typed errors out.
//!
//! A reduction kernel maps each element of its inputs to a value of the reduce type
//! (`map_expr`, in terms of the inputs' names), folds the values of each reduction with
//! `reduce_expr` (in terms of `a` and `b`, starting from `identity` where there is one), and
//! writes each result through `post_map_expr` (in terms of `a`, the reduced value, assigning to
//! the outputs). `_J` (the element's index in its reduction, C order over the reduced axes) is
//! in scope in `map_expr`, and `_N` (the number of elements each reduction folds) in every
//! expression.
//!
//! The generated source holds two kernels, launched with [`REDUCE_BLOCK`] threads per block:
//!
//! - `{name}__d{C}`: `group` consecutive threads (1, a warp, or the whole block) reduce one
//!   chunk of one output's elements (up to `C` kept and `C` reduced dimensions after
//!   [`coalesce`], their counts given at launch: one compiled kernel serves every rank up to
//!   [`rank_capacity`]),
//!   combine their values in shared memory, and write either the output (one chunk per output)
//!   or a partial result;
//! - `{name}__combine`: the second pass of a split reduction, which reduces each output's
//!   partial results and writes the output.
//!
//! ```
//! use kusari_kernels::reduction_kernel::{generate_reduction, ReductionDef};
//! use kusari_kernels::ScalarType;
//! const L2: ReductionDef =
//!     ReductionDef::new("l2norm", "T x", "T y", "x * x", "a + b", "y = sqrt(a)", Some("0"));
//! let sig = L2.signature().unwrap();
//! let src = generate_reduction(&L2, &sig, &[('T', ScalarType::Float32)], 1, 1).unwrap();
//! assert_eq!(src.entry, "l2norm__d4");
//! assert!(src.source.contains("typedef T _type_reduce;"));
//! ```

use std::fmt::{self, Write};

use crate::body::check_body;
use crate::codegen::{c_type, half_prelude, CodegenError, KernelSource};
use crate::elementwise::{ArgumentError, ElementwiseDef, InvalidKernel};
use crate::names::{check_kernel_name, is_c_identifier};
use crate::signature::{ElementwiseSignature, ParamType, ScalarType};

/// Threads per block of every reduction kernel launch.
pub const REDUCE_BLOCK: u32 = 256;

/// Threads of a warp: the group of [`Strategy::WarpPerOutput`].
pub const WARP: u32 = 32;

/// A reduction kernel as written (CuPy's `ReductionKernel` arguments): every part a `'static`
/// string, so that a definition is a `const` value.
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
    /// Two values combined, in terms of `a` and `b`.
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

impl ReductionDef {
    /// A definition from its parts (usable in a `const` or `static`); nothing is checked until
    /// [`signature`](Self::signature).
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
            params: "",
            map_expr,
            reduce_expr,
            post_map_expr,
            identity,
            reduce_type: "",
            preamble: "",
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
    /// use kusari_kernels::reduction_kernel::ReductionDef;
    /// let bad = ReductionDef::new("k", "T a", "T y", "a", "(a + b", "y = a", None);
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

/// How the threads of a launch share the work of its reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Each thread reduces one output: for many outputs whose elements are few, or strided so
    /// that consecutive outputs are consecutive in memory (a reduction over leading axes, where
    /// consecutive threads then read consecutive addresses).
    ThreadPerOutput,
    /// Each warp reduces one output, its lanes reading consecutive elements: many outputs of
    /// moderate length.
    WarpPerOutput,
    /// Each block reduces one output: fewer, longer reductions.
    BlockPerOutput,
    /// Reductions over leading axes (not along memory) with too few outputs for a thread each:
    /// each block reduces 8 consecutive outputs, 32 threads each. A warp's threads take the 8
    /// outputs at 4 consecutive reduced indices, so it reads whole 32-byte sectors; each
    /// output's threads combine in shared memory.
    ColumnBlock,
    /// Few long reductions: each is split into `chunks` chunks, one block each, whose partial
    /// results a second pass combines.
    Split {
        /// Chunks per output.
        chunks: usize,
    },
}

/// A launch's plan: the strategy, and what it gives the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReductionPlan {
    /// How the work is shared.
    pub strategy: Strategy,
    /// Threads that reduce one chunk together (1, [`WARP`] or [`REDUCE_BLOCK`]).
    pub group: u32,
    /// Chunks per output (1 unless split).
    pub chunks: usize,
    /// Elements per chunk (the whole reduction unless split; at least 1).
    pub chunk: usize,
    /// Blocks of the first pass (a grid-stride loop covers the rest).
    pub grid: u32,
    /// Whether a block's consecutive threads take consecutive outputs (and an output's threads
    /// are `REDUCE_BLOCK / group` apart): [`Strategy::ColumnBlock`]. Otherwise an output's
    /// threads are consecutive.
    pub transposed: bool,
}

/// Elements each thread of a split chunk folds, at least.
const ELEMENTS_PER_THREAD: usize = 16;

/// Reductions this short are folded by one thread each.
const THREAD_MAX_LEN: usize = 16;

/// Reductions up to this long are folded by a warp each.
const WARP_MAX_LEN: usize = 2048;

/// Outputs per block of [`Strategy::ColumnBlock`] (and the fewest that use it).
const COLUMN_OUTPUTS: usize = 8;

impl ReductionPlan {
    /// The plan for `n_out` reductions of `len` elements each on a device of `sm_count` SMs.
    /// `inner_contiguous` says whether the reduction runs along memory (the innermost reduced
    /// dimension of the first input has stride 1); `splittable` whether partial results can be
    /// stored (their type's size is known to the host).
    ///
    /// - Few reductions (less than eight blocks per SM) of at least two split chunks (4096
    ///   elements each) are [`Strategy::Split`] into about eight blocks per SM.
    /// - A reduction that does not run along memory (over leading axes) is folded by one thread
    ///   per output (consecutive threads read consecutive addresses) when there are at least 64
    ///   outputs per SM or at most 16 elements per output; otherwise a block folds 8
    ///   consecutive outputs ([`Strategy::ColumnBlock`]), so that the reads stay consecutive, or
    ///   one output where there are fewer than 8.
    /// - Along memory: up to 16 elements a thread each, up to 2048 a warp each, longer a block.
    ///
    /// ```
    /// use kusari_kernels::reduction_kernel::{ReductionPlan, Strategy};
    /// let plan = ReductionPlan::new(1, 1 << 20, true, true, 132);
    /// assert_eq!(plan.strategy, Strategy::Split { chunks: 256 });
    /// assert_eq!(ReductionPlan::new(4096, 64, true, true, 132).strategy, Strategy::WarpPerOutput);
    /// ```
    pub fn new(
        n_out: usize,
        len: usize,
        inner_contiguous: bool,
        splittable: bool,
        sm_count: usize,
    ) -> Self {
        let sm = sm_count.max(1);
        let wanted_blocks = sm * 8;
        let min_chunk = REDUCE_BLOCK as usize * ELEMENTS_PER_THREAD;
        let plan = |strategy, group: u32, chunks: usize| {
            let chunk = if chunks > 1 {
                len.div_ceil(chunks)
            } else {
                len.max(1)
            };
            let per_block = (REDUCE_BLOCK / group) as usize;
            let blocks = (n_out * chunks).div_ceil(per_block);
            ReductionPlan {
                strategy,
                group,
                chunks,
                chunk,
                grid: blocks.clamp(1, sm * 32) as u32,
                transposed: matches!(strategy, Strategy::ColumnBlock),
            }
        };
        if splittable && n_out < wanted_blocks && len >= 2 * min_chunk {
            let chunks = (wanted_blocks / n_out.max(1)).clamp(2, len / min_chunk);
            let chunks = len.div_ceil(len.div_ceil(chunks));
            return plan(Strategy::Split { chunks }, REDUCE_BLOCK, chunks);
        }
        if !inner_contiguous {
            if n_out >= sm * REDUCE_BLOCK as usize / 4 || len <= THREAD_MAX_LEN {
                return plan(Strategy::ThreadPerOutput, 1, 1);
            }
            return match n_out < COLUMN_OUTPUTS {
                true => plan(Strategy::BlockPerOutput, REDUCE_BLOCK, 1),
                false => plan(
                    Strategy::ColumnBlock,
                    REDUCE_BLOCK / COLUMN_OUTPUTS as u32,
                    1,
                ),
            };
        }
        if len <= THREAD_MAX_LEN {
            plan(Strategy::ThreadPerOutput, 1, 1)
        } else if len <= WARP_MAX_LEN {
            plan(Strategy::WarpPerOutput, WARP, 1)
        } else {
            plan(Strategy::BlockPerOutput, REDUCE_BLOCK, 1)
        }
    }
}

/// The dimensions of a reduction after [`coalesce`]: the kept ones (the outputs' C order) and
/// the reduced ones, each with its extent and, per input, its stride in elements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coalesced {
    /// Extents of the kept dimensions.
    pub kept: Vec<usize>,
    /// Per input, the strides of the kept dimensions.
    pub kept_strides: Vec<Vec<isize>>,
    /// Extents of the reduced dimensions.
    pub reduced: Vec<usize>,
    /// Per input, the strides of the reduced dimensions.
    pub reduced_strides: Vec<Vec<isize>>,
}

/// The reduction of arrays of `shape` (each input's `strides` already broadcast to it) over
/// `axes` (sorted, distinct), with dimensions of extent 1 dropped and neighbours of the same
/// kind (both kept or both reduced) merged where every input steps through them as through one
/// dimension. The element order of the kept dimensions and of the reduced ones is unchanged.
///
/// ```
/// use kusari_kernels::reduction_kernel::coalesce;
/// // A contiguous [2, 3, 4] array reduced over its last two axes: 2 rows of 12.
/// let c = coalesce(&[2, 3, 4], &[1, 2], &[vec![12, 4, 1]]);
/// assert_eq!((c.kept, c.reduced), (vec![2], vec![12]));
/// assert_eq!(c.reduced_strides, vec![vec![1]]);
/// ```
pub fn coalesce(shape: &[usize], axes: &[usize], strides: &[Vec<isize>]) -> Coalesced {
    let mut out = Coalesced {
        kept_strides: vec![Vec::new(); strides.len()],
        reduced_strides: vec![Vec::new(); strides.len()],
        ..Coalesced::default()
    };
    // The kind of the previous dimension pushed, to merge only neighbours.
    let mut last: Option<bool> = None;
    for (d, &extent) in shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let reduced = axes.contains(&d);
        let (dims, dim_strides) = match reduced {
            true => (&mut out.reduced, &mut out.reduced_strides),
            false => (&mut out.kept, &mut out.kept_strides),
        };
        let mergeable = last == Some(reduced)
            && strides.iter().zip(dim_strides.iter()).all(|(s, ds)| {
                let prev = *ds.last().unwrap_or(&0);
                prev == s[d] * extent as isize
            });
        if mergeable {
            if let Some(e) = dims.last_mut() {
                *e *= extent;
            }
            for (s, ds) in strides.iter().zip(dim_strides.iter_mut()) {
                if let Some(p) = ds.last_mut() {
                    *p = s[d];
                }
            }
        } else {
            dims.push(extent);
            for (s, ds) in strides.iter().zip(dim_strides.iter_mut()) {
                ds.push(s[d]);
            }
        }
        last = Some(reduced);
    }
    out
}

/// Why a launch cannot run: a reduction of no element and no identity to give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmptyReduction {
    /// The kernel's name.
    pub kernel: &'static str,
}

impl fmt::Display for EmptyReduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel {}: a reduction over zero elements has no value and the kernel has no identity",
            self.kernel
        )
    }
}

/// The dimensions a kernel's layout struct has room for, for `kept` kept and `reduced` reduced
/// dimensions: at least 4, else the next power of two. A kernel takes the actual counts at
/// launch, so one compiled kernel serves every rank up to its capacity (few compiled variants:
/// each costs a compile, and on the emulated device host memory for its threads).
///
/// ```
/// use kusari_kernels::reduction_kernel::rank_capacity;
/// assert_eq!((rank_capacity(0, 1), rank_capacity(2, 4), rank_capacity(5, 1)), (4, 4, 8));
/// ```
pub fn rank_capacity(kept: usize, reduced: usize) -> usize {
    kept.max(reduced).max(4).next_power_of_two()
}

/// The entry point of the first pass for layouts of `capacity` dimensions ([`rank_capacity`]).
pub fn reduce_entry(name: &str, capacity: usize) -> String {
    format!("{name}__d{capacity}")
}

/// The entry point of the second pass of a split reduction.
pub fn combine_entry(name: &str) -> String {
    format!("{name}__combine")
}

/// Appends the user's `code` as lines of its own file `{name}_{part}` (so a compiler error
/// names the user's line), then resumes the generated numbering under `file`.
fn user_part(src: &mut String, name: &str, part: &str, code: &str, file: &str) {
    let _ = writeln!(src, "#line 1 \"{name}_{part}\"");
    for line in code.lines() {
        let _ = writeln!(src, "{line}");
    }
    let next = src.lines().count() + 2;
    let _ = writeln!(src, "#line {next} \"{file}\"");
}

/// The CUDA source of `def` (whose signature is `sig`) with `types` bound to its placeholders,
/// for up to `kept` kept and `reduced` reduced dimensions (after [`coalesce`]; the layout struct
/// has [`rank_capacity`] of each). The source's
/// [`entry`](KernelSource::entry) is the first pass ([`reduce_entry`]); the second pass
/// ([`combine_entry`]) is in the same source.
///
/// First pass parameters, in order: a `const X*` per input, an `X*` per output, each scalar
/// parameter by value, `_type_reduce* _partials`, the layout struct ([`layout_words`]), then `long long _n_out, _N, _chunk,
/// _chunks` and `int _group, _transposed` ([`ReductionPlan::transposed`]). Second pass: the outputs, the scalar parameters, `const
/// _type_reduce* _partials`, `long long _n_out, _N, _chunks`, `int _group`.
pub fn generate_reduction(
    def: &ReductionDef,
    sig: &ElementwiseSignature,
    types: &[(char, ScalarType)],
    kept: usize,
    reduced: usize,
) -> Result<KernelSource, CodegenError> {
    let name = def.name;
    check_kernel_name(name).map_err(CodegenError::Name)?;
    for (part, code) in def.parts() {
        check_body(code).map_err(|error| CodegenError::Code {
            kernel: name.to_string(),
            part,
            error: Box::new(error),
        })?;
    }
    let bound = |c: char| {
        types
            .iter()
            .find(|(p, _)| *p == c)
            .map(|(_, t)| *t)
            .ok_or_else(|| CodegenError::UnboundPlaceholder {
                kernel: name.to_string(),
                placeholder: c,
            })
    };
    let mut typedefs = String::new();
    let mut all_types = Vec::new();
    let mut seen = Vec::new();
    for (_, p) in sig.lists() {
        match p.ty {
            ParamType::Placeholder(c) => {
                let t = bound(c)?;
                all_types.push(t);
                if !seen.contains(&c) {
                    seen.push(c);
                    let _ = writeln!(typedefs, "typedef {} {c};", c_type(t));
                }
            }
            ParamType::Concrete(t) => all_types.push(t),
        }
    }
    let reduce_type = match def.reduce_type(sig) {
        Ok(ReduceType::Placeholder(c)) => c.to_string(),
        Ok(ReduceType::Concrete(t)) => {
            all_types.push(t);
            c_type(t).to_string()
        }
        Ok(ReduceType::Defined(s)) => s,
        Err(message) => {
            return Err(CodegenError::ReduceType {
                kernel: name.to_string(),
                message,
            })
        }
    };
    let ty = |p: &crate::signature::Param| match p.ty {
        ParamType::Placeholder(c) => c.to_string(),
        ParamType::Concrete(t) => c_type(t).to_string(),
    };
    let capacity = rank_capacity(kept, reduced);
    let entry = reduce_entry(name, capacity);
    let combine = combine_entry(name);
    let n_in = sig.inputs.len();

    let mut src = String::new();
    let _ = writeln!(
        src,
        "// kusari reduction kernel `{name}` ({entry}, {combine}); {REDUCE_BLOCK} threads per block"
    );
    src.push_str(&half_prelude(&all_types));
    src.push_str(&typedefs);
    if !def.preamble.is_empty() {
        user_part(&mut src, name, "preamble", def.preamble, &entry);
    }
    let _ = writeln!(src, "typedef {reduce_type} _type_reduce;");
    let _ = writeln!(
        src,
        "struct _Layout {{ long long nkept; long long nreduced; long long kept[{c}]; long long kept_strides[{i}][{c}]; long long reduced[{c}]; long long reduced_strides[{i}][{c}]; }};",
        c = capacity,
        i = n_in.max(1)
    );

    let outputs: Vec<String> = sig
        .outputs
        .iter()
        .map(|p| format!("{}* __restrict__ _out_{}", ty(p), p.name))
        .collect();
    let params: Vec<String> = sig
        .params
        .iter()
        .map(|p| format!("const {} {}", ty(p), p.name))
        .collect();

    // First pass.
    let mut first: Vec<String> = sig
        .inputs
        .iter()
        .map(|p| format!("const {}* __restrict__ _in_{}", ty(p), p.name))
        .collect();
    first.extend(outputs.iter().cloned());
    first.extend(params.iter().cloned());
    first.push("_type_reduce* __restrict__ _partials".to_string());
    first.push("const _Layout _layout".to_string());
    first.push("const long long _n_out, const long long _N, const long long _chunk, const long long _chunks, const int _group, const int _transposed".to_string());
    let _ = writeln!(src, "extern \"C\" __global__ void {entry}(");
    let _ = writeln!(src, "    {}) {{", first.join(",\n    "));
    let _ = writeln!(src, "  const long long _items = _n_out * _chunks;");
    kernel_prologue(&mut src, def, &entry);
    let _ = writeln!(src, "    if (_item < _items) {{");
    let _ = writeln!(src, "      const long long _o = _item / _chunks;");
    let _ = writeln!(
        src,
        "      const long long _begin = (_item % _chunks) * _chunk;"
    );
    let _ = writeln!(
        src,
        "      const long long _end = _begin + _chunk < _N ? _begin + _chunk : _N;"
    );
    let _ = writeln!(src, "      long long _base[{}] = {{0}};", n_in.max(1));
    decompose(&mut src, "_o", n_in, "_base", "kept", "      ");
    // The map, once: the element at offsets `_off` (one per input), `_J` its index.
    let _ = writeln!(
        src,
        "      auto _map = [&](const long long _J, const long long* _off) -> _type_reduce {{"
    );
    let _ = writeln!(src, "        (void)_J;");
    for (k, p) in sig.inputs.iter().enumerate() {
        let _ = writeln!(
            src,
            "        const {} {} = _in_{}[_off[{k}]];",
            ty(p),
            p.name,
            p.name
        );
    }
    let _ = writeln!(src, "        return (_type_reduce)(");
    user_part(&mut src, name, "map_expr", def.map_expr, &entry);
    let _ = writeln!(src, "        );");
    let _ = writeln!(src, "      }};");
    let _ = writeln!(src, "      long long _off[{}];", n_in.max(1));
    // One reduced dimension (after coalescing: a whole contiguous or evenly strided reduction):
    // an offset costs a multiplication, and four elements a step keep four loads in flight.
    // The values are folded in the order of the plain loop.
    let _ = writeln!(src, "      if (_layout.nreduced <= 1) {{");
    let _ = writeln!(src, "        long long _rs[{}];", n_in.max(1));
    let _ = writeln!(
        src,
        "        for (int _a = 0; _a < {n_in}; ++_a) _rs[_a] = _layout.nreduced == 1 ? _layout.reduced_strides[_a][0] : 0;"
    );
    let _ = writeln!(src, "        long long _J = _begin + _lane;");
    let _ = writeln!(
        src,
        "        for (; _J + 3 * (long long)_group < _end; _J += 4 * (long long)_group) {{"
    );
    for k in 0..4 {
        let _ = writeln!(
            src,
            "          const long long _J{k} = _J + {k} * (long long)_group;"
        );
        let _ = writeln!(
            src,
            "          for (int _a = 0; _a < {n_in}; ++_a) _off[_a] = _base[_a] + _J{k} * _rs[_a];"
        );
        let _ = writeln!(
            src,
            "          const _type_reduce _m{k} = _map(_J{k}, _off);"
        );
    }
    for k in 0..4 {
        fold(&mut src, def, &format!("_m{k}"), "          ");
    }
    let _ = writeln!(src, "        }}");
    let _ = writeln!(src, "        for (; _J < _end; _J += _group) {{");
    let _ = writeln!(
        src,
        "          for (int _a = 0; _a < {n_in}; ++_a) _off[_a] = _base[_a] + _J * _rs[_a];"
    );
    let _ = writeln!(src, "          const _type_reduce _m = _map(_J, _off);");
    fold(&mut src, def, "_m", "          ");
    let _ = writeln!(src, "        }}");
    let _ = writeln!(src, "      }} else {{");
    let _ = writeln!(
        src,
        "        for (long long _J = _begin + _lane; _J < _end; _J += _group) {{"
    );
    let _ = writeln!(
        src,
        "          for (int _a = 0; _a < {n_in}; ++_a) _off[_a] = _base[_a];"
    );
    decompose(&mut src, "_J", n_in, "_off", "reduced", "          ");
    let _ = writeln!(src, "          const _type_reduce _m = _map(_J, _off);");
    fold(&mut src, def, "_m", "          ");
    let _ = writeln!(src, "        }}");
    let _ = writeln!(src, "      }}");
    let _ = writeln!(src, "    }}");
    kernel_epilogue(&mut src, def, sig, &entry, true);

    // Second pass.
    let mut second = outputs;
    second.extend(params);
    second.push("const _type_reduce* __restrict__ _partials".to_string());
    second.push(
        "const long long _n_out, const long long _N, const long long _chunks, const int _group"
            .to_string(),
    );
    let _ = writeln!(src, "extern \"C\" __global__ void {combine}(");
    let _ = writeln!(src, "    {}) {{", second.join(",\n    "));
    let _ = writeln!(src, "  const long long _items = _n_out;");
    let _ = writeln!(src, "  const int _transposed = 0;");
    kernel_prologue(&mut src, def, &combine);
    let _ = writeln!(src, "    if (_item < _items) {{");
    let _ = writeln!(
        src,
        "      for (long long _c = _lane; _c < _chunks; _c += _group) {{"
    );
    let _ = writeln!(
        src,
        "        const _type_reduce _m = _partials[_item * _chunks + _c];"
    );
    fold(&mut src, def, "_m", "        ");
    let _ = writeln!(src, "      }}");
    let _ = writeln!(src, "    }}");
    kernel_epilogue(&mut src, def, sig, &combine, false);
    Ok(KernelSource { entry, source: src })
}

/// The start of a kernel: shared memory, the `_reduce` function, the loop over the block's
/// items (uniform across the block, so every thread reaches each barrier), and the thread's
/// accumulator.
fn kernel_prologue(src: &mut String, def: &ReductionDef, file: &str) {
    let _ = writeln!(
        src,
        "  __shared__ long long _smem_words[({REDUCE_BLOCK} * sizeof(_type_reduce) + 7) / 8];"
    );
    let _ = writeln!(
        src,
        "  _type_reduce* const _smem = reinterpret_cast<_type_reduce*>(_smem_words);"
    );
    if def.identity.is_none() {
        let _ = writeln!(src, "  __shared__ bool _smem_have[{REDUCE_BLOCK}];");
    }
    let _ = writeln!(
        src,
        "  auto _reduce = [&](const _type_reduce a, const _type_reduce b) -> _type_reduce {{"
    );
    let _ = writeln!(src, "    return (_type_reduce)(");
    user_part(src, def.name, "reduce_expr", def.reduce_expr, file);
    let _ = writeln!(src, "    );");
    let _ = writeln!(src, "  }};");
    // An item's threads are consecutive, or (transposed) `_per_block` apart so that a warp's
    // consecutive threads take consecutive items.
    let _ = writeln!(src, "  const int _per_block = {REDUCE_BLOCK} / _group;");
    let _ = writeln!(
        src,
        "  const int _lane_stride = _transposed ? _per_block : 1;"
    );
    let _ = writeln!(
        src,
        "  const int _lane = _transposed ? (int)threadIdx.x / _per_block : (int)threadIdx.x % _group;"
    );
    let _ = writeln!(
        src,
        "  const int _slot = _transposed ? (int)threadIdx.x % _per_block : (int)threadIdx.x / _group;"
    );
    let _ = writeln!(
        src,
        "  for (long long _first = (long long)blockIdx.x * _per_block; _first < _items; _first += (long long)gridDim.x * (long long)_per_block) {{"
    );
    let _ = writeln!(src, "    const long long _item = _first + _slot;");
    match def.identity {
        Some(identity) => {
            let _ = writeln!(src, "    _type_reduce _s = (_type_reduce)(");
            user_part(src, def.name, "identity", identity, file);
            let _ = writeln!(src, "    );");
        }
        None => {
            let _ = writeln!(src, "    _type_reduce _s = _type_reduce();");
            let _ = writeln!(src, "    bool _have = false;");
        }
    }
}

/// Folds `value` into the thread's accumulator `_s`.
fn fold(src: &mut String, def: &ReductionDef, value: &str, indent: &str) {
    match def.identity {
        Some(_) => {
            let _ = writeln!(src, "{indent}_s = _reduce(_s, {value});");
        }
        None => {
            let _ = writeln!(src, "{indent}_s = _have ? _reduce(_s, {value}) : {value};");
            let _ = writeln!(src, "{indent}_have = true;");
        }
    }
}

/// The end of a kernel: the group's values combined in shared memory (a tree, a barrier between
/// steps), then the group's first thread writes its item: the outputs through `post_map_expr`,
/// or (in the first pass of a split reduction) a partial result.
fn kernel_epilogue(
    src: &mut String,
    def: &ReductionDef,
    sig: &ElementwiseSignature,
    file: &str,
    first_pass: bool,
) {
    let have = def.identity.is_none();
    let _ = writeln!(src, "    if (_group > 1) {{");
    let _ = writeln!(src, "      _smem[threadIdx.x] = _s;");
    if have {
        let _ = writeln!(src, "      _smem_have[threadIdx.x] = _have;");
    }
    let _ = writeln!(src, "      __syncthreads();");
    let _ = writeln!(
        src,
        "      for (int _step = _group / 2; _step > 0; _step >>= 1) {{"
    );
    let _ = writeln!(src, "        if (_lane < _step) {{");
    let _ = writeln!(src, "          const unsigned int _t = threadIdx.x;");
    if have {
        let _ = writeln!(
            src,
            "          const unsigned int _u = _t + _step * _lane_stride;"
        );
        let _ = writeln!(src, "          if (_smem_have[_u]) {{");
        let _ = writeln!(
            src,
            "            _smem[_t] = _smem_have[_t] ? _reduce(_smem[_t], _smem[_u]) : _smem[_u];"
        );
        let _ = writeln!(src, "            _smem_have[_t] = true;");
        let _ = writeln!(src, "          }}");
    } else {
        let _ = writeln!(
            src,
            "          _smem[_t] = _reduce(_smem[_t], _smem[_t + _step * _lane_stride]);"
        );
    }
    let _ = writeln!(src, "        }}");
    let _ = writeln!(src, "        __syncthreads();");
    let _ = writeln!(src, "      }}");
    let _ = writeln!(src, "      _s = _smem[threadIdx.x - _lane * _lane_stride];");
    let _ = writeln!(
        src,
        "      __syncthreads();  // read before the next item overwrites _smem"
    );
    let _ = writeln!(src, "    }}");
    let _ = writeln!(src, "    if (_lane == 0 && _item < _items) {{");
    if first_pass {
        let _ = writeln!(src, "      if (_chunks > 1) {{");
        let _ = writeln!(src, "        _partials[_item] = _s;");
        let _ = writeln!(src, "      }} else {{");
    } else {
        let _ = writeln!(src, "      (void)_partials;");
        let _ = writeln!(src, "      {{");
    }
    let _ = writeln!(src, "        const long long _o = _item;");
    let _ = writeln!(src, "        const _type_reduce a = _s;");
    for p in &sig.outputs {
        let t = match p.ty {
            ParamType::Placeholder(c) => c.to_string(),
            ParamType::Concrete(t) => c_type(t).to_string(),
        };
        let _ = writeln!(src, "        {t}& {} = _out_{}[_o];", p.name, p.name);
    }
    user_part(src, def.name, "post_map_expr", def.post_map_expr, file);
    let _ = writeln!(src, "        ;");
    let _ = writeln!(src, "      }}");
    let _ = writeln!(src, "    }}");
    let _ = writeln!(src, "  }}");
    let _ = writeln!(src, "}}");
}

/// Adds to `offsets[a]` (per input `a`) the offset of index `index` over the layout's `which`
/// dimensions (`_layout.n{which}` of them): each inner dimension costs one division (its
/// remainder comes by a multiplication), the outermost none, so one dimension costs a
/// multiplication.
fn decompose(src: &mut String, index: &str, n_in: usize, offsets: &str, which: &str, indent: &str) {
    let _ = writeln!(src, "{indent}{{");
    let _ = writeln!(src, "{indent}  long long _r = {index};");
    let _ = writeln!(
        src,
        "{indent}  for (int _d = (int)_layout.n{which} - 1; _d > 0; --_d) {{"
    );
    let _ = writeln!(
        src,
        "{indent}    const long long _q = _r / _layout.{which}[_d];"
    );
    let _ = writeln!(
        src,
        "{indent}    const long long _c = _r - _q * _layout.{which}[_d];"
    );
    let _ = writeln!(src, "{indent}    _r = _q;");
    let _ = writeln!(
        src,
        "{indent}    for (int _a = 0; _a < {n_in}; ++_a) {offsets}[_a] += _c * _layout.{which}_strides[_a][_d];"
    );
    let _ = writeln!(src, "{indent}  }}");
    let _ = writeln!(
        src,
        "{indent}  if (_layout.n{which} > 0) for (int _a = 0; _a < {n_in}; ++_a) {offsets}[_a] += _r * _layout.{which}_strides[_a][0];"
    );
    let _ = writeln!(src, "{indent}}}");
}

/// The layout struct's words for `c` in a kernel of `capacity` dimensions
/// ([`rank_capacity`]): the kept and reduced dimension counts, the kept extents, each input's
/// kept strides, the reduced extents, each input's reduced strides, each list padded to
/// `capacity` (extents with 1, strides with 0).
///
/// ```
/// use kusari_kernels::reduction_kernel::{coalesce, layout_words};
/// let c = coalesce(&[2, 3], &[1], &[vec![3, 1]]);
/// assert_eq!(layout_words(&c, 4), vec![1, 1, 2, 1, 1, 1, 3, 0, 0, 0, 3, 1, 1, 1, 1, 0, 0, 0]);
/// ```
pub fn layout_words(c: &Coalesced, capacity: usize) -> Vec<i64> {
    let n_in = c.kept_strides.len().max(1);
    let mut words = vec![c.kept.len() as i64, c.reduced.len() as i64];
    let mut list = |dims: &[usize], strides: &[Vec<isize>]| {
        let mut ext: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        ext.resize(capacity, 1);
        words.extend(ext);
        for a in 0..n_in {
            let mut s: Vec<i64> = strides
                .get(a)
                .map(|s| s.iter().map(|&x| x as i64).collect())
                .unwrap_or_default();
            s.resize(capacity, 0);
            words.extend(s);
        }
    };
    list(&c.kept, &c.kept_strides);
    list(&c.reduced, &c.reduced_strides);
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::{Float32, Float64};

    const SUM: ReductionDef =
        ReductionDef::new("s", "T x", "T y", "x", "a + b", "y = a", Some("0"));

    #[test]
    fn plans_follow_the_shape() {
        let sm = 132;
        // Many short rows: a thread each; moderate rows: a warp each; long: a block each.
        assert_eq!(
            ReductionPlan::new(100_000, 8, true, true, sm).strategy,
            Strategy::ThreadPerOutput
        );
        let warp = ReductionPlan::new(10_000, 100, true, true, sm);
        assert_eq!((warp.strategy, warp.group), (Strategy::WarpPerOutput, 32));
        assert_eq!(warp.grid, 10_000u32.div_ceil(8).min(132 * 32));
        let block = ReductionPlan::new(10_000, 10_000, true, true, sm);
        assert_eq!(
            (block.strategy, block.group),
            (Strategy::BlockPerOutput, 256)
        );
        // Few long rows are split, every chunk non-empty and at least 4096 long.
        let split = ReductionPlan::new(3, 100_000, true, true, sm);
        let Strategy::Split { chunks } = split.strategy else {
            panic!("{split:?}")
        };
        assert_eq!(chunks, split.chunks);
        assert!(chunks >= 2 && split.chunk >= 4096, "{split:?}");
        assert!((chunks - 1) * split.chunk < 100_000 && chunks * split.chunk >= 100_000);
        assert_eq!(split.grid as usize, 3 * chunks);
        // Not splittable (a preamble's type): a block per row instead.
        assert_eq!(
            ReductionPlan::new(3, 100_000, true, false, sm).strategy,
            Strategy::BlockPerOutput
        );
        // Leading axes: a thread per output (coalesced column reads) when outputs are many.
        assert_eq!(
            ReductionPlan::new(100_000, 1000, false, true, sm).strategy,
            Strategy::ThreadPerOutput
        );
        // Fewer: a block per 8 consecutive outputs, 32 threads each, transposed so that a
        // warp reads consecutive addresses; fewer than 8 outputs, a block each.
        let columns = ReductionPlan::new(4096, 4096, false, true, sm);
        assert_eq!(
            (columns.strategy, columns.group, columns.transposed),
            (Strategy::ColumnBlock, 32, true)
        );
        assert_eq!(columns.grid, 4096 / 8);
        assert_eq!(
            ReductionPlan::new(5, 1000, false, true, sm).strategy,
            Strategy::BlockPerOutput
        );
        assert!(!block.transposed && !warp.transposed);
        // Nothing to do still plans one block.
        let empty = ReductionPlan::new(0, 0, true, true, sm);
        assert_eq!((empty.grid, empty.chunk, empty.chunks), (1, 1, 1));
    }

    #[test]
    fn coalescing_merges_neighbours_of_one_kind_and_drops_unit_dims() {
        // Transposed [3, 2] (strides [1, 3]) reduced over axis 0: nothing merges.
        let c = coalesce(&[3, 2], &[0], &[vec![1, 3]]);
        assert_eq!(c.kept, vec![2]);
        assert_eq!(c.reduced, vec![3]);
        assert_eq!(
            (c.kept_strides, c.reduced_strides),
            (vec![vec![3]], vec![vec![1]])
        );
        // Middle axis of [2, 3, 4]: kept dims 0 and 2 are not neighbours.
        let c = coalesce(&[2, 3, 4], &[1], &[vec![12, 4, 1], vec![0, 0, 1]]);
        assert_eq!((c.kept.clone(), c.reduced.clone()), (vec![2, 4], vec![3]));
        assert_eq!(c.kept_strides, vec![vec![12, 1], vec![0, 1]]);
        assert_eq!(c.reduced_strides, vec![vec![4], vec![0]]);
        // A broadcast input stops a merge that the other allows.
        let c = coalesce(&[2, 3], &[0, 1], &[vec![3, 1], vec![0, 1]]);
        assert_eq!(c.reduced, vec![2, 3]);
        let c = coalesce(&[2, 1, 3], &[0, 1, 2], &[vec![3, 3, 1]]);
        assert_eq!((c.reduced, c.reduced_strides), (vec![6], vec![vec![1]]));
        // Everything reduced: no kept dimension, and the lists padded to the capacity.
        let words = layout_words(&coalesce(&[4], &[0], &[vec![1], vec![0]]), 4);
        let mut want = vec![0, 1];
        want.extend([1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        want.extend([4, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(words, want);
        assert_eq!(rank_capacity(9, 0), 16);
    }

    #[test]
    fn every_part_has_its_own_line_directive_and_the_numbering_resumes() {
        let def = ReductionDef::new(
            "k",
            "T x",
            "T y",
            "x *\n x",
            "a + b",
            "y = a;\ny = y",
            Some("0"),
        )
        .with_preamble("__device__ T twice(T v) {\n  return v + v;\n}");
        let sig = def.signature().unwrap();
        let src = generate_reduction(&def, &sig, &[('T', Float64)], 2, 1).unwrap();
        let lines: Vec<&str> = src.source.lines().collect();
        for part in [
            "preamble",
            "map_expr",
            "reduce_expr",
            "post_map_expr",
            "identity",
        ] {
            assert!(
                lines.contains(&format!("#line 1 \"k_{part}\"").as_str()),
                "{part}:\n{}",
                src.source
            );
        }
        for (at, l) in lines.iter().enumerate() {
            let Some(rest) = l.strip_prefix("#line ") else {
                continue;
            };
            if let Some(n) = rest
                .strip_suffix(" \"k__d4\"")
                .or_else(|| rest.strip_suffix(" \"k__combine\""))
            {
                assert_eq!(n.parse::<usize>().unwrap(), at + 2, "{l}");
            }
        }
        assert_eq!(src.entry, "k__d4");
        assert!(src
            .source
            .contains("extern \"C\" __global__ void k__combine("));
        assert!(src.source.contains("typedef double T;"));
        assert!(src.source.contains(
            "struct _Layout { long long nkept; long long nreduced; long long kept[4]; long long kept_strides[1][4]; long long reduced[4]; long long reduced_strides[1][4]; };"
        ));
        // The preamble comes after the typedefs and before the kernels.
        let typedef = src.source.find("typedef double T;").unwrap();
        let preamble = src.source.find("twice(T v)").unwrap();
        assert!(typedef < preamble && preamble < src.source.find("__global__").unwrap());
    }

    #[test]
    fn without_identity_each_value_says_whether_it_holds_one() {
        let max = ReductionDef::new("m", "T x", "T y", "x", "a > b ? a : b", "y = a", None);
        let sig = max.signature().unwrap();
        let s = generate_reduction(&max, &sig, &[('T', Float32)], 0, 1)
            .unwrap()
            .source;
        assert!(s.contains("bool _have = false;"));
        assert!(s.contains("_s = _have ? _reduce(_s, _m) : _m;"));
        assert!(s.contains("__shared__ bool _smem_have[256];"));
        assert!(s.contains("if (_smem_have[_u]) {"));
        let sum = generate_reduction(&SUM, &SUM.signature().unwrap(), &[('T', Float32)], 1, 1)
            .unwrap()
            .source;
        assert!(!sum.contains("_have"), "{sum}");
        assert!(sum.contains("_s = _reduce(_s, _m);"));
        // Every barrier is reached by the whole block: the item loop's bounds are uniform.
        assert!(sum.contains(
            "for (long long _first = (long long)blockIdx.x * _per_block; _first < _items;"
        ));
        // The second pass has an item per output, the first one per chunk of an output.
        assert!(sum.contains("const long long _items = _n_out * _chunks;"));
        assert!(sum.contains("const long long _items = _n_out;"));
        assert_eq!(sum.matches("__syncthreads();").count(), 6, "{sum}");
    }

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
        let bad = ReductionDef::new(
            "int",
            "raw T x, T b",
            "T y",
            "",
            "a + b)",
            "y = a",
            Some(" "),
        );
        let e = bad.signature().unwrap_err();
        let text = e.to_string();
        for want in [
            "`int` is a C++ keyword",
            "`x` is raw",
            "`b` names a value",
            "invalid reduce_expr",
            "map_expr is empty",
            "identity is empty",
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
        assert!(k
            .check_param_count(&sig, 0)
            .unwrap_err()
            .to_string()
            .contains("0 scalar parameter(s) given"));
        assert_eq!(
            EmptyReduction { kernel: "s" }.to_string(),
            "kernel s: a reduction over zero elements has no value and the kernel has no identity"
        );
    }
}
