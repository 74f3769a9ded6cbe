//! The builder: how a front end (a compiler, a REPL, a test generator) makes IR without the
//! text format.
//!
//! [`ModuleBuilder`] holds the module; [`FunctionBuilder`] builds one function. Nested blocks
//! are closures (`if_`, `for_`, `loop_`, `while_`), so the Rust code has the shape of the
//! kernel:
//!
//! ```
//! use xpu::ir::builder::ModuleBuilder;
//! use xpu::ir::{Access, Dim, Scalar, Type};
//!
//! let mut mb = ModuleBuilder::new();
//! mb.kernel("saxpy", |f| {
//!     let y = f.buffer("y", Scalar::F32, Access::ReadWrite);
//!     let x = f.buffer("x", Scalar::F32, Access::Read);
//!     let a = f.param("a", Type::F32);
//!     let n = f.param("n", Type::U32);
//!     let gid = f.global_id(Dim::X);
//!     let i = f.let_("i", Type::U32, gid);          // let i: u32 = global_id.x;
//!     let (iv, nv) = (f.get(i), f.param_value(n));
//!     let in_range = f.lt(iv, nv);
//!     f.if_then(in_range, |f| {                      // if i < n {
//!         let av = f.param_value(a);
//!         let iv = f.get(i);
//!         let xi = f.index(x, iv);
//!         let ax = f.mul(av, xi);                    //     a * x[i]
//!         let iv = f.get(i);
//!         let yi = f.index(y, iv);
//!         let sum = f.add(ax, yi);                   //     ... + y[i]
//!         let iv = f.get(i);
//!         f.store(y, iv, sum);                       //     y[i] = ...;
//!     });
//! });
//! let verified = mb.finish().verify().expect("saxpy verifies");
//! assert!(verified.kernel("saxpy").is_some());
//! ```
//!
//! A [`Value`] is an expression handle that is *moved* into whatever uses it: expressions are
//! trees (each has one parent), and the borrow checker enforces that here. To read a local
//! or a parameter twice, ask for it twice ([`FunctionBuilder::get`],
//! [`FunctionBuilder::param_value`]). The builder checks nothing else: [`Module::verify`] is
//! the single judge, and its diagnostics name the function when a node has no span (give
//! spans with [`FunctionBuilder::at`]).

#![warn(missing_docs)]

use super::{
    Access, AtomicOp, Attributes, Base, BinaryOp, BitOp, Block, Builtin, ConstExpr, Dim, ElemType,
    Expr, ExprId, FenceScope, Function, FunctionKind, Handle, Len, Literal, Local, LoopKind,
    MathFn, MatrixRole, MemoryOrder, Module, Occupancy, Param, Place, ReduceOp, Scalar, SharedDecl,
    Span, Stmt, StmtKind, TagSet, TemplateInfo, Type, UnaryOp, WaveOp,
};

/// An expression under construction. Not `Copy`: each value has exactly one use.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an expression does nothing until a statement or another expression uses it"]
pub struct Value(ExprId);

impl Value {
    /// The expression's handle (for front ends that keep side tables).
    pub fn id(&self) -> ExprId {
        self.0
    }

    /// Gives up the value for its handle, to place it in an [`Expr`] built by hand (with
    /// [`FunctionBuilder::expr`]).
    pub fn into_id(self) -> ExprId {
        self.0
    }
}

/// A parameter of the function being built, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamRef(pub u32);

impl From<ParamRef> for Base {
    fn from(p: ParamRef) -> Base {
        Base::Param(p.0)
    }
}

impl From<Handle<Local>> for Base {
    fn from(l: Handle<Local>) -> Base {
        Base::Local(l)
    }
}

impl From<Handle<SharedDecl>> for Base {
    fn from(s: Handle<SharedDecl>) -> Base {
        Base::Shared(s)
    }
}

/// Builds a [`Module`].
#[derive(Debug, Default)]
pub struct ModuleBuilder {
    module: Module,
}

impl ModuleBuilder {
    /// An empty module.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a function without a body, so that others can call it before it is defined
    /// (or so that a tag set can name it); fill it in with [`Self::define`].
    pub fn declare(&mut self, name: &str, kind: FunctionKind) -> Handle<Function> {
        self.module.functions.append(Function::new(name, kind))
    }

    /// Builds the body (and parameters, attributes...) of a declared function.
    pub fn define(&mut self, handle: Handle<Function>, build: impl FnOnce(&mut FunctionBuilder)) {
        let Some(f) = self.module.functions.try_get(handle) else {
            return;
        };
        let mut fb = FunctionBuilder::new(Function::new(f.name.clone(), f.kind));
        build(&mut fb);
        self.module.functions[handle] = fb.finish();
    }

    /// A kernel.
    pub fn kernel(
        &mut self,
        name: &str,
        build: impl FnOnce(&mut FunctionBuilder),
    ) -> Handle<Function> {
        let h = self.declare(name, FunctionKind::Kernel);
        self.define(h, build);
        h
    }

    /// A device helper; set its return type with [`FunctionBuilder::returns`].
    pub fn device(
        &mut self,
        name: &str,
        build: impl FnOnce(&mut FunctionBuilder),
    ) -> Handle<Function> {
        let h = self.declare(name, FunctionKind::Device);
        self.define(h, build);
        h
    }

    /// A tag set over device helpers.
    pub fn tag_set(&mut self, name: &str, members: &[Handle<Function>]) -> Handle<TagSet> {
        self.module.tag_sets.append(TagSet {
            name: name.to_string(),
            members: members.to_vec(),
            span: Span::UNKNOWN,
        })
    }

    /// The module so far (to look up functions by name, say).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The module built (unverified: [`Module::verify`] judges it).
    pub fn finish(self) -> Module {
        self.module
    }
}

/// Builds one [`Function`]: declarations, then statements into the current block.
#[derive(Debug)]
pub struct FunctionBuilder {
    func: Function,
    /// The blocks being filled, innermost last; the function body is the first.
    blocks: Vec<Block>,
    span: Span,
    /// The `if`s begun with [`FunctionBuilder::begin_if`] and not yet ended, innermost last.
    open_ifs: Vec<OpenIf>,
}

/// An `if` begun with [`FunctionBuilder::begin_if`]: its condition, its span, and its `then`
/// block once [`FunctionBuilder::else_`] closed it.
#[derive(Debug)]
struct OpenIf {
    cond: ExprId,
    span: Span,
    then_block: Option<Block>,
    /// How many blocks were open below this `if`'s arm.
    depth: usize,
    id: u64,
}

/// An `if` under construction in sequence: `begin_if`, statements, optionally `else_`,
/// statements, `end_if` (for front ends whose state cannot be moved into closures).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an `if` begun is closed with `end_if`"]
pub struct IfToken {
    id: u64,
}

impl FunctionBuilder {
    /// A builder for `func` (its existing body is kept and appended to).
    pub fn new(mut func: Function) -> Self {
        let body = std::mem::take(&mut func.body);
        FunctionBuilder {
            func,
            blocks: vec![body],
            span: Span::UNKNOWN,
            open_ifs: Vec::new(),
        }
    }

    /// The function, with everything built so far.
    pub fn finish(mut self) -> Function {
        // An `if` begun and never ended ends here, with what was built into it.
        while let Some(top) = self.open_ifs.last() {
            let id = top.id;
            self.end_if(IfToken { id });
        }
        // Closures always pop what they push, so only the body is left.
        while self.blocks.len() > 1 {
            let inner = self.blocks.pop().unwrap_or_default();
            if let Some(outer) = self.blocks.last_mut() {
                outer.extend(inner);
            }
        }
        self.func.body = self.blocks.pop().unwrap_or_default();
        self.func
    }

    /// The function being built (read-only).
    pub fn function(&self) -> &Function {
        &self.func
    }

    /// Sets the source location given to the nodes built from now on.
    pub fn at(&mut self, line: u32, col: u32) -> &mut Self {
        self.span = Span::new(line, col);
        self
    }

    /// Sets the span given to every node (expression or statement) built from now on, until
    /// changed: a front end calls it once per source construct, not once per node.
    pub fn at_span(&mut self, span: Span) -> &mut Self {
        self.span = span;
        self
    }

    /// The span nodes built now get.
    pub fn current_span(&self) -> Span {
        self.span
    }

    /// Builds with `build` at `span`, then restores the span that was in force.
    pub fn with_span<R>(&mut self, span: Span, build: impl FnOnce(&mut Self) -> R) -> R {
        let outer = std::mem::replace(&mut self.span, span);
        let result = build(self);
        self.span = outer;
        result
    }

    /// Begins `if cond { ...`: the statements built next go into its `then` arm, until
    /// [`Self::else_`] (then into its `else` arm) or [`Self::end_if`]. Ifs begun this way
    /// nest; ending an outer one ends the inner ones still open, and [`Self::finish`] ends
    /// any left open. The `if` statement carries the span in force here.
    pub fn begin_if(&mut self, cond: Value) -> IfToken {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.open_ifs.push(OpenIf {
            cond: cond.0,
            span: self.span,
            then_block: None,
            depth: self.blocks.len(),
            id,
        });
        self.blocks.push(Vec::new());
        IfToken { id }
    }

    /// `} else {`: closes the `then` arm of the `if` of `token`, and the statements built
    /// next go into its `else` arm. A second `else_` for one `if` adds to the same arm.
    pub fn else_(&mut self, token: IfToken) -> IfToken {
        self.close_inner(&token);
        if let Some(top) = self.open_ifs.last_mut() {
            if top.id == token.id && top.then_block.is_none() {
                let then_block = self.blocks.pop().unwrap_or_default();
                top.then_block = Some(then_block);
                self.blocks.push(Vec::new());
            }
        }
        token
    }

    /// `}`: ends the `if` of `token` and appends it to the enclosing block. A token of an
    /// `if` already ended does nothing.
    pub fn end_if(&mut self, token: IfToken) {
        if !self.open_ifs.iter().any(|o| o.id == token.id) {
            return;
        }
        self.close_inner(&token);
        let Some(open) = self.open_ifs.pop() else {
            return;
        };
        let mut arm = Vec::new();
        while self.blocks.len() > open.depth {
            let mut inner = self.blocks.pop().unwrap_or_default();
            inner.extend(arm);
            arm = inner;
        }
        let (then_block, else_block) = match open.then_block {
            Some(t) => (t, arm),
            None => (arm, Vec::new()),
        };
        let span = std::mem::replace(&mut self.span, open.span);
        self.stmt(StmtKind::If {
            cond: open.cond,
            then_block,
            else_block,
        });
        self.span = span;
    }

    /// Ends the `if`s begun inside the one of `token`.
    fn close_inner(&mut self, token: &IfToken) {
        if !self.open_ifs.iter().any(|o| o.id == token.id) {
            return;
        }
        while let Some(top) = self.open_ifs.last() {
            if top.id == token.id {
                break;
            }
            let id = top.id;
            self.end_if(IfToken { id });
        }
    }

    // ----- declarations -----

    /// Sets the function's own span (for diagnostics about the whole function).
    pub fn span(&mut self, line: u32, col: u32) {
        self.func.span = Span::new(line, col);
    }

    /// Appends a parameter of `ty` (scalar, vector or tag) and returns its handle.
    pub fn param(&mut self, name: &str, ty: Type) -> ParamRef {
        self.func.params.push(Param {
            name: name.to_string(),
            ty,
            span: self.span,
        });
        ParamRef(self.func.params.len() as u32 - 1)
    }

    /// A buffer parameter of scalars.
    pub fn buffer(&mut self, name: &str, scalar: Scalar, access: Access) -> ParamRef {
        self.param(
            name,
            Type::Buffer {
                elem: ElemType::scalar(scalar),
                access,
            },
        )
    }

    /// Sets the return type (device functions; kernels return nothing).
    pub fn returns(&mut self, ty: Type) {
        self.func.ret = Some(ty);
    }

    /// A local without a `let` statement (for a `for` variable, or a `let` placed later with
    /// [`Self::let_local`]).
    pub fn local(&mut self, name: &str, ty: Type) -> Handle<Local> {
        self.func.locals.append(Local {
            name: name.to_string(),
            ty,
            span: self.span,
        })
    }

    /// A workgroup array; `len: None` is sized at launch.
    pub fn shared(&mut self, name: &str, elem: ElemType, len: Option<Len>) -> Handle<SharedDecl> {
        self.func.shared.append(SharedDecl {
            name: name.to_string(),
            elem,
            len,
            span: self.span,
        })
    }

    /// Gives the private or shared array `base` the multi-dimensional shape `dims` (lengths
    /// outermost first; their product is its element count): it prints as `[[E; C]; R]`,
    /// indexed `a[i][j]` (see [`Self::index_nd`]).
    pub fn array_dims(&mut self, base: Base, dims: &[u32]) {
        self.func.array_dims.push((base, dims.to_vec()));
    }

    /// The row-major element index of subscripts `subs` (outermost first) of an array of
    /// lengths `dims`: `(i0 * d1 + i1) * d2 + i2 ...`, as the parser builds `a[i0][i1][i2]`.
    pub fn index_nd(&mut self, dims: &[u32], subs: Vec<Value>) -> Value {
        let mut subs = subs.into_iter().enumerate();
        let Some((_, mut acc)) = subs.next() else {
            return self.lit(Literal::Int {
                bits: 0,
                ty: Scalar::U32,
            });
        };
        for (k, i) in subs {
            let d = self.lit(Literal::Int {
                bits: u64::from(dims[k]),
                ty: Scalar::U32,
            });
            let m = self.binary(BinaryOp::Mul, acc, d);
            acc = self.binary(BinaryOp::Add, m, i);
        }
        acc
    }

    /// A constant expression (array lengths, attribute arguments, `requires`).
    pub fn const_expr(&mut self, e: ConstExpr) -> Handle<ConstExpr> {
        self.func.consts.append(e)
    }

    /// The function's attributes, for the ones without a setter of their own.
    pub fn attrs_mut(&mut self) -> &mut Attributes {
        &mut self.func.attrs
    }

    /// `@wave(n)`.
    pub fn wave_attr(&mut self, n: u32) {
        self.func.attrs.wave = Some((n, self.span));
    }

    /// `@occupancy(max_threads = n)`.
    pub fn max_threads(&mut self, n: u32) {
        let h = self.const_expr(ConstExpr::Lit(u64::from(n)));
        let span = self.span;
        self.func
            .attrs
            .occupancy
            .get_or_insert_with(|| Occupancy {
                span,
                ..Occupancy::default()
            })
            .max_threads = Some(h);
    }

    /// Makes the function a template over `u32` parameters named `params`; add clauses and
    /// instances through [`Self::template_mut`].
    pub fn template(&mut self, params: &[&str]) {
        self.func.template = Some(TemplateInfo {
            params: params.iter().map(|p| p.to_string()).collect(),
            requires: Vec::new(),
            instantiate: Vec::new(),
            max: None,
        });
    }

    /// The template parameters and instantiations, when the function is a template.
    pub fn template_mut(&mut self) -> Option<&mut TemplateInfo> {
        self.func.template.as_mut()
    }

    // ----- expressions -----

    /// Adds any expression (at the current span) and returns its handle.
    pub fn expr(&mut self, e: Expr) -> Value {
        Value(self.func.add_expr(e, self.span))
    }

    /// A literal.
    pub fn lit(&mut self, l: Literal) -> Value {
        self.expr(Expr::Literal(l))
    }

    /// A `bool` literal.
    pub fn bool_(&mut self, b: bool) -> Value {
        self.lit(Literal::Bool(b))
    }

    /// An integer literal of type `ty` (wrapped to its width).
    pub fn int(&mut self, v: i128, ty: Scalar) -> Value {
        self.lit(Literal::int(v, ty))
    }

    /// A `u32` literal.
    pub fn u32(&mut self, v: u32) -> Value {
        self.int(i128::from(v), Scalar::U32)
    }

    /// An `i32` literal.
    pub fn i32(&mut self, v: i32) -> Value {
        self.int(i128::from(v), Scalar::I32)
    }

    /// A float literal of type `ty` (`f16`, `f32` or `f64`).
    pub fn float(&mut self, v: f64, ty: Scalar) -> Value {
        self.lit(Literal::float(v, ty))
    }

    /// An `f32` literal.
    pub fn f32(&mut self, v: f32) -> Value {
        self.float(f64::from(v), Scalar::F32)
    }

    /// A parameter's value.
    pub fn param_value(&mut self, p: ParamRef) -> Value {
        self.expr(Expr::Param(p.0))
    }

    /// A local's value.
    pub fn get(&mut self, l: Handle<Local>) -> Value {
        self.expr(Expr::Local(l))
    }

    /// The template parameter at `index` (a constant in each instance).
    pub fn template_param(&mut self, index: u32) -> Value {
        self.expr(Expr::TemplateParam(index))
    }

    /// A built-in value (`global_id.x`, `wave_width`, ...).
    pub fn builtin(&mut self, b: Builtin) -> Value {
        self.expr(Expr::Builtin(b))
    }

    /// `global_id.d`: the work-item's index in the whole grid.
    pub fn global_id(&mut self, d: Dim) -> Value {
        self.builtin(Builtin::GlobalId(d))
    }

    /// `local_id.d`: the work-item's index in its workgroup.
    pub fn local_id(&mut self, d: Dim) -> Value {
        self.builtin(Builtin::LocalId(d))
    }

    /// `group_id.d`: the workgroup's index in the grid.
    pub fn group_id(&mut self, d: Dim) -> Value {
        self.builtin(Builtin::GroupId(d))
    }

    /// `group_size.d`: work-items per workgroup (the launch's block).
    pub fn group_size(&mut self, d: Dim) -> Value {
        self.builtin(Builtin::GroupSize(d))
    }

    /// `num_groups.d`: workgroups in the grid.
    pub fn num_groups(&mut self, d: Dim) -> Value {
        self.builtin(Builtin::NumGroups(d))
    }

    /// `wave_width`: the width of the wave the kernel runs in.
    pub fn wave_width(&mut self) -> Value {
        self.builtin(Builtin::WaveWidth)
    }

    /// `lane_id`: the work-item's lane in its wave.
    pub fn lane_id(&mut self) -> Value {
        self.builtin(Builtin::LaneId)
    }

    /// A unary operation.
    pub fn unary(&mut self, op: UnaryOp, arg: Value) -> Value {
        self.expr(Expr::Unary { op, arg: arg.0 })
    }

    /// `-a`.
    pub fn neg(&mut self, a: Value) -> Value {
        self.unary(UnaryOp::Neg, a)
    }

    /// `!a` (logical on `bool`, bitwise on integers).
    pub fn not(&mut self, a: Value) -> Value {
        self.unary(UnaryOp::Not, a)
    }

    /// A binary operation (`+`, `<`, `&&`, ...); see also the named shorthands.
    pub fn binary(&mut self, op: BinaryOp, lhs: Value, rhs: Value) -> Value {
        self.expr(Expr::Binary {
            op,
            lhs: lhs.0,
            rhs: rhs.0,
        })
    }

    /// `arg as to`: a value conversion to scalar `to` (lane by lane on vectors).
    pub fn cast(&mut self, arg: Value, to: Scalar) -> Value {
        self.expr(Expr::Cast { to, arg: arg.0 })
    }

    /// `bitcast<to>(arg)`: the same bits read as `to`.
    pub fn bitcast(&mut self, arg: Value, to: Type) -> Value {
        self.expr(Expr::Bitcast { to, arg: arg.0 })
    }

    /// `select(cond, accept, reject)`: `accept` where `cond` holds, else `reject` (per lane
    /// with a vector condition).
    pub fn select(&mut self, cond: Value, accept: Value, reject: Value) -> Value {
        self.expr(Expr::Select {
            cond: cond.0,
            accept: accept.0,
            reject: reject.0,
        })
    }

    /// `if cond { accept } else { reject }`: only the arm `cond` picks is evaluated.
    pub fn if_else(&mut self, cond: Value, accept: Value, reject: Value) -> Value {
        self.expr(Expr::IfElse {
            cond: cond.0,
            accept: accept.0,
            reject: reject.0,
        })
    }

    /// A vector of `lanes` lanes of `scalar` from `parts` (scalars or smaller vectors).
    pub fn compose(&mut self, scalar: Scalar, lanes: u8, parts: Vec<Value>) -> Value {
        let parts = parts.into_iter().map(|p| p.0).collect();
        self.expr(Expr::Compose {
            scalar,
            lanes,
            parts,
        })
    }

    /// A vector of `lanes` copies of a scalar.
    pub fn splat(&mut self, lanes: u8, value: Value) -> Value {
        self.expr(Expr::Splat {
            lanes,
            value: value.0,
        })
    }

    /// `vector.x` etc.: one lane as a scalar.
    pub fn extract(&mut self, vector: Value, lane: u8) -> Value {
        self.expr(Expr::Extract {
            vector: vector.0,
            lane,
        })
    }

    /// `vector.zyx` etc.: the lanes named, in order.
    pub fn swizzle(&mut self, vector: Value, lanes: &[u8]) -> Value {
        self.expr(Expr::Swizzle {
            vector: vector.0,
            lanes: lanes.to_vec(),
        })
    }

    /// An element read: `base[index]`.
    pub fn index(&mut self, base: impl Into<Base>, index: Value) -> Value {
        self.expr(Expr::Index {
            base: base.into(),
            index: index.0,
        })
    }

    /// `len(p)`.
    pub fn len(&mut self, p: ParamRef) -> Value {
        self.expr(Expr::Len(p.0))
    }

    /// A call of a device function.
    pub fn call(&mut self, function: Handle<Function>, args: Vec<Value>) -> Value {
        let args = args.into_iter().map(|a| a.0).collect();
        self.expr(Expr::Call { function, args })
    }

    /// The member at `index` of tag set `set`, as a `tag<Set>` value.
    pub fn tag(&mut self, set: Handle<TagSet>, index: u32) -> Value {
        self.expr(Expr::Tag { set, index })
    }

    /// A call through a tag: the member function it names (nothing when out of range).
    pub fn dispatch(&mut self, tag: Value, args: Vec<Value>) -> Value {
        let args = args.into_iter().map(|a| a.0).collect();
        self.expr(Expr::Dispatch { tag: tag.0, args })
    }

    /// A math function (`sqrt`, `fma`, `min`, ...).
    pub fn math(&mut self, fun: MathFn, args: Vec<Value>) -> Value {
        let args = args.into_iter().map(|a| a.0).collect();
        self.expr(Expr::Math { fun, args })
    }

    /// A bit operation (`popcount`, `mul_hi`, ...) on integer scalars.
    pub fn bits(&mut self, op: BitOp, args: Vec<Value>) -> Value {
        let args = args.into_iter().map(|a| a.0).collect();
        self.expr(Expr::Bits { op, args })
    }

    /// A relaxed read-modify-write of `base[index]`; yields the old value.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        base: impl Into<Base>,
        index: Value,
        value: Value,
    ) -> Value {
        self.atomic_ordered(op, MemoryOrder::Relaxed, base, index, value)
    }

    /// A read-modify-write of `base[index]` with memory order `order`; yields the old value.
    pub fn atomic_ordered(
        &mut self,
        op: AtomicOp,
        order: MemoryOrder,
        base: impl Into<Base>,
        index: Value,
        value: Value,
    ) -> Value {
        self.expr(Expr::Atomic {
            op,
            order,
            place: Place::Element {
                base: base.into(),
                index: index.0,
            },
            value: value.0,
            compare: None,
        })
    }

    /// `atomic_load(base[index], order)`.
    pub fn atomic_load(
        &mut self,
        order: MemoryOrder,
        base: impl Into<Base>,
        index: Value,
    ) -> Value {
        self.expr(Expr::AtomicLoad {
            order,
            place: Place::Element {
                base: base.into(),
                index: index.0,
            },
        })
    }

    /// `atomic_store(base[index], value, order)`, as a statement.
    pub fn atomic_store(
        &mut self,
        order: MemoryOrder,
        base: impl Into<Base>,
        index: Value,
        value: Value,
    ) {
        let e = self.expr(Expr::AtomicStore {
            order,
            place: Place::Element {
                base: base.into(),
                index: index.0,
            },
            value: value.0,
        });
        self.eval(e);
    }

    /// `atomic_compare_exchange(base[index], expected, new)`.
    pub fn compare_exchange(
        &mut self,
        order: MemoryOrder,
        base: impl Into<Base>,
        index: Value,
        expected: Value,
        new: Value,
    ) -> Value {
        self.expr(Expr::Atomic {
            op: AtomicOp::CompareExchange,
            order,
            place: Place::Element {
                base: base.into(),
                index: index.0,
            },
            value: new.0,
            compare: Some(expected.0),
        })
    }

    /// A wave operation (shuffles, votes, reductions, scans).
    pub fn wave(&mut self, op: WaveOp, args: Vec<Value>) -> Value {
        let args = args.into_iter().map(|a| a.0).collect();
        self.expr(Expr::Wave {
            op,
            args,
            width: None,
        })
    }

    /// A wave operation within tiles of `width` consecutive lanes (`wave_shuffle(x, l,
    /// width = 16)`).
    pub fn wave_tile(&mut self, op: WaveOp, args: Vec<Value>, width: u32) -> Value {
        let args = args.into_iter().map(|a| a.0).collect();
        self.expr(Expr::Wave {
            op,
            args,
            width: Some(width),
        })
    }

    /// A reduction over the wave (`reduce_add`, `reduce_max`, ...).
    pub fn wave_reduce(&mut self, op: ReduceOp, value: Value) -> Value {
        self.wave(WaveOp::Reduce(op), vec![value])
    }

    /// `vload<lanes>(base, index, align = A)`: `lanes` consecutive elements as a vector.
    pub fn vload(
        &mut self,
        base: impl Into<Base>,
        index: Value,
        lanes: u8,
        align: Option<u8>,
    ) -> Value {
        self.expr(Expr::VLoad {
            base: base.into(),
            index: index.0,
            lanes,
            align,
        })
    }

    /// A cooperative matrix of `role` and shape `rows` x `cols` with every element `value`.
    pub fn matrix_fill(
        &mut self,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        value: Value,
    ) -> Value {
        self.expr(Expr::MatrixFill {
            role,
            scalar,
            rows,
            cols,
            value: value.0,
        })
    }

    #[allow(clippy::too_many_arguments)]
    /// A cooperative matrix of `role` loaded from `base` at `offset`, rows `stride` elements
    /// apart.
    pub fn matrix_load(
        &mut self,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        base: impl Into<Base>,
        offset: Value,
        stride: Value,
    ) -> Value {
        self.expr(Expr::MatrixLoad {
            role,
            scalar,
            rows,
            cols,
            base: base.into(),
            offset: offset.0,
            stride: stride.0,
        })
    }

    /// `matrix_mma(a, b, c)`: `a * b + c` over cooperative matrices.
    pub fn matrix_mma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.expr(Expr::MatrixMma {
            a: a.0,
            b: b.0,
            c: c.0,
        })
    }

    // ----- statements -----

    /// Appends a statement to the current block.
    pub fn stmt(&mut self, kind: StmtKind) {
        let s = Stmt {
            kind,
            span: self.span,
        };
        match self.blocks.last_mut() {
            Some(b) => b.push(s),
            None => self.blocks.push(vec![s]),
        }
    }

    /// `let name: ty = init;`
    pub fn let_(&mut self, name: &str, ty: Type, init: Value) -> Handle<Local> {
        let l = self.local(name, ty);
        self.let_local(l, Some(init));
        l
    }

    /// `let name: ty;` (poison until assigned).
    pub fn let_uninit(&mut self, name: &str, ty: Type) -> Handle<Local> {
        let l = self.local(name, ty);
        self.let_local(l, None);
        l
    }

    /// The `let` of a local made with [`Self::local`].
    pub fn let_local(&mut self, local: Handle<Local>, init: Option<Value>) {
        self.stmt(StmtKind::Let {
            local,
            init: init.map(|v| v.0),
        });
    }

    /// `local = value;`
    pub fn assign(&mut self, local: Handle<Local>, value: Value) {
        self.stmt(StmtKind::Assign {
            place: Place::Local(local),
            value: value.0,
        });
    }

    /// `local.x = value;` (lane `lane`).
    pub fn assign_lane(&mut self, local: Handle<Local>, lane: u8, value: Value) {
        self.stmt(StmtKind::Assign {
            place: Place::Lane { local, lane },
            value: value.0,
        });
    }

    /// `base[index] = value;`
    pub fn store(&mut self, base: impl Into<Base>, index: Value, value: Value) {
        self.stmt(StmtKind::Assign {
            place: Place::Element {
                base: base.into(),
                index: index.0,
            },
            value: value.0,
        });
    }

    /// Builds a nested block with `build` and returns it.
    fn nested(&mut self, build: impl FnOnce(&mut Self)) -> Block {
        self.blocks.push(Vec::new());
        build(self);
        self.blocks.pop().unwrap_or_default()
    }

    /// `if cond { then } else { otherwise }`.
    pub fn if_(
        &mut self,
        cond: Value,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        let span = self.span;
        let then_block = self.nested(then);
        let else_block = self.nested(otherwise);
        self.span = span;
        self.stmt(StmtKind::If {
            cond: cond.0,
            then_block,
            else_block,
        });
    }

    /// `if cond { then }`.
    pub fn if_then(&mut self, cond: Value, then: impl FnOnce(&mut Self)) {
        self.if_(cond, then, |_| {});
    }

    /// `'label: loop { body }`.
    pub fn loop_(&mut self, label: Option<&str>, body: impl FnOnce(&mut Self)) {
        self.looped(label, LoopKind::Infinite, body);
    }

    /// `'label: while cond { body }`.
    pub fn while_(&mut self, label: Option<&str>, cond: Value, body: impl FnOnce(&mut Self)) {
        self.looped(label, LoopKind::While(cond.0), body);
    }

    /// `'label: for name: ty in start..end step step { body }`; the body gets the variable.
    #[allow(clippy::too_many_arguments)]
    pub fn for_(
        &mut self,
        label: Option<&str>,
        name: &str,
        ty: Type,
        start: Value,
        end: Value,
        step: Option<Value>,
        body: impl FnOnce(&mut Self, Handle<Local>),
    ) -> Handle<Local> {
        let var = self.local(name, ty);
        let kind = LoopKind::For {
            var,
            start: start.0,
            end: end.0,
            step: step.map(|s| s.0),
        };
        self.looped(label, kind, |b| body(b, var));
        var
    }

    /// `'label: for name: ty = init; cond; name = update { body }`; `header` builds the
    /// condition and the update from the variable, and the body gets it too.
    #[allow(clippy::too_many_arguments)]
    pub fn for_cond(
        &mut self,
        label: Option<&str>,
        name: &str,
        ty: Type,
        init: Value,
        header: impl FnOnce(&mut Self, Handle<Local>) -> (Value, Value),
        body: impl FnOnce(&mut Self, Handle<Local>),
    ) -> Handle<Local> {
        let var = self.local(name, ty);
        let (cond, update) = header(self, var);
        let kind = LoopKind::Cond {
            var,
            init: init.0,
            cond: cond.0,
            update: update.0,
        };
        self.looped(label, kind, |b| body(b, var));
        var
    }

    /// `{ body }`: a bare scope.
    pub fn scope(&mut self, body: impl FnOnce(&mut Self)) {
        let span = self.span;
        let block = self.nested(body);
        self.span = span;
        self.stmt(StmtKind::Block(block));
    }

    fn looped(&mut self, label: Option<&str>, kind: LoopKind, body: impl FnOnce(&mut Self)) {
        let span = self.span;
        let body = self.nested(body);
        self.span = span;
        self.stmt(StmtKind::Loop {
            label: label.map(str::to_string),
            kind,
            body,
        });
    }

    /// `break;` or `break label;`.
    pub fn break_(&mut self, label: Option<&str>) {
        self.stmt(StmtKind::Break(label.map(str::to_string)));
    }

    /// `continue;` or `continue label;`.
    pub fn continue_(&mut self, label: Option<&str>) {
        self.stmt(StmtKind::Continue(label.map(str::to_string)));
    }

    /// `return;` or `return value;`.
    pub fn return_(&mut self, value: Option<Value>) {
        self.stmt(StmtKind::Return(value.map(|v| v.0)));
    }

    /// An expression evaluated for its effect: `f(x);`, `atomic_add(b[i], 1);`.
    pub fn eval(&mut self, value: Value) {
        self.stmt(StmtKind::Expr(value.0));
    }

    /// `barrier();`: every work-item of the workgroup waits, and shared memory is made
    /// visible.
    pub fn barrier(&mut self) {
        self.stmt(StmtKind::Barrier);
    }

    /// `wave_barrier();`: the active lanes of the wave meet; orders their memory accesses.
    pub fn wave_barrier(&mut self) {
        self.stmt(StmtKind::WaveBarrier);
    }

    /// `fence(scope);`: orders this work-item's memory accesses at `scope`.
    pub fn fence(&mut self, scope: FenceScope) {
        self.stmt(StmtKind::Fence(scope));
    }

    /// `vstore(base, index, value, align = A);`: a vector's lanes to consecutive elements.
    pub fn vstore(&mut self, base: impl Into<Base>, index: Value, value: Value, align: Option<u8>) {
        self.stmt(StmtKind::VStore {
            base: base.into(),
            index: index.0,
            value: value.0,
            align,
        });
    }

    /// `matrix_store(value, base, offset, stride);`: a cooperative matrix to memory.
    pub fn matrix_store(
        &mut self,
        value: Value,
        base: impl Into<Base>,
        offset: Value,
        stride: Value,
    ) {
        self.stmt(StmtKind::MatrixStore {
            value: value.0,
            base: base.into(),
            offset: offset.0,
            stride: stride.0,
        });
    }
}

macro_rules! binops {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl FunctionBuilder {
            $(
                #[doc = concat!("`lhs ", stringify!($op), " rhs`.")]
                pub fn $name(&mut self, lhs: Value, rhs: Value) -> Value {
                    self.binary(BinaryOp::$op, lhs, rhs)
                }
            )*
        }
    };
}

binops! {
    add => Add, sub => Sub, mul => Mul, div => Div, rem => Rem,
    bit_and => BitAnd, bit_or => BitOr, bit_xor => BitXor, shl => Shl, shr => Shr,
    eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge,
    and => LogicalAnd, or => LogicalOr,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::verify::codes;

    #[test]
    fn saxpy_verifies() {
        let mut mb = ModuleBuilder::new();
        mb.kernel("saxpy", |f| {
            let y = f.buffer("y", Scalar::F32, Access::ReadWrite);
            let x = f.buffer("x", Scalar::F32, Access::Read);
            let a = f.param("a", Type::F32);
            let n = f.param("n", Type::U32);
            let gid = f.global_id(Dim::X);
            let i = f.let_("i", Type::U32, gid);
            let (iv, nv) = (f.get(i), f.param_value(n));
            let c = f.lt(iv, nv);
            f.if_then(c, |f| {
                let av = f.param_value(a);
                let iv = f.get(i);
                let xi = f.index(x, iv);
                let ax = f.mul(av, xi);
                let iv = f.get(i);
                let yi = f.index(y, iv);
                let s = f.add(ax, yi);
                let iv = f.get(i);
                f.store(y, iv, s);
            });
        });
        let v = mb.finish().verify().unwrap();
        let k = v.kernel("saxpy").unwrap();
        assert_eq!(v.function(k).body.len(), 2);
        assert!(v.expr_types(k).iter().all(|t| t.is_some()));
    }

    #[test]
    fn errors_name_the_function() {
        let mut mb = ModuleBuilder::new();
        mb.kernel("bad", |f| {
            let x = f.i32(1);
            let y = f.f32(2.0);
            let s = f.add(x, y);
            f.let_("s", Type::I32, s);
        });
        let d = mb.finish().verify().unwrap_err();
        assert_eq!(d.0[0].code, codes::OPERAND_TYPE);
        assert!(d.0[0].message.starts_with("in `bad`"), "{}", d.0[0].message);
    }
}
