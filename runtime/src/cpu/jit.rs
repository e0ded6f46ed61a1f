//! Bodies of the expression language compiled to machine code for the host, by Cranelift: the
//! second tier of the executor in [`super::expr`].
//!
//! The interpreter of [`super::expr`] runs a body one instruction at a time over a block of
//! elements, so each instruction loads its operands from and stores its result to the block's
//! registers in L1. On two cores that work is as long as the trip to memory, and a fused chain of
//! arithmetic took twice the time of the memory traffic it needs. Compiled, the arithmetic of a
//! body is one loop whose values stay in vector registers: each element of an input is loaded
//! once and each element of an output stored once.
//!
//! What is compiled:
//! - arithmetic, comparisons, `&& || !`, `?:`, casts and the functions that are a few
//!   instructions (`fabs`, `fmax`, `fmin`, `copysign`, `floor`, `ceil`, `round`, `trunc`,
//!   `sqrt`, `rsqrt`) run inline, on 128-bit vectors (4 float32 or 2 float64 lanes). Each
//!   computes exactly what the interpreter computes (IEEE operations, the C library's rules for
//!   NaN in `fmax` and `fmin`, `round` half away from zero), so the two tiers give the same bits;
//!   the tests check that on random bodies.
//! - the other functions (`exp`, `tanh`, `pow`, ...) are calls, once per block, to the functions
//!   the interpreter uses ([`ExprFloat::math`] or the standard library): the body is cut there,
//!   into loops over the block between the calls, and a value one loop makes for a later one goes
//!   through a block buffer, as in the interpreter.
//!
//! A body is compiled once per float type and set of scalar inputs, after its programs have
//! computed [`JIT_AFTER`] elements (the interpreter serves the first calls, and a body run once
//! on a small array never pays for a compile); `KUSARI_HOST_JIT` turns the tier off or makes it
//! compile at the first call ([`crate::env`]). A body Cranelift cannot compile for this CPU
//! stays with the interpreter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use cranelift_codegen::Context;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Endianness, InstBuilder, MemFlagsData, SigRef, Signature, Type, UserFuncName, Value,
    types,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use kusari_kernels::expr::{BinaryOp, Func, Instr, Program, TypeKind, UnaryOp};

use super::expr_float::{ExprFloat, call_into};

/// Elements the programs of one body must have computed, on the interpreter, before it is
/// compiled (a compile takes about a millisecond, the time the interpreter takes for some
/// 10⁵ to 10⁶ elements).
pub(crate) const JIT_AFTER: usize = 1 << 20;

/// When bodies are compiled: `Off`, `Tiered` (after [`JIT_AFTER`] elements) or `Eager`.
pub(crate) use crate::env::HostJit as Policy;

/// The policy `KUSARI_HOST_JIT` sets, read once.
pub(crate) fn policy() -> Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    *POLICY.get_or_init(crate::env::host_jit)
}

/// A float type the compiled code computes in.
pub(crate) trait JitFloat: ExprFloat {
    /// The scalar type and the 128-bit vector of it.
    const SCALAR: Type;
    const VECTOR: Type;
    /// `v` as a constant of the type.
    fn constant(b: &mut FunctionBuilder<'_>, v: f64) -> Value;
    /// The function the compiled code calls for a function it does not inline.
    const CALL: CallFn<Self>;
}

/// `Func::ALL[f]` over `m` elements of `a` (and `b`, for a function of two) into `dst`.
type CallFn<T> = extern "C" fn(f: u32, a: *const T, b: *const T, dst: *mut T, m: usize);

/// [`CallFn`] for `T`: the interpreter's loops for a function over a block.
extern "C" fn call_ext<T: ExprFloat>(f: u32, a: *const T, b: *const T, dst: *mut T, m: usize) {
    // SAFETY: the compiled code passes block buffers or input rows of `m` elements each, and a
    // `dst` that is neither (see `Compiler::call`).
    let (a, b, dst) = unsafe {
        (
            std::slice::from_raw_parts(a, m),
            std::slice::from_raw_parts(b, m),
            std::slice::from_raw_parts_mut(dst, m),
        )
    };
    call_into(Func::ALL[f as usize], a, b, dst);
}

impl JitFloat for f32 {
    const SCALAR: Type = types::F32;
    const VECTOR: Type = types::F32X4;
    fn constant(b: &mut FunctionBuilder<'_>, v: f64) -> Value {
        b.ins().f32const(v as f32)
    }
    const CALL: CallFn<f32> = call_ext::<f32>;
}

impl JitFloat for f64 {
    const SCALAR: Type = types::F64;
    const VECTOR: Type = types::F64X2;
    fn constant(b: &mut FunctionBuilder<'_>, v: f64) -> Value {
        b.ins().f64const(v)
    }
    const CALL: CallFn<f64> = call_ext::<f64>;
}

/// The compiled code's entry: `ptrs` holds each input's first element (unused for a scalar
/// input), then each output's, then each block buffer's; `scalars` each input's value (used for
/// a scalar input only), then each parameter; `m` elements, a multiple of the vector's lanes (at
/// most [`LANES`](super::expr::LANES) where the body has calls).
type Entry = unsafe extern "C" fn(ptrs: *const *mut u8, scalars: *const u8, m: i64);

/// A compiled body.
pub(crate) struct Kernel {
    entry: Entry,
    /// Block buffers the code needs (of [`LANES`](super::expr::LANES) elements).
    pub(crate) buffers: usize,
    /// Whether it calls out (and so must run over blocks of at most [`LANES`](super::expr::LANES)).
    pub(crate) calls: bool,
    /// Elements a vector holds: `m` is a multiple of it.
    pub(crate) lanes: usize,
}

impl Kernel {
    /// Runs the code over `m` elements (see [`Entry`]).
    ///
    /// # Safety
    /// `ptrs` and `scalars` as [`Entry`] says, for this kernel's program and float type: each
    /// pointer valid for `m` elements (the buffers for [`LANES`](super::expr::LANES)), the outputs and buffers
    /// written by nothing else meanwhile, `m` a multiple of [`lanes`](Self::lanes), and at most
    /// [`LANES`](super::expr::LANES) where the kernel [`calls`](Self::calls).
    pub(crate) unsafe fn run<T>(&self, ptrs: &[*mut T], scalars: &[T], m: usize) {
        // SAFETY: forwarded contract.
        unsafe { (self.entry)(ptrs.as_ptr().cast(), scalars.as_ptr().cast(), m as i64) }
    }
}

/// What the cache holds for one body, float type and set of scalar inputs.
#[derive(Default)]
struct Slot {
    /// Elements computed by the interpreter so far.
    elements: AtomicUsize,
    /// The compiled code, or `None` where it cannot be compiled.
    kernel: OnceLock<Option<Kernel>>,
}

/// The compiled bodies of the process, by [`key`]. Machine code is never freed: a cache of at
/// most [`MAX_KERNELS`] bodies keeps it bounded.
static CACHE: OnceLock<RwLock<HashMap<Vec<u64>, Arc<Slot>>>> = OnceLock::new();

/// Elements below which a call under [`Policy::Tiered`] neither counts nor runs compiled code.
const SMALL: usize = 1 << 12;

/// Bytes a vector of the compiled code holds (Cranelift's x86 backend has 128-bit vectors).
const VECTOR_BYTES: usize = 16;

/// Vectors an iteration of a compiled loop computes.
const UNROLL: usize = 2;

/// Bodies the process compiles at most; later ones stay with the interpreter.
const MAX_KERNELS: usize = 4096;

/// Whether a call of `n` elements under `policy` looks for compiled code at all. Under the
/// tiered policy a call of few elements is left to the interpreter uncounted: its time is the
/// call's overhead, which the cache's lookup would only add to.
pub(crate) fn considers(n: usize, policy: Policy) -> bool {
    match policy {
        Policy::Off => false,
        Policy::Tiered => n >= SMALL,
        Policy::Eager => true,
    }
}

/// The compiled code for `program` with inputs `scalar` (true for one read as a scalar), in
/// `T`, under `policy`: `None` while the interpreter should run it, for `n` more elements.
pub(crate) fn kernel<T: JitFloat>(
    program: &Program,
    scalar: &[bool],
    n: usize,
    policy: Policy,
) -> Option<Compiled> {
    if !considers(n, policy) {
        return None;
    }
    let key = key::<T>(program, scalar);
    let cache = CACHE.get_or_init(Default::default);
    let slot = {
        let found = {
            let map = cache.read().ok()?;
            match map.get(&key) {
                Some(s) => Some(s.clone()),
                // A full cache: the interpreter, without taking the write lock at each call.
                None if map.len() >= MAX_KERNELS => return None,
                None => None,
            }
        };
        match found {
            Some(s) => s,
            None => {
                let mut map = cache.write().ok()?;
                if map.len() >= MAX_KERNELS && !map.contains_key(&key) {
                    return None;
                }
                map.entry(key).or_default().clone()
            }
        }
    };
    if slot.kernel.get().is_none() {
        let before = slot.elements.fetch_add(n, Ordering::Relaxed);
        if policy == Policy::Tiered && before.saturating_add(n) < JIT_AFTER {
            return None;
        }
    }
    slot.kernel
        .get_or_init(|| {
            // A panic inside Cranelift (an assertion of its own) is a failed compile here, not
            // the caller's panic: the interpreter runs the body.
            let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                compile::<T>(program, scalar)
            }))
            .unwrap_or_else(|_| Err("Cranelift panicked".to_string()));
            compiled
                .map_err(|e| {
                    tracing::warn!(
                        target: "kusari::jit",
                        "the host could not compile a body ({} instructions), which the \
                         interpreter runs instead: {e}",
                        program.instrs.len()
                    )
                })
                .ok()
        })
        .as_ref()?;
    Some(Compiled(slot))
}

/// A cache slot whose kernel is compiled.
pub(crate) struct Compiled(Arc<Slot>);

impl std::ops::Deref for Compiled {
    type Target = Kernel;
    fn deref(&self) -> &Kernel {
        self.0
            .kernel
            .get()
            .and_then(Option::as_ref)
            .expect("made only for a compiled slot")
    }
}

/// The cache's key: the float type, which inputs are scalars, and the instructions and outputs.
fn key<T: JitFloat>(program: &Program, scalar: &[bool]) -> Vec<u64> {
    let mut k = Vec::with_capacity(2 + scalar.len() + 4 * program.instrs.len());
    k.push(size_of::<T>() as u64);
    k.push(scalar.len() as u64);
    k.extend(scalar.iter().map(|&s| u64::from(s)));
    for i in &program.instrs {
        match *i {
            Instr::Input(a) => k.extend([0, a as u64]),
            Instr::Param(a) => k.extend([1, a as u64]),
            Instr::Lit(v) => k.extend([2, v.to_bits()]),
            Instr::Unary(op, a) => k.extend([3, op as u64, a as u64]),
            Instr::Binary(op, a, b) => k.extend([4, op as u64, a as u64, b as u64]),
            Instr::Select(c, a, b) => k.extend([5, c as u64, a as u64, b as u64]),
            Instr::Call(f, [a, b]) => k.extend([6, func_index(f) as u64, a as u64, b as u64]),
            Instr::Cast(t, a) => k.extend([7, matches!(t, TypeKind::Float) as u64, a as u64]),
        }
    }
    k.push(u64::MAX);
    k.extend(program.outputs.iter().map(|&o| o as u64));
    k
}

/// `f`'s index in [`Func::ALL`].
fn func_index(f: Func) -> u32 {
    Func::ALL
        .iter()
        .position(|&g| g == f)
        .expect("every function is in Func::ALL") as u32
}

/// Whether the compiled code computes `f` inline.
fn inline(f: Func) -> bool {
    matches!(
        f,
        Func::Fabs
            | Func::Fmax
            | Func::Fmin
            | Func::Copysign
            | Func::Floor
            | Func::Ceil
            | Func::Round
            | Func::Trunc
            | Func::Sqrt
            | Func::Rsqrt
    )
}

/// Compiles `program` for `T` with the inputs `scalar` marks read as scalars.
pub(crate) fn compile<T: JitFloat>(program: &Program, scalar: &[bool]) -> Result<Kernel, String> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| format!("cranelift setting {k}: {e}"))
    };
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    set(&mut flags, "opt_level", "speed")?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this CPU is not one Cranelift compiles for: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    sig.params.extend([AbiParam::new(ptr), AbiParam::new(ptr)]);
    sig.params.push(AbiParam::new(types::I64));
    let id = module
        .declare_function("body", Linkage::Local, &sig)
        .map_err(|e| e.to_string())?;
    let mut ctx: Context = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    let plan = Plan::new(program, scalar);
    {
        let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let target = module.target_config();
        Compiler::<T>::new(
            b,
            program,
            scalar,
            &plan,
            ptr,
            module.make_signature(),
            target,
        )
        .emit();
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| format!("{e:?}"))?;
    module.finalize_definitions().map_err(|e| e.to_string())?;
    let code = module.get_finalized_function(id);
    // The code lives as long as the process: the cache never drops a kernel.
    std::mem::forget(module);
    Ok(Kernel {
        // SAFETY: `code` is the function just defined with `Entry`'s signature.
        entry: unsafe { std::mem::transmute::<*const u8, Entry>(code) },
        buffers: plan.buffers,
        calls: !plan.calls_at.is_empty(),
        lanes: VECTOR_BYTES / size_of::<T>(),
    })
}

/// Where each register of a program is computed and kept.
struct Plan {
    /// The segment (loop) each register is computed in: `None` for inputs read from memory and
    /// for constants (made where used) and for call results (written by their call).
    segment: Vec<Option<usize>>,
    /// The block buffer each register is kept in, if a later segment or a call reads it.
    buffer: Vec<Option<usize>>,
    /// The index of each call instruction among the segments: segment `k` runs before the
    /// `k`-th call, the last one after every call.
    calls_at: Vec<usize>,
    /// For each segment, the constant registers it writes to their buffers (call operands).
    fills: Vec<Vec<usize>>,
    buffers: usize,
}

impl Plan {
    fn new(program: &Program, scalar: &[bool]) -> Plan {
        let n = program.instrs.len();
        let is_call = |i: &Instr| matches!(*i, Instr::Call(f, _) if !inline(f));
        let constant = |i: &Instr| match *i {
            Instr::Input(k) => scalar[k],
            Instr::Param(_) | Instr::Lit(_) => true,
            _ => false,
        };
        let mut segment = vec![None; n];
        let mut calls_at = Vec::new();
        let mut seg = 0;
        for (r, i) in program.instrs.iter().enumerate() {
            if is_call(i) {
                calls_at.push(r);
                seg += 1;
            } else if !matches!(i, Instr::Input(_)) && !constant(i) {
                segment[r] = Some(seg);
            }
        }
        let last = seg;
        // The segment of each read: a call's operands are read by the segment before it, the
        // outputs by the last.
        let mut needs = vec![false; n];
        let mut fills = vec![Vec::new(); last + 1];
        let mut read = |r: usize, at: usize, by_call: bool| {
            let i = &program.instrs[r];
            let pointer_input = matches!(*i, Instr::Input(k) if !scalar[k]);
            if pointer_input {
                return;
            }
            if constant(i) {
                if by_call && !fills[at].contains(&r) {
                    fills[at].push(r);
                    needs[r] = true;
                }
                return;
            }
            if is_call(i) || segment[r].is_some_and(|s| s < at) || by_call {
                needs[r] = true;
            }
        };
        let mut at = 0;
        for i in &program.instrs {
            let ops: Vec<usize> = match *i {
                Instr::Unary(_, a) | Instr::Cast(_, a) => vec![a],
                Instr::Binary(_, a, b) => vec![a, b],
                Instr::Select(c, a, b) => vec![c, a, b],
                Instr::Call(f, [a, b]) if f.arity() == 2 => vec![a, b],
                Instr::Call(_, [a, _]) => vec![a],
                Instr::Input(_) | Instr::Param(_) | Instr::Lit(_) => vec![],
            };
            let call = is_call(i);
            for a in ops {
                read(a, at, call);
            }
            if call {
                at += 1;
            }
        }
        for &o in &program.outputs {
            read(o, last, false);
        }
        for &r in &calls_at {
            needs[r] = true;
        }
        let mut buffer = vec![None; n];
        let mut buffers = 0;
        for (r, need) in needs.iter().enumerate() {
            if *need {
                buffer[r] = Some(buffers);
                buffers += 1;
            }
        }
        Plan {
            segment,
            buffer,
            fills,
            buffers,
            calls_at,
        }
    }
}

/// Emits a program's function.
struct Compiler<'a, T> {
    b: FunctionBuilder<'a>,
    program: &'a Program,
    /// Per input of the body: whether it is read as a scalar.
    scalar: &'a [bool],
    plan: &'a Plan,
    ptr: Type,
    /// The signature of [`JitFloat::CALL`], imported once.
    call_sig: SigRef,
    target: cranelift_codegen::isa::TargetFrontendConfig,
    /// Per register: its pointer (an input's or a buffer's), or its splat (a constant).
    base: Vec<Option<Value>>,
    splat: Vec<Option<Value>>,
    outputs: Vec<Value>,
    /// The elements to compute, and them in bytes.
    elements: Value,
    m: Value,
    zero: Value,
    one: Value,
    _t: std::marker::PhantomData<T>,
}

impl<'a, T: JitFloat> Compiler<'a, T> {
    fn new(
        mut b: FunctionBuilder<'a>,
        program: &'a Program,
        scalar: &'a [bool],
        plan: &'a Plan,
        ptr: Type,
        mut call_sig: Signature,
        target: cranelift_codegen::isa::TargetFrontendConfig,
    ) -> Self {
        call_sig.params.extend([
            AbiParam::new(types::I32),
            AbiParam::new(ptr),
            AbiParam::new(ptr),
            AbiParam::new(ptr),
            AbiParam::new(ptr),
        ]);
        let call_sig = b.import_signature(call_sig);
        let n = program.instrs.len();
        Compiler {
            b,
            program,
            scalar,
            plan,
            ptr,
            call_sig,
            target,
            base: vec![None; n],
            splat: vec![None; n],
            outputs: Vec::new(),
            elements: Value::from_u32(0),
            m: Value::from_u32(0),
            zero: Value::from_u32(0),
            one: Value::from_u32(0),
            _t: std::marker::PhantomData,
        }
    }

    fn emit(mut self) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let (ptrs, scalars, m) = (params[0], params[1], params[2]);
        // `m` elements, in bytes.
        self.elements = m;
        self.m = self.b.ins().imul_imm_u(m, size_of::<T>() as i64);
        let flags = MemFlagsData::new().with_notrap();
        let word = self.ptr.bytes() as i32;
        let inputs = self.scalar.len();
        let n_out = self.program.outputs.len();
        self.zero = self.vconst(0.0);
        self.one = self.vconst(1.0);
        for (r, i) in self.program.instrs.iter().enumerate() {
            match *i {
                Instr::Input(k) if !self.scalar[k] => {
                    let p = self.b.ins().load(self.ptr, flags, ptrs, word * k as i32);
                    self.base[r] = Some(p);
                }
                Instr::Input(k) => {
                    let s =
                        self.b
                            .ins()
                            .load(T::SCALAR, flags, scalars, (size_of::<T>() * k) as i32);
                    self.splat[r] = Some(self.b.ins().splat(T::VECTOR, s));
                }
                Instr::Param(k) => {
                    let at = (size_of::<T>() * (inputs + k)) as i32;
                    let s = self.b.ins().load(T::SCALAR, flags, scalars, at);
                    self.splat[r] = Some(self.b.ins().splat(T::VECTOR, s));
                }
                Instr::Lit(v) => self.splat[r] = Some(self.vconst(v)),
                _ => {}
            }
            if let Some(k) = self.plan.buffer[r] {
                let at = word * (inputs + n_out + k) as i32;
                // Only registers with no pointer of their own have one: an input read in
                // place never needs a buffer (`Plan::new`).
                self.base[r] = Some(self.b.ins().load(self.ptr, flags, ptrs, at));
            }
        }
        for o in 0..n_out {
            let at = word * (inputs + o) as i32;
            let p = self.b.ins().load(self.ptr, flags, ptrs, at);
            self.outputs.push(p);
        }
        let segments = self.plan.calls_at.len() + 1;
        for s in 0..segments {
            self.segment(s);
            if let Some(&r) = self.plan.calls_at.get(s) {
                self.call(r);
            }
        }
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
        self.b.finalize(self.target);
    }

    fn vconst(&mut self, v: f64) -> Value {
        let c = T::constant(&mut self.b, v);
        self.b.ins().splat(T::VECTOR, c)
    }

    /// The call of instruction `r` over the block.
    fn call(&mut self, r: usize) {
        let Instr::Call(f, [a, b]) = self.program.instrs[r] else {
            unreachable!("calls_at holds calls")
        };
        let callee = self.b.ins().iconst(self.ptr, T::CALL as usize as i64);
        let fi = self.b.ins().iconst(types::I32, i64::from(func_index(f)));
        let pa = self.base[a].expect("a call's operand has a pointer");
        let pb = if f.arity() == 2 {
            self.base[b].expect("a call's operand has a pointer")
        } else {
            pa
        };
        let dst = self.base[r].expect("a call's result has a buffer");
        let m = self.elements;
        self.b
            .ins()
            .call_indirect(self.call_sig, callee, &[fi, pa, pb, dst, m]);
    }

    /// The loops of segment `s`: its instructions over the `m` elements, [`UNROLL`] vectors an
    /// iteration, then a vector at a time.
    fn segment(&mut self, s: usize) {
        let last = s == self.plan.calls_at.len();
        let regs: Vec<usize> = (0..self.program.instrs.len())
            .filter(|&r| self.plan.segment[r] == Some(s))
            .collect();
        if regs.is_empty() && self.plan.fills[s].is_empty() && !last {
            return;
        }
        let start = self.b.ins().iconst(self.ptr, 0);
        let mut off = start;
        for unroll in [UNROLL, 1] {
            let head = self.b.create_block();
            let body = self.b.create_block();
            let exit = self.b.create_block();
            self.b.append_block_param(head, self.ptr);
            self.b.append_block_param(exit, self.ptr);
            self.b.ins().jump(head, &[off.into()]);
            self.b.switch_to_block(head);
            let at = self.b.block_params(head)[0];
            let end = self.b.ins().iadd_imm_u(at, (VECTOR_BYTES * unroll) as i64);
            let more = self
                .b
                .ins()
                .icmp(IntCC::UnsignedLessThanOrEqual, end, self.m);
            self.b.ins().brif(more, body, &[], exit, &[at.into()]);
            self.b.switch_to_block(body);
            for k in 0..unroll {
                let o = self.b.ins().iadd_imm_u(at, (VECTOR_BYTES * k) as i64);
                self.iteration(s, &regs, last, o);
            }
            self.b.ins().jump(head, &[end.into()]);
            self.b.switch_to_block(exit);
            off = self.b.block_params(exit)[0];
        }
    }

    /// One vector of segment `s` (computing `regs`) at byte offset `off`.
    fn iteration(&mut self, s: usize, regs: &[usize], last: bool, off: Value) {
        let flags = MemFlagsData::new().with_notrap();
        let mut val: HashMap<usize, Value> = HashMap::new();
        for &r in &self.plan.fills[s] {
            let v = self.splat[r].expect("a constant has a splat");
            let p = self.base[r].expect("a filled constant has a buffer");
            let at = self.b.ins().iadd(p, off);
            self.b.ins().store(flags, v, at, 0);
        }
        for &r in regs {
            let v = self.instr(r, off, &mut val);
            val.insert(r, v);
            if let Some(p) = self.plan.buffer[r].and(self.base[r]) {
                let at = self.b.ins().iadd(p, off);
                self.b.ins().store(flags, v, at, 0);
            }
        }
        if last {
            for o in 0..self.program.outputs.len() {
                let r = self.program.outputs[o];
                let v = self.read(r, off, &mut val);
                let at = self.b.ins().iadd(self.outputs[o], off);
                self.b.ins().store(flags, v, at, 0);
            }
        }
    }

    /// Register `r`'s vector at byte offset `off`: computed in this iteration, a constant, or
    /// loaded from its input or buffer.
    fn read(&mut self, r: usize, off: Value, val: &mut HashMap<usize, Value>) -> Value {
        if let Some(&v) = val.get(&r) {
            return v;
        }
        if let Some(v) = self.splat[r] {
            return v;
        }
        let p = self.base[r].expect("a register read from memory has a pointer");
        let at = self.b.ins().iadd(p, off);
        let v = self
            .b
            .ins()
            .load(T::VECTOR, MemFlagsData::new().with_notrap(), at, 0);
        val.insert(r, v);
        v
    }

    /// A comparison's lanes as a float vector of all-ones or all-zeros bits.
    fn mask(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        let m = self.b.ins().fcmp(cc, a, b);
        let little = MemFlagsData::new().with_endianness(Endianness::Little);
        self.b.ins().bitcast(T::VECTOR, little, m)
    }

    /// 1 where `mask` is set, else 0.
    fn truth(&mut self, mask: Value) -> Value {
        self.b.ins().band(mask, self.one)
    }

    /// `x` with the sign of `y`, by bits (Cranelift has no vector `fcopysign` on x86).
    fn copysign(&mut self, x: Value, y: Value) -> Value {
        let sign = self.vconst(-0.0);
        let magnitude = self.b.ins().band_not(x, sign);
        let sign = self.b.ins().band(y, sign);
        self.b.ins().bor(magnitude, sign)
    }

    /// `fmax` (`max` true) or `fmin` by the C library's rule: a NaN operand gives the other.
    /// As a select: `y` where `x < y` (for `fmax`) or where `x` is NaN, else `x`; one
    /// comparison (unordered or less) where `y` is a number (`fmax(x, 0)`, `relu`'s formula),
    /// two and an `or` otherwise. Cranelift's own `fmax` is IEEE 754-2019's `maximum`, which
    /// propagates NaN, and takes a dozen instructions on x86.
    fn fmaxmin(&mut self, x: Value, y: Value, max: bool, y_number: bool) -> Value {
        let (lo, hi) = if max { (x, y) } else { (y, x) };
        let take_y = if y_number {
            self.mask(FloatCC::UnorderedOrLessThan, lo, hi)
        } else {
            let y_wins = self.mask(FloatCC::LessThan, lo, hi);
            let x_nan = self.mask(FloatCC::Unordered, x, x);
            self.b.ins().bor(y_wins, x_nan)
        };
        self.b.ins().bitselect(take_y, y, x)
    }

    fn instr(&mut self, r: usize, off: Value, val: &mut HashMap<usize, Value>) -> Value {
        let mut rd = |c: &mut Self, k: usize| c.read(k, off, val);
        match self.program.instrs[r] {
            Instr::Input(_) | Instr::Param(_) | Instr::Lit(_) => {
                unreachable!("inputs and constants are read, not computed")
            }
            Instr::Unary(UnaryOp::Neg, a) => {
                let a = rd(self, a);
                self.b.ins().fneg(a)
            }
            Instr::Unary(UnaryOp::Not, a) => {
                let a = rd(self, a);
                let m = self.mask(FloatCC::Equal, a, self.zero);
                self.truth(m)
            }
            Instr::Binary(op, a, b) => {
                let (x, y) = (rd(self, a), rd(self, b));
                let ins = self.b.ins();
                match op {
                    BinaryOp::Add => ins.fadd(x, y),
                    BinaryOp::Sub => ins.fsub(x, y),
                    BinaryOp::Mul => ins.fmul(x, y),
                    BinaryOp::Div => ins.fdiv(x, y),
                    BinaryOp::And | BinaryOp::Or => {
                        let mx = self.mask(FloatCC::NotEqual, x, self.zero);
                        let my = self.mask(FloatCC::NotEqual, y, self.zero);
                        let m = if op == BinaryOp::And {
                            self.b.ins().band(mx, my)
                        } else {
                            self.b.ins().bor(mx, my)
                        };
                        self.truth(m)
                    }
                    cmp => {
                        let cc = match cmp {
                            BinaryOp::Lt => FloatCC::LessThan,
                            BinaryOp::Le => FloatCC::LessThanOrEqual,
                            BinaryOp::Gt => FloatCC::GreaterThan,
                            BinaryOp::Ge => FloatCC::GreaterThanOrEqual,
                            BinaryOp::Eq => FloatCC::Equal,
                            _ => FloatCC::NotEqual,
                        };
                        let m = self.mask(cc, x, y);
                        self.truth(m)
                    }
                }
            }
            Instr::Select(c, a, b) => {
                let (c, x, y) = (rd(self, c), rd(self, a), rd(self, b));
                let m = self.mask(FloatCC::NotEqual, c, self.zero);
                self.b.ins().bitselect(m, x, y)
            }
            Instr::Cast(TypeKind::Integer, a) => {
                let a = rd(self, a);
                self.b.ins().trunc(a)
            }
            Instr::Cast(TypeKind::Float, a) => rd(self, a),
            Instr::Call(f, [a, b]) => {
                let x = rd(self, a);
                match f {
                    Func::Fabs => self.b.ins().fabs(x),
                    Func::Floor => self.b.ins().floor(x),
                    Func::Ceil => self.b.ins().ceil(x),
                    Func::Trunc => self.b.ins().trunc(x),
                    Func::Sqrt => self.b.ins().sqrt(x),
                    Func::Rsqrt => {
                        let s = self.b.ins().sqrt(x);
                        self.b.ins().fdiv(self.one, s)
                    }
                    Func::Round => {
                        // Half away from zero: the truncation, plus one away from zero where
                        // the fraction is at least a half, with the sign of `x` (-0.4 → -0).
                        let t = self.b.ins().trunc(x);
                        let d = self.b.ins().fsub(x, t);
                        let d = self.b.ins().fabs(d);
                        let half = self.vconst(0.5);
                        let big = self.mask(FloatCC::GreaterThanOrEqual, d, half);
                        let step = self.copysign(self.one, x);
                        let step = self.b.ins().band(big, step);
                        let r = self.b.ins().fadd(t, step);
                        self.copysign(r, x)
                    }
                    Func::Fmax | Func::Fmin | Func::Copysign => {
                        let y = rd(self, b);
                        let number = matches!(self.program.instrs[b], Instr::Lit(v) if !v.is_nan());
                        match f {
                            Func::Copysign => self.copysign(x, y),
                            _ => self.fmaxmin(x, y, f == Func::Fmax, number),
                        }
                    }
                    _ => unreachable!("a call that is not inline ends a segment"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kusari_kernels::expr::{Scope, parse_body};

    use super::*;
    use crate::cpu::expr::{HostFloat, Operand, run_interpreted, run_with};

    /// The program of `body` over inputs `x0, x1, ...` (`inputs` of them), parameters `p0, ...`
    /// and outputs `y0, ...`.
    fn program(inputs: usize, params: usize, outputs: usize, body: &str) -> Program {
        let names = |p: &str, n: usize| (0..n).map(|i| format!("{p}{i}")).collect();
        let scope = Scope {
            inputs: names("x", inputs),
            params: names("p", params),
            outputs: names("y", outputs),
            ..Scope::default()
        };
        let parsed = parse_body(body, &scope).unwrap_or_else(|e| panic!("{body}: {e:?}"));
        Program::lower(&parsed, &scope)
    }

    /// A small generator of test values (xorshift), so that runs repeat.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// Mostly values in [-4, 4), and every special case: signed zeros, halves (for
        /// `round`), infinities, NaN, the huge and the tiny.
        fn value(&mut self) -> f64 {
            const SPECIAL: [f64; 14] = [
                0.0,
                -0.0,
                0.5,
                -0.5,
                1.5,
                -2.5,
                2.5,
                1e30,
                -1e-30,
                3.0,
                0.25,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
            ];
            if self.below(4) == 0 {
                SPECIAL[self.below(SPECIAL.len())]
            } else {
                (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0
            }
        }
    }

    /// Whether two results are the same: the same bits, any NaN equal to any NaN, and where
    /// `signless_zero` (a body with `fmax` or `fmin`, whose result for +0 and -0 C leaves open)
    /// either zero equal to the other.
    fn same<T: ExprFloat>(a: T, b: T, signless_zero: bool) -> bool {
        let (a, b) = (a.to_f64(), b.to_f64());
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits() || (signless_zero && a == b)
    }

    /// Runs `p` compiled and interpreted over `n` elements with each input read as a row, as a
    /// scalar and as a repeated block in turn, and asserts the two give the same bits.
    fn agree<T: HostFloat>(p: &Program, inputs: usize, params: usize, n: usize, rng: &mut Rng) {
        let rows: Vec<Vec<T>> = (0..inputs)
            .map(|_| (0..n).map(|_| T::from_f64(rng.value())).collect())
            .collect();
        let cycle: Vec<T> = (0..7).map(|_| T::from_f64(rng.value())).collect();
        let params: Vec<T> = (0..params).map(|_| T::from_f64(rng.value())).collect();
        // Every input a row, then each input in turn a scalar and a repeated block.
        let mut kinds = vec![vec![0; inputs]];
        for k in 0..inputs {
            for kind in [1, 2] {
                let mut v = vec![0; inputs];
                v[k] = kind;
                kinds.push(v);
            }
        }
        for kind in kinds {
            let operands: Vec<Operand<'_, T>> = kind
                .iter()
                .zip(&rows)
                .map(|(&k, r)| match k {
                    0 => Operand::Slice(r),
                    1 => Operand::Scalar(r[0]),
                    _ => Operand::Cycle(&cycle),
                })
                .collect();
            let scalar: Vec<bool> = kind.iter().map(|&k| k == 1).collect();
            if let Err(e) = compile::<T>(p, &scalar) {
                panic!("Cranelift does not compile {p:?}: {e}");
            }
            assert!(kernel::<T>(p, &scalar, n, Policy::Eager).is_some());
            let fast = run_with("test", p, &operands, &params, n, Policy::Eager).unwrap();
            let slow = run_interpreted("test", p, &operands, &params, n).unwrap();
            let signless_zero = p
                .instrs
                .iter()
                .any(|i| matches!(i, Instr::Call(Func::Fmax | Func::Fmin, _)));
            for (o, (f, s)) in fast.iter().zip(&slow).enumerate() {
                for i in 0..n {
                    assert!(
                        same(f[i], s[i], signless_zero),
                        "{p:?} with inputs {kind:?}: output {o} at {i} is {} compiled, {} \
                         interpreted",
                        f[i].to_f64(),
                        s[i].to_f64()
                    );
                }
            }
        }
    }

    /// Bodies that use every construct the compiled code has, inline or called.
    const BODIES: &[(usize, usize, usize, &str)] = &[
        (2, 0, 1, "y0 = x0 + x1 * x0 - x1 / x0"),
        (1, 0, 1, "y0 = -x0"),
        (
            2,
            0,
            1,
            "y0 = (x0 < x1) + 2 * (x0 <= x1) + 4 * (x0 > x1) + 8 * (x0 >= x1)",
        ),
        (
            2,
            0,
            1,
            "y0 = (x0 == x1) + 2 * (x0 != x1) + 4 * (x0 && x1) + 8 * (x0 || x1) + 16 * !x0",
        ),
        (3, 0, 1, "y0 = x0 ? x1 : x2"),
        (1, 0, 1, "y0 = (int)x0 + (float)x0"),
        (2, 0, 1, "y0 = fmax(x0, x1) + 3 * fmin(x0, x1)"),
        (
            1,
            0,
            1,
            "y0 = fmax(x0, 0.5) + 3 * fmin(x0, -1) + fmax(x0, 1.0 / 0.0)",
        ),
        (2, 0, 1, "y0 = copysign(x0, x1) * fabs(x1)"),
        (1, 0, 1, "y0 = floor(x0) + 10 * ceil(x0)"),
        (1, 0, 1, "y0 = round(x0)"),
        (1, 0, 1, "y0 = trunc(x0) + sqrt(x0) + rsqrt(x0)"),
        (1, 1, 1, "y0 = fmax(x0 * p0 + 0.5, 0) * p0 - 0.25 * x0"),
        (
            2,
            0,
            1,
            "y0 = tanh(x0 * x1 + 0.5) * (1 / (1 + exp(-x0))) + x1",
        ),
        (2, 0, 1, "y0 = pow(x0, x1) + atan2(x1, 2.0) + erf(x0)"),
        (1, 0, 2, "y0 = exp(x0); y1 = log(exp(x0) + 1) * x0"),
        (2, 1, 2, "y0 = x1; y1 = p0"),
        (1, 0, 1, "y0 = sin(cos(x0)) + log1p(fabs(x0)) * expm1(x0)"),
    ];

    #[test]
    fn compiled_bodies_give_the_interpreters_bits_in_float32_and_float64() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        // 2 chunks and a tail of 3: parallel runs, whole blocks, and a padded last vector.
        let n = 2 * (1 << 14) + 256 + 3;
        for &(i, p, o, body) in BODIES {
            let prog = program(i, p, o, body);
            agree::<f32>(&prog, i, p, n, &mut rng);
            agree::<f64>(&prog, i, p, n, &mut rng);
        }
    }

    #[test]
    fn random_programs_give_the_interpreters_bits() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for case in 0..60 {
            let (inputs, params) = (1 + rng.below(3), rng.below(2));
            let mut instrs: Vec<Instr> = (0..inputs).map(Instr::Input).collect();
            instrs.extend((0..params).map(Instr::Param));
            for _ in 0..4 + rng.below(16) {
                let r = instrs.len();
                let mut reg = || rng.below(r);
                let (a, b, c) = (reg(), reg(), reg());
                let binary = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Lt,
                    BinaryOp::Ge,
                    BinaryOp::Eq,
                    BinaryOp::And,
                ];
                let instr = match rng.below(8) {
                    0 => Instr::Lit(rng.value()),
                    1 => Instr::Unary(UnaryOp::Neg, a),
                    2 => Instr::Select(c, a, b),
                    3 | 4 => Instr::Call(Func::ALL[rng.below(Func::ALL.len())], [a, b]),
                    5 => Instr::Cast(TypeKind::Integer, a),
                    _ => Instr::Binary(binary[rng.below(binary.len())], a, b),
                };
                instrs.push(instr);
            }
            let last = instrs.len() - 1;
            let outputs = vec![last, rng.below(last + 1)];
            let prog = Program { instrs, outputs };
            let n = 1000 + case;
            agree::<f32>(&prog, inputs, params, n, &mut rng);
            agree::<f64>(&prog, inputs, params, n, &mut rng);
        }
    }

    #[test]
    fn threads_that_run_one_body_at_once_get_the_interpreters_results_from_one_kernel() {
        // A body no other test runs, so that the threads race to compile it.
        let prog = program(2, 0, 1, "y0 = fmax(x0, x1) * 0.987654321 - x1");
        let x: Vec<f64> = (0..5003).map(|i| (i as f64 * 0.37).sin()).collect();
        let a: Vec<f64> = (0..5003).map(|i| (i as f64 * 0.11).cos()).collect();
        let inputs = [Operand::Slice(&x), Operand::Slice(&a)];
        let want = run_interpreted("test", &prog, &inputs, &[], x.len()).unwrap();
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..6)
                .map(|_| s.spawn(|| run_with("test", &prog, &inputs, &[], x.len(), Policy::Eager)))
                .collect();
            for r in runs {
                assert_eq!(r.join().unwrap().unwrap(), want);
            }
        });
        let key = key::<f64>(&prog, &[false, false]);
        let cache = CACHE.get().unwrap().read().unwrap();
        assert!(
            cache[&key].kernel.get().unwrap().is_some(),
            "compiled once, kept"
        );
    }

    #[test]
    fn a_body_is_compiled_once_it_has_computed_enough_elements() {
        // A body no other test runs (its literal), so that its slot is fresh.
        let prog = program(1, 0, 1, "y0 = x0 * 0.123456789 + 1");
        let step = JIT_AFTER / 4;
        // Calls too small to count: twice `JIT_AFTER` elements in all, still interpreted.
        for _ in 0..2 * JIT_AFTER / SMALL {
            assert!(kernel::<f32>(&prog, &[false], SMALL - 1, Policy::Tiered).is_none());
        }
        for _ in 0..3 {
            assert!(kernel::<f32>(&prog, &[false], step, Policy::Tiered).is_none());
        }
        assert!(kernel::<f32>(&prog, &[false], step, Policy::Tiered).is_some());
        // Another float type or a scalar input is a body of its own.
        assert!(kernel::<f64>(&prog, &[false], step, Policy::Tiered).is_none());
        assert!(kernel::<f32>(&prog, &[true], step, Policy::Tiered).is_none());
        assert!(kernel::<f32>(&prog, &[true], 1, Policy::Off).is_none());
        assert!(kernel::<f32>(&prog, &[true], 1, Policy::Eager).is_some());
    }
}
