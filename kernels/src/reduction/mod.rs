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
//! use kusari_kernels::reduction::{generate_reduction, ReductionDef};
//! use kusari_kernels::ScalarType;
//! const L2: ReductionDef = ReductionDef {
//!     name: "l2norm",
//!     in_params: "T x",
//!     out_params: "T y",
//!     map_expr: "x * x",
//!     reduce_expr: "a + b",
//!     post_map_expr: "y = sqrt(a)",
//!     identity: Some("0"),
//!     ..ReductionDef::DEFAULT
//! };
//! let sig = L2.signature().unwrap();
//! let src = generate_reduction(&L2, &sig, &[('T', ScalarType::Float32)], 1, 1).unwrap();
//! assert_eq!(src.entry, "l2norm__d4");
//! assert!(src.source.contains("typedef T _type_reduce;"));
//! ```

//!
//! One concept a file: [`def`](ReductionDef) (the definition and its checks), `plan` (how a
//! launch shares the work: [`ReductionPlan`], [`coalesce`], the layout words) and `codegen` (the
//! CUDA source).

mod codegen;
mod def;
mod plan;

pub use codegen::{combine_entry, generate_reduction, reduce_entry};
pub use def::{ReduceType, ReductionDef};
pub use plan::{
    Coalesced, REDUCE_BLOCK, ReductionPlan, Strategy, WARP, coalesce, layout_words, rank_capacity,
};
