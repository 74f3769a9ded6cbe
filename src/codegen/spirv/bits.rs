//! Bit operations (issue #23, item 1) on integer scalars. Vulkan allows `OpBitCount` and
//! `OpBitReverse` on 32-bit integers only (and GLSL.std.450's `FindUMsb` likewise): 8- and
//! 16-bit operations are computed on their operands widened to 32 bits; 64-bit ones are built
//! from shifts, masks and adds in their own type (32-bit `popcount` and `bit_reverse` use the
//! native instructions); shift amounts are `u32`, which SPIR-V allows for a base of any width. The meaning is `docs/semantics.md`'s
//! ("Bit operations").

use super::*;

impl Emitter<'_> {
    pub(super) fn bits(&mut self, op: BitOp, args: &[ExprId]) -> SpirvResult<Word> {
        if args.len() != op.arity() {
            return refuse("a bit operation with the wrong number of arguments");
        }
        let (s, lanes) = self.sl(args[0]);
        if !s.is_int() || lanes != 1 {
            return refuse("a bit operation on something other than an integer scalar");
        }
        let vs = args
            .iter()
            .map(|a| self.expr(*a))
            .collect::<SpirvResult<Vec<_>>>()?;
        if s.bits() < 32 {
            return self.narrow_bits(op, s, &vs);
        }
        let t = self.scalar_ty(s)?;
        Ok(self.bits_at(op, s, t, &vs))
    }

    /// An 8- or 16-bit operation computed on the operands widened to 32 bits and narrowed
    /// back. The NVIDIA driver's compiler got 11 of 120 slots of 16-bit `bit_reverse`,
    /// `rotate_*`, `bitfield_*` wrong when they were built in the narrow type (`bit_reverse(1u16)`
    /// gave 8; H200, driver 580, `tests/filetests/ops/bits.xk`), while 32-bit code and
    /// conversions are the paths every driver exercises.
    fn narrow_bits(&mut self, op: BitOp, s: Scalar, vs: &[Word]) -> SpirvResult<Word> {
        let w = s.bits();
        let (u, ut) = (Scalar::U32, self.u32t());
        let unsigned = if w == 8 { Scalar::U8 } else { Scalar::U16 };
        // The zero-extended bits of a narrow operand.
        let zext = |em: &mut Self, v: Word| -> SpirvResult<Word> {
            let v = em.cast(v, s, unsigned, 1)?;
            em.cast(v, unsigned, u, 1)
        };
        let x = zext(self, vs[0])?;
        let r = match op {
            BitOp::Popcount => self.opi(Op::BitCount, ut, &[x]),
            BitOp::Clz => {
                let c = self.bits_at(BitOp::Clz, u, ut, &[x]);
                let k = self.cu32(32 - w);
                self.opi(Op::ISub, ut, &[c, k])
            }
            BitOp::Ctz => {
                // A stop bit at `w`: zero has `w` trailing zeros.
                let stop = self.cu32(1 << w);
                let v = self.opi(Op::BitwiseOr, ut, &[x, stop]);
                self.bits_at(BitOp::Ctz, u, ut, &[v])
            }
            BitOp::BitReverse => {
                let r = self.opi(Op::BitReverse, ut, &[x]);
                let k = self.cu32(32 - w);
                self.opi(Op::ShiftRightLogical, ut, &[r, k])
            }
            BitOp::RotateLeft | BitOp::RotateRight => {
                let wm = self.cu32(w - 1);
                let wv = self.cu32(w);
                let n = self.opi(Op::BitwiseAnd, ut, &[vs[1], wm]);
                let back = self.opi(Op::ISub, ut, &[wv, n]);
                let back = self.opi(Op::BitwiseAnd, ut, &[back, wm]);
                let (l, r) = if op == BitOp::RotateLeft {
                    (n, back)
                } else {
                    (back, n)
                };
                // The bits shifted past `w` are dropped by the narrowing below.
                let a = self.opi(Op::ShiftLeftLogical, ut, &[x, l]);
                let b = self.opi(Op::ShiftRightLogical, ut, &[x, r]);
                self.opi(Op::BitwiseOr, ut, &[a, b])
            }
            BitOp::MulHi => {
                // The whole product fits in 32 bits.
                let wide = if s.is_signed() { Scalar::I32 } else { u };
                let tw = self.scalar_ty(wide)?;
                let a = self.cast(vs[0], s, wide, 1)?;
                let b = self.cast(vs[1], s, wide, 1)?;
                let p = self.opi(Op::IMul, tw, &[a, b]);
                let k = self.cu32(w);
                let sr = if s.is_signed() {
                    Op::ShiftRightArithmetic
                } else {
                    Op::ShiftRightLogical
                };
                let hi = self.opi(sr, tw, &[p, k]);
                return self.cast(hi, wide, s, 1);
            }
            BitOp::BitfieldExtract | BitOp::BitfieldInsert => {
                let first = if op == BitOp::BitfieldExtract { 1 } else { 2 };
                let bt = self.boolt();
                let wv = self.cu32(w);
                let off = self.ext_inst(ut, glsl::UMIN, &[vs[first], wv]);
                let room = self.opi(Op::ISub, ut, &[wv, off]);
                let cnt = self.ext_inst(ut, glsl::UMIN, &[vs[first + 1], room]);
                let zero = self.cu32(0);
                let empty = self.opi(Op::IEqual, bt, &[cnt, zero]);
                let c32 = self.cu32(32);
                let c31 = self.cu32(31);
                // `32 - cnt`, masked: the arm a zero count puts out of range is discarded by
                // the select.
                let right = self.opi(Op::ISub, ut, &[c32, cnt]);
                let right = self.opi(Op::BitwiseAnd, ut, &[right, c31]);
                if op == BitOp::BitfieldExtract {
                    // The field moved to the top of the word, then down with the sign of the
                    // (sign-extended) operand.
                    let wide = if s.is_signed() { Scalar::I32 } else { u };
                    let tw = self.scalar_ty(wide)?;
                    let v = self.cast(vs[0], s, wide, 1)?;
                    let left = self.opi(Op::ISub, ut, &[right, off]);
                    let left = self.opi(Op::BitwiseAnd, ut, &[left, c31]);
                    let l = self.opi(Op::ShiftLeftLogical, tw, &[v, left]);
                    let sr = if s.is_signed() {
                        Op::ShiftRightArithmetic
                    } else {
                        Op::ShiftRightLogical
                    };
                    let r = self.opi(sr, tw, &[l, right]);
                    let zw = self.konst(tw, 0);
                    let r = self.opi(Op::Select, tw, &[empty, zw, r]);
                    return self.cast(r, wide, s, 1);
                }
                let y = zext(self, vs[1])?;
                let ones = self.cu32(u32::MAX);
                let low = self.opi(Op::ShiftRightLogical, ut, &[ones, right]);
                let m = self.opi(Op::ShiftLeftLogical, ut, &[low, off]);
                let m = self.opi(Op::Select, ut, &[empty, zero, m]);
                let nm = self.opi(Op::Not, ut, &[m]);
                let keep = self.opi(Op::BitwiseAnd, ut, &[x, nm]);
                let ins = self.opi(Op::ShiftLeftLogical, ut, &[y, off]);
                let ins = self.opi(Op::BitwiseAnd, ut, &[ins, m]);
                self.opi(Op::BitwiseOr, ut, &[keep, ins])
            }
        };
        self.cast(r, u, s, 1)
    }

    /// `op` on operands of scalar `s` (type `t`) in their own width (32 or 64 bits).
    fn bits_at(&mut self, op: BitOp, s: Scalar, t: Word, vs: &[Word]) -> Word {
        let w = s.bits();
        let x = vs[0];
        match op {
            BitOp::Popcount => self.popcount(t, w, x),
            BitOp::Clz => {
                // Smear the highest set bit down; the zeros above it are the ones left clear.
                let mut v = x;
                let mut k = 1;
                while k < w {
                    let sh = self.cu32(k);
                    let r = self.opi(Op::ShiftRightLogical, t, &[v, sh]);
                    v = self.opi(Op::BitwiseOr, t, &[v, r]);
                    k *= 2;
                }
                let n = self.opi(Op::Not, t, &[v]);
                self.popcount(t, w, n)
            }
            BitOp::Ctz => {
                // The trailing zeros are the set bits of !x & (x - 1) (all of them for 0).
                let one = self.konst(t, 1);
                let m1 = self.opi(Op::ISub, t, &[x, one]);
                let n = self.opi(Op::Not, t, &[x]);
                let v = self.opi(Op::BitwiseAnd, t, &[n, m1]);
                self.popcount(t, w, v)
            }
            BitOp::BitReverse => {
                if w == 32 {
                    self.opi(Op::BitReverse, t, &[x])
                } else {
                    let mut v = x;
                    let mut k = w / 2;
                    // Swap halves, then quarters, ... then adjacent bits.
                    while k >= 1 {
                        let m = self.konst(t, swap_mask(w, k));
                        let sh = self.cu32(k);
                        let lo = self.opi(Op::BitwiseAnd, t, &[v, m]);
                        let lo = self.opi(Op::ShiftLeftLogical, t, &[lo, sh]);
                        let hi = self.opi(Op::ShiftRightLogical, t, &[v, sh]);
                        let hi = self.opi(Op::BitwiseAnd, t, &[hi, m]);
                        v = self.opi(Op::BitwiseOr, t, &[lo, hi]);
                        k /= 2;
                    }
                    v
                }
            }
            BitOp::RotateLeft | BitOp::RotateRight => {
                let u = self.u32t();
                let wm = self.cu32(w - 1);
                let wv = self.cu32(w);
                let n = self.opi(Op::BitwiseAnd, u, &[vs[1], wm]);
                let back = self.opi(Op::ISub, u, &[wv, n]);
                let back = self.opi(Op::BitwiseAnd, u, &[back, wm]);
                let (l, r) = if op == BitOp::RotateLeft {
                    (n, back)
                } else {
                    (back, n)
                };
                let a = self.opi(Op::ShiftLeftLogical, t, &[x, l]);
                let b = self.opi(Op::ShiftRightLogical, t, &[x, r]);
                self.opi(Op::BitwiseOr, t, &[a, b])
            }
            BitOp::MulHi => self.mul_hi(s, t, x, vs[1]),
            BitOp::BitfieldExtract | BitOp::BitfieldInsert => {
                let first = if op == BitOp::BitfieldExtract { 1 } else { 2 };
                let u = self.u32t();
                let bt = self.boolt();
                let wv = self.cu32(w);
                let wm = self.cu32(w - 1);
                let off = self.ext_inst(u, glsl::UMIN, &[vs[first], wv]);
                let room = self.opi(Op::ISub, u, &[wv, off]);
                let cnt = self.ext_inst(u, glsl::UMIN, &[vs[first + 1], room]);
                let zero_u = self.cu32(0);
                let empty = self.opi(Op::IEqual, bt, &[cnt, zero_u]);
                // Amounts masked to the width: the arm a zero count puts out of range is
                // discarded by the select.
                let right = self.opi(Op::ISub, u, &[wv, cnt]);
                let right = self.opi(Op::BitwiseAnd, u, &[right, wm]);
                let zero = self.konst(t, 0);
                if op == BitOp::BitfieldExtract {
                    let left = self.opi(Op::ISub, u, &[room, cnt]);
                    let left = self.opi(Op::BitwiseAnd, u, &[left, wm]);
                    let l = self.opi(Op::ShiftLeftLogical, t, &[x, left]);
                    let sr = if s.is_signed() {
                        Op::ShiftRightArithmetic
                    } else {
                        Op::ShiftRightLogical
                    };
                    let r = self.opi(sr, t, &[l, right]);
                    self.opi(Op::Select, t, &[empty, zero, r])
                } else {
                    let offm = self.opi(Op::BitwiseAnd, u, &[off, wm]);
                    let ones = self.konst(t, u64::MAX);
                    let low = self.opi(Op::ShiftRightLogical, t, &[ones, right]);
                    let m = self.opi(Op::ShiftLeftLogical, t, &[low, offm]);
                    let m = self.opi(Op::Select, t, &[empty, zero, m]);
                    let nm = self.opi(Op::Not, t, &[m]);
                    let keep = self.opi(Op::BitwiseAnd, t, &[x, nm]);
                    let ins = self.opi(Op::ShiftLeftLogical, t, &[vs[1], offm]);
                    let ins = self.opi(Op::BitwiseAnd, t, &[ins, m]);
                    self.opi(Op::BitwiseOr, t, &[keep, ins])
                }
            }
        }
    }

    /// The set bits of `x` (type `t`, `w` bits): native at 32 bits, else the SWAR sum.
    fn popcount(&mut self, t: Word, w: u32, x: Word) -> Word {
        if w == 32 {
            return self.opi(Op::BitCount, t, &[x]);
        }
        let rep = |b: u64| -> u64 {
            let mut v = 0u64;
            let mut i = 0;
            while i < w {
                v |= b << i;
                i += 8;
            }
            v
        };
        let sh = |em: &mut Self, v: Word, k: u32| {
            let c = em.cu32(k);
            em.opi(Op::ShiftRightLogical, t, &[v, c])
        };
        let m1 = self.konst(t, rep(0x55));
        let m2 = self.konst(t, rep(0x33));
        let m4 = self.konst(t, rep(0x0f));
        let ones = self.konst(t, rep(0x01));
        // x - ((x >> 1) & 0x55..): 2-bit sums.
        let a = sh(self, x, 1);
        let a = self.opi(Op::BitwiseAnd, t, &[a, m1]);
        let v = self.opi(Op::ISub, t, &[x, a]);
        // (v & 0x33..) + ((v >> 2) & 0x33..): 4-bit sums.
        let lo = self.opi(Op::BitwiseAnd, t, &[v, m2]);
        let hi = sh(self, v, 2);
        let hi = self.opi(Op::BitwiseAnd, t, &[hi, m2]);
        let v = self.opi(Op::IAdd, t, &[lo, hi]);
        // (v + (v >> 4)) & 0x0f..: byte sums.
        let hi = sh(self, v, 4);
        let v = self.opi(Op::IAdd, t, &[v, hi]);
        let v = self.opi(Op::BitwiseAnd, t, &[v, m4]);
        if w == 8 {
            return v;
        }
        // The byte sums added into the top byte.
        let v = self.opi(Op::IMul, t, &[v, ones]);
        sh(self, v, w - 8)
    }

    /// The high half of the double-width product, from half-width limbs in `t` itself (so no
    /// wider type is needed); signed by subtracting the other operand where one is negative.
    fn mul_hi(&mut self, s: Scalar, t: Word, a: Word, b: Word) -> Word {
        let h = s.bits() / 2;
        let m = self.konst(t, (1u64 << h) - 1);
        let hs = self.cu32(h);
        let al = self.opi(Op::BitwiseAnd, t, &[a, m]);
        let ah = self.opi(Op::ShiftRightLogical, t, &[a, hs]);
        let bl = self.opi(Op::BitwiseAnd, t, &[b, m]);
        let bh = self.opi(Op::ShiftRightLogical, t, &[b, hs]);
        let ll = self.opi(Op::IMul, t, &[al, bl]);
        let lh = self.opi(Op::IMul, t, &[al, bh]);
        let hl = self.opi(Op::IMul, t, &[ah, bl]);
        let hh = self.opi(Op::IMul, t, &[ah, bh]);
        let llh = self.opi(Op::ShiftRightLogical, t, &[ll, hs]);
        let mid = self.opi(Op::IAdd, t, &[hl, llh]);
        let midl = self.opi(Op::BitwiseAnd, t, &[mid, m]);
        let midh = self.opi(Op::ShiftRightLogical, t, &[mid, hs]);
        let w1 = self.opi(Op::IAdd, t, &[midl, lh]);
        let w1h = self.opi(Op::ShiftRightLogical, t, &[w1, hs]);
        let hi = self.opi(Op::IAdd, t, &[hh, midh]);
        let hi = self.opi(Op::IAdd, t, &[hi, w1h]);
        if !s.is_signed() {
            return hi;
        }
        let bt = self.boolt();
        let zero = self.konst(t, 0);
        let an = self.opi(Op::SLessThan, bt, &[a, zero]);
        let bn = self.opi(Op::SLessThan, bt, &[b, zero]);
        let sb = self.opi(Op::Select, t, &[an, b, zero]);
        let sa = self.opi(Op::Select, t, &[bn, a, zero]);
        let hi = self.opi(Op::ISub, t, &[hi, sb]);
        self.opi(Op::ISub, t, &[hi, sa])
    }
}

/// The bits of a `w`-bit value that are the low half of each `2k`-bit group.
fn swap_mask(w: u32, k: u32) -> u64 {
    let mut v = 0u64;
    let mut i = 0;
    while i < w {
        v |= ((1u64 << k) - 1) << i;
        i += 2 * k;
    }
    v
}
