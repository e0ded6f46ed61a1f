//! Operator overloading shared by `Array` and `Variable`: `&a + &b`, `a * 2.0`, `(a * b) + c`.
//! Every operator returns `Result`, and `Result` is accepted on either side of another operand,
//! so expressions chain and errors surface at the final `?`. (The orphan rule forbids
//! `Result op f64`: write `(a * b)? + 1.0`.)

/// Implements `+ - * /` for `$T`, `&$T`, `Result<$T>`, `f64` and `i32` (an integer literal) in
/// every combination Rust allows, forwarding to the inherent methods `add/sub/mul/div`,
/// `*_scalar` and `r*_scalar`.
macro_rules! impl_arith_ops {
    ($T:ty) => {
        $crate::ops_macros::impl_arith_ops!(@op $T, Add, add, add, add_scalar, add_scalar);
        $crate::ops_macros::impl_arith_ops!(@op $T, Sub, sub, sub, sub_scalar, rsub_scalar);
        $crate::ops_macros::impl_arith_ops!(@op $T, Mul, mul, mul, mul_scalar, mul_scalar);
        $crate::ops_macros::impl_arith_ops!(@op $T, Div, div, div, div_scalar, rdiv_scalar);

        impl std::ops::Neg for &$T {
            type Output = $crate::Result<$T>;
            fn neg(self) -> Self::Output {
                <$T>::neg(self)
            }
        }
        impl std::ops::Neg for $T {
            type Output = $crate::Result<$T>;
            fn neg(self) -> Self::Output {
                <$T>::neg(&self)
            }
        }
    };
    (@op $T:ty, $Trait:ident, $method:ident, $f:ident, $scalar:ident, $rscalar:ident) => {
        impl std::ops::$Trait<&$T> for &$T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: &$T) -> Self::Output {
                <$T>::$f(self, rhs)
            }
        }
        impl std::ops::$Trait<$T> for &$T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $T) -> Self::Output {
                <$T>::$f(self, &rhs)
            }
        }
        impl std::ops::$Trait<&$T> for $T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: &$T) -> Self::Output {
                <$T>::$f(&self, rhs)
            }
        }
        impl std::ops::$Trait<$T> for $T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $T) -> Self::Output {
                <$T>::$f(&self, &rhs)
            }
        }
        impl std::ops::$Trait<$crate::Result<$T>> for &$T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $crate::Result<$T>) -> Self::Output {
                <$T>::$f(self, &rhs?)
            }
        }
        impl std::ops::$Trait<$crate::Result<$T>> for $T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $crate::Result<$T>) -> Self::Output {
                <$T>::$f(&self, &rhs?)
            }
        }
        impl std::ops::$Trait<&$T> for $crate::Result<$T> {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: &$T) -> Self::Output {
                <$T>::$f(&self?, rhs)
            }
        }
        impl std::ops::$Trait<$T> for $crate::Result<$T> {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $T) -> Self::Output {
                <$T>::$f(&self?, &rhs)
            }
        }
        impl std::ops::$Trait<f64> for &$T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: f64) -> Self::Output {
                <$T>::$scalar(self, rhs)
            }
        }
        impl std::ops::$Trait<f64> for $T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: f64) -> Self::Output {
                <$T>::$scalar(&self, rhs)
            }
        }
        impl std::ops::$Trait<&$T> for f64 {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: &$T) -> Self::Output {
                <$T>::$rscalar(rhs, self)
            }
        }
        impl std::ops::$Trait<$T> for f64 {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $T) -> Self::Output {
                <$T>::$rscalar(&rhs, self)
            }
        }
        // An integer literal (`x * 2`) is an i32; every i32 is exact in f64.
        impl std::ops::$Trait<i32> for &$T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: i32) -> Self::Output {
                <$T>::$scalar(self, f64::from(rhs))
            }
        }
        impl std::ops::$Trait<i32> for $T {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: i32) -> Self::Output {
                <$T>::$scalar(&self, f64::from(rhs))
            }
        }
        impl std::ops::$Trait<&$T> for i32 {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: &$T) -> Self::Output {
                <$T>::$rscalar(rhs, f64::from(self))
            }
        }
        impl std::ops::$Trait<$T> for i32 {
            type Output = $crate::Result<$T>;
            fn $method(self, rhs: $T) -> Self::Output {
                <$T>::$rscalar(&rhs, f64::from(self))
            }
        }
    };
}

pub(crate) use impl_arith_ops;
