//! Lane vectors: how one IR value of a wave is held in Cranelift values, and the primitive
//! operations on them.
//!
//! A wave of `N` lanes holds a scalar of type `T` as one of:
//! - [`Val::U`]: a uniform scalar (the same in every lane);
//! - [`Val::A`]: an affine integer, lane `i` = `base + i × stride` (wrapping);
//! - [`Val::V`]: *chunks*, 128-bit Cranelift vectors of `T`'s lanes in lane order
//!   (`ceil(N / lanes_per_chunk)` of them; lanes past `N` in the last chunk are junk).
//!
//! `bool` is held as `i8` 0/1 when uniform and as `i32` lanes of all-ones/zero when varying:
//! a varying `bool` *is* a lane mask, in the geometry of 32-bit lanes. Masks convert to the
//! geometry of narrower or wider element types for blends. `f16` travels as its 16 bits.

use crate::ir::Scalar;
use cranelift_codegen::ir::{types, Type};

/// One scalar component of a wave's value.
#[derive(Clone, Debug)]
pub enum Val {
    U(cranelift_codegen::ir::Value),
    A(cranelift_codegen::ir::Value, i64),
    V(Vec<cranelift_codegen::ir::Value>),
}

/// The Cranelift type of a uniform scalar of `s`.
pub fn uty(s: Scalar) -> Type {
    match s {
        Scalar::Bool | Scalar::I8 | Scalar::U8 => types::I8,
        Scalar::I16 | Scalar::U16 | Scalar::F16 => types::I16,
        Scalar::I32 | Scalar::U32 => types::I32,
        Scalar::F32 => types::F32,
        Scalar::I64 | Scalar::U64 => types::I64,
        Scalar::F64 => types::F64,
    }
}

/// The Cranelift type of one chunk of a varying `s`.
pub fn vty(s: Scalar) -> Type {
    match s {
        Scalar::Bool => types::I32X4,
        Scalar::I8 | Scalar::U8 => types::I8X16,
        Scalar::I16 | Scalar::U16 | Scalar::F16 => types::I16X8,
        Scalar::I32 | Scalar::U32 => types::I32X4,
        Scalar::F32 => types::F32X4,
        Scalar::I64 | Scalar::U64 => types::I64X2,
        Scalar::F64 => types::F64X2,
    }
}

/// The integer type of `s`'s lanes as held (floats by their bits).
pub fn int_ty(s: Scalar) -> Type {
    match s {
        Scalar::F32 => types::I32,
        Scalar::F64 => types::I64,
        Scalar::Bool => types::I32,
        _ => uty(s),
    }
}

/// Lanes of `s` per chunk.
pub fn per_chunk(s: Scalar) -> u32 {
    vty(s).lane_count()
}

/// Chunks of `s` for a wave of `n` lanes.
pub fn chunks(s: Scalar, n: u32) -> u32 {
    n.div_ceil(per_chunk(s))
}

/// The in-memory size of a held chunk lane (bool lanes are 4 bytes in a register).
pub fn lane_bytes(s: Scalar) -> u32 {
    vty(s).lane_bits() / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry() {
        assert_eq!(chunks(Scalar::F32, 8), 2);
        assert_eq!(chunks(Scalar::F64, 8), 4);
        assert_eq!(chunks(Scalar::U8, 8), 1);
        assert_eq!(chunks(Scalar::Bool, 64), 16);
        assert_eq!(chunks(Scalar::I32, 1), 1);
    }
}
