//! The memory layout of `struct` types (issue 23 item 5, `docs/semantics.md`, "Structs"):
//! the std430 rules on every backend, so the same host bytes mean the same thing everywhere.
//!
//! - A scalar field is aligned to its size; a `vec2` to twice its lane size; a `vec3` or
//!   `vec4` to four times its lane size (a `vec3<f32>` is 12 bytes aligned to 16).
//! - A struct field is aligned to its struct's alignment, the largest alignment of its
//!   members; a struct's size is rounded up to its alignment, and that is the stride of a
//!   buffer of it.
//!
//! Fields are the 32- and 64-bit scalars (`i32 u32 f32 i64 u64 f64`), vectors of 2 to 4 of
//! them, and other structs. [`StructLayout`] computes offsets and sizes for the host (sizing
//! a buffer, writing its bytes) and for the text format's struct lowering
//! (`xpu::ir::text`), which turns every struct into its fields before any backend sees it.

use super::{ElemType, Scalar};

/// The type of one field as the layout sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldType {
    /// A scalar or a vector of 2 to 4 lanes of a 32- or 64-bit scalar (not `bool`).
    Elem(ElemType),
    /// A nested struct, by value.
    Struct(StructLayout),
}

/// One field placed in its struct.
#[derive(Clone, Debug, PartialEq)]
pub struct LaidField {
    /// The field's name.
    pub name: String,
    /// Its byte offset from the start of the struct.
    pub offset: u32,
    /// Its type.
    pub ty: FieldType,
}

/// A scalar or vector reached through a chain of fields (`pos`, `inner.count`), with its byte
/// offset from the start of the outermost struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The field names from the outermost struct down.
    pub path: Vec<String>,
    /// The byte offset.
    pub offset: u32,
    /// The scalar or vector stored there.
    pub elem: ElemType,
}

/// Why a struct has no layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The struct has no fields.
    Empty,
    /// Two fields share a name.
    DuplicateField(String),
    /// A field's element is not a 32- or 64-bit scalar or a 2- to 4-lane vector of one.
    Unsupported(String, ElemType),
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutError::Empty => write!(f, "a struct needs at least one field"),
            LayoutError::DuplicateField(n) => write!(f, "field `{n}` is declared twice"),
            LayoutError::Unsupported(n, e) => write!(
                f,
                "field `{n}` has an element of {} bytes in {} lanes; struct fields are 32- or \
                 64-bit scalars (i32 u32 f32 i64 u64 f64), vectors of 2 to 4 of them, or structs",
                e.scalar.size(),
                e.lanes
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

/// The std430 alignment of a field element, or `None` where structs cannot hold it.
pub fn elem_align(e: ElemType) -> Option<u32> {
    let s = e.scalar;
    if s == Scalar::Bool || s.size() < 4 {
        return None;
    }
    match e.lanes {
        1 => Some(s.size()),
        2 => Some(2 * s.size()),
        3 | 4 => Some(4 * s.size()),
        _ => None,
    }
}

/// A struct's fields at their std430 offsets, its size and its alignment.
#[derive(Clone, Debug, PartialEq)]
pub struct StructLayout {
    name: String,
    fields: Vec<LaidField>,
    size: u32,
    align: u32,
}

impl StructLayout {
    /// Lays out `fields` in order by the std430 rules.
    ///
    /// ```
    /// use xpu::ir::struct_layout::{FieldType, StructLayout};
    /// use xpu::ir::{ElemType, Scalar};
    /// let p = StructLayout::new(
    ///     "Particle",
    ///     vec![
    ///         ("pos".into(), FieldType::Elem(ElemType::vector(Scalar::F32, 3))),
    ///         ("vel".into(), FieldType::Elem(ElemType::vector(Scalar::F32, 3))),
    ///         ("mass".into(), FieldType::Elem(ElemType::scalar(Scalar::F32))),
    ///     ],
    /// )
    /// .unwrap();
    /// assert_eq!((p.offset_of("vel"), p.offset_of("mass")), (Some(16), Some(28)));
    /// assert_eq!((p.size(), p.align()), (32, 16));
    /// ```
    pub fn new(name: &str, fields: Vec<(String, FieldType)>) -> Result<Self, LayoutError> {
        if fields.is_empty() {
            return Err(LayoutError::Empty);
        }
        let mut laid: Vec<LaidField> = Vec::with_capacity(fields.len());
        let (mut end, mut align) = (0u32, 1u32);
        for (fname, ty) in fields {
            if laid.iter().any(|f| f.name == fname) {
                return Err(LayoutError::DuplicateField(fname));
            }
            let (fsize, falign) = match &ty {
                FieldType::Elem(e) => match elem_align(*e) {
                    Some(a) => (e.size(), a),
                    None => return Err(LayoutError::Unsupported(fname, *e)),
                },
                FieldType::Struct(s) => (s.size, s.align),
            };
            let offset = end.div_ceil(falign) * falign;
            end = offset + fsize;
            align = align.max(falign);
            laid.push(LaidField {
                name: fname,
                offset,
                ty,
            });
        }
        Ok(StructLayout {
            name: name.to_string(),
            fields: laid,
            size: end.div_ceil(align) * align,
            align,
        })
    }

    /// The struct's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fields in declaration order.
    pub fn fields(&self) -> &[LaidField] {
        &self.fields
    }

    /// The size in bytes, a multiple of [`align`](Self::align): the stride of a buffer of it.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The alignment in bytes: the largest alignment of a member.
    pub fn align(&self) -> u32 {
        self.align
    }

    /// Every scalar or vector the struct holds, depth first in declaration order.
    pub fn leaves(&self) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.push_leaves(&mut Vec::new(), 0, &mut out);
        out
    }

    fn push_leaves(&self, path: &mut Vec<String>, base: u32, out: &mut Vec<Leaf>) {
        for f in &self.fields {
            path.push(f.name.clone());
            match &f.ty {
                FieldType::Elem(e) => out.push(Leaf {
                    path: path.clone(),
                    offset: base + f.offset,
                    elem: *e,
                }),
                FieldType::Struct(s) => s.push_leaves(path, base + f.offset, out),
            }
            path.pop();
        }
    }

    /// The byte offset of a field named by a dotted path (`"inner.count"`), if there is one.
    pub fn offset_of(&self, path: &str) -> Option<u32> {
        let mut cur = self;
        let mut base = 0;
        let mut parts = path.split('.').peekable();
        while let Some(p) = parts.next() {
            let f = cur.fields.iter().find(|f| f.name == p)?;
            base += f.offset;
            match (&f.ty, parts.peek()) {
                (_, None) => return Some(base),
                (FieldType::Struct(s), Some(_)) => cur = s,
                (FieldType::Elem(_), Some(_)) => return None,
            }
        }
        None
    }

    /// The bytes a buffer of `count` of these structs takes.
    pub fn buffer_bytes(&self, count: u64) -> u64 {
        self.size as u64 * count
    }
}
