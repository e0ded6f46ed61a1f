//! Raw kernels (CuPy's `RawKernel` and `RawModule`): a user's own CUDA source, as a pure
//! function of strings, with no GPU.
//!
//! - [`raw_source`]: the translation unit compiled for a source and its options: `-D`/`-U`
//!   options as `#define`/`#undef` lines, then `#line 1 "<label>"` so that compiler logs number
//!   the user's lines as the user does.
//! - [`parse_kernels`]: the `__global__` functions a source declares, with their parameter
//!   lists read as C declarations, so that a launch can check its arguments against them.
//!
//! The source is read as the compiler reads it: preprocessed first (`preprocess`: lines
//! spliced, comments removed, `#define`/`#undef` and `#if`/`#ifdef`/`#elif`/`#else` obeyed with
//! the kernel's own `-D`/`-U` options, macros expanded in declarations), so a kernel declared
//! by a macro is found, and a parameter's type chosen by `#if PRECISION == 2` is the one
//! compiled. A declaration that depends on what kusari cannot know when it reads the source
//! (`__CUDA_ARCH__`, the compiler's version, a quoted `#include`) is marked
//! ([`RawFunction::unchecked`]) rather than guessed.
//!
//! The parser reads what a kernel's parameter list usually holds: the built-in arithmetic types
//! (`bool`, `char`, `short`, `int`, `long`, `long long`, `unsigned ...`, `float`, `double`), the
//! fixed-width and size types (`int32_t`, `uint64_t`, `size_t`, `ptrdiff_t`, ...), the half
//! types (`half`, `__half`, `__nv_bfloat16`), pointers and arrays of them, the qualifiers
//! `const`, `volatile`, `__restrict__` and `__grid_constant__`, and names that macros,
//! `typedef type NAME;` or `using NAME = type;` give a type. What it cannot read is
//! [`RawParamType::Unknown`] (a by-value struct, a template argument), whose argument is then
//! passed unchecked (the kernel's `unchecked_reason` names it), or a pointer of unknown
//! pointee, which takes any array. A template kernel is read for one instance at a time
//! ([`parse_instance`]: `my_func<float, 4>`, CuPy's name expressions), its template arguments
//! substituted into its parameter list.
//!
//! A module already compiled (PTX, a cubin, a fatbin) is read by `binary`
//! ([`binary_kernels`]): its kernels and what it records of their parameters.
//!
//! One concept a file: `source` (the translation unit and its options), `preprocess` (what the
//! compiler sees of it), `params` (the types a kernel's parameters are read as), `parse` (the
//! C declaration parser that reads them) and `binary` (what a compiled module says of them).
//! The limits a launch is checked against are [`crate::launch_limits`]'s.

mod binary;
mod params;
mod parse;
mod preprocess;
mod source;

pub use binary::{
    BinaryFormat, ELF_MAGIC, FATBIN_MAGIC, binary_kernels, cubin_kernels, ptx_kernels,
};
pub use params::{CType, CompiledClass, RawFunction, RawParam, RawParamType};
pub use parse::{is_name_expression, parse_instance, parse_kernels};
pub use source::{RawSourceError, numbered_user_source, option_lines, raw_source};

// Their former place, kept for one release (CHANGELOG.md).
#[doc(hidden)]
pub use crate::launch_limits::{
    MAX_BLOCK_DIMS, MAX_BLOCK_THREADS, MAX_DYNAMIC_SHARED_BYTES, MAX_GRID_DIMS, check_launch,
};
