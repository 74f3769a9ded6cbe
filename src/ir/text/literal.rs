//! Numeric literals of the text format: reading the decimal text into a value of a given
//! scalar type, checking integer ranges, and printing floats in the shortest form that reads
//! back to the same value (so that printing is a fixed point).
//!
//! Floats are held as `f64` values exactly representable in the literal's type (the IR's
//! invariant). `f16` has no native Rust type here; [`round_to_f16`] rounds an `f64` to the
//! nearest `f16` value (ties to even), and `f16` literals are read through `f64` first.

use crate::ir::{Literal, Scalar};

/// The largest finite `f16`.
const F16_MAX: f64 = 65504.0;

/// `x` rounded to the nearest `f16` value (ties to even), as an `f64`. Overflow gives an
/// infinity, NaN stays NaN.
pub fn round_to_f16(x: f64) -> f64 {
    if x.is_nan() || x.is_infinite() || x == 0.0 {
        return x;
    }
    let a = x.abs();
    // 65520 is the midpoint between 65504 and 2^16; it and everything above round to inf.
    if a >= 65520.0 {
        return f64::INFINITY.copysign(x);
    }
    // The exponent of the binade, clamped at the subnormal range (2^-14 and below share
    // the quantum 2^-24).
    let e = (a.log2().floor() as i32).clamp(-14, 15);
    // `log2` may be off by one near powers of two; fix the binade exactly.
    let e = if a < 2f64.powi(e) {
        (e - 1).max(-14)
    } else if a >= 2f64.powi(e + 1) && e < 15 {
        e + 1
    } else {
        e
    };
    let quantum = 2f64.powi(e - 10);
    let r = (a / quantum).round_ties_even() * quantum;
    let r = if r > F16_MAX { f64::INFINITY } else { r };
    r.copysign(x)
}

/// `value` rounded to the float type `ty` (`f16`, `f32` or `f64`); other types unchanged.
pub fn round_to(value: f64, ty: Scalar) -> f64 {
    match ty {
        Scalar::F16 => round_to_f16(value),
        Scalar::F32 => value as f32 as f64,
        _ => value,
    }
}

/// Reads the unsigned decimal float text `text` (digits, optional fraction and exponent, no
/// `_`, or `inf`/`nan`) as a value of float type `ty`, correctly rounded for `f32` and
/// `f64` (through `f64` for `f16`). `None` if the text is malformed.
pub fn parse_float(text: &str, ty: Scalar) -> Option<f64> {
    match text {
        "inf" => return Some(f64::INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if !text.bytes().next()?.is_ascii_digit() {
        return None;
    }
    match ty {
        Scalar::F32 => text.parse::<f32>().ok().map(f64::from),
        Scalar::F16 => text.parse::<f64>().ok().map(round_to_f16),
        _ => text.parse::<f64>().ok(),
    }
}

/// The literal of integer type `ty` for the signed value `value`; `hex` literals may also
/// give a signed type's bit pattern (`0xffff_ffff_i32` is `-1`). `None` if out of range.
pub fn int_literal(value: i128, hex: bool, ty: Scalar) -> Option<Literal> {
    let bits = ty.bits();
    let (min, max): (i128, i128) = if ty.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if value >= min && value <= max {
        return Some(Literal::int(value, ty));
    }
    if hex && ty.is_signed() && value >= 0 && value < (1i128 << bits) {
        return Some(Literal::int(value, ty));
    }
    None
}

/// The value of an integer literal as a signed number (sign-extended for signed types).
pub fn int_value(bits: u64, ty: Scalar) -> i128 {
    let width = ty.bits().clamp(1, 64);
    if ty.is_signed() {
        let shift = 64 - width;
        (((bits << shift) as i64) >> shift) as i128
    } else if width == 64 {
        bits as i128
    } else {
        (bits & ((1u64 << width) - 1)) as i128
    }
}

/// The shortest decimal digits and exponent of the positive finite `a` that read back as
/// `a` in type `ty`: `(digits, exp)` with `a ≈ d.ddd × 10^exp`.
fn shortest_digits(a: f64, ty: Scalar) -> (String, i32) {
    let sci = match ty {
        Scalar::F32 => format!("{:e}", a as f32),
        Scalar::F16 => {
            // Five significant digits always identify an f16; find the fewest that do.
            let mut found = format!("{a:e}");
            for p in 0..5 {
                let s = format!("{a:.p$e}");
                if s.parse::<f64>().map(round_to_f16) == Ok(a) {
                    found = s;
                    break;
                }
            }
            found
        }
        _ => format!("{a:e}"),
    };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    (digits, exp)
}

/// The text of the float `value` of type `ty`: the shortest digits that read back to the
/// same value, always with a `.` or an exponent so that it reads as a float; `inf`, `-inf`
/// and `nan` (NaN payloads and signs are not kept). The value is first rounded to `ty`.
pub fn format_float(value: f64, ty: Scalar) -> String {
    let v = round_to(value, ty);
    if v.is_nan() {
        return "nan".into();
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if v.is_infinite() {
        return format!("{sign}inf");
    }
    let a = v.abs();
    if a == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, exp) = shortest_digits(a, ty);
    let body = if (-5..17).contains(&exp) {
        if exp >= 0 {
            let e = exp as usize;
            let (int, frac) = if digits.len() > e + 1 {
                (digits[..=e].to_string(), digits[e + 1..].to_string())
            } else {
                (format!("{digits:0<width$}", width = e + 1), "0".to_string())
            };
            format!("{int}.{frac}")
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        }
    } else if digits.len() > 1 {
        format!("{}.{}e{exp}", &digits[..1], &digits[1..])
    } else {
        format!("{digits}e{exp}")
    };
    format!("{sign}{body}")
}

/// The text of a literal without its suffix: `true`, `-1`, `4294967295`, `0.5`, `inf`.
pub fn format_literal_value(lit: Literal) -> String {
    match lit {
        Literal::Bool(b) => b.to_string(),
        Literal::Int { bits, ty } => int_value(bits, ty).to_string(),
        Literal::Float { value, ty } => format_float(value, ty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding() {
        assert_eq!(round_to_f16(1.0), 1.0);
        assert_eq!(round_to_f16(65504.0), 65504.0);
        assert_eq!(round_to_f16(65519.0), 65504.0);
        assert_eq!(round_to_f16(65520.0), f64::INFINITY);
        assert_eq!(round_to_f16(2f64.powi(-24)), 2f64.powi(-24));
        assert_eq!(round_to_f16(2f64.powi(-26)), 0.0);
        assert_eq!(round_to_f16(0.1), 0.0999755859375);
        // Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
        assert_eq!(round_to_f16(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(round_to_f16(-3.0), -3.0);
    }

    #[test]
    fn floats_print_shortest_and_as_floats() {
        assert_eq!(format_float(1.0, Scalar::F32), "1.0");
        assert_eq!(format_float(0.1f32 as f64, Scalar::F32), "0.1");
        assert_eq!(format_float(0.1, Scalar::F64), "0.1");
        assert_eq!(format_float(0.0999755859375, Scalar::F16), "0.1");
        assert_eq!(format_float(100.0, Scalar::F32), "100.0");
        assert_eq!(format_float(1e300, Scalar::F64), "1e300");
        assert_eq!(format_float(1.5e-7, Scalar::F64), "1.5e-7");
        assert_eq!(format_float(0.0001, Scalar::F64), "0.0001");
        assert_eq!(format_float(-0.0, Scalar::F64), "-0.0");
        assert_eq!(format_float(f64::NEG_INFINITY, Scalar::F16), "-inf");
        assert_eq!(format_float(f64::NAN, Scalar::F32), "nan");
        // Shortest digits that read back as the f16 65504 (its neighbours are 32 apart).
        assert_eq!(format_float(65504.0, Scalar::F16), "65500.0");
        assert_eq!(
            format_float(f64::MAX, Scalar::F64),
            "1.7976931348623157e308"
        );
        assert_eq!(format_float(5e-324, Scalar::F64), "5e-324");
    }

    #[test]
    fn float_text_round_trips() {
        for &(v, ty) in &[
            (0.1f32 as f64, Scalar::F32),
            (f32::MAX as f64, Scalar::F32),
            (f32::MIN_POSITIVE as f64, Scalar::F32),
            (1e-45f32 as f64, Scalar::F32),
            (std::f64::consts::PI, Scalar::F64),
            (2f64.powi(-24), Scalar::F16),
            (0.0999755859375, Scalar::F16),
            (1234.5678, Scalar::F64),
        ] {
            let text = format_float(v, ty);
            assert_eq!(parse_float(&text, ty), Some(v), "{text}");
        }
    }

    #[test]
    fn int_ranges() {
        assert!(int_literal(255, false, Scalar::U8).is_some());
        assert!(int_literal(256, false, Scalar::U8).is_none());
        assert!(int_literal(-1, false, Scalar::U32).is_none());
        assert!(int_literal(-128, false, Scalar::I8).is_some());
        assert!(int_literal(128, false, Scalar::I8).is_none());
        assert_eq!(
            int_literal(0xffff_ffff, true, Scalar::I32),
            Some(Literal::int(-1, Scalar::I32))
        );
        assert_eq!(int_value(u64::MAX, Scalar::I64), -1);
        assert_eq!(int_value(u64::MAX, Scalar::U64), u64::MAX as i128);
        assert_eq!(int_value(0x80, Scalar::I8), -128);
    }
}
