//! Scalar semantics: how one lane of a value is held in a 64-bit slot, and every operation on
//! such lanes (arithmetic, comparisons, casts, math, reductions). This file is the executable
//! form of `docs/semantics.md`; the two must agree.
//!
//! A slot holds one lane in its type's canonical form:
//! - `bool`: 0 or 1;
//! - signed integers: the value sign-extended to 64 bits;
//! - unsigned integers: the value zero-extended to 64 bits;
//! - `f16`, `f32`, `f64`: the IEEE bits, zero-extended.
//!
//! The compiler resolves every operation to a plain function pointer over canonical slots
//! ([`BinFn`], [`UnFn`], [`TerFn`]) once per launch, so the hot loop neither matches on types
//! nor allocates.

use crate::ir::{BinaryOp, MathFn, ReduceOp, Scalar, UnaryOp};
use half::f16;

pub(crate) type UnFn = fn(u64) -> u64;
pub(crate) type BinFn = fn(u64, u64) -> u64;
pub(crate) type TerFn = fn(u64, u64, u64) -> u64;

/// The canonical form of the low bits of `v` as a lane of `s`.
#[inline]
pub(crate) fn canon(s: Scalar, v: u64) -> u64 {
    match s {
        Scalar::Bool => v & 1,
        Scalar::I8 => v as i8 as i64 as u64,
        Scalar::I16 => v as i16 as i64 as u64,
        Scalar::I32 => v as i32 as i64 as u64,
        Scalar::U8 => v & 0xff,
        Scalar::U16 | Scalar::F16 => v & 0xffff,
        Scalar::U32 | Scalar::F32 => v & 0xffff_ffff,
        Scalar::I64 | Scalar::U64 | Scalar::F64 => v,
    }
}

#[inline]
pub(crate) fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}
#[inline]
pub(crate) fn f64_of(v: u64) -> f64 {
    f64::from_bits(v)
}
#[inline]
pub(crate) fn h_of(v: u64) -> f16 {
    f16::from_bits(v as u16)
}
#[inline]
pub(crate) fn of_f32(x: f32) -> u64 {
    x.to_bits() as u64
}
#[inline]
pub(crate) fn of_f64(x: f64) -> u64 {
    x.to_bits()
}
#[inline]
pub(crate) fn of_h(x: f16) -> u64 {
    x.to_bits() as u64
}

/// A float lane as `f64` (exact for every float type).
pub(crate) fn float_value(s: Scalar, v: u64) -> f64 {
    match s {
        Scalar::F16 => h_of(v).to_f64(),
        Scalar::F32 => f32_of(v) as f64,
        _ => f64_of(v),
    }
}

/// An `f64` rounded (to nearest, ties to even) into a float lane of `s`.
pub(crate) fn float_slot(s: Scalar, x: f64) -> u64 {
    match s {
        Scalar::F16 => of_h(f16::from_f64(x)),
        Scalar::F32 => of_f32(x as f32),
        _ => of_f64(x),
    }
}

/// The number `v` holds, for integer and bool lanes, as `i128` (exact for every type).
pub(crate) fn int_value(s: Scalar, v: u64) -> i128 {
    if s.is_signed() {
        v as i64 as i128
    } else {
        v as i128
    }
}

/// The lane `0` of `s` (also `+0.0`).
pub(crate) const ZERO: u64 = 0;

// ---------------------------------------------------------------------------------------
// Binary operators

/// The function for `op` on lanes of `s`, except integer `/` and `%` (which can fault; see
/// [`int_div`]) and the short-circuit operators (compiled as control flow). `None` for a
/// combination the type rules exclude.
pub(crate) fn binary_fn(op: BinaryOp, s: Scalar) -> Option<BinFn> {
    use BinaryOp as B;
    macro_rules! f32op {
        ($e:expr) => {{
            let f: BinFn = $e;
            Some(f)
        }};
    }
    match s {
        Scalar::F32 => match op {
            B::Add => f32op!(|a, b| of_f32(f32_of(a) + f32_of(b))),
            B::Sub => f32op!(|a, b| of_f32(f32_of(a) - f32_of(b))),
            B::Mul => f32op!(|a, b| of_f32(f32_of(a) * f32_of(b))),
            B::Div => f32op!(|a, b| of_f32(f32_of(a) / f32_of(b))),
            B::Rem => f32op!(|a, b| of_f32(f32_of(a) % f32_of(b))),
            B::Eq => f32op!(|a, b| (f32_of(a) == f32_of(b)) as u64),
            B::Ne => f32op!(|a, b| (f32_of(a) != f32_of(b)) as u64),
            B::Lt => f32op!(|a, b| (f32_of(a) < f32_of(b)) as u64),
            B::Le => f32op!(|a, b| (f32_of(a) <= f32_of(b)) as u64),
            B::Gt => f32op!(|a, b| (f32_of(a) > f32_of(b)) as u64),
            B::Ge => f32op!(|a, b| (f32_of(a) >= f32_of(b)) as u64),
            _ => None,
        },
        Scalar::F64 => match op {
            B::Add => f32op!(|a, b| of_f64(f64_of(a) + f64_of(b))),
            B::Sub => f32op!(|a, b| of_f64(f64_of(a) - f64_of(b))),
            B::Mul => f32op!(|a, b| of_f64(f64_of(a) * f64_of(b))),
            B::Div => f32op!(|a, b| of_f64(f64_of(a) / f64_of(b))),
            B::Rem => f32op!(|a, b| of_f64(f64_of(a) % f64_of(b))),
            B::Eq => f32op!(|a, b| (f64_of(a) == f64_of(b)) as u64),
            B::Ne => f32op!(|a, b| (f64_of(a) != f64_of(b)) as u64),
            B::Lt => f32op!(|a, b| (f64_of(a) < f64_of(b)) as u64),
            B::Le => f32op!(|a, b| (f64_of(a) <= f64_of(b)) as u64),
            B::Gt => f32op!(|a, b| (f64_of(a) > f64_of(b)) as u64),
            B::Ge => f32op!(|a, b| (f64_of(a) >= f64_of(b)) as u64),
            _ => None,
        },
        // f16 arithmetic is computed in f32 and rounded once to f16. For + - * / that is the
        // correctly rounded f16 result (f32 has 24 >= 2*11+2 significand bits, so double
        // rounding is innocuous); `%` is exact in any format.
        Scalar::F16 => {
            fn h(a: u64) -> f32 {
                h_of(a).to_f32()
            }
            fn r(x: f32) -> u64 {
                of_h(f16::from_f32(x))
            }
            match op {
                B::Add => f32op!(|a, b| r(h(a) + h(b))),
                B::Sub => f32op!(|a, b| r(h(a) - h(b))),
                B::Mul => f32op!(|a, b| r(h(a) * h(b))),
                B::Div => f32op!(|a, b| r(h(a) / h(b))),
                B::Rem => f32op!(|a, b| r(h(a) % h(b))),
                B::Eq => f32op!(|a, b| (h(a) == h(b)) as u64),
                B::Ne => f32op!(|a, b| (h(a) != h(b)) as u64),
                B::Lt => f32op!(|a, b| (h(a) < h(b)) as u64),
                B::Le => f32op!(|a, b| (h(a) <= h(b)) as u64),
                B::Gt => f32op!(|a, b| (h(a) > h(b)) as u64),
                B::Ge => f32op!(|a, b| (h(a) >= h(b)) as u64),
                _ => None,
            }
        }
        Scalar::Bool => match op {
            B::BitAnd | B::LogicalAnd => f32op!(|a, b| a & b),
            B::BitOr | B::LogicalOr => f32op!(|a, b| a | b),
            B::BitXor | B::Ne => f32op!(|a, b| a ^ b),
            B::Eq => f32op!(|a, b| (a == b) as u64),
            _ => None,
        },
        _ => int_binary_fn(op, s),
    }
}

fn int_binary_fn(op: BinaryOp, s: Scalar) -> Option<BinFn> {
    use BinaryOp as B;
    // Canonical slots make sign-extension implicit: signed lanes compare as i64, unsigned
    // as u64, and every result is re-canonicalised to wrap at the type's width.
    macro_rules! per_type {
        ($t:ident, $signed:expr, $bits:expr) => {{
            const S: Scalar = Scalar::$t;
            let f: BinFn = match op {
                B::Add => |a, b| canon(S, a.wrapping_add(b)),
                B::Sub => |a, b| canon(S, a.wrapping_sub(b)),
                B::Mul => |a, b| canon(S, a.wrapping_mul(b)),
                B::BitAnd => |a, b| a & b,
                B::BitOr => |a, b| a | b,
                B::BitXor => |a, b| a ^ b,
                // The shift amount is taken modulo the width (docs/semantics.md).
                B::Shl => |a, b| canon(S, a << (b & ($bits - 1))),
                B::Shr => {
                    if $signed {
                        |a, b| canon(S, ((a as i64) >> (b & ($bits - 1))) as u64)
                    } else {
                        |a, b| a >> (b & ($bits - 1))
                    }
                }
                B::Eq => |a, b| (a == b) as u64,
                B::Ne => |a, b| (a != b) as u64,
                B::Lt => {
                    if $signed {
                        |a, b| ((a as i64) < (b as i64)) as u64
                    } else {
                        |a, b| (a < b) as u64
                    }
                }
                B::Le => {
                    if $signed {
                        |a, b| ((a as i64) <= (b as i64)) as u64
                    } else {
                        |a, b| (a <= b) as u64
                    }
                }
                B::Gt => {
                    if $signed {
                        |a, b| ((a as i64) > (b as i64)) as u64
                    } else {
                        |a, b| (a > b) as u64
                    }
                }
                B::Ge => {
                    if $signed {
                        |a, b| ((a as i64) >= (b as i64)) as u64
                    } else {
                        |a, b| (a >= b) as u64
                    }
                }
                _ => return None,
            };
            Some(f)
        }};
    }
    match s {
        Scalar::I8 => per_type!(I8, true, 8),
        Scalar::I16 => per_type!(I16, true, 16),
        Scalar::I32 => per_type!(I32, true, 32),
        Scalar::I64 => per_type!(I64, true, 64),
        Scalar::U8 => per_type!(U8, false, 8),
        Scalar::U16 => per_type!(U16, false, 16),
        Scalar::U32 => per_type!(U32, false, 32),
        Scalar::U64 => per_type!(U64, false, 64),
        _ => None,
    }
}

/// Integer `/` (`rem == false`) or `%`: `None` when dividing by zero. Signed division
/// truncates toward zero; `MIN / -1` wraps to `MIN` and `MIN % -1` is 0.
#[inline]
pub(crate) fn int_div(s: Scalar, rem: bool, a: u64, b: u64) -> Option<u64> {
    if b == 0 {
        return None;
    }
    let r = if s.is_signed() {
        let (x, y) = (a as i64, b as i64);
        if rem {
            x.wrapping_rem(y) as u64
        } else {
            x.wrapping_div(y) as u64
        }
    } else if rem {
        a % b
    } else {
        a / b
    };
    Some(canon(s, r))
}

// ---------------------------------------------------------------------------------------
// Unary operators and casts

pub(crate) fn unary_fn(op: UnaryOp, s: Scalar) -> Option<UnFn> {
    let f: UnFn = match (op, s) {
        (UnaryOp::Neg, Scalar::F32) => |a| a ^ 0x8000_0000,
        (UnaryOp::Neg, Scalar::F64) => |a| a ^ 0x8000_0000_0000_0000,
        (UnaryOp::Neg, Scalar::F16) => |a| a ^ 0x8000,
        (UnaryOp::Neg, Scalar::Bool) => return None,
        (UnaryOp::Not, Scalar::Bool) => |a| a ^ 1,
        (_, Scalar::F16 | Scalar::F32 | Scalar::F64) => return None,
        (UnaryOp::Neg, s) => return neg_fn(s),
        (UnaryOp::Not, s) => return not_fn(s),
    };
    Some(f)
}

fn neg_fn(s: Scalar) -> Option<UnFn> {
    let f: UnFn = match s {
        Scalar::I8 => |a| canon(Scalar::I8, a.wrapping_neg()),
        Scalar::I16 => |a| canon(Scalar::I16, a.wrapping_neg()),
        Scalar::I32 => |a| canon(Scalar::I32, a.wrapping_neg()),
        Scalar::I64 | Scalar::U64 => |a| a.wrapping_neg(),
        Scalar::U8 => |a| canon(Scalar::U8, a.wrapping_neg()),
        Scalar::U16 => |a| canon(Scalar::U16, a.wrapping_neg()),
        Scalar::U32 => |a| canon(Scalar::U32, a.wrapping_neg()),
        _ => return None,
    };
    Some(f)
}

fn not_fn(s: Scalar) -> Option<UnFn> {
    let f: UnFn = match s {
        // For sign-extended lanes `!a` is already canonical.
        Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64 | Scalar::U64 => |a| !a,
        Scalar::U8 => |a| !a & 0xff,
        Scalar::U16 => |a| !a & 0xffff,
        Scalar::U32 => |a| !a & 0xffff_ffff,
        _ => return None,
    };
    Some(f)
}

/// A value conversion (`as`) of one lane from `from` to `to`. Float to integer truncates
/// toward zero and saturates, NaN giving 0 (Rust's `as`); integer to float rounds to nearest
/// even; integer to integer wraps (two's complement truncation or extension by the source's
/// signedness); `bool` converts to 0/1 and from `x != 0`.
pub(crate) fn cast(from: Scalar, to: Scalar, v: u64) -> u64 {
    if from == to {
        return v;
    }
    if to == Scalar::Bool {
        return match from {
            Scalar::F16 | Scalar::F32 | Scalar::F64 => (float_value(from, v) != 0.0) as u64,
            _ => (v != 0) as u64,
        };
    }
    match (from.is_float(), to.is_float()) {
        (false, false) => canon(to, v),
        (false, true) => {
            let n = int_value(from, v);
            match to {
                // i128 -> f32 rounds once (Rust's `as` is correctly rounded).
                Scalar::F32 => of_f32(n as f32),
                Scalar::F64 => of_f64(n as f64),
                // Integers up to 2^64 in magnitude: exact in f64 below 2^53, and every value
                // at or above 2^53 overflows f16 anyway, so the second rounding is harmless.
                _ => of_h(f16::from_f64(n as f64)),
            }
        }
        (true, false) => {
            let x = float_value(from, v);
            let r: u64 = match to {
                Scalar::I8 => x as i8 as i64 as u64,
                Scalar::I16 => x as i16 as i64 as u64,
                Scalar::I32 => x as i32 as i64 as u64,
                Scalar::I64 => x as i64 as u64,
                Scalar::U8 => x as u8 as u64,
                Scalar::U16 => x as u16 as u64,
                Scalar::U32 => x as u32 as u64,
                Scalar::U64 => x as u64,
                _ => 0,
            };
            r
        }
        (true, true) => match (from, to) {
            (Scalar::F64, Scalar::F32) => of_f32(f64_of(v) as f32),
            (Scalar::F64, Scalar::F16) => of_h(f16::from_f64(f64_of(v))),
            (Scalar::F32, Scalar::F16) => of_h(f16::from_f32(f32_of(v))),
            _ => float_slot(to, float_value(from, v)),
        },
    }
}

// ---------------------------------------------------------------------------------------
// Math built-ins

/// IEEE 754-2019 `minimumNumber`: a NaN operand yields the other operand; -0 < +0.
#[inline]
fn min_num(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a < b {
        a
    } else if b < a {
        b
    } else if a.is_sign_negative() {
        a
    } else {
        b
    }
}

/// `maximumNumber`: a NaN operand yields the other operand; +0 > -0.
#[inline]
fn max_num(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a > b {
        a
    } else if b > a {
        b
    } else if a.is_sign_positive() {
        a
    } else {
        b
    }
}

/// The one-operand math function `fun` on lanes of `s`.
pub(crate) fn math1_fn(fun: MathFn, s: Scalar) -> Option<UnFn> {
    // Transcendentals of f32 and f16 are evaluated in f64 (the platform's libm) and rounded
    // once, which is correctly rounded except in rare double-rounding cases; f64 uses the
    // platform's f64 libm directly (glibc: within 1 ulp). docs/semantics.md gives the
    // tolerance test files use for each.
    macro_rules! via64 {
        ($g:expr) => {{
            let f: UnFn = match s {
                Scalar::F32 => |a| of_f32(($g)(f32_of(a) as f64) as f32),
                Scalar::F64 => |a| of_f64(($g)(f64_of(a))),
                Scalar::F16 => |a| of_h(f16::from_f64(($g)(h_of(a).to_f64()))),
                _ => return None,
            };
            Some(f)
        }};
    }
    match fun {
        MathFn::Sqrt => match s {
            Scalar::F32 => Some(|a| of_f32(f32_of(a).sqrt())),
            _ => via64!(|x: f64| x.sqrt()),
        },
        MathFn::Rsqrt => via64!(|x: f64| 1.0 / x.sqrt()),
        MathFn::Exp => via64!(|x: f64| x.exp()),
        MathFn::Exp2 => via64!(|x: f64| x.exp2()),
        MathFn::Log => via64!(|x: f64| x.ln()),
        MathFn::Log2 => via64!(|x: f64| x.log2()),
        MathFn::Sin => via64!(|x: f64| x.sin()),
        MathFn::Cos => via64!(|x: f64| x.cos()),
        MathFn::Tanh => via64!(|x: f64| x.tanh()),
        MathFn::Floor => via64!(|x: f64| x.floor()),
        MathFn::Ceil => via64!(|x: f64| x.ceil()),
        MathFn::Trunc => via64!(|x: f64| x.trunc()),
        // Half-way cases round away from zero (C `round`, CUDA `roundf`, OpenCL `round`).
        MathFn::Round => via64!(|x: f64| x.round()),
        MathFn::Abs => {
            let f: UnFn = match s {
                Scalar::F32 => |a| a & 0x7fff_ffff,
                Scalar::F64 => |a| a & 0x7fff_ffff_ffff_ffff,
                Scalar::F16 => |a| a & 0x7fff,
                Scalar::I8 => |a| canon(Scalar::I8, (a as i64).wrapping_abs() as u64),
                Scalar::I16 => |a| canon(Scalar::I16, (a as i64).wrapping_abs() as u64),
                Scalar::I32 => |a| canon(Scalar::I32, (a as i64).wrapping_abs() as u64),
                Scalar::I64 => |a| (a as i64).wrapping_abs() as u64,
                Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => |a| a,
                _ => return None,
            };
            Some(f)
        }
        _ => None,
    }
}

/// The two-operand math function `fun` (`pow`, `min`, `max`) on lanes of `s`.
pub(crate) fn math2_fn(fun: MathFn, s: Scalar) -> Option<BinFn> {
    macro_rules! fl {
        ($g:expr) => {{
            let f: BinFn = match s {
                Scalar::F32 => |a, b| of_f32(($g)(f32_of(a) as f64, f32_of(b) as f64) as f32),
                Scalar::F64 => |a, b| of_f64(($g)(f64_of(a), f64_of(b))),
                Scalar::F16 => |a, b| of_h(f16::from_f64(($g)(h_of(a).to_f64(), h_of(b).to_f64()))),
                _ => return None,
            };
            Some(f)
        }};
    }
    match fun {
        MathFn::Pow => fl!(|x: f64, y: f64| x.powf(y)),
        MathFn::Min | MathFn::Max if s.is_float() => {
            if fun == MathFn::Min {
                fl!(min_num)
            } else {
                fl!(max_num)
            }
        }
        MathFn::Min | MathFn::Max => {
            let min = fun == MathFn::Min;
            let f: BinFn = match (s.is_signed(), min) {
                (true, true) => |a, b| (a as i64).min(b as i64) as u64,
                (true, false) => |a, b| (a as i64).max(b as i64) as u64,
                (false, true) => |a, b| a.min(b),
                (false, false) => |a, b| a.max(b),
            };
            if s == Scalar::Bool {
                return None;
            }
            Some(f)
        }
        _ => None,
    }
}

/// The three-operand math function `fun` (`fma`, `clamp`) on lanes of `s`.
pub(crate) fn math3_fn(fun: MathFn, s: Scalar) -> Option<TerFn> {
    match fun {
        MathFn::Fma => {
            let f: TerFn = match s {
                Scalar::F32 => |a, b, c| of_f32(f32_of(a).mul_add(f32_of(b), f32_of(c))),
                Scalar::F64 => |a, b, c| of_f64(f64_of(a).mul_add(f64_of(b), f64_of(c))),
                // The product of two f16 is exact in f64; the sum is rounded to f64 and
                // then to f16 (a double rounding that can differ from a fused f16 fma in
                // the last place in rare cases).
                Scalar::F16 => |a, b, c| {
                    of_h(f16::from_f64(
                        h_of(a).to_f64().mul_add(h_of(b).to_f64(), h_of(c).to_f64()),
                    ))
                },
                _ => return None,
            };
            Some(f)
        }
        MathFn::Clamp => {
            // clamp(x, lo, hi) = min(max(x, lo), hi), with min/max as above.
            let f: TerFn = match s {
                Scalar::F32 => |x, lo, hi| {
                    of_f32(min_num(
                        max_num(f32_of(x) as f64, f32_of(lo) as f64),
                        f32_of(hi) as f64,
                    ) as f32)
                },
                Scalar::F64 => {
                    |x, lo, hi| of_f64(min_num(max_num(f64_of(x), f64_of(lo)), f64_of(hi)))
                }
                Scalar::F16 => |x, lo, hi| {
                    of_h(f16::from_f64(min_num(
                        max_num(h_of(x).to_f64(), h_of(lo).to_f64()),
                        h_of(hi).to_f64(),
                    )))
                },
                Scalar::Bool => return None,
                s if s.is_signed() => |x, lo, hi| (x as i64).max(lo as i64).min(hi as i64) as u64,
                _ => |x, lo, hi| x.max(lo).min(hi),
            };
            Some(f)
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Wave reductions

/// The combining function of a wave reduction or scan on lanes of `s`.
pub(crate) fn reduce_fn(op: ReduceOp, s: Scalar) -> Option<BinFn> {
    match op {
        ReduceOp::Sum => binary_fn(BinaryOp::Add, s),
        ReduceOp::Min => math2_fn(MathFn::Min, s),
        ReduceOp::Max => math2_fn(MathFn::Max, s),
        ReduceOp::And => binary_fn(BinaryOp::BitAnd, s),
        ReduceOp::Or => binary_fn(BinaryOp::BitOr, s),
        ReduceOp::Xor => binary_fn(BinaryOp::BitXor, s),
    }
}

/// The identity of `op` on `s`: what an exclusive scan yields in its first active lane.
pub(crate) fn reduce_identity(op: ReduceOp, s: Scalar) -> u64 {
    match op {
        ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor => ZERO,
        ReduceOp::And => canon(s, u64::MAX),
        ReduceOp::Min => match s {
            Scalar::F16 => of_h(f16::INFINITY),
            Scalar::F32 => of_f32(f32::INFINITY),
            Scalar::F64 => of_f64(f64::INFINITY),
            s if s.is_signed() => canon(s, u64::MAX >> (65 - s.bits())),
            s => canon(s, u64::MAX),
        },
        ReduceOp::Max => match s {
            Scalar::F16 => of_h(f16::NEG_INFINITY),
            Scalar::F32 => of_f32(f32::NEG_INFINITY),
            Scalar::F64 => of_f64(f64::NEG_INFINITY),
            s if s.is_signed() => canon(s, 1u64 << (s.bits() - 1)),
            _ => 0,
        },
    }
}

// ---------------------------------------------------------------------------------------
// Memory encoding

/// Reads a lane of `s` from little-endian bytes.
#[inline]
pub(crate) fn load_lane(s: Scalar, bytes: &[u8]) -> u64 {
    let raw = match s.size() {
        1 => u64::from(bytes[0]),
        2 => u64::from(u16::from_le_bytes([bytes[0], bytes[1]])),
        4 => u64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        _ => u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
    };
    canon(s, raw)
}

/// Writes a lane of `s` as little-endian bytes.
#[inline]
pub(crate) fn store_lane(s: Scalar, v: u64, bytes: &mut [u8]) {
    let n = s.size() as usize;
    bytes[..n].copy_from_slice(&v.to_le_bytes()[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_and_division() {
        let add = binary_fn(BinaryOp::Add, Scalar::I32).unwrap();
        let max = canon(Scalar::I32, i32::MAX as u64);
        assert_eq!(add(max, 1) as i64, i32::MIN as i64);
        let min = canon(Scalar::I32, i32::MIN as i64 as u64);
        let m1 = canon(Scalar::I32, u64::MAX);
        assert_eq!(int_div(Scalar::I32, false, min, m1), Some(min));
        assert_eq!(int_div(Scalar::I32, true, min, m1), Some(0));
        assert_eq!(int_div(Scalar::U8, false, 7, 0), None);
        let seven = canon(Scalar::I32, -7i64 as u64);
        assert_eq!(
            int_div(Scalar::I32, false, seven, 2).map(|v| v as i64),
            Some(-3)
        );
        assert_eq!(
            int_div(Scalar::I32, true, seven, 2).map(|v| v as i64),
            Some(-1)
        );
    }

    #[test]
    fn shifts_are_modulo_width() {
        let shl = binary_fn(BinaryOp::Shl, Scalar::U32).unwrap();
        assert_eq!(shl(1, 33), 2);
        let shr = binary_fn(BinaryOp::Shr, Scalar::I8).unwrap();
        assert_eq!(shr(canon(Scalar::I8, -128i64 as u64), 9) as i64, -64);
    }

    #[test]
    fn casts() {
        assert_eq!(cast(Scalar::F32, Scalar::I32, of_f32(f32::NAN)), 0);
        assert_eq!(cast(Scalar::F32, Scalar::U8, of_f32(300.5)), 255);
        assert_eq!(cast(Scalar::F32, Scalar::I8, of_f32(-300.0)) as i64, -128);
        assert_eq!(
            cast(Scalar::I32, Scalar::U8, canon(Scalar::I32, -1i64 as u64)),
            255
        );
        assert_eq!(cast(Scalar::U8, Scalar::I32, 255), 255);
        assert_eq!(
            cast(Scalar::I8, Scalar::U32, canon(Scalar::I8, -1i64 as u64)),
            0xffff_ffff
        );
        assert_eq!(cast(Scalar::F32, Scalar::Bool, of_f32(-0.0)), 0);
        assert_eq!(cast(Scalar::Bool, Scalar::F64, 1), of_f64(1.0));
        assert_eq!(
            cast(Scalar::U64, Scalar::F32, u64::MAX),
            of_f32(18446744073709551616.0)
        );
        assert_eq!(
            cast(Scalar::F32, Scalar::F16, of_f32(65520.0)),
            of_h(f16::INFINITY)
        );
    }

    #[test]
    fn min_max_nan() {
        let min = math2_fn(MathFn::Min, Scalar::F32).unwrap();
        assert_eq!(min(of_f32(f32::NAN), of_f32(1.0)), of_f32(1.0));
        assert_eq!(min(of_f32(2.0), of_f32(f32::NAN)), of_f32(2.0));
        assert_eq!(min(of_f32(0.0), of_f32(-0.0)), of_f32(-0.0));
        let max = math2_fn(MathFn::Max, Scalar::F32).unwrap();
        assert_eq!(max(of_f32(-0.0), of_f32(0.0)), of_f32(0.0));
        assert!(f32_of(max(of_f32(f32::NAN), of_f32(f32::NAN))).is_nan());
    }

    #[test]
    fn identities() {
        assert_eq!(
            reduce_identity(ReduceOp::Min, Scalar::I32) as i64,
            i32::MAX as i64
        );
        assert_eq!(
            reduce_identity(ReduceOp::Max, Scalar::I32) as i64,
            i32::MIN as i64
        );
        assert_eq!(reduce_identity(ReduceOp::Min, Scalar::U16), 0xffff);
        assert_eq!(reduce_identity(ReduceOp::And, Scalar::U8), 0xff);
        assert_eq!(reduce_identity(ReduceOp::Max, Scalar::I64) as i64, i64::MIN);
    }
}
