//! Transcendental functions built from SPIR-V arithmetic, since GLSL.std.450 has only 16- and
//! 32-bit `exp log sin ...` (and Vulkan lets those be loose: `exp` 3 + 2·|x| ulps, `sin` an
//! absolute 2^-11).
//!
//! - **`f64`** `exp exp2 log log2 sin cos tanh pow`, and `sqrt`/`rsqrt` (Vulkan lets `Sqrt`
//!   be inexact and has no bound at all for 64-bit `InverseSqrt`), from `FAdd FSub FMul
//!   FDiv` (each `NoContraction`) and the exact GLSL helpers `Floor Trunc RoundEven FAbs
//!   Frexp Ldexp NMin NMax`. No `Fma`: Vulkan allows it unfused and lavapipe's is, so exact
//!   products are Dekker's (Veltkamp splitting), and every extra-precision step is a
//!   double-double (`two_sum`, `two_prod`) that only needs correctly rounded `+ - *`. A
//!   quotient is never trusted to be correctly rounded where it matters: its residual is
//!   computed exactly and added back. The algorithms are the NVPTX backend's
//!   (`src/devices/llvm/math.rs`) with more of each carried in double-double:
//!   - `exp`, `exp2`: `x = k·ln2 + r` (Cody–Waite, `r` kept as `r + rl`), Taylor to degree
//!     13 as `1 + (r + r²·P(r))`, `2^k` applied in two exact halves (underflow rounds once).
//!   - `log`, `log2`, and `pow`'s logarithm: `x = 2^e·m`, `m ∈ [√½, √2)`, `log m = 2s +
//!     2s³/3 + s⁵·Q(s²)` with `s = (m-1)/(m+1)` and the first two terms in double-double,
//!     plus `e·ln2` in three parts: about 2^-100 relative, so `pow`'s `y·log x` keeps its
//!     accuracy up to the overflow threshold.
//!   - `sin`, `cos`: for |x| < 2^27, `x - k·π/2` with π/2 in three doubles and exact products;
//!     beyond, Payne–Hanek: `x·2/π` mod 4 from a table of 24-bit pieces of 2/π (exact
//!     products of 24-bit pieces, carries propagated as fdlibm's `__kernel_rem_pio2` does),
//!     under a branch so the common case does not pay for it. Both give the reduced argument
//!     as a double-double accurate to about 2^-120 absolute, so every finite argument is
//!     reduced right (inf and NaN give NaN). Taylor polynomials on |r| ≤ π/4.
//!   - `tanh`: `expm1(2|x|) / (expm1(2|x|) + 2)` with the quotient corrected by its exact
//!     residual; |x| < 2^-28 gives x, |x| > 22 gives ±1.
//!   - `sqrt`: `GLSL Sqrt`, corrected by a Newton step on the exact residual `x - s²` where
//!     it is more than 3/4 ulp off (lavapipe's and NVIDIA's are IEEE and stay untouched);
//!     `rsqrt` is `1 / sqrt` with the quotient corrected through its residual, matching the
//!     interpreter's two roundings.
//!
//!   Special values follow C (the interpreter's Rust `f64` methods): NaN in, NaN out (but
//!   `pow(x, ±0) = pow(1, y) = 1`), `exp(-inf) = 0`, `log(±0) = -inf`, `log(x < 0) = NaN`,
//!   `sin(±inf) = NaN`, `tanh(±inf) = ±1`, signed zeros kept, overflow to ±inf and gradual
//!   underflow. Measured against the interpreter (glibc) on lavapipe: see
//!   docs/vulkan-backend.md.
//! - **`f32`** `exp exp2 log log2 pow tanh sin cos` computed in plain `f64` (the f32 result
//!   needs no double-double) and rounded once, where the device has `shaderFloat64`.

use super::{glsl, Em, TyKey, R};
use crate::devices::mathconst::{
    cos_taylor, expm1_taylor, sin_taylor, INV_LN2_HI, INV_LN2_LO, LN2_A, LN2_B, LN2_C, LN2_HI,
    LN2_LO, PIO2_1, PIO2_2, PIO2_3, SIN_CW_LIMIT, TABLE_PAD, TWO_OVER_PI, TWO_THIRDS_HI,
    TWO_THIRDS_LO,
};
use crate::ir::{MathFn, Scalar};
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Capability, Op, StorageClass, Word};

/// Veltkamp's splitter for doubles: 2^27 + 1.
const SPLITTER: f64 = 134_217_729.0;

/// Scalar `f64` arithmetic for one lane: the types it needs and short names for the
/// instructions, every float result `NoContraction`.
struct F<'e, 'a> {
    em: &'e mut Em<'a>,
    d: Word,
    i: Word,
    b: Word,
}

impl<'e, 'a> F<'e, 'a> {
    fn new(em: &'e mut Em<'a>) -> R<Self> {
        em.cap(Capability::Float64);
        let d = em.scalar_ty(Scalar::F64)?;
        let i = em.scalar_ty_raw(Scalar::I32);
        let b = em.boolt();
        Ok(F { em, d, i, b })
    }

    fn c(&mut self, v: f64) -> Word {
        self.em.fconst(self.d, v)
    }
    fn ci(&mut self, v: i32) -> Word {
        self.em.konst(self.i, v as u32 as u64)
    }
    fn add(&mut self, a: Word, b: Word) -> Word {
        self.em.fop(Op::FAdd, self.d, &[a, b])
    }
    fn sub(&mut self, a: Word, b: Word) -> Word {
        self.em.fop(Op::FSub, self.d, &[a, b])
    }
    fn mul(&mut self, a: Word, b: Word) -> Word {
        self.em.fop(Op::FMul, self.d, &[a, b])
    }
    fn div(&mut self, a: Word, b: Word) -> Word {
        self.em.fop(Op::FDiv, self.d, &[a, b])
    }
    fn neg(&mut self, a: Word) -> Word {
        self.em.fop(Op::FNegate, self.d, &[a])
    }
    /// `a · k` for a constant `k` (never 0: lavapipe folds `x * 0.0` to `+0.0`).
    fn mulc(&mut self, a: Word, k: f64) -> Word {
        let k = self.c(k);
        self.mul(a, k)
    }
    fn g(&mut self, inst: u32, args: &[Word]) -> Word {
        self.em.ext_inst(self.d, inst, args)
    }
    fn abs(&mut self, a: Word) -> Word {
        self.g(glsl::FABS, &[a])
    }
    fn floor(&mut self, a: Word) -> Word {
        self.g(glsl::FLOOR, &[a])
    }
    fn sel(&mut self, c: Word, a: Word, b: Word) -> Word {
        self.em.opi(Op::Select, self.d, &[c, a, b])
    }
    fn seli(&mut self, c: Word, a: Word, b: Word) -> Word {
        self.em.opi(Op::Select, self.i, &[c, a, b])
    }
    fn cmp(&mut self, op: Op, a: Word, b: Word) -> Word {
        self.em.opi(op, self.b, &[a, b])
    }
    fn lt(&mut self, a: Word, b: Word) -> Word {
        self.cmp(Op::FOrdLessThan, a, b)
    }
    /// `a < k` for a constant `k` (false for NaN).
    fn ltc(&mut self, a: Word, k: f64) -> Word {
        let k = self.c(k);
        self.lt(a, k)
    }
    fn gtc(&mut self, a: Word, k: f64) -> Word {
        let k = self.c(k);
        self.cmp(Op::FOrdGreaterThan, a, k)
    }
    fn and(&mut self, a: Word, b: Word) -> Word {
        self.em.opi(Op::LogicalAnd, self.b, &[a, b])
    }
    fn or(&mut self, a: Word, b: Word) -> Word {
        self.em.opi(Op::LogicalOr, self.b, &[a, b])
    }
    fn is_nan(&mut self, a: Word) -> Word {
        self.em.opi(Op::IsNan, self.b, &[a])
    }
    /// `|a| < inf`: false for infinities and NaN.
    fn finite(&mut self, a: Word) -> Word {
        let aa = self.abs(a);
        self.ltc(aa, f64::INFINITY)
    }
    /// `min(max(a, lo), hi)`; a NaN `a` gives `lo` (the caller selects NaN lanes away).
    fn clamp(&mut self, a: Word, lo: f64, hi: f64) -> Word {
        let (l, h) = (self.c(lo), self.c(hi));
        let a = self.g(glsl::NMAX, &[a, l]);
        self.g(glsl::NMIN, &[a, h])
    }
    fn f_to_i(&mut self, a: Word) -> Word {
        self.em.opi(Op::ConvertFToS, self.i, &[a])
    }
    fn i_to_f(&mut self, a: Word) -> Word {
        self.em.opi(Op::ConvertSToF, self.d, &[a])
    }
    /// `2^k` for an `i32` `k` in the normal range (exact).
    fn pow2(&mut self, k: Word) -> Word {
        let one = self.c(1.0);
        self.g(glsl::LDEXP, &[one, k])
    }
    /// `p · 2^k` for an integral `f64` `k` with |k| ≤ 2044, as two exact power-of-two
    /// factors, so a result in the subnormal range is rounded once, by the second product.
    fn scale(&mut self, p: Word, k: Word) -> Word {
        let ki = self.f_to_i(k);
        let one = self.ci(1);
        let h = self.em.opi(Op::ShiftRightArithmetic, self.i, &[ki, one]);
        let j = self.em.opi(Op::ISub, self.i, &[ki, h]);
        let (ph, pj) = (self.pow2(h), self.pow2(j));
        let p = self.mul(p, ph);
        self.mul(p, pj)
    }
    /// `c[0] + x·(c[1] + x·(c[2] + …))`.
    fn horner(&mut self, x: Word, c: &[f64]) -> Word {
        self.em.horner(self.d, x, c)
    }

    /// Knuth's two-sum: `s + e == a + b` exactly, `s = fl(a + b)`.
    fn two_sum(&mut self, a: Word, b: Word) -> (Word, Word) {
        let s = self.add(a, b);
        let bb = self.sub(s, a);
        let sb = self.sub(s, bb);
        let da = self.sub(a, sb);
        let db = self.sub(b, bb);
        (s, self.add(da, db))
    }
    /// Dekker's fast two-sum, for |a| ≥ |b| (or a = 0).
    fn fast_two_sum(&mut self, a: Word, b: Word) -> (Word, Word) {
        let s = self.add(a, b);
        let t = self.sub(s, a);
        (s, self.sub(b, t))
    }
    /// Veltkamp's split of `a` (|a| < 2^996) into two halves of at most 26 bits.
    fn split(&mut self, a: Word) -> (Word, Word) {
        let c = self.mulc(a, SPLITTER);
        let t = self.sub(c, a);
        let hi = self.sub(c, t);
        (hi, self.sub(a, hi))
    }
    /// Dekker's exact product: `p + e == a·b` (no overflow, `a·b` not near underflow).
    fn two_prod(&mut self, a: Word, b: Word) -> (Word, Word) {
        let p = self.mul(a, b);
        let (ah, al) = self.split(a);
        let (bh, bl) = self.split(b);
        let hh = self.mul(ah, bh);
        let hl = self.mul(ah, bl);
        let lh = self.mul(al, bh);
        let ll = self.mul(al, bl);
        let e = self.sub(hh, p);
        let e = self.add(e, hl);
        let e = self.add(e, lh);
        (p, self.add(e, ll))
    }
    /// `a / b` with the quotient's error removed through its exact residual: within a hair
    /// of correct rounding whatever the device's `FDiv` (Vulkan allows 2.5 ulps).
    fn div_corrected(&mut self, a: Word, b: Word) -> Word {
        let q = self.div(a, b);
        let (p, pe) = self.two_prod(q, b);
        let r = self.sub(a, p);
        let r = self.sub(r, pe);
        let c = self.div(r, b);
        self.add(q, c)
    }

    // ---- exp ----

    /// `(k, r, rl)` with `hi + lo = k·ln2 + r + rl`, |r| ≤ ln2/2 + ε, for |hi| ≤ 800.
    fn exp_reduce(&mut self, hi: Word, lo: Option<Word>) -> (Word, Word, Word) {
        let q = self.mulc(hi, std::f64::consts::LOG2_E);
        let k = self.g(glsl::ROUND_EVEN, &[q]);
        // k·LN2_A is exact and cancels exactly against hi (Sterbenz).
        let ka = self.mulc(k, LN2_A);
        let a = self.sub(hi, ka);
        let kb = self.mulc(k, LN2_B);
        let nkb = self.neg(kb);
        let (r, rl) = self.two_sum(a, nkb);
        let rl = match lo {
            Some(lo) => self.add(rl, lo),
            None => rl,
        };
        (k, r, rl)
    }

    /// `e^(r + rl) - 1` as a double-double `(s, sl)` for |r| ≤ ln2/2 + ε, |rl| ≪ ulp(r):
    /// `r + r²·P(r)` (Taylor to degree 13, truncation below 2^-57 relative) with the sum's
    /// rounding error kept and `rl` added to first order.
    fn expm1_core(&mut self, r: Word, rl: Word) -> (Word, Word) {
        let c = expm1_taylor();
        let p = self.horner(r, &c);
        let rr = self.mul(r, r);
        let q = self.mul(rr, p);
        let (s, se) = self.two_sum(r, q);
        // e^(r+rl) - 1 = s + rl·(1 + s)
        let srl = self.mul(s, rl);
        let t = self.add(rl, srl);
        (s, self.add(se, t))
    }

    /// `2^k · (1 + s + sl)`, rounded once (but for a subnormal result, by the scaling).
    fn exp_finish(&mut self, k: Word, s: Word, sl: Word) -> Word {
        let one = self.c(1.0);
        let (e, ee) = self.fast_two_sum(one, s);
        let t = self.add(ee, sl);
        let e = self.add(e, t);
        self.scale(e, k)
    }

    /// `e^(hi + lo)` for |hi| ≤ 800 (beyond ±745 the result is 0 or inf).
    fn exp_dd(&mut self, hi: Word, lo: Option<Word>) -> Word {
        let (k, r, rl) = self.exp_reduce(hi, lo);
        let (s, sl) = self.expm1_core(r, rl);
        self.exp_finish(k, s, sl)
    }

    fn exp(&mut self, x: Word) -> Word {
        let xc = self.clamp(x, -800.0, 800.0);
        let r = self.exp_dd(xc, None);
        let nan = self.is_nan(x);
        self.sel(nan, x, r)
    }

    fn exp2(&mut self, x: Word) -> Word {
        let xc = self.clamp(x, -1100.0, 1100.0);
        let k = self.g(glsl::ROUND_EVEN, &[xc]);
        // f exact; r + rl = f·ln2 to 2^-106 (ln2 as a double-double): exact powers stay exact.
        let f = self.sub(xc, k);
        let ln2 = self.c(LN2_HI);
        let (r, rl) = self.two_prod(f, ln2);
        let fl = self.mulc(f, LN2_LO);
        let rl = self.add(rl, fl);
        let (s, sl) = self.expm1_core(r, rl);
        let res = self.exp_finish(k, s, sl);
        let nan = self.is_nan(x);
        self.sel(nan, x, res)
    }

    // ---- log ----

    /// `log x` as a double-double `(hi, lo)`, about 2^-100 relative, for finite x > 0
    /// (subnormals included).
    fn log_dd(&mut self, x: Word) -> (Word, Word) {
        let tiny = self.ltc(x, f64::MIN_POSITIVE);
        let xs = self.mulc(x, 2f64.powi(54));
        let xs = self.sel(tiny, xs, x);
        // x = m·2^e, m in [√½, √2).
        let (m, e) = self.em.frexp(self.d, self.i, xs);
        let small = self.ltc(m, std::f64::consts::FRAC_1_SQRT_2);
        let m2 = self.mulc(m, 2.0);
        let m = self.sel(small, m2, m);
        let (one_i, adj, zero_i) = (self.ci(1), self.ci(54), self.ci(0));
        let dec = self.seli(small, one_i, zero_i);
        let e = self.em.opi(Op::ISub, self.i, &[e, dec]);
        let adj = self.seli(tiny, adj, zero_i);
        let e = self.em.opi(Op::ISub, self.i, &[e, adj]);
        let ef = self.i_to_f(e);
        // s = f/(2 + f) as a double-double: f and 2 + f exact (two parts), s_lo from the
        // quotient's exact residual.
        let one = self.c(1.0);
        let f = self.sub(m, one);
        let two = self.c(2.0);
        let (u, ul) = self.fast_two_sum(two, f);
        let s = self.div(f, u);
        let (p, pe) = self.two_prod(s, u);
        let res = self.sub(f, p);
        let res = self.sub(res, pe);
        let sul = self.mul(s, ul);
        let res = self.sub(res, sul);
        let sl = self.div(res, u);
        // log m = 2s + 2s³/3 + s⁵·Q(s²), Q = Σ 2 z^j/(2j+5): the cubic term in
        // double-double (it is 2^-6.7 of the total), the rest in doubles.
        let (z, zl) = self.two_prod(s, s);
        let s2 = self.add(s, s);
        let t = self.mul(s2, sl);
        let zl = self.add(zl, t);
        let (c3, c3l) = self.two_prod(z, s);
        let t1 = self.mul(zl, s);
        let t2 = self.mul(z, sl);
        let t = self.add(t1, t2);
        let c3l = self.add(c3l, t);
        let tt = self.c(TWO_THIRDS_HI);
        let (d, dl) = self.two_prod(c3, tt);
        let t1 = self.mulc(c3, TWO_THIRDS_LO);
        let t2 = self.mulc(c3l, TWO_THIRDS_HI);
        let t = self.add(t1, t2);
        let dl = self.add(dl, t);
        let qc: Vec<f64> = (2..=12).map(|j| 2.0 / (2 * j + 1) as f64).collect();
        let q = self.horner(z, &qc);
        let s5 = self.mul(c3, z);
        let t5 = self.mul(s5, q);
        let sl2 = self.add(sl, sl);
        let (h, l) = self.two_sum(s2, d);
        let t = self.add(sl2, dl);
        let t = self.add(t, t5);
        let l = self.add(l, t);
        // + e·ln2: e·LN2_A exact, e·LN2_B as an exact product, e·LN2_C rounded.
        let ea = self.mulc(ef, LN2_A);
        let lb = self.c(LN2_B);
        let (eb, ebl) = self.two_prod(ef, lb);
        let ec = self.mulc(ef, LN2_C);
        let (hh, err) = self.two_sum(ea, h);
        let t = self.add(ebl, ec);
        let t = self.add(t, eb);
        let t = self.add(l, t);
        let lo = self.add(err, t);
        self.fast_two_sum(hh, lo)
    }

    /// `ok` (0 < x < inf) and the value `log` takes elsewhere: -inf at ±0, +inf at +inf,
    /// NaN below 0 and for NaN.
    fn log_edges(&mut self, x: Word) -> (Word, Word) {
        let zero = self.c(0.0);
        let pos = self.cmp(Op::FOrdGreaterThan, x, zero);
        let fin = self.ltc(x, f64::INFINITY);
        let ok = self.and(pos, fin);
        let z = self.cmp(Op::FOrdEqual, x, zero);
        let inf = self.c(f64::INFINITY);
        let pinf = self.cmp(Op::FOrdEqual, x, inf);
        let nan = self.c(f64::NAN);
        let ninf = self.c(f64::NEG_INFINITY);
        let s = self.sel(pinf, inf, nan);
        let s = self.sel(z, ninf, s);
        (ok, s)
    }

    fn log(&mut self, x: Word, base2: bool) -> Word {
        let (ok, special) = self.log_edges(x);
        let one = self.c(1.0);
        let xs = self.sel(ok, x, one);
        let (h, l) = self.log_dd(xs);
        let r = if base2 {
            let il = self.c(INV_LN2_HI);
            let (p, pl) = self.two_prod(h, il);
            let t1 = self.mulc(h, INV_LN2_LO);
            let t2 = self.mulc(l, INV_LN2_HI);
            let t = self.add(t1, t2);
            let pl = self.add(pl, t);
            self.add(p, pl)
        } else {
            h
        };
        self.sel(ok, r, special)
    }

    // ---- pow ----

    /// `exp(y·log|x|)` with the logarithm and the product in double-double, then C's special
    /// cases (shared with the f32 path: [`Em::pow_edges`]).
    fn pow(&mut self, x: Word, y: Word) -> Word {
        let (ok, flip, special) = self.em.pow_edges(self.d, self.b, x, y);
        let ax = self.abs(x);
        let one = self.c(1.0);
        let axs = self.sel(ok, ax, one);
        let ys = self.sel(ok, y, one);
        let (lh, ll) = self.log_dd(axs);
        let (ph, pe) = self.two_prod(ys, lh);
        let yl = self.mul(ys, ll);
        let pl = self.add(pe, yl);
        // Beyond ±750 the result is 0 or inf and the low part may be inf - inf (the split
        // of a y beyond 2^996): drop it.
        let aph = self.abs(ph);
        let moderate = self.ltc(aph, 750.0);
        let lo_fin = self.finite(pl);
        let moderate = self.and(moderate, lo_fin);
        let zero = self.c(0.0);
        let pl = self.sel(moderate, pl, zero);
        let phc = self.clamp(ph, -800.0, 800.0);
        let (ph, pl) = self.fast_two_sum(phc, pl);
        let m = self.exp_dd(ph, Some(pl));
        let nm = self.neg(m);
        let r = self.sel(flip, nm, m);
        self.sel(ok, r, special)
    }

    // ---- sin, cos ----

    /// Cody–Waite reduction of `a` = |x| < 2^27: `(r, rl, k)` with `a = k·π/2 + r + rl`
    /// (error below 2^-130).
    fn reduce_cw(&mut self, a: Word) -> (Word, Word, Word) {
        let q = self.mulc(a, std::f64::consts::FRAC_2_PI);
        let k = self.g(glsl::ROUND_EVEN, &[q]);
        let c1 = self.c(PIO2_1);
        let (p1, e1) = self.two_prod(k, c1);
        let t = self.sub(a, p1); // exact (Sterbenz)
        let c2 = self.c(PIO2_2);
        let (p2, e2) = self.two_prod(k, c2);
        let p3 = self.mulc(k, PIO2_3);
        let np2 = self.neg(p2);
        let (h, l) = self.two_sum(t, np2);
        let ne1 = self.neg(e1);
        let (h, l2) = self.two_sum(h, ne1);
        let t = self.add(e2, p3);
        let l = self.add(l, l2);
        let l = self.sub(l, t);
        let (r, rl) = self.fast_two_sum(h, l);
        (r, rl, k)
    }

    /// The shader's table of 2/π pieces (a `Private` array of f64, made once per module).
    fn two_over_pi_table(&mut self) -> (Word, Word) {
        let n = TWO_OVER_PI.len() + TABLE_PAD;
        let u = self.em.u32t();
        let len = self.em.konst(u, n as u64);
        let at = self.em.tk(TyKey::Array(self.d, len));
        let pt = self.em.tk(TyKey::Ptr(StorageClass::Private, self.d));
        if let Some(v) = self.em.pio2_table {
            return (v, pt);
        }
        let parts: Vec<Word> = std::iter::repeat_n(0u32, TABLE_PAD)
            .chain(TWO_OVER_PI)
            .map(|p| self.em.fconst(self.d, f64::from(p)))
            .collect();
        let init = self.em.b.constant_composite(at, parts);
        let vp = self.em.tk(TyKey::Ptr(StorageClass::Private, at));
        let v = self.em.b.id();
        self.em
            .b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::Variable,
                Some(vp),
                Some(v),
                vec![
                    Operand::StorageClass(StorageClass::Private),
                    Operand::IdRef(init),
                ],
            ));
        self.em.pio2_table = Some(v);
        (v, pt)
    }

    /// Payne–Hanek reduction of a finite `a` = |x| ≥ 2^27: `(r, rl, q)` with
    /// `a = (4n + q)·π/2 + r + rl`, |r| ≤ π/4, to about 2^-120 absolute.
    ///
    /// `a = X0·2^(E-24) + X1·2^(E-48) + X2·2^(E-72)` (24-bit integer pieces) times
    /// `2/π = Σ P_j·2^(-24(j+1))`: the products are grouped into digits
    /// `D_n = Σ_i X_i·P_(n-i)` (exact, below 2^50) of weight `2^(E - 24(n+2))`. Digits of
    /// weight 4 or more are multiples of 4 and skipped; the window starts at the digit of
    /// weight 2^t, t ∈ [-23, 0] (with the one above it, which can add 2), and runs 8 digits
    /// on (the last of weight below 2^-140). Carries make digits 1..8 proper 24-bit
    /// digits, so the fraction is read off them exactly (fdlibm's `__kernel_rem_pio2`).
    fn reduce_ph(&mut self, a: Word) -> (Word, Word, Word) {
        // a = m·2^E, m in [0.5, 1); ns = ceil(E/24) - 2, t = E - 24·(ns + 2).
        let (m, e) = self.em.frexp(self.d, self.i, a);
        let (c23, c24, c2) = (self.ci(23), self.ci(24), self.ci(2));
        let ns = self.em.opi(Op::IAdd, self.i, &[e, c23]);
        let ns = self.em.opi(Op::SDiv, self.i, &[ns, c24]);
        let ns = self.em.opi(Op::ISub, self.i, &[ns, c2]);
        let ns2 = self.em.opi(Op::IAdd, self.i, &[ns, c2]);
        let w = self.em.opi(Op::IMul, self.i, &[ns2, c24]);
        let t = self.em.opi(Op::ISub, self.i, &[e, w]);
        let wt = self.pow2(t);
        // The pieces of a's significand.
        let m24 = self.mulc(m, 16_777_216.0);
        let x0 = self.floor(m24);
        let r1 = self.sub(m24, x0);
        let r1 = self.mulc(r1, 16_777_216.0);
        let x1 = self.floor(r1);
        let r2 = self.sub(r1, x1);
        let x2 = self.mulc(r2, 16_777_216.0);
        // Table pieces P_(ns-3+k) for k = 0..11 (index ns + k with the padding).
        let (table, pt) = self.two_over_pi_table();
        let mut pk = Vec::with_capacity(12);
        for k in 0..12 {
            let ck = self.ci(k);
            let idx = self.em.opi(Op::IAdd, self.i, &[ns, ck]);
            let ptr = self.em.opi(Op::AccessChain, pt, &[table, idx]);
            pk.push(self.em.load(self.d, ptr));
        }
        // D for digit n = ns + j, j = -1..8: X0·P_n + X1·P_(n-1) + X2·P_(n-2).
        let mut dg = Vec::with_capacity(10);
        for j in 0..10usize {
            // P_(ns + j - 1) is pk[j + 2].
            let a0 = self.mul(x0, pk[j + 2]);
            let a1 = self.mul(x1, pk[j + 1]);
            let a2 = self.mul(x2, pk[j]);
            let s = self.add(a0, a1);
            dg.push(self.add(s, a2));
        }
        // Carries from digit 8 up to digit 1 (dg[9] .. dg[2]); digit 0 (dg[1]) keeps its carry.
        let mut digits = [0; 10];
        let mut carry: Option<Word> = None;
        for j in (2..10).rev() {
            let v = match carry {
                Some(c) => self.add(dg[j], c),
                None => dg[j],
            };
            let cv = self.mulc(v, 2f64.powi(-24));
            let cf = self.floor(cv);
            let back = self.mulc(cf, 16_777_216.0);
            digits[j] = self.sub(v, back);
            carry = Some(cf);
        }
        let d0 = self.add(dg[1], carry.expect("eight digits"));
        // Integer part mod 4 and the top digit's fraction.
        let v0 = self.mul(d0, wt);
        let i0 = self.floor(v0);
        let f0 = self.sub(v0, i0);
        let wm1 = self.mulc(wt, 16_777_216.0);
        let vm1 = self.mul(dg[0], wm1);
        let mod4 = |f: &mut Self, v: Word| {
            let q = f.mulc(v, 0.25);
            let q = f.floor(q);
            let q4 = f.mulc(q, 4.0);
            f.sub(v, q4)
        };
        let im1 = mod4(self, vm1);
        let i = self.add(i0, im1);
        let q = mod4(self, i);
        // G = f0 + digit 1 is exact (at most 47 bits) and decides whether the fraction is
        // at least 1/2; then the fraction becomes F - 1 and the quadrant moves up one.
        let w1 = self.mulc(wt, 2f64.powi(-24));
        let t1 = self.mul(digits[2], w1);
        let g = self.add(f0, t1);
        let h = self.c(0.5);
        let up = self.cmp(Op::FOrdGreaterThanEqual, g, h);
        let one = self.c(1.0);
        let gm = self.sub(g, one);
        let g = self.sel(up, gm, g);
        let q1 = self.add(q, one);
        let q = self.sel(up, q1, q);
        // Digits 2..8: adjacent pairs add exactly (48 bits); the pairs do not overlap.
        let mut terms = Vec::with_capacity(7);
        let mut wk = w1;
        for &dj in &digits[3..10] {
            wk = self.mulc(wk, 2f64.powi(-24));
            terms.push(self.mul(dj, wk));
        }
        let pa = self.add(terms[0], terms[1]);
        let pb = self.add(terms[2], terms[3]);
        let pc = self.add(terms[4], terms[5]);
        let (rh, rl) = self.fast_two_sum(pa, pb);
        let tail = self.add(pc, terms[6]);
        let rl = self.add(rl, tail);
        let (fh, fl) = self.two_sum(g, rh);
        let fl = self.add(fl, rl);
        let (fh, fl) = self.fast_two_sum(fh, fl);
        // r = F·π/2.
        let c1 = self.c(PIO2_1);
        let (r, re) = self.two_prod(fh, c1);
        let t1 = self.mulc(fh, PIO2_2);
        let t2 = self.mulc(fl, PIO2_1);
        let t = self.add(t1, t2);
        let re = self.add(re, t);
        let (r, rl) = self.fast_two_sum(r, re);
        (r, rl, q)
    }

    fn sin_cos(&mut self, x: Word, cos: bool) -> Word {
        let a = self.abs(x);
        let (r, rl, k) = self.reduce_cw(a);
        let (vr, vrl, vk) = (
            self.em.fn_var(self.d),
            self.em.fn_var(self.d),
            self.em.fn_var(self.d),
        );
        self.em.store(vr, r);
        self.em.store(vrl, rl);
        self.em.store(vk, k);
        let big = {
            let lim = self.c(SIN_CW_LIMIT);
            let b = self.cmp(Op::FOrdGreaterThanEqual, a, lim);
            let fin = self.ltc(a, f64::INFINITY);
            self.and(b, fin)
        };
        let (d, i, bt) = (self.d, self.i, self.b);
        self.em
            .guarded(big, |em| {
                let mut f = F { em, d, i, b: bt };
                let (r, rl, q) = f.reduce_ph(a);
                f.em.store(vr, r);
                f.em.store(vrl, rl);
                f.em.store(vk, q);
                Ok(())
            })
            .expect("the reduction emits no refusable construct");
        let r = self.em.load(self.d, vr);
        let rl = self.em.load(self.d, vrl);
        let k = self.em.load(self.d, vk);
        // The quadrant k mod 4 (exact in floats for any integral k).
        let k4 = self.mulc(k, 0.25);
        let k4 = self.floor(k4);
        let k4 = self.mulc(k4, 4.0);
        let kq = self.sub(k, k4);
        let kq = self.f_to_i(kq);
        // sin r = r + r·z·Ps(z) + rl·(1 - z/2); cos r = 1 - z/2 + z²·Pc(z) - r·rl, with
        // z = r² exact in two parts and 1 - z/2 carried with its rounding error (fdlibm).
        let (z, zl) = self.two_prod(r, r);
        let (cs, cc) = (sin_taylor(), cos_taylor());
        let ps = self.horner(z, &cs);
        let rz = self.mul(r, z);
        let t = self.mul(rz, ps);
        let hz = self.mulc(z, 0.5);
        let one = self.c(1.0);
        let c1 = self.sub(one, hz);
        let corr = self.mul(rl, c1);
        let t = self.add(t, corr);
        let sin_r = self.add(r, t);
        let pc = self.horner(z, &cc);
        let zz = self.mul(z, z);
        let tc = self.mul(zz, pc);
        let hzl = self.mulc(zl, 0.5);
        let rrl = self.mul(r, rl);
        let u = self.add(hzl, rrl);
        let tc = self.sub(tc, u);
        let w = c1;
        let ow = self.sub(one, w);
        let err = self.sub(ow, hz);
        let tc = self.add(err, tc);
        let cos_r = self.add(w, tc);
        // Quadrant (cos = sin shifted by one): 0 sin, 1 cos, 2 -sin, 3 -cos.
        let n = if cos {
            let one_i = self.ci(1);
            self.em.opi(Op::IAdd, self.i, &[kq, one_i])
        } else {
            kq
        };
        let (one_i, two_i, zero_i) = (self.ci(1), self.ci(2), self.ci(0));
        let ob = self.em.opi(Op::BitwiseAnd, self.i, &[n, one_i]);
        let odd = self.em.opi(Op::INotEqual, self.b, &[ob, zero_i]);
        let nb = self.em.opi(Op::BitwiseAnd, self.i, &[n, two_i]);
        let negq = self.em.opi(Op::INotEqual, self.b, &[nb, zero_i]);
        let v = self.sel(odd, cos_r, sin_r);
        let nv = self.neg(v);
        let v = self.sel(negq, nv, v);
        let v = if cos {
            v
        } else {
            // sin is odd; below 2^-26 it is x itself (keeps -0 and subnormals).
            let zero = self.c(0.0);
            let xneg = self.lt(x, zero);
            let nv = self.neg(v);
            let v = self.sel(xneg, nv, v);
            let tiny = self.ltc(a, 2f64.powi(-26));
            self.sel(tiny, x, v)
        };
        let fin = self.finite(x);
        let nan = self.c(f64::NAN);
        self.sel(fin, v, nan)
    }

    // ---- tanh ----

    fn tanh(&mut self, x: Word) -> Word {
        let a = self.abs(x);
        let c22 = self.c(22.0);
        let ac = self.g(glsl::NMIN, &[a, c22]);
        let y = self.add(ac, ac);
        // expm1(y) = 2^k·u + (2^k - 1), u = e^(r + rl) - 1, all in double-double: the sum
        // cancels (y = 0.36 gives k = 1, u = -0.29).
        let (k, r, rl) = self.exp_reduce(y, None);
        let (u, ul) = self.expm1_core(r, rl);
        let ki = self.f_to_i(k);
        let pk = self.pow2(ki);
        let one = self.c(1.0);
        let pu = self.mul(pk, u);
        let pm1 = self.sub(pk, one);
        let (em1, e1) = self.two_sum(pu, pm1);
        let pul = self.mul(pk, ul);
        let e1 = self.add(e1, pul);
        let (em1, e1) = self.fast_two_sum(em1, e1);
        // tanh = em1 / (em1 + 2): the denominator as a double-double, the quotient corrected
        // by its exact residual.
        let two = self.c(2.0);
        let (dh, dl) = self.two_sum(em1, two);
        let dl = self.add(dl, e1);
        let q = self.div(em1, dh);
        let (p, pe) = self.two_prod(q, dh);
        let res = self.sub(em1, p);
        let res = self.sub(res, pe);
        let res = self.add(res, e1);
        let qdl = self.mul(q, dl);
        let res = self.sub(res, qdl);
        let c = self.div(res, dh);
        let t = self.add(q, c);
        let sat = self.gtc(a, 22.0);
        let t = self.sel(sat, one, t);
        let zero = self.c(0.0);
        let xneg = self.lt(x, zero);
        let nt = self.neg(t);
        let t = self.sel(xneg, nt, t);
        // Below 2^-28 tanh x rounds to x (keeps -0 and subnormals); NaN passes through.
        let tiny = self.ltc(a, 2f64.powi(-28));
        let nan = self.is_nan(x);
        let keep = self.or(tiny, nan);
        self.sel(keep, x, t)
    }

    // ---- sqrt, rsqrt ----

    /// `sqrt x`: `GLSL Sqrt`, checked by one Newton step `s + (x - s²)/(2s)` on the exact
    /// residual (the argument scaled by 2^∓200 at the ends of the range so that `s²` neither
    /// overflows nor underflows), taken where the root was more than 3/4 ulp off: a device's
    /// correctly rounded root is kept, a loose one (Vulkan sets no bound) corrected to within
    /// 3/4 ulp. Returns the result and whether the lane took this path (0 < x < inf).
    fn sqrt(&mut self, x: Word) -> (Word, Word) {
        let s0 = self.g(glsl::SQRT, &[x]);
        let zero = self.c(0.0);
        let pos = self.cmp(Op::FOrdGreaterThan, x, zero);
        let fin = self.ltc(x, f64::INFINITY);
        let ok = self.and(pos, fin);
        let big = self.gtc(x, 2f64.powi(1000));
        let tiny = self.ltc(x, 2f64.powi(-900));
        let one = self.c(1.0);
        let (up, down) = (self.c(2f64.powi(200)), self.c(2f64.powi(-200)));
        let sx = self.sel(tiny, up, one);
        let sx = self.sel(big, down, sx);
        let (up, down) = (self.c(2f64.powi(100)), self.c(2f64.powi(-100)));
        let sr = self.sel(tiny, down, one);
        let sr = self.sel(big, up, sr);
        let xs = self.mul(x, sx);
        let xs = self.sel(ok, xs, one);
        let s = self.g(glsl::SQRT, &[xs]);
        let (p, pe) = self.two_prod(s, s);
        let res = self.sub(xs, p);
        let res = self.sub(res, pe);
        let s2 = self.add(s, s);
        let c = self.div(res, s2);
        // Only a root clearly off (by over 3/4 ulp) is moved: a correctly rounded one (lavapipe
        // and NVIDIA give IEEE `Sqrt`) must not flip in a near-halfway case.
        let ac = self.abs(c);
        let thr = self.mulc(s, 0.75 * f64::EPSILON);
        let off = self.cmp(Op::FOrdGreaterThan, ac, thr);
        let sc = self.add(s, c);
        let s = self.sel(off, sc, s);
        let s = self.mul(s, sr);
        (self.sel(ok, s, s0), ok)
    }

    fn rsqrt(&mut self, x: Word) -> Word {
        let (s, ok) = self.sqrt(x);
        let one = self.c(1.0);
        let plain = self.div(one, s);
        let ss = self.sel(ok, s, one);
        let q = self.div_corrected(one, ss);
        self.sel(ok, q, plain)
    }
}

impl Em<'_> {
    /// An `f64` `sqrt rsqrt exp exp2 log log2 sin cos tanh pow` on values of `lanes` lanes
    /// (1–4), computed lane by lane (the `sin`/`cos` reduction branches per lane).
    pub(super) fn math_f64(&mut self, fun: MathFn, vs: &[Word], lanes: u8) -> R<Word> {
        let vt = self.vec_ty(Scalar::F64, lanes)?;
        let d = self.scalar_ty(Scalar::F64)?;
        let mut parts = Vec::with_capacity(lanes as usize);
        for k in 0..lanes {
            let args: Vec<Word> = if lanes == 1 {
                vs.to_vec()
            } else {
                vs.iter()
                    .map(|&v| {
                        self.op(
                            Op::CompositeExtract,
                            d,
                            vec![Operand::IdRef(v), Operand::LiteralBit32(k as u32)],
                        )
                    })
                    .collect()
            };
            let mut f = F::new(self)?;
            let x = args[0];
            parts.push(match fun {
                MathFn::Sqrt => f.sqrt(x).0,
                MathFn::Rsqrt => f.rsqrt(x),
                MathFn::Exp => f.exp(x),
                MathFn::Exp2 => f.exp2(x),
                MathFn::Log => f.log(x, false),
                MathFn::Log2 => f.log(x, true),
                MathFn::Sin => f.sin_cos(x, false),
                MathFn::Cos => f.sin_cos(x, true),
                MathFn::Tanh => f.tanh(x),
                MathFn::Pow => f.pow(x, args[1]),
                _ => unreachable!("math_f64 is called for the functions above only"),
            });
        }
        Ok(if lanes == 1 {
            parts[0]
        } else {
            self.opi(Op::CompositeConstruct, vt, &parts)
        })
    }

    /// C `pow`'s domain and special cases, lane-generic on `f64` values of type `dt`
    /// (booleans `bty`): `(ok, flip, special)` where `ok` marks the main domain (0 < |x| <
    /// inf, y finite, and x > 0 or y an integer: there the result is `|x|^y`, negated where
    /// `flip`, x < 0 with an odd y) and `special` is the result everywhere else, built
    /// exactly: `pow(x, ±0) = pow(1, y) = 1` even for NaN, zeros and infinities by the
    /// exponent's sign and oddness, `pow(x, ±inf)` by |x| against 1, NaN otherwise (`ok` is
    /// false where the result is exactly 1). GLSL
    /// leaves `pow` of x < 0 (or 0 with y ≤ 0) undefined: lavapipe gave pow(-8.375, -2^63) = 0.
    fn pow_edges(&mut self, dt: Word, bty: Word, x: Word, y: Word) -> (Word, Word, Word) {
        let zero = self.fconst(dt, 0.0);
        let inf = self.fconst(dt, f64::INFINITY);
        let nan = self.fconst(dt, f64::NAN);
        let ninf = self.fconst(dt, f64::NEG_INFINITY);
        let one = self.fconst(dt, 1.0);
        let pos = self.opi(Op::FOrdGreaterThan, bty, &[x, zero]);
        let ax = self.ext_inst(dt, glsl::FABS, &[x]);
        let ay = self.ext_inst(dt, glsl::FABS, &[y]);
        let yfin = self.opi(Op::FOrdLessThan, bty, &[ay, inf]);
        let yt = self.ext_inst(dt, glsl::TRUNC, &[y]);
        let yint = self.opi(Op::FOrdEqual, bty, &[yt, y]);
        let half = self.fconst(dt, 0.5);
        let hy = self.fop(Op::FMul, dt, &[y, half]);
        let hyt = self.ext_inst(dt, glsl::TRUNC, &[hy]);
        let even = self.opi(Op::FOrdEqual, bty, &[hyt, hy]);
        let not_even = self.opi(Op::LogicalNot, bty, &[even]);
        let yodd = self.opi(Op::LogicalAnd, bty, &[yint, not_even]);
        let axpos = self.opi(Op::FOrdGreaterThan, bty, &[ax, zero]);
        let axfin = self.opi(Op::FOrdLessThan, bty, &[ax, inf]);
        let sign_ok = self.opi(Op::LogicalOr, bty, &[pos, yint]);
        let ok = self.opi(Op::LogicalAnd, bty, &[axpos, axfin]);
        let ok = self.opi(Op::LogicalAnd, bty, &[ok, yfin]);
        let ok = self.opi(Op::LogicalAnd, bty, &[ok, sign_ok]);
        let xneg = self.opi(Op::FOrdLessThan, bty, &[x, zero]);
        let flip = self.opi(Op::LogicalAnd, bty, &[xneg, yodd]);
        // C pow's special cases, later ones overriding earlier ones.
        let ypos = self.opi(Op::FOrdGreaterThan, bty, &[y, zero]);
        let yneg = self.opi(Op::FOrdLessThan, bty, &[y, zero]);
        // x = ±0: ±0 / +0 for y > 0, ±inf / +inf for y < 0 (odd / other y).
        let xz = self.opi(Op::FOrdEqual, bty, &[x, zero]);
        let sx = self.opi(Op::Select, dt, &[yodd, x, zero]);
        let sinf = self.fop(Op::FDiv, dt, &[one, x]);
        let sinf = self.opi(Op::Select, dt, &[yodd, sinf, inf]);
        let zres = self.opi(Op::Select, dt, &[ypos, sx, sinf]);
        let yord = self.opi(Op::FOrdEqual, bty, &[y, y]);
        let xz = self.opi(Op::LogicalAnd, bty, &[xz, yord]);
        let s = self.opi(Op::Select, dt, &[xz, zres, nan]);
        // x = ±inf: pow(-0, -y) mirrored: y > 0 gives ±inf, y < 0 gives ±0.
        let xinf = self.opi(Op::FOrdEqual, bty, &[ax, inf]);
        let nz = self.fconst(dt, -0.0);
        let big = self.opi(Op::Select, dt, &[flip, ninf, inf]);
        let small = self.opi(Op::Select, dt, &[flip, nz, zero]);
        let ires = self.opi(Op::Select, dt, &[ypos, big, small]);
        let yne0 = self.opi(Op::LogicalOr, bty, &[ypos, yneg]);
        let xinf_y = self.opi(Op::LogicalAnd, bty, &[xinf, yne0]);
        let s = self.opi(Op::Select, dt, &[xinf_y, ires, s]);
        // y = ±inf with x not NaN: 1 for |x| = 1; else +inf or +0.
        let yinf = self.opi(Op::FOrdEqual, bty, &[ay, inf]);
        let xord = self.opi(Op::FOrdEqual, bty, &[x, x]);
        let yinf = self.opi(Op::LogicalAnd, bty, &[yinf, xord]);
        let lt1 = self.opi(Op::FOrdLessThan, bty, &[ax, one]);
        let shrinks = self.opi(Op::LogicalNotEqual, bty, &[lt1, yneg]);
        let yres = self.opi(Op::Select, dt, &[shrinks, zero, inf]);
        let a1 = self.opi(Op::FOrdEqual, bty, &[ax, one]);
        let yres = self.opi(Op::Select, dt, &[a1, one, yres]);
        let s = self.opi(Op::Select, dt, &[yinf, yres, s]);
        // y = ±0 or x = 1: 1, even with a NaN.
        let yz = self.opi(Op::FOrdEqual, bty, &[y, zero]);
        let x1 = self.opi(Op::FOrdEqual, bty, &[x, one]);
        let unit = self.opi(Op::LogicalOr, bty, &[yz, x1]);
        let s = self.opi(Op::Select, dt, &[unit, one, s]);
        let not_unit = self.opi(Op::LogicalNot, bty, &[unit]);
        let ok = self.opi(Op::LogicalAnd, bty, &[ok, not_unit]);
        (ok, flip, s)
    }
}

impl Em<'_> {
    /// `c[0] + x·(c[1] + x·(c[2] + …))`, unfused.
    fn horner(&mut self, dt: Word, x: Word, c: &[f64]) -> Word {
        let mut acc = self.fconst(dt, c[c.len() - 1]);
        for &k in c[..c.len() - 1].iter().rev() {
            let m = self.fop(Op::FMul, dt, &[acc, x]);
            let kk = self.fconst(dt, k);
            acc = self.fop(Op::FAdd, dt, &[m, kk]);
        }
        acc
    }

    /// `2^k · e^r` for `f64` `k` (an integer value) and `|r| ≤ ln2/2 + ε`: a degree-13 Taylor
    /// polynomial (truncation below 2^-60) and an exact scaling.
    fn exp_core(&mut self, dt: Word, it: Word, k: Word, r: Word) -> Word {
        let mut c = [1.0f64; 14];
        for i in 1..14 {
            c[i] = c[i - 1] / i as f64;
        }
        let p = self.horner(dt, r, &c);
        let ki = self.opi(Op::ConvertFToS, it, &[k]);
        self.ext_inst(dt, glsl::LDEXP, &[p, ki])
    }

    /// `e^t` in `f64` for the range an `f32` result needs (`t` clamped to ±200, so the
    /// scaling never overflows; NaN is the caller's).
    fn exp_f64(&mut self, dt: Word, it: Word, t: Word) -> Word {
        let (lo, hi) = (self.fconst(dt, -200.0), self.fconst(dt, 200.0));
        let t = self.ext_inst(dt, glsl::NMAX, &[t, lo]);
        let t = self.ext_inst(dt, glsl::NMIN, &[t, hi]);
        let inv_ln2 = self.fconst(dt, std::f64::consts::LOG2_E);
        let q = self.fop(Op::FMul, dt, &[t, inv_ln2]);
        let k = self.ext_inst(dt, glsl::ROUND_EVEN, &[q]);
        // Cody–Waite: ln2 in two parts (fdlibm's ln2_hi/ln2_lo bits), the first with 32
        // significant bits so k·hi is exact.
        let hi = self.konst(dt, 0x3FE6_2E42_FEE0_0000);
        let lo = self.konst(dt, 0x3DEA_39EF_3579_3C76);
        let kh = self.fop(Op::FMul, dt, &[k, hi]);
        let r = self.fop(Op::FSub, dt, &[t, kh]);
        let kl = self.fop(Op::FMul, dt, &[k, lo]);
        let r = self.fop(Op::FSub, dt, &[r, kl]);
        self.exp_core(dt, it, k, r)
    }

    /// `(e, ln m)` with `x = m · 2^e`, `m ∈ [√½, √2)`, for finite `x > 0`: `ln m` from the
    /// atanh series in `s = (m-1)/(m+1)` (|s| < 0.172, 12 terms, error below 2^-60).
    fn log_parts(&mut self, dt: Word, it: Word, x: Word, lanes: u8) -> (Word, Word) {
        let (m, e) = self.frexp(dt, it, x);
        let bt = self.boolt();
        let bty = if lanes > 1 {
            self.tk(TyKey::Vec(bt, lanes as u32))
        } else {
            bt
        };
        let half = self.fconst(dt, std::f64::consts::FRAC_1_SQRT_2);
        let small = self.opi(Op::FOrdLessThan, bty, &[m, half]);
        let two = self.fconst(dt, 2.0);
        let m2 = self.fop(Op::FMul, dt, &[m, two]);
        let m = self.opi(Op::Select, dt, &[small, m2, m]);
        let i32t = self.scalar_ty_raw(Scalar::I32);
        let one_i = self.konst(i32t, 1);
        let one_i = if lanes > 1 {
            self.opi(Op::CompositeConstruct, it, &vec![one_i; lanes as usize])
        } else {
            one_i
        };
        let e1 = self.opi(Op::ISub, it, &[e, one_i]);
        let e = self.opi(Op::Select, it, &[small, e1, e]);
        let ef = self.opi(Op::ConvertSToF, dt, &[e]);
        let one = self.fconst(dt, 1.0);
        let num = self.fop(Op::FSub, dt, &[m, one]);
        let den = self.fop(Op::FAdd, dt, &[m, one]);
        let sv = self.fop(Op::FDiv, dt, &[num, den]);
        let s2 = self.fop(Op::FMul, dt, &[sv, sv]);
        let c: Vec<f64> = (0..12).map(|j| 1.0 / (2 * j + 1) as f64).collect();
        let p = self.horner(dt, s2, &c);
        let sp = self.fop(Op::FMul, dt, &[sv, p]);
        let lnm = self.fop(Op::FAdd, dt, &[sp, sp]);
        (ef, lnm)
    }

    /// `ln x` in `f64` for finite `x > 0`.
    fn ln_f64(&mut self, dt: Word, it: Word, x: Word, lanes: u8) -> Word {
        let (e, lnm) = self.log_parts(dt, it, x, lanes);
        let hi = self.konst(dt, 0x3FE6_2E42_FEE0_0000);
        let lo = self.konst(dt, 0x3DEA_39EF_3579_3C76);
        let eh = self.fop(Op::FMul, dt, &[e, hi]);
        let el = self.fop(Op::FMul, dt, &[e, lo]);
        let t = self.fop(Op::FAdd, dt, &[el, lnm]);
        self.fop(Op::FAdd, dt, &[eh, t])
    }

    /// `f32` `exp exp2 log log2 pow tanh sin cos` computed in `f64` and rounded once, so they
    /// meet the native backends' bounds (GLSL.std.450's `f32` functions are allowed 3 + 2|x|
    /// ulps and worse, and are only `f32`). Inputs outside a function's main domain (`log` of
    /// x ≤ 0, `pow` of x ≤ 0, `sin`/`cos` beyond ±65536, infinities, NaN) take GLSL.std.450.
    pub(super) fn transcendental_f32(
        &mut self,
        fun: MathFn,
        vs: &[Word],
        t: Word,
        lanes: u8,
    ) -> R<Word> {
        self.cap(Capability::Float64);
        let dt = self.vec_ty(Scalar::F64, lanes)?;
        let it = self.vec_ty(Scalar::I32, lanes)?;
        let bt = self.boolt();
        let bty = if lanes > 1 {
            self.tk(TyKey::Vec(bt, lanes as u32))
        } else {
            bt
        };
        let x32 = vs[0];
        // Widened and narrowed through the bits where the device flushes f32 subnormals
        // (an `FConvert` would flush a subnormal argument or result to zero).
        let x = self.widen_f32(x32, lanes)?;
        let g32 = |em: &mut Self, i: u32| em.ext_inst(t, i, vs);
        // A lane is "in domain" where the f64 path is used; elsewhere the GLSL result is kept.
        let (r64, fallback, in_domain) = match fun {
            MathFn::Exp | MathFn::Exp2 | MathFn::Tanh => {
                let r = match fun {
                    MathFn::Exp => self.exp_f64(dt, it, x),
                    MathFn::Exp2 => {
                        // k = round(x) exactly, r = (x - k)·ln2: exact powers of two stay exact.
                        let (lo, hi) = (self.fconst(dt, -300.0), self.fconst(dt, 300.0));
                        let xc = self.ext_inst(dt, glsl::NMAX, &[x, lo]);
                        let xc = self.ext_inst(dt, glsl::NMIN, &[xc, hi]);
                        let k = self.ext_inst(dt, glsl::ROUND_EVEN, &[xc]);
                        let f = self.fop(Op::FSub, dt, &[xc, k]);
                        let ln2 = self.fconst(dt, std::f64::consts::LN_2);
                        let r = self.fop(Op::FMul, dt, &[f, ln2]);
                        self.exp_core(dt, it, k, r)
                    }
                    _ => {
                        // tanh = (e^2x - 1)/(e^2x + 1); below 2^-13 the series x - x³/3 + 2x⁵/15
                        // (the subtraction would lose relative accuracy there).
                        let (lo, hi) = (self.fconst(dt, -20.0), self.fconst(dt, 20.0));
                        let xc = self.ext_inst(dt, glsl::NMAX, &[x, lo]);
                        let xc = self.ext_inst(dt, glsl::NMIN, &[xc, hi]);
                        let x2 = self.fop(Op::FAdd, dt, &[xc, xc]);
                        let e = self.exp_f64(dt, it, x2);
                        let one = self.fconst(dt, 1.0);
                        let n = self.fop(Op::FSub, dt, &[e, one]);
                        let d = self.fop(Op::FAdd, dt, &[e, one]);
                        let big = self.fop(Op::FDiv, dt, &[n, d]);
                        let sq = self.fop(Op::FMul, dt, &[xc, xc]);
                        let p = self.horner(dt, sq, &[1.0, -1.0 / 3.0, 2.0 / 15.0]);
                        let small = self.fop(Op::FMul, dt, &[xc, p]);
                        let a = self.ext_inst(dt, glsl::FABS, &[xc]);
                        let lim = self.fconst(dt, 1.0 / 8192.0);
                        let is_small = self.opi(Op::FOrdLessThan, bty, &[a, lim]);
                        self.opi(Op::Select, dt, &[is_small, small, big])
                    }
                };
                // NaN is the only input the f64 path does not carry: GLSL passes it on.
                let nan = self.opi(Op::IsNan, bty, &[x]);
                let ok = self.opi(Op::LogicalNot, bty, &[nan]);
                let fb = match fun {
                    MathFn::Exp => g32(self, glsl::EXP),
                    MathFn::Exp2 => g32(self, glsl::EXP2),
                    _ => g32(self, glsl::TANH),
                };
                (r, fb, ok)
            }
            MathFn::Log | MathFn::Log2 | MathFn::Pow => {
                let zero = self.fconst(dt, 0.0);
                let inf = self.fconst(dt, f64::INFINITY);
                let pos = self.opi(Op::FOrdGreaterThan, bty, &[x, zero]);
                let fin = self.opi(Op::FOrdLessThan, bty, &[x, inf]);
                let ok = self.opi(Op::LogicalAnd, bty, &[pos, fin]);
                // GLSL leaves log of x <= 0 and pow of x < 0 (or 0 with y <= 0) undefined
                // (lavapipe gave 0 for pow(-8.375, -2^63)), so every input outside the main
                // domain gets C's special value here, built in f64 (exact for these values).
                let nan = self.fconst(dt, f64::NAN);
                let ninf = self.fconst(dt, f64::NEG_INFINITY);
                match fun {
                    MathFn::Log | MathFn::Log2 => {
                        let r = if fun == MathFn::Log {
                            self.ln_f64(dt, it, x, lanes)
                        } else {
                            let (e, lnm) = self.log_parts(dt, it, x, lanes);
                            let inv = self.fconst(dt, std::f64::consts::LOG2_E);
                            let l = self.fop(Op::FMul, dt, &[lnm, inv]);
                            self.fop(Op::FAdd, dt, &[e, l])
                        };
                        // log(±0) = -inf, log(+inf) = +inf, log(x < 0 or NaN) = NaN.
                        let z = self.opi(Op::FOrdEqual, bty, &[x, zero]);
                        let pinf = self.opi(Op::FOrdEqual, bty, &[x, inf]);
                        let s = self.opi(Op::Select, dt, &[pinf, inf, nan]);
                        let s = self.opi(Op::Select, dt, &[z, ninf, s]);
                        let fb = self.opi(Op::FConvert, t, &[s]);
                        (r, fb, ok)
                    }
                    _ => {
                        let y = self.widen_f32(vs[1], lanes)?;
                        let (ok, flip, s) = self.pow_edges(dt, bty, x, y);
                        let ax = self.ext_inst(dt, glsl::FABS, &[x]);
                        let l = self.ln_f64(dt, it, ax, lanes);
                        let tt = self.fop(Op::FMul, dt, &[y, l]);
                        let m = self.exp_f64(dt, it, tt);
                        let nm = self.fop(Op::FNegate, dt, &[m]);
                        let r = self.opi(Op::Select, dt, &[flip, nm, m]);
                        let fb = self.opi(Op::FConvert, t, &[s]);
                        (r, fb, ok)
                    }
                }
            }
            _ => {
                // sin/cos: k = round(x·2/π), r = x - k·π/2 with π/2 in two parts (the first
                // 33 bits, so k·hi is exact for |k| < 2^20), then Taylor polynomials on
                // |r| ≤ π/4 (degree 17/16, truncation below 2^-55) and the quadrant.
                let a = self.ext_inst(dt, glsl::FABS, &[x]);
                let lim = self.fconst(dt, 65536.0);
                let ok = self.opi(Op::FOrdLessThanEqual, bty, &[a, lim]);
                let two_pi = self.fconst(dt, std::f64::consts::FRAC_2_PI);
                let q = self.fop(Op::FMul, dt, &[x, two_pi]);
                let k = self.ext_inst(dt, glsl::ROUND_EVEN, &[q]);
                let hi = self.konst(dt, 0x3FF9_21FB_5440_0000);
                let lo = self.konst(dt, 0x3DD0_B461_1A62_6331);
                let kh = self.fop(Op::FMul, dt, &[k, hi]);
                let r = self.fop(Op::FSub, dt, &[x, kh]);
                let kl = self.fop(Op::FMul, dt, &[k, lo]);
                let r = self.fop(Op::FSub, dt, &[r, kl]);
                let r2 = self.fop(Op::FMul, dt, &[r, r]);
                let mut cs = Vec::new();
                let mut cc = Vec::new();
                let mut fact = 1.0f64;
                for n in 0..18u32 {
                    if n > 0 {
                        fact *= n as f64;
                    }
                    let sign = if (n / 2) % 2 == 0 { 1.0 } else { -1.0 };
                    if n % 2 == 0 {
                        cc.push(sign / fact);
                    } else {
                        cs.push(sign / fact);
                    }
                }
                let ps = self.horner(dt, r2, &cs);
                let sin_r = self.fop(Op::FMul, dt, &[r, ps]);
                let cos_r = self.horner(dt, r2, &cc);
                let ki = self.opi(Op::ConvertFToS, it, &[k]);
                let i32t = self.scalar_ty_raw(Scalar::I32);
                let splat = |em: &mut Self, v: u64| {
                    let c = em.konst(i32t, v);
                    if lanes > 1 {
                        em.opi(Op::CompositeConstruct, it, &vec![c; lanes as usize])
                    } else {
                        c
                    }
                };
                let (one, two, zero) = (splat(self, 1), splat(self, 2), splat(self, 0));
                let is_cos = fun == MathFn::Cos;
                let kq = if is_cos {
                    self.opi(Op::IAdd, it, &[ki, one])
                } else {
                    ki
                };
                // sin(x) by quadrant q: s, c, -s, -c; cos(x) = sin(x + π/2): quadrant q + 1.
                let odd_bits = self.opi(Op::BitwiseAnd, it, &[kq, one]);
                let odd = self.opi(Op::INotEqual, bty, &[odd_bits, zero]);
                let neg_bits = self.opi(Op::BitwiseAnd, it, &[kq, two]);
                let neg = self.opi(Op::INotEqual, bty, &[neg_bits, zero]);
                let v = self.opi(Op::Select, dt, &[odd, cos_r, sin_r]);
                let nv = self.fop(Op::FNegate, dt, &[v]);
                let r = self.opi(Op::Select, dt, &[neg, nv, v]);
                let fb = if is_cos {
                    g32(self, glsl::COS)
                } else {
                    g32(self, glsl::SIN)
                };
                (r, fb, ok)
            }
        };
        let r32 = self.f64_to_f32(r64, lanes)?;
        let r32 = self.opi(Op::Select, t, &[in_domain, r32, fallback]);
        if matches!(fun, MathFn::Sin | MathFn::Tanh) {
            // Odd functions keep a zero's sign (lavapipe folded sin(-0.0) to +0.0).
            let zero = self.fconst(dt, 0.0);
            let z = self.opi(Op::FOrdEqual, bty, &[x, zero]);
            return Ok(self.opi(Op::Select, t, &[z, x32, r32]));
        }
        Ok(r32)
    }
}
