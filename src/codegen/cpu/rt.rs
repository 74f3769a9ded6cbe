//! Runtime helpers the generated code calls: what Cranelift has no instruction for
//! (transcendentals, float `%`, `f16` arithmetic, the cooperative-matrix verbs). Each is an
//! `extern "C"` function with a stable symbol; [`symbols`] lists them for the JIT linker.
//!
//! Every helper computes exactly what `docs/semantics.md` (and so the interpreter) says:
//! `f32` transcendentals are evaluated in `f64` with Rust's libm and rounded once, `f16`
//! arithmetic in `f32` and rounded once, fragments accumulate in ascending `k` in the
//! accumulator's type.

use crate::ir::Scalar;
use half::f16;

macro_rules! f32_via_f64 {
    ($($name:ident => $g:expr;)*) => {
        $(
            pub extern "C" fn $name(x: f32) -> f32 {
                let g: fn(f64) -> f64 = $g;
                g(x as f64) as f32
            }
        )*
    };
}

macro_rules! f64_direct {
    ($($name:ident => $g:expr;)*) => {
        $(
            pub extern "C" fn $name(x: f64) -> f64 {
                let g: fn(f64) -> f64 = $g;
                g(x)
            }
        )*
    };
}

f32_via_f64! {
    xpu_exp_f32 => |x| x.exp();
    xpu_exp2_f32 => |x| x.exp2();
    xpu_log_f32 => |x| x.ln();
    xpu_log2_f32 => |x| x.log2();
    xpu_sin_f32 => |x| x.sin();
    xpu_cos_f32 => |x| x.cos();
    xpu_tanh_f32 => |x| x.tanh();
    xpu_rsqrt_f32 => |x| 1.0 / x.sqrt();
}

f64_direct! {
    xpu_exp_f64 => |x| x.exp();
    xpu_exp2_f64 => |x| x.exp2();
    xpu_log_f64 => |x| x.ln();
    xpu_log2_f64 => |x| x.log2();
    xpu_sin_f64 => |x| x.sin();
    xpu_cos_f64 => |x| x.cos();
    xpu_tanh_f64 => |x| x.tanh();
    xpu_rsqrt_f64 => |x| 1.0 / x.sqrt();
}

pub extern "C" fn xpu_pow_f32(x: f32, y: f32) -> f32 {
    (x as f64).powf(y as f64) as f32
}
pub extern "C" fn xpu_pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}
pub extern "C" fn xpu_fmod_f32(x: f32, y: f32) -> f32 {
    x % y
}
pub extern "C" fn xpu_fmod_f64(x: f64, y: f64) -> f64 {
    x % y
}
pub extern "C" fn xpu_fma_f32(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
pub extern "C" fn xpu_fma_f64(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

// ---------------------------------------------------------------------------------------
// f16: values travel as their 16 bits (in an i32 argument).

fn h(x: i32) -> f16 {
    f16::from_bits(x as u16)
}
fn hb(x: f16) -> i32 {
    x.to_bits() as i32
}

/// Codes of [`xpu_f16_op`]: the binary operators and math functions on `f16`.
pub mod f16op {
    pub const ADD: i32 = 0;
    pub const SUB: i32 = 1;
    pub const MUL: i32 = 2;
    pub const DIV: i32 = 3;
    pub const REM: i32 = 4;
    pub const POW: i32 = 5;
    pub const MIN: i32 = 6;
    pub const MAX: i32 = 7;
    // One-operand functions (the second operand is ignored).
    pub const SQRT: i32 = 16;
    pub const RSQRT: i32 = 17;
    pub const EXP: i32 = 18;
    pub const EXP2: i32 = 19;
    pub const LOG: i32 = 20;
    pub const LOG2: i32 = 21;
    pub const SIN: i32 = 22;
    pub const COS: i32 = 23;
    pub const TANH: i32 = 24;
    pub const FLOOR: i32 = 25;
    pub const CEIL: i32 = 26;
    pub const TRUNC: i32 = 27;
    pub const ROUND: i32 = 28;
    // Comparisons (result 0/1).
    pub const EQ: i32 = 32;
    pub const NE: i32 = 33;
    pub const LT: i32 = 34;
    pub const LE: i32 = 35;
    pub const GT: i32 = 36;
    pub const GE: i32 = 37;
}

/// IEEE `minimumNumber` with `-0 < +0`, as the interpreter computes it.
pub fn min_num(a: f64, b: f64) -> f64 {
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

/// IEEE `maximumNumber` with `+0 > -0`.
pub fn max_num(a: f64, b: f64) -> f64 {
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

pub extern "C" fn xpu_f16_op(op: i32, a: i32, b: i32) -> i32 {
    use f16op::*;
    let (x, y) = (h(a).to_f32(), h(b).to_f32());
    let (xd, yd) = (h(a).to_f64(), h(b).to_f64());
    let r32 = |v: f32| hb(f16::from_f32(v));
    let r64 = |v: f64| hb(f16::from_f64(v));
    match op {
        ADD => r32(x + y),
        SUB => r32(x - y),
        MUL => r32(x * y),
        DIV => r32(x / y),
        REM => r32(x % y),
        POW => r64(xd.powf(yd)),
        MIN => r64(min_num(xd, yd)),
        MAX => r64(max_num(xd, yd)),
        SQRT => r64(xd.sqrt()),
        RSQRT => r64(1.0 / xd.sqrt()),
        EXP => r64(xd.exp()),
        EXP2 => r64(xd.exp2()),
        LOG => r64(xd.ln()),
        LOG2 => r64(xd.log2()),
        SIN => r64(xd.sin()),
        COS => r64(xd.cos()),
        TANH => r64(xd.tanh()),
        FLOOR => r64(xd.floor()),
        CEIL => r64(xd.ceil()),
        TRUNC => r64(xd.trunc()),
        ROUND => r64(xd.round()),
        EQ => (x == y) as i32,
        NE => (x != y) as i32,
        LT => (x < y) as i32,
        LE => (x <= y) as i32,
        GT => (x > y) as i32,
        GE => (x >= y) as i32,
        _ => 0,
    }
}

pub extern "C" fn xpu_f16_fma(a: i32, b: i32, c: i32) -> i32 {
    hb(f16::from_f64(
        h(a).to_f64().mul_add(h(b).to_f64(), h(c).to_f64()),
    ))
}

pub extern "C" fn xpu_f16_clamp(x: i32, lo: i32, hi: i32) -> i32 {
    hb(f16::from_f64(min_num(
        max_num(h(x).to_f64(), h(lo).to_f64()),
        h(hi).to_f64(),
    )))
}

pub extern "C" fn xpu_f16_to_f64(a: i32) -> f64 {
    h(a).to_f64()
}
pub extern "C" fn xpu_f16_to_f32(a: i32) -> f32 {
    h(a).to_f32()
}
pub extern "C" fn xpu_f64_to_f16(x: f64) -> i32 {
    hb(f16::from_f64(x))
}
pub extern "C" fn xpu_f32_to_f16(x: f32) -> i32 {
    hb(f16::from_f32(x))
}
pub extern "C" fn xpu_i64_to_f16(x: i64) -> i32 {
    hb(f16::from_f64(x as f64))
}
pub extern "C" fn xpu_u64_to_f16(x: i64) -> i32 {
    hb(f16::from_f64(x as u64 as f64))
}

// ---------------------------------------------------------------------------------------
// Cooperative matrices. A fragment lives in memory as `rows × cols` canonical 64-bit slots
// (the interpreter's lane encoding), one copy per wave.

/// A lane's canonical 64-bit slot.
fn canon(s: Scalar, v: u64) -> u64 {
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

fn scalar_code(s: Scalar) -> u32 {
    Scalar::ALL.iter().position(|&x| x == s).unwrap_or(0) as u32
}

pub fn scalar_of_code(c: u32) -> Scalar {
    Scalar::ALL.get(c as usize).copied().unwrap_or(Scalar::U32)
}

/// The code the generated code passes for `s`.
pub fn code_of(s: Scalar) -> u32 {
    scalar_code(s)
}

fn float_value(s: Scalar, v: u64) -> f64 {
    match s {
        Scalar::F16 => f16::from_bits(v as u16).to_f64(),
        Scalar::F32 => f32::from_bits(v as u32) as f64,
        _ => f64::from_bits(v),
    }
}

/// `as` from `from` to `to` on canonical slots (the interpreter's conversion table).
fn cast(from: Scalar, to: Scalar, v: u64) -> u64 {
    if from == to {
        return v;
    }
    if to == Scalar::Bool {
        return if from.is_float() {
            (float_value(from, v) != 0.0) as u64
        } else {
            (v != 0) as u64
        };
    }
    match (from.is_float(), to.is_float()) {
        (false, false) => canon(to, v),
        (false, true) => {
            let n: i128 = if from.is_signed() {
                v as i64 as i128
            } else {
                v as i128
            };
            match to {
                Scalar::F32 => (n as f32).to_bits() as u64,
                Scalar::F64 => (n as f64).to_bits(),
                _ => f16::from_f64(n as f64).to_bits() as u64,
            }
        }
        (true, false) => {
            let x = float_value(from, v);
            match to {
                Scalar::I8 => x as i8 as i64 as u64,
                Scalar::I16 => x as i16 as i64 as u64,
                Scalar::I32 => x as i32 as i64 as u64,
                Scalar::I64 => x as i64 as u64,
                Scalar::U8 => x as u8 as u64,
                Scalar::U16 => x as u16 as u64,
                Scalar::U32 => x as u32 as u64,
                Scalar::U64 => x as u64,
                _ => 0,
            }
        }
        (true, true) => match (from, to) {
            (Scalar::F64, Scalar::F32) => (f64::from_bits(v) as f32).to_bits() as u64,
            (Scalar::F64, Scalar::F16) => f16::from_f64(f64::from_bits(v)).to_bits() as u64,
            (Scalar::F32, Scalar::F16) => f16::from_f32(f32::from_bits(v as u32)).to_bits() as u64,
            (_, Scalar::F32) => (float_value(from, v) as f32).to_bits() as u64,
            (_, Scalar::F64) => float_value(from, v).to_bits(),
            _ => f16::from_f64(float_value(from, v)).to_bits() as u64,
        },
    }
}

fn add(s: Scalar, a: u64, b: u64) -> u64 {
    match s {
        Scalar::F32 => (f32::from_bits(a as u32) + f32::from_bits(b as u32)).to_bits() as u64,
        Scalar::F64 => (f64::from_bits(a) + f64::from_bits(b)).to_bits(),
        Scalar::F16 => {
            f16::from_f32(f16::from_bits(a as u16).to_f32() + f16::from_bits(b as u16).to_f32())
                .to_bits() as u64
        }
        Scalar::Bool => a | b,
        _ => canon(s, a.wrapping_add(b)),
    }
}

fn mul(s: Scalar, a: u64, b: u64) -> u64 {
    match s {
        Scalar::F32 => (f32::from_bits(a as u32) * f32::from_bits(b as u32)).to_bits() as u64,
        Scalar::F64 => (f64::from_bits(a) * f64::from_bits(b)).to_bits(),
        Scalar::F16 => {
            f16::from_f32(f16::from_bits(a as u16).to_f32() * f16::from_bits(b as u16).to_f32())
                .to_bits() as u64
        }
        Scalar::Bool => a & b,
        _ => canon(s, a.wrapping_mul(b)),
    }
}

/// `d = a × b + c`; fragments are canonical slots; `sa` is a/b's scalar, `sc` c's.
///
/// # Safety
/// `d`, `a`, `b`, `c` point to `m×n`, `m×k`, `k×n`, `m×n` slots (`d` may alias `c`).
pub unsafe extern "C" fn xpu_matrix_mma(
    d: *mut u64,
    a: *const u64,
    b: *const u64,
    c: *const u64,
    dims: u64,
    scalars: u32,
) {
    let (m, n, k) = (
        (dims & 0xffff) as usize,
        ((dims >> 16) & 0xffff) as usize,
        ((dims >> 32) & 0xffff) as usize,
    );
    let sa = scalar_of_code(scalars & 0xff);
    let sc = scalar_of_code((scalars >> 8) & 0xff);
    // SAFETY: the caller passes fragments of these shapes (the generated code sizes them).
    let (fa, fb, fc) = unsafe {
        (
            std::slice::from_raw_parts(a, m * k),
            std::slice::from_raw_parts(b, k * n),
            std::slice::from_raw_parts(c, m * n).to_vec(),
        )
    };
    let mut out = vec![0u64; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = fc[i * n + j];
            for kk in 0..k {
                let x = cast(sa, sc, fa[i * k + kk]);
                let y = cast(sa, sc, fb[kk * n + j]);
                acc = add(sc, acc, mul(sc, x, y));
            }
            out[i * n + j] = acc;
        }
    }
    // SAFETY: `d` holds `m × n` slots.
    unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), d, m * n) };
}

/// Reads (`store == 0`) or writes a `rows × cols` tile between a fragment and memory of
/// scalar `s` at element `offset`, rows `stride` elements apart. Returns the first element
/// index out of bounds plus one (0 when every element is in bounds, and only then is memory
/// touched).
///
/// # Safety
/// `mem` holds `len` elements of `s`; `frag` holds `rows × cols` slots.
pub unsafe extern "C" fn xpu_matrix_access(
    frag: *mut u64,
    mem: *mut u8,
    len: u64,
    offset: u64,
    stride: u64,
    shape: u64,
) -> u64 {
    let rows = shape & 0xffff;
    let cols = (shape >> 16) & 0xffff;
    let s = scalar_of_code(((shape >> 32) & 0xff) as u32);
    let store = (shape >> 40) & 1 == 1;
    let size = s.size() as usize;
    for i in 0..rows {
        let row = offset + i * stride;
        if row + cols > len {
            return row.max(len).saturating_add(1);
        }
    }
    for i in 0..rows {
        for j in 0..cols {
            let e = (offset + i * stride + j) as usize;
            let slot = (i * cols + j) as usize;
            // SAFETY: every element of the tile is in bounds (checked above).
            unsafe {
                let p = mem.add(e * size);
                if store {
                    let v = (*frag.add(slot)).to_le_bytes();
                    std::ptr::copy_nonoverlapping(v.as_ptr(), p, size);
                } else {
                    let mut raw = [0u8; 8];
                    std::ptr::copy_nonoverlapping(p, raw.as_mut_ptr(), size);
                    *frag.add(slot) = canon(s, u64::from_le_bytes(raw));
                }
            }
        }
    }
    0
}

/// Every helper's symbol and address, for `JITBuilder::symbol`.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    macro_rules! syms {
        ($($f:ident),* $(,)?) => {
            vec![$((stringify!($f), $f as *const u8)),*]
        };
    }
    syms![
        xpu_exp_f32,
        xpu_exp2_f32,
        xpu_log_f32,
        xpu_log2_f32,
        xpu_sin_f32,
        xpu_cos_f32,
        xpu_tanh_f32,
        xpu_rsqrt_f32,
        xpu_exp_f64,
        xpu_exp2_f64,
        xpu_log_f64,
        xpu_log2_f64,
        xpu_sin_f64,
        xpu_cos_f64,
        xpu_tanh_f64,
        xpu_rsqrt_f64,
        xpu_pow_f32,
        xpu_pow_f64,
        xpu_fmod_f32,
        xpu_fmod_f64,
        xpu_fma_f32,
        xpu_fma_f64,
        xpu_f16_op,
        xpu_f16_fma,
        xpu_f16_clamp,
        xpu_f16_to_f64,
        xpu_f16_to_f32,
        xpu_f64_to_f16,
        xpu_f32_to_f16,
        xpu_i64_to_f16,
        xpu_u64_to_f16,
        xpu_matrix_mma,
        xpu_matrix_access,
        xpu_debug_print,
        xpu_debug_assert,
    ]
}

// ---------------------------------------------------------------------------------------
// `print` and `assert` records (layout: `crate::ir::debug`).

fn debug_record(
    buf: *const std::sync::atomic::AtomicU32,
    cursor: usize,
    region: (u32, u32),
    words: &[u32],
) {
    use std::sync::atomic::Ordering::Relaxed;
    if buf.is_null() {
        return;
    }
    let n = words.len() as u32;
    // SAFETY: a non-null buffer holds `BUFFER_WORDS` words (`CompiledKernel::launch_debug`).
    let at = unsafe { (*buf.add(cursor)).fetch_add(n, Relaxed) };
    if at.saturating_add(n) <= region.1 {
        for (j, w) in words.iter().enumerate() {
            // SAFETY: `region.0 + at + j` is inside the region, inside the buffer.
            unsafe { (*buf.add((region.0 + at) as usize + j)).store(*w, Relaxed) };
        }
    }
}

/// A `print` record: `n` values (64 bits each) at `vals`.
///
/// # Safety
/// `buf` is null or holds `BUFFER_WORDS` words; `vals` holds `n` (at most 8) values.
pub unsafe extern "C" fn xpu_debug_print(
    buf: *const std::sync::atomic::AtomicU32,
    site: u32,
    group: u32,
    item: u32,
    vals: *const u64,
    n: u64,
) {
    use crate::ir::debug::{HEADER_WORDS, MAX_PRINT_VALUES, PRINT_REGION_WORDS};
    let n = (n as usize).min(MAX_PRINT_VALUES);
    let mut words = [0u32; 3 + 2 * MAX_PRINT_VALUES];
    words[..3].copy_from_slice(&[site, group, item]);
    for k in 0..n {
        // SAFETY: `vals` holds `n` values (the caller's contract).
        let v = unsafe { *vals.add(k) };
        words[3 + 2 * k] = v as u32;
        words[4 + 2 * k] = (v >> 32) as u32;
    }
    debug_record(
        buf,
        0,
        (HEADER_WORDS, PRINT_REGION_WORDS),
        &words[..3 + 2 * n],
    );
}

/// A failed-assert record.
///
/// # Safety
/// `buf` is null or holds `BUFFER_WORDS` words.
pub unsafe extern "C" fn xpu_debug_assert(
    buf: *const std::sync::atomic::AtomicU32,
    site: u32,
    group: u32,
    item: u32,
) {
    use crate::ir::debug::{ASSERT_BASE, ASSERT_REGION_WORDS};
    debug_record(
        buf,
        1,
        (ASSERT_BASE, ASSERT_REGION_WORDS),
        &[site, group, item],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_ops_round_once() {
        let one = hb(f16::from_f32(1.0));
        let two = hb(f16::from_f32(2.0));
        assert_eq!(h(xpu_f16_op(f16op::ADD, one, two)).to_f32(), 3.0);
        assert_eq!(xpu_f16_op(f16op::LT, one, two), 1);
        let nan = hb(f16::NAN);
        assert_eq!(xpu_f16_op(f16op::MIN, nan, two), two);
    }

    #[test]
    fn mma_accumulates_in_order() {
        let a = [1f32, 2.0, 3.0, 4.0].map(|x| x.to_bits() as u64);
        let b = [5f32, 6.0, 7.0, 8.0].map(|x| x.to_bits() as u64);
        let c = [0f32; 4].map(|x| x.to_bits() as u64);
        let mut d = [0u64; 4];
        let code = scalar_code(Scalar::F32);
        // SAFETY: 2×2 fragments.
        unsafe {
            xpu_matrix_mma(
                d.as_mut_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                c.as_ptr(),
                2 | 2 << 16 | 2 << 32,
                code | code << 8,
            )
        };
        let d: Vec<f32> = d.iter().map(|&v| f32::from_bits(v as u32)).collect();
        assert_eq!(d, vec![19.0, 22.0, 43.0, 50.0]);
    }
}
