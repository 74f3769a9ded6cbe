//! Scalar `f64` arithmetic for the transcendental functions that are written once and run
//! twice: [`Ir`] emits the operations as LLVM IR into the function being lowered, the unit
//! tests' [`Host`] performs them on Rust `f64`, so the host model is the device code, operation
//! for operation (the tests compare it with the interpreter's libm).

use super::super::{FnCx, LResult};
use super::trig::{table_entry, TABLE_LEN, TABLE_NAME};
use inkwell::values::{BasicValueEnum, InstructionOpcode as O};
use inkwell::FloatPredicate;

/// Float comparisons: ordered (false when either side is NaN) but for `Ne`, which is true
/// then (Rust's `!=`).
#[derive(Clone, Copy)]
pub(super) enum Cmp {
    Lt,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// Scalar `f64` arithmetic, every operation correctly rounded (`fma` fused), as both the
/// device and the host model provide it.
pub(super) trait Arith {
    type V: Copy;
    type B: Copy;
    fn c(&mut self, v: f64) -> Self::V;
    fn add(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V>;
    fn sub(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V>;
    fn mul(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V>;
    fn div(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V>;
    fn fma(&mut self, a: Self::V, b: Self::V, c: Self::V) -> LResult<Self::V>;
    fn neg(&mut self, a: Self::V) -> LResult<Self::V>;
    fn abs(&mut self, a: Self::V) -> LResult<Self::V>;
    fn floor(&mut self, a: Self::V) -> LResult<Self::V>;
    /// Round to the nearest integer, ties to even.
    fn rint(&mut self, a: Self::V) -> LResult<Self::V>;
    fn cmp(&mut self, p: Cmp, a: Self::V, b: Self::V) -> LResult<Self::B>;
    /// `a` clamped to [lo, hi], a NaN `a` giving `lo` (IEEE `maxNum`, then `minNum`).
    fn clamp(&mut self, a: Self::V, lo: f64, hi: f64) -> LResult<Self::V>;
    fn and(&mut self, a: Self::B, b: Self::B) -> LResult<Self::B>;
    fn or(&mut self, a: Self::B, b: Self::B) -> LResult<Self::B>;
    fn sel(&mut self, c: Self::B, a: Self::V, b: Self::V) -> LResult<Self::V>;
    /// `(m, e)` with `a = m·2^e`, m in [0.5, 1), e an integral f64, for a positive normal `a`.
    fn frexp(&mut self, a: Self::V) -> LResult<(Self::V, Self::V)>;
    /// `2^k` for an integral `k` in [-1022, 1023].
    fn pow2(&mut self, k: Self::V) -> LResult<Self::V>;
    /// The padded 2/π table's entry `i`, for an integral `i` in [0, TABLE_LEN).
    fn table(&mut self, i: Self::V) -> LResult<Self::V>;
    /// `then`'s values where `cond` holds, `otherwise` elsewhere; `then` runs only for the
    /// lanes that need it (a branch on the device).
    fn guarded<const N: usize>(
        &mut self,
        cond: Self::B,
        otherwise: [Self::V; N],
        then: impl FnOnce(&mut Self) -> LResult<[Self::V; N]>,
    ) -> LResult<[Self::V; N]>;

    fn mulc(&mut self, a: Self::V, k: f64) -> LResult<Self::V> {
        let k = self.c(k);
        self.mul(a, k)
    }
    /// `c[0] + x·(c[1] + x·(c[2] + …))` with fma.
    fn horner(&mut self, x: Self::V, c: &[f64]) -> LResult<Self::V> {
        let mut acc = self.c(c[c.len() - 1]);
        for &k in c[..c.len() - 1].iter().rev() {
            let k = self.c(k);
            acc = self.fma(acc, x, k)?;
        }
        Ok(acc)
    }
    /// Knuth's two-sum: `s + e == a + b` exactly, `s = fl(a + b)`.
    fn two_sum(&mut self, a: Self::V, b: Self::V) -> LResult<(Self::V, Self::V)> {
        let s = self.add(a, b)?;
        let bb = self.sub(s, a)?;
        let sb = self.sub(s, bb)?;
        let da = self.sub(a, sb)?;
        let db = self.sub(b, bb)?;
        Ok((s, self.add(da, db)?))
    }
    /// Dekker's fast two-sum, for |a| ≥ |b| (or a = 0).
    fn fast_two_sum(&mut self, a: Self::V, b: Self::V) -> LResult<(Self::V, Self::V)> {
        let s = self.add(a, b)?;
        let t = self.sub(s, a)?;
        Ok((s, self.sub(b, t)?))
    }
    /// The exact product `p + e == a·b` through fma (no overflow, not near underflow).
    fn two_prod(&mut self, a: Self::V, b: Self::V) -> LResult<(Self::V, Self::V)> {
        let p = self.mul(a, b)?;
        let np = self.neg(p)?;
        Ok((p, self.fma(a, b, np)?))
    }
    /// `p·2^k` for an integral `k` in [-1200, 1200], in two exact power-of-two steps (so a
    /// subnormal result rounds once).
    fn scale(&mut self, p: Self::V, k: Self::V) -> LResult<Self::V> {
        let h = self.mulc(k, 0.5)?;
        let h = self.floor(h)?;
        let j = self.sub(k, h)?;
        let ph = self.pow2(h)?;
        let pj = self.pow2(j)?;
        let p = self.mul(p, ph)?;
        self.mul(p, pj)
    }
    /// Whether `a` is NaN.
    fn is_nan(&mut self, a: Self::V) -> LResult<Self::B> {
        self.cmp(Cmp::Ne, a, a)
    }
    /// `v mod 4` for an integral `v` (exact: the multiples of 4 involved are exact).
    fn mod4(&mut self, v: Self::V) -> LResult<Self::V> {
        let q = self.mulc(v, 0.25)?;
        let q = self.floor(q)?;
        let q4 = self.mulc(q, 4.0)?;
        self.sub(v, q4)
    }
}

/// The device side: LLVM IR appended to the function being lowered.
pub(super) struct Ir<'f, 'a, 'ctx>(pub(super) &'f FnCx<'a, 'ctx>);

impl<'ctx> Ir<'_, '_, 'ctx> {
    fn call(&self, name: &str, args: &[BasicValueEnum<'ctx>]) -> LResult<BasicValueEnum<'ctx>> {
        let t = self.0.cx.context.f64_type().into();
        self.0.cx.call_value(name, &[t], args)
    }

    /// The module's 2/π table (a constant global in the target's global space).
    fn table_global(&self) -> inkwell::values::GlobalValue<'ctx> {
        let cx = self.0.cx;
        if let Some(g) = cx.module.get_global(TABLE_NAME) {
            return g;
        }
        let f64t = cx.context.f64_type();
        let vals: Vec<_> = (0..TABLE_LEN)
            .map(|i| f64t.const_float(table_entry(i)))
            .collect();
        let ty = f64t.array_type(TABLE_LEN as u32);
        let g = cx
            .module
            .add_global(ty, Some(self.0.t.global_space()), TABLE_NAME);
        g.set_initializer(&f64t.const_array(&vals));
        g.set_constant(true);
        g.set_linkage(inkwell::module::Linkage::Internal);
        g.set_alignment(8);
        g
    }
}

impl<'ctx> Arith for Ir<'_, '_, 'ctx> {
    type V = BasicValueEnum<'ctx>;
    type B = BasicValueEnum<'ctx>;

    fn c(&mut self, v: f64) -> Self::V {
        self.0.cx.context.f64_type().const_float(v).into()
    }
    fn add(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V> {
        self.0.binop(O::FAdd, a, b)
    }
    fn sub(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V> {
        self.0.binop(O::FSub, a, b)
    }
    fn mul(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V> {
        self.0.binop(O::FMul, a, b)
    }
    fn div(&mut self, a: Self::V, b: Self::V) -> LResult<Self::V> {
        self.0.binop(O::FDiv, a, b)
    }
    fn fma(&mut self, a: Self::V, b: Self::V, c: Self::V) -> LResult<Self::V> {
        self.call("llvm.fma", &[a, b, c])
    }
    fn neg(&mut self, a: Self::V) -> LResult<Self::V> {
        Ok(self.0.b().build_float_neg(a.into_float_value(), "")?.into())
    }
    fn abs(&mut self, a: Self::V) -> LResult<Self::V> {
        self.call("llvm.fabs", &[a])
    }
    fn floor(&mut self, a: Self::V) -> LResult<Self::V> {
        self.call("llvm.floor", &[a])
    }
    fn rint(&mut self, a: Self::V) -> LResult<Self::V> {
        self.call("llvm.rint", &[a])
    }
    fn cmp(&mut self, p: Cmp, a: Self::V, b: Self::V) -> LResult<Self::B> {
        let p = match p {
            Cmp::Lt => FloatPredicate::OLT,
            Cmp::Gt => FloatPredicate::OGT,
            Cmp::Ne => FloatPredicate::UNE,
            Cmp::Ge => FloatPredicate::OGE,
            Cmp::Eq => FloatPredicate::OEQ,
        };
        self.0.fcmp(p, a, b)
    }
    fn clamp(&mut self, a: Self::V, lo: f64, hi: f64) -> LResult<Self::V> {
        let (lo, hi) = (self.c(lo), self.c(hi));
        let m = self.call("llvm.maxnum", &[a, lo])?;
        self.call("llvm.minnum", &[m, hi])
    }
    fn and(&mut self, a: Self::B, b: Self::B) -> LResult<Self::B> {
        self.0.binop(O::And, a, b)
    }
    fn or(&mut self, a: Self::B, b: Self::B) -> LResult<Self::B> {
        self.0.binop(O::Or, a, b)
    }
    fn sel(&mut self, c: Self::B, a: Self::V, b: Self::V) -> LResult<Self::V> {
        self.0.select(c, a, b)
    }
    fn frexp(&mut self, a: Self::V) -> LResult<(Self::V, Self::V)> {
        let ctx = self.0.cx.context;
        let (i64t, f64t) = (ctx.i64_type(), ctx.f64_type());
        let b = self.0.b();
        let bits = b.build_bit_cast(a, i64t, "")?.into_int_value();
        let eb = b.build_right_shift(bits, i64t.const_int(52, false), false, "")?;
        let eb = b.build_and(eb, i64t.const_int(0x7ff, false), "")?;
        let e = b.build_int_sub(eb, i64t.const_int(1022, false), "")?;
        let e = b.build_signed_int_to_float(e, f64t, "")?.into();
        let mb = b.build_and(bits, i64t.const_int(0x000f_ffff_ffff_ffff, false), "")?;
        let mb = b.build_or(mb, i64t.const_int(0x3fe0_0000_0000_0000, false), "")?;
        let m = b.build_bit_cast(mb, f64t, "")?;
        Ok((m, e))
    }
    fn pow2(&mut self, k: Self::V) -> LResult<Self::V> {
        let ctx = self.0.cx.context;
        let (i64t, f64t) = (ctx.i64_type(), ctx.f64_type());
        let b = self.0.b();
        let ki = b.build_float_to_signed_int(k.into_float_value(), i64t, "")?;
        let biased = b.build_int_add(ki, i64t.const_int(1023, false), "")?;
        let bits = b.build_left_shift(biased, i64t.const_int(52, false), "")?;
        Ok(b.build_bit_cast(bits, f64t, "")?)
    }
    fn table(&mut self, i: Self::V) -> LResult<Self::V> {
        let g = self.table_global();
        let ctx = self.0.cx.context;
        let (i64t, f64t) = (ctx.i64_type(), ctx.f64_type());
        let b = self.0.b();
        let idx = b.build_float_to_signed_int(i.into_float_value(), i64t, "")?;
        // SAFETY: `idx` is in [0, TABLE_LEN) (reduce_ph's window), inside the array.
        let p = unsafe {
            b.build_in_bounds_gep(
                f64t.array_type(TABLE_LEN as u32),
                g.as_pointer_value(),
                &[i64t.const_zero(), idx],
                "",
            )?
        };
        Ok(b.build_load(f64t, p, "")?)
    }
    fn guarded<const N: usize>(
        &mut self,
        cond: Self::B,
        otherwise: [Self::V; N],
        then: impl FnOnce(&mut Self) -> LResult<[Self::V; N]>,
    ) -> LResult<[Self::V; N]> {
        let ctx = self.0.cx.context;
        let b = self.0.b();
        let from = b.get_insert_block().expect("positioned");
        let body = ctx.append_basic_block(self.0.llfn, "trig.ph");
        let join = ctx.append_basic_block(self.0.llfn, "trig.join");
        // The lanes that take the branch wait for the others at `join` when the function
        // uses wave verbs, as at the end of an IR `if`.
        let sync = self.0.converge_begin()?;
        b.build_conditional_branch(cond.into_int_value(), body, join)?;
        b.position_at_end(body);
        let vals = then(self)?;
        let b = self.0.b();
        let body_end = b.get_insert_block().expect("positioned");
        b.build_unconditional_branch(join)?;
        b.position_at_end(join);
        let mut out = otherwise;
        for (o, v) in out.iter_mut().zip(vals) {
            let phi = b.build_phi(ctx.f64_type(), "")?;
            phi.add_incoming(&[(&*o, from), (&v, body_end)]);
            *o = phi.as_basic_value();
        }
        self.0.converge_end(sync)?;
        Ok(out)
    }
}

/// Distance in ulps between two f64 (0 for two NaNs, `u64::MAX` for one): the host-model
/// tests' measure against the interpreter's libm.
#[cfg(test)]
pub(super) fn ulps(a: f64, b: f64) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let key = |x: f64| {
        let i = x.to_bits() as i64;
        if i < 0 {
            i64::MIN - i
        } else {
            i
        }
    };
    key(a).abs_diff(key(b))
}

/// A deterministic stream of test arguments (xorshift64*).
#[cfg(test)]
pub(super) struct Rng(pub(super) u64);

#[cfg(test)]
impl Rng {
    pub(super) fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub(super) fn unit(&mut self) -> f64 {
        (self.bits() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A positive finite double, log-uniform over the whole range (subnormals too).
    pub(super) fn positive(&mut self) -> f64 {
        f64::from_bits(self.bits() % 0x7FF0_0000_0000_0000)
    }
    /// A double of either sign with an unbiased exponent in [lo, hi].
    pub(super) fn double(&mut self, lo: i64, hi: i64) -> f64 {
        let r = self.bits();
        let e = lo + (r >> 11) as i64 % (hi - lo + 1);
        let bits = ((e + 1023) as u64) << 52 | (self.bits() & 0x000f_ffff_ffff_ffff);
        let x = f64::from_bits(bits);
        if r & 1 == 1 {
            -x
        } else {
            x
        }
    }
}

/// The host model: the same operations on Rust `f64`.
#[cfg(test)]
pub(super) struct Host;

#[cfg(test)]
impl Arith for Host {
    type V = f64;
    type B = bool;

    fn c(&mut self, v: f64) -> f64 {
        v
    }
    fn add(&mut self, a: f64, b: f64) -> LResult<f64> {
        Ok(a + b)
    }
    fn sub(&mut self, a: f64, b: f64) -> LResult<f64> {
        Ok(a - b)
    }
    fn mul(&mut self, a: f64, b: f64) -> LResult<f64> {
        Ok(a * b)
    }
    fn div(&mut self, a: f64, b: f64) -> LResult<f64> {
        Ok(a / b)
    }
    fn fma(&mut self, a: f64, b: f64, c: f64) -> LResult<f64> {
        Ok(a.mul_add(b, c))
    }
    fn neg(&mut self, a: f64) -> LResult<f64> {
        Ok(-a)
    }
    fn abs(&mut self, a: f64) -> LResult<f64> {
        Ok(a.abs())
    }
    fn floor(&mut self, a: f64) -> LResult<f64> {
        Ok(a.floor())
    }
    fn rint(&mut self, a: f64) -> LResult<f64> {
        Ok(a.round_ties_even())
    }
    fn cmp(&mut self, p: Cmp, a: f64, b: f64) -> LResult<bool> {
        Ok(match p {
            Cmp::Lt => a < b,
            Cmp::Gt => a > b,
            Cmp::Ne => a != b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
        })
    }
    fn clamp(&mut self, a: f64, lo: f64, hi: f64) -> LResult<f64> {
        Ok(a.max(lo).min(hi))
    }
    fn and(&mut self, a: bool, b: bool) -> LResult<bool> {
        Ok(a && b)
    }
    fn or(&mut self, a: bool, b: bool) -> LResult<bool> {
        Ok(a || b)
    }
    fn sel(&mut self, c: bool, a: f64, b: f64) -> LResult<f64> {
        Ok(if c { a } else { b })
    }
    fn frexp(&mut self, a: f64) -> LResult<(f64, f64)> {
        let bits = a.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i64 - 1022;
        let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3fe0_0000_0000_0000);
        Ok((m, e as f64))
    }
    fn pow2(&mut self, k: f64) -> LResult<f64> {
        Ok(f64::from_bits(((k as i64 + 1023) as u64) << 52))
    }
    fn table(&mut self, i: f64) -> LResult<f64> {
        Ok(table_entry(i as usize))
    }
    fn guarded<const N: usize>(
        &mut self,
        cond: bool,
        otherwise: [f64; N],
        then: impl FnOnce(&mut Self) -> LResult<[f64; N]>,
    ) -> LResult<[f64; N]> {
        if cond {
            then(self)
        } else {
            Ok(otherwise)
        }
    }
}
