//! The type system. Types are small `Copy` values; the only module-level indirection is a
//! function-tag type, which names a [`TagSet`](super::TagSet) by handle, and a length that a
//! template parameter decides, which names a [`ConstExpr`](super::ConstExpr) by handle.

use super::{ConstExpr, Handle, TagSet};

/// A scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    /// `bool`: `true` or `false`, one byte in memory.
    Bool,
    /// `i8`: signed 8-bit integer.
    I8,
    /// `i16`: signed 16-bit integer.
    I16,
    /// `i32`: signed 32-bit integer.
    I32,
    /// `i64`: signed 64-bit integer.
    I64,
    /// `u8`: unsigned 8-bit integer.
    U8,
    /// `u16`: unsigned 16-bit integer.
    U16,
    /// `u32`: unsigned 32-bit integer.
    U32,
    /// `u64`: unsigned 64-bit integer.
    U64,
    /// `f16`: IEEE 754 binary16.
    F16,
    /// `f32`: IEEE 754 binary32.
    F32,
    /// `f64`: IEEE 754 binary64.
    F64,
}

impl Scalar {
    /// Every scalar type, in declaration order.
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

    /// The scalar named `name` in the text format, if any.
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

    /// Size in bits as stored in memory (`bool` is 8).
    pub const fn bits(self) -> u32 {
        self.size() * 8
    }

    /// Whether the type is `f16`, `f32` or `f64`.
    pub const fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::F32 | Scalar::F64)
    }

    /// Whether the type is a signed or unsigned integer.
    pub const fn is_int(self) -> bool {
        self.is_signed() || self.is_unsigned()
    }

    /// Whether the type is `i8`, `i16`, `i32` or `i64`.
    pub const fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64)
    }

    /// Whether the type is `u8`, `u16`, `u32` or `u64`.
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
    /// The lane type.
    pub scalar: Scalar,
    /// The lane count; 1 for a scalar element.
    pub lanes: u8,
}

impl ElemType {
    /// A scalar element.
    pub const fn scalar(scalar: Scalar) -> Self {
        ElemType { scalar, lanes: 1 }
    }

    /// A vector element of `lanes` lanes of `scalar`.
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

    /// Size in bytes of one element in memory (lane size times lanes).
    pub const fn size(self) -> u32 {
        self.scalar.size() * self.lanes as u32
    }
}

/// The lane counts a vector may have.
pub const VECTOR_LANES: [u8; 5] = [2, 3, 4, 8, 16];

/// Whether a global buffer parameter may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read only (`buf<T>`).
    Read,
    /// Read and written (`buf<T, rw>`).
    ReadWrite,
    /// Read only, and the same for every work-item of a launch: the constant address space
    /// (`buf<T, const>`; contract §2.2 `Constant`). A uniform buffer on Vulkan, an invariant
    /// (`ld.global.nc`) read on NVPTX, address space 4 (scalar loads) on AMDGPU, plain memory
    /// on the CPU. Its size is bounded by the device's constant limit at launch.
    Constant,
}

impl Access {
    /// Whether the kernel may not write the buffer (`Read` and `Constant`).
    pub const fn read_only(self) -> bool {
        !matches!(self, Access::ReadWrite)
    }

    /// The text format's spelling of a buffer of element `elem` (already spelled).
    pub fn buffer_name(self, elem: &str) -> String {
        match self {
            Access::Read => format!("buf<{elem}>"),
            Access::ReadWrite => format!("buf<{elem}, rw>"),
            Access::Constant => format!("buf<{elem}, const>"),
        }
    }
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
    /// The role's name in the text format: `a`, `b` or `acc`.
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
    /// A length known now.
    Fixed(u32),
    /// A constant expression over the enclosing template's parameters; instantiation turns it
    /// into `Fixed`.
    Const(Handle<ConstExpr>),
}

/// A type of a value, a parameter or a local.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A scalar value.
    Scalar(Scalar),
    /// A vector of 2, 3, 4, 8 or 16 lanes.
    Vector(Scalar, u8),
    /// A global buffer (kernel parameters; helper parameters, by reference).
    Buffer {
        /// The element type.
        elem: ElemType,
        /// Whether the kernel may write it.
        access: Access,
    },
    /// A private (per-work-item) array (locals; helper parameters, by reference).
    Array {
        /// The element type.
        elem: ElemType,
        /// The element count.
        len: Len,
    },
    /// A cooperative-matrix fragment, owned by a wave.
    Matrix {
        /// Which operand of the multiply-add it is.
        role: MatrixRole,
        /// The element type.
        scalar: Scalar,
        /// Rows.
        rows: u8,
        /// Columns.
        cols: u8,
    },
    /// A function tag: an index into a closed set of device helpers.
    Tag(Handle<TagSet>),
    /// A workgroup (shared) array passed by reference: helper parameters only
    /// (`s: shared [E; N]`, or `s: shared [E]` for any length).
    Shared {
        /// The element type.
        elem: ElemType,
        /// The element count; `None` accepts a shared array of any length.
        len: Option<Len>,
    },
}

impl Type {
    /// `bool`.
    pub const BOOL: Type = Type::Scalar(Scalar::Bool);
    /// `i32`.
    pub const I32: Type = Type::Scalar(Scalar::I32);
    /// `u32`.
    pub const U32: Type = Type::Scalar(Scalar::U32);
    /// `i64`.
    pub const I64: Type = Type::Scalar(Scalar::I64);
    /// `u64`.
    pub const U64: Type = Type::Scalar(Scalar::U64);
    /// `f32`.
    pub const F32: Type = Type::Scalar(Scalar::F32);
    /// `f64`.
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

    /// Memory passed by reference: a buffer, a shared array or a private array (as a
    /// helper's parameter, the types its caller passes an [`crate::ir::Expr::Ref`] for).
    pub const fn is_memory(self) -> bool {
        matches!(
            self,
            Type::Buffer { .. } | Type::Array { .. } | Type::Shared { .. }
        )
    }
}
