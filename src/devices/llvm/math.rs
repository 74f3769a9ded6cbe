//! Transcendental functions built from plain arithmetic, the same on every LLVM GPU target
//! (no libdevice, no vendor approximations), to meet `docs/semantics.md`'s accuracy table.
//!
//! Everything is computed in `f64`: an `f32` (or `f16`, already widened to `f32`) argument is
//! widened, evaluated, and rounded once, so `f32` results are correctly rounded except in rare
//! double-rounding cases. The `f64` algorithms are the classic ones (fdlibm's reductions with
//! Taylor polynomials long enough for full `f64` precision):
//!
//! - `exp`, `exp2`: `x = k·ln2 + r` (Cody–Waite, two constants) with |r| ≤ ln2/2, a degree-13
//!   polynomial, and `2^k` applied in two halves so that underflow and overflow round right.
//! - `log`, `log2`: `x = 2^e·m` with m in [√½, √2), `log m = 2·atanh(f / (2 + f))` as an odd
//!   series in `s = f/(2+f)`; subnormals are scaled first.
//! - `sin`, `cos`: `x = k·π/2 + r` in three fma steps (accurate while |x| is below about
//!   2^30; beyond that the reduction loses bits), degree-17/16 polynomials on |r| ≤ π/4.
//! - `tanh`: `expm1(2|x|) / (expm1(2|x|) + 2)` with a series `expm1` below 1, sign copied.
//! - `pow` (f32 and f16 only): `exp(y·log|x|)` in f64 with C's special cases; an `f64` `pow`
//!   would need a double-double logarithm and is refused by name instead.
//!
//! Measured against the interpreter the `f32` results are within 1 ulp; `f64` within 2 ulp
//! (1 for `exp`, `sin`, `cos` on moderate arguments).

use super::{codes, FnCx, LResult};
use crate::ir::{MathFn, Scalar};
use inkwell::values::{BasicValueEnum, InstructionOpcode as O};
use inkwell::{FloatPredicate as F, IntPredicate};

const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
const INV_LN2: f64 = std::f64::consts::LOG2_E;
const PIO2_1: f64 = 1.570_796_326_734_125_614_17e+00;
const PIO2_2: f64 = 6.077_100_506_303_965_976_60e-11;
const PIO2_3: f64 = 2.022_266_248_711_166_455_80e-21;

fn factorial(n: u32) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

impl<'a, 'ctx> FnCx<'a, 'ctx> {
    fn d(&self, v: f64) -> BasicValueEnum<'ctx> {
        self.cx.context.f64_type().const_float(v).into()
    }

    fn f2(
        &self,
        op: O,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        self.binop(op, a, b)
    }

    fn fma64(
        &self,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let t = self.cx.context.f64_type().into();
        self.cx.call_value("llvm.fma", &[t], &[a, b, c])
    }

    fn un64(&self, name: &str, a: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let t = self.cx.context.f64_type().into();
        self.cx.call_value(name, &[t], &[a])
    }

    fn bin64(
        &self,
        name: &str,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let t = self.cx.context.f64_type().into();
        self.cx.call_value(name, &[t], &[a, b])
    }

    /// Horner's rule with fma: `c[0]·x^(n-1) + ... + c[n-1]`.
    fn poly(&self, x: BasicValueEnum<'ctx>, coeffs: &[f64]) -> LResult<BasicValueEnum<'ctx>> {
        let mut p = self.d(coeffs[0]);
        for c in &coeffs[1..] {
            p = self.fma64(p, x, self.d(*c))?;
        }
        Ok(p)
    }

    fn is_nan(&self, x: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        self.fcmp(F::UNO, x, x)
    }

    /// `p · 2^k` for an integral f64 `k` in [-1100, 1100], in two exact power-of-two steps.
    fn ldexp(
        &self,
        p: BasicValueEnum<'ctx>,
        k: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let i64t = self.cx.context.i64_type();
        let ki = self.cx.call_value(
            "llvm.fptosi.sat",
            &[i64t.into(), self.cx.context.f64_type().into()],
            &[k],
        )?;
        let h =
            self.b()
                .build_right_shift(ki.into_int_value(), i64t.const_int(1, false), true, "")?;
        let j = self.b().build_int_sub(ki.into_int_value(), h, "")?;
        let mut r = p;
        for e in [h, j] {
            let biased = self.b().build_int_add(e, i64t.const_int(1023, false), "")?;
            let bits = self
                .b()
                .build_left_shift(biased, i64t.const_int(52, false), "")?;
            let scale = self
                .b()
                .build_bit_cast(bits, self.cx.context.f64_type(), "")?;
            r = self.f2(O::FMul, r, scale)?;
        }
        Ok(r)
    }

    /// e^r for |r| ≤ ln2/2 + a little: the Taylor series to degree 13.
    fn exp_poly(&self, r: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let coeffs: Vec<f64> = (0..=13).rev().map(|n| 1.0 / factorial(n)).collect();
        self.poly(r, &coeffs)
    }

    fn exp64(&self, x: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let xc = self.bin64("llvm.maxnum", x, self.d(-800.0))?;
        let xc = self.bin64("llvm.minnum", xc, self.d(800.0))?;
        let k = self.un64("llvm.rint", self.f2(O::FMul, xc, self.d(INV_LN2))?)?;
        let nk = self.b().build_float_neg(k.into_float_value(), "")?.into();
        let r = self.fma64(nk, self.d(LN2_HI), xc)?;
        let r = self.fma64(nk, self.d(LN2_LO), r)?;
        let p = self.exp_poly(r)?;
        let res = self.ldexp(p, k)?;
        let nan = self.is_nan(x)?;
        self.select(nan, x, res)
    }

    fn exp2_64(&self, x: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let xc = self.bin64("llvm.maxnum", x, self.d(-1100.0))?;
        let xc = self.bin64("llvm.minnum", xc, self.d(1100.0))?;
        let k = self.un64("llvm.rint", xc)?;
        let f = self.f2(O::FSub, xc, k)?;
        let lo = self.f2(O::FMul, f, self.d(LN2_LO))?;
        let r = self.fma64(f, self.d(LN2_HI), lo)?;
        let p = self.exp_poly(r)?;
        let res = self.ldexp(p, k)?;
        let nan = self.is_nan(x)?;
        self.select(nan, x, res)
    }

    /// `(e, log(m))` with `x = 2^e · m`, m in [√½, √2), for a positive finite x; the caller
    /// handles zero, negatives, infinities and NaN.
    fn log_parts(
        &self,
        x: BasicValueEnum<'ctx>,
    ) -> LResult<(BasicValueEnum<'ctx>, BasicValueEnum<'ctx>)> {
        let ctx = self.cx.context;
        let i64t = ctx.i64_type();
        let f64t = ctx.f64_type();
        // Subnormals: scale by 2^54 first.
        let tiny = self.fcmp(F::OLT, x, self.d(f64::MIN_POSITIVE))?;
        let scaled = self.f2(O::FMul, x, self.d(18014398509481984.0))?;
        let xs = self.select(tiny, scaled, x)?;
        let eadj = self.select(tiny, self.d(-54.0), self.d(0.0))?;
        let bits = self.b().build_bit_cast(xs, i64t, "")?.into_int_value();
        let ebits = self
            .b()
            .build_right_shift(bits, i64t.const_int(52, false), false, "")?;
        let ebits = self
            .b()
            .build_and(ebits, i64t.const_int(0x7ff, false), "")?;
        let e = self
            .b()
            .build_int_sub(ebits, i64t.const_int(1023, false), "")?;
        let mbits = self
            .b()
            .build_and(bits, i64t.const_int(0x000f_ffff_ffff_ffff, false), "")?;
        let mbits = self
            .b()
            .build_or(mbits, i64t.const_int(0x3ff0_0000_0000_0000, false), "")?;
        let m = self.b().build_bit_cast(mbits, f64t, "")?;
        let big = self.fcmp(F::OGT, m, self.d(std::f64::consts::SQRT_2))?;
        let m_half = self.f2(O::FMul, m, self.d(0.5))?;
        let m = self.select(big, m_half, m)?;
        let ef = self.b().build_signed_int_to_float(e, f64t, "")?.into();
        let ef = self.f2(O::FAdd, ef, eadj)?;
        let one = self.select(big, self.d(1.0), self.d(0.0))?;
        let ef = self.f2(O::FAdd, ef, one)?;
        // log(1+f) = 2s + 2s·z·(1/3 + z/5 + ... + z^10/23), s = f/(2+f), z = s².
        let f = self.f2(O::FSub, m, self.d(1.0))?;
        let s = self.f2(O::FDiv, f, self.f2(O::FAdd, f, self.d(2.0))?)?;
        let z = self.f2(O::FMul, s, s)?;
        let coeffs: Vec<f64> = (1..=11).rev().map(|n| 1.0 / (2 * n + 1) as f64).collect();
        let rz = self.poly(z, &coeffs)?;
        let two_s = self.f2(O::FMul, s, self.d(2.0))?;
        let tail = self.f2(O::FMul, self.f2(O::FMul, two_s, z)?, rz)?;
        let lm = self.f2(O::FAdd, two_s, tail)?;
        Ok((ef, lm))
    }

    /// Applies log's special cases: NaN and negatives → NaN, ±0 → -inf, +inf → +inf.
    fn log_special(
        &self,
        x: BasicValueEnum<'ctx>,
        res: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let zero = self.fcmp(F::OEQ, x, self.d(0.0))?;
        let neg = self.fcmp(F::ULT, x, self.d(0.0))?; // NaN too
        let inf = self.fcmp(F::OEQ, x, self.d(f64::INFINITY))?;
        let r = self.select(inf, x, res)?;
        let r = self.select(zero, self.d(f64::NEG_INFINITY), r)?;
        self.select(neg, self.d(f64::NAN), r)
    }

    fn log64(&self, x: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let (e, lm) = self.log_parts(x)?;
        let lo = self.fma64(e, self.d(LN2_LO), lm)?;
        let res = self.fma64(e, self.d(LN2_HI), lo)?;
        self.log_special(x, res)
    }

    fn log2_64(&self, x: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let (e, lm) = self.log_parts(x)?;
        let res = self.fma64(lm, self.d(INV_LN2), e)?;
        self.log_special(x, res)
    }

    fn sin_cos64(&self, x: BasicValueEnum<'ctx>, cos: bool) -> LResult<BasicValueEnum<'ctx>> {
        let i64t = self.cx.context.i64_type();
        let k = self.un64(
            "llvm.rint",
            self.f2(O::FMul, x, self.d(std::f64::consts::FRAC_2_PI))?,
        )?;
        let nk = self.b().build_float_neg(k.into_float_value(), "")?.into();
        let r = self.fma64(nk, self.d(PIO2_1), x)?;
        let r = self.fma64(nk, self.d(PIO2_2), r)?;
        let r = self.fma64(nk, self.d(PIO2_3), r)?;
        let z = self.f2(O::FMul, r, r)?;
        // sin r = r + r·z·(−1/3! + z/5! − ...), cos r = 1 + z·(−1/2! + z/4! − ...).
        let sc: Vec<f64> = (1..=8)
            .rev()
            .map(|n| (-1f64).powi(n) / factorial(2 * n as u32 + 1))
            .collect();
        let cc: Vec<f64> = (1..=8)
            .rev()
            .map(|n| (-1f64).powi(n) / factorial(2 * n as u32))
            .collect();
        let sp = self.poly(z, &sc)?;
        let s = self.fma64(self.f2(O::FMul, r, z)?, sp, r)?;
        let cp = self.poly(z, &cc)?;
        let c = self.fma64(z, cp, self.d(1.0))?;
        let q = self.cx.call_value(
            "llvm.fptosi.sat",
            &[i64t.into(), self.cx.context.f64_type().into()],
            &[k],
        )?;
        let q =
            self.b()
                .build_int_add(q.into_int_value(), i64t.const_int(cos as u64, false), "")?;
        let q = self.b().build_and(q, i64t.const_int(3, false), "")?;
        // Quadrant q (after cos's shift by one): 0 sin, 1 cos, 2 −sin, 3 −cos.
        let odd = self.b().build_and(q, i64t.const_int(1, false), "")?;
        let odd = self
            .b()
            .build_int_compare(IntPredicate::NE, odd, i64t.const_zero(), "")?;
        let neg = self.b().build_and(q, i64t.const_int(2, false), "")?;
        let neg = self
            .b()
            .build_int_compare(IntPredicate::NE, neg, i64t.const_zero(), "")?;
        let v = self.select(odd.into(), c, s)?;
        let nv = self.b().build_float_neg(v.into_float_value(), "")?.into();
        self.select(neg.into(), nv, v)
    }

    fn tanh64(&self, x: BasicValueEnum<'ctx>) -> LResult<BasicValueEnum<'ctx>> {
        let a = self.un64("llvm.fabs", x)?;
        let y = self.f2(O::FMul, a, self.d(2.0))?;
        // expm1(y): a series below 1, exp(y) − 1 above.
        let coeffs: Vec<f64> = (1..=20).rev().map(|n| 1.0 / factorial(n)).collect();
        let series = self.f2(O::FMul, y, self.poly(y, &coeffs)?)?;
        let big = self.f2(O::FSub, self.exp64(y)?, self.d(1.0))?;
        let small = self.fcmp(F::OLT, y, self.d(1.0))?;
        let e1 = self.select(small, series, big)?;
        let t = self.f2(O::FDiv, e1, self.f2(O::FAdd, e1, self.d(2.0))?)?;
        let sat = self.fcmp(F::OGT, a, self.d(22.0))?;
        let t = self.select(sat, self.d(1.0), t)?;
        let t64 = self.cx.context.f64_type().into();
        self.cx.call_value("llvm.copysign", &[t64], &[t, x])
    }

    /// pow with C's special cases, evaluated as exp(y·log|x|) in f64.
    fn pow64(
        &self,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let ax = self.un64("llvm.fabs", x)?;
        let l = self.log64(ax)?;
        let r = self.exp64(self.f2(O::FMul, y, l)?)?;
        let ty = self.un64("llvm.trunc", y)?;
        let y_int = self.fcmp(F::OEQ, ty, y)?;
        let half = self.f2(O::FMul, y, self.d(0.5))?;
        let th = self.un64("llvm.trunc", half)?;
        let y_even = self.fcmp(F::OEQ, th, half)?;
        let not_even = self.b().build_not(y_even.into_int_value(), "")?.into();
        let y_odd = self.binop(O::And, y_int, not_even)?;
        let x_neg = self.fcmp(F::OLT, x, self.d(0.0))?;
        let nr = self.b().build_float_neg(r.into_float_value(), "")?.into();
        let signed = self.select(y_odd, nr, r)?;
        let neg_case = self.select(y_int, signed, self.d(f64::NAN))?;
        // A negative zero to an odd power keeps its sign (pow(-0, 3) = -0, pow(-0, -3) = -inf).
        let out = self.select(x_neg, neg_case, r)?;
        let x_zero = self.fcmp(F::OEQ, x, self.d(0.0))?;
        let zero_odd = self.binop(O::And, x_zero, y_odd)?;
        let t64 = self.cx.context.f64_type().into();
        let signed_zero = self.cx.call_value("llvm.copysign", &[t64], &[r, x])?;
        let out = self.select(zero_odd, signed_zero, out)?;
        let y0 = self.fcmp(F::OEQ, y, self.d(0.0))?;
        let x1 = self.fcmp(F::OEQ, x, self.d(1.0))?;
        let unit = self.binop(O::Or, y0, x1)?;
        self.select(unit, self.d(1.0), out)
    }

    /// One transcendental function on scalars of `s` (f32 or f64; f16 arrives as f32).
    pub(super) fn transcendental(
        &self,
        fun: MathFn,
        s: Scalar,
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<BasicValueEnum<'ctx>> {
        let f64t = self.cx.context.f64_type();
        if s == Scalar::F64 && fun == MathFn::Pow {
            return self.err(
                codes::UNSUPPORTED,
                format!(
                    "`pow` on f64 is not lowered for {} (f32 and f16 are)",
                    self.t.name()
                ),
            );
        }
        let wide: Vec<BasicValueEnum> = if s == Scalar::F64 {
            args.to_vec()
        } else {
            args.iter()
                .map(|a| self.b().build_cast(O::FPExt, *a, f64t, ""))
                .collect::<Result<_, _>>()?
        };
        let x = wide[0];
        let r = match fun {
            MathFn::Exp => self.exp64(x)?,
            MathFn::Exp2 => self.exp2_64(x)?,
            MathFn::Log => self.log64(x)?,
            MathFn::Log2 => self.log2_64(x)?,
            MathFn::Sin => self.sin_cos64(x, false)?,
            MathFn::Cos => self.sin_cos64(x, true)?,
            MathFn::Tanh => self.tanh64(x)?,
            MathFn::Pow => self.pow64(x, wide[1])?,
            _ => {
                return self.err(
                    codes::INPUT,
                    format!("`{}` is not transcendental", fun.name()),
                )
            }
        };
        if s == Scalar::F64 {
            Ok(r)
        } else {
            Ok(self.b().build_cast(O::FPTrunc, r, args[0].get_type(), "")?)
        }
    }
}
