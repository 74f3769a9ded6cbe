//! Bit operations on integer scalars (issue #23, item 1): `popcount`, `clz`, `ctz`,
//! `bit_reverse`, `rotate_left`, `rotate_right`, `bitfield_extract`, `bitfield_insert` and
//! `mul_hi`. Their meaning is in `docs/semantics.md` ("Bit operations"); [`BitOp::eval`] is
//! its executable form, which the interpreter runs and the backends are judged against.

use super::Scalar;

/// A bit operation. Each takes integer scalars of one type `T` (counts, offsets and rotate
/// amounts are `u32`) and yields a `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitOp {
    /// `popcount(x)`: the number of set bits.
    Popcount,
    /// `clz(x)`: leading zero bits; `clz(0)` is the width.
    Clz,
    /// `ctz(x)`: trailing zero bits; `ctz(0)` is the width.
    Ctz,
    /// `bit_reverse(x)`: bit `i` moves to bit `width - 1 - i`.
    BitReverse,
    /// `rotate_left(x, n)`: rotation by `n % width`.
    RotateLeft,
    /// `rotate_right(x, n)`: rotation by `n % width`.
    RotateRight,
    /// `bitfield_extract(x, offset, count)`: `count` bits from bit `offset`, zero-extended
    /// (unsigned `T`) or sign-extended (signed `T`); clamped to the width.
    BitfieldExtract,
    /// `bitfield_insert(base, insert, offset, count)`: `base` with `count` bits from bit
    /// `offset` replaced by the low bits of `insert`; clamped to the width.
    BitfieldInsert,
    /// `mul_hi(a, b)`: the high half of the double-width product (signed for signed `T`).
    MulHi,
}

impl BitOp {
    /// Every bit operation, in declaration order.
    pub const ALL: [BitOp; 9] = [
        BitOp::Popcount,
        BitOp::Clz,
        BitOp::Ctz,
        BitOp::BitReverse,
        BitOp::RotateLeft,
        BitOp::RotateRight,
        BitOp::BitfieldExtract,
        BitOp::BitfieldInsert,
        BitOp::MulHi,
    ];

    /// The text-format name.
    pub const fn name(self) -> &'static str {
        match self {
            BitOp::Popcount => "popcount",
            BitOp::Clz => "clz",
            BitOp::Ctz => "ctz",
            BitOp::BitReverse => "bit_reverse",
            BitOp::RotateLeft => "rotate_left",
            BitOp::RotateRight => "rotate_right",
            BitOp::BitfieldExtract => "bitfield_extract",
            BitOp::BitfieldInsert => "bitfield_insert",
            BitOp::MulHi => "mul_hi",
        }
    }

    /// The operation named `name` in the text format, if any.
    pub fn from_name(name: &str) -> Option<BitOp> {
        BitOp::ALL.into_iter().find(|m| m.name() == name)
    }

    /// How many arguments the operation takes.
    pub const fn arity(self) -> usize {
        match self {
            BitOp::Popcount | BitOp::Clz | BitOp::Ctz | BitOp::BitReverse => 1,
            BitOp::RotateLeft | BitOp::RotateRight | BitOp::MulHi => 2,
            BitOp::BitfieldExtract => 3,
            BitOp::BitfieldInsert => 4,
        }
    }

    /// Whether argument `i` is a `u32` amount (rotate amount, offset, count) rather than a
    /// value of the operation's type.
    pub const fn is_amount(self, i: usize) -> bool {
        match self {
            BitOp::RotateLeft | BitOp::RotateRight => i == 1,
            BitOp::BitfieldExtract => i >= 1,
            BitOp::BitfieldInsert => i >= 2,
            _ => false,
        }
    }

    /// The operation on lanes of integer type `s`. Values are the lanes' bits zero-extended
    /// to 64 (the low `width` bits matter); amounts are `u32` values. The result is the low
    /// `width` bits, zero-extended. This is the normative definition.
    pub fn eval(self, s: Scalar, a: &[u64]) -> u64 {
        let w = s.bits();
        let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let x = a[0] & mask;
        // Sign-extends the low `w` bits of `v` to 64.
        let sext = |v: u64| ((v << (64 - w)) as i64 >> (64 - w)) as u64;
        let r = match self {
            BitOp::Popcount => u64::from(x.count_ones()),
            BitOp::Clz => u64::from(x.leading_zeros() - (64 - w)),
            BitOp::Ctz => u64::from(x.trailing_zeros().min(w)),
            BitOp::BitReverse => x.reverse_bits() >> (64 - w),
            BitOp::RotateLeft | BitOp::RotateRight => {
                let n = (a[1] as u32) % w;
                let n = if self == BitOp::RotateLeft {
                    n
                } else {
                    (w - n) % w
                };
                if n == 0 {
                    x
                } else {
                    (x << n) | (x >> (w - n))
                }
            }
            BitOp::BitfieldExtract => {
                let (off, cnt) = clamp_field(w, a[1] as u32, a[2] as u32);
                if cnt == 0 {
                    0
                } else {
                    let field = (x >> off) & low_mask(cnt);
                    if s.is_signed() {
                        // Sign-extend from bit `cnt - 1` of the field.
                        ((field << (64 - cnt)) as i64 >> (64 - cnt)) as u64
                    } else {
                        field
                    }
                }
            }
            BitOp::BitfieldInsert => {
                let (off, cnt) = clamp_field(w, a[2] as u32, a[3] as u32);
                let m = if cnt == 0 { 0 } else { low_mask(cnt) << off };
                (x & !m) | ((a[1] << off.min(63)) & m)
            }
            BitOp::MulHi => {
                let y = a[1] & mask;
                if s.is_signed() {
                    let p = i128::from(sext(x) as i64) * i128::from(sext(y) as i64);
                    (p >> w) as u64
                } else {
                    let p = u128::from(x) * u128::from(y);
                    (p >> w) as u64
                }
            }
        };
        r & mask
    }
}

/// The field `offset`, `count` of a `w`-bit integer, clamped: the offset to at most `w`, the
/// count to the bits that remain above the offset.
pub const fn clamp_field(w: u32, offset: u32, count: u32) -> (u32, u32) {
    let off = if offset < w { offset } else { w };
    let room = w - off;
    (off, if count < room { count } else { room })
}

/// The low `n` bits set, `1 <= n <= 64`.
const fn low_mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_at_every_width() {
        assert_eq!(BitOp::Clz.eval(Scalar::U8, &[0]), 8);
        assert_eq!(BitOp::Ctz.eval(Scalar::I16, &[0]), 16);
        assert_eq!(BitOp::Clz.eval(Scalar::U64, &[1]), 63);
        assert_eq!(BitOp::Popcount.eval(Scalar::I8, &[0xff]), 8);
        assert_eq!(BitOp::BitReverse.eval(Scalar::U8, &[1]), 0x80);
        assert_eq!(BitOp::RotateLeft.eval(Scalar::U8, &[0x81, 9]), 0x03);
        assert_eq!(BitOp::RotateRight.eval(Scalar::U32, &[1, 1]), 0x8000_0000);
    }

    #[test]
    fn fields_clamp() {
        // Signed extract sign-extends from the field's top bit.
        assert_eq!(BitOp::BitfieldExtract.eval(Scalar::I8, &[0x70, 4, 3]), 0xff);
        assert_eq!(BitOp::BitfieldExtract.eval(Scalar::U8, &[0xf0, 6, 100]), 3);
        assert_eq!(BitOp::BitfieldExtract.eval(Scalar::U32, &[5, 40, 4]), 0);
        assert_eq!(
            BitOp::BitfieldInsert.eval(Scalar::U8, &[0, 0xff, 6, 8]),
            0xc0
        );
        assert_eq!(
            BitOp::BitfieldInsert.eval(Scalar::U8, &[0x5a, 0xff, 8, 8]),
            0x5a
        );
        assert_eq!(
            BitOp::BitfieldInsert.eval(Scalar::U64, &[0, u64::MAX, 0, 64]),
            u64::MAX
        );
    }

    #[test]
    fn mul_hi_signed_and_unsigned() {
        assert_eq!(BitOp::MulHi.eval(Scalar::U32, &[u32::MAX as u64, 2]), 1);
        // -1 * 2 = -2: the high half is all ones.
        assert_eq!(
            BitOp::MulHi.eval(Scalar::I32, &[u32::MAX as u64, 2]),
            0xffff_ffff
        );
        assert_eq!(
            BitOp::MulHi.eval(Scalar::U64, &[u64::MAX, u64::MAX]),
            u64::MAX - 1
        );
    }
}
