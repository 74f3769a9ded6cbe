//! Lowering of a kernel and the helpers it reaches into slot bytecode, once per launch.
//!
//! Every function gets a frame of 64-bit slots laid out as `[params][locals][constants]
//! [temporaries]`; a value of `n` lanes (a vector, a private array, a fragment) occupies `n`
//! consecutive slots. Expressions are trees, so temporaries are allocated like a stack: a node
//! takes its result slots first and its operands take theirs above, released when the node is
//! emitted. Reads of locals, parameters and literals name their slots directly (no copy).
//!
//! Structured control flow becomes jumps. Loops also maintain the work-item's *position
//! stack* (`LoopEnter`/`LoopNext`/`PopLoops`, and calls), which the scheduler compares to
//! decide which lanes of a wave meet at one dynamic instance of a wave verb and which
//! work-items meet at one barrier (docs/semantics.md, "Convergence").
//!
//! Everything the type rules guarantee is re-checked here without panicking, so a module
//! that skipped verification is refused (`XPU-REF01`) rather than crashing the host.

use super::error::InterpError;
use super::value::{self, BinFn, TerFn, UnFn};
use crate::ir::{
    typeck, AtomicOp, Base, BinaryOp, BitOp, Block, Builtin, ElemType, Expr, ExprId, Function,
    FunctionKind, Handle, Len, Literal, LoopKind, MathFn, Module, Place, Scalar, Span, Stmt,
    StmtKind, Type, VerifiedModule, WaveOp,
};
use std::collections::HashMap;

#[path = "atomic_access.rs"]
mod atomic_access;
#[path = "bits.rs"]
mod bits;

pub(crate) type Slot = u32;

/// "No slot" for optional operands.
pub(crate) const NONE: Slot = u32::MAX;

/// What a memory instruction addresses.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mem {
    /// A buffer parameter of the kernel (by parameter index).
    Buf { id: u32, s: Scalar, lanes: u8 },
    /// A shared array of the kernel (by declaration index).
    Shared { id: u32, s: Scalar, lanes: u8 },
    /// A private array: `len` elements of `lanes` slots from `slot` in the frame.
    Private {
        slot: Slot,
        len: u32,
        s: Scalar,
        lanes: u8,
    },
}

impl Mem {
    pub fn scalar(self) -> Scalar {
        match self {
            Mem::Buf { s, .. } | Mem::Shared { s, .. } | Mem::Private { s, .. } => s,
        }
    }
    pub fn lanes(self) -> u8 {
        match self {
            Mem::Buf { lanes, .. } | Mem::Shared { lanes, .. } | Mem::Private { lanes, .. } => {
                lanes
            }
        }
    }
}

/// One bytecode instruction. Slots are relative to the frame's base.
#[derive(Clone, Debug)]
pub(crate) enum Inst {
    Copy {
        dst: Slot,
        src: Slot,
        n: u32,
    },
    Builtin {
        dst: Slot,
        b: Builtin,
    },
    Un {
        f: UnFn,
        dst: Slot,
        a: Slot,
        n: u32,
    },
    Bin {
        f: BinFn,
        dst: Slot,
        a: Slot,
        b: Slot,
        n: u32,
    },
    Ter {
        f: TerFn,
        dst: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        n: u32,
    },
    /// Integer `/` or `%`, which faults on a zero divisor.
    DivRem {
        s: Scalar,
        rem: bool,
        dst: Slot,
        a: Slot,
        b: Slot,
        n: u32,
        span: Span,
    },
    Cast {
        from: Scalar,
        to: Scalar,
        dst: Slot,
        a: Slot,
        n: u32,
    },
    Bitcast {
        from: ElemType,
        to: ElemType,
        dst: Slot,
        a: Slot,
    },
    /// `c` has `n` lanes when `cvec`, else one.
    Select {
        dst: Slot,
        c: Slot,
        a: Slot,
        b: Slot,
        n: u32,
        cvec: bool,
    },
    Splat {
        dst: Slot,
        a: Slot,
        n: u32,
    },
    Len {
        dst: Slot,
        buf: u32,
    },
    Load {
        mem: Mem,
        dst: Slot,
        idx: Slot,
        span: Span,
    },
    Store {
        mem: Mem,
        src: Slot,
        idx: Slot,
        span: Span,
    },
    /// `vload`/`vstore` of `lanes` scalars of a scalar buffer; `align` 0 = no promise.
    VLoad {
        buf: u32,
        s: Scalar,
        lanes: u8,
        align: u8,
        dst: Slot,
        idx: Slot,
        span: Span,
    },
    VStore {
        buf: u32,
        s: Scalar,
        lanes: u8,
        align: u8,
        src: Slot,
        idx: Slot,
        span: Span,
    },
    Atomic {
        op: AtomicOp,
        mem: Mem,
        dst: Slot,
        idx: Slot,
        val: Slot,
        cmp: Slot,
        span: Span,
    },
    /// `atomic_load`: an element read recorded as an atomic access.
    AtomicLoad {
        mem: Mem,
        dst: Slot,
        idx: Slot,
        span: Span,
    },
    /// `atomic_store`: an element write recorded as an atomic access.
    AtomicStore {
        mem: Mem,
        src: Slot,
        idx: Slot,
        span: Span,
    },
    /// A bit operation on one integer lane of `s` (`a` holds its arity of operands).
    Bits {
        op: BitOp,
        s: Scalar,
        dst: Slot,
        a: [Slot; 4],
    },
    /// A read of a local declared without an initialiser: every slot must be defined.
    CheckDef {
        slot: Slot,
        n: u32,
        local: u32,
        span: Span,
    },
    MarkDef {
        slot: Slot,
        n: u32,
    },
    Undef {
        slot: Slot,
        n: u32,
    },
    Jump {
        to: u32,
    },
    /// `print`: a record of the values in `args` (each one slot) for debug site `site`.
    Print {
        site: u32,
        args: Box<[Slot]>,
    },
    /// `assert`: a failure record for debug site `site` where slot `c` is false.
    Assert {
        site: u32,
        c: Slot,
    },
    JumpIf {
        c: Slot,
        to: u32,
    },
    JumpIfNot {
        c: Slot,
        to: u32,
    },
    /// `var += 1` (a `for` loop without `step`), wrapping.
    Inc {
        slot: Slot,
        s: Scalar,
    },
    LoopEnter,
    /// The back edge of a loop: counts an iteration and jumps to the loop head.
    LoopNext {
        to: u32,
    },
    PopLoops {
        n: u32,
    },
    Call {
        func: u32,
        args: Box<[(Slot, u32)]>,
        dst: Slot,
        n: u32,
    },
    Dispatch {
        set: u32,
        tag: Slot,
        args: Box<[(Slot, u32)]>,
        dst: Slot,
        n: u32,
    },
    Ret {
        src: Slot,
        n: u32,
    },
    /// The end of a helper that returns a value: reached only if a path lacks `return`.
    NoReturn {
        span: Span,
    },
    Barrier {
        span: Span,
    },
    /// A wave verb: the work-item suspends here until its wave's active lanes meet.
    Wave {
        op: WaveOp,
        s: Scalar,
        dst: Slot,
        a: Slot,
        b: Slot,
        n: u32,
        /// The tile width (`width = T`); 0 for the whole wave.
        width: u32,
        span: Span,
    },
    /// `wave_barrier()`: the work-item suspends until every lane of its wave meets it.
    WaveBarrier {
        span: Span,
    },
    /// Cooperative-matrix verbs: wave-collective, every lane of the wave takes part.
    MFill {
        dst: Slot,
        val: Slot,
        n: u32,
        span: Span,
    },
    MLoad {
        dst: Slot,
        mem: Mem,
        off: Slot,
        stride: Slot,
        rows: u32,
        cols: u32,
        span: Span,
    },
    MMma {
        dst: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        m: u32,
        n: u32,
        k: u32,
        sa: Scalar,
        sc: Scalar,
        span: Span,
    },
    MStore {
        src: Slot,
        mem: Mem,
        off: Slot,
        stride: Slot,
        rows: u32,
        cols: u32,
        span: Span,
    },
}

/// A compiled function.
pub(crate) struct CFunc {
    pub name: String,
    pub code: Vec<Inst>,
    /// Slots in a frame.
    pub frame: u32,
    /// Each parameter's first slot and slot count (buffers have none).
    pub params: Vec<(Slot, u32)>,
    /// The constants' first slot and values, copied into each new frame.
    pub const_base: Slot,
    pub consts: Vec<u64>,
    /// Local names, for reports.
    pub local_names: Vec<String>,
}

/// A shared array of the kernel. Each has its own region of workgroup memory (the verifier
/// allows at most one dynamically sized array, so none alias).
pub(crate) struct SharedInfo {
    pub name: String,
    pub elem: ElemType,
    /// Elements; `None` for the dynamically sized array (sized at launch).
    pub len: Option<u32>,
}

/// A kernel and the helpers it reaches, compiled. `funcs[0]` is the kernel.
pub(crate) struct Program {
    pub funcs: Vec<CFunc>,
    /// For each tag set of the module, the compiled index of each member.
    pub tag_sets: Vec<Vec<u32>>,
    pub shared: Vec<SharedInfo>,
    /// Whether the kernel or a helper it reaches has a barrier or a wave verb: without any,
    /// each work-item simply runs to completion.
    pub synchronises: bool,
    /// Whether it has a wave verb (the scheduler's wave pass is skipped otherwise).
    pub waves: bool,
    /// Whether it has a `wave_barrier()` (per-wave race phases are kept only then).
    pub wave_barriers: bool,
    /// The `print` and `assert` statements compiled, by the site number their records carry.
    pub debug_sites: Vec<crate::ir::debug::DebugSite>,
}

/// Compiles `kernel` of `module` and every helper it reaches. `checks` adds the poison
/// checks on locals declared without an initialiser.
pub(crate) fn compile(
    verified: &VerifiedModule,
    kernel: Handle<Function>,
    checks: bool,
) -> Result<Program, InterpError> {
    let module = verified.module();
    let mut b = ProgBuilder {
        verified,
        module,
        checks,
        index: HashMap::new(),
        queue: Vec::new(),
        funcs: Vec::new(),
        tag_sets: vec![Vec::new(); module.tag_sets.len()],
        barriers: false,
        waves: false,
        wave_barriers: false,
        debug_sites: Vec::new(),
    };
    b.func_index(kernel)?;
    let mut next = 0;
    while next < b.queue.len() {
        let h = b.queue[next];
        let f = b.compile_function(h)?;
        b.funcs.push(f);
        next += 1;
    }
    let kf = &module.functions[kernel];
    let mut shared = Vec::new();
    for (_, d) in kf.shared.iter() {
        let len = match d.len {
            None => None,
            Some(Len::Fixed(n)) => Some(n),
            Some(Len::Const(_)) => {
                return Err(InterpError::refused(
                    d.span,
                    format!(
                        "shared array `{}` has a length given by a template parameter; launch an instance of the template",
                        d.name
                    ),
                ))
            }
        };
        shared.push(SharedInfo {
            name: d.name.clone(),
            elem: d.elem,
            len,
        });
    }
    Ok(Program {
        funcs: b.funcs,
        tag_sets: b.tag_sets,
        shared,
        synchronises: b.barriers || b.waves,
        waves: b.waves,
        wave_barriers: b.wave_barriers,
        debug_sites: b.debug_sites,
    })
}

struct ProgBuilder<'m> {
    verified: &'m VerifiedModule,
    module: &'m Module,
    checks: bool,
    index: HashMap<Handle<Function>, u32>,
    queue: Vec<Handle<Function>>,
    funcs: Vec<CFunc>,
    tag_sets: Vec<Vec<u32>>,
    barriers: bool,
    waves: bool,
    wave_barriers: bool,
    debug_sites: Vec<crate::ir::debug::DebugSite>,
}

impl<'m> ProgBuilder<'m> {
    /// The compiled index of `h`, queueing it for compilation the first time.
    fn func_index(&mut self, h: Handle<Function>) -> Result<u32, InterpError> {
        if let Some(&i) = self.index.get(&h) {
            return Ok(i);
        }
        let Some(f) = self.module.functions.try_get(h) else {
            return Err(InterpError::refused(
                Span::UNKNOWN,
                format!("a call names function {h:?}, which does not exist"),
            ));
        };
        if f.template.is_some() {
            return Err(InterpError::refused(
                f.span,
                format!(
                    "`{}` is a kernel template; launch one of its instances",
                    f.name
                ),
            ));
        }
        let i = self.queue.len() as u32;
        self.index.insert(h, i);
        self.queue.push(h);
        Ok(i)
    }

    fn compile_function(&mut self, h: Handle<Function>) -> Result<CFunc, InterpError> {
        let module = self.module;
        let f = &module.functions[h];
        // The verifier's type table: every expression of a concrete function has a type
        // (`None` only for a call that returns nothing).
        let types = self.verified.expr_types(h).to_vec();
        if types.len() != f.exprs.len() {
            return Err(InterpError::refused(
                f.span,
                format!("`{}` has no type table", f.name),
            ));
        }
        let fc = FnCompiler {
            pb: self,
            f,
            types,
            code: Vec::new(),
            local_slot: Vec::new(),
            checked: vec![false; f.locals.len()],
            const_slot: HashMap::new(),
            consts: Vec::new(),
            const_base: 0,
            top: 0,
            max: 0,
            loops: Vec::new(),
            depth: 0,
            params: Vec::new(),
        };
        fc.function()
    }
}

struct LoopCtx {
    label: Option<String>,
    /// Jumps to patch to the loop's exit (its `PopLoops`).
    breaks: Vec<usize>,
    /// Jumps to patch to the loop's continue point.
    conts: Vec<usize>,
}

/// Deepest expression or statement nesting compiled (recursion guard).
const MAX_DEPTH: u32 = 1000;

struct FnCompiler<'a, 'm> {
    pb: &'a mut ProgBuilder<'m>,
    f: &'m Function,
    types: Vec<Option<Type>>,
    code: Vec<Inst>,
    local_slot: Vec<Slot>,
    /// Locals declared without an initialiser, whose reads are checked.
    checked: Vec<bool>,
    const_slot: HashMap<u64, Slot>,
    consts: Vec<u64>,
    const_base: Slot,
    top: Slot,
    max: Slot,
    loops: Vec<LoopCtx>,
    depth: u32,
    params: Vec<(Slot, u32)>,
}

/// An operand: `n` slots from `slot`.
#[derive(Clone, Copy)]
struct Opnd {
    slot: Slot,
    n: u32,
}

fn refuse<T>(span: Span, msg: impl Into<String>) -> Result<T, InterpError> {
    Err(InterpError::refused(span, msg))
}

/// Slots a value of `ty` occupies; `None` for types that are not values.
fn slots_of(ty: Type) -> Option<u32> {
    Some(match ty {
        Type::Scalar(_) | Type::Tag(_) => 1,
        Type::Vector(_, n) => u32::from(n),
        Type::Matrix { rows, cols, .. } => u32::from(rows) * u32::from(cols),
        Type::Array {
            elem,
            len: Len::Fixed(n),
        } => n.checked_mul(u32::from(elem.lanes))?,
        Type::Array { .. } | Type::Buffer { .. } | Type::Shared { .. } => return None,
    })
}

pub(crate) fn literal_slot(lit: Literal) -> u64 {
    match lit {
        Literal::Bool(b) => b as u64,
        Literal::Int { bits, ty } => value::canon(ty, bits),
        Literal::Float { value: v, ty } => value::float_slot(ty, v),
    }
}

impl<'a, 'm> FnCompiler<'a, 'm> {
    fn function(mut self) -> Result<CFunc, InterpError> {
        let f = self.f;
        let mut next: u64 = 0;
        let mut params = Vec::new();
        for p in &f.params {
            let n = match p.ty {
                Type::Buffer { .. } if f.kind == FunctionKind::Kernel => 0,
                t => match slots_of(t) {
                    Some(n) => n,
                    None => {
                        return refuse(
                            p.span,
                            format!("parameter `{}` of `{}` has no value type", p.name, f.name),
                        )
                    }
                },
            };
            params.push((next as Slot, n));
            next += u64::from(n);
        }
        for (_, l) in f.locals.iter() {
            let Some(n) = slots_of(l.ty) else {
                return refuse(
                    l.span,
                    format!(
                        "local `{}` has a type whose size is not fixed; launch a template instance",
                        l.name
                    ),
                );
            };
            self.local_slot.push(next as Slot);
            next += u64::from(n);
        }
        self.params = params.clone();
        mark_unset_locals(&f.body, &mut self.checked);
        // Arrays are checked per element whether or not their `let` had an initialiser.
        for (h, l) in f.locals.iter() {
            if matches!(l.ty, Type::Array { .. }) {
                self.checked[h.index()] = true;
            }
        }
        self.const_base = next as Slot;
        for (_, e) in f.exprs.iter() {
            let v = match e {
                Expr::Literal(l) => literal_slot(*l),
                Expr::Tag { index, .. } => u64::from(*index),
                _ => continue,
            };
            if !self.const_slot.contains_key(&v) {
                self.const_slot
                    .insert(v, (next + self.consts.len() as u64) as Slot);
                self.consts.push(v);
            }
        }
        next += self.consts.len() as u64;
        if next > u64::from(u32::MAX / 4) {
            // Private memory no workgroup of the interpreter holds (the launch's 2^27-slot
            // bound refuses far less): refused as such (`XPU-L017`), not as undefinable.
            return Err(InterpError::Memory {
                space: "private",
                need: next.saturating_mul(8),
                limit: format!(
                    "`{}` needs {next} slots; the interpreter holds 2^27 (1 GiB) per workgroup",
                    f.name
                ),
            });
        }
        self.top = next as Slot;
        self.max = self.top;
        self.block(&f.body)?;
        match f.ret {
            Some(_) => self.code.push(Inst::NoReturn { span: f.span }),
            None => self.code.push(Inst::Ret { src: 0, n: 0 }),
        }
        Ok(CFunc {
            name: f.name.clone(),
            code: self.code,
            frame: self.max,
            params,
            const_base: self.const_base,
            consts: self.consts,
            local_names: f.locals.iter().map(|(_, l)| l.name.clone()).collect(),
        })
    }

    // ----------------------------------------------------------------- helpers

    fn alloc(&mut self, n: u32) -> Slot {
        let s = self.top;
        self.top += n;
        self.max = self.max.max(self.top);
        s
    }

    fn emit(&mut self, i: Inst) -> usize {
        self.code.push(i);
        self.code.len() - 1
    }

    fn here(&self) -> u32 {
        self.code.len() as u32
    }

    fn patch(&mut self, at: usize, to: u32) {
        match &mut self.code[at] {
            Inst::Jump { to: t } | Inst::JumpIf { to: t, .. } | Inst::JumpIfNot { to: t, .. } => {
                *t = to
            }
            _ => unreachable!("patching a non-jump"),
        }
    }

    fn span(&self, e: ExprId) -> Span {
        self.f.expr_span(e)
    }

    fn ty(&self, e: ExprId) -> Result<Type, InterpError> {
        match self.types.get(e.index()).copied().flatten() {
            Some(t) => Ok(t),
            None => refuse(
                self.span(e),
                format!("expression {e:?} in `{}` has no value", self.f.name),
            ),
        }
    }

    fn scalar_of(&self, e: ExprId) -> Result<(Scalar, u32), InterpError> {
        match self.ty(e)? {
            Type::Scalar(s) => Ok((s, 1)),
            Type::Vector(s, n) => Ok((s, u32::from(n))),
            t => refuse(
                self.span(e),
                format!("expected a scalar or vector, found {t:?}"),
            ),
        }
    }

    fn local(&self, h: Handle<crate::ir::Local>) -> Result<(Slot, u32), InterpError> {
        let Some(l) = self.f.locals.try_get(h) else {
            return refuse(self.f.span, format!("local {h:?} does not exist"));
        };
        Ok((self.local_slot[h.index()], slots_of(l.ty).unwrap_or(0)))
    }

    fn mem(&self, base: Base, span: Span) -> Result<Mem, InterpError> {
        let elem = match typeck::base_elem_checked(self.f, base) {
            Ok(e) => e,
            Err(e) => return refuse(span, e.message),
        };
        let (s, lanes) = (elem.scalar, elem.lanes);
        Ok(match base {
            Base::Param(i) => {
                if self.f.kind != FunctionKind::Kernel {
                    return refuse(span, "a buffer accessed outside a kernel");
                }
                Mem::Buf { id: i, s, lanes }
            }
            Base::Shared(h) => {
                if self.f.kind != FunctionKind::Kernel || !self.f.shared.contains(h) {
                    return refuse(span, "a shared array accessed outside its kernel");
                }
                Mem::Shared {
                    id: h.index() as u32,
                    s,
                    lanes,
                }
            }
            Base::Local(h) => {
                let (slot, _) = self.local(h)?;
                let len = match self.f.locals[h].ty {
                    Type::Array {
                        len: Len::Fixed(n), ..
                    } => n,
                    _ => return refuse(span, "an index into a local that is not an array"),
                };
                Mem::Private {
                    slot,
                    len,
                    s,
                    lanes,
                }
            }
        })
    }

    fn enter(&mut self, span: Span) -> Result<(), InterpError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return refuse(
                span,
                format!(
                    "nesting deeper than {MAX_DEPTH} levels in `{}`",
                    self.f.name
                ),
            );
        }
        Ok(())
    }

    // ----------------------------------------------------------------- statements

    fn block(&mut self, b: &Block) -> Result<(), InterpError> {
        for s in b {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), InterpError> {
        self.enter(s.span)?;
        let mark = self.top;
        match &s.kind {
            StmtKind::Let { local, init } => {
                let (slot, n) = self.local(*local)?;
                match init {
                    Some(e) => self.assign_local(slot, n, *e, self.checked[local.index()])?,
                    None => {
                        if self.pb.checks {
                            self.emit(Inst::Undef { slot, n });
                        }
                    }
                }
            }
            StmtKind::Assign { place, value } => match *place {
                Place::Local(h) => {
                    let (slot, n) = self.local(h)?;
                    self.assign_local(slot, n, *value, self.checked[h.index()])?;
                }
                Place::Lane { local, lane } => {
                    let (slot, n) = self.local(local)?;
                    if u32::from(lane) >= n {
                        return refuse(s.span, "a lane outside its vector");
                    }
                    let v = self.expr(*value)?;
                    self.emit(Inst::Copy {
                        dst: slot + u32::from(lane),
                        src: v.slot,
                        n: 1,
                    });
                    if self.checked[local.index()] && self.pb.checks {
                        self.emit(Inst::MarkDef {
                            slot: slot + u32::from(lane),
                            n: 1,
                        });
                    }
                }
                Place::Element { base, index } => {
                    let mem = self.mem(base, s.span)?;
                    let i = self.expr(index)?;
                    let v = self.expr(*value)?;
                    self.emit(Inst::Store {
                        mem,
                        src: v.slot,
                        idx: i.slot,
                        span: s.span,
                    });
                }
            },
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.expr(*cond)?;
                let to_else = self.emit(Inst::JumpIfNot { c: c.slot, to: 0 });
                self.top = mark;
                self.block(then_block)?;
                if else_block.is_empty() {
                    let end = self.here();
                    self.patch(to_else, end);
                } else {
                    let to_end = self.emit(Inst::Jump { to: 0 });
                    let else_at = self.here();
                    self.patch(to_else, else_at);
                    self.block(else_block)?;
                    let end = self.here();
                    self.patch(to_end, end);
                }
            }
            StmtKind::Loop { label, kind, body } => self.loop_stmt(label, kind, body, s.span)?,
            StmtKind::Block(b) => self.block(b)?,
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                let brk = matches!(s.kind, StmtKind::Break(_));
                let Some(k) = self.loop_target(label.as_deref()) else {
                    return refuse(s.span, "a `break` or `continue` outside its loop");
                };
                // Leave the loops nested inside the target (and the target itself on break:
                // its exit pops it).
                let inner = (self.loops.len() - 1 - k) as u32;
                if inner > 0 {
                    self.emit(Inst::PopLoops { n: inner });
                }
                let j = self.emit(Inst::Jump { to: 0 });
                if brk {
                    self.loops[k].breaks.push(j);
                } else {
                    self.loops[k].conts.push(j);
                }
            }
            StmtKind::Return(e) => match e {
                Some(e) => {
                    let v = self.expr(*e)?;
                    self.emit(Inst::Ret {
                        src: v.slot,
                        n: v.n,
                    });
                }
                None => {
                    self.emit(Inst::Ret { src: 0, n: 0 });
                }
            },
            StmtKind::Expr(e) => {
                self.expr_any(*e)?;
            }
            StmtKind::Barrier => {
                self.pb.barriers = true;
                self.emit(Inst::Barrier { span: s.span });
            }
            StmtKind::WaveBarrier => {
                self.pb.waves = true;
                self.pb.wave_barriers = true;
                self.emit(Inst::WaveBarrier { span: s.span });
            }
            StmtKind::Print { format, args } => {
                let mut types = Vec::with_capacity(args.len());
                let mut slots = Vec::with_capacity(args.len());
                for &a in args {
                    let (sc, n) = self.scalar_of(a)?;
                    if n != 1 {
                        return refuse(s.span, "print of a vector; print takes scalars");
                    }
                    types.push(sc);
                    slots.push(self.expr(a)?.slot);
                }
                let site = self.pb.debug_sites.len() as u32;
                self.pb.debug_sites.push(crate::ir::debug::DebugSite {
                    line: s.span.line,
                    kind: crate::ir::debug::SiteKind::Print {
                        format: format.clone(),
                        args: types,
                    },
                });
                self.emit(Inst::Print {
                    site,
                    args: slots.into(),
                });
            }
            StmtKind::Assert { cond, message } => {
                let c = self.expr(*cond)?;
                let site = self.pb.debug_sites.len() as u32;
                self.pb.debug_sites.push(crate::ir::debug::DebugSite {
                    line: s.span.line,
                    kind: crate::ir::debug::SiteKind::Assert {
                        message: message.clone(),
                    },
                });
                self.emit(Inst::Assert { site, c: c.slot });
            }
            // Fences order nothing the interpreter could observe: it runs one work-item at a
            // time and its race rule already ignores fences (docs/semantics.md).
            StmtKind::Fence(_) => {}
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                let (buf, s_) = match self.mem(*base, s.span)? {
                    Mem::Buf { id, s, lanes: 1 } => (id, s),
                    _ => return refuse(s.span, "vstore needs a buffer of scalars"),
                };
                let (vs, lanes) = self.scalar_of(*value)?;
                if vs != s_ {
                    return refuse(s.span, "vstore of a vector of another scalar");
                }
                let i = self.expr(*index)?;
                let v = self.expr(*value)?;
                self.emit(Inst::VStore {
                    buf,
                    s: s_,
                    lanes: lanes as u8,
                    align: align.unwrap_or(0),
                    src: v.slot,
                    idx: i.slot,
                    span: s.span,
                });
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                let Type::Matrix {
                    scalar, rows, cols, ..
                } = self.ty(*value)?
                else {
                    return refuse(s.span, "matrix_store of a value that is not a fragment");
                };
                let mem = self.mem(*base, s.span)?;
                if mem.scalar() != scalar || mem.lanes() != 1 || matches!(mem, Mem::Private { .. })
                {
                    return refuse(
                        s.span,
                        "matrix_store to memory that does not hold the fragment's scalar",
                    );
                }
                self.pb.waves = true;
                let v = self.expr(*value)?;
                let off = self.expr(*offset)?;
                let stride = self.expr(*stride)?;
                self.emit(Inst::MStore {
                    src: v.slot,
                    mem,
                    off: off.slot,
                    stride: stride.slot,
                    rows: u32::from(rows),
                    cols: u32::from(cols),
                    span: s.span,
                });
            }
        }
        self.top = mark;
        self.depth -= 1;
        Ok(())
    }

    fn loop_target(&self, label: Option<&str>) -> Option<usize> {
        match label {
            None => self.loops.len().checked_sub(1),
            Some(l) => self
                .loops
                .iter()
                .rposition(|c| c.label.as_deref() == Some(l)),
        }
    }

    /// `local = e`: computed straight into the local's slots where the instruction reads each
    /// lane before writing it, through a temporary otherwise.
    fn assign_local(
        &mut self,
        slot: Slot,
        n: u32,
        e: ExprId,
        checked: bool,
    ) -> Result<(), InterpError> {
        let direct = matches!(
            self.f.exprs.try_get(e),
            Some(
                Expr::Unary { .. }
                    | Expr::Cast { .. }
                    | Expr::Math { .. }
                    | Expr::Index { .. }
                    | Expr::Builtin(_)
                    | Expr::Len(_)
                    | Expr::Splat { .. }
                    | Expr::Atomic { .. }
                    | Expr::VLoad { .. }
            ) | Some(Expr::Binary {
                op: BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Rem
                    | BinaryOp::BitAnd
                    | BinaryOp::BitOr
                    | BinaryOp::BitXor
                    | BinaryOp::Shl
                    | BinaryOp::Shr
                    | BinaryOp::Eq
                    | BinaryOp::Ne
                    | BinaryOp::Lt
                    | BinaryOp::Le
                    | BinaryOp::Gt
                    | BinaryOp::Ge,
                ..
            })
        );
        if direct {
            self.expr_to(e, Some(slot))?;
        } else {
            let v = self.expr(e)?;
            if v.n != n {
                return refuse(self.span(e), "an assignment of a value of another size");
            }
            if v.slot != slot {
                self.emit(Inst::Copy {
                    dst: slot,
                    src: v.slot,
                    n,
                });
            }
        }
        if checked && self.pb.checks {
            self.emit(Inst::MarkDef { slot, n });
        }
        Ok(())
    }

    fn loop_stmt(
        &mut self,
        label: &Option<String>,
        kind: &LoopKind,
        body: &Block,
        span: Span,
    ) -> Result<(), InterpError> {
        // A `for` evaluates its bounds and step once, before the loop.
        let mut for_parts = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let (vslot, _) = self.local(*var)?;
            let Type::Scalar(vs) = self.f.locals[*var].ty else {
                return refuse(span, "a `for` variable that is not a scalar");
            };
            self.assign_local(vslot, 1, *start, false)?;
            let end_slot = self.alloc(1);
            let e = self.expr(*end)?;
            self.emit(Inst::Copy {
                dst: end_slot,
                src: e.slot,
                n: 1,
            });
            self.top = end_slot + 1;
            let step_slot = match step {
                Some(st) => {
                    let s = self.alloc(1);
                    let v = self.expr(*st)?;
                    self.emit(Inst::Copy {
                        dst: s,
                        src: v.slot,
                        n: 1,
                    });
                    self.top = s + 1;
                    Some(s)
                }
                None => None,
            };
            for_parts = Some((vslot, vs, end_slot, step_slot));
        }
        // `for var = init; cond; update`: the initial value, before the loop.
        let mut cond_var = None;
        if let LoopKind::Cond { var, init, .. } = kind {
            let (vslot, n) = self.local(*var)?;
            self.assign_local(vslot, n, *init, false)?;
            cond_var = Some((vslot, n));
        }
        self.emit(Inst::LoopEnter);
        let head = self.here();
        let mark = self.top;
        let mut exit_jump = None;
        match kind {
            LoopKind::Infinite => {}
            LoopKind::While(c) => {
                let c = self.expr(*c)?;
                exit_jump = Some(self.emit(Inst::JumpIfNot { c: c.slot, to: 0 }));
            }
            LoopKind::For { .. } => {
                let (vslot, vs, end_slot, step) = for_parts.expect("for parts");
                let bin = |op| {
                    value::binary_fn(op, vs)
                        .ok_or_else(|| InterpError::refused(span, "a `for` over a non-integer"))
                };
                let c = self.alloc(1);
                self.emit(Inst::Bin {
                    f: bin(BinaryOp::Lt)?,
                    dst: c,
                    a: vslot,
                    b: end_slot,
                    n: 1,
                });
                if let (Some(st), true) = (step, vs.is_signed()) {
                    // A negative step counts down: while `var > end`.
                    let (zero, neg, gt) = (self.alloc(1), self.alloc(1), self.alloc(1));
                    self.emit(Inst::Bin {
                        f: bin(BinaryOp::BitXor)?,
                        dst: zero,
                        a: st,
                        b: st,
                        n: 1,
                    });
                    self.emit(Inst::Bin {
                        f: bin(BinaryOp::Lt)?,
                        dst: neg,
                        a: st,
                        b: zero,
                        n: 1,
                    });
                    self.emit(Inst::Bin {
                        f: bin(BinaryOp::Gt)?,
                        dst: gt,
                        a: vslot,
                        b: end_slot,
                        n: 1,
                    });
                    self.emit(Inst::Select {
                        dst: c,
                        c: neg,
                        a: gt,
                        b: c,
                        n: 1,
                        cvec: false,
                    });
                }
                exit_jump = Some(self.emit(Inst::JumpIfNot { c, to: 0 }));
            }
            LoopKind::Cond { cond, .. } => {
                let c = self.expr(*cond)?;
                exit_jump = Some(self.emit(Inst::JumpIfNot { c: c.slot, to: 0 }));
            }
        }
        self.top = mark;
        self.loops.push(LoopCtx {
            label: label.clone(),
            breaks: Vec::new(),
            conts: Vec::new(),
        });
        self.block(body)?;
        let ctx = self.loops.pop().expect("loop context");
        let cont = self.here();
        for j in ctx.conts {
            self.patch(j, cont);
        }
        if let Some((vslot, vs, _, step)) = for_parts {
            match step {
                None => {
                    self.emit(Inst::Inc { slot: vslot, s: vs });
                }
                Some(st) => {
                    let add = value::binary_fn(BinaryOp::Add, vs)
                        .ok_or_else(|| InterpError::refused(span, "a `for` over a non-integer"))?;
                    self.emit(Inst::Bin {
                        f: add,
                        dst: vslot,
                        a: vslot,
                        b: st,
                        n: 1,
                    });
                }
            }
        }
        if let (Some((vslot, n)), LoopKind::Cond { update, .. }) = (cond_var, kind) {
            self.assign_local(vslot, n, *update, false)?;
            self.top = mark;
        }
        self.emit(Inst::LoopNext { to: head });
        let exit = self.here();
        if let Some(j) = exit_jump {
            self.patch(j, exit);
        }
        for j in ctx.breaks {
            self.patch(j, exit);
        }
        self.emit(Inst::PopLoops { n: 1 });
        Ok(())
    }

    // ----------------------------------------------------------------- expressions

    /// An expression that may yield nothing (a call for its effect).
    fn expr_any(&mut self, e: ExprId) -> Result<(), InterpError> {
        match self.f.exprs.try_get(e) {
            Some(Expr::Call { .. } | Expr::Dispatch { .. }) => {
                self.call(e, None)?;
            }
            Some(Expr::AtomicStore { place, value, .. }) => {
                let (place, value) = (*place, *value);
                self.atomic_store(place, value, self.span(e))?;
            }
            _ => {
                self.expr(e)?;
            }
        }
        Ok(())
    }

    fn expr(&mut self, e: ExprId) -> Result<Opnd, InterpError> {
        self.expr_to(e, None)
    }

    /// Compiles `e`; its value lands in `want` if given (the caller guarantees that is
    /// safe for this expression), else wherever is cheapest.
    fn expr_to(&mut self, e: ExprId, want: Option<Slot>) -> Result<Opnd, InterpError> {
        let span = self.span(e);
        self.enter(span)?;
        let r = self.expr_inner(e, want, span);
        self.depth -= 1;
        let r = r?;
        if let Some(w) = want {
            if r.slot != w {
                self.emit(Inst::Copy {
                    dst: w,
                    src: r.slot,
                    n: r.n,
                });
                return Ok(Opnd { slot: w, n: r.n });
            }
        }
        Ok(r)
    }

    fn dst(&mut self, want: Option<Slot>, n: u32) -> Slot {
        match want {
            Some(w) => w,
            None => self.alloc(n),
        }
    }

    fn expr_inner(
        &mut self,
        e: ExprId,
        want: Option<Slot>,
        span: Span,
    ) -> Result<Opnd, InterpError> {
        let f = self.f;
        let Some(expr) = f.exprs.try_get(e) else {
            return refuse(span, format!("expression {e:?} does not exist"));
        };
        let mark = self.top;
        let out = match expr {
            Expr::Literal(l) => Opnd {
                slot: self.const_slot[&literal_slot(*l)],
                n: 1,
            },
            Expr::Tag { index, .. } => Opnd {
                slot: self.const_slot[&u64::from(*index)],
                n: 1,
            },
            Expr::Param(i) => {
                let Some(&(slot, n)) = self.params.get(*i as usize) else {
                    return refuse(span, "a parameter index out of range");
                };
                if n == 0 {
                    return refuse(span, "a buffer parameter used as a value");
                }
                Opnd { slot, n }
            }
            Expr::Local(h) => {
                let (slot, n) = self.local(*h)?;
                if self.checked[h.index()] && self.pb.checks {
                    self.emit(Inst::CheckDef {
                        slot,
                        n,
                        local: h.index() as u32,
                        span,
                    });
                }
                Opnd { slot, n }
            }
            Expr::TemplateParam(_) => {
                return refuse(
                    span,
                    "a template parameter in a launched kernel; launch an instance of the template",
                )
            }
            Expr::Builtin(b) => {
                let dst = self.dst(want, 1);
                self.emit(Inst::Builtin { dst, b: *b });
                Opnd { slot: dst, n: 1 }
            }
            Expr::Unary { op, arg } => {
                let (s, n) = self.scalar_of(*arg)?;
                let Some(fun) = value::unary_fn(*op, s) else {
                    return refuse(span, format!("{op:?} of {}", s.name()));
                };
                let dst = self.dst(want, n);
                let a = self.expr(*arg)?;
                self.emit(Inst::Un {
                    f: fun,
                    dst,
                    a: a.slot,
                    n,
                });
                Opnd { slot: dst, n }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, *lhs, *rhs, want, span)?,
            Expr::Cast { to, arg } => {
                let (from, n) = self.scalar_of(*arg)?;
                let dst = self.dst(want, n);
                let a = self.expr(*arg)?;
                self.emit(Inst::Cast {
                    from,
                    to: *to,
                    dst,
                    a: a.slot,
                    n,
                });
                Opnd { slot: dst, n }
            }
            Expr::Bitcast { to, arg } => {
                let from = self.ty(*arg)?.as_elem();
                let to_e = to.as_elem();
                let (Some(from), Some(to_e)) = (from, to_e) else {
                    return refuse(span, "a bitcast of a non-value");
                };
                if from.size() != to_e.size() {
                    return refuse(span, "a bitcast between types of different sizes");
                }
                let n = u32::from(to_e.lanes);
                let dst = self.alloc(n);
                let a = self.expr(*arg)?;
                self.emit(Inst::Bitcast {
                    from,
                    to: to_e,
                    dst,
                    a: a.slot,
                });
                Opnd { slot: dst, n }
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let (_, n) = self.scalar_of(*accept)?;
                let (_, cn) = self.scalar_of(*cond)?;
                let dst = self.alloc(n);
                let c = self.expr(*cond)?;
                let a = self.expr(*accept)?;
                let b = self.expr(*reject)?;
                self.emit(Inst::Select {
                    dst,
                    c: c.slot,
                    a: a.slot,
                    b: b.slot,
                    n,
                    cvec: cn > 1,
                });
                Opnd { slot: dst, n }
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => {
                // dst = cond ? accept : reject, evaluating only the arm taken.
                let (_, n) = self.scalar_of(*accept)?;
                let dst = self.alloc(n);
                self.top = dst + n;
                let c = self.expr(*cond)?;
                let to_else = self.emit(Inst::JumpIfNot { c: c.slot, to: 0 });
                self.top = dst + n;
                let a = self.expr(*accept)?;
                self.emit(Inst::Copy {
                    dst,
                    src: a.slot,
                    n,
                });
                self.top = dst + n;
                let to_end = self.emit(Inst::Jump { to: 0 });
                let else_at = self.here();
                self.patch(to_else, else_at);
                let b = self.expr(*reject)?;
                self.emit(Inst::Copy {
                    dst,
                    src: b.slot,
                    n,
                });
                let end = self.here();
                self.patch(to_end, end);
                Opnd { slot: dst, n }
            }
            Expr::Compose { lanes, parts, .. } => {
                let n = u32::from(*lanes);
                let dst = self.alloc(n);
                let mut off = 0;
                for &p in parts {
                    let m = self.top;
                    let v = self.expr(p)?;
                    if off + v.n > n {
                        return refuse(span, "vector parts with too many lanes");
                    }
                    self.emit(Inst::Copy {
                        dst: dst + off,
                        src: v.slot,
                        n: v.n,
                    });
                    off += v.n;
                    self.top = m;
                }
                if off != n {
                    return refuse(span, "vector parts with too few lanes");
                }
                Opnd { slot: dst, n }
            }
            Expr::Splat { lanes, value } => {
                let n = u32::from(*lanes);
                let dst = self.dst(want, n);
                let v = self.expr(*value)?;
                self.emit(Inst::Splat { dst, a: v.slot, n });
                Opnd { slot: dst, n }
            }
            Expr::Extract { vector, lane } => {
                // One lane of a local declared without an initialiser: only that lane must be
                // defined (`v.x = 1.0; out = v.x;` reads nothing undefined).
                if let Some(&Expr::Local(h)) = f.exprs.try_get(*vector) {
                    let (slot, n) = self.local(h)?;
                    if u32::from(*lane) >= n {
                        return refuse(span, "a lane outside its vector");
                    }
                    let slot = slot + u32::from(*lane);
                    if self.checked[h.index()] && self.pb.checks {
                        self.emit(Inst::CheckDef {
                            slot,
                            n: 1,
                            local: h.index() as u32,
                            span,
                        });
                    }
                    return Ok(Opnd { slot, n: 1 });
                }
                let v = self.expr(*vector)?;
                if u32::from(*lane) >= v.n {
                    return refuse(span, "a lane outside its vector");
                }
                // An alias into the operand's slots: nothing to copy.
                return Ok(Opnd {
                    slot: v.slot + u32::from(*lane),
                    n: 1,
                });
            }
            Expr::Swizzle { vector, lanes } => {
                let n = lanes.len() as u32;
                let dst = self.alloc(n);
                let v = self.expr(*vector)?;
                for (i, &l) in lanes.iter().enumerate() {
                    if u32::from(l) >= v.n {
                        return refuse(span, "a lane outside its vector");
                    }
                    self.emit(Inst::Copy {
                        dst: dst + i as u32,
                        src: v.slot + u32::from(l),
                        n: 1,
                    });
                }
                Opnd { slot: dst, n }
            }
            Expr::Index { base, index } => {
                let mem = self.mem(*base, span)?;
                let n = u32::from(mem.lanes());
                let dst = self.dst(want, n);
                let i = self.expr(*index)?;
                self.emit(Inst::Load {
                    mem,
                    dst,
                    idx: i.slot,
                    span,
                });
                Opnd { slot: dst, n }
            }
            // The verifier inlines every call that passes memory.
            Expr::Ref(_) => {
                return refuse(
                    span,
                    "a buffer or array by reference outside an inlined helper call",
                )
            }
            Expr::Len(p) => {
                match f.params.get(*p as usize).map(|p| p.ty) {
                    Some(Type::Buffer { .. }) if f.kind == FunctionKind::Kernel => {}
                    _ => return refuse(span, "len of something that is not a buffer parameter"),
                }
                let dst = self.dst(want, 1);
                self.emit(Inst::Len { dst, buf: *p });
                Opnd { slot: dst, n: 1 }
            }
            Expr::Call { .. } | Expr::Dispatch { .. } => match self.call(e, want)? {
                Some(o) => o,
                None => return refuse(span, "a call that returns nothing used as a value"),
            },
            Expr::Math { fun, args } => self.math(*fun, args, want, span)?,
            Expr::Bits { op, args } => self.bits(*op, args, want, span)?,
            Expr::AtomicLoad { place, .. } => self.atomic_load(*place, want, span)?,
            Expr::AtomicStore { .. } => {
                return refuse(span, "atomic_store used as a value");
            }
            Expr::Atomic {
                op,
                place,
                value,
                compare,
                ..
            } => {
                let Place::Element { base, index } = *place else {
                    return refuse(span, "an atomic on something other than an element");
                };
                let mem = self.mem(base, span)?;
                if matches!(mem, Mem::Private { .. }) || mem.lanes() != 1 {
                    return refuse(span, "an atomic on private memory or a vector element");
                }
                let s = mem.scalar();
                if !op.takes(s) {
                    return refuse(span, format!("{} on {}", op.name(), s.name()));
                }
                let dst = self.dst(want, 1);
                let i = self.expr(index)?;
                let cmp = match compare {
                    Some(c) => self.expr(*c)?.slot,
                    None => NONE,
                };
                let val = self.expr(*value)?;
                self.emit(Inst::Atomic {
                    op: *op,
                    mem,
                    dst,
                    idx: i.slot,
                    val: val.slot,
                    cmp,
                    span,
                });
                Opnd { slot: dst, n: 1 }
            }
            Expr::Wave { op, args, width } => {
                self.pb.waves = true;
                let (s, n) = match op {
                    WaveOp::Elect | WaveOp::Any | WaveOp::All | WaveOp::Ballot => (Scalar::Bool, 1),
                    _ => match args.first() {
                        Some(&a) => self.scalar_of(a)?,
                        None => return refuse(span, "a wave verb without its value"),
                    },
                };
                let out_n = if *op == WaveOp::Ballot { 1 } else { n };
                let dst = self.alloc(out_n);
                let a = match args.first() {
                    Some(&a) => self.expr(a)?.slot,
                    None => NONE,
                };
                let b = match args.get(1) {
                    Some(&b) => self.expr(b)?.slot,
                    None => NONE,
                };
                self.emit(Inst::Wave {
                    op: *op,
                    s,
                    dst,
                    a,
                    b,
                    n,
                    width: width.unwrap_or(0),
                    span,
                });
                Opnd {
                    slot: dst,
                    n: out_n,
                }
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let (buf, s) = match self.mem(*base, span)? {
                    Mem::Buf { id, s, lanes: 1 } => (id, s),
                    _ => return refuse(span, "vload needs a buffer of scalars"),
                };
                let n = u32::from(*lanes);
                let dst = self.dst(want, n);
                let i = self.expr(*index)?;
                self.emit(Inst::VLoad {
                    buf,
                    s,
                    lanes: *lanes,
                    align: align.unwrap_or(0),
                    dst,
                    idx: i.slot,
                    span,
                });
                Opnd { slot: dst, n }
            }
            Expr::MatrixFill {
                rows, cols, value, ..
            } => {
                self.pb.waves = true;
                let n = u32::from(*rows) * u32::from(*cols);
                let dst = self.alloc(n);
                let v = self.expr(*value)?;
                self.emit(Inst::MFill {
                    dst,
                    val: v.slot,
                    n,
                    span,
                });
                Opnd { slot: dst, n }
            }
            Expr::MatrixLoad {
                rows,
                cols,
                base,
                offset,
                stride,
                scalar,
                ..
            } => {
                self.pb.waves = true;
                let mem = self.mem(*base, span)?;
                if mem.scalar() != *scalar || mem.lanes() != 1 || matches!(mem, Mem::Private { .. })
                {
                    return refuse(
                        span,
                        "matrix_load from memory that does not hold the fragment's scalar",
                    );
                }
                let n = u32::from(*rows) * u32::from(*cols);
                let dst = self.alloc(n);
                let off = self.expr(*offset)?;
                let stride = self.expr(*stride)?;
                self.emit(Inst::MLoad {
                    dst,
                    mem,
                    off: off.slot,
                    stride: stride.slot,
                    rows: u32::from(*rows),
                    cols: u32::from(*cols),
                    span,
                });
                Opnd { slot: dst, n }
            }
            Expr::MatrixMma { a, b, c } => {
                self.pb.waves = true;
                let (ta, tc) = (self.ty(*a)?, self.ty(*c)?);
                let (
                    Type::Matrix {
                        scalar: sa,
                        rows: m,
                        cols: k,
                        ..
                    },
                    Type::Matrix {
                        scalar: sc,
                        cols: n,
                        ..
                    },
                ) = (ta, tc)
                else {
                    return refuse(span, "matrix_mma of values that are not fragments");
                };
                let (m, n, k) = (u32::from(m), u32::from(n), u32::from(k));
                let dst = self.alloc(m * n);
                let ea = self.expr(*a)?;
                let eb = self.expr(*b)?;
                let ec = self.expr(*c)?;
                if ea.n != m * k || eb.n != k * n || ec.n != m * n {
                    return refuse(span, "matrix_mma shapes disagree");
                }
                self.emit(Inst::MMma {
                    dst,
                    a: ea.slot,
                    b: eb.slot,
                    c: ec.slot,
                    m,
                    n,
                    k,
                    sa,
                    sc,
                    span,
                });
                Opnd {
                    slot: dst,
                    n: m * n,
                }
            }
        };
        // Keep the result's slots reserved if they are temporaries above `mark`.
        if out.slot >= mark {
            self.top = out.slot + out.n;
        } else {
            self.top = mark;
        }
        Ok(out)
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        lhs: ExprId,
        rhs: ExprId,
        want: Option<Slot>,
        span: Span,
    ) -> Result<Opnd, InterpError> {
        let (s, n) = self.scalar_of(lhs)?;
        if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            // dst = lhs; if (dst is decisive) skip; dst = rhs.
            let dst = self.alloc(1);
            let a = self.expr(lhs)?;
            self.emit(Inst::Copy {
                dst,
                src: a.slot,
                n: 1,
            });
            self.top = dst + 1;
            let skip = if op == BinaryOp::LogicalAnd {
                self.emit(Inst::JumpIfNot { c: dst, to: 0 })
            } else {
                self.emit(Inst::JumpIf { c: dst, to: 0 })
            };
            let b = self.expr(rhs)?;
            self.emit(Inst::Copy {
                dst,
                src: b.slot,
                n: 1,
            });
            let end = self.here();
            self.patch(skip, end);
            return Ok(Opnd { slot: dst, n: 1 });
        }
        let dst = self.dst(want, n);
        let a = self.expr(lhs)?;
        let b = self.expr(rhs)?;
        if a.n != n || b.n != n {
            return refuse(span, "operands of different lane counts");
        }
        if matches!(op, BinaryOp::Div | BinaryOp::Rem) && s.is_int() {
            self.emit(Inst::DivRem {
                s,
                rem: op == BinaryOp::Rem,
                dst,
                a: a.slot,
                b: b.slot,
                n,
                span,
            });
        } else {
            let Some(fun) = value::binary_fn(op, s) else {
                return refuse(span, format!("{op:?} of {}", s.name()));
            };
            self.emit(Inst::Bin {
                f: fun,
                dst,
                a: a.slot,
                b: b.slot,
                n,
            });
        }
        Ok(Opnd { slot: dst, n })
    }

    fn math(
        &mut self,
        fun: MathFn,
        args: &[ExprId],
        want: Option<Slot>,
        span: Span,
    ) -> Result<Opnd, InterpError> {
        if args.len() != fun.arity() {
            return refuse(
                span,
                format!("`{}` with {} arguments", fun.name(), args.len()),
            );
        }
        let (s, n) = self.scalar_of(args[0])?;
        let dst = self.dst(want, n);
        let mut ops = Vec::with_capacity(3);
        for &a in args {
            let o = self.expr(a)?;
            if o.n != n {
                return refuse(span, "math arguments of different lane counts");
            }
            ops.push(o.slot);
        }
        let bad = || InterpError::refused(span, format!("`{}` of {}", fun.name(), s.name()));
        let inst = match fun.arity() {
            1 => Inst::Un {
                f: value::math1_fn(fun, s).ok_or_else(bad)?,
                dst,
                a: ops[0],
                n,
            },
            2 => Inst::Bin {
                f: value::math2_fn(fun, s).ok_or_else(bad)?,
                dst,
                a: ops[0],
                b: ops[1],
                n,
            },
            _ => Inst::Ter {
                f: value::math3_fn(fun, s).ok_or_else(bad)?,
                dst,
                a: ops[0],
                b: ops[1],
                c: ops[2],
                n,
            },
        };
        self.emit(inst);
        Ok(Opnd { slot: dst, n })
    }

    /// A call or a dispatch; `None` when the callee returns nothing.
    fn call(&mut self, e: ExprId, want: Option<Slot>) -> Result<Option<Opnd>, InterpError> {
        let span = self.span(e);
        let module = self.pb.module;
        let ret_n = match self.types.get(e.index()).copied().flatten() {
            Some(t) => slots_of(t).unwrap_or(0),
            None => 0,
        };
        let dst = if ret_n > 0 {
            self.dst(want, ret_n)
        } else {
            NONE
        };
        match &self.f.exprs[e] {
            Expr::Call { function, args } => {
                let func = self.pb.func_index(*function)?;
                let args = self.args(args)?;
                self.emit(Inst::Call {
                    func,
                    args,
                    dst,
                    n: ret_n,
                });
            }
            Expr::Dispatch { tag, args } => {
                let Ok(Type::Tag(set)) = self.ty(*tag) else {
                    return refuse(span, "a dispatch through a value that is not a tag");
                };
                let Some(ts) = module.tag_sets.try_get(set) else {
                    return refuse(span, "a dispatch through a tag set that does not exist");
                };
                if self.pb.tag_sets[set.index()].is_empty() {
                    let mut members = Vec::new();
                    for &m in &ts.members {
                        members.push(self.pb.func_index(m)?);
                    }
                    self.pb.tag_sets[set.index()] = members;
                }
                let t = self.expr(*tag)?;
                let args = self.args(args)?;
                self.emit(Inst::Dispatch {
                    set: set.index() as u32,
                    tag: t.slot,
                    args,
                    dst,
                    n: ret_n,
                });
            }
            _ => unreachable!("call() on a non-call"),
        }
        Ok((ret_n > 0).then_some(Opnd {
            slot: dst,
            n: ret_n,
        }))
    }

    fn args(&mut self, args: &[ExprId]) -> Result<Box<[(Slot, u32)]>, InterpError> {
        let mut out = Vec::with_capacity(args.len());
        for &a in args {
            let o = self.expr(a)?;
            out.push((o.slot, o.n));
        }
        Ok(out.into_boxed_slice())
    }
}

/// Marks every local declared by a `let` without an initialiser.
fn mark_unset_locals(b: &Block, checked: &mut [bool]) {
    for s in b {
        if let StmtKind::Let { local, init: None } = &s.kind {
            if let Some(c) = checked.get_mut(local.index()) {
                *c = true;
            }
        }
        for inner in s.kind.blocks() {
            mark_unset_locals(inner, checked);
        }
    }
}
