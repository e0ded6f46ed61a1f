//! Bodies of the expression language ([`kusari_kernels::expr`]) run on the host: a body's
//! straight-line [`Program`] over blocks of [`LANES`] elements at a time, each instruction a
//! loop over the block (the vectorized math of [`super::math`] for the functions it has), the
//! blocks of a chunk of [`CHUNK`] elements in one task and the chunks across threads. The
//! intermediate values of a block stay in cache: an op of many instructions reads its inputs
//! and writes its outputs once, as one GPU kernel does.

use std::mem::MaybeUninit;

use kusari_kernels::expr::{BinaryOp, Func, Instr, Program, TypeKind, UnaryOp};
use rayon::prelude::*;

use super::elementwise::{PAR_MIN, wide};
use crate::dtype::Element;
use crate::error::Result;
use crate::op::MathFn;

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

/// A float type the executor computes in.
pub(crate) trait ExprFloat: Element + Copy + Send + Sync + Default + PartialEq {
    /// `f` over `src` into `dst` (one length) with the vectorized loops of [`super::math`].
    fn math(f: MathFn, src: &[Self], dst: &mut [MaybeUninit<Self>]);
    /// `f(a, b)` (`b` unused for a function of one argument) by the standard library.
    fn call(f: Func, a: Self, b: Self) -> Self;
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
    fn neg(self) -> Self;
    fn lt(self, b: Self) -> bool;
    fn le(self, b: Self) -> bool;
    fn trunc(self) -> Self;
    /// `fmax`, `fmin`, `fabs`, `copysign`, `floor`, `ceil`, `round`: what the standard library
    /// computes for [`call`](Self::call), inlined so that a block's loop vectorizes.
    fn max(self, b: Self) -> Self;
    fn min(self, b: Self) -> Self;
    fn abs(self) -> Self;
    fn copysign(self, b: Self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
}

macro_rules! expr_float {
    ($t:ty, $apply:path, $call:path) => {
        impl ExprFloat for $t {
            fn math(f: MathFn, src: &[Self], dst: &mut [MaybeUninit<Self>]) {
                $apply(f, src, dst)
            }
            fn call(f: Func, a: Self, b: Self) -> Self {
                $call(f, a, b)
            }
            fn add(self, b: Self) -> Self {
                self + b
            }
            fn sub(self, b: Self) -> Self {
                self - b
            }
            fn mul(self, b: Self) -> Self {
                self * b
            }
            fn div(self, b: Self) -> Self {
                self / b
            }
            fn neg(self) -> Self {
                -self
            }
            fn lt(self, b: Self) -> bool {
                self < b
            }
            fn le(self, b: Self) -> bool {
                self <= b
            }
            fn trunc(self) -> Self {
                <$t>::trunc(self)
            }
            fn max(self, b: Self) -> Self {
                <$t>::max(self, b)
            }
            fn min(self, b: Self) -> Self {
                <$t>::min(self, b)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn copysign(self, b: Self) -> Self {
                <$t>::copysign(self, b)
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            fn round(self) -> Self {
                <$t>::round(self)
            }
        }
    };
}

expr_float!(f32, super::math::apply_f32, call_f32);
expr_float!(f64, super::math::apply_f64, call_f64);

/// `f(a, b)` in float64: the kernel layer's reference, which folds constants and evaluates
/// bodies ([`kusari_kernels::expr::call`]).
fn call_f64(f: Func, a: f64, b: f64) -> f64 {
    kusari_kernels::expr::call(f, &[a, b])
}

/// `f(a, b)` in float32, by the standard library's float32 functions (`erf` in float64).
fn call_f32(f: Func, a: f32, b: f32) -> f32 {
    match f {
        Func::Exp => a.exp(),
        Func::Exp2 => a.exp2(),
        Func::Expm1 => a.exp_m1(),
        Func::Log => a.ln(),
        Func::Log2 => a.log2(),
        Func::Log10 => a.log10(),
        Func::Log1p => a.ln_1p(),
        Func::Sqrt => a.sqrt(),
        Func::Rsqrt => 1.0 / a.sqrt(),
        Func::Cbrt => a.cbrt(),
        Func::Sin => a.sin(),
        Func::Cos => a.cos(),
        Func::Tan => a.tan(),
        Func::Asin => a.asin(),
        Func::Acos => a.acos(),
        Func::Atan => a.atan(),
        Func::Atan2 => a.atan2(b),
        Func::Sinh => a.sinh(),
        Func::Cosh => a.cosh(),
        Func::Tanh => a.tanh(),
        Func::Asinh => a.asinh(),
        Func::Acosh => a.acosh(),
        Func::Atanh => a.atanh(),
        Func::Pow => a.powf(b),
        Func::Hypot => a.hypot(b),
        Func::Fabs => a.abs(),
        Func::Fmax => a.max(b),
        Func::Fmin => a.min(b),
        Func::Copysign => a.copysign(b),
        Func::Erf | Func::Erfc => call_f64(f, f64::from(a), 0.0) as f32,
        Func::Floor => a.floor(),
        Func::Ceil => a.ceil(),
        Func::Round => a.round(),
        Func::Trunc => a.trunc(),
    }
}

/// The function of [`super::math`] that computes `f`, where it has one.
fn vectorized(f: Func) -> Option<MathFn> {
    Some(match f {
        Func::Exp => MathFn::Exp,
        Func::Expm1 => MathFn::ExpM1,
        Func::Log => MathFn::Ln,
        Func::Log1p => MathFn::Ln1p,
        Func::Tanh => MathFn::Tanh,
        Func::Sqrt => MathFn::Sqrt,
        Func::Erf => MathFn::Erf,
        _ => return None,
    })
}

/// An output buffer shared by the tasks, each writing its own range.
struct Shared<T>(*mut MaybeUninit<T>);

// SAFETY: the tasks write disjoint ranges of the buffer (see `run`), which outlives them.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<T> {}

/// Runs `program` over `n` elements of `inputs` with `params`: one buffer per output.
pub(crate) fn run<T: ExprFloat>(
    op: &'static str,
    program: &Program,
    inputs: &[Operand<'_, T>],
    params: &[T],
    n: usize,
) -> Result<Vec<Vec<T>>> {
    let mut outputs: Vec<Vec<T>> = (0..program.outputs.len())
        .map(|_| -> Result<Vec<T>> { Ok(super::pool::alloc(op, n)?) })
        .collect::<Result<_>>()?;
    let shared: Vec<Shared<T>> = outputs
        .iter_mut()
        .map(|o| Shared(o.spare_capacity_mut().as_mut_ptr()))
        .collect();
    let task = |chunk: usize| {
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
    };
    let chunks = n.div_ceil(CHUNK);
    // A body of several instructions costs more an element than one op: split sooner.
    if n >= PAR_MIN / program.instrs.len().max(1) {
        super::threads::start();
        (0..chunks).into_par_iter().for_each(task);
    } else {
        (0..chunks).for_each(task);
    }
    for o in &mut outputs {
        // SAFETY: the tasks wrote every element of [0, n).
        unsafe { o.set_len(n) };
    }
    Ok(outputs)
}

/// `f` over a block by the standard library: the functions that are a few instructions
/// (`fmax`, `fabs`, `floor`, ...) in loops of their own, which vectorize; the others element
/// by element.
#[inline(always)]
fn call_block<T: ExprFloat>(f: Func, a: &[T], b: &[T], dst: &mut [T]) {
    let unary = |dst: &mut [T], g: fn(T) -> T| {
        dst.iter_mut().zip(a).for_each(|(d, &x)| *d = g(x));
    };
    let binary = |dst: &mut [T], g: fn(T, T) -> T| {
        dst.iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(d, (&x, &y))| *d = g(x, y));
    };
    match f {
        Func::Fmax => binary(dst, T::max),
        Func::Fmin => binary(dst, T::min),
        Func::Copysign => binary(dst, T::copysign),
        Func::Fabs => unary(dst, T::abs),
        Func::Floor => unary(dst, T::floor),
        Func::Ceil => unary(dst, T::ceil),
        Func::Round => unary(dst, T::round),
        Func::Trunc => unary(dst, T::trunc),
        _ => dst
            .iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(d, (&x, &y))| *d = T::call(f, x, y)),
    }
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
                Operand::Cycle(c) => {
                    let mut at = s % c.len();
                    let mut k = 0;
                    while k < m {
                        let take = (c.len() - at).min(m - k);
                        dst[k..k + take].copy_from_slice(&c[at..at + take]);
                        k += take;
                        at = 0;
                    }
                }
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
            Instr::Call(f, [a, b]) => match vectorized(f) {
                Some(math) => {
                    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the math loops write an
                    // initialised value to every element of `dst`, never an uninitialised one.
                    let out = unsafe { &mut *(dst as *mut [T] as *mut [MaybeUninit<T>]) };
                    T::math(math, reg(a), out);
                }
                None => call_block(f, reg(a), reg(b), dst),
            },
            Instr::Cast(TypeKind::Integer, a) => dst
                .iter_mut()
                .zip(reg(a))
                .for_each(|(d, &x)| *d = x.trunc()),
            Instr::Cast(TypeKind::Float, a) => dst.copy_from_slice(reg(a)),
        }
    }
}
