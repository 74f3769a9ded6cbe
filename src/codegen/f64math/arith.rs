//! The scalar `f64` arithmetic the functions of [`super`] are written over, and the unit
//! tests' host model of it.

#[cfg(test)]
use super::trig::table_entry;

/// Veltkamp's splitter for doubles: 2^27 + 1.
const SPLITTER: f64 = 134_217_729.0;

/// What an [`Arith`] operation gives.
pub type Res<A, T> = Result<T, <A as Arith>::E>;

/// Float comparisons: ordered (false when either side is NaN) but for `Ne`, which is true
/// then (Rust's `!=`).
#[derive(Clone, Copy)]
pub enum Cmp {
    Lt,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// Scalar `f64` arithmetic, every operation correctly rounded (`fma` fused), as both the
/// device and the host model provide it.
pub trait Arith {
    type V: Copy;
    type B: Copy;
    /// What emitting an operation may fail with.
    type E;
    /// Whether [`Arith::mul_add`] is fused (rounded once). Without that, exact products are
    /// Dekker's ([`Arith::two_prod`]) and a quotient's residual comes from one
    /// ([`Arith::residual`]).
    const FUSED: bool;
    fn c(&mut self, v: f64) -> Self::V;
    fn add(&mut self, a: Self::V, b: Self::V) -> Result<Self::V, Self::E>;
    fn sub(&mut self, a: Self::V, b: Self::V) -> Result<Self::V, Self::E>;
    fn mul(&mut self, a: Self::V, b: Self::V) -> Result<Self::V, Self::E>;
    fn div(&mut self, a: Self::V, b: Self::V) -> Result<Self::V, Self::E>;
    /// `a·b + c`: fused where [`Arith::FUSED`], else a product and a sum (two roundings).
    /// The algorithms use it where either is accurate enough; an exact product or residual
    /// goes through [`Arith::two_prod`] or [`Arith::residual`].
    fn mul_add(&mut self, a: Self::V, b: Self::V, c: Self::V) -> Result<Self::V, Self::E>;
    fn neg(&mut self, a: Self::V) -> Result<Self::V, Self::E>;
    fn abs(&mut self, a: Self::V) -> Result<Self::V, Self::E>;
    fn floor(&mut self, a: Self::V) -> Result<Self::V, Self::E>;
    /// Round to the nearest integer, ties to even.
    fn rint(&mut self, a: Self::V) -> Result<Self::V, Self::E>;
    fn cmp(&mut self, p: Cmp, a: Self::V, b: Self::V) -> Result<Self::B, Self::E>;
    /// `a` clamped to [lo, hi], a NaN `a` giving `lo` (IEEE `maxNum`, then `minNum`).
    fn clamp(&mut self, a: Self::V, lo: f64, hi: f64) -> Result<Self::V, Self::E>;
    fn and(&mut self, a: Self::B, b: Self::B) -> Result<Self::B, Self::E>;
    fn or(&mut self, a: Self::B, b: Self::B) -> Result<Self::B, Self::E>;
    fn sel(&mut self, c: Self::B, a: Self::V, b: Self::V) -> Result<Self::V, Self::E>;
    /// `(m, e)` with `a = m·2^e`, m in [0.5, 1), e an integral f64, for a positive normal `a`.
    fn frexp(&mut self, a: Self::V) -> Result<(Self::V, Self::V), Self::E>;
    /// `2^k` for an integral `k` in [-1022, 1023].
    fn pow2(&mut self, k: Self::V) -> Result<Self::V, Self::E>;
    /// The padded 2/π table's entry `i`, for an integral `i` in [0, TABLE_LEN).
    fn table(&mut self, i: Self::V) -> Result<Self::V, Self::E>;
    /// `then`'s values where `cond` holds, `otherwise` elsewhere; `then` runs only for the
    /// lanes that need it (a branch on the device).
    fn guarded<const N: usize>(
        &mut self,
        cond: Self::B,
        otherwise: [Self::V; N],
        then: impl FnOnce(&mut Self) -> Result<[Self::V; N], Self::E>,
    ) -> Result<[Self::V; N], Self::E>;

    fn mulc(&mut self, a: Self::V, k: f64) -> Result<Self::V, Self::E> {
        let k = self.c(k);
        self.mul(a, k)
    }
    /// `c[0] + x·(c[1] + x·(c[2] + …))` with [`Arith::mul_add`].
    fn horner(&mut self, x: Self::V, c: &[f64]) -> Result<Self::V, Self::E> {
        let mut acc = self.c(c[c.len() - 1]);
        for &k in c[..c.len() - 1].iter().rev() {
            let k = self.c(k);
            acc = self.mul_add(acc, x, k)?;
        }
        Ok(acc)
    }
    /// Knuth's two-sum: `s + e == a + b` exactly, `s = fl(a + b)`.
    fn two_sum(&mut self, a: Self::V, b: Self::V) -> Result<(Self::V, Self::V), Self::E> {
        let s = self.add(a, b)?;
        let bb = self.sub(s, a)?;
        let sb = self.sub(s, bb)?;
        let da = self.sub(a, sb)?;
        let db = self.sub(b, bb)?;
        Ok((s, self.add(da, db)?))
    }
    /// Dekker's fast two-sum, for |a| ≥ |b| (or a = 0).
    fn fast_two_sum(&mut self, a: Self::V, b: Self::V) -> Result<(Self::V, Self::V), Self::E> {
        let s = self.add(a, b)?;
        let t = self.sub(s, a)?;
        Ok((s, self.sub(b, t)?))
    }
    /// The exact product `p + e == a·b` (no overflow, not near underflow): through the fused
    /// multiply-add, or else Dekker's, from Veltkamp's halves ([`Arith::split`]).
    fn two_prod(&mut self, a: Self::V, b: Self::V) -> Result<(Self::V, Self::V), Self::E> {
        let p = self.mul(a, b)?;
        if Self::FUSED {
            let np = self.neg(p)?;
            return Ok((p, self.mul_add(a, b, np)?));
        }
        let (ah, al) = self.split(a)?;
        let (bh, bl) = self.split(b)?;
        let hh = self.mul(ah, bh)?;
        let hl = self.mul(ah, bl)?;
        let lh = self.mul(al, bh)?;
        let ll = self.mul(al, bl)?;
        let e = self.sub(hh, p)?;
        let e = self.add(e, hl)?;
        let e = self.add(e, lh)?;
        Ok((p, self.add(e, ll)?))
    }
    /// Veltkamp's split of `a` (|a| < 2^996) into two halves of at most 26 bits.
    fn split(&mut self, a: Self::V) -> Result<(Self::V, Self::V), Self::E> {
        let c = self.mulc(a, SPLITTER)?;
        let t = self.sub(c, a)?;
        let hi = self.sub(c, t)?;
        Ok((hi, self.sub(a, hi)?))
    }
    /// `n - q·d` exactly, for a quotient `q ≈ n/d` (so that the residual is representable):
    /// one fused multiply-add, or `(n - p) - e` from the exact product `p + e = q·d` (`n - p`
    /// is exact by Sterbenz).
    fn residual(&mut self, q: Self::V, d: Self::V, n: Self::V) -> Result<Self::V, Self::E> {
        if Self::FUSED {
            let nq = self.neg(q)?;
            return self.mul_add(nq, d, n);
        }
        let (p, pe) = self.two_prod(q, d)?;
        let r = self.sub(n, p)?;
        self.sub(r, pe)
    }
    /// `p·2^k` for an integral `k` in [-1200, 1200], in two exact power-of-two steps (so a
    /// subnormal result rounds once).
    fn scale(&mut self, p: Self::V, k: Self::V) -> Result<Self::V, Self::E> {
        let h = self.mulc(k, 0.5)?;
        let h = self.floor(h)?;
        let j = self.sub(k, h)?;
        let ph = self.pow2(h)?;
        let pj = self.pow2(j)?;
        let p = self.mul(p, ph)?;
        self.mul(p, pj)
    }
    /// Whether `a` is NaN.
    fn is_nan(&mut self, a: Self::V) -> Result<Self::B, Self::E> {
        self.cmp(Cmp::Ne, a, a)
    }
    /// `v mod 4` for an integral `v` (exact: the multiples of 4 involved are exact).
    fn mod4(&mut self, v: Self::V) -> Result<Self::V, Self::E> {
        let q = self.mulc(v, 0.25)?;
        let q = self.floor(q)?;
        let q4 = self.mulc(q, 4.0)?;
        self.sub(v, q4)
    }
}

/// Distance in ulps between two f64 (0 for two NaNs, `u64::MAX` for one): the host-model
/// tests' measure against the interpreter's libm.
#[cfg(test)]
pub(crate) fn ulps(a: f64, b: f64) -> u64 {
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
pub(crate) struct Rng(pub(crate) u64);

#[cfg(test)]
impl Rng {
    pub(crate) fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.bits() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A positive finite double, log-uniform over the whole range (subnormals too).
    pub(crate) fn positive(&mut self) -> f64 {
        f64::from_bits(self.bits() % 0x7FF0_0000_0000_0000)
    }
    /// A double of either sign with an unbiased exponent in [lo, hi].
    pub(crate) fn double(&mut self, lo: i64, hi: i64) -> f64 {
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

/// `f(model, args…)` on the fused host model (the LLVM targets' sequence) or the unfused one
/// (Vulkan's), for the tests of the functions over [`Arith`].
#[cfg(test)]
macro_rules! on_model {
    ($fused:expr, $f:ident($($a:expr),*)) => {
        if $fused {
            $f(&mut $crate::codegen::f64math::arith::Host::<true>, $($a),*)
        } else {
            $f(&mut $crate::codegen::f64math::arith::Host::<false>, $($a),*)
        }
        .unwrap_or_else(|e| match e {})
    };
}
#[cfg(test)]
pub(crate) use on_model;

/// The host model: the same operations on Rust `f64`, with a fused `mul_add` (the LLVM
/// targets' sequence) or not (Vulkan's).
#[cfg(test)]
pub(crate) struct Host<const FUSED: bool>;

#[cfg(test)]
impl<const F: bool> Arith for Host<F> {
    type V = f64;
    type B = bool;
    type E = std::convert::Infallible;
    const FUSED: bool = F;

    fn c(&mut self, v: f64) -> f64 {
        v
    }
    fn add(&mut self, a: f64, b: f64) -> Result<f64, Self::E> {
        Ok(a + b)
    }
    fn sub(&mut self, a: f64, b: f64) -> Result<f64, Self::E> {
        Ok(a - b)
    }
    fn mul(&mut self, a: f64, b: f64) -> Result<f64, Self::E> {
        Ok(a * b)
    }
    fn div(&mut self, a: f64, b: f64) -> Result<f64, Self::E> {
        Ok(a / b)
    }
    fn mul_add(&mut self, a: f64, b: f64, c: f64) -> Result<f64, Self::E> {
        Ok(if F { a.mul_add(b, c) } else { a * b + c })
    }
    fn neg(&mut self, a: f64) -> Result<f64, Self::E> {
        Ok(-a)
    }
    fn abs(&mut self, a: f64) -> Result<f64, Self::E> {
        Ok(a.abs())
    }
    fn floor(&mut self, a: f64) -> Result<f64, Self::E> {
        Ok(a.floor())
    }
    fn rint(&mut self, a: f64) -> Result<f64, Self::E> {
        Ok(a.round_ties_even())
    }
    fn cmp(&mut self, p: Cmp, a: f64, b: f64) -> Result<bool, Self::E> {
        Ok(match p {
            Cmp::Lt => a < b,
            Cmp::Gt => a > b,
            Cmp::Ne => a != b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
        })
    }
    fn clamp(&mut self, a: f64, lo: f64, hi: f64) -> Result<f64, Self::E> {
        Ok(a.max(lo).min(hi))
    }
    fn and(&mut self, a: bool, b: bool) -> Result<bool, Self::E> {
        Ok(a && b)
    }
    fn or(&mut self, a: bool, b: bool) -> Result<bool, Self::E> {
        Ok(a || b)
    }
    fn sel(&mut self, c: bool, a: f64, b: f64) -> Result<f64, Self::E> {
        Ok(if c { a } else { b })
    }
    fn frexp(&mut self, a: f64) -> Result<(f64, f64), Self::E> {
        let bits = a.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i64 - 1022;
        let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3fe0_0000_0000_0000);
        Ok((m, e as f64))
    }
    fn pow2(&mut self, k: f64) -> Result<f64, Self::E> {
        Ok(f64::from_bits(((k as i64 + 1023) as u64) << 52))
    }
    fn table(&mut self, i: f64) -> Result<f64, Self::E> {
        Ok(table_entry(i as usize))
    }
    fn guarded<const N: usize>(
        &mut self,
        cond: bool,
        otherwise: [f64; N],
        then: impl FnOnce(&mut Self) -> Result<[f64; N], Self::E>,
    ) -> Result<[f64; N], Self::E> {
        if cond {
            then(self)
        } else {
            Ok(otherwise)
        }
    }
}
