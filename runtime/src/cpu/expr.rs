//! Bodies of the expression language ([`kusari_kernels::expr`]) run on the host: a body's
//! straight-line [`Program`] over blocks of [`LANES`] elements at a time, each instruction a
//! loop over the block (the vectorized math of [`super::math`] for the functions it has), the
//! blocks of a chunk of [`CHUNK`] elements in one task and the chunks across threads. The
//! intermediate values of a block stay in cache: an op of many instructions reads its inputs
//! and writes its outputs once, as one GPU kernel does.

use std::mem::MaybeUninit;

use kusari_kernels::expr::{BinaryOp, Instr, Program, TypeKind, UnaryOp};
use rayon::prelude::*;

use super::elementwise::{PAR_MIN, wide};
pub(crate) use super::expr_float::ExprFloat;
use super::expr_float::call_into;
use crate::error::Result;

/// Elements a block computes each instruction over.
pub(crate) const LANES: usize = 256;

/// Elements a task runs (blocks of [`LANES`]).
const CHUNK: usize = 1 << 14;

/// What an input is to a run: `n` elements in C order, or one value for all of them.
#[derive(Clone, Copy)]
pub(crate) enum Operand<'a, T> {
    /// The elements, one per output element.
    Slice(&'a [T]),
    /// One value, broadcast.
    Scalar(T),
    /// A block repeated along leading axes: element `i` is `block[i % block.len()]`.
    Cycle(&'a [T]),
}

/// An output buffer shared by the tasks, each writing its own range.
struct Shared<T>(*mut MaybeUninit<T>);

// SAFETY: the tasks write disjoint ranges of the buffer (see `run`), which outlives them.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<T> {}

/// A float type the host runs bodies in: [`ExprFloat`], which [`super::jit`] also compiles
/// for where the crate has that feature.
#[cfg(feature = "jit")]
pub(crate) trait HostFloat: super::jit::JitFloat {}
/// A float type the host runs bodies in.
#[cfg(not(feature = "jit"))]
pub(crate) trait HostFloat: ExprFloat {}

impl HostFloat for f32 {}
impl HostFloat for f64 {}

/// Runs `program` over `n` elements of `inputs` with `params`: one buffer per output. The
/// compiled code of [`super::jit`] runs it where `KUSARI_HOST_JIT`'s policy has compiled it, the
/// interpreter otherwise.
pub(crate) fn run<T: HostFloat>(
    op: &'static str,
    program: &Program,
    inputs: &[Operand<'_, T>],
    params: &[T],
    n: usize,
) -> Result<Vec<Vec<T>>> {
    #[cfg(feature = "jit")]
    return run_with(op, program, inputs, params, n, super::jit::policy());
    #[cfg(not(feature = "jit"))]
    run_interpreted(op, program, inputs, params, n)
}

/// [`run`] under the compile `policy`.
#[cfg(feature = "jit")]
pub(crate) fn run_with<T: HostFloat>(
    op: &'static str,
    program: &Program,
    inputs: &[Operand<'_, T>],
    params: &[T],
    n: usize,
    policy: super::jit::Policy,
) -> Result<Vec<Vec<T>>> {
    if !super::jit::considers(n, policy) {
        return run_interpreted(op, program, inputs, params, n);
    }
    let scalar: Vec<bool> = inputs
        .iter()
        .map(|i| matches!(i, Operand::Scalar(_)))
        .collect();
    match super::jit::kernel::<T>(program, &scalar, n, policy) {
        Some(k) => run_compiled(op, program, &k, inputs, params, n),
        None => run_interpreted(op, program, inputs, params, n),
    }
}

/// `n` fresh elements for each output of `program`, filled by `task(chunk, outputs)` over the
/// chunks of [`CHUNK`] elements, in parallel where `n` is large enough.
fn run_chunks<T: ExprFloat>(
    op: &'static str,
    program: &Program,
    n: usize,
    task: impl Fn(usize, &[Shared<T>]) + Sync + Send,
) -> Result<Vec<Vec<T>>> {
    let mut outputs: Vec<Vec<T>> = (0..program.outputs.len())
        .map(|_| -> Result<Vec<T>> { Ok(super::pool::alloc(op, n)?) })
        .collect::<Result<_>>()?;
    let shared: Vec<Shared<T>> = outputs
        .iter_mut()
        .map(|o| Shared(o.spare_capacity_mut().as_mut_ptr()))
        .collect();
    let chunks = n.div_ceil(CHUNK);
    // A body of several instructions costs more an element than one op: split sooner.
    if n >= PAR_MIN / program.instrs.len().max(1) {
        super::threads::start();
        (0..chunks).into_par_iter().for_each(|c| task(c, &shared));
    } else {
        (0..chunks).for_each(|c| task(c, &shared));
    }
    for o in &mut outputs {
        // SAFETY: the tasks wrote every element of [0, n).
        unsafe { o.set_len(n) };
    }
    Ok(outputs)
}

/// [`run`] by the compiled code `kernel`: over each chunk at once where the code makes no calls
/// and no input repeats, else over blocks of [`LANES`]; the last elements that do not fill a
/// vector through padded copies.
#[cfg(feature = "jit")]
fn run_compiled<T: ExprFloat>(
    op: &'static str,
    program: &Program,
    kernel: &super::jit::Kernel,
    inputs: &[Operand<'_, T>],
    params: &[T],
    n: usize,
) -> Result<Vec<Vec<T>>> {
    let scalars: Vec<T> = inputs
        .iter()
        .map(|i| match *i {
            Operand::Scalar(v) => v,
            _ => T::default(),
        })
        .chain(params.iter().copied())
        .collect();
    let cycles = inputs.iter().any(|i| matches!(i, Operand::Cycle(_)));
    let step = if kernel.calls || cycles { LANES } else { CHUNK };
    let (ni, no, lanes) = (inputs.len(), program.outputs.len(), kernel.lanes);
    run_chunks(op, program, n, |chunk, outs| {
        let start = chunk * CHUNK;
        let end = (start + CHUNK).min(n);
        let mut buffers = vec![[T::default(); LANES]; kernel.buffers];
        let mut repeated = vec![[T::default(); LANES]; if cycles { ni } else { 0 }];
        let mut ptrs: Vec<*mut T> = vec![std::ptr::null_mut(); ni + no + kernel.buffers];
        for (p, b) in ptrs[ni + no..].iter_mut().zip(&mut buffers) {
            *p = b.as_mut_ptr();
        }
        let mut s = start;
        while s < end {
            let e = (s + step).min(end);
            let m = e - s;
            for (k, input) in inputs.iter().enumerate() {
                ptrs[k] = match *input {
                    Operand::Slice(x) => x[s..e].as_ptr().cast_mut(),
                    Operand::Scalar(_) => std::ptr::null_mut(),
                    Operand::Cycle(c) => {
                        fill_cycle(c, s, &mut repeated[k][..m]);
                        repeated[k].as_mut_ptr()
                    }
                };
            }
            for (p, o) in ptrs[ni..ni + no].iter_mut().zip(outs) {
                // SAFETY: `s < n`, within the buffer.
                *p = unsafe { o.0.add(s) }.cast();
            }
            let whole = m - m % lanes;
            if whole > 0 {
                // SAFETY: each pointer holds `m >= whole` elements (the buffers `LANES`, and
                // `whole <= LANES` where the code calls or an input repeats); this task alone
                // writes the outputs' range [s, e) and its own buffers.
                unsafe { kernel.run(&ptrs, &scalars, whole) };
            }
            if whole < m {
                // The last elements, through copies padded to one vector.
                let rest = m - whole;
                let mut pad_in = vec![[T::default(); 8]; ni];
                let mut pad_out = vec![[T::default(); 8]; no];
                let mut tail = ptrs.clone();
                for k in 0..ni {
                    if !ptrs[k].is_null() {
                        // SAFETY: the input's pointer holds `m` elements.
                        let src = unsafe { std::slice::from_raw_parts(ptrs[k].add(whole), rest) };
                        pad_in[k][..rest].copy_from_slice(src);
                        tail[k] = pad_in[k].as_mut_ptr();
                    }
                }
                for (o, p) in pad_out.iter_mut().enumerate() {
                    tail[ni + o] = p.as_mut_ptr();
                }
                // SAFETY: as above, over one vector (`lanes <= 8`) of the padded copies.
                unsafe { kernel.run(&tail, &scalars, lanes) };
                for (p, o) in pad_out.iter().zip(outs) {
                    // SAFETY: `s + whole + rest = e <= n`; this task writes [s, e).
                    unsafe {
                        std::ptr::copy_nonoverlapping(p.as_ptr(), o.0.add(s + whole).cast(), rest)
                    };
                }
            }
            s = e;
        }
    })
}

/// The elements `[s, s + dst.len())` of the repetition of `c` into `dst`.
fn fill_cycle<T: Copy>(c: &[T], s: usize, dst: &mut [T]) {
    let m = dst.len();
    let mut at = s % c.len();
    let mut k = 0;
    while k < m {
        let take = (c.len() - at).min(m - k);
        dst[k..k + take].copy_from_slice(&c[at..at + take]);
        k += take;
        at = 0;
    }
}

/// [`run`] by the interpreter.
pub(crate) fn run_interpreted<T: ExprFloat>(
    op: &'static str,
    program: &Program,
    inputs: &[Operand<'_, T>],
    params: &[T],
    n: usize,
) -> Result<Vec<Vec<T>>> {
    run_chunks(op, program, n, |chunk, shared| {
        let start = chunk * CHUNK;
        let end = (start + CHUNK).min(n);
        let mut regs: Vec<[T; LANES]> = vec![[T::default(); LANES]; program.instrs.len()];
        let mut ext: Vec<Option<&[T]>> = vec![None; program.instrs.len()];
        wide(|| {
            let mut s = start;
            while s < end {
                let e = (s + LANES).min(end);
                block(program, inputs, params, s, e, &mut regs, &mut ext);
                for (out, &r) in shared.iter().zip(&program.outputs) {
                    let src = ext[r].unwrap_or(&regs[r][..e - s]);
                    // SAFETY: `s + (e - s) <= n`, the buffer's capacity; this task alone
                    // writes the range [start, end); `src` holds `e - s` elements and is not
                    // the buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), out.0.add(s).cast(), e - s)
                    };
                }
                s = e;
            }
        });
    })
}

/// Computes the elements `[s, e)` (at most [`LANES`]) into `regs`. Inlined into the task's
/// loop, which [`wide`] compiles for AVX2 where the CPU has it: a call of its own would be
/// compiled for the baseline's SSE2.
#[inline(always)]
fn block<'a, T: ExprFloat>(
    program: &Program,
    inputs: &[Operand<'a, T>],
    params: &[T],
    s: usize,
    e: usize,
    regs: &mut [[T; LANES]],
    ext: &mut [Option<&'a [T]>],
) {
    let m = e - s;
    let one = T::from_f64(1.0);
    let zero = T::from_f64(0.0);
    let truth = |b: bool| if b { one } else { zero };
    for (r, instr) in program.instrs.iter().enumerate() {
        // An input laid out as the output is read where it lies, not copied into a register.
        if let Instr::Input(k) = *instr
            && let Operand::Slice(x) = inputs[k]
        {
            ext[r] = Some(&x[s..e]);
            continue;
        }
        ext[r] = None;
        let (before, after) = regs.split_at_mut(r);
        let dst = &mut after[0][..m];
        let ext: &[Option<&[T]>] = ext;
        let reg = |k: usize| -> &[T] { ext[k].unwrap_or(&before[k][..m]) };
        match *instr {
            Instr::Input(k) => match inputs[k] {
                Operand::Slice(_) => unreachable!("read in place above"),
                Operand::Scalar(v) => dst.fill(v),
                Operand::Cycle(c) => fill_cycle(c, s, dst),
            },
            Instr::Param(k) => dst.fill(params[k]),
            Instr::Lit(v) => dst.fill(T::from_f64(v)),
            Instr::Unary(op, a) => {
                let a = reg(a);
                match op {
                    UnaryOp::Neg => dst.iter_mut().zip(a).for_each(|(d, &x)| *d = x.neg()),
                    UnaryOp::Not => dst
                        .iter_mut()
                        .zip(a)
                        .for_each(|(d, &x)| *d = truth(x == zero)),
                }
            }
            Instr::Binary(op, a, b) => {
                let (a, b) = (reg(a), reg(b));
                let pairs = dst.iter_mut().zip(a.iter().zip(b));
                match op {
                    BinaryOp::Add => pairs.for_each(|(d, (&x, &y))| *d = x.add(y)),
                    BinaryOp::Sub => pairs.for_each(|(d, (&x, &y))| *d = x.sub(y)),
                    BinaryOp::Mul => pairs.for_each(|(d, (&x, &y))| *d = x.mul(y)),
                    BinaryOp::Div => pairs.for_each(|(d, (&x, &y))| *d = x.div(y)),
                    BinaryOp::Lt => pairs.for_each(|(d, (&x, &y))| *d = truth(x.lt(y))),
                    BinaryOp::Le => pairs.for_each(|(d, (&x, &y))| *d = truth(x.le(y))),
                    BinaryOp::Gt => pairs.for_each(|(d, (&x, &y))| *d = truth(y.lt(x))),
                    BinaryOp::Ge => pairs.for_each(|(d, (&x, &y))| *d = truth(y.le(x))),
                    BinaryOp::Eq => pairs.for_each(|(d, (&x, &y))| *d = truth(x == y)),
                    BinaryOp::Ne => pairs.for_each(|(d, (&x, &y))| *d = truth(x != y)),
                    BinaryOp::And => {
                        pairs.for_each(|(d, (&x, &y))| *d = truth(x != zero && y != zero))
                    }
                    BinaryOp::Or => {
                        pairs.for_each(|(d, (&x, &y))| *d = truth(x != zero || y != zero))
                    }
                }
            }
            Instr::Select(c, a, b) => {
                let (c, a, b) = (reg(c), reg(a), reg(b));
                dst.iter_mut()
                    .zip(c.iter().zip(a.iter().zip(b)))
                    .for_each(|(d, (&c, (&x, &y)))| *d = if c != zero { x } else { y });
            }
            Instr::Call(f, [a, b]) => call_into(f, reg(a), reg(b), dst),
            Instr::Cast(TypeKind::Integer, a) => dst
                .iter_mut()
                .zip(reg(a))
                .for_each(|(d, &x)| *d = x.trunc()),
            Instr::Cast(TypeKind::Float, a) => dst.copy_from_slice(reg(a)),
        }
    }
}
