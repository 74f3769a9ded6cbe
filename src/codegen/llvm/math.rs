//! Transcendental functions built from plain arithmetic, the same on every LLVM GPU target
//! (no libdevice, no vendor approximations), to meet `docs/semantics.md`'s accuracy table.
//!
//! Everything is computed in `f64`: an `f32` (or `f16`, already widened to `f32`) argument is
//! widened, evaluated, and rounded once, so `f32` results are correctly rounded except in rare
//! double-rounding cases.
//!
//! `f64` results (and `sin`/`cos` of every width) come from `codegen::f64math`, written once
//! for LLVM and Vulkan over its `Arith` ([`arith::Ir`] here, with a fused `fma`), so its unit
//! tests run the emitted operation sequence on the host against the interpreter's libm:
//! - `trig`: `sin`, `cos`: `x = k·π/2 + r + rl` by Cody–Waite (three-double π/2, exact
//!   products) below 2^27 and by Payne–Hanek (a constant table of 2/π in 24-bit pieces,
//!   exact products, carries) from 2^27 on, under a per-lane branch so only lanes with huge
//!   arguments pay; every finite argument is reduced right. Taylor polynomials on |r| ≤ π/4.
//! - `explog`: `exp exp2 log log2 tanh` and `pow`'s core, with the reduced argument, the
//!   logarithm (about 2^-100) and `y·log x` carried in double-double.
//!
//! The `f32` paths of `exp exp2 log log2 tanh pow` stay in plain `f64` here (fdlibm-style
//! reductions, Taylor polynomials), which is far inside their bounds:
//! - `exp`, `exp2`: `x = k·ln2 + r` (Cody–Waite, two constants) with |r| ≤ ln2/2, a degree-13
//!   polynomial, and `2^k` applied in two halves so that underflow and overflow round right.
//! - `log`, `log2`: `x = 2^e·m` with m in [√½, √2), `log m = 2·atanh(f / (2 + f))` as an odd
//!   series in `s = f/(2+f)`; subnormals are scaled first.
//! - `tanh`: `expm1(2|x|) / (expm1(2|x|) + 2)` with a series `expm1` below 1, sign copied.
//! - `pow`: `exp(y·log|x|)` with C's special cases (shared with `f64`, whose core is
//!   `explog::pow_core`; `f64` zero, infinite or NaN operands take this plain path too).
//!
//! - `rsqrt` (f32): `1/sqrt` in f64, rounded once (so it agrees with the interpreter's).
//! - `%` on floats: C `fmod`, exact, by musl's integer shift-and-subtract on the significands
//!   (a loop of one step per bit of exponent difference); `f16` goes through `f32`, which is
//!   exact. LLVM's `frem` is not used: NVPTX expands it as `x − trunc(x/y)·y`, which is wrong
//!   for large quotients (`1e10 % 3` gave 256).
//!
//! Measured against the interpreter (host model, unit tests): `f32` within 1 ulp; `f64`
//! `exp exp2 log log2 sin cos` and `pow`'s core within 1 ulp over their whole domains
//! (`sin`/`cos` up to 1.8e308), `tanh` within 2 (glibc's own error).

mod arith;

use super::{codes, FunctionContext, LowerResult};
use crate::codegen::f64math::{explog, trig};
use crate::codegen::mathconst::factorial;
use crate::ir::{MathFn, Scalar};
use inkwell::types::BasicTypeEnum;
use inkwell::values::IntValue;
use inkwell::values::{BasicValueEnum, InstructionOpcode as O};
use inkwell::{FloatPredicate as F, IntPredicate};

const LN2_HI: f64 = 0.6931471803691238;
const LN2_LO: f64 = 1.9082149292705877e-10;
const INV_LN2: f64 = std::f64::consts::LOG2_E;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    fn d(&self, v: f64) -> BasicValueEnum<'ctx> {
        self.cx.context.f64_type().const_float(v).into()
    }

    fn f2(
        &self,
        op: O,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        self.binop(op, a, b)
    }

    fn fma64(
        &self,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = self.cx.context.f64_type().into();
        self.cx.call_value("llvm.fma", &[t], &[a, b, c])
    }

    fn un64(&self, name: &str, a: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = self.cx.context.f64_type().into();
        self.cx.call_value(name, &[t], &[a])
    }

    fn bin64(
        &self,
        name: &str,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = self.cx.context.f64_type().into();
        self.cx.call_value(name, &[t], &[a, b])
    }

    /// Horner's rule with fma: `c[0]·x^(n-1) + ... + c[n-1]`.
    fn poly(&self, x: BasicValueEnum<'ctx>, coeffs: &[f64]) -> LowerResult<BasicValueEnum<'ctx>> {
        let mut p = self.d(coeffs[0]);
        for c in &coeffs[1..] {
            p = self.fma64(p, x, self.d(*c))?;
        }
        Ok(p)
    }

    fn is_nan(&self, x: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
        self.fcmp(F::UNO, x, x)
    }

    /// `p · 2^k` for an integral f64 `k` in [-1100, 1100], in two exact power-of-two steps.
    fn ldexp(
        &self,
        p: BasicValueEnum<'ctx>,
        k: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
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
    fn exp_poly(&self, r: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
        let coeffs: Vec<f64> = (0..=13).rev().map(|n| 1.0 / factorial(n)).collect();
        self.poly(r, &coeffs)
    }

    fn exp64(&self, x: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
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

    fn exp2_64(&self, x: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
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
    ) -> LowerResult<(BasicValueEnum<'ctx>, BasicValueEnum<'ctx>)> {
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
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let zero = self.fcmp(F::OEQ, x, self.d(0.0))?;
        let neg = self.fcmp(F::ULT, x, self.d(0.0))?; // NaN too
        let inf = self.fcmp(F::OEQ, x, self.d(f64::INFINITY))?;
        let r = self.select(inf, x, res)?;
        let r = self.select(zero, self.d(f64::NEG_INFINITY), r)?;
        self.select(neg, self.d(f64::NAN), r)
    }

    fn log64(&self, x: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
        let (e, lm) = self.log_parts(x)?;
        let lo = self.fma64(e, self.d(LN2_LO), lm)?;
        let res = self.fma64(e, self.d(LN2_HI), lo)?;
        self.log_special(x, res)
    }

    fn log2_64(&self, x: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
        let (e, lm) = self.log_parts(x)?;
        let res = self.fma64(lm, self.d(INV_LN2), e)?;
        self.log_special(x, res)
    }

    fn tanh64(&self, x: BasicValueEnum<'ctx>) -> LowerResult<BasicValueEnum<'ctx>> {
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

    /// pow with C's special cases: exp(y·log|x|), the product carried in double-double when
    /// `precise` (f64), plain f64 otherwise (f32 and f16 need no more).
    fn pow64(
        &self,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
        precise: bool,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ax = self.un64("llvm.fabs", x)?;
        let r = if precise {
            // exp(y·log|x|) in double-double (`explog::pow_core`) for finite nonzero x and
            // non-NaN y; x = 0, inf, NaN or y NaN take the plain evaluation, which gets
            // their 0, inf and NaN right.
            let l = self.log64(ax)?;
            let plain = self.exp64(self.f2(O::FMul, y, l)?)?;
            let finite_x = self.fcmp(F::ONE, ax, self.d(f64::INFINITY))?;
            let nonzero_x = self.fcmp(F::ONE, ax, self.d(0.0))?;
            let y_num = self.fcmp(F::ORD, y, y)?;
            let regular = self.binop(O::And, finite_x, nonzero_x)?;
            let regular = self.binop(O::And, regular, y_num)?;
            let axs = self.select(regular, ax, self.d(1.0))?;
            let ys = self.select(regular, y, self.d(1.0))?;
            let core = explog::pow_core(&mut arith::Ir(self), axs, ys)?;
            self.select(regular, core, plain)?
        } else {
            let l = self.log64(ax)?;
            self.exp64(self.f2(O::FMul, y, l)?)?
        };
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
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let f64t = self.cx.context.f64_type();
        let wide: Vec<BasicValueEnum> = if s == Scalar::F64 {
            args.to_vec()
        } else {
            args.iter()
                .map(|a| self.b().build_cast(O::FPExt, *a, f64t, ""))
                .collect::<Result<_, _>>()?
        };
        let x = wide[0];
        let ir = &mut arith::Ir(self);
        let r = match fun {
            // f64 carries the extra precision it needs in double-double (`explog`); f32 (and
            // f16) results computed in plain f64 are already far inside their bounds.
            MathFn::Exp if s == Scalar::F64 => explog::exp(ir, x)?,
            MathFn::Exp2 if s == Scalar::F64 => explog::exp2(ir, x)?,
            MathFn::Log if s == Scalar::F64 => explog::log(ir, x, false)?,
            MathFn::Log2 if s == Scalar::F64 => explog::log(ir, x, true)?,
            MathFn::Tanh if s == Scalar::F64 => explog::tanh(ir, x)?,
            MathFn::Exp => self.exp64(x)?,
            MathFn::Exp2 => self.exp2_64(x)?,
            MathFn::Log => self.log64(x)?,
            MathFn::Log2 => self.log2_64(x)?,
            MathFn::Sin => trig::sin_cos(ir, x, false)?,
            MathFn::Cos => trig::sin_cos(ir, x, true)?,
            MathFn::Tanh => self.tanh64(x)?,
            MathFn::Pow => self.pow64(x, wide[1], s == Scalar::F64)?,
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

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    /// `rsqrt` on scalars of `s`: f32 (and f16, widened) through f64 with one rounding.
    pub(super) fn rsqrt(
        &self,
        s: Scalar,
        x: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let f64t = self.cx.context.f64_type();
        let wide = if s == Scalar::F64 {
            x
        } else {
            self.b().build_cast(O::FPExt, x, f64t, "")?
        };
        let r = self.un64("llvm.sqrt", wide)?;
        let q = self.f2(O::FDiv, self.d(1.0), r)?;
        if s == Scalar::F64 {
            Ok(q)
        } else {
            Ok(self.b().build_cast(O::FPTrunc, q, x.get_type(), "")?)
        }
    }

    /// C `fmod` on scalars or vectors of `s`, exact.
    pub(super) fn fmod(
        &mut self,
        s: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if let BasicValueEnum::VectorValue(av) = a {
            let bv = b.into_vector_value();
            let mut out = av.get_type().get_undef();
            for k in 0..av.get_type().get_size() as u64 {
                let x = self.b().build_extract_element(av, self.cx.i32(k), "")?;
                let y = self.b().build_extract_element(bv, self.cx.i32(k), "")?;
                let r = self.fmod(s, x, y)?;
                out = self.b().build_insert_element(out, r, self.cx.i32(k), "")?;
            }
            return Ok(out.into());
        }
        if s == Scalar::F16 {
            let f32t = self.cx.context.f32_type();
            let x = self.b().build_cast(O::FPExt, a, f32t, "")?;
            let y = self.b().build_cast(O::FPExt, b, f32t, "")?;
            let r = self.fmod(Scalar::F32, x, y)?;
            return Ok(self.b().build_cast(O::FPTrunc, r, a.get_type(), "")?);
        }
        self.fmod_bits(a, b, s == Scalar::F64)
    }

    /// musl's `fmod`/`fmodf` on the bit patterns, with its normalisation loops done by ctlz.
    fn fmod_bits(
        &mut self,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
        wide: bool,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let (bits, mant, emask): (u64, u64, u64) = if wide {
            (64, 52, 0x7ff)
        } else {
            (32, 23, 0xff)
        };
        let it = if wide { ctx.i64_type() } else { ctx.i32_type() };
        let ft = x.get_type();
        let c = |v: u64| it.const_int(v, false);
        let b = self.b();
        let ux = b.build_bit_cast(x, it, "")?.into_int_value();
        let uy = b.build_bit_cast(y, it, "")?.into_int_value();
        let ex = b.build_and(b.build_right_shift(ux, c(mant), false, "")?, c(emask), "")?;
        let ey = b.build_and(b.build_right_shift(uy, c(mant), false, "")?, c(emask), "")?;
        let sx = b.build_and(ux, c(1u64 << (bits - 1)), "")?;
        let ux2 = b.build_left_shift(ux, c(1), "")?;
        let uy2 = b.build_left_shift(uy, c(1), "")?;

        // Special cases: y = ±0, y NaN, x inf/NaN → NaN; |x| < |y| → x; |x| = |y| → ±0.
        let nan_case = {
            let y0 = b.build_int_compare(IntPredicate::EQ, uy2, c(0), "")?;
            let ynan = self.fcmp(F::UNO, y, y)?.into_int_value();
            let xinf = b.build_int_compare(IntPredicate::EQ, ex, c(emask), "")?;
            let t = b.build_or(y0, ynan, "")?;
            b.build_or(t, xinf, "")?
        };
        let small = b.build_int_compare(IntPredicate::ULT, ux2, uy2, "")?;
        let equal = b.build_int_compare(IntPredicate::EQ, ux2, uy2, "")?;
        let zero_x = self.binop(O::FMul, ft.const_zero(), x)?;

        let llfn = self.llfn;
        let general = ctx.append_basic_block(llfn, "fmod.general");
        let done = ctx.append_basic_block(llfn, "fmod.done");
        let entry_bb = self.b().get_insert_block().expect("positioned");
        let early = self.b().build_or(nan_case, small, "")?;
        let early = self.b().build_or(early, equal, "")?;
        // The early result: NaN, x, or ±0.
        let nan = match ft {
            BasicTypeEnum::FloatType(f) => f.const_float(f64::NAN).into(),
            _ => return self.err(codes::INPUT, "fmod of a non-float"),
        };
        let r_eq = self.select(equal.into(), zero_x, x)?;
        let early_v = self.select(nan_case.into(), nan, r_eq)?;
        // Lanes split here (early or the loop) and wait for each other at `done` when the
        // function uses wave verbs, as at the end of an IR `if`.
        let sync = self.converge_begin()?;
        self.b().build_conditional_branch(early, done, general)?;

        // General case: normalise both significands (subnormals by ctlz).
        self.b().position_at_end(general);
        let norm = |this: &Self,
                    u: IntValue<'ctx>,
                    e: IntValue<'ctx>|
         -> LowerResult<(IntValue<'ctx>, IntValue<'ctx>)> {
            let b = this.b();
            let sub = b.build_int_compare(IntPredicate::EQ, e, c(0), "")?;
            // Subnormal: lz = ctlz(u << (bits - mant)); e = -lz; u <<= lz + 1.
            let shifted = b.build_left_shift(u, c(bits - mant), "")?;
            let lz = this
                .cx
                .call_value(
                    "llvm.ctlz",
                    &[it.into()],
                    &[shifted.into(), ctx.bool_type().const_zero().into()],
                )?
                .into_int_value();
            let e_sub = b.build_int_sub(c(0), lz, "")?;
            let u_sub = b.build_left_shift(u, b.build_int_add(lz, c(1), "")?, "")?;
            // Normal: keep the significand, add the hidden bit.
            let u_norm = b.build_and(u, c((1u64 << mant) - 1), "")?;
            let u_norm = b.build_or(u_norm, c(1u64 << mant), "")?;
            let u2 = this
                .select(sub.into(), u_sub.into(), u_norm.into())?
                .into_int_value();
            let e2 = this
                .select(sub.into(), e_sub.into(), e.into())?
                .into_int_value();
            Ok((u2, e2))
        };
        let (mx, ex) = norm(self, ux, ex)?;
        let (my, ey) = norm(self, uy, ey)?;
        // Loop: for (; ex > ey; ex--) { i = mx - my; if i >= 0 { mx = i } mx <<= 1 }, with an
        // exact zero leaving early.
        let head = ctx.append_basic_block(llfn, "fmod.loop");
        let body = ctx.append_basic_block(llfn, "fmod.step");
        let tail = ctx.append_basic_block(llfn, "fmod.tail");
        let pre = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(head)?;
        self.b().position_at_end(head);
        let mx_phi = self.b().build_phi(it, "mx")?;
        let ex_phi = self.b().build_phi(it, "ex")?;
        mx_phi.add_incoming(&[(&mx, pre)]);
        ex_phi.add_incoming(&[(&ex, pre)]);
        let mxv = mx_phi.as_basic_value().into_int_value();
        let exv = ex_phi.as_basic_value().into_int_value();
        let more = self.b().build_int_compare(IntPredicate::SGT, exv, ey, "")?;
        self.b().build_conditional_branch(more, body, tail)?;
        self.b().position_at_end(body);
        let i = self.b().build_int_sub(mxv, my, "")?;
        let nonneg = self.b().build_int_compare(IntPredicate::SGE, i, c(0), "")?;
        let m = self
            .select(nonneg.into(), i.into(), mxv.into())?
            .into_int_value();
        let m = self.b().build_left_shift(m, c(1), "")?;
        let e1 = self.b().build_int_sub(exv, c(1), "")?;
        mx_phi.add_incoming(&[(&m, body)]);
        ex_phi.add_incoming(&[(&e1, body)]);
        self.b().build_unconditional_branch(head)?;
        // Tail: one more step, then renormalise and rebuild the float.
        self.b().position_at_end(tail);
        let b = self.b();
        let i = b.build_int_sub(mxv, my, "")?;
        let nonneg = b.build_int_compare(IntPredicate::SGE, i, c(0), "")?;
        let m = self
            .select(nonneg.into(), i.into(), mxv.into())?
            .into_int_value();
        let b = self.b();
        let is_zero = b.build_int_compare(IntPredicate::EQ, m, c(0), "")?;
        // Shift until the hidden bit is set: by ctlz(m) − (bits − 1 − mant).
        let lz = self
            .cx
            .call_value(
                "llvm.ctlz",
                &[it.into()],
                &[m.into(), ctx.bool_type().const_zero().into()],
            )?
            .into_int_value();
        let b = self.b();
        let sh = b.build_int_sub(lz, c(bits - 1 - mant), "")?;
        let m = b.build_left_shift(m, sh, "")?;
        let e = b.build_int_sub(exv, sh, "")?;
        let normal = b.build_int_compare(IntPredicate::SGT, e, c(0), "")?;
        let m_norm = b.build_int_sub(m, c(1u64 << mant), "")?;
        let m_norm = b.build_or(m_norm, b.build_left_shift(e, c(mant), "")?, "")?;
        let sub_sh = b.build_int_sub(c(1), e, "")?;
        let m_sub = b.build_right_shift(m, sub_sh, false, "")?;
        let r = self
            .select(normal.into(), m_norm.into(), m_sub.into())?
            .into_int_value();
        let b = self.b();
        let r = b.build_or(r, sx, "")?;
        let rf = b.build_bit_cast(r, ft, "")?;
        let general_v = self.select(is_zero.into(), zero_x, rf)?;
        let general_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(done)?;
        self.b().position_at_end(done);
        let phi = self.b().build_phi(ft, "fmod")?;
        phi.add_incoming(&[(&early_v, entry_bb), (&general_v, general_end)]);
        self.converge_end(sync, false)?;
        Ok(phi.as_basic_value())
    }
}
