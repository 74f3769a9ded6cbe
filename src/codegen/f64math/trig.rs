//! `f64` `sin` and `cos` for every finite argument, over [`Arith`]:
//! - |x| < 2^27: Cody–Waite, `x − k·π/2` with π/2 in three doubles and exact products, the
//!   reduced argument kept as a double-double `r + rl` (error below 2^-130).
//! - 2^27 ≤ |x| < inf: Payne–Hanek, `x·2/π` mod 4 from a table of 24-bit pieces of 2/π
//!   (exact products of 24-bit pieces, carries propagated as fdlibm's `__kernel_rem_pio2`
//!   does), under a per-lane branch so the common case does not pay for it. About 2^-120
//!   absolute.
//! - Taylor polynomials on |r| ≤ π/4 (+ε) with `rl` folded in to first order; `sin` of
//!   |x| < 2^-26 is `x` (signed zeros and subnormals kept); inf and NaN give NaN.

use super::arith::{Arith, Cmp, Res};
use crate::codegen::mathconst::{
    cos_taylor, sin_taylor, PIO2_1, PIO2_2, PIO2_3, SIN_CW_LIMIT as CW_LIMIT, TABLE_PAD,
    TWO_OVER_PI,
};

/// The device table's length: the padding, then the pieces.
pub const TABLE_LEN: usize = TABLE_PAD + TWO_OVER_PI.len();

/// The padded table's entry `i`.
pub fn table_entry(i: usize) -> f64 {
    i.checked_sub(TABLE_PAD)
        .map_or(0.0, |j| f64::from(TWO_OVER_PI[j]))
}

/// Cody–Waite reduction of `a` = |x| < 2^27: `(r, rl, k)` with `a = k·π/2 + r + rl`.
fn reduce_cw<A: Arith>(f: &mut A, a: A::V) -> Res<A, [A::V; 3]> {
    let q = f.mulc(a, std::f64::consts::FRAC_2_PI)?;
    let k = f.rint(q)?;
    let c1 = f.c(PIO2_1);
    let (p1, e1) = f.two_prod(k, c1)?;
    let t = f.sub(a, p1)?; // exact (Sterbenz)
    let c2 = f.c(PIO2_2);
    let (p2, e2) = f.two_prod(k, c2)?;
    let p3 = f.mulc(k, PIO2_3)?;
    let np2 = f.neg(p2)?;
    let (h, l) = f.two_sum(t, np2)?;
    let ne1 = f.neg(e1)?;
    let (h, l2) = f.two_sum(h, ne1)?;
    let t = f.add(e2, p3)?;
    let l = f.add(l, l2)?;
    let l = f.sub(l, t)?;
    let (r, rl) = f.fast_two_sum(h, l)?;
    Ok([r, rl, k])
}

/// Payne–Hanek reduction of a finite `a` = |x| ≥ 2^27: `(r, rl, q)` with
/// `a = (4n + q)·π/2 + r + rl`, |r| ≤ π/4 (+ε), to about 2^-120 absolute.
///
/// `a = X0·2^(E-24) + X1·2^(E-48) + X2·2^(E-72)` (24-bit integer pieces) times
/// `2/π = Σ P_j·2^(-24(j+1))`: the products are grouped into digits
/// `D_n = Σ_i X_i·P_(n-i)` (exact, below 2^50) of weight `2^(E - 24(n+2))`. Digits of
/// weight 4 or more are multiples of 4 and skipped; the window starts at the digit of
/// weight 2^t, t ∈ [-23, 0] (with the one above it, which can add 2), and runs 8 digits
/// on (the last of weight below 2^-140). Carries make digits 1..8 proper 24-bit digits, so
/// the fraction is read off them exactly.
fn reduce_ph<A: Arith>(f: &mut A, a: A::V) -> Res<A, [A::V; 3]> {
    // a = m·2^E, m in [0.5, 1); ns = floor((E + 23)/24) - 2 (E ≥ 28), t = E - 24·(ns + 2).
    let (m, e) = f.frexp(a)?;
    let c23 = f.c(23.0);
    let c24 = f.c(24.0);
    let ns = f.add(e, c23)?;
    let ns = f.div(ns, c24)?; // correctly rounded, so its floor is exact
    let ns = f.floor(ns)?;
    let w = f.mulc(ns, 24.0)?;
    let t = f.sub(e, w)?;
    let c2 = f.c(2.0);
    let ns = f.sub(ns, c2)?;
    let wt = f.pow2(t)?;
    // The pieces of a's significand.
    let m24 = f.mulc(m, 16_777_216.0)?;
    let x0 = f.floor(m24)?;
    let r1 = f.sub(m24, x0)?;
    let r1 = f.mulc(r1, 16_777_216.0)?;
    let x1 = f.floor(r1)?;
    let r2 = f.sub(r1, x1)?;
    let x2 = f.mulc(r2, 16_777_216.0)?;
    // Table pieces P_(ns-3+k) for k = 0..11 (index ns + k with the padding).
    let mut pk = Vec::with_capacity(12);
    for k in 0..12 {
        let ck = f.c(f64::from(k));
        let idx = f.add(ns, ck)?;
        pk.push(f.table(idx)?);
    }
    // D for digit n = ns + j - 1, j = 0..9: X0·P_n + X1·P_(n-1) + X2·P_(n-2) (P_n is pk[j+2]).
    let mut dg = Vec::with_capacity(10);
    for j in 0..10usize {
        let a0 = f.mul(x0, pk[j + 2])?;
        let a1 = f.mul(x1, pk[j + 1])?;
        let a2 = f.mul(x2, pk[j])?;
        let s = f.add(a0, a1)?;
        dg.push(f.add(s, a2)?);
    }
    // Carries from digit 8 up to digit 1 (dg[9] .. dg[2]); digit 0 (dg[1]) keeps its carry.
    let mut digits = [f.c(0.0); 10];
    let mut carry = f.c(0.0);
    for j in (2..10).rev() {
        let v = f.add(dg[j], carry)?;
        let cv = f.mulc(v, 2f64.powi(-24))?;
        let cf = f.floor(cv)?;
        let back = f.mulc(cf, 16_777_216.0)?;
        digits[j] = f.sub(v, back)?;
        carry = cf;
    }
    let d0 = f.add(dg[1], carry)?;
    // Integer part mod 4 and the top digit's fraction.
    let v0 = f.mul(d0, wt)?;
    let i0 = f.floor(v0)?;
    let f0 = f.sub(v0, i0)?;
    let wm1 = f.mulc(wt, 16_777_216.0)?;
    let vm1 = f.mul(dg[0], wm1)?;
    let im1 = f.mod4(vm1)?;
    let i = f.add(i0, im1)?;
    let q = f.mod4(i)?;
    // G = f0 + digit 1 is exact (at most 47 bits) and decides whether the fraction is at
    // least 1/2; then the fraction becomes G - 1 and the quadrant moves up one.
    let w1 = f.mulc(wt, 2f64.powi(-24))?;
    let t1 = f.mul(digits[2], w1)?;
    let g = f.add(f0, t1)?;
    let half = f.c(0.5);
    let up = f.cmp(Cmp::Ge, g, half)?;
    let one = f.c(1.0);
    let gm = f.sub(g, one)?;
    let g = f.sel(up, gm, g)?;
    let q1 = f.add(q, one)?;
    let q = f.sel(up, q1, q)?;
    // Digits 2..8: adjacent pairs add exactly (48 bits); the pairs do not overlap.
    let mut terms = Vec::with_capacity(7);
    let mut wk = w1;
    for &dj in &digits[3..10] {
        wk = f.mulc(wk, 2f64.powi(-24))?;
        terms.push(f.mul(dj, wk)?);
    }
    let pa = f.add(terms[0], terms[1])?;
    let pb = f.add(terms[2], terms[3])?;
    let pc = f.add(terms[4], terms[5])?;
    let (rh, rl) = f.fast_two_sum(pa, pb)?;
    let tail = f.add(pc, terms[6])?;
    let rl = f.add(rl, tail)?;
    let (fh, fl) = f.two_sum(g, rh)?;
    let fl = f.add(fl, rl)?;
    let (fh, fl) = f.fast_two_sum(fh, fl)?;
    // r = F·π/2.
    let c1 = f.c(PIO2_1);
    let (r, re) = f.two_prod(fh, c1)?;
    let t1 = f.mulc(fh, PIO2_2)?;
    let t2 = f.mulc(fl, PIO2_1)?;
    let t = f.add(t1, t2)?;
    let re = f.add(re, t)?;
    let (r, rl) = f.fast_two_sum(r, re)?;
    Ok([r, rl, q])
}

/// `sin x` (or `cos x` when `cos`) for any f64 `x`.
pub fn sin_cos<A: Arith>(f: &mut A, x: A::V, cos: bool) -> Res<A, A::V> {
    let a = f.abs(x)?;
    let inf = f.c(f64::INFINITY);
    let fin = f.cmp(Cmp::Lt, a, inf)?;
    let [r, rl, k] = reduce_cw(f, a)?;
    let lim = f.c(CW_LIMIT);
    let big = f.cmp(Cmp::Ge, a, lim)?;
    let big = f.and(big, fin)?;
    let [r, rl, k] = f.guarded(big, [r, rl, k], |f| reduce_ph(f, a))?;
    // sin r = r + r·z·Ps(z) + rl·(1 - z/2); cos r = 1 - z/2 + z²·Pc(z) - r·rl, with z = r²
    // exact in two parts and 1 - z/2 carried with its rounding error (fdlibm).
    let (z, zl) = f.two_prod(r, r)?;
    let (cs, cc) = (sin_taylor(), cos_taylor());
    let one = f.c(1.0);
    let hz = f.mulc(z, 0.5)?;
    let w = f.sub(one, hz)?;
    let ps = f.horner(z, &cs)?;
    let rz = f.mul(r, z)?;
    let corr = f.mul(rl, w)?;
    let ts = f.mul_add(rz, ps, corr)?;
    let sin_r = f.add(r, ts)?;
    let pc = f.horner(z, &cc)?;
    let zz = f.mul(z, z)?;
    let tc = f.mul(zz, pc)?;
    let hzl = f.mulc(zl, 0.5)?;
    let rrl = f.mul(r, rl)?;
    let u = f.add(hzl, rrl)?;
    let tc = f.sub(tc, u)?;
    let ow = f.sub(one, w)?;
    let err = f.sub(ow, hz)?;
    let tc = f.add(err, tc)?;
    let cos_r = f.add(w, tc)?;
    // The quadrant n = k mod 4 (plus one for cos, cos x = sin(x + π/2)): 0 sin, 1 cos,
    // 2 -sin, 3 -cos (4 is 0 again).
    let n = f.mod4(k)?;
    let n = if cos { f.add(n, one)? } else { n };
    let (c1, c2, c3) = (f.c(1.0), f.c(2.0), f.c(3.0));
    let is1 = f.cmp(Cmp::Eq, n, c1)?;
    let is2 = f.cmp(Cmp::Eq, n, c2)?;
    let is3 = f.cmp(Cmp::Eq, n, c3)?;
    let odd = f.or(is1, is3)?;
    let negq = f.or(is2, is3)?;
    let v = f.sel(odd, cos_r, sin_r)?;
    let nv = f.neg(v)?;
    let v = f.sel(negq, nv, v)?;
    let v = if cos {
        v
    } else {
        // sin is odd; below 2^-26 it is x itself (keeps -0 and subnormals).
        let zero = f.c(0.0);
        let xneg = f.cmp(Cmp::Lt, x, zero)?;
        let nv = f.neg(v)?;
        let v = f.sel(xneg, nv, v)?;
        let tiny_lim = f.c(2f64.powi(-26));
        let tiny = f.cmp(Cmp::Lt, a, tiny_lim)?;
        f.sel(tiny, x, v)?
    };
    let nan = f.c(f64::NAN);
    f.sel(fin, v, nan)
}

#[cfg(test)]
mod tests {
    use super::super::arith::{on_model, ulps, Rng};
    use super::*;

    /// `sin` or `cos` on the fused host model (the LLVM targets' sequence) or the unfused one
    /// (Vulkan's).
    fn model_of(x: f64, cos: bool, fused: bool) -> f64 {
        on_model!(fused, sin_cos(x, cos))
    }

    /// Both models' result, which must be the same value (special values, exact cases).
    fn model(x: f64, cos: bool) -> f64 {
        let (a, b) = (model_of(x, cos, true), model_of(x, cos, false));
        assert_eq!(ulps(a, b), 0, "{x:e}: fused {a:e}, unfused {b:e}");
        a
    }

    /// Max ulps from the interpreter's libm (`f64::sin`/`cos`) over `xs` on either model,
    /// with the worst x.
    fn worst(xs: impl IntoIterator<Item = f64>) -> (u64, f64) {
        let mut w = (0, 0.0);
        for x in xs {
            for fused in [true, false] {
                for (got, want) in [
                    (model_of(x, false, fused), x.sin()),
                    (model_of(x, true, fused), x.cos()),
                ] {
                    let d = ulps(got, want);
                    if d > w.0 {
                        w = (d, x);
                    }
                }
            }
        }
        w
    }

    #[test]
    fn the_device_table_is_padded_two_over_pi() {
        // The table itself is checked in `codegen::mathconst`; here, its layout on the device.
        assert_eq!(table_entry(0), 0.0);
        assert_eq!(table_entry(TABLE_PAD), f64::from(TWO_OVER_PI[0]));
    }

    /// Huge arguments (Payne–Hanek), 2^27 up to the largest double: within 1 ulp.
    #[test]
    fn huge_arguments_reduce_exactly() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (d, x) = worst((0..200_000).map(|_| rng.double(27, 1023)));
        assert!(d <= 1, "{d} ulps at {x:e}");
        // The filetest's huge arguments, 2^27 itself, the largest double, and neighbours of
        // the double closest to a multiple of π/2 (Muller, Elementary Functions, 11.1).
        let special = [
            -3.0e18,
            1.0e22,
            1.0e100,
            -2.5e200,
            f64::MAX,
            134_217_728.0,
            1.0e15,
            6381956970095103.0 * 2f64.powi(796),
            6381956970095104.0 * 2f64.powi(797),
        ];
        let (d, x) = worst(special);
        assert!(d <= 1, "{d} ulps at {x:e}");
        // That closest double itself: glibc's cos is 8 ulps off there (-4.68716592425462e-19),
        // so compare with the exact value (mpmath at 2000 bits: -4.68716592425462761e-19).
        let x = 6381956970095103.0 * 2f64.powi(797);
        let d = ulps(model(x, true), -4.687_165_924_254_628e-19);
        assert!(d == 0, "cos of the hardest argument: {d} ulps");
        assert_eq!(model(x, false), 1.0);
    }

    /// Moderate and tiny arguments (Cody–Waite), and the special values.
    #[test]
    fn small_arguments_and_special_values() {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        let (d, x) = worst((0..200_000).map(|_| rng.double(-30, 26)));
        assert!(d <= 1, "{d} ulps at {x:e}");
        let (d, x) = worst((0..20_000).map(|_| rng.double(-1074, -30)));
        assert!(d <= 1, "{d} ulps at {x:e}");
        for x in [0.0, -0.0, 5e-324, -5e-324] {
            assert_eq!(model(x, false).to_bits(), x.to_bits());
            assert_eq!(model(x, true), 1.0);
        }
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            assert!(model(x, false).is_nan() && model(x, true).is_nan());
        }
    }

    /// f32 sin/cos go through the f64 routine and round once: huge f32 arguments (up to
    /// 3.4e38) must match the interpreter's `(x as f64).sin() as f32`.
    #[test]
    fn f32_arguments_round_once() {
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        for _ in 0..100_000 {
            let x = rng.double(-20, 127) as f32;
            let x = f64::from(x);
            for fused in [true, false] {
                for (got, want) in [
                    (model_of(x, false, fused), x.sin()),
                    (model_of(x, true, fused), x.cos()),
                ] {
                    // One f32 ulp is 2^29 f64 ulps of the same binade; a double rounding can
                    // at worst move the f32 result by one ulp.
                    let (g, w) = (got as f32, want as f32);
                    let d = ulps(f64::from(g), f64::from(w));
                    assert!(d <= 1 << 29, "{x:e}: {g} vs {w} (fused {fused})");
                }
            }
        }
    }
}
