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
//!   (`src/codegen/llvm/math.rs`) with more of each carried in double-double:
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

use super::{glsl, Emitter, Error, SpirvResult, TyKey};
use crate::codegen::f64math::trig::{table_entry, TABLE_LEN};
use crate::codegen::f64math::{explog, trig, Arith, Cmp};
use crate::ir::{MathFn, Scalar};
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Capability, Op, StorageClass, Word};

/// Scalar `f64` arithmetic for one lane, as SPIR-V: the types it needs, every float result
/// `NoContraction`. It is `codegen::f64math`'s [`Arith`] without a fused multiply-add.
struct F<'e, 'a> {
    em: &'e mut Emitter<'a>,
    d: Word,
    i: Word,
    b: Word,
}

impl<'e, 'a> F<'e, 'a> {
    fn new(em: &'e mut Emitter<'a>) -> SpirvResult<Self> {
        em.cap(Capability::Float64);
        let d = em.scalar_ty(Scalar::F64)?;
        let i = em.scalar_ty_raw(Scalar::I32);
        let b = em.boolt();
        Ok(F { em, d, i, b })
    }

    fn fop(&mut self, op: Op, args: &[Word]) -> SpirvResult<Word> {
        Ok(self.em.fop(op, self.d, args))
    }
    fn g(&mut self, inst: u32, args: &[Word]) -> SpirvResult<Word> {
        Ok(self.em.ext_inst(self.d, inst, args))
    }
    fn f_to_i(&mut self, a: Word) -> Word {
        self.em.opi(Op::ConvertFToS, self.i, &[a])
    }

    /// The shader's table of 2/π pieces (a `Private` array of f64, made once per module),
    /// and the type of a pointer to one entry.
    fn two_over_pi_table(&mut self) -> (Word, Word) {
        let u = self.em.u32t();
        let len = self.em.konst(u, TABLE_LEN as u64);
        let at = self.em.tk(TyKey::Array(self.d, len));
        let pt = self.em.tk(TyKey::Ptr(StorageClass::Private, self.d));
        if let Some(v) = self.em.pio2_table {
            return (v, pt);
        }
        let parts: Vec<Word> = (0..TABLE_LEN)
            .map(|i| self.em.fconst(self.d, table_entry(i)))
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

    /// `a / b` with the quotient's error removed through its exact residual: within a hair
    /// of correct rounding whatever the device's `FDiv` (Vulkan allows 2.5 ulps).
    fn div_corrected(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        let q = self.div(a, b)?;
        let r = self.residual(q, b, a)?;
        let c = self.div(r, b)?;
        self.add(q, c)
    }

    /// `exp(y·log|x|)` (`f64math::explog::pow_core`) inside C's special cases (shared with
    /// the f32 path: [`Emitter::pow_edges`]).
    fn pow(&mut self, x: Word, y: Word) -> SpirvResult<Word> {
        let (ok, flip, special) = self.em.pow_edges(self.d, self.b, x, y);
        let ax = self.abs(x)?;
        let one = self.c(1.0);
        let axs = self.sel(ok, ax, one)?;
        let ys = self.sel(ok, y, one)?;
        let m = explog::pow_core(self, axs, ys)?;
        let nm = self.neg(m)?;
        let r = self.sel(flip, nm, m)?;
        self.sel(ok, r, special)
    }

    // ---- sqrt, rsqrt ----

    /// `sqrt x`: `GLSL Sqrt`, checked by one Newton step `s + (x - s²)/(2s)` on the exact
    /// residual (the argument scaled by 2^∓200 at the ends of the range so that `s²` neither
    /// overflows nor underflows), taken where the root was more than 3/4 ulp off: a device's
    /// correctly rounded root is kept, a loose one (Vulkan sets no bound) corrected to within
    /// 3/4 ulp. Returns the result and whether the lane took this path (0 < x < inf).
    fn sqrt(&mut self, x: Word) -> SpirvResult<(Word, Word)> {
        let s0 = self.g(glsl::SQRT, &[x])?;
        let (zero, inf) = (self.c(0.0), self.c(f64::INFINITY));
        let pos = self.cmp(Cmp::Gt, x, zero)?;
        let fin = self.cmp(Cmp::Lt, x, inf)?;
        let ok = self.and(pos, fin)?;
        let (hi, lo) = (self.c(2f64.powi(1000)), self.c(2f64.powi(-900)));
        let big = self.cmp(Cmp::Gt, x, hi)?;
        let tiny = self.cmp(Cmp::Lt, x, lo)?;
        let one = self.c(1.0);
        let (up, down) = (self.c(2f64.powi(200)), self.c(2f64.powi(-200)));
        let sx = self.sel(tiny, up, one)?;
        let sx = self.sel(big, down, sx)?;
        let (up, down) = (self.c(2f64.powi(100)), self.c(2f64.powi(-100)));
        let sr = self.sel(tiny, down, one)?;
        let sr = self.sel(big, up, sr)?;
        let xs = self.mul(x, sx)?;
        let xs = self.sel(ok, xs, one)?;
        let s = self.g(glsl::SQRT, &[xs])?;
        let res = self.residual(s, s, xs)?;
        let s2 = self.add(s, s)?;
        let c = self.div(res, s2)?;
        // Only a root clearly off (by over 3/4 ulp) is moved: a correctly rounded one (lavapipe
        // and NVIDIA give IEEE `Sqrt`) must not flip in a near-halfway case.
        let ac = self.abs(c)?;
        let thr = self.mulc(s, 0.75 * f64::EPSILON)?;
        let off = self.cmp(Cmp::Gt, ac, thr)?;
        let sc = self.add(s, c)?;
        let s = self.sel(off, sc, s)?;
        let s = self.mul(s, sr)?;
        Ok((self.sel(ok, s, s0)?, ok))
    }

    fn rsqrt(&mut self, x: Word) -> SpirvResult<Word> {
        let (s, ok) = self.sqrt(x)?;
        let one = self.c(1.0);
        let plain = self.div(one, s)?;
        let ss = self.sel(ok, s, one)?;
        let q = self.div_corrected(one, ss)?;
        self.sel(ok, q, plain)
    }
}

impl Arith for F<'_, '_> {
    type V = Word;
    type B = Word;
    type E = Error;
    const FUSED: bool = false;

    fn c(&mut self, v: f64) -> Word {
        self.em.fconst(self.d, v)
    }
    fn add(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        self.fop(Op::FAdd, &[a, b])
    }
    fn sub(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        self.fop(Op::FSub, &[a, b])
    }
    fn mul(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        self.fop(Op::FMul, &[a, b])
    }
    fn div(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        self.fop(Op::FDiv, &[a, b])
    }
    fn mul_add(&mut self, a: Word, b: Word, c: Word) -> SpirvResult<Word> {
        let m = self.mul(a, b)?;
        self.add(m, c)
    }
    fn neg(&mut self, a: Word) -> SpirvResult<Word> {
        self.fop(Op::FNegate, &[a])
    }
    fn abs(&mut self, a: Word) -> SpirvResult<Word> {
        self.g(glsl::FABS, &[a])
    }
    fn floor(&mut self, a: Word) -> SpirvResult<Word> {
        self.g(glsl::FLOOR, &[a])
    }
    fn rint(&mut self, a: Word) -> SpirvResult<Word> {
        self.g(glsl::ROUND_EVEN, &[a])
    }
    fn cmp(&mut self, p: Cmp, a: Word, b: Word) -> SpirvResult<Word> {
        let op = match p {
            Cmp::Lt => Op::FOrdLessThan,
            Cmp::Gt => Op::FOrdGreaterThan,
            Cmp::Ge => Op::FOrdGreaterThanEqual,
            Cmp::Eq => Op::FOrdEqual,
            Cmp::Ne => Op::FUnordNotEqual,
        };
        Ok(self.em.opi(op, self.b, &[a, b]))
    }
    fn is_nan(&mut self, a: Word) -> SpirvResult<Word> {
        Ok(self.em.opi(Op::IsNan, self.b, &[a]))
    }
    fn clamp(&mut self, a: Word, lo: f64, hi: f64) -> SpirvResult<Word> {
        let (l, h) = (self.c(lo), self.c(hi));
        let a = self.g(glsl::NMAX, &[a, l])?;
        self.g(glsl::NMIN, &[a, h])
    }
    fn and(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        Ok(self.em.opi(Op::LogicalAnd, self.b, &[a, b]))
    }
    fn or(&mut self, a: Word, b: Word) -> SpirvResult<Word> {
        Ok(self.em.opi(Op::LogicalOr, self.b, &[a, b]))
    }
    fn sel(&mut self, c: Word, a: Word, b: Word) -> SpirvResult<Word> {
        Ok(self.em.opi(Op::Select, self.d, &[c, a, b]))
    }
    fn frexp(&mut self, a: Word) -> SpirvResult<(Word, Word)> {
        let (m, e) = self.em.frexp(self.d, self.i, a);
        Ok((m, self.em.opi(Op::ConvertSToF, self.d, &[e])))
    }
    fn pow2(&mut self, k: Word) -> SpirvResult<Word> {
        let ki = self.f_to_i(k);
        let one = self.c(1.0);
        self.g(glsl::LDEXP, &[one, ki])
    }
    fn table(&mut self, i: Word) -> SpirvResult<Word> {
        let (table, pt) = self.two_over_pi_table();
        let idx = self.f_to_i(i);
        let ptr = self.em.opi(Op::AccessChain, pt, &[table, idx]);
        Ok(self.em.load(self.d, ptr))
    }
    fn guarded<const N: usize>(
        &mut self,
        cond: Word,
        otherwise: [Word; N],
        then: impl FnOnce(&mut Self) -> SpirvResult<[Word; N]>,
    ) -> SpirvResult<[Word; N]> {
        let vars = otherwise.map(|v| {
            let var = self.em.fn_var(self.d);
            self.em.store(var, v);
            var
        });
        let g = self.em.guard_begin(cond);
        let r = then(self).map(|vals| {
            for (&var, v) in vars.iter().zip(vals) {
                self.em.store(var, v);
            }
        });
        self.em.guard_end(g, r)?;
        Ok(vars.map(|var| self.em.load(self.d, var)))
    }
}

impl Emitter<'_> {
    /// An `f64` `sqrt rsqrt exp exp2 log log2 sin cos tanh pow` on values of `lanes` lanes
    /// (1–4), computed lane by lane (the `sin`/`cos` reduction branches per lane).
    pub(super) fn math_f64(&mut self, fun: MathFn, vs: &[Word], lanes: u8) -> SpirvResult<Word> {
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
            let f = &mut F::new(self)?;
            let x = args[0];
            parts.push(match fun {
                MathFn::Sqrt => f.sqrt(x)?.0,
                MathFn::Rsqrt => f.rsqrt(x)?,
                MathFn::Exp => explog::exp(f, x)?,
                MathFn::Exp2 => explog::exp2(f, x)?,
                MathFn::Log => explog::log(f, x, false)?,
                MathFn::Log2 => explog::log(f, x, true)?,
                MathFn::Sin => trig::sin_cos(f, x, false)?,
                MathFn::Cos => trig::sin_cos(f, x, true)?,
                MathFn::Tanh => explog::tanh(f, x)?,
                MathFn::Pow => f.pow(x, args[1])?,
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

impl Emitter<'_> {
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
    ) -> SpirvResult<Word> {
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
