//! What a raw kernel's parameters are read as ([`RawFunction`], [`RawParam`], [`CType`]), so that
//! a launch can check its arguments against them; [`parse_kernels`](super::parse_kernels) reads
//! them from the source.

use std::fmt;

use crate::signature::ScalarType;

/// A scalar C type of a kernel parameter (LP64: `long` is 8 bytes, as NVRTC has it on Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    /// `bool`
    Bool,
    /// A signed integer of this many bytes (`char` counts as signed).
    Int(u8),
    /// An unsigned integer of this many bytes.
    UInt(u8),
    /// `half` / `__half`
    Half,
    /// `__nv_bfloat16`
    BFloat16,
    /// `float`
    Float,
    /// `double`
    Double,
}

impl CType {
    /// Its size in bytes.
    pub fn size(self) -> usize {
        match self {
            CType::Bool => 1,
            CType::Int(b) | CType::UInt(b) => usize::from(b),
            CType::Half | CType::BFloat16 => 2,
            CType::Float => 4,
            CType::Double => 8,
        }
    }

    /// The element type an array of this C type holds (`char` is `int8`).
    pub fn scalar_type(self) -> Option<ScalarType> {
        Some(match self {
            CType::Bool => ScalarType::Bool,
            CType::Int(1) => ScalarType::Int8,
            CType::Int(2) => ScalarType::Int16,
            CType::Int(4) => ScalarType::Int32,
            CType::Int(8) => ScalarType::Int64,
            CType::UInt(1) => ScalarType::UInt8,
            CType::UInt(2) => ScalarType::UInt16,
            CType::UInt(4) => ScalarType::UInt32,
            CType::UInt(8) => ScalarType::UInt64,
            CType::Half => ScalarType::Float16,
            CType::BFloat16 => ScalarType::BFloat16,
            CType::Float => ScalarType::Float32,
            CType::Double => ScalarType::Float64,
            CType::Int(_) | CType::UInt(_) => return None,
        })
    }

    /// Whether a pointer to this type may address an array of `dtype`: the same type, an
    /// integer of the same width whatever its signedness (an `unsigned int*` over an `int32`
    /// array), or bytes (`char`, `unsigned char`), which address anything.
    pub fn addresses(self, dtype: ScalarType) -> bool {
        match self {
            CType::Int(1) | CType::UInt(1) => true,
            CType::Int(b) | CType::UInt(b) => matches!(
                (CType::Int(b).scalar_type(), CType::UInt(b).scalar_type()),
                (Some(s), Some(u)) if dtype == s || dtype == u
            ),
            t => t.scalar_type() == Some(dtype),
        }
    }
}

impl fmt::Display for CType {
    /// The type's usual C spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CType::Bool => "bool",
            CType::Int(1) => "char",
            CType::Int(2) => "short",
            CType::Int(4) => "int",
            CType::Int(_) => "long long",
            CType::UInt(1) => "unsigned char",
            CType::UInt(2) => "unsigned short",
            CType::UInt(4) => "unsigned int",
            CType::UInt(_) => "unsigned long long",
            CType::Half => "half",
            CType::BFloat16 => "__nv_bfloat16",
            CType::Float => "float",
            CType::Double => "double",
        })
    }
}

/// What a kernel parameter is, as far as the parser can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawParamType {
    /// A pointer (or an array parameter, which is one), to a known scalar type or, `None`, to
    /// `void`, a pointer, a struct or a type the parser does not know.
    Pointer(Option<CType>),
    /// A scalar passed by value.
    Scalar(CType),
    /// A by-value parameter of a type the parser does not know (a struct, a template argument,
    /// a macro it cannot expand): its argument is not checked.
    Unknown,
    /// A parameter as a compiled module describes it ([`super::binary_kernels`]): its size in
    /// bytes, and what PTX says of its kind. A cubin says only the size.
    Compiled {
        /// Its size in bytes.
        bytes: usize,
        /// What the module says of it besides.
        class: CompiledClass,
    },
}

/// What PTX or a cubin says of a parameter besides its size ([`RawParamType::Compiled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompiledClass {
    /// An integer of either signedness (PTX `.u32`, `.s16`, `.b8`, ...: NVRTC declares `int`
    /// and `unsigned int` alike as `.u32`).
    Integer,
    /// An 8-byte integer or a pointer (PTX `.u64`, which NVRTC declares for both).
    IntegerOrPointer,
    /// Bytes: a by-value struct (PTX `.b8 name[N]`), or a cubin's parameter, of which only the
    /// size is recorded.
    Bytes,
}

impl fmt::Display for RawParamType {
    /// What the parameter is, for messages: `float`, `pointer to float`, `8-byte integer or
    /// pointer`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawParamType::Pointer(Some(t)) => write!(f, "pointer to {t}"),
            RawParamType::Pointer(None) => f.write_str("pointer"),
            RawParamType::Scalar(t) => write!(f, "{t}"),
            RawParamType::Unknown => f.write_str("value of an unread type"),
            RawParamType::Compiled { bytes, class } => match class {
                CompiledClass::Integer => write!(f, "{bytes}-byte integer"),
                CompiledClass::IntegerOrPointer => write!(f, "{bytes}-byte integer or pointer"),
                CompiledClass::Bytes => write!(f, "{bytes}-byte value"),
            },
        }
    }
}

/// One parameter of a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawParam {
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Its type.
    pub ty: RawParamType,
    /// The declaration as written (whitespace normalised), for messages.
    pub decl: String,
}

/// A `__global__` function of a source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFunction {
    /// Its name.
    pub name: String,
    /// Whether it is declared `extern "C"` (directly or in an `extern "C" { .. }` block): only
    /// then does the compiled module know it by this name.
    pub extern_c: bool,
    /// Its parameters, in order.
    pub params: Vec<RawParam>,
    /// Why its declaration may not be the one the compiler sees (it depends on a condition
    /// kusari cannot decide, such as `#if __CUDA_ARCH__ >= 800`), so that its parameters must
    /// not be trusted; `None` when it is the compiler's.
    pub unchecked: Option<String>,
}
