//! The CUDA source of a reduction kernel ([`generate_reduction`]): two kernels, the first pass
//! and the second pass of a split reduction, around the user's expressions.

use std::fmt::Write;

use super::def::{ReduceType, ReductionDef};
use super::plan::{REDUCE_BLOCK, rank_capacity};
use crate::body::check_body;
use crate::codegen::{CodegenError, KernelSource, c_type, half_prelude};
use crate::names::check_kernel_name;
use crate::signature::{ElementwiseSignature, ParamType, ScalarType};

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
/// for up to `kept` kept and `reduced` reduced dimensions (after
/// [`coalesce`](super::coalesce); the layout struct has [`rank_capacity`] of each). The
/// source's [`entry`](KernelSource::entry) is the first pass ([`reduce_entry`]); the second pass
/// ([`combine_entry`]) is in the same source.
///
/// First pass parameters, in order: a `const X*` per input, an `X*` per output, each scalar
/// parameter by value, `_type_reduce* _partials`, the layout struct
/// ([`layout_words`](super::layout_words)), then `long long _n_out, _N, _chunk, _chunks` and
/// `int _group, _transposed` ([`ReductionPlan::transposed`](super::ReductionPlan::transposed)).
/// Second pass: the outputs, the scalar parameters, `const _type_reduce* _partials`, `long long
/// _n_out, _N, _chunks`, `int _group`.
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
            });
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
    src.push_str(SHUFFLE_DOWN);
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

/// `__shfl_down_sync` over the full warp for a value of any trivially copyable type (the
/// reduction type may be the user's struct): as one 32-bit word when it fits, else as 64-bit
/// words, the value's bits copied in and out.
const SHUFFLE_DOWN: &str = r#"template <typename _T>
__device__ __forceinline__ _T _kusari_shfl_down(_T _v, const unsigned int _d) {
  if constexpr (sizeof(_T) <= 4) {
    unsigned int _w = 0u;
    memcpy(&_w, &_v, sizeof(_T));
    _w = __shfl_down_sync(0xffffffffu, _w, _d);
    memcpy(&_v, &_w, sizeof(_T));
  } else {
    unsigned long long _w[(sizeof(_T) + 7) / 8] = {};
    memcpy(_w, &_v, sizeof(_T));
    for (unsigned int _i = 0; _i < (sizeof(_T) + 7) / 8; ++_i) {
      _w[_i] = __shfl_down_sync(0xffffffffu, _w[_i], _d);
    }
    memcpy(&_v, _w, sizeof(_T));
  }
  return _v;
}
"#;

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

/// The end of a kernel: the group's values combined, then the group's first thread writes its
/// item: the outputs through `post_map_expr`, or (in the first pass of a split reduction) a
/// partial result.
///
/// The values combine as CUB's warp-reductions block reduce does: first within each warp, by
/// `__shfl_down_sync` steps between the item's lanes of the warp (no shared memory, no
/// barrier: a warp-per-output reduction needs none), then, where an item spans several warps,
/// each warp's first lane of the item leaves its part in shared memory and, after one barrier,
/// the item's first thread folds the parts in warp order (`_reduce` is commutative: each
/// thread's value already folds every `_group`-th element). An item without identity carries
/// `_have` through the shuffles. Every block has [`REDUCE_BLOCK`] threads, whole warps, and
/// reaches the shuffles together (the item loop is uniform), so the full mask is exact.
fn kernel_epilogue(
    src: &mut String,
    def: &ReductionDef,
    sig: &ElementwiseSignature,
    file: &str,
    first_pass: bool,
) {
    let have = def.identity.is_none();
    let _ = writeln!(src, "    if (_group > 1) {{");
    let _ = writeln!(
        src,
        "      // The item's lanes in this warp, and this one's place among them."
    );
    let _ = writeln!(
        src,
        "      const int _wk = _group * _lane_stride <= 32 ? _group : (_lane_stride < 32 ? 32 / _lane_stride : 1);"
    );
    let _ = writeln!(
        src,
        "      const int _p = ((int)(threadIdx.x & 31u) / _lane_stride) % _wk;"
    );
    let _ = writeln!(src, "      for (int _o = _wk / 2; _o > 0; _o >>= 1) {{");
    let _ = writeln!(
        src,
        "        const _type_reduce _v = _kusari_shfl_down(_s, (unsigned int)(_o * _lane_stride));"
    );
    if have {
        let _ = writeln!(
            src,
            "        const bool _vh = __shfl_down_sync(0xffffffffu, (int)_have, (unsigned int)(_o * _lane_stride)) != 0;"
        );
        let _ = writeln!(src, "        if (_p < _o && _vh) {{");
        let _ = writeln!(src, "          _s = _have ? _reduce(_s, _v) : _v;");
        let _ = writeln!(src, "          _have = true;");
        let _ = writeln!(src, "        }}");
    } else {
        let _ = writeln!(src, "        if (_p < _o) _s = _reduce(_s, _v);");
    }
    let _ = writeln!(src, "      }}");
    let _ = writeln!(src, "      if (_group > _wk) {{");
    let _ = writeln!(src, "        if (_p == 0) {{");
    let _ = writeln!(src, "          _smem[threadIdx.x] = _s;");
    if have {
        let _ = writeln!(src, "          _smem_have[threadIdx.x] = _have;");
    }
    let _ = writeln!(src, "        }}");
    let _ = writeln!(src, "        __syncthreads();");
    let _ = writeln!(src, "        if (_lane == 0) {{");
    let _ = writeln!(
        src,
        "          for (int _q = 1; _q < _group / _wk; ++_q) {{"
    );
    let _ = writeln!(
        src,
        "            const unsigned int _u = threadIdx.x + (unsigned int)(_q * _wk * _lane_stride);"
    );
    if have {
        let _ = writeln!(src, "            if (_smem_have[_u]) {{");
        let _ = writeln!(
            src,
            "              _s = _have ? _reduce(_s, _smem[_u]) : _smem[_u];"
        );
        let _ = writeln!(src, "              _have = true;");
        let _ = writeln!(src, "            }}");
    } else {
        let _ = writeln!(src, "            _s = _reduce(_s, _smem[_u]);");
    }
    let _ = writeln!(src, "          }}");
    let _ = writeln!(src, "        }}");
    let _ = writeln!(
        src,
        "        __syncthreads();  // read before the next item overwrites _smem"
    );
    let _ = writeln!(src, "      }}");
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

#[cfg(test)]
mod tests {
    use super::*;
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
    fn every_part_has_its_own_line_directive_and_the_numbering_resumes() {
        let def = ReductionDef {
            name: "k",
            in_params: "T x",
            out_params: "T y",
            map_expr: "x *\n x",
            reduce_expr: "a + b",
            post_map_expr: "y = a;\ny = y",
            identity: Some("0"),
            ..ReductionDef::DEFAULT
        }
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
        assert!(
            src.source
                .contains("extern \"C\" __global__ void k__combine(")
        );
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
        let max = ReductionDef {
            name: "m",
            in_params: "T x",
            out_params: "T y",
            map_expr: "x",
            reduce_expr: "a > b ? a : b",
            post_map_expr: "y = a",
            identity: None,
            ..ReductionDef::DEFAULT
        };
        let sig = max.signature().unwrap();
        let s = generate_reduction(&max, &sig, &[('T', Float32)], 0, 1)
            .unwrap()
            .source;
        assert!(s.contains("bool _have = false;"));
        assert!(s.contains("_s = _have ? _reduce(_s, _m) : _m;"));
        assert!(s.contains("__shared__ bool _smem_have[256];"));
        assert!(s.contains("if (_smem_have[_u]) {"));
        // The flag travels with the value between lanes.
        assert!(s.contains("if (_p < _o && _vh) {"), "{s}");
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
        // Two barriers a pass, both only where an item spans several warps; within a warp,
        // shuffles.
        assert_eq!(sum.matches("__syncthreads();").count(), 4, "{sum}");
        assert_eq!(sum.matches("if (_group > _wk) {").count(), 2, "{sum}");
        assert!(sum.contains("_kusari_shfl_down(_s, (unsigned int)(_o * _lane_stride))"));
    }
}
