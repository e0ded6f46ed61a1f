//! The float types the host runs expression bodies in ([`super::expr`], [`super::jit`]), and
//! the loops of a math function over a block of elements that both tiers call.

use std::mem::MaybeUninit;

use kusari_kernels::expr::Func;

use crate::dtype::Element;
use crate::op::MathFn;

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

/// `f(a, b)` over a block into `dst` (`b` unused for a function of one argument): the
/// vectorized loops of [`super::math`] for the functions that have them, else
/// [`call_block`]. What both tiers of the executor run for a call.
#[inline(always)]
pub(crate) fn call_into<T: ExprFloat>(f: Func, a: &[T], b: &[T], dst: &mut [T]) {
    match vectorized(f) {
        Some(math) => {
            // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the math loops write an
            // initialised value to every element of `dst`, never an uninitialised one.
            let out = unsafe { &mut *(dst as *mut [T] as *mut [MaybeUninit<T>]) };
            T::math(math, a, out);
        }
        None => call_block(f, a, b, dst),
    }
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
