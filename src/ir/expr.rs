//! Expressions. Each function owns an arena of them; statements refer to expressions by
//! [`ExprId`]. An expression is a tree: the verifier requires that every expression handle
//! has exactly one parent (one use), so evaluation order and side effects are those of the
//! printed source. Operands are evaluated left to right, except the short-circuit operators
//! `&&` and `||` and the two arms of `select` (both arms are evaluated; `select` is a value
//! choice, not control flow).

use super::{BitOp, Function, Handle, Local, MatrixRole, Scalar, SharedDecl, TagSet, Type};

/// A handle to an expression in its function's [`Function::exprs`] arena.
pub type ExprId = Handle<Expr>;

/// A literal. Integers hold their two's-complement bits zero-extended to 64; floats hold the
/// value as an `f64` that is exactly representable in the literal's type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    /// `true` or `false`.
    Bool(bool),
    /// An integer of type `ty`.
    Int {
        /// The two's-complement bits, zero-extended to 64.
        bits: u64,
        /// The integer type.
        ty: Scalar,
    },
    /// A float of type `ty`.
    Float {
        /// The value, exactly representable in `ty`.
        value: f64,
        /// The float type (`f16`, `f32`, `f64`).
        ty: Scalar,
    },
}

impl Literal {
    /// The literal's scalar type.
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

    /// A float literal of type `ty`; `value` must be exactly representable in `ty`.
    pub fn float(value: f64, ty: Scalar) -> Self {
        Literal::Float { value, ty }
    }
}

/// A dimension of a coordinate built-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// The first dimension.
    X,
    /// The second dimension.
    Y,
    /// The third dimension.
    Z,
}

impl Dim {
    /// `x`, `y`, `z` in order.
    pub const ALL: [Dim; 3] = [Dim::X, Dim::Y, Dim::Z];

    /// `0`, `1`, `2` for `x`, `y`, `z`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The name as written in the text format: `x`, `y` or `z`.
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
    /// The work-item's index within its workgroup.
    LocalId(Dim),
    /// The workgroup's index within the grid.
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
/// A unary operator.
pub enum UnaryOp {
    /// Arithmetic negation (wrapping for integers).
    Neg,
    /// Logical not on `bool`, bitwise not on integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// The binary operators of the IR; both operands have the same type (shifts included).
pub enum BinaryOp {
    /// `+` (wrapping for integers).
    Add,
    /// `-` (wrapping for integers).
    Sub,
    /// `*` (wrapping for integers).
    Mul,
    /// `/` (integer division truncates toward zero).
    Div,
    /// `%` (the remainder of truncating division).
    Rem,
    /// `&` on integers and `bool`.
    BitAnd,
    /// `|` on integers and `bool`.
    BitOr,
    /// `^` on integers and `bool`.
    BitXor,
    /// `<<`; the shift amount is taken modulo the width.
    Shl,
    /// `>>`, arithmetic on signed integers and logical on unsigned; the amount is taken modulo
    /// the width.
    Shr,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// Short-circuit `&&`: the right operand runs only when the left is true.
    LogicalAnd,
    /// Short-circuit `||`: the right operand runs only when the left is false.
    LogicalOr,
}

impl BinaryOp {
    /// Whether the operator compares (`== != < <= > >=`) and so yields `bool`.
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
    /// `sqrt(x)`.
    Sqrt,
    /// `rsqrt(x)`: `1 / sqrt(x)`.
    Rsqrt,
    /// `exp(x)`: e to the `x`.
    Exp,
    /// `exp2(x)`: 2 to the `x`.
    Exp2,
    /// `log(x)`: natural logarithm.
    Log,
    /// `log2(x)`: base-2 logarithm.
    Log2,
    /// `sin(x)` (radians).
    Sin,
    /// `cos(x)` (radians).
    Cos,
    /// `tanh(x)`.
    Tanh,
    /// `pow(x, y)`: `x` to the `y`.
    Pow,
    /// `fma(a, b, c)`: `a * b + c` with one rounding.
    Fma,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
    /// `abs(x)`.
    Abs,
    /// `floor(x)`.
    Floor,
    /// `ceil(x)`.
    Ceil,
    /// `round(x)`: to nearest, ties away from zero.
    Round,
    /// `trunc(x)`: toward zero.
    Trunc,
    /// `clamp(x, lo, hi)`.
    Clamp,
}

impl MathFn {
    /// Every math function, in declaration order.
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

    /// The built-in's name in the text format (`sqrt`, `fma`, ...).
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

    /// The function named `name` in the text format, if any.
    pub fn from_name(name: &str) -> Option<MathFn> {
        MathFn::ALL.into_iter().find(|m| m.name() == name)
    }

    /// How many arguments the function takes (1, 2 or 3).
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
/// An atomic read-modify-write operation (`atomic_<name>`); every one returns the old value.
pub enum AtomicOp {
    /// `old + value`.
    Add,
    /// `old - value`.
    Sub,
    /// `min(old, value)`.
    Min,
    /// `max(old, value)`.
    Max,
    /// `old & value`.
    And,
    /// `old | value`.
    Or,
    /// `old ^ value`.
    Xor,
    /// Stores `value` unconditionally.
    Exchange,
    /// Stores `value` when the current value equals `compare`; returns the old value.
    CompareExchange,
    /// CUDA's `atomicInc`: `old >= value ? 0 : old + 1` (unsigned comparison of the bits).
    Inc,
    /// CUDA's `atomicDec`: `old == 0 || old > value ? value : old - 1` (unsigned).
    Dec,
}

impl AtomicOp {
    /// Every atomic operation, in declaration order.
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

    /// The built-in's name in the text format (`atomic_add`, ...).
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

    /// The operation named `name` in the text format, if any.
    pub fn from_name(name: &str) -> Option<AtomicOp> {
        AtomicOp::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The contract's `MemoryOrder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryOrder {
    /// No ordering beyond the atomicity of the access itself.
    Relaxed,
    /// Later accesses of the work-item are not moved before this one.
    Acquire,
    /// Earlier accesses of the work-item are not moved after this one.
    Release,
    /// Both `Acquire` and `Release`.
    AcqRel,
    /// `AcqRel`, and one total order over all `SeqCst` operations.
    SeqCst,
}

impl MemoryOrder {
    /// Every order, weakest first.
    pub const ALL: [MemoryOrder; 5] = [
        MemoryOrder::Relaxed,
        MemoryOrder::Acquire,
        MemoryOrder::Release,
        MemoryOrder::AcqRel,
        MemoryOrder::SeqCst,
    ];

    /// The order's name in the text format (`relaxed`, `acq_rel`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            MemoryOrder::Relaxed => "relaxed",
            MemoryOrder::Acquire => "acquire",
            MemoryOrder::Release => "release",
            MemoryOrder::AcqRel => "acq_rel",
            MemoryOrder::SeqCst => "seq_cst",
        }
    }

    /// The order named `name` in the text format, if any.
    pub fn from_name(name: &str) -> Option<MemoryOrder> {
        MemoryOrder::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The combining operator of a wave reduction or scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Addition (wrapping for integers).
    Sum,
    /// The minimum.
    Min,
    /// The maximum.
    Max,
    /// Bitwise and (integers) or logical and (`bool`).
    And,
    /// Bitwise or (integers) or logical or (`bool`).
    Or,
    /// Bitwise xor (integers) or logical xor (`bool`).
    Xor,
}

impl ReduceOp {
    /// Every operator, in declaration order.
    pub const ALL: [ReduceOp; 6] = [
        ReduceOp::Sum,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
    ];

    /// The operator's suffix in the text format (`sum` in `wave_reduce_sum`).
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
    Lane {
        /// The vector local.
        local: Handle<Local>,
        /// The lane index (0 is `x`).
        lane: u8,
    },
    /// An element of a buffer, shared array or private array.
    Element {
        /// What is indexed.
        base: Base,
        /// The element index (`u32`).
        index: ExprId,
    },
}

#[derive(Clone, Debug, PartialEq)]
/// An expression node; operands are [`ExprId`]s into the same function's arena.
pub enum Expr {
    /// A constant.
    Literal(Literal),
    /// A function parameter, by index.
    Param(u32),
    /// The current value of a local.
    Local(Handle<Local>),
    /// A constant parameter of the enclosing template (type `u32`), by index.
    TemplateParam(u32),
    /// A value the launch provides.
    Builtin(Builtin),
    /// `op arg`.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        arg: ExprId,
    },
    /// `lhs op rhs`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// The left operand, evaluated first.
        lhs: ExprId,
        /// The right operand.
        rhs: ExprId,
    },
    /// A value conversion to `to` (lane count kept); semantics in `docs/semantics.md`.
    Cast {
        /// The target scalar type.
        to: Scalar,
        /// The value converted.
        arg: ExprId,
    },
    /// A reinterpretation of the bits as `to`, which must have the same size.
    Bitcast {
        /// The target type.
        to: Type,
        /// The value reinterpreted.
        arg: ExprId,
    },
    /// `select(cond, accept, reject)`: both arms are evaluated; the value of `accept` where `cond`
    /// is true, of `reject` elsewhere (lane-wise for a vector `cond`).
    Select {
        /// The condition (`bool` or a vector of `bool`).
        cond: ExprId,
        /// The value where `cond` holds.
        accept: ExprId,
        /// The value where it does not.
        reject: ExprId,
    },
    /// `if cond { accept } else { reject }`: `cond` is a `bool` scalar and only the arm it
    /// picks is evaluated (unlike `Select`, which evaluates both).
    IfElse {
        /// The `bool` condition.
        cond: ExprId,
        /// The value when `cond` is true.
        accept: ExprId,
        /// The value when `cond` is false.
        reject: ExprId,
    },
    /// A vector built from scalars and smaller vectors whose lanes add up to `lanes`.
    Compose {
        /// The lane type.
        scalar: Scalar,
        /// The lane count of the result (one of [`VECTOR_LANES`](crate::ir::VECTOR_LANES)).
        lanes: u8,
        /// The scalars and vectors, lowest lanes first.
        parts: Vec<ExprId>,
    },
    /// A vector with `value` in every lane.
    Splat {
        /// The lane count of the result.
        lanes: u8,
        /// The scalar repeated.
        value: ExprId,
    },
    /// One lane of a vector (`v.x`, `v[2]` with a constant index).
    Extract {
        /// The vector.
        vector: ExprId,
        /// The lane index (0 is `x`).
        lane: u8,
    },
    /// A vector of selected lanes (`v.zyx`); at least two lanes.
    Swizzle {
        /// The vector.
        vector: ExprId,
        /// The lanes picked, in result order.
        lanes: Vec<u8>,
    },
    /// An element read of a buffer, shared array or private array.
    Index {
        /// What is indexed.
        base: Base,
        /// The element index (`u32`).
        index: ExprId,
    },
    /// The element count of a buffer parameter (`u32`).
    Len(u32),
    /// A buffer, shared array or private array passed by reference: only as an argument of
    /// a [`Expr::Call`] whose parameter has that memory type ([`Type::is_memory`]). The
    /// verifier inlines every call that takes one ([`crate::ir::inline`]), so no backend
    /// sees it.
    Ref(Base),
    /// A call of a helper function; its result is the helper's return value.
    Call {
        /// The helper called.
        function: Handle<Function>,
        /// The arguments, one per parameter.
        args: Vec<ExprId>,
    },
    /// The tag naming member `index` of a tag set.
    Tag {
        /// The tag set.
        set: Handle<TagSet>,
        /// The member's position in the set.
        index: u32,
    },
    /// A call through a tag: the member the tag names. An out-of-range tag does nothing and
    /// yields the zero of the result type.
    Dispatch {
        /// The tag value (of the tag set's type).
        tag: ExprId,
        /// The arguments, passed to the member called.
        args: Vec<ExprId>,
    },
    /// A math built-in applied element-wise.
    Math {
        /// The function.
        fun: MathFn,
        /// The arguments ([`MathFn::arity`] of them).
        args: Vec<ExprId>,
    },
    /// Read-modify-write of `place` (a buffer or shared element); yields the old value.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// The memory order.
        order: MemoryOrder,
        /// The element updated.
        place: Place,
        /// The operand (for `CompareExchange`, the value stored).
        value: ExprId,
        /// The expected value, for `CompareExchange` only.
        compare: Option<ExprId>,
    },
    /// A wave (subgroup) verb over the active lanes of the work-item's wave.
    Wave {
        /// The verb.
        op: WaveOp,
        /// The arguments: the value, then the lane, delta or mask where the verb takes one.
        args: Vec<ExprId>,
        /// `width = T`: the verb works within tiles of `T` consecutive lanes (CUDA's
        /// `__shfl_sync(mask, v, lane, width)`): lanes, deltas and masks count within the
        /// tile and a reduction or scan combines the tile. `None` is the whole wave. `T` is a
        /// power of two from 1 to 64 (`XPU-V120`); a `T` above the wave width the kernel
        /// runs at is that width (docs/semantics.md, "Tiles").
        width: Option<u32>,
    },
    /// `vload<N>(buffer, index)`: `lanes` consecutive scalars starting at scalar `index` of a
    /// scalar buffer, as a vector. `align` is the promised alignment in bytes.
    VLoad {
        /// The scalar buffer read (a buffer parameter).
        base: Base,
        /// The first scalar's index (`u32`).
        index: ExprId,
        /// The lane count (one of [`VECTOR_LANES`](crate::ir::VECTOR_LANES)).
        lanes: u8,
        /// The promised alignment in bytes, if any.
        align: Option<u8>,
    },
    /// A fragment with every element `value`.
    MatrixFill {
        /// The fragment's role (`a`, `b` or `acc`).
        role: MatrixRole,
        /// The element type.
        scalar: Scalar,
        /// Rows of the fragment.
        rows: u8,
        /// Columns of the fragment.
        cols: u8,
        /// The element value.
        value: ExprId,
    },
    /// A fragment read row-major from `base` at element `offset`, rows `stride` apart.
    MatrixLoad {
        /// The fragment's role (`a`, `b` or `acc`).
        role: MatrixRole,
        /// The element type.
        scalar: Scalar,
        /// Rows of the fragment.
        rows: u8,
        /// Columns of the fragment.
        cols: u8,
        /// The buffer or shared array read.
        base: Base,
        /// The element index of the first element (`u32`).
        offset: ExprId,
        /// Elements between the starts of two rows (`u32`).
        stride: ExprId,
    },
    /// `a × b + c`.
    MatrixMma {
        /// The `a` fragment.
        a: ExprId,
        /// The `b` fragment.
        b: ExprId,
        /// The `acc` fragment added.
        c: ExprId,
    },
    /// A bit operation on integer scalars (`popcount(x)`, `bitfield_extract(x, off, n)`, ...).
    Bits {
        /// The operation.
        op: BitOp,
        /// The integer arguments.
        args: Vec<ExprId>,
    },
    /// `atomic_load(b[i], order)`: an indivisible read of a buffer or shared element
    /// (`relaxed`, `acquire` or `seq_cst`).
    AtomicLoad {
        /// The memory order.
        order: MemoryOrder,
        /// The element read.
        place: Place,
    },
    /// `atomic_store(b[i], value, order)`: an indivisible write of a buffer or shared element
    /// (`relaxed`, `release` or `seq_cst`); yields nothing, so it is a statement.
    AtomicStore {
        /// The memory order.
        order: MemoryOrder,
        /// The element written.
        place: Place,
        /// The value stored.
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
            | Expr::Ref(_)
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
            | Expr::Ref(_)
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
