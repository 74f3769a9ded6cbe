//! Expressions. Each function owns an arena of them; statements refer to expressions by
//! [`ExprId`]. An expression is a tree: the verifier requires that every expression handle
//! has exactly one parent (one use), so evaluation order and side effects are those of the
//! printed source. Operands are evaluated left to right, except the short-circuit operators
//! `&&` and `||` and the two arms of `select` (both arms are evaluated; `select` is a value
//! choice, not control flow).

use super::{BitOp, Function, Handle, Local, MatrixRole, Scalar, SharedDecl, TagSet, Type};

pub type ExprId = Handle<Expr>;

/// A literal. Integers hold their two's-complement bits zero-extended to 64; floats hold the
/// value as an `f64` that is exactly representable in the literal's type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Bool(bool),
    Int { bits: u64, ty: Scalar },
    Float { value: f64, ty: Scalar },
}

impl Literal {
    pub const fn scalar(self) -> Scalar {
        match self {
            Literal::Bool(_) => Scalar::Bool,
            Literal::Int { ty, .. } | Literal::Float { ty, .. } => ty,
        }
    }

    /// An integer literal of type `ty` holding `value` (wrapped to the type's width).
    pub fn int(value: i128, ty: Scalar) -> Self {
        let bits = ty.bits();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        Literal::Int {
            bits: (value as u64) & mask,
            ty,
        }
    }

    pub fn float(value: f64, ty: Scalar) -> Self {
        Literal::Float { value, ty }
    }
}

/// A dimension of a coordinate built-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    X,
    Y,
    Z,
}

impl Dim {
    pub const ALL: [Dim; 3] = [Dim::X, Dim::Y, Dim::Z];

    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            Dim::X => "x",
            Dim::Y => "y",
            Dim::Z => "z",
        }
    }
}

/// Values the launch gives every work-item. All are `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `group_id * group_size + local_id`.
    GlobalId(Dim),
    LocalId(Dim),
    GroupId(Dim),
    /// The block: work-items per workgroup.
    GroupSize(Dim),
    /// The grid: workgroups per launch.
    NumGroups(Dim),
    /// `Group.width()`: the lane count of the wave the kernel runs in.
    WaveWidth,
    /// The work-item's lane within its wave: its linear local index modulo the wave width.
    LaneId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Arithmetic negation (wrapping for integers).
    Neg,
    /// Logical not on `bool`, bitwise not on integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Short-circuit `&&`: the right operand runs only when the left is true.
    LogicalAnd,
    /// Short-circuit `||`: the right operand runs only when the left is false.
    LogicalOr,
}

impl BinaryOp {
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// Math built-ins. Each works element-wise on scalars and vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Sqrt,
    Rsqrt,
    Exp,
    Exp2,
    Log,
    Log2,
    Sin,
    Cos,
    Tanh,
    Pow,
    Fma,
    Min,
    Max,
    Abs,
    Floor,
    Ceil,
    Round,
    Trunc,
    Clamp,
}

impl MathFn {
    pub const ALL: [MathFn; 19] = [
        MathFn::Sqrt,
        MathFn::Rsqrt,
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tanh,
        MathFn::Pow,
        MathFn::Fma,
        MathFn::Min,
        MathFn::Max,
        MathFn::Abs,
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Round,
        MathFn::Trunc,
        MathFn::Clamp,
    ];

    /// `exp exp2 log log2 sin cos tanh pow`: the functions a backend builds from arithmetic
    /// where the device's own are loose or missing.
    pub const fn is_transcendental(self) -> bool {
        matches!(
            self,
            MathFn::Exp
                | MathFn::Exp2
                | MathFn::Log
                | MathFn::Log2
                | MathFn::Sin
                | MathFn::Cos
                | MathFn::Tanh
                | MathFn::Pow
        )
    }

    pub const fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Exp => "exp",
            MathFn::Exp2 => "exp2",
            MathFn::Log => "log",
            MathFn::Log2 => "log2",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tanh => "tanh",
            MathFn::Pow => "pow",
            MathFn::Fma => "fma",
            MathFn::Min => "min",
            MathFn::Max => "max",
            MathFn::Abs => "abs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Round => "round",
            MathFn::Trunc => "trunc",
            MathFn::Clamp => "clamp",
        }
    }

    pub fn from_name(name: &str) -> Option<MathFn> {
        MathFn::ALL.into_iter().find(|m| m.name() == name)
    }

    pub const fn arity(self) -> usize {
        match self {
            MathFn::Pow | MathFn::Min | MathFn::Max => 2,
            MathFn::Fma | MathFn::Clamp => 3,
            _ => 1,
        }
    }

    /// Float-only functions; the rest (`min`, `max`, `abs`, `clamp`) also take integers.
    pub const fn float_only(self) -> bool {
        !matches!(
            self,
            MathFn::Min | MathFn::Max | MathFn::Abs | MathFn::Clamp
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Sub,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exchange,
    /// Stores `value` when the current value equals `compare`; returns the old value.
    CompareExchange,
    /// CUDA's `atomicInc`: `old >= value ? 0 : old + 1` (unsigned comparison of the bits).
    Inc,
    /// CUDA's `atomicDec`: `old == 0 || old > value ? value : old - 1` (unsigned).
    Dec,
}

impl AtomicOp {
    pub const ALL: [AtomicOp; 11] = [
        AtomicOp::Add,
        AtomicOp::Sub,
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
        AtomicOp::Exchange,
        AtomicOp::CompareExchange,
        AtomicOp::Inc,
        AtomicOp::Dec,
    ];

    /// Whether the atomic applies to an element of scalar `s`: every operation on `i32 u32
    /// i64 u64`; `atomic_add`, `atomic_min`, `atomic_max` on `f32`; `atomic_add` on `f64` and
    /// `f16`.
    pub const fn takes(self, s: Scalar) -> bool {
        match s {
            Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 => true,
            Scalar::F32 => matches!(self, AtomicOp::Add | AtomicOp::Min | AtomicOp::Max),
            Scalar::F64 | Scalar::F16 => matches!(self, AtomicOp::Add),
            _ => false,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "atomic_add",
            AtomicOp::Sub => "atomic_sub",
            AtomicOp::Min => "atomic_min",
            AtomicOp::Max => "atomic_max",
            AtomicOp::And => "atomic_and",
            AtomicOp::Or => "atomic_or",
            AtomicOp::Xor => "atomic_xor",
            AtomicOp::Exchange => "atomic_exchange",
            AtomicOp::CompareExchange => "atomic_compare_exchange",
            AtomicOp::Inc => "atomic_inc",
            AtomicOp::Dec => "atomic_dec",
        }
    }

    pub fn from_name(name: &str) -> Option<AtomicOp> {
        AtomicOp::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The contract's `MemoryOrder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryOrder {
    Relaxed,
    Acquire,
    Release,
    AcqRel,
    SeqCst,
}

impl MemoryOrder {
    pub const ALL: [MemoryOrder; 5] = [
        MemoryOrder::Relaxed,
        MemoryOrder::Acquire,
        MemoryOrder::Release,
        MemoryOrder::AcqRel,
        MemoryOrder::SeqCst,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            MemoryOrder::Relaxed => "relaxed",
            MemoryOrder::Acquire => "acquire",
            MemoryOrder::Release => "release",
            MemoryOrder::AcqRel => "acq_rel",
            MemoryOrder::SeqCst => "seq_cst",
        }
    }

    pub fn from_name(name: &str) -> Option<MemoryOrder> {
        MemoryOrder::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The combining operator of a wave reduction or scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Min,
    Max,
    And,
    Or,
    Xor,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 6] = [
        ReduceOp::Sum,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
        }
    }
}

/// Wave (subgroup) verbs. Each is a rendezvous of the wave's active lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaveOp {
    /// `wave_reduce_<op>(value)`: the reduction over active lanes, in every active lane.
    Reduce(ReduceOp),
    /// `wave_inclusive_scan_<op>(value)`: over active lanes with a lower lane id, and this one.
    InclusiveScan(ReduceOp),
    /// `wave_exclusive_scan_<op>(value)`: over active lanes with a lower lane id; the
    /// operator's identity in the first.
    ExclusiveScan(ReduceOp),
    /// `wave_broadcast(value, lane)`: `lane` must be uniform and active.
    Broadcast,
    /// `wave_shuffle(value, lane)`: the value of lane `lane`.
    Shuffle,
    /// `wave_shuffle_xor(value, mask)`: the value of lane `lane_id ^ mask`.
    ShuffleXor,
    /// `wave_shuffle_up(value, delta)`: the value of lane `lane_id - delta`, own if none.
    ShuffleUp,
    /// `wave_shuffle_down(value, delta)`: the value of lane `lane_id + delta`, own if none.
    ShuffleDown,
    /// `wave_rotate(value, delta)`: the value of lane `(lane_id + delta) % width`.
    Rotate,
    /// `wave_ballot(pred)`: a `u64` mask of active lanes whose `pred` is true.
    Ballot,
    /// `wave_any(pred)`.
    Any,
    /// `wave_all(pred)`.
    All,
    /// `wave_elect()`: true in exactly the lowest active lane.
    Elect,
}

/// What an indexed access addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// A buffer parameter, by parameter index.
    Param(u32),
    /// A workgroup (shared) array of the kernel.
    Shared(Handle<SharedDecl>),
    /// A private array local.
    Local(Handle<Local>),
}

/// The target of an assignment or an atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// A whole local.
    Local(Handle<Local>),
    /// One lane of a vector local.
    Lane { local: Handle<Local>, lane: u8 },
    /// An element of a buffer, shared array or private array.
    Element { base: Base, index: ExprId },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Literal(Literal),
    /// A function parameter, by index.
    Param(u32),
    Local(Handle<Local>),
    /// A constant parameter of the enclosing template (type `u32`), by index.
    TemplateParam(u32),
    Builtin(Builtin),
    Unary {
        op: UnaryOp,
        arg: ExprId,
    },
    Binary {
        op: BinaryOp,
        lhs: ExprId,
        rhs: ExprId,
    },
    /// A value conversion to `to` (lane count kept); semantics in `docs/semantics.md`.
    Cast {
        to: Scalar,
        arg: ExprId,
    },
    /// A reinterpretation of the bits as `to`, which must have the same size.
    Bitcast {
        to: Type,
        arg: ExprId,
    },
    Select {
        cond: ExprId,
        accept: ExprId,
        reject: ExprId,
    },
    /// `if cond { accept } else { reject }`: `cond` is a `bool` scalar and only the arm it
    /// picks is evaluated (unlike `Select`, which evaluates both).
    IfElse {
        cond: ExprId,
        accept: ExprId,
        reject: ExprId,
    },
    /// A vector built from scalars and smaller vectors whose lanes add up to `lanes`.
    Compose {
        scalar: Scalar,
        lanes: u8,
        parts: Vec<ExprId>,
    },
    /// A vector with `value` in every lane.
    Splat {
        lanes: u8,
        value: ExprId,
    },
    /// One lane of a vector (`v.x`, `v[2]` with a constant index).
    Extract {
        vector: ExprId,
        lane: u8,
    },
    /// A vector of selected lanes (`v.zyx`); at least two lanes.
    Swizzle {
        vector: ExprId,
        lanes: Vec<u8>,
    },
    /// An element read of a buffer, shared array or private array.
    Index {
        base: Base,
        index: ExprId,
    },
    /// The element count of a buffer parameter (`u32`).
    Len(u32),
    Call {
        function: Handle<Function>,
        args: Vec<ExprId>,
    },
    /// The tag naming member `index` of a tag set.
    Tag {
        set: Handle<TagSet>,
        index: u32,
    },
    /// A call through a tag: the member the tag names. An out-of-range tag does nothing and
    /// yields the zero of the result type.
    Dispatch {
        tag: ExprId,
        args: Vec<ExprId>,
    },
    Math {
        fun: MathFn,
        args: Vec<ExprId>,
    },
    /// Read-modify-write of `place` (a buffer or shared element); yields the old value.
    Atomic {
        op: AtomicOp,
        order: MemoryOrder,
        place: Place,
        value: ExprId,
        /// The expected value, for `CompareExchange` only.
        compare: Option<ExprId>,
    },
    Wave {
        op: WaveOp,
        args: Vec<ExprId>,
    },
    /// `vload<N>(buffer, index)`: `lanes` consecutive scalars starting at scalar `index` of a
    /// scalar buffer, as a vector. `align` is the promised alignment in bytes.
    VLoad {
        base: Base,
        index: ExprId,
        lanes: u8,
        align: Option<u8>,
    },
    /// A fragment with every element `value`.
    MatrixFill {
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        value: ExprId,
    },
    /// A fragment read row-major from `base` at element `offset`, rows `stride` apart.
    MatrixLoad {
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        base: Base,
        offset: ExprId,
        stride: ExprId,
    },
    /// `a × b + c`.
    MatrixMma {
        a: ExprId,
        b: ExprId,
        c: ExprId,
    },
    /// A bit operation on integer scalars (`popcount(x)`, `bitfield_extract(x, off, n)`, ...).
    Bits {
        op: BitOp,
        args: Vec<ExprId>,
    },
    /// `atomic_load(b[i], order)`: an indivisible read of a buffer or shared element
    /// (`relaxed`, `acquire` or `seq_cst`).
    AtomicLoad {
        order: MemoryOrder,
        place: Place,
    },
    /// `atomic_store(b[i], value, order)`: an indivisible write of a buffer or shared element
    /// (`relaxed`, `release` or `seq_cst`); yields nothing, so it is a statement.
    AtomicStore {
        order: MemoryOrder,
        place: Place,
        value: ExprId,
    },
}

impl Expr {
    /// The direct operand expressions, in evaluation order.
    pub fn operands(&self) -> Vec<ExprId> {
        let mut out = Vec::new();
        self.for_each_operand(|e| out.push(e));
        out
    }

    /// The direct operand handles, mutably, in evaluation order (for passes that rebuild an
    /// expression tree elsewhere).
    pub fn operands_mut(&mut self) -> Vec<&mut ExprId> {
        match self {
            Expr::Literal(_)
            | Expr::Param(_)
            | Expr::Local(_)
            | Expr::TemplateParam(_)
            | Expr::Builtin(_)
            | Expr::Len(_)
            | Expr::Tag { .. } => vec![],
            Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } => {
                vec![arg]
            }
            Expr::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            Expr::Select {
                cond,
                accept,
                reject,
            } => vec![cond, accept, reject],
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => vec![cond, accept, reject],
            Expr::Compose { parts, .. } => parts.iter_mut().collect(),
            Expr::Splat { value, .. } => vec![value],
            Expr::Extract { vector, .. } | Expr::Swizzle { vector, .. } => vec![vector],
            Expr::Index { index, .. } | Expr::VLoad { index, .. } => vec![index],
            Expr::Call { args, .. }
            | Expr::Math { args, .. }
            | Expr::Wave { args, .. }
            | Expr::Bits { args, .. } => args.iter_mut().collect(),
            Expr::Dispatch { tag, args } => std::iter::once(tag).chain(args.iter_mut()).collect(),
            Expr::Atomic {
                place,
                value,
                compare,
                ..
            } => {
                let mut out = Vec::new();
                if let Place::Element { index, .. } = place {
                    out.push(index);
                }
                if let Some(c) = compare {
                    out.push(c);
                }
                out.push(value);
                out
            }
            Expr::AtomicLoad { place, .. } => match place {
                Place::Element { index, .. } => vec![index],
                _ => vec![],
            },
            Expr::AtomicStore { place, value, .. } => match place {
                Place::Element { index, .. } => vec![index, value],
                _ => vec![value],
            },
            Expr::MatrixFill { value, .. } => vec![value],
            Expr::MatrixLoad { offset, stride, .. } => vec![offset, stride],
            Expr::MatrixMma { a, b, c } => vec![a, b, c],
        }
    }

    /// Calls `f` on each direct operand, in evaluation order.
    pub fn for_each_operand(&self, mut f: impl FnMut(ExprId)) {
        match self {
            Expr::Literal(_)
            | Expr::Param(_)
            | Expr::Local(_)
            | Expr::TemplateParam(_)
            | Expr::Builtin(_)
            | Expr::Len(_)
            | Expr::Tag { .. } => {}
            Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } => f(*arg),
            Expr::Binary { lhs, rhs, .. } => {
                f(*lhs);
                f(*rhs);
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                f(*cond);
                f(*accept);
                f(*reject);
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => {
                f(*cond);
                f(*accept);
                f(*reject);
            }
            Expr::Compose { parts, .. } => parts.iter().copied().for_each(f),
            Expr::Splat { value, .. } => f(*value),
            Expr::Extract { vector, .. } | Expr::Swizzle { vector, .. } => f(*vector),
            Expr::Index { base, index } => {
                let _ = base;
                f(*index)
            }
            Expr::Call { args, .. }
            | Expr::Math { args, .. }
            | Expr::Wave { args, .. }
            | Expr::Bits { args, .. } => args.iter().copied().for_each(f),
            Expr::Dispatch { tag, args } => {
                f(*tag);
                args.iter().copied().for_each(f);
            }
            Expr::Atomic {
                place,
                value,
                compare,
                ..
            } => {
                if let Place::Element { index, .. } = place {
                    f(*index);
                }
                if let Some(c) = compare {
                    f(*c);
                }
                f(*value);
            }
            Expr::VLoad { index, .. } => f(*index),
            Expr::AtomicLoad { place, .. } => {
                if let Place::Element { index, .. } = place {
                    f(*index);
                }
            }
            Expr::AtomicStore { place, value, .. } => {
                if let Place::Element { index, .. } = place {
                    f(*index);
                }
                f(*value);
            }
            Expr::MatrixFill { value, .. } => f(*value),
            Expr::MatrixLoad { offset, stride, .. } => {
                f(*offset);
                f(*stride);
            }
            Expr::MatrixMma { a, b, c } => {
                f(*a);
                f(*b);
                f(*c);
            }
        }
    }
}
