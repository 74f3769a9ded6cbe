//! The lowering of one kernel to one Cranelift function that runs one workgroup.
//!
//! Shape of the generated function `fn(ctx: *mut LaunchCtx) -> u32` (0: done, else an error
//! recorded in the context):
//!
//! ```text
//! entry:        load the launch's uniform values (buffers, scalars, group id)
//! region_head:  w = 0, next = NONE
//! wave_head:    if w == waves: goto region_end
//!               wave values (state pointer, local ids, initial mask); dispatch on `resume`
//! start:        the kernel body for wave w, lanes as vectors under the exec mask ...
//!   barrier k:  spill every variable in scope to the wave's state; record k; goto wave_next
//! resume k:     reload the variables; continue after barrier k
//! wave_next:    w += 1; goto wave_head
//! region_end:   every wave finished: return 0; else resume = next; goto region_head
//! ```
//!
//! All waves of a region must stop at the same barrier (or all finish); anything else is
//! barrier divergence, reported as an error. Control flow with a uniform condition is a plain
//! branch; divergent control flow runs under lane masks (see the module docs of `jit`).

mod atomic;
mod atomic_access;
mod bits;
mod call;
mod debug;
mod driver;
mod expr;
mod mask;
mod memory;
mod stmt;
mod wave;

use super::analysis::{self, Analysis, Analyzer, Class, GeometryClass};
use super::lanes::{chunks, per_chunk, uty, vty, Val};
use super::{ctx_off, err, stream, Error, Site};
use crate::ir::{
    AtomicOp, Base, BinaryOp, BitOp, Builtin, ElemType, Expr, ExprId, Function, Handle, Len,
    Literal, Local, LoopKind, MathFn, Module, Place, ReduceOp, Scalar, Span, Stmt, StmtKind, Type,
    UnaryOp, WaveOp,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, AtomicRmwOp, Block, ConstantData, Endianness, FuncRef, InstBuilder,
    InstructionData, MemFlagsData, Opcode, Signature, StackSlotData, StackSlotKind, Value,
};
use cranelift_frontend::{FunctionBuilder, Switch, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module as _};
use std::collections::HashMap;
use std::rc::Rc;

/// What a kernel is compiled for.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Lanes per wave (the work-item loop's vector width).
    pub wave: u32,
    pub block: [u32; 3],
    /// Every block this code runs has a multiple of `wave` work-items, so every wave is full
    /// (implied for a fixed block whose volume is a multiple; for a 1-D block of any size,
    /// the launch guarantees it).
    pub whole_waves: bool,
    /// The host has a fused multiply-add instruction.
    pub fma: bool,
    /// The launch sweeps more memory than the caches hold: the flat loop prefetches its read
    /// streams and stores outputs it never reads non-temporally ([`super::stream`]).
    pub streaming: bool,
    /// ub-traps (contract §2.3): `align = N` statements the proof does not confirm are tested
    /// (`XPU-L010`); off, a statement is accepted and the same elements are read.
    pub ub_traps: bool,
}

/// What the lowering learned about the kernel, for the runtime.
pub struct Lowered {
    pub sites: Vec<Site>,
    pub debug_sites: Vec<crate::ir::debug::DebugSite>,
    pub state_bytes: u32,
    /// Bytes of the static shared arrays (64-bit: a declaration may be larger than any
    /// device; the launch refuses what the host cannot hold).
    pub static_shared: u64,
    pub barriers: u32,
    /// The kernel has a flat loop with streams, so code built with `Config::streaming`
    /// differs from this (and is worth building for a large launch).
    pub can_stream: bool,
}

/// The most bytes one wave's state (private arrays, fragments, spilled variables) may take:
/// its offsets are 32-bit immediates of loads and stores.
pub const MAX_STATE_BYTES: u64 = i32::MAX as u64 + 1 - 16;

const FINISHED: i64 = 0x7fff_ffff;
const NONE: i64 = -1;

/// What the lowering knows about the exec mask at a point of the kernel (ordered: a merge of
/// paths knows the least of what each knows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Known {
    /// Any mask.
    Unknown,
    /// The wave's initial mask: full exactly when `wave_full`.
    Initial,
    /// Every lane of the wave.
    Full,
}

/// An expression's value.
#[derive(Clone, Debug)]
enum ExprValue {
    /// Scalar or vector components (a tag is one `u32` component).
    Vals(Vec<Val>),
    /// A cooperative-matrix fragment: the address of its slots (per wave, in the state).
    Mat(Value),
    Void,
}

impl ExprValue {
    fn vals(self) -> Vec<Val> {
        match self {
            ExprValue::Vals(v) => v,
            _ => Vec::new(),
        }
    }
}

/// Where a local lives.
#[derive(Clone)]
enum Slot {
    /// Per component, one scalar variable.
    Uni(Vec<Variable>),
    /// An affine integer: the base's variable and the stride.
    Aff(Variable, i64),
    /// Per component, one variable per chunk.
    Var(Vec<Vec<Variable>>),
    /// A private array at `off` in the wave's state, `[elem][component][lane]`.
    Arr { off: u32, elem: ElemType, len: u32 },
    /// A fragment of `n` slots at `off` in the wave's state.
    Mat { off: u32, n: u32 },
}

struct Frame<'m> {
    func: Handle<Function>,
    f: &'m Function,
    an: Rc<Analysis>,
    types: &'m [Option<Type>],
    /// Helper parameters (kernel parameters are in `Lower::kparams`).
    params: Vec<Slot>,
    locals: Vec<Option<Slot>>,
    /// A helper's result variable and the block `return` jumps to.
    ret: Option<Slot>,
    exit: Option<Block>,
    loop_base: usize,
    is_kernel: bool,
}

struct LoopFrame {
    label: Option<String>,
    divergent: bool,
    latch: Block,
    exit: Block,
    alive: Vec<Variable>,
    exit_mask: Vec<Variable>,
}

enum KernelParam {
    /// A buffer: its `BufRef` is at `off` in the context's table. The pointer and length are
    /// loaded where they are used rather than kept in registers across the wave loop (a load
    /// folds into its user; a register held for the whole loop is spilled anyway).
    Buf {
        off: i32,
        elem: ElemType,
    },
    Val(Vec<Val>),
}

pub struct Lower<'a, 'm> {
    b: FunctionBuilder<'a>,
    jm: &'a mut JITModule,
    m: &'m Module,
    cfg: Config,
    an: Analyzer<'m>,
    types_of: &'m dyn Fn(Handle<Function>) -> &'m [Option<Type>],
    n: u32,
    // entry values
    ctx: Value,
    kparams: Vec<KernelParam>,
    /// The context's table of `BufRef`s.
    bufs: Value,
    group: [Value; 3],
    ngroups: [Value; 3],
    /// The block per dimension and its volume (constants, or loaded for a generic 1-D block).
    bdim: [Value; 4],
    shared: Value,
    dyn_len: Value,
    scratch: Value,
    shared_offsets: Vec<u64>,
    shared_lens: Vec<Option<u32>>,
    // wave values
    state: Value,
    wave_lin: Value,
    local_ids: [Val; 3],
    exec: Vec<Variable>,
    /// Whether every lane of the wave is inside the block (`i8`, per wave).
    wave_full: Value,
    /// What is known, at this point of the lowering, about the exec mask.
    known: Known,
    /// Affine bases (stride 1 or more) whose wave's lanes are known not to wrap here (the
    /// unmasked side of a bounds-test `if`, see `if_affine`).
    nowrap: Vec<Value>,
    /// How many enclosing `if`s have their body lowered twice (see `if_stmt`).
    dup_depth: u32,
    /// In the full-wave loop (see `fast_loop`): where a wave whose bounds test fails restarts
    /// in the ordinary wave loop.
    restart: Option<Block>,
    /// The `if` about to be lowered may restart its wave (nothing before it has effects).
    restart_ok: bool,
    /// In the full-wave loop: the buffer parameters indexed, in the restarting `if`'s `then`
    /// side, by its tested affine operand, and the least of their lengths (`i64`, loaded once
    /// per workgroup before the loop). The fast test then also asks `last < least`, so those
    /// accesses need no length compare of their own (see `fast_lens`).
    fast_bufs: Vec<u32>,
    fast_least: Option<Value>,
    /// Their pointers, loaded with the lengths (kept in registers across the loop).
    fast_ptrs: Vec<(i32, Value)>,
    /// In a streaming flat loop (`Config::streaming`): the buffers among `fast_bufs` it
    /// reads (prefetched) and those it only writes (stored non-temporally).
    stream_reads: Vec<u32>,
    stream_writes: Vec<u32>,
    /// Whether `fast_loop` found a flat loop with streams (`Lowered::can_stream`).
    can_stream: bool,
    /// While lowering the fast side of that `if`: its tested stride-1 base, whose whole-wave
    /// accesses to `fast_bufs` are known in bounds.
    fast_base: Option<Value>,
    /// The driver's counters, in SSA variables: the wave, the barrier a region resumes at,
    /// and the barrier the waves of this region stopped at (or `NONE`/`FINISHED`).
    drv_wave: Variable,
    drv_resume: Variable,
    drv_next: Variable,
    /// `fast_loop`'s flat loop (`i64`): the global index of the wave's first lane.
    drv_flat: Variable,
    /// In the flat loop: the block's `x` size (`i64`); an error exit writes the group to
    /// `group.x` first.
    flat_bx: Option<Value>,
    /// Lowering the flat loop's body: the wave's first global `x` index (`u32`), which
    /// `global_id.x` is (lane `l` adds `l`).
    flat_base: Option<Value>,
    frames: Vec<Frame<'m>>,
    loops: Vec<LoopFrame>,
    /// Where control goes when the exec mask becomes empty: the end of the innermost
    /// masked `if` branch, loop body or function.
    regions: Vec<Block>,
    scope: Vec<(Variable, types::Type, u32)>,
    /// Bytes of the wave's state so far (64-bit, saturating: private arrays are sized by the
    /// input; `run` refuses a state past [`MAX_STATE_BYTES`] before any offset is used).
    state_size: u64,
    has_barrier: bool,
    /// [`has_barrier`]'s answers for this compile.
    barrier_memo: BarrierMemo,
    resumes: Vec<Block>,
    wave_next: Block,
    /// The `print`/`assert` statements lowered (their records' site numbers).
    pub debug_sites: Vec<crate::ir::debug::DebugSite>,
    pub sites: Vec<Site>,
    funcs: HashMap<&'static str, FuncRef>,
    kernel_name: String,
}

fn notrap() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

fn le() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

fn scalar_of(t: Type) -> Scalar {
    match t {
        Type::Scalar(s) | Type::Vector(s, _) => s,
        Type::Tag(_) => Scalar::U32,
        _ => Scalar::U32,
    }
}

fn comps_of(t: Type) -> usize {
    match t {
        Type::Vector(_, n) => n as usize,
        _ => 1,
    }
}

/// The most steps a `for` loop may take without a deadline check of its own.
const UNCHECKED_STEPS: u64 = 4096;

/// Whether `kind` is a `for` loop with literal bounds and step that ends within
/// [`UNCHECKED_STEPS`] steps: small non-negative bounds, a positive step, and a body that never
/// assigns the loop variable. Such a loop needs no cancellation check at its back-edge (any
/// loop inside it has its own, the loop around it checks after it).
fn short_counted(f: &Function, kind: &LoopKind, body: &[Stmt]) -> bool {
    let LoopKind::For {
        var,
        start,
        end,
        step,
    } = kind
    else {
        return false;
    };
    let lit = |e: ExprId| match f.exprs.try_get(e) {
        Some(Expr::Literal(Literal::Int { bits, .. })) if *bits < 1 << 31 => Some(*bits),
        _ => None,
    };
    let (Some(a), Some(b)) = (lit(*start), lit(*end)) else {
        return false;
    };
    let k = match step {
        None => 1,
        Some(s) => match lit(*s) {
            Some(k) if k > 0 => k,
            _ => return false,
        },
    };
    if b.saturating_sub(a).div_ceil(k) > UNCHECKED_STEPS {
        return false;
    }
    // The variable is never assigned in the body.
    let mut stack: Vec<&[Stmt]> = vec![body];
    while let Some(b) = stack.pop() {
        for s in b {
            if let StmtKind::Assign {
                place: Place::Local(l) | Place::Lane { local: l, .. },
                ..
            } = &s.kind
            {
                if l == var {
                    return false;
                }
            }
            stack.extend(s.kind.blocks().into_iter().map(|v| v.as_slice()));
        }
    }
    true
}

/// Which functions contain `barrier()` themselves or in a helper they reach, by handle
/// index, filled in as asked: each function's body is walked once per compile, however often
/// it is called (a doubling chain of helpers made an unremembered walk exponential).
pub type BarrierMemo = HashMap<usize, bool>;

/// Whether a function (or a helper it reaches) contains `barrier()`.
pub fn has_barrier(m: &Module, f: &Function, memo: &mut BarrierMemo) -> bool {
    stmts_barrier(m, f, &f.body, memo)
}

/// Whether helper `h` (or one it reaches) contains `barrier()`.
fn fn_barrier(m: &Module, h: Handle<Function>, memo: &mut BarrierMemo) -> bool {
    if let Some(&b) = memo.get(&h.index()) {
        return b;
    }
    // The verifier refuses recursion; a cycle would read `false` here, not loop.
    memo.insert(h.index(), false);
    let b = m
        .functions
        .try_get(h)
        .is_some_and(|g| has_barrier(m, g, memo));
    memo.insert(h.index(), b);
    b
}

/// Whether statements of `f` (or helpers they reach) contain `barrier()`.
fn stmts_barrier(m: &Module, f: &Function, b: &[Stmt], memo: &mut BarrierMemo) -> bool {
    for s in b {
        if matches!(s.kind, StmtKind::Barrier) {
            return true;
        }
        for bl in s.kind.blocks() {
            if stmts_barrier(m, f, bl, memo) {
                return true;
            }
        }
        for h in stmt_calls(m, f, s) {
            if fn_barrier(m, h, memo) {
                return true;
            }
        }
    }
    false
}

fn stmt_calls(m: &Module, f: &Function, s: &Stmt) -> Vec<Handle<Function>> {
    let mut roots = Vec::new();
    match &s.kind {
        StmtKind::Let { init: Some(e), .. } | StmtKind::Expr(e) | StmtKind::Return(Some(e)) => {
            roots.push(*e)
        }
        StmtKind::Assign { place, value } => {
            roots.push(*value);
            if let Place::Element { index, .. } = place {
                roots.push(*index);
            }
        }
        StmtKind::If { cond, .. } => roots.push(*cond),
        StmtKind::Loop { kind, .. } => match kind {
            LoopKind::While(c) => roots.push(*c),
            LoopKind::For {
                start, end, step, ..
            } => {
                roots.push(*start);
                roots.push(*end);
                roots.extend(step);
            }
            LoopKind::Cond {
                init, cond, update, ..
            } => {
                roots.push(*init);
                roots.push(*cond);
                roots.push(*update);
            }
            LoopKind::Infinite => {}
        },
        StmtKind::VStore { index, value, .. } => {
            roots.push(*index);
            roots.push(*value)
        }
        StmtKind::MatrixStore {
            value,
            offset,
            stride,
            ..
        } => roots.extend([*value, *offset, *stride]),
        StmtKind::Print { args, .. } => roots.extend(args),
        StmtKind::Assert { cond, .. } => roots.push(*cond),
        _ => {}
    }
    let mut out = Vec::new();
    let mut stack = roots;
    let mut guard = 0;
    while let Some(e) = stack.pop() {
        guard += 1;
        if guard > 100_000 {
            break;
        }
        let Some(x) = f.exprs.try_get(e) else {
            continue;
        };
        match x {
            Expr::Call { function, .. } => out.push(*function),
            // A dispatch may call any member of any tag set (the set is the tag's type,
            // which this walk does not have): count them all.
            Expr::Dispatch { .. } => {
                for (_, ts) in m.tag_sets.iter() {
                    out.extend(ts.members.iter().copied());
                }
            }
            _ => {}
        }
        x.for_each_operand(|o| stack.push(o));
    }
    out
}

impl<'a, 'm> Lower<'a, 'm> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut b: FunctionBuilder<'a>,
        jm: &'a mut JITModule,
        m: &'m Module,
        kernel: Handle<Function>,
        cfg: Config,
        types_of: &'m dyn Fn(Handle<Function>) -> &'m [Option<Type>],
    ) -> Self {
        let f = &m.functions[kernel];
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ctx = b.block_params(entry)[0];
        let drv_wave = b.declare_var(types::I32);
        let drv_resume = b.declare_var(types::I32);
        let drv_next = b.declare_var(types::I32);
        let drv_flat = b.declare_var(types::I64);
        let zero = b.ins().iconst(types::I32, 0);
        let geometry = GeometryClass::new(cfg.block, cfg.wave);
        let mut barrier_memo = BarrierMemo::new();
        let mut s = Lower {
            b,
            jm,
            m,
            cfg,
            an: Analyzer::new(m, geometry, types_of),
            types_of,
            n: cfg.wave,
            ctx,
            kparams: Vec::new(),
            bufs: zero,
            group: [zero; 3],
            ngroups: [zero; 3],
            bdim: [zero; 4],
            shared: zero,
            dyn_len: zero,
            scratch: zero,
            shared_offsets: Vec::new(),
            shared_lens: Vec::new(),
            state: zero,
            wave_lin: zero,
            local_ids: [Val::U(zero), Val::U(zero), Val::U(zero)],
            exec: Vec::new(),
            wave_full: zero,
            known: Known::Unknown,
            nowrap: Vec::new(),
            dup_depth: 0,
            restart: None,
            restart_ok: false,
            fast_bufs: Vec::new(),
            fast_least: None,
            fast_ptrs: Vec::new(),
            stream_reads: Vec::new(),
            stream_writes: Vec::new(),
            can_stream: false,
            fast_base: None,
            drv_wave,
            drv_resume,
            drv_next,
            drv_flat,
            flat_bx: None,
            flat_base: None,
            frames: Vec::new(),
            loops: Vec::new(),
            regions: Vec::new(),
            scope: Vec::new(),
            state_size: 0,
            has_barrier: has_barrier(m, f, &mut barrier_memo),
            barrier_memo,
            resumes: Vec::new(),
            wave_next: entry,
            sites: Vec::new(),
            debug_sites: Vec::new(),
            funcs: HashMap::new(),
            kernel_name: f.name.clone(),
        };
        s.prologue(f);
        s
    }

    /// A buffer parameter's pointer and length (elements, `i64`).
    fn buf_ref(&mut self, off: i32) -> (Value, Value) {
        // On the fast side of the full-wave loop the table's words are pure values (it does
        // not change during a launch): an unused length (see `unmasked_addr`) is dropped,
        // and the optimiser may keep a pointer in a register across waves.
        let flags = if self.fast_base.is_some() {
            notrap().with_readonly().with_can_move()
        } else {
            notrap()
        };
        let pre = self.fast_base.and_then(|_| {
            self.fast_ptrs
                .iter()
                .find(|&&(o, _)| o == off)
                .map(|&(_, p)| p)
        });
        let ptr = match pre {
            Some(p) => p,
            None => self.b.ins().load(types::I64, flags, self.bufs, off),
        };
        let len = self.b.ins().load(types::I64, flags, self.bufs, off + 8);
        (ptr, len)
    }

    /// The least length of the buffers in `fast_bufs` (`i64`), or `None` when there are none.
    fn fast_lens(&mut self) -> Option<Value> {
        let mut least: Option<Value> = None;
        for p in self.fast_bufs.clone() {
            let KernelParam::Buf { off, .. } = self.kparams[p as usize] else {
                continue;
            };
            let ptr = self.b.ins().load(types::I64, notrap(), self.bufs, off);
            self.fast_ptrs.push((off, ptr));
            let len = self.b.ins().load(types::I64, notrap(), self.bufs, off + 8);
            least = Some(match least {
                Some(l) => self.b.ins().smin(l, len),
                None => len,
            });
        }
        least
    }

    fn ptr_load(&mut self, off: i32) -> Value {
        self.b.ins().load(types::I64, notrap(), self.ctx, off)
    }

    /// Loads everything uniform over the launch.
    fn prologue(&mut self, f: &'m Function) {
        let bufs = self.ptr_load(ctx_off::BUFS);
        self.bufs = bufs;
        let args = self.ptr_load(ctx_off::ARGS);
        for (i, p) in f.params.iter().enumerate() {
            let kp = match p.ty {
                Type::Buffer { elem, .. } => KernelParam::Buf {
                    off: (i * 16) as i32,
                    elem,
                },
                t => {
                    let s = scalar_of(t);
                    let n = comps_of(t);
                    let mut vals = Vec::new();
                    for c in 0..n {
                        let off = ((i * 16 + c) * 8) as i32;
                        // At its own type (the lane's low bytes): a float argument then
                        // lives in a vector register, where its splat is.
                        let low = if cfg!(target_endian = "big") {
                            8 - uty(s).bytes() as i32
                        } else {
                            0
                        };
                        vals.push(Val::U(self.load_scalar(s, args, off + low)));
                    }
                    KernelParam::Val(vals)
                }
            };
            self.kparams.push(kp);
        }
        for d in 0..3 {
            self.group[d] = self.b.ins().load(
                types::I32,
                notrap(),
                self.ctx,
                ctx_off::GROUP + 4 * d as i32,
            );
            self.ngroups[d] =
                self.b
                    .ins()
                    .load(types::I32, notrap(), self.ctx, ctx_off::GRID + 4 * d as i32);
        }
        for d in 0..4 {
            self.bdim[d] = if self.cfg.block[0] == 0 {
                self.b.ins().load(
                    types::I32,
                    notrap(),
                    self.ctx,
                    ctx_off::BLOCK + 4 * d as i32,
                )
            } else {
                let v = if d == 3 {
                    self.cfg.block.iter().product::<u32>()
                } else {
                    self.cfg.block[d]
                };
                self.b.ins().iconst(types::I32, v as i64)
            };
        }
        self.shared = self.ptr_load(ctx_off::SHARED);
        self.dyn_len = self.ptr_load(ctx_off::DYN_SHARED_LEN);
        self.scratch = self.ptr_load(ctx_off::SCRATCH);
        // Shared arrays: static ones in declaration order, 16-byte aligned; the dynamic one
        // last.
        // 64-bit sums: `[u32; 1 << 30]` alone is 4 GiB, which a 32-bit sum wrapped to 0.
        let mut off = 0u64;
        for (_, sd) in f.shared.iter() {
            let len = match sd.len {
                Some(Len::Fixed(n)) => Some(n),
                Some(Len::Const(_)) => Some(0),
                None => None,
            };
            self.shared_lens.push(len);
            match len {
                Some(n) => {
                    self.shared_offsets.push(off);
                    off = (off + n as u64 * sd.elem.size() as u64).div_ceil(16) * 16;
                }
                None => self.shared_offsets.push(u64::MAX),
            }
        }
        for o in self.shared_offsets.iter_mut() {
            if *o == u64::MAX {
                *o = off;
            }
        }
        self.shared_offsets.push(off);
    }

    fn func_ref(
        &mut self,
        name: &'static str,
        params: &[types::Type],
        ret: &[types::Type],
    ) -> FuncRef {
        if let Some(f) = self.funcs.get(name) {
            return *f;
        }
        let mut sig = Signature::new(self.jm.isa().default_call_conv());
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns.extend(ret.iter().map(|&t| AbiParam::new(t)));
        let id = self
            .jm
            .declare_function(name, Linkage::Import, &sig)
            .expect("helper signature");
        let fr = self.jm.declare_func_in_func(id, self.b.func);
        self.funcs.insert(name, fr);
        fr
    }

    fn call(
        &mut self,
        name: &'static str,
        params: &[types::Type],
        ret: &[types::Type],
        args: &[Value],
    ) -> Option<Value> {
        let fr = self.func_ref(name, params, ret);
        let inst = self.b.ins().call(fr, args);
        self.b.inst_results(inst).first().copied()
    }
}

/// Whether a block contains `break`, `continue` or `return` (not counting helpers).
/// Statements in a block, nested ones included.
/// Whether a kernel runs its full waves in a loop of their own (`Lower::fast_loop`): it has a
/// top-level `if` with a comparison as its condition, before which only `let`s without effects
/// run (so a wave may be started again), and neither its `then` side nor the statements after
/// it have control flow (which would bring masked code back into the fast loop: the wave
/// reduction, with a masked `if` after the bounds test, was 8 % slower in a loop of its own).
/// The caller excludes kernels with barriers.
fn restartable(f: &Function) -> bool {
    let straight = |b: &[Stmt]| {
        b.iter().all(|s| {
            !matches!(
                s.kind,
                StmtKind::If { .. }
                    | StmtKind::Block(_)
                    | StmtKind::Loop { .. }
                    | StmtKind::Break(_)
                    | StmtKind::Continue(_)
                    | StmtKind::Return(_)
                    // Their records name the workgroup, which a group loop does not keep.
                    | StmtKind::Print { .. }
                    | StmtKind::Assert { .. }
            )
        })
    };
    for (i, st) in f.body.iter().enumerate() {
        match &st.kind {
            StmtKind::If {
                cond, then_block, ..
            } => {
                return pure_expr(f, *cond)
                    && straight(then_block)
                    && straight(&f.body[i + 1..])
                    && matches!(
                        f.exprs.try_get(*cond),
                        Some(Expr::Binary {
                            op: BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge,
                            ..
                        })
                    )
            }
            _ if pure_let(f, st) => {}
            _ => return false,
        }
    }
    false
}

/// The buffer parameters that the `then` side of a restartable kernel's bounds-test `if`
/// (see `restartable`) indexes, in a statement of its own, by the test's affine operand, when
/// that operand is a local or a builtin of stride 1 (`let i = global_id.x; if i < n {
/// a[i] = b[i] + s * c[i]; }`): `a`, `b` and `c`. Their lengths join the fast test
/// (`Lower::if_affine`); a buffer wrongly listed costs speed only (its waves restart), never
/// correctness.
fn fast_bufs(f: &Function, an: &Analysis) -> Vec<u32> {
    let Some(StmtKind::If {
        cond, then_block, ..
    }) = f
        .body
        .iter()
        .map(|s| &s.kind)
        .find(|k| !matches!(k, StmtKind::Let { .. }))
    else {
        return Vec::new();
    };
    let Some(&Expr::Binary { lhs, rhs, .. }) = f.exprs.try_get(*cond) else {
        return Vec::new();
    };
    let leaf = |e: ExprId| match f.exprs.try_get(e) {
        Some(Expr::Local(l)) => Some((Some(*l), None)),
        Some(Expr::Builtin(b)) => Some((None, Some(*b))),
        _ => None,
    };
    let Some(tested) = [lhs, rhs]
        .into_iter()
        .find(|&e| an.expr(e) == Class::Affine(1))
        .and_then(leaf)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut note = |base: &Base, index: ExprId| {
        if let Base::Param(p) = base {
            if leaf(index).as_ref() == Some(&tested) && !out.contains(p) {
                out.push(*p);
            }
        }
    };
    for st in then_block.iter() {
        if let StmtKind::Assign {
            place: Place::Element { base, index },
            ..
        } = &st.kind
        {
            note(base, *index);
        }
        for root in st.kind.value_roots() {
            let mut stack = vec![root];
            while let Some(e) = stack.pop() {
                let Some(x) = f.exprs.try_get(e) else {
                    continue;
                };
                if let Expr::Index { base, index } = x {
                    note(base, *index);
                }
                x.for_each_operand(|o| stack.push(o));
            }
        }
    }
    out
}

/// Whether a restartable kernel may run its full waves in `fast_loop`'s flat loop over a run
/// of workgroups: nothing in it tells one workgroup from another but `global_id` (no shared
/// memory, no `local_id` or `group_id`, no wave verb, no helper call, whose body could).
fn flat_loop_ok(f: &Function) -> bool {
    f.shared.is_empty()
        && f.exprs.iter().all(|(_, e)| {
            !matches!(
                e,
                Expr::Builtin(Builtin::LocalId(_) | Builtin::GroupId(_))
                    | Expr::Call { .. }
                    | Expr::Dispatch { .. }
                    | Expr::Wave { .. }
            )
        })
}

/// Whether a flat-loop kernel may stream (`Config::streaming`): it has no atomic or fence,
/// through which one work-item could order its stores before another's reads during the
/// launch (non-temporal stores are ordered only by the fence that ends each worker), and no
/// fragment, whose helpers read memory out of sight.
fn streamable(f: &Function) -> bool {
    fn fence(b: &[Stmt]) -> bool {
        b.iter().any(|s| {
            matches!(s.kind, StmtKind::Fence(_) | StmtKind::MatrixStore { .. })
                || s.kind.blocks().iter().any(|bl| fence(bl))
        })
    }
    !fence(&f.body)
        && !f.exprs.iter().any(|(_, e)| {
            matches!(
                e,
                Expr::Atomic { .. }
                    | Expr::AtomicLoad { .. }
                    | Expr::AtomicStore { .. }
                    | Expr::MatrixLoad { .. }
            )
        })
}

/// Whether `f` reads buffer parameter `p` anywhere.
fn reads_buffer(f: &Function, p: u32) -> bool {
    f.exprs.iter().any(|(_, e)| match e {
        Expr::Index { base, .. } | Expr::VLoad { base, .. } | Expr::MatrixLoad { base, .. } => {
            *base == Base::Param(p)
        }
        Expr::AtomicLoad {
            place: Place::Element { base, .. },
            ..
        }
        | Expr::AtomicStore {
            place: Place::Element { base, .. },
            ..
        } => *base == Base::Param(p),
        _ => false,
    })
}

/// A `let` whose initialiser has no effect (no call, dispatch or atomic); evaluating it twice
/// is unobservable (a fault would happen the first time).
fn pure_let(f: &Function, st: &Stmt) -> bool {
    match &st.kind {
        StmtKind::Let { init, .. } => init.is_none_or(|e| pure_expr(f, e)),
        _ => false,
    }
}

/// An expression without calls, dispatches or atomics.
fn pure_expr(f: &Function, e: ExprId) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        let Some(x) = f.exprs.try_get(e) else {
            return false;
        };
        if matches!(
            x,
            Expr::Call { .. }
                | Expr::Dispatch { .. }
                | Expr::Atomic { .. }
                | Expr::AtomicLoad { .. }
                | Expr::AtomicStore { .. }
        ) {
            return false;
        }
        x.for_each_operand(|o| stack.push(o));
    }
    true
}

fn stmt_count(b: &[Stmt]) -> usize {
    b.iter()
        .map(|s| {
            1 + s
                .kind
                .blocks()
                .iter()
                .map(|bl| stmt_count(bl))
                .sum::<usize>()
        })
        .sum()
}

fn exits(b: &[Stmt]) -> bool {
    b.iter().any(|s| match &s.kind {
        StmtKind::Break(_) | StmtKind::Continue(_) | StmtKind::Return(_) => true,
        StmtKind::If {
            then_block,
            else_block,
            ..
        } => exits(then_block) || exits(else_block),
        StmtKind::Loop { body, .. } => exits(body),
        StmtKind::Block(b) => exits(b),
        _ => false,
    })
}

fn returns(b: &[Stmt]) -> bool {
    b.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => true,
        k => k.blocks().iter().any(|bl| returns(bl)),
    })
}

fn class_of(v: &Val) -> Class {
    match v {
        Val::U(_) => Class::Uniform,
        Val::A(_, k) => Class::Affine(*k),
        Val::V(_) => Class::Varying,
    }
}
