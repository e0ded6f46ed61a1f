//! Modules already compiled (CuPy's `RawModule(path=..)`): what a PTX text, a cubin or a fatbin
//! is ([`BinaryFormat::of`]), and the kernels it holds with their parameters as far as it says
//! ([`binary_kernels`]), so that launches of its kernels are checked as those of a source are.
//!
//! - **PTX** declares each kernel as `.entry name(.param .u64 name_param_0, ...)`. Its types
//!   say a parameter's width and whether it is a float (`.f32`, `.f64`), an integer of either
//!   signedness (NVRTC declares `int` and `unsigned int` alike as `.u32`), an 8-byte integer or
//!   pointer (`.u64`, unless marked `.ptr`), or a by-value struct (`.align 8 .b8 name[16]`).
//! - **A cubin** (an ELF file) marks its kernels as functions with the CUDA entry flag in its
//!   symbol table, and records each parameter's ordinal, offset and size (nothing more) in the
//!   `EIATTR_KPARAM_INFO` attributes of its `.nv.info.<kernel>` section.
//! - **A fatbin** wraps cubins and PTX for several architectures, compressed or not: its
//!   kernels are not read, and are looked up by name when launched.

use super::params::{CType, CompiledClass, RawFunction, RawParam, RawParamType};

/// The first bytes of a cubin (an ELF file).
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// The first bytes of a fatbin (`0xBA55ED50`, little-endian).
pub const FATBIN_MAGIC: [u8; 4] = [0x50, 0xed, 0x55, 0xba];

/// What a compiled module is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryFormat {
    /// PTX text, for the driver to compile.
    Ptx,
    /// Machine code for one architecture (an ELF file).
    Cubin,
    /// Cubins and PTX for several architectures.
    Fatbin,
}

impl BinaryFormat {
    /// What `bytes` are, from their first bytes: an ELF file is a cubin, the fatbin magic a
    /// fatbin, and UTF-8 text with a PTX `.version` directive PTX. Anything else is an error
    /// saying what it is not.
    ///
    /// ```
    /// use kusari_kernels::raw::BinaryFormat;
    /// assert_eq!(BinaryFormat::of(b"\x7fELF\x02\x01"), Ok(BinaryFormat::Cubin));
    /// assert_eq!(BinaryFormat::of(b"//\n.version 8.0\n.target sm_80\n"), Ok(BinaryFormat::Ptx));
    /// assert!(BinaryFormat::of(b"extern \"C\" __global__ void k() {}").is_err());
    /// ```
    pub fn of(bytes: &[u8]) -> Result<BinaryFormat, String> {
        if bytes.starts_with(ELF_MAGIC) {
            return Ok(BinaryFormat::Cubin);
        }
        if bytes.starts_with(&FATBIN_MAGIC) {
            return Ok(BinaryFormat::Fatbin);
        }
        let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        match std::str::from_utf8(text) {
            Ok(t) if t.contains('\0') => Err("text with a NUL byte inside is not PTX".to_string()),
            Ok(t) if t.lines().any(|l| l.trim_start().starts_with(".version")) => {
                Ok(BinaryFormat::Ptx)
            }
            Ok(_) => Err(
                "text without a `.version` directive is not PTX (CUDA C++ source makes a \
                 module with `RawModule::new`)"
                    .to_string(),
            ),
            Err(_) => Err(format!(
                "{} bytes that are neither PTX text, a cubin (an ELF file, `\\x7fELF`) nor a \
                 fatbin (`0xBA55ED50`)",
                bytes.len()
            )),
        }
    }
}

impl std::fmt::Display for BinaryFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BinaryFormat::Ptx => "PTX",
            BinaryFormat::Cubin => "a cubin",
            BinaryFormat::Fatbin => "a fatbin",
        })
    }
}

/// The kernels `bytes` (of `format`) hold, with their parameters as the module records them
/// ([`RawParamType::Compiled`], or a float scalar where PTX says `.f32`/`.f64`); `Err` says
/// why they cannot be read (a fatbin, a damaged file). A kernel's name is its compiled name,
/// C++-mangled unless it was declared `extern "C"`.
pub fn binary_kernels(bytes: &[u8], format: BinaryFormat) -> Result<Vec<RawFunction>, String> {
    match format {
        BinaryFormat::Ptx => {
            let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
            let text =
                std::str::from_utf8(text).map_err(|e| format!("the PTX is not UTF-8: {e}"))?;
            Ok(ptx_kernels(text))
        }
        BinaryFormat::Cubin => cubin_kernels(bytes),
        BinaryFormat::Fatbin => Err(
            "a fatbin's kernels are not read (it may be compressed); they are looked up by \
             name when launched"
                .to_string(),
        ),
    }
}

/// The `.entry` kernels of a PTX text, with their parameters.
///
/// ```
/// use kusari_kernels::raw::{ptx_kernels, CType, CompiledClass, RawParamType};
/// let k = ptx_kernels(
///     ".visible .entry k(\n .param .u64 k_param_0,\n .param .f32 k_param_1,\n \
///      .param .u32 k_param_2\n)\n{\n ret;\n}\n",
/// );
/// assert_eq!(k[0].name, "k");
/// let types: Vec<_> = k[0].params.iter().map(|p| p.ty).collect();
/// assert_eq!(
///     types,
///     [
///         RawParamType::Compiled { bytes: 8, class: CompiledClass::IntegerOrPointer },
///         RawParamType::Scalar(CType::Float),
///         RawParamType::Compiled { bytes: 4, class: CompiledClass::Integer },
///     ]
/// );
/// ```
pub fn ptx_kernels(ptx: &str) -> Vec<RawFunction> {
    let mut found = Vec::new();
    let mut rest = ptx;
    while let Some(at) = find_directive(rest, ".entry") {
        let after = &rest[at + ".entry".len()..];
        let after_trim = after.trim_start();
        let name: String = after_trim
            .chars()
            .take_while(|&c| c.is_ascii_alphanumeric() || "_$.".contains(c))
            .collect();
        let tail = after_trim[name.len()..].trim_start();
        rest = after;
        if name.is_empty() {
            continue;
        }
        let params = match tail.strip_prefix('(') {
            Some(list) => {
                let list = &list[..list.find(')').unwrap_or(list.len())];
                list.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(ptx_param)
                    .collect()
            }
            None => Vec::new(),
        };
        found.push(compiled_kernel(name, params));
    }
    found
}

/// A kernel of a compiled module: known by its compiled name, its parameters trusted.
fn compiled_kernel(name: String, params: Vec<RawParam>) -> RawFunction {
    RawFunction {
        name,
        extern_c: true,
        params,
        unchecked: None,
    }
}

/// Where the directive `word` next stands in `text` as a whole word, outside comments.
fn find_directive(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        from = at + word.len();
        let before_ok = text[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let after_ok = text[from..].chars().next().is_none_or(char::is_whitespace);
        let line = &text[text[..at].rfind('\n').map_or(0, |p| p + 1)..at];
        if before_ok && after_ok && !line.contains("//") {
            return Some(at);
        }
    }
    None
}

/// One PTX parameter declaration (`.param .u64 .ptr .global .align 4 k_param_0`,
/// `.param .align 8 .b8 k_param_5[16]`).
fn ptx_param(decl: &str) -> RawParam {
    let words: Vec<&str> = decl.split_whitespace().collect();
    let name_word = words.last().copied().unwrap_or_default();
    let (name, array) = match name_word.split_once('[') {
        Some((n, len)) => (n, len.trim_end_matches(']').parse::<usize>().ok()),
        None => (name_word, None),
    };
    let ty = words
        .iter()
        .find(|w| {
            w.len() > 2
                && w.starts_with('.')
                && matches!(w.as_bytes()[1], b'u' | b's' | b'b' | b'f')
                && w[2..].bytes().all(|b| b.is_ascii_digit())
        })
        .copied()
        .unwrap_or_default();
    let bits: usize = ty.get(2..).and_then(|b| b.parse().ok()).unwrap_or(0);
    let pointer = words.contains(&".ptr");
    let ty = match (array, ty.as_bytes().get(1), bits) {
        (Some(len), _, _) => RawParamType::Compiled {
            bytes: len * (bits / 8).max(1),
            class: CompiledClass::Bytes,
        },
        (None, _, 64) if pointer => RawParamType::Pointer(None),
        (None, Some(b'f'), 16) => RawParamType::Scalar(CType::Half),
        (None, Some(b'f'), 32) => RawParamType::Scalar(CType::Float),
        (None, Some(b'f'), 64) => RawParamType::Scalar(CType::Double),
        (None, Some(_), 64) => RawParamType::Compiled {
            bytes: 8,
            class: CompiledClass::IntegerOrPointer,
        },
        (None, Some(b'u' | b's' | b'b'), 8 | 16 | 32) => RawParamType::Compiled {
            bytes: bits / 8,
            class: CompiledClass::Integer,
        },
        _ => RawParamType::Unknown,
    };
    RawParam {
        name: (!name.is_empty()).then(|| name.to_string()),
        ty,
        decl: words.join(" "),
    }
}

/// A little-endian reader over a cubin that reports reads past its end.
struct Elf<'a>(&'a [u8]);

impl Elf<'_> {
    fn bytes(&self, at: usize, len: usize) -> Result<&[u8], String> {
        at.checked_add(len)
            .and_then(|end| self.0.get(at..end))
            .ok_or_else(|| format!("the cubin ends before byte {}", at.saturating_add(len)))
    }
    fn u16(&self, at: usize) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.bytes(at, 2)?.try_into().unwrap()))
    }
    fn u32(&self, at: usize) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(at, 4)?.try_into().unwrap()))
    }
    fn u64(&self, at: usize) -> Result<usize, String> {
        let v = u64::from_le_bytes(self.bytes(at, 8)?.try_into().unwrap());
        usize::try_from(v).map_err(|_| format!("the cubin has an offset of {v}"))
    }
    /// The NUL-terminated string at `at`.
    fn str(&self, at: usize) -> Result<&str, String> {
        let tail = self.0.get(at..).ok_or("a name lies past the cubin's end")?;
        let end = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or("a name has no end")?;
        std::str::from_utf8(&tail[..end]).map_err(|_| "a name is not UTF-8".to_string())
    }
}

/// A section of the cubin: its name, type, file offset, size, link and entry size.
struct Section<'a> {
    name: &'a str,
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    entry_size: usize,
}

/// `.nv.info` attribute formats and the attributes read.
const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;
const EIATTR_KPARAM_INFO: u8 = 0x17;
/// ELF section types: a symbol table.
const SHT_SYMTAB: u32 = 2;
/// A symbol's type: a function; its `st_other` flag for a CUDA kernel.
const STT_FUNC: u8 = 2;
const STO_CUDA_ENTRY: u8 = 0x10;

/// The kernels of a 64-bit little-endian cubin, each parameter of the size its
/// `EIATTR_KPARAM_INFO` records ([`CompiledClass::Bytes`]).
pub fn cubin_kernels(bytes: &[u8]) -> Result<Vec<RawFunction>, String> {
    let elf = Elf(bytes);
    if !bytes.starts_with(ELF_MAGIC) {
        return Err("not a cubin: it does not start with `\\x7fELF`".to_string());
    }
    if elf.bytes(4, 2)? != [2, 1] {
        return Err("not a 64-bit little-endian ELF file, as cubins are".to_string());
    }
    let sh_off = elf.u64(0x28)?;
    let sh_size = usize::from(elf.u16(0x3a)?);
    let sh_num = usize::from(elf.u16(0x3c)?);
    let sh_strndx = usize::from(elf.u16(0x3e)?);
    if sh_size < 0x40 || sh_strndx >= sh_num {
        return Err("the cubin's section table is damaged".to_string());
    }
    let header = |i: usize| -> Result<(u32, u32, usize, usize, usize, usize), String> {
        let at = sh_off + i * sh_size;
        Ok((
            elf.u32(at)?,
            elf.u32(at + 4)?,
            elf.u64(at + 0x18)?,
            elf.u64(at + 0x20)?,
            elf.u32(at + 0x28)? as usize,
            elf.u64(at + 0x38)?,
        ))
    };
    let names_at = header(sh_strndx)?.2;
    let mut sections = Vec::with_capacity(sh_num);
    for i in 0..sh_num {
        let (name, kind, offset, size, link, entry_size) = header(i)?;
        elf.bytes(offset, if kind == 8 { 0 } else { size })?; // NOBITS sections have no bytes.
        sections.push(Section {
            name: elf.str(names_at + name as usize)?,
            kind,
            offset,
            size,
            link,
            entry_size,
        });
    }
    let symtab = sections
        .iter()
        .find(|s| s.kind == SHT_SYMTAB)
        .ok_or("the cubin has no symbol table")?;
    let strings = sections
        .get(symtab.link)
        .ok_or("the cubin's symbol table names no string table")?
        .offset;
    if symtab.entry_size < 24 {
        return Err("the cubin's symbol table is damaged".to_string());
    }
    let mut found = Vec::new();
    for j in 0..symtab.size / symtab.entry_size {
        let at = symtab.offset + j * symtab.entry_size;
        let info = elf.bytes(at + 4, 2)?;
        if info[0] & 0xf != STT_FUNC || info[1] & STO_CUDA_ENTRY == 0 {
            continue;
        }
        let name = elf.str(strings + elf.u32(at)? as usize)?.to_string();
        let info_name = format!(".nv.info.{name}");
        let params = match sections.iter().find(|s| s.name == info_name) {
            Some(s) => kernel_params(&elf, s)?,
            None => Vec::new(),
        };
        found.push(compiled_kernel(name, params));
    }
    Ok(found)
}

/// The parameters an `.nv.info.<kernel>` section records, in order.
fn kernel_params(elf: &Elf<'_>, s: &Section<'_>) -> Result<Vec<RawParam>, String> {
    let mut sizes: Vec<Option<usize>> = Vec::new();
    let mut at = s.offset;
    let end = s.offset + s.size;
    while at + 4 <= end {
        let (format, attribute) = (elf.bytes(at, 1)?[0], elf.bytes(at + 1, 1)?[0]);
        match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => at += 4,
            EIFMT_SVAL => {
                let len = usize::from(elf.u16(at + 2)?);
                if attribute == EIATTR_KPARAM_INFO && len >= 12 {
                    let ordinal = usize::from(elf.u16(at + 8)?);
                    let size = (elf.u32(at + 12)? >> 18) as usize & 0x3fff;
                    if ordinal >= 4096 {
                        return Err(format!("`{}` records a parameter {ordinal}", s.name));
                    }
                    if sizes.len() <= ordinal {
                        sizes.resize(ordinal + 1, None);
                    }
                    sizes[ordinal] = Some(size);
                }
                at += 4 + len;
            }
            other => {
                return Err(format!(
                    "`{}` has an attribute of unknown format {other:#x}",
                    s.name
                ));
            }
        }
    }
    sizes
        .into_iter()
        .enumerate()
        .map(|(i, size)| {
            let bytes =
                size.ok_or_else(|| format!("`{}` does not record parameter {i}", s.name))?;
            Ok(RawParam {
                name: None,
                ty: RawParamType::Compiled {
                    bytes,
                    class: CompiledClass::Bytes,
                },
                decl: format!("{bytes}-byte parameter"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_parameters_are_read_with_their_widths_and_kinds() {
        let ptx = "//\n// .entry not_this(\n.version 8.0\n.target sm_80\n\
                   .visible .entry k1(\n\t.param .u64 k1_param_0,\n\t.param .u32 k1_param_1,\n\
                   \t.param .f64 k1_param_2,\n\t.param .u8 k1_param_3,\n\
                   \t.param .align 8 .b8 k1_param_5[16],\n\t.param .u64 .ptr .global .align 4 k1_param_6,\n\
                   \t.param .u16 k1_param_7\n)\n{\n}\n.visible .entry k0()\n{\n}\n\
                   .weak .entry _Z2tkIfLi3EEvPT_i(\n\t.param .u64 _Z2tkIfLi3EEvPT_i_param_0\n)\n{\n}\n";
        let k = ptx_kernels(ptx);
        let names: Vec<&str> = k.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["k1", "k0", "_Z2tkIfLi3EEvPT_i"]);
        let types: Vec<RawParamType> = k[0].params.iter().map(|p| p.ty).collect();
        let int = |bytes| RawParamType::Compiled {
            bytes,
            class: CompiledClass::Integer,
        };
        assert_eq!(
            types,
            [
                RawParamType::Compiled {
                    bytes: 8,
                    class: CompiledClass::IntegerOrPointer
                },
                int(4),
                RawParamType::Scalar(CType::Double),
                int(1),
                RawParamType::Compiled {
                    bytes: 16,
                    class: CompiledClass::Bytes
                },
                RawParamType::Pointer(None),
                int(2),
            ]
        );
        assert_eq!(k[0].params[1].name.as_deref(), Some("k1_param_1"));
        assert!(k[1].params.is_empty());
        assert_eq!(k[2].params.len(), 1);
    }

    #[test]
    fn formats_are_told_apart_and_damaged_cubins_are_errors() {
        assert_eq!(BinaryFormat::of(&FATBIN_MAGIC), Ok(BinaryFormat::Fatbin));
        assert_eq!(
            BinaryFormat::of(b".version 8.0\n.target sm_80\n\0"),
            Ok(BinaryFormat::Ptx)
        );
        assert!(
            BinaryFormat::of(&[0xff, 0xfe, 0])
                .unwrap_err()
                .contains("neither")
        );
        assert!(BinaryFormat::of(b".version 8\0.x").is_err());
        for cut in [4, 6, 0x30, 0x40] {
            let mut elf = b"\x7fELF\x02\x01".to_vec();
            elf.resize(cut.max(6), 0);
            assert!(cubin_kernels(&elf).is_err(), "{cut}");
        }
        assert!(
            cubin_kernels(b"\x7fELF\x01\x01\0\0")
                .unwrap_err()
                .contains("64-bit")
        );
        assert!(binary_kernels(&FATBIN_MAGIC, BinaryFormat::Fatbin).is_err());
    }
}
