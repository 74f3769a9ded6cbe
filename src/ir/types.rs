//! The type system. Types are small `Copy` values; the only module-level indirection is a
//! function-tag type, which names a [`TagSet`](super::TagSet) by handle, and a length that a
//! template parameter decides, which names a [`ConstExpr`](super::ConstExpr) by handle.

use super::{ConstExpr, Handle, TagSet};

/// A scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

impl Scalar {
    pub const ALL: [Scalar; 12] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F16,
        Scalar::F32,
        Scalar::F64,
    ];

    /// The name used by the text format (`f32`, `u8`, `bool`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }

    pub fn from_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Size in bytes as stored in memory (`bool` is one byte).
    pub const fn size(self) -> u32 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    pub const fn bits(self) -> u32 {
        self.size() * 8
    }

    pub const fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::F32 | Scalar::F64)
    }

    pub const fn is_int(self) -> bool {
        self.is_signed() || self.is_unsigned()
    }

    pub const fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64)
    }

    pub const fn is_unsigned(self) -> bool {
        matches!(self, Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64)
    }

    /// Numeric: an integer or a float (not `bool`).
    pub const fn is_numeric(self) -> bool {
        !matches!(self, Scalar::Bool)
    }
}

/// The element type of a buffer, array or vector value: a scalar, or a vector of `lanes`
/// scalars. `lanes == 1` is the scalar itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElemType {
    pub scalar: Scalar,
    pub lanes: u8,
}

impl ElemType {
    pub const fn scalar(scalar: Scalar) -> Self {
        ElemType { scalar, lanes: 1 }
    }

    pub const fn vector(scalar: Scalar, lanes: u8) -> Self {
        ElemType { scalar, lanes }
    }

    /// The value type of one element.
    pub const fn value_type(self) -> Type {
        if self.lanes == 1 {
            Type::Scalar(self.scalar)
        } else {
            Type::Vector(self.scalar, self.lanes)
        }
    }

    pub const fn size(self) -> u32 {
        self.scalar.size() * self.lanes as u32
    }
}

/// The lane counts a vector may have.
pub const VECTOR_LANES: [u8; 5] = [2, 3, 4, 8, 16];

/// Whether a global buffer parameter may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    ReadWrite,
}

/// The role of a cooperative-matrix fragment in `D = A × B + C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixRole {
    /// The left operand, `rows × cols` = M × K.
    A,
    /// The right operand, K × N.
    B,
    /// The accumulator, M × N.
    Acc,
}

impl MatrixRole {
    pub const fn name(self) -> &'static str {
        match self {
            MatrixRole::A => "a",
            MatrixRole::B => "b",
            MatrixRole::Acc => "acc",
        }
    }
}

/// The length of an array: fixed, or decided by a template's constant parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Len {
    Fixed(u32),
    /// A constant expression over the enclosing template's parameters; instantiation turns it
    /// into `Fixed`.
    Const(Handle<ConstExpr>),
}

/// A type of a value, a parameter or a local.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Scalar(Scalar),
    /// A vector of 2, 3, 4, 8 or 16 lanes.
    Vector(Scalar, u8),
    /// A global buffer (kernel parameters only).
    Buffer {
        elem: ElemType,
        access: Access,
    },
    /// A private (per-work-item) array (locals only).
    Array {
        elem: ElemType,
        len: Len,
    },
    /// A cooperative-matrix fragment, owned by a wave.
    Matrix {
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
    },
    /// A function tag: an index into a closed set of device helpers.
    Tag(Handle<TagSet>),
}

impl Type {
    pub const BOOL: Type = Type::Scalar(Scalar::Bool);
    pub const I32: Type = Type::Scalar(Scalar::I32);
    pub const U32: Type = Type::Scalar(Scalar::U32);
    pub const I64: Type = Type::Scalar(Scalar::I64);
    pub const U64: Type = Type::Scalar(Scalar::U64);
    pub const F32: Type = Type::Scalar(Scalar::F32);
    pub const F64: Type = Type::Scalar(Scalar::F64);

    /// The scalar of a scalar or vector type.
    pub const fn scalar(self) -> Option<Scalar> {
        match self {
            Type::Scalar(s) | Type::Vector(s, _) => Some(s),
            _ => None,
        }
    }

    /// The lanes of a scalar (1) or vector type.
    pub const fn lanes(self) -> Option<u8> {
        match self {
            Type::Scalar(_) => Some(1),
            Type::Vector(_, n) => Some(n),
            _ => None,
        }
    }

    /// A scalar or vector type as an element type.
    pub const fn as_elem(self) -> Option<ElemType> {
        match self {
            Type::Scalar(s) => Some(ElemType::scalar(s)),
            Type::Vector(s, n) => Some(ElemType::vector(s, n)),
            _ => None,
        }
    }

    /// Scalars and vectors: the types arithmetic, locals and `select` work on.
    pub const fn is_value(self) -> bool {
        matches!(self, Type::Scalar(_) | Type::Vector(..))
    }
}
