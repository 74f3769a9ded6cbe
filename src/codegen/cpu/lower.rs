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

use super::analysis::{self, Analysis, Analyzer, Class, GeometryClass};
use super::lanes::{chunks, per_chunk, uty, vty, Val};
use super::{ctx_off, err, stream, JitError, Site};
use crate::ir::{
    AtomicOp, Base, BinaryOp, Builtin, ElemType, Expr, ExprId, Function, Handle, Len, Literal,
    Local, LoopKind, MathFn, Module, Place, ReduceOp, Scalar, Span, Stmt, StmtKind, Type, UnaryOp,
    WaveOp,
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
}

/// What the lowering learned about the kernel, for the runtime.
pub struct Lowered {
    pub sites: Vec<Site>,
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
enum Ev {
    /// Scalar or vector components (a tag is one `u32` component).
    Vals(Vec<Val>),
    /// A cooperative-matrix fragment: the address of its slots (per wave, in the state).
    Mat(Value),
    Void,
}

impl Ev {
    fn vals(self) -> Vec<Val> {
        match self {
            Ev::Vals(v) => v,
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

enum KParam {
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
    kparams: Vec<KParam>,
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
            let KParam::Buf { off, .. } = self.kparams[p as usize] else {
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
                Type::Buffer { elem, .. } => KParam::Buf {
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
                    KParam::Val(vals)
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

    // -----------------------------------------------------------------------------------
    // The driver

    /// Lowers the kernel body inside the region/wave driver and finishes the function.
    pub fn run(mut self, kernel: Handle<Function>) -> Result<Lowered, JitError> {
        let f = &self.m.functions[kernel];
        // A kernel without barriers whose bounds-test `if` may restart a wave runs its full
        // waves in a loop of their own first; the ordinary loop below takes over at the first
        // wave whose test fails. It loads the launch's values again, so that nothing but the
        // context and the wave counter is live from the fast loop into it (values live into
        // the masked code were what the register allocator spilled in the fast loop).
        let restarts = !self.has_barrier && restartable(f);
        // The blocks of the ordinary loop when it only takes over: laid out after the fast
        // loop (cold).
        let mut slow_blocks = None;
        if restarts {
            let (volume_v, waves_v, state_base) = self.launch_values();
            let flat_lin = self.fast_loop(kernel, waves_v, state_base, volume_v)?;
            slow_blocks = Some(self.b.func.dfg.num_blocks());
            let restart = self.b.current_block().expect("the restart block");
            self.b.set_cold_block(restart);
            // The wave, from its first linear id, which the failing test's branch passes:
            // any use of the loop's counter out here made the register allocator keep the
            // counter on the stack in the fast loop (about 6 % of the triad's throughput).
            // Through memory, read back by an atomic load (which the optimiser does not
            // forward a store to), or it folds `lin / n` back into the counter.
            let lin = flat_lin.unwrap_or_else(|| self.b.block_params(restart)[0]);
            let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                4,
                2,
            ));
            let addr = self.b.ins().stack_addr(types::I64, slot, 0);
            self.b.ins().store(notrap(), lin, addr, 0);
            let lin = self.b.ins().atomic_load(types::I32, notrap(), addr);
            let w = self.b.ins().udiv_imm_u(lin, self.n as i64);
            self.b.def_var(self.drv_wave, w);
            self.kparams.clear();
            self.shared_offsets.clear();
            self.shared_lens.clear();
            self.prologue(f);
        }
        let (volume_v, waves_v, state_base) = self.launch_values();
        let state_stride = if self.has_barrier {
            Some(
                self.b
                    .ins()
                    .load(types::I64, notrap(), self.ctx, ctx_off::STATE_STRIDE),
            )
        } else {
            None
        };
        let region_head = self.b.create_block();
        let wave_head = self.b.create_block();
        let wave_body = self.b.create_block();
        let start = self.b.create_block();
        let wave_next = self.b.create_block();
        let region_end = self.b.create_block();
        self.wave_next = wave_next;
        let zero = self.b.ins().iconst(types::I32, 0);
        self.b.def_var(self.drv_resume, zero);
        if !restarts {
            self.b.def_var(self.drv_wave, zero);
        }
        self.b.ins().jump(region_head, &[]);

        self.b.switch_to_block(region_head);
        let none = self.b.ins().iconst(types::I32, NONE);
        if self.has_barrier {
            let zero = self.b.ins().iconst(types::I32, 0);
            self.b.def_var(self.drv_wave, zero);
        }
        self.b.def_var(self.drv_next, none);
        self.b.ins().jump(wave_head, &[]);

        self.b.switch_to_block(wave_head);
        let w = self.b.use_var(self.drv_wave);
        let done = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, w, waves_v);
        self.b.ins().brif(done, region_end, &[], wave_body, &[]);

        self.b.switch_to_block(wave_body);
        let w = self.b.use_var(self.drv_wave);
        self.state = match state_stride {
            Some(stride) => {
                let w64 = self.b.ins().uextend(types::I64, w);
                let off = self.b.ins().imul(w64, stride);
                self.b.ins().iadd(state_base, off)
            }
            None => state_base,
        };
        let whole_waves = self.wave_setup(w, volume_v);
        let resume = self.b.use_var(self.drv_resume);

        // The exec mask: declared first, so it is in scope (spilled) at every barrier.
        let nmask = chunks(Scalar::Bool, self.n);
        self.exec = (0..nmask).map(|_| self.new_var(types::I32X4)).collect();
        let dispatch_block = self.b.create_block();
        self.b.ins().jump(dispatch_block, &[]);

        self.b.switch_to_block(start);
        if self.has_barrier {
            // Spilled at every barrier: a full wave's is a constant.
            let full_b = self.b.create_block();
            let part_b = self.b.create_block();
            let body_b = self.b.create_block();
            self.b.ins().brif(self.wave_full, full_b, &[], part_b, &[]);
            self.b.switch_to_block(full_b);
            let ones = self.full_chunk();
            self.set_exec(&vec![ones; nmask as usize]);
            self.b.ins().jump(body_b, &[]);
            self.b.switch_to_block(part_b);
            let init_mask = self.initial_mask(volume_v);
            self.set_exec(&init_mask);
            self.b.ins().jump(body_b, &[]);
            self.b.switch_to_block(body_b);
        } else {
            // Usually dead: while the mask is known (`Known`), `exec` computes it.
            let init_mask = self.initial_mask(volume_v);
            self.set_exec(&init_mask);
        }
        self.known = if whole_waves {
            Known::Full
        } else {
            Known::Initial
        };
        let types = (self.types_of)(kernel);
        let an = self
            .an
            .analyse(kernel, vec![Class::Uniform; f.params.len()]);
        self.frames.push(Frame {
            func: kernel,
            f,
            an,
            types,
            params: Vec::new(),
            locals: vec![None; f.locals.len()],
            ret: None,
            exit: None,
            loop_base: 0,
            is_kernel: true,
        });
        let kernel_end = self.b.create_block();
        self.frames[0].exit = Some(kernel_end);
        self.regions.push(kernel_end);
        if self.block(&f.body)? {
            self.b.ins().jump(kernel_end, &[]);
        }
        self.b.switch_to_block(kernel_end);
        if self.has_barrier {
            self.record(FINISHED);
        }
        self.b.ins().jump(wave_next, &[]);

        // Dispatch: the first region starts every wave; later ones resume at the barrier.
        self.b.switch_to_block(dispatch_block);
        if self.resumes.is_empty() {
            self.b.ins().jump(start, &[]);
        } else {
            let mut sw = Switch::new();
            sw.set_entry(0, start);
            for (i, &r) in self.resumes.iter().enumerate() {
                sw.set_entry(i as u128 + 1, r);
            }
            sw.emit(&mut self.b, resume, start);
        }

        self.b.switch_to_block(wave_next);
        let w = self.b.use_var(self.drv_wave);
        let w1 = self.b.ins().iadd_imm_s(w, 1);
        self.b.def_var(self.drv_wave, w1);
        self.b.ins().jump(wave_head, &[]);

        self.b.switch_to_block(region_end);
        if self.has_barrier {
            // Every wave finished, or all stopped at one barrier: the next region resumes
            // there.
            let next = self.b.use_var(self.drv_next);
            let fin = self.b.ins().icmp_imm_s(IntCC::Equal, next, FINISHED);
            let ret = self.b.create_block();
            let again = self.b.create_block();
            self.b.ins().brif(fin, ret, &[], again, &[]);
            self.b.switch_to_block(ret);
            let z = self.b.ins().iconst(types::I32, 0);
            self.b.ins().return_(&[z]);
            self.b.switch_to_block(again);
            self.b.def_var(self.drv_resume, next);
            self.b.ins().jump(region_head, &[]);
        } else {
            // Without barriers there is one region, which every wave finishes.
            let z = self.b.ins().iconst(types::I32, 0);
            self.b.ins().return_(&[z]);
        }

        if let Some(first) = slow_blocks {
            for i in first..self.b.func.dfg.num_blocks() {
                self.b.set_cold_block(Block::from_u32(i as u32));
            }
        }
        self.b.seal_all_blocks();
        let barriers = self.resumes.len() as u32;
        let state_bytes = self.state_size.div_ceil(16) * 16;
        if state_bytes > MAX_STATE_BYTES {
            return Err(JitError::PrivateMemory {
                kernel: self.frames[0].f.name.clone(),
                bytes: state_bytes,
                limit: MAX_STATE_BYTES,
            });
        }
        let state_bytes = state_bytes as u32;
        let static_shared = *self.shared_offsets.last().unwrap_or(&0);
        let sites = std::mem::take(&mut self.sites);
        let tc = self.jm.target_config();
        self.b.finalize(tc);
        Ok(Lowered {
            sites,
            state_bytes,
            static_shared,
            barriers,
            can_stream: self.can_stream,
        })
    }

    /// The block's volume, its number of waves and the waves' state area (one area for all
    /// waves without barriers, else one per wave, `STATE_STRIDE` apart).
    fn launch_values(&mut self) -> (Value, Value, Value) {
        let volume_v = self.bdim[3];
        let waves_v = {
            let v = self.b.ins().iadd_imm_s(volume_v, self.n as i64 - 1);
            self.b.ins().udiv_imm_u(v, self.n as i64)
        };
        let state_base = self
            .b
            .ins()
            .load(types::I64, notrap(), self.ctx, ctx_off::STATE);
        (volume_v, waves_v, state_base)
    }

    /// The values of wave `w`: its first linear id, local ids and whether it is full; returns
    /// whether every wave of the block is full (known at compile time).
    fn wave_setup(&mut self, w: Value, volume_v: Value) -> bool {
        self.wave_lin = self.b.ins().imul_imm_s(w, self.n as i64);
        self.local_ids_for_wave();
        // A full wave (every lane inside the block) starts with the all-ones mask; only a
        // partial last wave computes its mask.
        let rem = self.b.ins().isub(volume_v, self.wave_lin);
        // A fixed block of whole waves has only full waves.
        let whole_waves = self.cfg.whole_waves
            || (self.cfg.block[0] != 0 && self.cfg.block.iter().product::<u32>() % self.n == 0);
        self.wave_full = if whole_waves {
            self.b.ins().iconst(types::I8, 1)
        } else {
            self.b
                .ins()
                .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, rem, self.n as i64)
        };
        whole_waves
    }

    /// The full-wave loop of a kernel without barriers (see `restartable`): waves `0..` run
    /// the body with its first bounds-test `if` on the fast side only; a wave whose test fails
    /// jumps, with `drv_wave` still naming it, to the block this leaves current, where the
    /// ordinary wave loop (masked code) runs it and the rest of the workgroup. Nothing before
    /// that `if` has effects, so running the wave again from its start is unobservable. The
    /// masked code is then outside this loop, so the register allocator has nothing in it to
    /// spill the loop's long-lived values (buffer table, parameters, wave counter) for.
    fn fast_loop(
        &mut self,
        kernel: Handle<Function>,
        waves_v: Value,
        state_base: Value,
        volume_v: Value,
    ) -> Result<Option<Value>, JitError> {
        let f = &self.m.functions[kernel];
        let head = self.b.create_block();
        let body = self.b.create_block();
        let next = self.b.create_block();
        let done = self.b.create_block();
        let restart = self.b.create_block();
        self.b.append_block_param(restart, types::I32);
        let an = self
            .an
            .analyse(kernel, vec![Class::Uniform; f.params.len()]);
        self.fast_bufs = fast_bufs(f, &an);
        self.fast_least = self.fast_lens();
        // The flat loop (see `flat_loop_ok`): the workgroups `group.x .. group.w` of a 1-D
        // grid (a run of consecutive groups, see `CompiledKernel::launch`; at least the one
        // named) as one loop over the global index of each wave's first lane. A loop per
        // workgroup costs a mispredicted exit branch per workgroup (4 % of a streaming
        // kernel's throughput at 16 waves per group), and a (group, wave) pair of counters
        // costs registers the loop needs to stay free of spills.
        let flat = flat_loop_ok(f)
            && self.cfg.block[1] == 1
            && self.cfg.block[2] == 1
            && (self.cfg.whole_waves
                || (self.cfg.block[0] != 0 && self.cfg.block[0] % self.n == 0));
        // Streams: the flat loop's buffers at the wave's own index, split into those the
        // kernel reads anywhere (prefetched) and those it only writes (non-temporal).
        self.can_stream = stream::AVAILABLE && flat && streamable(f) && !self.fast_bufs.is_empty();
        if self.can_stream && self.cfg.streaming {
            (self.stream_reads, self.stream_writes) =
                self.fast_bufs.iter().partition(|&&p| reads_buffer(f, p));
        }
        let flat_end = if flat {
            let bx = self.b.ins().uextend(types::I64, self.bdim[0]);
            let end = self
                .b
                .ins()
                .load(types::I32, notrap(), self.ctx, ctx_off::GROUP + 12);
            let first = self.group[0];
            let one_more = self.b.ins().iadd_imm_s(first, 1);
            let end = self.b.ins().umax(end, one_more);
            let first = self.b.ins().uextend(types::I64, first);
            let start = self.b.ins().imul(first, bx);
            let end64 = self.b.ins().uextend(types::I64, end);
            let stop = self.b.ins().imul(end64, bx);
            self.b.def_var(self.drv_flat, start);
            self.flat_bx = Some(bx);
            Some((end, stop))
        } else {
            None
        };
        let zero = self.b.ins().iconst(types::I32, 0);
        self.b.def_var(self.drv_wave, zero);
        self.b.ins().jump(head, &[]);

        self.b.switch_to_block(head);
        let end = match flat_end {
            Some((_, stop)) => {
                let i = self.b.use_var(self.drv_flat);
                self.b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, i, stop)
            }
            None => {
                let w = self.b.use_var(self.drv_wave);
                self.b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, w, waves_v)
            }
        };
        self.b.ins().brif(end, done, &[], body, &[]);

        self.b.switch_to_block(body);
        let w = self.b.use_var(self.drv_wave);
        self.state = state_base;
        let whole_waves = self.wave_setup(w, volume_v);
        if flat {
            // The wave counter stays 0 here: `wave_setup` only says the wave is whole, and
            // `global_id.x` comes from the flat index (the kernel reads no local id).
            let i = self.b.use_var(self.drv_flat);
            self.flat_base = Some(self.b.ins().ireduce(types::I32, i));
        }
        let nmask = chunks(Scalar::Bool, self.n);
        self.exec = (0..nmask).map(|_| self.new_var(types::I32X4)).collect();
        let init_mask = self.initial_mask(volume_v);
        self.set_exec(&init_mask);
        self.known = if whole_waves {
            Known::Full
        } else {
            Known::Initial
        };
        let kernel_end = self.b.create_block();
        self.frames.push(Frame {
            func: kernel,
            f,
            an,
            types: (self.types_of)(kernel),
            params: Vec::new(),
            locals: vec![None; f.locals.len()],
            ret: None,
            exit: Some(kernel_end),
            loop_base: 0,
            is_kernel: true,
        });
        self.regions.push(kernel_end);
        self.wave_next = next;
        self.restart = Some(restart);
        let mark = self.scope.len();
        let mut open = true;
        for (i, st) in f.body.iter().enumerate() {
            self.restart_ok = match &st.kind {
                StmtKind::If { cond, .. } => {
                    pure_expr(f, *cond) && f.body[..i].iter().all(|p| pure_let(f, p))
                }
                _ => false,
            };
            if !self.stmt(st)? {
                open = false;
                break;
            }
        }
        self.restart_ok = false;
        self.restart = None;
        self.fast_bufs.clear();
        self.fast_least = None;
        self.fast_ptrs.clear();
        self.stream_reads.clear();
        self.stream_writes.clear();
        self.scope.truncate(mark);
        if open {
            self.b.ins().jump(kernel_end, &[]);
        }
        self.b.switch_to_block(kernel_end);
        self.b.ins().jump(next, &[]);
        self.flat_base = None;
        self.b.switch_to_block(next);
        if let Some((_, stop)) = flat_end {
            // Rotated: the test at the bottom, one branch per wave.
            let i = self.b.use_var(self.drv_flat);
            let i1 = self.b.ins().iadd_imm_s(i, self.n as i64);
            self.b.def_var(self.drv_flat, i1);
            let more = self.b.ins().icmp(IntCC::UnsignedLessThan, i1, stop);
            self.b.ins().brif(more, body, &[], done, &[]);
        } else {
            let w = self.b.use_var(self.drv_wave);
            let w1 = self.b.ins().iadd_imm_s(w, 1);
            self.b.def_var(self.drv_wave, w1);
            self.b.ins().jump(head, &[]);
        }
        self.b.switch_to_block(done);
        if let Some((end, _)) = flat_end {
            let last = self.b.ins().iadd_imm_s(end, -1);
            self.b.ins().store(notrap(), last, self.ctx, ctx_off::GROUP);
        }
        let z = self.b.ins().iconst(types::I32, 0);
        self.b.ins().return_(&[z]);
        self.frames.pop();
        self.regions.pop();
        self.b.switch_to_block(restart);
        if flat {
            // The ordinary loop runs the rest of this group from the failing wave: its group
            // goes to `group.x` (which that loop reads), its first local id is the restart's.
            let lin = self.flat_group_store();
            self.flat_bx = None;
            return Ok(Some(lin));
        }
        Ok(None)
    }

    /// In the flat loop, at an exit: writes the current wave's group to `group.x` and returns
    /// the wave's first linear local id (`u32`).
    fn flat_group_store(&mut self) -> Value {
        let bx = self.flat_bx.expect("in the flat loop");
        let i = self.b.use_var(self.drv_flat);
        let g = self.b.ins().udiv(i, bx);
        let g32 = self.b.ins().ireduce(types::I32, g);
        self.b.ins().store(notrap(), g32, self.ctx, ctx_off::GROUP);
        let start = self.b.ins().imul(g, bx);
        let lin = self.b.ins().isub(i, start);
        self.b.ins().ireduce(types::I32, lin)
    }

    /// Records that this wave stopped at `id` (a barrier, or `FINISHED`); every wave of a
    /// region must stop at the same one.
    fn record(&mut self, id: i64) {
        let next = self.b.use_var(self.drv_next);
        let is_none = self.b.ins().icmp_imm_s(IntCC::Equal, next, NONE);
        let same = self.b.ins().icmp_imm_s(IntCC::Equal, next, id);
        let ok = self.b.ins().bor(is_none, same);
        let bad = self.b.create_block();
        let good = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(ok, good, &[], bad, &[]);
        self.b.switch_to_block(bad);
        let site = self.add_site(Span::UNKNOWN, "barrier".into());
        let zero = self.b.ins().iconst(types::I64, 0);
        self.fail(err::BARRIER, site, zero, zero);
        self.b.switch_to_block(good);
        let idv = self.b.ins().iconst(types::I32, id);
        self.b.def_var(self.drv_next, idv);
    }

    fn local_ids_for_wave(&mut self) {
        let [bx, by, bz] = self.cfg.block;
        let g = GeometryClass::new(self.cfg.block, self.n);
        let lin = self.wave_lin;
        for d in 0..3 {
            self.local_ids[d] = match g.local[d] {
                Class::Affine(_) => {
                    // x: the wave starts at `lin % bx` and runs along the row.
                    let base = if by * bz == 1 {
                        lin
                    } else {
                        self.b.ins().urem_imm_u(lin, bx as i64)
                    };
                    Val::A(base, 1)
                }
                Class::Uniform => {
                    let v = match d {
                        1 if by > 1 => {
                            let q = self.b.ins().udiv_imm_u(lin, bx as i64);
                            self.b.ins().urem_imm_u(q, by as i64)
                        }
                        2 if bz > 1 => self.b.ins().udiv_imm_u(lin, (bx * by) as i64),
                        _ => self.b.ins().iconst(types::I32, 0),
                    };
                    Val::U(v)
                }
                Class::Varying => {
                    let mut lanes = Vec::new();
                    for l in 0..self.n {
                        let li = self.b.ins().iadd_imm_s(lin, l as i64);
                        let v = match d {
                            0 => self.b.ins().urem_imm_u(li, bx as i64),
                            1 => {
                                let q = self.b.ins().udiv_imm_u(li, bx as i64);
                                self.b.ins().urem_imm_u(q, by as i64)
                            }
                            _ => self.b.ins().udiv_imm_u(li, (bx * by) as i64),
                        };
                        lanes.push(v);
                    }
                    Val::V(self.pack_lanes(Scalar::U32, &lanes))
                }
            };
        }
    }

    /// Lanes whose linear id is inside the block.
    fn initial_mask(&mut self, volume: Value) -> Vec<Value> {
        let rem = self.b.ins().isub(volume, self.wave_lin);
        let rem = self.b.ins().splat(types::I32X4, rem);
        (0..chunks(Scalar::Bool, self.n))
            .map(|c| {
                let iota: Vec<u64> = (0..4)
                    .map(|j| {
                        let l = c * 4 + j;
                        if l < self.n {
                            l as u64
                        } else {
                            u32::MAX as u64
                        }
                    })
                    .collect();
                let iota = self.const_vec(types::I32X4, &iota);
                self.b.ins().icmp(IntCC::UnsignedLessThan, iota, rem)
            })
            .collect()
    }

    // -----------------------------------------------------------------------------------
    // Variables, spilling, errors

    fn new_var(&mut self, ty: types::Type) -> Variable {
        let v = self.b.declare_var(ty);
        let slot = if self.has_barrier {
            let size = ty.bytes() as u64;
            let off = self.state_size.div_ceil(size.min(16)) * size.min(16);
            self.state_size = off.saturating_add(size);
            // Past `MAX_STATE_BYTES` the kernel is refused (`run`), so the offset is unused.
            off as u32
        } else {
            0
        };
        self.scope.push((v, ty, slot));
        v
    }

    fn alloc_state(&mut self, bytes: u64) -> u32 {
        let off = self.state_size.div_ceil(16) * 16;
        // A 16-byte tail so that a chunk load at the last element stays inside.
        self.state_size = off
            .saturating_add(bytes.div_ceil(16) * 16)
            .saturating_add(16);
        // Past `MAX_STATE_BYTES` the kernel is refused (`run`), so the offset is unused.
        off as u32
    }

    fn add_site(&mut self, span: Span, what: String) -> u32 {
        self.sites.push(Site {
            line: span.line,
            col: span.col,
            what,
        });
        (self.sites.len() - 1) as u32
    }

    /// Records an error in the context and returns from the function.
    fn fail(&mut self, code: u32, site: u32, index: Value, len: Value) {
        if self.flat_bx.is_some() {
            self.flat_group_store();
        }
        let c = self.b.ins().iconst(types::I32, code as i64);
        let s = self.b.ins().iconst(types::I32, site as i64);
        self.b.ins().store(notrap(), c, self.ctx, ctx_off::ERR_CODE);
        self.b.ins().store(notrap(), s, self.ctx, ctx_off::ERR_SITE);
        self.b
            .ins()
            .store(notrap(), index, self.ctx, ctx_off::ERR_INDEX);
        self.b
            .ins()
            .store(notrap(), len, self.ctx, ctx_off::ERR_LEN);
        let one = self.b.ins().iconst(types::I32, 1);
        self.b.ins().return_(&[one]);
    }

    /// A loop back-edge's deadline check: one load of the launch's cancellation flag (through
    /// the context's pointer to it, itself a load the optimiser may share) and a branch to a
    /// cold exit with `err::CANCELLED` when it is set. An atomic load, so that it is never
    /// merged with an earlier one or hoisted out of the loop.
    fn cancel_check(&mut self, span: Span) {
        let p = self
            .b
            .ins()
            .load(types::I64, notrap(), self.ctx, ctx_off::CANCEL);
        let flag = self.b.ins().atomic_load(types::I32, notrap(), p);
        let site = self.add_site(span, "deadline".into());
        let zero = self.b.ins().iconst(types::I64, 0);
        self.check(flag, err::CANCELLED, site, |_| zero, zero);
    }

    /// Branches to a cold error exit when `cond` (i8) holds; `index` is computed there.
    fn check(
        &mut self,
        cond: Value,
        code: u32,
        site: u32,
        index: impl FnOnce(&mut Self) -> Value,
        len: Value,
    ) {
        let bad = self.b.create_block();
        let good = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(cond, bad, &[], good, &[]);
        // Both have their one predecessor: sealed now, a variable read after the check is
        // the value read before it (see `unmasked`).
        self.b.seal_block(bad);
        self.b.seal_block(good);
        self.b.switch_to_block(bad);
        let i = index(self);
        self.fail(code, site, i, len);
        self.b.switch_to_block(good);
    }

    // -----------------------------------------------------------------------------------
    // Lane primitives

    fn const_vec(&mut self, ty: types::Type, lanes: &[u64]) -> Value {
        let lb = ty.lane_bits() as usize / 8;
        let mut bytes = Vec::with_capacity(16);
        for &l in lanes.iter().take(ty.lane_count() as usize) {
            bytes.extend_from_slice(&l.to_le_bytes()[..lb]);
        }
        bytes.resize(16, 0);
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, c)
    }

    fn uconst(&mut self, s: Scalar, bits: u64) -> Value {
        match s {
            Scalar::F32 => self.b.ins().f32const(f32::from_bits(bits as u32)),
            Scalar::F64 => self.b.ins().f64const(f64::from_bits(bits)),
            _ => self.b.ins().iconst(uty(s), bits as i64),
        }
    }

    fn splat(&mut self, s: Scalar, v: Value) -> Vec<Value> {
        let v = if s == Scalar::Bool {
            let w = self.b.ins().uextend(types::I32, v);
            self.b.ins().ineg(w)
        } else {
            v
        };
        let one = self.b.ins().splat(vty(s), v);
        vec![one; chunks(s, self.n) as usize]
    }

    fn materialize(&mut self, s: Scalar, v: &Val) -> Vec<Value> {
        match v {
            Val::U(x) => self.splat(s, *x),
            Val::V(c) => c.clone(),
            Val::A(base, stride) => {
                let vt = vty(s);
                let pc = per_chunk(s);
                let b = self.b.ins().splat(vt, *base);
                (0..chunks(s, self.n))
                    .map(|c| {
                        let offs: Vec<u64> = (0..pc)
                            .map(|j| ((c * pc + j) as i64).wrapping_mul(*stride) as u64)
                            .collect();
                        let o = self.const_vec(vt, &offs);
                        self.b.ins().iadd(b, o)
                    })
                    .collect()
            }
        }
    }

    /// Lane `l` of `v` as a uniform scalar (`bool`: i8 0/1).
    fn lane(&mut self, s: Scalar, v: &Val, l: u32) -> Value {
        match v {
            Val::U(x) => *x,
            Val::A(base, stride) => {
                let k = (l as i64).wrapping_mul(*stride);
                self.b.ins().iadd_imm_s(*base, k)
            }
            Val::V(c) => {
                let pc = per_chunk(s);
                let x = self
                    .b
                    .ins()
                    .extractlane(c[(l / pc) as usize], (l % pc) as u8);
                if s == Scalar::Bool {
                    let t = self.b.ins().ireduce(types::I8, x);
                    self.b.ins().band_imm_u(t, 1)
                } else {
                    x
                }
            }
        }
    }

    fn lanes(&mut self, s: Scalar, v: &Val) -> Vec<Value> {
        (0..self.n).map(|l| self.lane(s, v, l)).collect()
    }

    fn pack_lanes(&mut self, s: Scalar, lanes: &[Value]) -> Vec<Value> {
        let pc = per_chunk(s);
        let nc = chunks(s, self.n);
        let mut out = Vec::new();
        for c in 0..nc {
            let mut acc = self.const_vec(vty(s), &[]);
            for j in 0..pc {
                let l = c * pc + j;
                if l >= self.n {
                    break;
                }
                let mut x = lanes[l as usize];
                if s == Scalar::Bool {
                    let w = self.b.ins().uextend(types::I32, x);
                    x = self.b.ins().ineg(w);
                }
                acc = self.b.ins().insertlane(acc, x, j as u8);
            }
            out.push(acc);
        }
        out
    }

    fn map_lanes(
        &mut self,
        s_out: Scalar,
        n_in: &[(Scalar, &Val)],
        mut f: impl FnMut(&mut Self, &[Value]) -> Value,
    ) -> Val {
        let ins: Vec<Vec<Value>> = n_in.iter().map(|(s, v)| self.lanes(*s, v)).collect();
        let mut outs = Vec::new();
        for l in 0..self.n as usize {
            let args: Vec<Value> = ins.iter().map(|x| x[l]).collect();
            outs.push(f(self, &args));
        }
        Val::V(self.pack_lanes(s_out, &outs))
    }

    fn exec(&mut self) -> Vec<Value> {
        // A known mask is computed where it is needed, so that the variables (which hold the
        // same lanes) are not kept live through code that does not read them.
        match self.known {
            Known::Full => {
                let ones = self.full_chunk();
                vec![ones; self.exec.len()]
            }
            Known::Initial => {
                let volume = self.bdim[3];
                self.initial_mask(volume)
            }
            Known::Unknown => self
                .exec
                .clone()
                .iter()
                .map(|&v| self.b.use_var(v))
                .collect(),
        }
    }

    /// A mask chunk with every lane of the wave on (lanes past a wave of fewer than 4 off).
    fn full_chunk(&mut self) -> Value {
        let ones: Vec<u64> = (0..4)
            .map(|j| if j < self.n { u32::MAX as u64 } else { 0 })
            .collect();
        self.const_vec(types::I32X4, &ones)
    }

    fn set_exec(&mut self, m: &[Value]) {
        // Whoever knows the new mask to be the initial one again says so afterwards.
        self.known = Known::Unknown;
        for (v, x) in self.exec.clone().into_iter().zip(m) {
            self.b.def_var(v, *x);
        }
    }

    fn use_vars(&mut self, vs: &[Variable]) -> Vec<Value> {
        vs.iter().map(|&v| self.b.use_var(v)).collect()
    }

    fn def_vars(&mut self, vs: &[Variable], xs: &[Value]) {
        for (v, x) in vs.iter().zip(xs) {
            self.b.def_var(*v, *x);
        }
    }

    fn mask_vars(&mut self) -> Vec<Variable> {
        (0..chunks(Scalar::Bool, self.n))
            .map(|_| self.new_var(types::I32X4))
            .collect()
    }

    fn zero_mask(&mut self) -> Vec<Value> {
        let z = self.const_vec(types::I32X4, &[]);
        vec![z; chunks(Scalar::Bool, self.n) as usize]
    }

    fn mask_and(&mut self, a: &[Value], b: &[Value]) -> Vec<Value> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().band(x, y))
            .collect()
    }
    fn mask_or(&mut self, a: &[Value], b: &[Value]) -> Vec<Value> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().bor(x, y))
            .collect()
    }
    fn mask_andnot(&mut self, a: &[Value], b: &[Value]) -> Vec<Value> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().band_not(x, y))
            .collect()
    }

    /// The mask as an `i64` bit set (bit `l` = lane `l`).
    fn mask_bits(&mut self, m: &[Value]) -> Value {
        let mut acc = self.b.ins().iconst(types::I64, 0);
        for (c, &x) in m.iter().enumerate() {
            let bits = self.b.ins().vhigh_bits(types::I64, x);
            let sh = if c == 0 {
                bits
            } else {
                self.b.ins().ishl_imm_u(bits, (c * 4) as i64)
            };
            acc = self.b.ins().bor(acc, sh);
        }
        if self.n < 64 {
            acc = self.b.ins().band_imm_u(acc, ((1u64 << self.n) - 1) as i64);
        }
        acc
    }

    fn mask_any(&mut self, m: &[Value]) -> Value {
        let bits = self.mask_bits(m);
        self.b.ins().icmp_imm_s(IntCC::NotEqual, bits, 0)
    }

    /// A varying bool (mask geometry) as `s`'s geometry: lanes of all ones / zero.
    fn mask_geom(&mut self, s: Scalar, m: &[Value]) -> Vec<Value> {
        match vty(s) {
            types::I32X4 => m.to_vec(),
            types::F32X4 => m
                .iter()
                .map(|&x| self.b.ins().bitcast(types::F32X4, le(), x))
                .collect(),
            types::I64X2 | types::F64X2 => {
                let mut out = Vec::new();
                for &x in m {
                    let lo = self.b.ins().swiden_low(x);
                    let hi = self.b.ins().swiden_high(x);
                    out.push(lo);
                    out.push(hi);
                }
                out.truncate(chunks(s, self.n) as usize);
                if vty(s) == types::F64X2 {
                    out = out
                        .iter()
                        .map(|&x| self.b.ins().bitcast(types::F64X2, le(), x))
                        .collect();
                }
                out
            }
            types::I16X8 => {
                let mut out = Vec::new();
                for pair in m.chunks(2) {
                    let b = if pair.len() > 1 { pair[1] } else { pair[0] };
                    out.push(self.b.ins().snarrow(pair[0], b));
                }
                out
            }
            _ => {
                let h = self.mask_geom(Scalar::I16, m);
                let mut out = Vec::new();
                for pair in h.chunks(2) {
                    let b = if pair.len() > 1 { pair[1] } else { pair[0] };
                    out.push(self.b.ins().snarrow(pair[0], b));
                }
                out
            }
        }
    }

    /// Lanes of all ones / zero in `s`'s geometry (a comparison's result) as a mask.
    fn geom_mask(&mut self, s: Scalar, v: &[Value]) -> Vec<Value> {
        let n = chunks(Scalar::Bool, self.n) as usize;
        match vty(s) {
            types::I32X4 => v.to_vec(),
            types::F32X4 => v
                .iter()
                .map(|&x| self.b.ins().bitcast(types::I32X4, le(), x))
                .collect(),
            types::I64X2 | types::F64X2 => {
                let ints: Vec<Value> = v
                    .iter()
                    .map(|&x| {
                        if vty(s) == types::F64X2 {
                            self.b.ins().bitcast(types::I64X2, le(), x)
                        } else {
                            x
                        }
                    })
                    .collect();
                let mut out = Vec::new();
                for pair in ints.chunks(2) {
                    let a = self.b.ins().bitcast(types::I32X4, le(), pair[0]);
                    let b = if pair.len() > 1 {
                        self.b.ins().bitcast(types::I32X4, le(), pair[1])
                    } else {
                        a
                    };
                    // Low 32 bits of each 64-bit lane: i32 lanes 0, 2 of a and of b.
                    let a8 = self.b.ins().bitcast(types::I8X16, le(), a);
                    let b8 = self.b.ins().bitcast(types::I8X16, le(), b);
                    let idx: Vec<u8> =
                        [0u8, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27].to_vec();
                    let imm = self.b.func.dfg.immediates.push(ConstantData::from(idx));
                    let sh = self.b.ins().shuffle(a8, b8, imm);
                    out.push(self.b.ins().bitcast(types::I32X4, le(), sh));
                }
                out.truncate(n);
                out
            }
            types::I16X8 => {
                let mut out = Vec::new();
                for &x in v {
                    out.push(self.b.ins().swiden_low(x));
                    out.push(self.b.ins().swiden_high(x));
                }
                out.truncate(n);
                out
            }
            _ => {
                let mut h = Vec::new();
                for &x in v {
                    h.push(self.b.ins().swiden_low(x));
                    h.push(self.b.ins().swiden_high(x));
                }
                h.truncate(chunks(Scalar::I16, self.n) as usize);
                self.geom_mask(Scalar::I16, &h)
            }
        }
    }

    /// A `bool` value as a mask.
    fn bool_mask(&mut self, v: &Val) -> Vec<Value> {
        match v {
            Val::V(c) => c.clone(),
            _ => self.materialize(Scalar::Bool, v),
        }
    }

    fn blend(&mut self, s: Scalar, mask: &[Value], new: &[Value], old: &[Value]) -> Vec<Value> {
        let m = self.mask_geom(s, mask);
        let mut out = Vec::new();
        for i in 0..new.len() {
            out.push(self.b.ins().bitselect(m[i], new[i], old[i]));
        }
        out
    }

    // -----------------------------------------------------------------------------------
    // Statements

    fn frame(&self) -> &Frame<'m> {
        self.frames.last().expect("a frame")
    }

    fn ty(&self, e: ExprId) -> Type {
        self.frame()
            .types
            .get(e.index())
            .copied()
            .flatten()
            .unwrap_or(Type::U32)
    }

    /// Lowers a block; returns whether its end is reachable (no unconditional jump away).
    fn block(&mut self, stmts: &'m [Stmt]) -> Result<bool, JitError> {
        let mark = self.scope.len();
        for s in stmts {
            if !self.stmt(s)? {
                self.scope.truncate(mark);
                return Ok(false);
            }
        }
        self.scope.truncate(mark);
        Ok(true)
    }

    fn declare_local(&mut self, l: Handle<Local>) -> Slot {
        let f = self.frame().f;
        let local = &f.locals[l];
        let class = self.frame().an.local(l);
        let slot = match local.ty {
            Type::Array { elem, len } => {
                let len = match len {
                    Len::Fixed(n) => n,
                    Len::Const(_) => 0,
                };
                let row = chunks(elem.scalar, self.n) * per_chunk(elem.scalar) * elem.scalar.size();
                // 64-bit: `[u32; 1 << 26]` at wave 16 is 4 GiB per wave.
                let off = self.alloc_state(len as u64 * elem.lanes as u64 * row as u64);
                Slot::Arr { off, elem, len }
            }
            Type::Matrix { rows, cols, .. } => {
                let n = rows as u32 * cols as u32;
                let off = self.alloc_state(n as u64 * 8);
                Slot::Mat { off, n }
            }
            t => {
                let s = scalar_of(t);
                let comps = comps_of(t);
                match class {
                    Class::Uniform => Slot::Uni((0..comps).map(|_| self.new_var(uty(s))).collect()),
                    Class::Affine(k) if comps == 1 => Slot::Aff(self.new_var(uty(s)), k),
                    _ => Slot::Var(
                        (0..comps)
                            .map(|_| {
                                (0..chunks(s, self.n))
                                    .map(|_| self.new_var(vty(s)))
                                    .collect()
                            })
                            .collect(),
                    ),
                }
            }
        };
        let fr = self.frames.last_mut().expect("frame");
        fr.locals[l.index()] = Some(slot.clone());
        slot
    }

    fn local_slot(&mut self, l: Handle<Local>) -> Slot {
        match self.frame().locals.get(l.index()).cloned().flatten() {
            Some(s) => s,
            None => self.declare_local(l),
        }
    }

    fn read_slot(&mut self, slot: &Slot, ty: Type) -> Ev {
        match slot {
            Slot::Uni(vs) => Ev::Vals(vs.iter().map(|&v| Val::U(self.b.use_var(v))).collect()),
            Slot::Aff(v, k) => Ev::Vals(vec![Val::A(self.b.use_var(*v), *k)]),
            Slot::Var(cs) => Ev::Vals(cs.iter().map(|c| Val::V(self.use_vars(c))).collect()),
            Slot::Mat { off, .. } => Ev::Mat(self.b.ins().iadd_imm_s(self.state, *off as i64)),
            Slot::Arr { .. } => {
                let _ = ty;
                Ev::Void
            }
        }
    }

    /// Writes `vals` to a local; `blend`: only the lanes of the exec mask.
    fn write_slot(
        &mut self,
        slot: &Slot,
        s: Scalar,
        vals: &[Val],
        blend: bool,
    ) -> Result<(), JitError> {
        match slot {
            Slot::Uni(vs) => {
                for (v, x) in vs.iter().zip(vals) {
                    match x {
                        Val::U(x) => self.b.def_var(*v, *x),
                        _ => return Err(self.internal("a varying value for a uniform local")),
                    }
                }
            }
            Slot::Aff(v, k) => match vals.first() {
                Some(Val::A(base, k2)) if k2 == k => self.b.def_var(*v, *base),
                _ => return Err(self.internal("a non-affine value for an affine local")),
            },
            Slot::Var(cs) => {
                // Under a mask known full every lane takes the new value.
                let exec = if blend && self.known != Known::Full {
                    Some(self.exec())
                } else {
                    None
                };
                for (c, x) in cs.iter().zip(vals) {
                    let mut new = self.materialize(s, x);
                    if let Some(m) = &exec {
                        let old = self.use_vars(c);
                        new = self.blend(s, m, &new, &old);
                    }
                    self.def_vars(c, &new);
                }
            }
            _ => return Err(self.internal("a value for an array or fragment")),
        }
        Ok(())
    }

    fn internal(&self, what: &str) -> JitError {
        JitError::Unsupported {
            kernel: self.kernel_name.clone(),
            what: format!("internal lowering error: {what}"),
        }
    }

    fn stmt(&mut self, st: &'m Stmt) -> Result<bool, JitError> {
        match &st.kind {
            StmtKind::Let { local, init } => {
                let slot = self.declare_local(*local);
                if let Some(e) = init {
                    let ty = self.frame().f.locals[*local].ty;
                    match self.expr(*e)? {
                        Ev::Mat(p) => self.copy_mat(&slot, p),
                        Ev::Vals(v) => self.write_slot(&slot, scalar_of(ty), &v, false)?,
                        Ev::Void => {}
                    }
                }
            }
            StmtKind::Assign { place, value } => self.assign(place, *value, st.span)?,
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => return self.if_stmt(*cond, then_block, else_block),
            StmtKind::Loop { label, kind, body } => return self.loop_stmt(st, label, kind, body),
            StmtKind::Break(label) => return self.break_stmt(label.as_deref(), true),
            StmtKind::Continue(label) => return self.break_stmt(label.as_deref(), false),
            StmtKind::Return(v) => return self.return_stmt(*v),
            StmtKind::Expr(e) => {
                self.expr(*e)?;
            }
            StmtKind::Barrier => self.barrier(),
            StmtKind::Fence(_) => {
                self.b.ins().fence();
            }
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => self.vstore(*base, *index, *value, *align, st.span)?,
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => self.matrix_access(*value, *base, *offset, *stride, true, st.span)?,
        }
        Ok(true)
    }

    fn copy_mat(&mut self, slot: &Slot, src: Value) {
        if let Slot::Mat { off, n } = slot {
            let dst = self.b.ins().iadd_imm_s(self.state, *off as i64);
            for i in 0..*n {
                let v = self.b.ins().load(types::I64, notrap(), src, (i * 8) as i32);
                self.b.ins().store(notrap(), v, dst, (i * 8) as i32);
            }
        }
    }

    /// Whether an assignment to `l` must keep the lanes outside the exec mask.
    fn needs_blend(&self, l: Handle<Local>) -> bool {
        self.frame()
            .an
            .blended
            .get(l.index())
            .copied()
            .unwrap_or(true)
    }

    fn assign(&mut self, place: &Place, value: ExprId, span: Span) -> Result<(), JitError> {
        match *place {
            Place::Local(l) => {
                let slot = self.local_slot(l);
                let ty = self.frame().f.locals[l].ty;
                let blend = self.needs_blend(l);
                match self.expr(value)? {
                    Ev::Mat(p) => self.copy_mat(&slot, p),
                    Ev::Vals(v) => self.write_slot(&slot, scalar_of(ty), &v, blend)?,
                    Ev::Void => {}
                }
            }
            Place::Lane { local, lane } => {
                let slot = self.local_slot(local);
                let ty = self.frame().f.locals[local].ty;
                let s = scalar_of(ty);
                let blend = self.needs_blend(local);
                let v = self.expr(value)?.vals();
                let Some(x) = v.into_iter().next() else {
                    return Ok(());
                };
                let sub = match &slot {
                    Slot::Uni(vs) => Slot::Uni(vec![vs[lane as usize]]),
                    Slot::Var(cs) => Slot::Var(vec![cs[lane as usize].clone()]),
                    Slot::Aff(..) => slot.clone(),
                    _ => return Err(self.internal("a lane of a non-vector")),
                };
                self.write_slot(&sub, s, &[x], blend)?;
            }
            Place::Element { base, index } => {
                let mut ops = self.eval_ops(&[index, value])?.into_iter();
                let idx = ops.next().map(Ev::vals).unwrap_or_default();
                let v = ops.next().map(Ev::vals).unwrap_or_default();
                let idx = idx
                    .into_iter()
                    .next()
                    .unwrap_or(Val::U(self.b.ins().iconst(types::I32, 0)));
                self.store_elem(base, &idx, &v, span, 1)?;
            }
        }
        Ok(())
    }

    fn if_stmt(
        &mut self,
        cond: ExprId,
        then_b: &'m [Stmt],
        else_b: &'m [Stmt],
    ) -> Result<bool, JitError> {
        if let Some(open) = self.if_affine(cond, then_b, else_b)? {
            return Ok(open);
        }
        let c = self
            .expr(cond)?
            .vals()
            .into_iter()
            .next()
            .expect("a condition");
        self.if_on(c, then_b, else_b)
    }

    /// `if a < b` (or `<=`, `>`, `>=`) between an affine and a uniform 32-bit integer, the
    /// bounds test of most kernels, with a small `then` side that has no `break`, `continue`,
    /// `return` or barrier: when the comparison holds in every lane of the wave (scalar tests
    /// of the first and last lane, the lanes rising without wrapping), the `then` side runs
    /// under the unchanged exec mask (no lane leaves it) and the `else` side is skipped, so
    /// the mask computations and blends of the divergent lowering are not done at all; else
    /// the divergent lowering. The `then` side is lowered twice, so this is not nested.
    ///
    /// Returns `None` when the pattern does not apply (nothing emitted).
    fn if_affine(
        &mut self,
        cond: ExprId,
        then_b: &'m [Stmt],
        else_b: &'m [Stmt],
    ) -> Result<Option<bool>, JitError> {
        /// Statements of the `then` side worth lowering twice.
        const MAX_THEN_STMTS: usize = 32;
        // Whether a failing wave may restart in the ordinary wave loop (see `fast_loop`);
        // only the `if` it was set for.
        let restart = if std::mem::take(&mut self.restart_ok) {
            self.restart
        } else {
            None
        };
        if self.dup_depth > 0 {
            return Ok(None);
        }
        let f = self.frame().f;
        let Some(&Expr::Binary { op, lhs, rhs }) = f.exprs.try_get(cond) else {
            return Ok(None);
        };
        if !matches!(
            op,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        ) {
            return Ok(None);
        }
        let s = scalar_of(self.ty(lhs));
        if !matches!(s, Scalar::I32 | Scalar::U32) {
            return Ok(None);
        }
        let (cl, cr) = (self.frame().an.expr(lhs), self.frame().an.expr(rhs));
        let shape = matches!(
            (cl, cr),
            (Class::Affine(k), Class::Uniform) | (Class::Uniform, Class::Affine(k)) if k > 0
        );
        if !shape
            || exits(then_b)
            || exits(else_b)
            || stmt_count(then_b) > MAX_THEN_STMTS
            || self.reaches_barrier(cond)
            || stmts_barrier(self.m, f, then_b, &mut self.barrier_memo)
            || stmts_barrier(self.m, f, else_b, &mut self.barrier_memo)
        {
            return Ok(None);
        }
        let mut ops = self.eval_ops(&[lhs, rhs])?.into_iter();
        let a = ops.next().map(Ev::vals).unwrap_or_default().remove(0);
        let b = ops.next().map(Ev::vals).unwrap_or_default().remove(0);
        // Lane l of the affine side is `base + l × k`; `op` as `affine op uniform`.
        let (base, k, u, op) = match (&a, &b) {
            (Val::A(base, k), Val::U(u)) => (*base, *k, *u, op),
            (Val::U(u), Val::A(base, k)) => (
                *base,
                *k,
                *u,
                match op {
                    BinaryOp::Lt => BinaryOp::Gt,
                    BinaryOp::Le => BinaryOp::Ge,
                    BinaryOp::Gt => BinaryOp::Lt,
                    _ => BinaryOp::Le,
                },
            ),
            _ => {
                let c = self.compare(op, s, &a, &b);
                return Ok(Some(self.if_on(c, then_b, else_b)?));
            }
        };
        let span = (k as i128) * (self.n as i128 - 1);
        if k <= 0 || span > i32::MAX as i128 {
            let c = self.compare(op, s, &a, &b);
            return Ok(Some(self.if_on(c, then_b, else_b)?));
        }
        // In i64 the lanes' values are exact: the wave's lanes are `first ..= last`, rising,
        // and do not wrap when `last` fits the type.
        let signed = s.is_signed();
        let ext = |me: &mut Self, x: Value| {
            if signed {
                me.b.ins().sextend(types::I64, x)
            } else {
                me.b.ins().uextend(types::I64, x)
            }
        };
        let first = ext(self, base);
        let last = self.b.ins().iadd_imm_s(first, span as i64);
        let max = if signed {
            i32::MAX as i64
        } else {
            u32::MAX as i64
        };
        let nowrap = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThanOrEqual, last, max);
        let uu = ext(self, u);
        let holds = match op {
            BinaryOp::Lt => self.b.ins().icmp(IntCC::SignedLessThan, last, uu),
            BinaryOp::Le => self.b.ins().icmp(IntCC::SignedLessThanOrEqual, last, uu),
            BinaryOp::Gt => self.b.ins().icmp(IntCC::SignedGreaterThan, first, uu),
            _ => self
                .b
                .ins()
                .icmp(IntCC::SignedGreaterThanOrEqual, first, uu),
        };
        // `last < u` or `last <= u` bounds `last` by the type's maximum already.
        let mut all = if matches!(op, BinaryOp::Lt | BinaryOp::Le) {
            holds
        } else {
            self.b.ins().band(nowrap, holds)
        };
        // In the full-wave loop, a stride-1 unsigned test also asks that the last lane index
        // every buffer its `then` side reads or writes at the tested index (`fast_bufs`): one
        // compare against their least length, loaded once per workgroup, instead of a length
        // compare per access. A wave that fails only this restarts in the ordinary loop, whose
        // checks report the fault exactly as before.
        let fast_base = match (restart, self.fast_least) {
            (Some(_), Some(least)) if k == 1 && !signed => {
                all = match op {
                    // `last < u` (or `<= u`, i.e. `< u + 1`, exact in i64) and `last < least`
                    // as one compare against a bound the loop does not change.
                    BinaryOp::Lt | BinaryOp::Le => {
                        let u = if op == BinaryOp::Le {
                            self.b.ins().iadd_imm_s(uu, 1)
                        } else {
                            uu
                        };
                        let bound = self.b.ins().smin(u, least);
                        self.b.ins().icmp(IntCC::SignedLessThan, last, bound)
                    }
                    _ => {
                        let inb = self.b.ins().icmp(IntCC::SignedLessThan, last, least);
                        self.b.ins().band(all, inb)
                    }
                };
                Some(base)
            }
            _ => None,
        };
        let before = self.known;
        // With the initial mask, a full wave takes the fast side knowing every lane active.
        let fast_known = match before {
            Known::Initial => {
                all = self.b.ins().band(all, self.wave_full);
                Known::Full
            }
            k => k,
        };
        let fast = self.b.create_block();
        let merge = self.b.create_block();
        let slow = match restart {
            // A failing wave goes straight to the restart, with its first linear id (see
            // `run`).
            Some(r) => {
                let lin = self.wave_lin;
                self.b.ins().brif(all, fast, &[], r, &[lin.into()]);
                r
            }
            None => {
                let slow = self.b.create_block();
                self.b.ins().brif(all, fast, &[], slow, &[]);
                self.b.seal_block(slow);
                slow
            }
        };
        // Sealed now (one predecessor each), so that the fast side reads the affine operand's
        // variable as the same value (`nowrap` names it).
        self.b.seal_block(fast);
        self.dup_depth += 1;
        self.b.switch_to_block(fast);
        self.known = fast_known;
        if !signed {
            self.nowrap.push(base);
        }
        self.fast_base = fast_base;
        if let Some(base) = fast_base {
            self.prefetch_streams(base);
        }
        let open = self.block(then_b)?;
        self.fast_base = None;
        if !signed {
            self.nowrap.pop();
        }
        if open {
            self.b.ins().jump(merge, &[]);
        }
        let fast_known = self.known;
        self.known = before;
        let first_slow = self.b.func.dfg.num_blocks();
        let open2 = match restart {
            // The wave runs again, from its start, in the ordinary loop.
            Some(_) => {
                self.known = fast_known;
                false
            }
            None => {
                self.b.switch_to_block(slow);
                let c = self.compare(op, s, &Val::A(base, k), &Val::U(u));
                let open2 = self.if_on(c, then_b, else_b)?;
                if open2 {
                    self.b.ins().jump(merge, &[]);
                }
                open2
            }
        };
        // The masked side (partial waves, the edge of the data) out of line: laid out after
        // the fast path, its blocks count as outside the wave loop for the register
        // allocator, which then keeps the fast path's values in registers.
        self.b.set_cold_block(slow);
        for i in first_slow..self.b.func.dfg.num_blocks() {
            self.b.set_cold_block(Block::from_u32(i as u32));
        }
        self.dup_depth -= 1;
        self.b.switch_to_block(merge);
        // Both sides end with the mask they started with (the slow side's is `before`).
        self.known = if restart.is_some() {
            // Only the fast side reaches the merge.
            fast_known
        } else {
            fast_known.min(self.known).min(before)
        };
        if !open && !open2 {
            self.b
                .ins()
                .trap(cranelift_codegen::ir::TrapCode::unwrap_user(1));
            return Ok(Some(false));
        }
        Ok(Some(true))
    }

    /// An `if` on an evaluated condition: a plain branch when uniform, else under masks.
    fn if_on(&mut self, c: Val, then_b: &'m [Stmt], else_b: &'m [Stmt]) -> Result<bool, JitError> {
        let before = self.known;
        match c {
            Val::U(c) => {
                let tb = self.b.create_block();
                let eb = self.b.create_block();
                let merge = self.b.create_block();
                self.b.ins().brif(c, tb, &[], eb, &[]);
                self.b.switch_to_block(tb);
                let t_open = self.block(then_b)?;
                if t_open {
                    self.b.ins().jump(merge, &[]);
                }
                let t_known = self.known;
                self.known = before;
                self.b.switch_to_block(eb);
                let e_open = self.block(else_b)?;
                if e_open {
                    self.b.ins().jump(merge, &[]);
                }
                self.b.switch_to_block(merge);
                // Known at the merge when known at the end of every side that reaches it.
                self.known = match (t_open, e_open) {
                    (true, true) => t_known.min(self.known),
                    (true, false) => t_known,
                    (false, true) => self.known,
                    (false, false) => Known::Unknown,
                };
                if !t_open && !e_open {
                    // Unreachable merge: give it a terminator and report the end closed.
                    self.b
                        .ins()
                        .trap(cranelift_codegen::ir::TrapCode::unwrap_user(1));
                    return Ok(false);
                }
                self.after_divergent_exit(then_b, else_b);
                Ok(true)
            }
            c => {
                let cm = self.bool_mask(&c);
                let save = self.exec();
                let then_m = self.mask_and(&save, &cm);
                let else_m = self.mask_andnot(&save, &cm);
                // Kept in variables: a barrier inside a branch resumes without this block.
                let else_vars = self.mask_vars();
                self.def_vars(&else_vars, &else_m);
                let acc = self.mask_vars();
                let zero = self.zero_mask();
                self.def_vars(&acc, &zero);
                self.set_exec(&then_m);
                let any = self.mask_any(&then_m);
                let tb = self.b.create_block();
                let after_t = self.b.create_block();
                self.b.ins().brif(any, tb, &[], after_t, &[]);
                self.b.switch_to_block(tb);
                self.regions.push(after_t);
                let open = self.block(then_b)?;
                self.regions.pop();
                if open {
                    let e = self.exec();
                    self.def_vars(&acc, &e);
                    self.b.ins().jump(after_t, &[]);
                }
                self.b.switch_to_block(after_t);
                let em = self.use_vars(&else_vars);
                if !else_b.is_empty() {
                    self.set_exec(&em);
                    let any = self.mask_any(&em);
                    let eb = self.b.create_block();
                    let merge = self.b.create_block();
                    self.b.ins().brif(any, eb, &[], merge, &[]);
                    self.b.switch_to_block(eb);
                    self.regions.push(merge);
                    let open = self.block(else_b)?;
                    self.regions.pop();
                    if open {
                        let e = self.exec();
                        let a = self.use_vars(&acc);
                        let u = self.mask_or(&a, &e);
                        self.def_vars(&acc, &u);
                        self.b.ins().jump(merge, &[]);
                    }
                    self.b.switch_to_block(merge);
                    let a = self.use_vars(&acc);
                    self.set_exec(&a);
                } else {
                    let a = self.use_vars(&acc);
                    let u = self.mask_or(&a, &em);
                    self.set_exec(&u);
                }
                // No lane left for good: the mask is the one before the `if`.
                self.known = if exits(then_b) || exits(else_b) {
                    Known::Unknown
                } else {
                    before
                };
                self.after_divergent_exit(then_b, else_b);
                Ok(true)
            }
        }
    }

    /// After an `if` or loop whose body may have removed lanes (break, continue, return):
    /// when none is left, leave to the end of the innermost masked region.
    fn after_divergent_exit(&mut self, a: &[Stmt], b: &[Stmt]) {
        if !exits(a) && !exits(b) {
            return;
        }
        self.check_empty();
    }

    fn check_empty(&mut self) {
        let Some(&target) = self.regions.last() else {
            return;
        };
        let e = self.exec();
        let any = self.mask_any(&e);
        let cont = self.b.create_block();
        self.b.ins().brif(any, cont, &[], target, &[]);
        self.b.switch_to_block(cont);
    }

    fn loop_stmt(
        &mut self,
        st: &'m Stmt,
        label: &Option<String>,
        kind: &LoopKind,
        body: &'m [Stmt],
    ) -> Result<bool, JitError> {
        let divergent = self.frame().an.loop_divergent(st);
        let mark = self.scope.len();
        let header = self.b.create_block();
        let latch = self.b.create_block();
        let exit = self.b.create_block();
        // `for`: bounds evaluated once.
        let mut for_parts = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let s = scalar_of(self.frame().f.locals[*var].ty);
            let slot = self.declare_local(*var);
            let v0 = self.expr(*start)?.vals();
            self.write_slot(&slot, s, &v0, false)?;
            let e = self.expr(*end)?.vals().remove(0);
            let stp = match step {
                Some(x) => self.expr(*x)?.vals().remove(0),
                None => Val::U(self.uconst(s, 1)),
            };
            let e = self.hold(s, e);
            let stp = self.hold(s, stp);
            for_parts = Some((*var, s, slot, e, stp));
        }
        let (alive, exit_mask) = if divergent {
            let alive = self.mask_vars();
            let exit_mask = self.mask_vars();
            let e = self.exec();
            self.def_vars(&alive, &e);
            let z = self.zero_mask();
            self.def_vars(&exit_mask, &z);
            (alive, exit_mask)
        } else {
            (Vec::new(), Vec::new())
        };
        // A body that removes lanes (break, continue, return) comes back to the header
        // with fewer.
        let before = self.known;
        if exits(body) {
            self.known = Known::Unknown;
        }
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let body_block = self.b.create_block();
        if divergent {
            let a = self.use_vars(&alive);
            self.set_exec(&a);
        }
        // The condition.
        let cond: Option<Val> = match kind {
            LoopKind::Infinite => None,
            LoopKind::While(c) => Some(self.expr(*c)?.vals().remove(0)),
            LoopKind::For { .. } => {
                let (var, s, slot, e, _) = for_parts.clone().expect("for parts");
                let v = self.read_slot(&slot, Type::Scalar(s)).vals().remove(0);
                let _ = var;
                let e = self.unhold(&e);
                Some(self.compare(BinaryOp::Lt, s, &v, &e))
            }
        };
        // A uniform loop whose body returns may lose every lane: stop then.
        let cond = match cond {
            Some(c) if !divergent && returns(body) => {
                let e = self.exec();
                let any = self.mask_any(&e);
                Some(match c {
                    Val::U(c) => Val::U(self.b.ins().band(c, any)),
                    c => c,
                })
            }
            None if !divergent && returns(body) => {
                let e = self.exec();
                Some(Val::U(self.mask_any(&e)))
            }
            c => c,
        };
        match cond {
            None if divergent => {
                let e = self.exec();
                let any = self.mask_any(&e);
                self.b.ins().brif(any, body_block, &[], exit, &[]);
            }
            None => {
                self.b.ins().jump(body_block, &[]);
            }
            Some(Val::U(c)) if !divergent => {
                self.b.ins().brif(c, body_block, &[], exit, &[]);
            }
            Some(c) => {
                let cm = self.bool_mask(&c);
                let e = self.exec();
                let stay = self.mask_and(&e, &cm);
                let leave = self.mask_andnot(&e, &cm);
                if divergent {
                    let em = self.use_vars(&exit_mask);
                    let em = self.mask_or(&em, &leave);
                    self.def_vars(&exit_mask, &em);
                    self.def_vars(&alive, &stay);
                    self.set_exec(&stay);
                    let any = self.mask_any(&stay);
                    self.b.ins().brif(any, body_block, &[], exit, &[]);
                } else {
                    let any = self.mask_any(&stay);
                    self.b.ins().brif(any, body_block, &[], exit, &[]);
                }
            }
        }
        self.b.switch_to_block(body_block);
        self.loops.push(LoopFrame {
            label: label.clone(),
            divergent,
            latch,
            exit,
            alive: alive.clone(),
            exit_mask: exit_mask.clone(),
        });
        self.regions.push(latch);
        let open = self.block(body)?;
        self.regions.pop();
        if open {
            self.b.ins().jump(latch, &[]);
        }
        self.loops.pop();
        self.b.switch_to_block(latch);
        if divergent {
            let a = self.use_vars(&alive);
            self.set_exec(&a);
        }
        if let Some((_, s, slot, _, stp)) = &for_parts {
            let v = self.read_slot(slot, Type::Scalar(*s)).vals().remove(0);
            let stp = self.unhold(stp);
            let nv = self.arith(BinaryOp::Add, *s, &v, &stp, None, None);
            self.write_slot(slot, *s, &[nv], false)?;
        }
        // A short counted loop leaves the deadline to the loop around it (sgemm's 16-step
        // inner loop lost 15 % to a check per step).
        if !short_counted(self.frame().f, kind, body) {
            self.cancel_check(st.span);
        }
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
        if divergent {
            let em = self.use_vars(&exit_mask);
            self.set_exec(&em);
        }
        // Lanes may all have left for an outer loop or returned.
        if exits(body) {
            self.check_empty();
        }
        // Without exits every lane that entered leaves by the condition: the mask is back.
        self.known = if exits(body) { Known::Unknown } else { before };
        self.scope.truncate(mark);
        Ok(true)
    }

    /// Keeps a value in variables (it must survive blocks and barriers).
    fn hold(&mut self, s: Scalar, v: Val) -> (Slot, Scalar) {
        let slot = match &v {
            Val::U(_) => Slot::Uni(vec![self.new_var(uty(s))]),
            Val::A(_, k) => Slot::Aff(self.new_var(uty(s)), *k),
            Val::V(_) => Slot::Var(vec![(0..chunks(s, self.n))
                .map(|_| self.new_var(vty(s)))
                .collect()]),
        };
        let _ = self.write_slot(&slot, s, &[v], false);
        (slot, s)
    }

    fn unhold(&mut self, h: &(Slot, Scalar)) -> Val {
        self.read_slot(&h.0, Type::Scalar(h.1)).vals().remove(0)
    }

    fn break_stmt(&mut self, label: Option<&str>, is_break: bool) -> Result<bool, JitError> {
        let base = self.frame().loop_base;
        let t = match label {
            None => self.loops.len().checked_sub(1),
            Some(l) => self
                .loops
                .iter()
                .rposition(|x| x.label.as_deref() == Some(l)),
        };
        let Some(t) = t.filter(|&t| t >= base) else {
            return Err(self.internal("break outside a loop"));
        };
        // A jump when every loop it leaves is uniform and nothing diverged in between; else
        // a mask update.
        let any_divergent = self.loops[t..].iter().any(|l| l.divergent);
        if !any_divergent {
            let target = if is_break {
                self.loops[t].exit
            } else {
                self.loops[t].latch
            };
            self.b.ins().jump(target, &[]);
            return Ok(false);
        }
        let e = self.exec();
        for j in t..self.loops.len() {
            let lf = &self.loops[j];
            if lf.alive.is_empty() {
                continue;
            }
            let keep = j == t && !is_break;
            if keep {
                continue;
            }
            let alive = lf.alive.clone();
            let a = self.use_vars(&alive);
            let a = self.mask_andnot(&a, &e);
            self.def_vars(&alive, &a);
        }
        if is_break {
            let em = self.loops[t].exit_mask.clone();
            if em.is_empty() {
                return Err(self.internal("a break from a uniform loop under a mask"));
            }
            let x = self.use_vars(&em);
            let x = self.mask_or(&x, &e);
            self.def_vars(&em, &x);
        }
        let z = self.zero_mask();
        self.set_exec(&z);
        // Nothing after this statement runs in this block: on to the end of the innermost
        // masked region (an `if` branch, where other lanes may still run the other branch).
        let target = *self.regions.last().expect("region");
        self.b.ins().jump(target, &[]);
        Ok(false)
    }

    fn return_stmt(&mut self, v: Option<ExprId>) -> Result<bool, JitError> {
        let val = match v {
            Some(e) => Some(self.expr(e)?),
            None => None,
        };
        let is_kernel = self.frame().is_kernel;
        let exit = self.frame().exit.expect("exit block");
        let base = self.frame().loop_base;
        if is_kernel {
            // Lanes that return are dead: drop them from every enclosing loop.
            let e = self.exec();
            for j in base..self.loops.len() {
                let alive = self.loops[j].alive.clone();
                if alive.is_empty() {
                    continue;
                }
                let a = self.use_vars(&alive);
                let a = self.mask_andnot(&a, &e);
                self.def_vars(&alive, &a);
            }
            let z = self.zero_mask();
            self.set_exec(&z);
            let target = *self.regions.last().unwrap_or(&exit);
            self.b.ins().jump(target, &[]);
            return Ok(false);
        }
        // A helper: the result, blended under the mask when it goes through a variable.
        let ret = self.frame().ret.clone();
        let ret_ty = self.frame().f.ret;
        if let (Some(slot), Some(Ev::Vals(vals))) = (&ret, &val) {
            let s = ret_ty.map(scalar_of).unwrap_or(Scalar::U32);
            let blend = matches!(slot, Slot::Var(_));
            self.write_slot(slot, s, vals, blend)?;
        }
        if let (Some(slot @ Slot::Mat { .. }), Some(Ev::Mat(p))) = (&ret, &val) {
            self.copy_mat(slot, *p);
        }
        let e = self.exec();
        for j in base..self.loops.len() {
            let alive = self.loops[j].alive.clone();
            if alive.is_empty() {
                continue;
            }
            let a = self.use_vars(&alive);
            let a = self.mask_andnot(&a, &e);
            self.def_vars(&alive, &a);
        }
        let z = self.zero_mask();
        self.set_exec(&z);
        let target = *self.regions.last().unwrap_or(&exit);
        self.b.ins().jump(target, &[]);
        Ok(false)
    }

    fn barrier(&mut self) {
        let id = self.resumes.len() as i64 + 1;
        let scope = self.scope.clone();
        for &(v, _, off) in &scope {
            let x = self.b.use_var(v);
            self.b.ins().store(notrap(), x, self.state, off as i32);
        }
        self.record(id);
        let next = self.wave_next;
        self.b.ins().jump(next, &[]);
        let resume = self.b.create_block();
        self.resumes.push(resume);
        self.b.switch_to_block(resume);
        for &(v, ty, off) in &scope {
            let x = self.b.ins().load(ty, notrap(), self.state, off as i32);
            self.b.def_var(v, x);
        }
    }

    // -----------------------------------------------------------------------------------
    // Memory

    /// The base address, element count (i64) and element type of an indexed object, and the
    /// name used in errors.
    fn object(&mut self, base: Base) -> (Value, Value, ElemType, String, bool) {
        match base {
            Base::Param(i) => {
                let f = self.frames[0].f;
                let name = f
                    .params
                    .get(i as usize)
                    .map(|p| p.name.clone())
                    .unwrap_or_default();
                match self.kparams[i as usize] {
                    KParam::Buf { off, elem } => {
                        let (ptr, len) = self.buf_ref(off);
                        (ptr, len, elem, format!("buffer {name}"), false)
                    }
                    KParam::Val(_) => {
                        let z = self.b.ins().iconst(types::I64, 0);
                        (z, z, ElemType::scalar(Scalar::U32), name, false)
                    }
                }
            }
            Base::Shared(h) => {
                let f = self.frames[0].f;
                let sd = &f.shared[h];
                let off = self.shared_offsets[h.index()];
                let ptr = self.b.ins().iadd_imm_s(self.shared, off as i64);
                let len = match self.shared_lens[h.index()] {
                    Some(n) => self.b.ins().iconst(types::I64, n as i64),
                    None => self.dyn_len,
                };
                (ptr, len, sd.elem, format!("shared {}", sd.name), false)
            }
            Base::Local(l) => {
                let slot = self.local_slot(l);
                let name = self.frame().f.locals[l].name.clone();
                match slot {
                    Slot::Arr { off, elem, len } => {
                        let ptr = self.b.ins().iadd_imm_s(self.state, off as i64);
                        let len = self.b.ins().iconst(types::I64, len as i64);
                        (ptr, len, elem, format!("array {name}"), true)
                    }
                    _ => {
                        let z = self.b.ins().iconst(types::I64, 0);
                        (z, z, ElemType::scalar(Scalar::U32), name, true)
                    }
                }
            }
        }
    }

    /// Checks every active lane's `index + extra - 1 < len` (indices u32, lengths i64).
    fn bounds(&mut self, idx: &Val, extra: u32, len: Value, site: u32) {
        match idx {
            Val::U(i) => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let last = self.b.ins().iadd_imm_s(i64v, extra as i64 - 1);
                let bad = self
                    .b
                    .ins()
                    .icmp(IntCC::SignedGreaterThanOrEqual, last, len);
                self.check(bad, err::OOB, site, |_| last, len);
            }
            _ => {
                // Lane vectors: an active lane is bad when `index > len - extra` (u32 lanes;
                // a limit past u32 admits every index) or when `len < extra`.
                let lim = self.b.ins().iadd_imm_s(len, -(extra as i64));
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, lim, 0);
                let max = self.b.ins().iconst(types::I64, u32::MAX as i64);
                let zero64 = self.b.ins().iconst(types::I64, 0);
                let lim = self.b.ins().umin(lim, max);
                let lim = self.b.ins().select(neg, zero64, lim);
                let lim32 = self.b.ins().ireduce(types::I32, lim);
                let limv = self.b.ins().splat(types::I32X4, lim32);
                let chunks = self.materialize(Scalar::U32, idx);
                let e = self.exec();
                let mut acc: Option<Value> = None;
                let mut bad_lanes = Vec::new();
                for (c, &x) in chunks.iter().enumerate() {
                    let gt = self.b.ins().icmp(IntCC::UnsignedGreaterThan, x, limv);
                    let b = self.b.ins().band(gt, e[c]);
                    bad_lanes.push(b);
                    acc = Some(match acc {
                        None => b,
                        Some(a) => self.b.ins().bor(a, b),
                    });
                }
                let acc = acc.expect("a chunk");
                let any_bad = self.b.ins().vany_true(acc);
                let any_exec = self.mask_any(&e);
                let short = self.b.ins().band(neg, any_exec);
                let bad = self.b.ins().bor(any_bad, short);
                let n = self.n;
                self.check(
                    bad,
                    err::OOB,
                    site,
                    |me| {
                        // The first bad lane's index (any active lane's when `len < extra`).
                        let bits = me.mask_bits(&bad_lanes);
                        let ebits = me.mask_bits(&e);
                        let none = me.b.ins().icmp_imm_s(IntCC::Equal, bits, 0);
                        let pick = me.b.ins().select(none, ebits, bits);
                        let lane = me.b.ins().ctz(pick);
                        let lane = me.b.ins().band_imm_u(lane, (n.max(1) - 1) as i64);
                        let i = me.lane_at(Scalar::U32, &Val::V(chunks), lane);
                        let i = me.b.ins().uextend(types::I64, i);
                        me.b.ins().iadd_imm_s(i, extra as i64 - 1)
                    },
                    len,
                );
            }
        }
    }

    /// Whether an element access at this index can take whole chunks: an affine stride-1
    /// index into a buffer or shared array of scalars filling whole chunks.
    fn contiguous(&self, idx: &Val, s: Scalar, comps: u32, private: bool) -> bool {
        matches!(idx, Val::A(_, 1))
            && comps == 1
            && !private
            && s != Scalar::Bool
            && (self.n * s.size()) % 16 == 0
    }

    /// Whether lanes `base .. base + N` all index existing elements (no u32 wrap).
    fn affine_in_bounds(&mut self, base: Value, len: Value) -> Value {
        let b64 = self.b.ins().uextend(types::I64, base);
        let last = self.b.ins().iadd_imm_s(b64, self.n as i64 - 1);
        let lt = self.b.ins().icmp(IntCC::SignedLessThan, last, len);
        let nowrap = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, last, u32::MAX as i64);
        self.b.ins().band(lt, nowrap)
    }

    /// Whether an access to `object` at the stride-1 index `base + lane` has every lane
    /// active and either no lane wrapping past `u32::MAX` or an object of fewer than 2³²
    /// elements (a shared array): then it is whole chunks or a fault, see
    /// [`Self::unmasked_addr`].
    fn unmasked(&self, base: Value, object: Base) -> bool {
        self.known == Known::Full
            && (self.nowrap.contains(&base) || matches!(object, Base::Shared(_)))
    }

    /// The address of element `base` for a whole-wave access at `base + lane` (see
    /// [`Self::unmasked`]), after its bounds check. Lanes `base ..= base + N - 1` (in i64)
    /// are all active. Without wrapping they rise, so they are in bounds exactly when the last
    /// is, and otherwise the first bad lane (the one the lane-by-lane check reports) has
    /// index `max(base, len)`. With wrapping (`last > u32::MAX`, only when `len < 2³²`) the
    /// lane of index `u32::MAX` is out of bounds, so is the access, and the first bad lane is
    /// again `max(base, len)`, before the wrap. The failure leaves the function, so the fast
    /// path has no join.
    fn unmasked_addr(
        &mut self,
        base: Value,
        object: Base,
        (ptr, len): (Value, Value),
        size: i64,
        site: u32,
    ) -> Value {
        let b64 = self.b.ins().uextend(types::I64, base);
        let checked = self.fast_base == Some(base)
            && matches!(object, Base::Param(p) if self.fast_bufs.contains(&p));
        if checked {
            // The fast test holds `base + N - 1 < len` already (see `if_affine`).
            let off = self.b.ins().imul_imm_s(b64, size);
            return self.b.ins().iadd(ptr, off);
        }
        let last = self.b.ins().iadd_imm_s(b64, self.n as i64 - 1);
        let bad = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, last, len);
        self.check(
            bad,
            err::OOB,
            site,
            |me| {
                let past = me.b.ins().icmp(IntCC::SignedGreaterThan, len, b64);
                me.b.ins().select(past, len, b64)
            },
            len,
        );
        let off = self.b.ins().imul_imm_s(b64, size);
        self.b.ins().iadd(ptr, off)
    }

    /// Whether the exec mask covers every lane (`i8`).
    fn mask_full(&mut self) -> Value {
        match self.known {
            Known::Full => return self.b.ins().iconst(types::I8, 1),
            Known::Initial => return self.wave_full,
            Known::Unknown => {}
        }
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let full = if self.n == 64 {
            -1i64
        } else {
            ((1u64 << self.n) - 1) as i64
        };
        self.b.ins().icmp_imm_s(IntCC::Equal, bits, full)
    }

    /// Reads element `idx` (component-wise) of an object.
    fn load_elem(
        &mut self,
        base: Base,
        idx: &Val,
        span: Span,
        count: u32,
    ) -> Result<Vec<Val>, JitError> {
        let (ptr, len, elem, what, private) = self.object(base);
        let s = elem.scalar;
        let size = s.size() as i64;
        let site = self.add_site(span, what);
        let comps = if count > 1 { count } else { elem.lanes as u32 };
        // vload: `count` consecutive scalars; else one element of `elem.lanes` components.
        let extra = if count > 1 { count } else { 1 };
        let contiguous = self.contiguous(idx, s, comps, private);
        if !contiguous {
            self.bounds(idx, extra, len, site);
        }
        if private {
            return Ok(self.private_load(ptr, elem, idx, comps));
        }
        let esize = if count > 1 {
            size
        } else {
            size * elem.lanes as i64
        };
        let mut out = Vec::new();
        match idx {
            Val::U(i) => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let off = self.b.ins().imul_imm_s(i64v, esize);
                let addr = self.b.ins().iadd(ptr, off);
                for c in 0..comps {
                    let v = self.load_scalar(s, addr, (c as i64 * size) as i32);
                    out.push(Val::U(v));
                }
            }
            Val::A(bv, 1) if contiguous && self.unmasked(*bv, base) => {
                let addr = self.unmasked_addr(*bv, base, (ptr, len), size, site);
                let vs: Vec<Value> = (0..chunks(s, self.n))
                    .map(|c| self.b.ins().load(vty(s), notrap(), addr, (c * 16) as i32))
                    .collect();
                out.push(Val::V(vs));
            }
            Val::A(bv, 1) if contiguous => {
                // Contiguous: whole chunks when every lane's element exists (reading an
                // inactive lane's element is harmless then); else, out of line, the lanes are
                // checked and gathered one by one into a stack copy. Either way the chunks
                // are loaded at the join from one address, so the fast path carries a single
                // pointer through the join rather than the chunks.
                let full = self.affine_in_bounds(*bv, len);
                let i64v = self.b.ins().uextend(types::I64, *bv);
                let off = self.b.ins().imul_imm_s(i64v, size);
                let addr = self.b.ins().iadd(ptr, off);
                let lane_b = self.b.create_block();
                self.b.set_cold_block(lane_b);
                let join = self.b.create_block();
                let from = self.b.append_block_param(join, types::I64);
                self.b.ins().brif(full, join, &[addr.into()], lane_b, &[]);
                self.b.switch_to_block(lane_b);
                self.bounds(idx, extra, len, site);
                let nc = chunks(s, self.n);
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    nc * 16,
                    4,
                ));
                let copy = self.b.ins().stack_addr(types::I64, slot, 0);
                self.gather_to(s, ptr, esize, idx, copy);
                self.b.ins().jump(join, &[copy.into()]);
                self.b.switch_to_block(join);
                let vs: Vec<Value> = (0..nc)
                    .map(|c| self.b.ins().load(vty(s), notrap(), from, (c * 16) as i32))
                    .collect();
                out.push(Val::V(vs));
            }
            _ => {
                for c in 0..comps {
                    let vs = self.gather(s, ptr, esize, idx, (c as i64 * size) as i32);
                    out.push(Val::V(vs));
                }
            }
        }
        Ok(out)
    }

    /// Each lane's index of `idx`, with inactive lanes' set to element 0: the bounds check
    /// passed for an active lane (there always is one), so the object has that element.
    fn safe_lanes(&mut self, idx: &Val) -> Vec<Value> {
        let chunks = self.materialize(Scalar::U32, idx);
        let e = self.exec();
        let safe: Vec<Value> = chunks
            .iter()
            .zip(&e)
            .map(|(&x, &m)| self.b.ins().band(x, m))
            .collect();
        self.lanes(Scalar::U32, &Val::V(safe))
    }

    /// One scalar per lane at `ptr + idx × esize + off`; inactive lanes read element 0.
    fn gather(&mut self, s: Scalar, ptr: Value, esize: i64, idx: &Val, off: i32) -> Vec<Value> {
        let lanes = self.safe_lanes(idx);
        let mut vals = Vec::new();
        for &i in &lanes {
            let i64v = self.b.ins().uextend(types::I64, i);
            let o = self.b.ins().imul_imm_s(i64v, esize);
            let a = self.b.ins().iadd(ptr, o);
            vals.push(self.load_scalar(s, a, off));
        }
        self.pack_lanes(s, &vals)
    }

    /// Like [`Self::gather`], but the lanes' scalars are stored in lane order at `dst`.
    fn gather_to(&mut self, s: Scalar, ptr: Value, esize: i64, idx: &Val, dst: Value) {
        let lanes = self.safe_lanes(idx);
        let size = s.size() as i32;
        for (l, &i) in lanes.iter().enumerate() {
            let i64v = self.b.ins().uextend(types::I64, i);
            let o = self.b.ins().imul_imm_s(i64v, esize);
            let a = self.b.ins().iadd(ptr, o);
            let v = self.b.ins().load(uty(s), notrap(), a, 0);
            self.b.ins().store(notrap(), v, dst, l as i32 * size);
        }
    }

    fn load_scalar(&mut self, s: Scalar, addr: Value, off: i32) -> Value {
        let v = self.b.ins().load(uty(s), notrap(), addr, off);
        if s == Scalar::Bool {
            self.b.ins().band_imm_u(v, 1)
        } else {
            v
        }
    }

    fn store_elem(
        &mut self,
        base: Base,
        idx: &Val,
        vals: &[Val],
        span: Span,
        count: u32,
    ) -> Result<(), JitError> {
        let (ptr, len, elem, what, private) = self.object(base);
        let s = elem.scalar;
        let size = s.size() as i64;
        let site = self.add_site(span, what);
        let comps = vals.len() as u32;
        let extra = if count > 1 { count } else { 1 };
        let contiguous = self.contiguous(idx, s, comps, private);
        let esize = if count > 1 {
            size
        } else {
            size * elem.lanes as i64
        };
        let all_uniform = vals.iter().all(|v| matches!(v, Val::U(_)));
        // A scatter under a mask that may hold a single lane (`if lane_id == 0 { ... }`):
        // that lane's store alone, when it is so.
        let join = if !contiguous
            && !private
            && self.known != Known::Full
            && s != Scalar::Bool
            && !(matches!(idx, Val::U(_)) && all_uniform)
        {
            let join = self.b.create_block();
            self.single_lane_store(s, ptr, esize, idx, vals, (len, extra, site), join);
            Some(join)
        } else {
            None
        };
        if !contiguous {
            self.bounds(idx, extra, len, site);
        }
        if private {
            self.private_store(ptr, elem, idx, vals);
            return Ok(());
        }
        match idx {
            Val::U(i) if all_uniform => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let off = self.b.ins().imul_imm_s(i64v, esize);
                let addr = self.b.ins().iadd(ptr, off);
                for (c, v) in vals.iter().enumerate() {
                    if let Val::U(x) = v {
                        self.b
                            .ins()
                            .store(notrap(), *x, addr, (c as i64 * size) as i32);
                    }
                }
            }
            Val::A(bv, 1) if contiguous && self.unmasked(*bv, base) => {
                let addr = self.unmasked_addr(*bv, base, (ptr, len), size, site);
                let cs = self.materialize(s, &vals[0]);
                let streamed = self.fast_base == Some(*bv)
                    && matches!(base, Base::Param(p) if self.stream_writes.contains(&p));
                if streamed {
                    self.stream_store(addr, &cs);
                } else {
                    for (c, &x) in cs.iter().enumerate() {
                        self.b.ins().store(notrap(), x, addr, (c * 16) as i32);
                    }
                }
            }
            Val::A(bv, 1) if contiguous => {
                // One vector store per chunk when every lane is active and in bounds.
                let inb = self.affine_in_bounds(*bv, len);
                let full = self.mask_full();
                let full = self.b.ins().band(inb, full);
                let vec_b = self.b.create_block();
                let lane_b = self.b.create_block();
                // Out of line: partial waves and the ends of objects only.
                self.b.set_cold_block(lane_b);
                let join = self.b.create_block();
                self.b.ins().brif(full, vec_b, &[], lane_b, &[]);
                self.b.switch_to_block(vec_b);
                let i64v = self.b.ins().uextend(types::I64, *bv);
                let off = self.b.ins().imul_imm_s(i64v, size);
                let addr = self.b.ins().iadd(ptr, off);
                let cs = self.materialize(s, &vals[0]);
                for (c, &x) in cs.iter().enumerate() {
                    self.b.ins().store(notrap(), x, addr, (c * 16) as i32);
                }
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(lane_b);
                self.bounds(idx, extra, len, site);
                self.scatter(s, ptr, esize, idx, 0, &vals[0]);
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
            _ => {
                for (c, v) in vals.iter().enumerate() {
                    self.scatter(s, ptr, esize, idx, (c as i64 * size) as i32, v);
                }
            }
        }
        if let Some(join) = join {
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(join);
        }
        Ok(())
    }

    /// Tests whether the exec mask holds exactly one lane; if so, checks that lane's index
    /// (reporting it as the lane-vector check would: `index + extra - 1`), stores its
    /// components and jumps to `join`; else falls through (current block) to the general
    /// scatter.
    #[allow(clippy::too_many_arguments)]
    fn single_lane_store(
        &mut self,
        s: Scalar,
        ptr: Value,
        esize: i64,
        idx: &Val,
        vals: &[Val],
        (len, extra, site): (Value, u32, u32),
        join: Block,
    ) {
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let below = self.b.ins().iadd_imm_s(bits, -1);
        let rest = self.b.ins().band(bits, below);
        let one = self.b.ins().icmp_imm_s(IntCC::Equal, rest, 0);
        let some = self.b.ins().icmp_imm_s(IntCC::NotEqual, bits, 0);
        let one = self.b.ins().band(one, some);
        let one_b = self.b.create_block();
        let many_b = self.b.create_block();
        self.b.ins().brif(one, one_b, &[], many_b, &[]);
        self.b.seal_block(one_b);
        self.b.seal_block(many_b);
        self.b.switch_to_block(one_b);
        let lane = self.b.ins().ctz(bits);
        let i = self.lane_at(Scalar::U32, idx, lane);
        let i64v = self.b.ins().uextend(types::I64, i);
        let last = self.b.ins().iadd_imm_s(i64v, extra as i64 - 1);
        let bad = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, last, len);
        self.check(bad, err::OOB, site, |_| last, len);
        let o = self.b.ins().imul_imm_s(i64v, esize);
        let addr = self.b.ins().iadd(ptr, o);
        for (c, v) in vals.iter().enumerate() {
            let x = self.lane_at(s, v, lane);
            self.b
                .ins()
                .store(notrap(), x, addr, c as i32 * s.size() as i32);
        }
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(many_b);
    }

    /// Lane `lane` (an `i64` below the wave width, not a constant) of `v`.
    fn lane_at(&mut self, s: Scalar, v: &Val, lane: Value) -> Value {
        match v {
            Val::U(x) => *x,
            Val::A(base, stride) => {
                let t = self.b.func.dfg.value_type(*base);
                let l = if t == types::I64 {
                    lane
                } else {
                    self.b.ins().ireduce(t, lane)
                };
                let k = self.b.ins().imul_imm_s(l, *stride);
                self.b.ins().iadd(*base, k)
            }
            Val::V(chunks) => {
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    chunks.len() as u32 * 16,
                    4,
                ));
                for (c, &x) in chunks.iter().enumerate() {
                    self.b
                        .ins()
                        .stack_store(types::I64, x, slot, (c * 16) as i32);
                }
                let base = self.b.ins().stack_addr(types::I64, slot, 0);
                let o = self.b.ins().imul_imm_s(lane, s.size() as i64);
                let a = self.b.ins().iadd(base, o);
                self.b.ins().load(uty(s), notrap(), a, 0)
            }
        }
    }

    /// A whole wave's chunks at `addr`, through the non-temporal store helpers (at most 8
    /// chunks a call: the vector registers the C calling convention passes them in).
    fn stream_store(&mut self, addr: Value, cs: &[Value]) {
        for (g, group) in cs.chunks(8).enumerate() {
            let at = self.b.ins().iadd_imm_s(addr, g as i64 * 128);
            let mut args = vec![at];
            for &c in group {
                let c = if self.b.func.dfg.value_type(c) == types::I64X2 {
                    c
                } else {
                    self.b.ins().bitcast(types::I64X2, le(), c)
                };
                args.push(c);
            }
            let mut params = vec![types::I64];
            params.resize(args.len(), types::I64X2);
            self.call(stream::store_symbol(group.len()), &params, &[], &args);
        }
    }

    /// In a streaming flat loop, for the wave whose first index is `base`: prefetches the
    /// lines each read stream holds `PREFETCH_AHEAD` bytes past this wave's.
    fn prefetch_streams(&mut self, base: Value) {
        let b64 = self.b.ins().uextend(types::I64, base);
        let mut addrs = Vec::new();
        let mut lines = 1;
        for p in self.stream_reads.clone() {
            let KParam::Buf { off, elem } = self.kparams[p as usize] else {
                continue;
            };
            let Some(&(_, ptr)) = self.fast_ptrs.iter().find(|&&(o, _)| o == off) else {
                continue;
            };
            let esize = elem.scalar.size() as i64 * elem.lanes as i64;
            lines = lines.max((self.n as u64 * esize as u64).div_ceil(stream::LINE as u64) as i64);
            let o = self.b.ins().imul_imm_s(b64, esize);
            let a = self.b.ins().iadd(ptr, o);
            addrs.push(self.b.ins().iadd_imm_s(a, stream::PREFETCH_AHEAD));
        }
        let lines = self.b.ins().iconst(types::I64, lines);
        for group in addrs.chunks(4) {
            let mut args = vec![lines];
            args.extend_from_slice(group);
            let params = vec![types::I64; args.len()];
            self.call(stream::prefetch_symbol(group.len()), &params, &[], &args);
        }
    }

    /// Per-lane stores in lane order; inactive lanes write the dummy.
    fn scatter(&mut self, s: Scalar, ptr: Value, esize: i64, idx: &Val, off: i32, v: &Val) {
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let lanes = self.lanes(Scalar::U32, idx);
        let vl = self.lanes(s, v);
        let zero = self.b.ins().iconst(types::I64, 0);
        let offv = self.b.ins().iconst(types::I64, off as i64);
        for (l, &i) in lanes.iter().enumerate() {
            let i64v = self.b.ins().uextend(types::I64, i);
            let o = self.b.ins().imul_imm_s(i64v, esize);
            let a = self.b.ins().iadd(ptr, o);
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let bit = self.b.ins().band_imm_u(bit, 1);
            let a = self.b.ins().select(bit, a, self.scratch);
            let o2 = self.b.ins().select(bit, offv, zero);
            let a = self.b.ins().iadd(a, o2);
            self.b.ins().store(notrap(), vl[l], a, 0);
        }
    }

    /// Private arrays: `[element][component][lane]`, each row padded to whole chunks.
    fn private_row(&self, s: Scalar) -> i64 {
        (chunks(s, self.n) * per_chunk(s) * s.size()) as i64
    }

    fn private_load(&mut self, ptr: Value, elem: ElemType, idx: &Val, comps: u32) -> Vec<Val> {
        let s = elem.scalar;
        let row = self.private_row(s);
        let k = elem.lanes as i64;
        let mut out = Vec::new();
        match idx {
            Val::U(i) if s != Scalar::Bool => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let off = self.b.ins().imul_imm_s(i64v, row * k);
                let addr = self.b.ins().iadd(ptr, off);
                for c in 0..comps as i64 {
                    let cs: Vec<Value> = (0..chunks(s, self.n) as i64)
                        .map(|j| {
                            self.b
                                .ins()
                                .load(vty(s), notrap(), addr, (c * row + j * 16) as i32)
                        })
                        .collect();
                    out.push(Val::V(cs));
                }
            }
            _ => {
                let lanes = self.lanes(Scalar::U32, idx);
                let e = self.exec();
                let bits = self.mask_bits(&e);
                for c in 0..comps as i64 {
                    let mut vals = Vec::new();
                    for (l, &i) in lanes.iter().enumerate() {
                        let i64v = self.b.ins().uextend(types::I64, i);
                        let o = self.b.ins().imul_imm_s(i64v, row * k);
                        let a = self.b.ins().iadd(ptr, o);
                        let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                        let bit = self.b.ins().band_imm_u(bit, 1);
                        let a = self.b.ins().select(bit, a, self.scratch);
                        let o2 = self
                            .b
                            .ins()
                            .iconst(types::I64, c * row + l as i64 * s.size() as i64);
                        let z = self.b.ins().iconst(types::I64, 0);
                        let o2 = self.b.ins().select(bit, o2, z);
                        let a = self.b.ins().iadd(a, o2);
                        vals.push(self.load_scalar(s, a, 0));
                    }
                    out.push(Val::V(self.pack_lanes(s, &vals)));
                }
            }
        }
        out
    }

    fn private_store(&mut self, ptr: Value, elem: ElemType, idx: &Val, vals: &[Val]) {
        let s = elem.scalar;
        let row = self.private_row(s);
        let k = elem.lanes as i64;
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let lanes = self.lanes(Scalar::U32, idx);
        for (c, v) in vals.iter().enumerate() {
            let vl = self.lanes(s, v);
            for (l, &i) in lanes.iter().enumerate() {
                let i64v = self.b.ins().uextend(types::I64, i);
                let o = self.b.ins().imul_imm_s(i64v, row * k);
                let a = self.b.ins().iadd(ptr, o);
                let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                let bit = self.b.ins().band_imm_u(bit, 1);
                let a = self.b.ins().select(bit, a, self.scratch);
                let o2 = self
                    .b
                    .ins()
                    .iconst(types::I64, c as i64 * row + l as i64 * s.size() as i64);
                let z = self.b.ins().iconst(types::I64, 0);
                let o2 = self.b.ins().select(bit, o2, z);
                let a = self.b.ins().iadd(a, o2);
                self.b.ins().store(notrap(), vl[l], a, 0);
            }
        }
    }

    fn check_align(&mut self, idx: &Val, s: Scalar, align: Option<u8>, span: Span) {
        let Some(a) = align else { return };
        if a <= 1 {
            return;
        }
        let site = self.add_site(span, format!("align = {a}"));
        let lanes = self.lanes(Scalar::U32, idx);
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let mut bad_any = self.b.ins().iconst(types::I8, 0);
        let mut first = self.b.ins().iconst(types::I64, 0);
        for (l, &i) in lanes.iter().enumerate().rev() {
            let i64v = self.b.ins().uextend(types::I64, i);
            let bytes = self.b.ins().imul_imm_s(i64v, s.size() as i64);
            let r = self.b.ins().band_imm_u(bytes, a as i64 - 1);
            let mis = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let bit = self.b.ins().band_imm_u(bit, 1);
            let act = self.b.ins().ireduce(types::I8, bit);
            let bad = self.b.ins().band(mis, act);
            bad_any = self.b.ins().bor(bad_any, bad);
            first = self.b.ins().select(bad, i64v, first);
        }
        let av = self.b.ins().iconst(types::I64, a as i64);
        self.check(bad_any, err::ALIGN, site, |_| first, av);
    }

    fn vstore(
        &mut self,
        base: Base,
        index: ExprId,
        value: ExprId,
        align: Option<u8>,
        span: Span,
    ) -> Result<(), JitError> {
        let mut ops = self.eval_ops(&[index, value])?.into_iter();
        let idx = ops.next().map(Ev::vals).unwrap_or_default().remove(0);
        let v = ops.next().map(Ev::vals).unwrap_or_default();
        let s = scalar_of(self.ty(value));
        self.check_align(&idx, s, align, span);
        // Component j at scalar index i + j.
        let n = v.len() as u32;
        let (_, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        self.bounds(&idx, n, len, site);
        for (j, x) in v.iter().enumerate() {
            let ij = self.add_const(&idx, j as i64);
            self.store_elem(base, &ij, std::slice::from_ref(x), span, 1)?;
        }
        Ok(())
    }

    fn add_const(&mut self, v: &Val, k: i64) -> Val {
        match v {
            Val::U(x) => Val::U(self.b.ins().iadd_imm_s(*x, k)),
            Val::A(x, st) => Val::A(self.b.ins().iadd_imm_s(*x, k), *st),
            Val::V(c) => {
                let kk = self.b.ins().iconst(types::I32, k);
                let sp = self.b.ins().splat(types::I32X4, kk);
                Val::V(c.iter().map(|&x| self.b.ins().iadd(x, sp)).collect())
            }
        }
    }

    fn matrix_access(
        &mut self,
        value: ExprId,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        store: bool,
        span: Span,
    ) -> Result<(), JitError> {
        let frag = match self.expr(value)? {
            Ev::Mat(p) => p,
            _ => return Err(self.internal("matrix_store of a non-fragment")),
        };
        let t = self.ty(value);
        self.matrix_io(frag, t, base, offset, stride, store, span)
    }

    #[allow(clippy::too_many_arguments)]
    fn matrix_io(
        &mut self,
        frag: Value,
        t: Type,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        store: bool,
        span: Span,
    ) -> Result<(), JitError> {
        let Type::Matrix {
            scalar, rows, cols, ..
        } = t
        else {
            return Err(self.internal("a matrix access without a fragment type"));
        };
        let off = self.expr(offset)?.vals().remove(0);
        let st = self.expr(stride)?.vals().remove(0);
        // Operands are uniform over the wave (else UB): take the first active lane's.
        let off = self.first_active(Scalar::U32, &off);
        let st = self.first_active(Scalar::U32, &st);
        let (ptr, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        let off64 = self.b.ins().uextend(types::I64, off);
        let st64 = self.b.ins().uextend(types::I64, st);
        let shape = rows as u64
            | (cols as u64) << 16
            | (super::rt::code_of(scalar) as u64) << 32
            | (store as u64) << 40;
        let shape = self.b.ins().iconst(types::I64, shape as i64);
        let r = self
            .call(
                "xpu_matrix_access",
                &[types::I64; 6],
                &[types::I64],
                &[frag, ptr, len, off64, st64, shape],
            )
            .expect("result");
        let bad = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        self.check(bad, err::OOB, site, |s| s.b.ins().iadd_imm_s(r, -1), len);
        Ok(())
    }

    fn first_active(&mut self, s: Scalar, v: &Val) -> Value {
        match v {
            Val::U(x) => *x,
            _ => {
                let e = self.exec();
                let bits = self.mask_bits(&e);
                let lanes = self.lanes(s, v);
                let mut acc = lanes[lanes.len() - 1];
                for l in (0..lanes.len()).rev() {
                    let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                    let bit = self.b.ins().band_imm_u(bit, 1);
                    acc = self.b.ins().select(bit, lanes[l], acc);
                }
                acc
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Expressions

    /// Whether evaluating `e` may reach a barrier (through a helper it calls).
    fn reaches_barrier(&mut self, e: ExprId) -> bool {
        if !self.has_barrier {
            return false;
        }
        let f = self.frame().f;
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            let Some(ex) = f.exprs.try_get(x) else {
                continue;
            };
            match ex {
                Expr::Call { function, .. }
                    if fn_barrier(self.m, *function, &mut self.barrier_memo) =>
                {
                    return true;
                }
                // Conservatively: a dispatch may reach any member's barrier.
                Expr::Dispatch { .. } => return true,
                _ => {}
            }
            ex.for_each_operand(|o| stack.push(o));
        }
        false
    }

    /// Evaluates operands left to right. An operand evaluated before one that may reach a
    /// barrier is held in variables (spilled and reloaded there), since a wave resumes after
    /// the barrier without passing through the code that computed it.
    fn eval_ops(&mut self, ops: &[ExprId]) -> Result<Vec<Ev>, JitError> {
        let barrier_after: Vec<bool> = (0..ops.len())
            .map(|k| ops[k + 1..].iter().any(|&x| self.reaches_barrier(x)))
            .collect();
        let mut held: Vec<Result<Ev, Vec<(Slot, Scalar)>>> = Vec::new();
        for (k, &o) in ops.iter().enumerate() {
            let ev = self.expr(o)?;
            match ev {
                Ev::Vals(vs) if barrier_after[k] => {
                    let s = scalar_of(self.ty(o));
                    held.push(Err(vs.into_iter().map(|v| self.hold(s, v)).collect()));
                }
                ev => held.push(Ok(ev)),
            }
        }
        Ok(held
            .into_iter()
            .map(|h| match h {
                Ok(ev) => ev,
                Err(slots) => Ev::Vals(slots.iter().map(|x| self.unhold(x)).collect()),
            })
            .collect())
    }

    fn expr(&mut self, e: ExprId) -> Result<Ev, JitError> {
        let f = self.frame().f;
        let span = f.expr_span(e);
        let ty = self.ty(e);
        let class = self.frame().an.expr(e);
        let ex = &f.exprs[e];
        let ev = match ex {
            Expr::Literal(l) => {
                let (s, bits) = match *l {
                    Literal::Bool(b) => (Scalar::Bool, b as u64),
                    Literal::Int { bits, ty } => (ty, bits),
                    Literal::Float { value, ty } => (
                        ty,
                        match ty {
                            Scalar::F32 => (value as f32).to_bits() as u64,
                            Scalar::F16 => half::f16::from_f64(value).to_bits() as u64,
                            _ => value.to_bits(),
                        },
                    ),
                };
                Ev::Vals(vec![Val::U(self.uconst(s, bits))])
            }
            Expr::Param(i) => {
                if self.frame().is_kernel {
                    match &self.kparams[*i as usize] {
                        KParam::Val(v) => Ev::Vals(v.clone()),
                        KParam::Buf { .. } => Ev::Void,
                    }
                } else {
                    let slot = self.frame().params[*i as usize].clone();
                    self.read_slot(&slot, ty)
                }
            }
            Expr::Local(l) => {
                let slot = self.local_slot(*l);
                self.read_slot(&slot, ty)
            }
            Expr::TemplateParam(_) => {
                return Err(JitError::Unsupported {
                    kernel: self.kernel_name.clone(),
                    what: "a template parameter in an uninstantiated template".into(),
                })
            }
            Expr::Builtin(b) => Ev::Vals(vec![self.builtin(*b)]),
            Expr::Unary { op, arg } => {
                let a = self.expr(*arg)?.vals();
                let s = scalar_of(ty);
                Ev::Vals(a.iter().map(|x| self.unary(*op, s, x)).collect())
            }
            Expr::Binary { op, lhs, rhs } => {
                let s = scalar_of(self.ty(*lhs));
                match op {
                    BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
                        Ev::Vals(vec![self.short_circuit(*op, *lhs, *rhs)?])
                    }
                    _ => {
                        let mut ops = self.eval_ops(&[*lhs, *rhs])?.into_iter();
                        let a = ops.next().map(Ev::vals).unwrap_or_default();
                        let b = ops.next().map(Ev::vals).unwrap_or_default();
                        let (la, lb) = (
                            analysis::literal_int(f, *lhs),
                            analysis::literal_int(f, *rhs),
                        );
                        let mut out = Vec::new();
                        for (x, y) in a.iter().zip(&b) {
                            out.push(self.binary(*op, s, x, y, la, lb, span)?);
                        }
                        Ev::Vals(out)
                    }
                }
            }
            Expr::Cast { to, arg } => {
                let from = scalar_of(self.ty(*arg));
                let a = self.expr(*arg)?.vals();
                Ev::Vals(a.iter().map(|x| self.cast(from, *to, x)).collect())
            }
            Expr::Bitcast { to, arg } => {
                let from_t = self.ty(*arg);
                let a = self.expr(*arg)?.vals();
                Ev::Vals(self.bitcast(from_t, *to, &a))
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let mut ops = self.eval_ops(&[*cond, *accept, *reject])?.into_iter();
                let c = ops.next().map(Ev::vals).unwrap_or_default();
                let a = ops.next().map(Ev::vals).unwrap_or_default();
                let r = ops.next().map(Ev::vals).unwrap_or_default();
                let s = scalar_of(ty);
                let mut out = Vec::new();
                for i in 0..a.len() {
                    let ci = if c.len() == 1 { &c[0] } else { &c[i] };
                    out.push(self.select(s, ci, &a[i], &r[i]));
                }
                Ev::Vals(out)
            }
            Expr::Compose { parts, .. } => {
                let mut out = Vec::new();
                for ev in self.eval_ops(parts)? {
                    out.extend(ev.vals());
                }
                Ev::Vals(out)
            }
            Expr::Splat { lanes, value } => {
                let v = self.expr(*value)?.vals().remove(0);
                Ev::Vals(vec![v; *lanes as usize])
            }
            Expr::Extract { vector, lane } => {
                let v = self.expr(*vector)?.vals();
                Ev::Vals(vec![v[*lane as usize].clone()])
            }
            Expr::Swizzle { vector, lanes } => {
                let v = self.expr(*vector)?.vals();
                Ev::Vals(lanes.iter().map(|&l| v[l as usize].clone()).collect())
            }
            Expr::Index { base, index } => {
                let i = self.expr(*index)?.vals().remove(0);
                Ev::Vals(self.load_elem(*base, &i, span, 1)?)
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let i = self.expr(*index)?.vals().remove(0);
                let s = scalar_of(ty);
                self.check_align(&i, s, *align, span);
                Ev::Vals(self.load_elem(*base, &i, span, *lanes as u32)?)
            }
            Expr::Len(i) => {
                let len = match self.kparams[*i as usize] {
                    KParam::Buf { off, .. } => self.buf_ref(off).1,
                    KParam::Val(_) => self.b.ins().iconst(types::I64, 0),
                };
                let max = self.b.ins().iconst(types::I64, u32::MAX as i64);
                let c = self.b.ins().umin(len, max);
                Ev::Vals(vec![Val::U(self.b.ins().ireduce(types::I32, c))])
            }
            Expr::Call { function, args } => self.call_helper(*function, args)?,
            Expr::Tag { index, .. } => {
                Ev::Vals(vec![Val::U(self.b.ins().iconst(types::I32, *index as i64))])
            }
            Expr::Dispatch { tag, args } => self.dispatch(*tag, args, ty)?,
            Expr::Math { fun, args } => {
                let vs: Vec<Vec<Val>> = self.eval_ops(args)?.into_iter().map(Ev::vals).collect();
                let s = scalar_of(ty);
                let mut out = Vec::new();
                for c in 0..vs[0].len() {
                    let ops: Vec<Val> = vs.iter().map(|v| v[c].clone()).collect();
                    out.push(self.math(*fun, s, &ops));
                }
                Ev::Vals(out)
            }
            Expr::Atomic {
                op,
                place,
                value,
                compare,
                ..
            } => Ev::Vals(vec![self.atomic(*op, place, *value, *compare, ty, span)?]),
            Expr::Wave { op, args } => {
                let vs: Vec<Vec<Val>> = self.eval_ops(args)?.into_iter().map(Ev::vals).collect();
                let s = if args.is_empty() {
                    Scalar::Bool
                } else {
                    scalar_of(self.ty(args[0]))
                };
                Ev::Vals(self.wave(*op, s, &vs, span)?)
            }
            Expr::MatrixFill {
                rows,
                cols,
                value,
                scalar,
                ..
            } => {
                let v = self.expr(*value)?.vals().remove(0);
                let x = self.first_active(*scalar, &v);
                let raw = self.lane_to_u64(*scalar, x);
                let n = *rows as u32 * *cols as u32;
                let off = self.alloc_state(n as u64 * 8);
                let p = self.b.ins().iadd_imm_s(self.state, off as i64);
                for i in 0..n {
                    self.b.ins().store(notrap(), raw, p, (i * 8) as i32);
                }
                Ev::Mat(p)
            }
            Expr::MatrixLoad {
                rows,
                cols,
                base,
                offset,
                stride,
                ..
            } => {
                let n = *rows as u32 * *cols as u32;
                let off = self.alloc_state(n as u64 * 8);
                let p = self.b.ins().iadd_imm_s(self.state, off as i64);
                self.matrix_io(p, ty, *base, *offset, *stride, false, span)?;
                Ev::Mat(p)
            }
            Expr::MatrixMma { a, b, c } => {
                let (ta, tc) = (self.ty(*a), self.ty(*c));
                let pa = self.expr(*a)?;
                let pb = self.expr(*b)?;
                let pc = self.expr(*c)?;
                let (Ev::Mat(pa), Ev::Mat(pb), Ev::Mat(pc)) = (pa, pb, pc) else {
                    return Err(self.internal("matrix_mma of non-fragments"));
                };
                let (
                    Type::Matrix {
                        scalar: sa,
                        rows: m,
                        cols: k,
                        ..
                    },
                    Type::Matrix {
                        scalar: sc,
                        cols: nn,
                        ..
                    },
                ) = (ta, tc)
                else {
                    return Err(self.internal("matrix_mma types"));
                };
                let n = m as u32 * nn as u32;
                let off = self.alloc_state(n as u64 * 8);
                let d = self.b.ins().iadd_imm_s(self.state, off as i64);
                let dims = m as u64 | (nn as u64) << 16 | (k as u64) << 32;
                let dims = self.b.ins().iconst(types::I64, dims as i64);
                let codes = super::rt::code_of(sa) | super::rt::code_of(sc) << 8;
                let codes = self.b.ins().iconst(types::I32, codes as i64);
                self.call(
                    "xpu_matrix_mma",
                    &[
                        types::I64,
                        types::I64,
                        types::I64,
                        types::I64,
                        types::I64,
                        types::I32,
                    ],
                    &[],
                    &[d, pa, pb, pc, dims, codes],
                );
                Ev::Mat(d)
            }
        };
        // Keep the class the analysis promised (the lowering may know less).
        if let (Ev::Vals(vs), Some(s)) = (
            &ev,
            ty.scalar()
                .or(matches!(ty, Type::Tag(_)).then_some(Scalar::U32)),
        ) {
            let fixed: Vec<Val> = vs
                .iter()
                .map(|v| match (class, v) {
                    (Class::Varying, Val::U(_) | Val::A(..)) => Val::V(self.materialize(s, v)),
                    _ => v.clone(),
                })
                .collect();
            return Ok(Ev::Vals(fixed));
        }
        Ok(ev)
    }

    fn lane_to_u64(&mut self, s: Scalar, x: Value) -> Value {
        match s {
            Scalar::F32 => {
                let i = self.b.ins().bitcast(types::I32, le(), x);
                self.b.ins().uextend(types::I64, i)
            }
            Scalar::F64 => self.b.ins().bitcast(types::I64, le(), x),
            Scalar::I64 | Scalar::U64 => x,
            s if s.is_signed() => self.b.ins().sextend(types::I64, x),
            _ => self.b.ins().uextend(types::I64, x),
        }
    }

    fn builtin(&mut self, b: Builtin) -> Val {
        match b {
            Builtin::LocalId(d) => self.local_ids[d.index()].clone(),
            Builtin::GlobalId(crate::ir::Dim::X) if self.flat_base.is_some() => {
                Val::A(self.flat_base.expect("checked"), 1)
            }
            Builtin::GlobalId(d) => {
                let i = d.index();
                let gs = self.b.ins().imul(self.group[i], self.bdim[i]);
                let l = self.local_ids[i].clone();
                self.arith(BinaryOp::Add, Scalar::U32, &Val::U(gs), &l, None, None)
            }
            Builtin::GroupId(d) => Val::U(self.group[d.index()]),
            Builtin::GroupSize(d) => Val::U(self.bdim[d.index()]),
            Builtin::NumGroups(d) => Val::U(self.ngroups[d.index()]),
            Builtin::WaveWidth => Val::U(self.b.ins().iconst(types::I32, self.n as i64)),
            Builtin::LaneId => {
                let z = self.b.ins().iconst(types::I32, 0);
                Val::A(z, 1)
            }
        }
    }

    fn short_circuit(&mut self, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> Result<Val, JitError> {
        let a = self.expr(lhs)?.vals().remove(0);
        let is_and = op == BinaryOp::LogicalAnd;
        match a {
            Val::U(a) => {
                // The right side runs only when needed, as a real branch.
                let rb = self.b.create_block();
                let join = self.b.create_block();
                let rclass = self.frame().an.expr(rhs);
                let uniform = rclass == Class::Uniform;
                let pty = if uniform { types::I8 } else { types::I32X4 };
                let np = if uniform {
                    1
                } else {
                    chunks(Scalar::Bool, self.n) as usize
                };
                for _ in 0..np {
                    self.b.append_block_param(join, pty);
                }
                let short: Vec<Value> = if uniform {
                    vec![a]
                } else {
                    self.splat(Scalar::Bool, a)
                };
                let args: Vec<cranelift_codegen::ir::BlockArg> =
                    short.iter().map(|&v| v.into()).collect();
                if is_and {
                    self.b.ins().brif(a, rb, &[], join, &args);
                } else {
                    self.b.ins().brif(a, join, &args, rb, &[]);
                }
                self.b.switch_to_block(rb);
                let r = self.expr(rhs)?.vals().remove(0);
                let rv: Vec<Value> = match &r {
                    Val::U(x) if uniform => vec![*x],
                    _ => self.bool_mask(&r),
                };
                let args: Vec<cranelift_codegen::ir::BlockArg> =
                    rv.iter().map(|&v| v.into()).collect();
                self.b.ins().jump(join, &args);
                self.b.switch_to_block(join);
                let ps = self.b.block_params(join).to_vec();
                Ok(if uniform { Val::U(ps[0]) } else { Val::V(ps) })
            }
            a => {
                // Lanes that need the right side evaluate it under their own mask.
                let am = self.bool_mask(&a);
                let save = self.exec();
                let need = if is_and {
                    self.mask_and(&save, &am)
                } else {
                    self.mask_andnot(&save, &am)
                };
                let res = self.mask_vars();
                self.def_vars(&res, &am);
                let saved = self.mask_vars();
                self.def_vars(&saved, &save);
                let known = self.known;
                let any = self.mask_any(&need);
                let rb = self.b.create_block();
                let join = self.b.create_block();
                self.b.ins().brif(any, rb, &[], join, &[]);
                self.b.switch_to_block(rb);
                self.set_exec(&need);
                let r = self.expr(rhs)?.vals().remove(0);
                let rm = self.bool_mask(&r);
                // and: a & r ; or: a | (need & r)
                let cur = self.use_vars(&res);
                let nr = self.mask_and(&need, &rm);
                let v = if is_and {
                    let keep = self.mask_andnot(&cur, &need);
                    self.mask_or(&keep, &nr)
                } else {
                    self.mask_or(&cur, &nr)
                };
                self.def_vars(&res, &v);
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
                let s = self.use_vars(&saved);
                self.set_exec(&s);
                self.known = known;
                Ok(Val::V(self.use_vars(&res)))
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, s: Scalar, a: &Val) -> Val {
        let class = analysis::unary_class(op, s, false, class_of(a));
        if let (UnaryOp::Neg, Val::A(b, k), Class::Affine(_)) = (op, a, class) {
            return Val::A(self.b.ins().ineg(*b), k.wrapping_neg());
        }
        let f = |me: &mut Self, x: Value, vector: bool| -> Value {
            match (op, s) {
                (UnaryOp::Not, Scalar::Bool) => {
                    if vector {
                        me.b.ins().bnot(x)
                    } else {
                        me.b.ins().bxor_imm_s(x, 1)
                    }
                }
                (UnaryOp::Not, _) => me.b.ins().bnot(x),
                (UnaryOp::Neg, Scalar::F16) => {
                    if vector {
                        let k = me.b.ins().iconst(types::I16, 0x8000u16 as i16 as i64);
                        let k = me.b.ins().splat(types::I16X8, k);
                        me.b.ins().bxor(x, k)
                    } else {
                        me.b.ins().bxor_imm_s(x, 0x8000u16 as i16 as i64)
                    }
                }
                (UnaryOp::Neg, s) if s.is_float() => me.b.ins().fneg(x),
                (UnaryOp::Neg, _) => me.b.ins().ineg(x),
            }
        };
        match a {
            Val::U(x) => Val::U(f(self, *x, false)),
            _ => {
                let c = self.materialize(s, a);
                Val::V(c.iter().map(|&x| f(self, x, true)).collect())
            }
        }
    }

    /// `+ - *` and the others that never trap, with affine bookkeeping.
    fn arith(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        a: &Val,
        b: &Val,
        la: Option<i64>,
        lb: Option<i64>,
    ) -> Val {
        let class = analysis::binary_class(op, s, false, class_of(a), class_of(b), la, lb);
        if let Class::Affine(k) = class {
            let base = |v: &Val| match v {
                Val::U(x) | Val::A(x, _) => *x,
                Val::V(_) => unreachable!("affine operands"),
            };
            let (ba, bb) = (base(a), base(b));
            let nb = match op {
                BinaryOp::Add => self.b.ins().iadd(ba, bb),
                BinaryOp::Sub => self.b.ins().isub(ba, bb),
                BinaryOp::Mul => self.b.ins().imul(ba, bb),
                BinaryOp::Shl => {
                    let m = self.b.ins().band_imm_u(bb, (s.bits() - 1) as i64);
                    self.b.ins().ishl(ba, m)
                }
                _ => unreachable!("affine op"),
            };
            return Val::A(nb, k);
        }
        if let (Val::U(x), Val::U(y)) = (a, b) {
            return Val::U(self.scalar_bin(op, s, *x, *y));
        }
        // Shifts by a uniform amount stay vector ops.
        if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
            if let Val::U(y) = b {
                let m = self.b.ins().band_imm_u(*y, (s.bits() - 1) as i64);
                let ca = self.materialize(s, a);
                let r: Vec<Value> = ca
                    .iter()
                    .map(|&x| match op {
                        BinaryOp::Shl => self.b.ins().ishl(x, m),
                        _ if s.is_signed() => self.b.ins().sshr(x, m),
                        _ => self.b.ins().ushr(x, m),
                    })
                    .collect();
                return Val::V(r);
            }
            return self.map_lanes(s, &[(s, a), (s, b)], |me, v| {
                me.scalar_bin(op, s, v[0], v[1])
            });
        }
        let vector_ok = match s {
            Scalar::F16 => false,
            Scalar::F32 | Scalar::F64 => op != BinaryOp::Rem,
            Scalar::I8 | Scalar::U8 => op != BinaryOp::Mul,
            _ => true,
        };
        if !vector_ok {
            return self.map_lanes(s, &[(s, a), (s, b)], |me, v| {
                me.scalar_bin(op, s, v[0], v[1])
            });
        }
        let ca = self.materialize(s, a);
        let cb = self.materialize(s, b);
        let r: Vec<Value> = ca
            .iter()
            .zip(&cb)
            .map(|(&x, &y)| match (op, s.is_float()) {
                (BinaryOp::Add, false) => self.b.ins().iadd(x, y),
                (BinaryOp::Sub, false) => self.b.ins().isub(x, y),
                (BinaryOp::Mul, false) => self.b.ins().imul(x, y),
                (BinaryOp::Add, true) => self.b.ins().fadd(x, y),
                (BinaryOp::Sub, true) => self.b.ins().fsub(x, y),
                (BinaryOp::Mul, true) => self.b.ins().fmul(x, y),
                (BinaryOp::Div, true) => self.b.ins().fdiv(x, y),
                (BinaryOp::BitAnd, _) => self.b.ins().band(x, y),
                (BinaryOp::BitOr, _) => self.b.ins().bor(x, y),
                (BinaryOp::BitXor, _) => self.b.ins().bxor(x, y),
                _ => x,
            })
            .collect();
        Val::V(r)
    }

    /// One scalar operation on uniform representations.
    fn scalar_bin(&mut self, op: BinaryOp, s: Scalar, x: Value, y: Value) -> Value {
        use BinaryOp as B;
        if s == Scalar::F16 {
            use super::rt::f16op;
            let code = match op {
                B::Add => f16op::ADD,
                B::Sub => f16op::SUB,
                B::Mul => f16op::MUL,
                B::Div => f16op::DIV,
                B::Rem => f16op::REM,
                B::Eq => f16op::EQ,
                B::Ne => f16op::NE,
                B::Lt => f16op::LT,
                B::Le => f16op::LE,
                B::Gt => f16op::GT,
                B::Ge => f16op::GE,
                _ => f16op::ADD,
            };
            let c = self.b.ins().iconst(types::I32, code as i64);
            let xa = self.b.ins().uextend(types::I32, x);
            let ya = self.b.ins().uextend(types::I32, y);
            let r = self
                .call("xpu_f16_op", &[types::I32; 3], &[types::I32], &[c, xa, ya])
                .expect("r");
            return self.b.ins().ireduce(
                if op.is_comparison() {
                    types::I8
                } else {
                    types::I16
                },
                r,
            );
        }
        if s.is_float() {
            return match op {
                B::Add => self.b.ins().fadd(x, y),
                B::Sub => self.b.ins().fsub(x, y),
                B::Mul => self.b.ins().fmul(x, y),
                B::Div => self.b.ins().fdiv(x, y),
                B::Rem => {
                    let (name, t) = if s == Scalar::F32 {
                        ("xpu_fmod_f32", types::F32)
                    } else {
                        ("xpu_fmod_f64", types::F64)
                    };
                    self.call(name, &[t, t], &[t], &[x, y]).expect("r")
                }
                B::Eq => self.b.ins().fcmp(FloatCC::Equal, x, y),
                B::Ne => self.b.ins().fcmp(FloatCC::NotEqual, x, y),
                B::Lt => self.b.ins().fcmp(FloatCC::LessThan, x, y),
                B::Le => self.b.ins().fcmp(FloatCC::LessThanOrEqual, x, y),
                B::Gt => self.b.ins().fcmp(FloatCC::GreaterThan, x, y),
                B::Ge => self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, y),
                _ => x,
            };
        }
        let signed = s.is_signed();
        match op {
            B::Add => self.b.ins().iadd(x, y),
            B::Sub => self.b.ins().isub(x, y),
            B::Mul => self.b.ins().imul(x, y),
            B::BitAnd | B::LogicalAnd => self.b.ins().band(x, y),
            B::BitOr | B::LogicalOr => self.b.ins().bor(x, y),
            B::BitXor => self.b.ins().bxor(x, y),
            B::Shl => {
                let m = self.b.ins().band_imm_u(y, (s.bits() - 1) as i64);
                self.b.ins().ishl(x, m)
            }
            B::Shr => {
                let m = self.b.ins().band_imm_u(y, (s.bits() - 1) as i64);
                if signed {
                    self.b.ins().sshr(x, m)
                } else {
                    self.b.ins().ushr(x, m)
                }
            }
            B::Eq => self.b.ins().icmp(IntCC::Equal, x, y),
            B::Ne => self.b.ins().icmp(IntCC::NotEqual, x, y),
            B::Lt => self.b.ins().icmp(
                if signed {
                    IntCC::SignedLessThan
                } else {
                    IntCC::UnsignedLessThan
                },
                x,
                y,
            ),
            B::Le => self.b.ins().icmp(
                if signed {
                    IntCC::SignedLessThanOrEqual
                } else {
                    IntCC::UnsignedLessThanOrEqual
                },
                x,
                y,
            ),
            B::Gt => self.b.ins().icmp(
                if signed {
                    IntCC::SignedGreaterThan
                } else {
                    IntCC::UnsignedGreaterThan
                },
                x,
                y,
            ),
            B::Ge => self.b.ins().icmp(
                if signed {
                    IntCC::SignedGreaterThanOrEqual
                } else {
                    IntCC::UnsignedGreaterThanOrEqual
                },
                x,
                y,
            ),
            B::Div | B::Rem => x,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn binary(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        a: &Val,
        b: &Val,
        la: Option<i64>,
        lb: Option<i64>,
        span: Span,
    ) -> Result<Val, JitError> {
        if op.is_comparison() {
            return Ok(self.compare(op, s, a, b));
        }
        if matches!(op, BinaryOp::Div | BinaryOp::Rem) && s.is_int() {
            return Ok(self.int_div(op == BinaryOp::Rem, s, a, b, span));
        }
        if s == Scalar::Bool {
            // Bool & | ^ (and == != above).
            return Ok(match (a, b) {
                (Val::U(x), Val::U(y)) => Val::U(self.scalar_bin(op, s, *x, *y)),
                _ => {
                    let ca = self.bool_mask(a);
                    let cb = self.bool_mask(b);
                    let r = ca
                        .iter()
                        .zip(&cb)
                        .map(|(&x, &y)| match op {
                            BinaryOp::BitAnd => self.b.ins().band(x, y),
                            BinaryOp::BitOr => self.b.ins().bor(x, y),
                            _ => self.b.ins().bxor(x, y),
                        })
                        .collect();
                    Val::V(r)
                }
            });
        }
        Ok(self.arith(op, s, a, b, la, lb))
    }

    fn compare(&mut self, op: BinaryOp, s: Scalar, a: &Val, b: &Val) -> Val {
        if let (Val::U(x), Val::U(y)) = (a, b) {
            if s == Scalar::Bool {
                let r = match op {
                    BinaryOp::Eq => self.b.ins().icmp(IntCC::Equal, *x, *y),
                    _ => self.b.ins().icmp(IntCC::NotEqual, *x, *y),
                };
                return Val::U(r);
            }
            return Val::U(self.scalar_bin(op, s, *x, *y));
        }
        if s == Scalar::Bool {
            let ca = self.bool_mask(a);
            let cb = self.bool_mask(b);
            let r = ca
                .iter()
                .zip(&cb)
                .map(|(&x, &y)| {
                    let d = self.b.ins().bxor(x, y);
                    if op == BinaryOp::Eq {
                        self.b.ins().bnot(d)
                    } else {
                        d
                    }
                })
                .collect();
            return Val::V(r);
        }
        if s == Scalar::F16 {
            return self.map_lanes(Scalar::Bool, &[(s, a), (s, b)], |me, v| {
                me.scalar_bin(op, s, v[0], v[1])
            });
        }
        let ca = self.materialize(s, a);
        let cb = self.materialize(s, b);
        let signed = s.is_signed();
        let r: Vec<Value> = ca
            .iter()
            .zip(&cb)
            .map(|(&x, &y)| {
                if s.is_float() {
                    let cc = match op {
                        BinaryOp::Eq => FloatCC::Equal,
                        BinaryOp::Ne => FloatCC::NotEqual,
                        BinaryOp::Lt => FloatCC::LessThan,
                        BinaryOp::Le => FloatCC::LessThanOrEqual,
                        BinaryOp::Gt => FloatCC::GreaterThan,
                        _ => FloatCC::GreaterThanOrEqual,
                    };
                    self.b.ins().fcmp(cc, x, y)
                } else {
                    let cc = match (op, signed) {
                        (BinaryOp::Eq, _) => IntCC::Equal,
                        (BinaryOp::Ne, _) => IntCC::NotEqual,
                        (BinaryOp::Lt, true) => IntCC::SignedLessThan,
                        (BinaryOp::Lt, false) => IntCC::UnsignedLessThan,
                        (BinaryOp::Le, true) => IntCC::SignedLessThanOrEqual,
                        (BinaryOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
                        (BinaryOp::Gt, true) => IntCC::SignedGreaterThan,
                        (BinaryOp::Gt, false) => IntCC::UnsignedGreaterThan,
                        (_, true) => IntCC::SignedGreaterThanOrEqual,
                        (_, false) => IntCC::UnsignedGreaterThanOrEqual,
                    };
                    self.b.ins().icmp(cc, x, y)
                }
            })
            .collect();
        Val::V(self.geom_mask(s, &r))
    }

    /// The value of an integer constant (`iconst`), if `v` is one.
    fn const_of(&self, v: Value) -> Option<i64> {
        let inst = self.b.func.dfg.value_def(v).inst()?;
        match self.b.func.dfg.insts[inst] {
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    /// Integer `/` and `%`: per lane; a zero divisor in an active lane fails the launch. An
    /// unsigned division by a constant power of two (`i / wave_width`, `i % 32`) is a vector
    /// shift or mask instead.
    fn int_div(&mut self, rem: bool, s: Scalar, a: &Val, b: &Val, span: Span) -> Val {
        let pow2 = match b {
            Val::U(y) if !s.is_signed() && !matches!(a, Val::U(_)) => self
                .const_of(*y)
                .map(|c| c as u64 & (u64::MAX >> (64 - s.bits())))
                .filter(|c| c.is_power_of_two()),
            _ => None,
        };
        if let Some(c) = pow2 {
            let xs = self.materialize(s, a);
            let mask = if rem {
                let m = self.b.ins().iconst(uty(s), (c - 1) as i64);
                Some(self.b.ins().splat(vty(s), m))
            } else {
                None
            };
            return Val::V(
                xs.iter()
                    .map(|&x| match mask {
                        Some(m) => self.b.ins().band(x, m),
                        None => self.b.ins().ushr_imm_u(x, c.trailing_zeros() as i64),
                    })
                    .collect(),
            );
        }
        let site = self.add_site(span, "integer division".into());
        let t = uty(s);
        let zero_l = self.b.ins().iconst(types::I64, 0);
        let one = self.b.ins().iconst(t, 1);
        let m1 = self.b.ins().iconst(t, -1);
        let zero = self.b.ins().iconst(t, 0);
        let op1 = |me: &mut Self, x: Value, y: Value| -> Value {
            // A zero divisor (inactive lane) divides by one; MIN / -1 wraps, MIN % -1 is 0.
            let is0 = me.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
            let y1 = me.b.ins().select(is0, one, y);
            if s.is_signed() {
                let ism1 = me.b.ins().icmp(IntCC::Equal, y1, m1);
                let y2 = me.b.ins().select(ism1, one, y1);
                if rem {
                    let r = me.b.ins().srem(x, y2);
                    me.b.ins().select(ism1, zero, r)
                } else {
                    let q = me.b.ins().sdiv(x, y2);
                    let nx = me.b.ins().ineg(x);
                    me.b.ins().select(ism1, nx, q)
                }
            } else if rem {
                me.b.ins().urem(x, y1)
            } else {
                me.b.ins().udiv(x, y1)
            }
        };
        match (a, b) {
            (Val::U(x), Val::U(y)) => {
                let is0 = self.b.ins().icmp_imm_s(IntCC::Equal, *y, 0);
                self.check(is0, err::DIV_ZERO, site, |_| zero_l, zero_l);
                Val::U(op1(self, *x, *y))
            }
            _ => {
                let e = self.exec();
                let bits = self.mask_bits(&e);
                let yl = self.lanes(s, b);
                let mut bad_any = self.b.ins().iconst(types::I8, 0);
                for (l, &y) in yl.iter().enumerate() {
                    let is0 = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                    let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                    let bit = self.b.ins().band_imm_u(bit, 1);
                    let act = self.b.ins().ireduce(types::I8, bit);
                    let bad = self.b.ins().band(is0, act);
                    bad_any = self.b.ins().bor(bad_any, bad);
                }
                self.check(bad_any, err::DIV_ZERO, site, |_| zero_l, zero_l);
                self.map_lanes(s, &[(s, a), (s, b)], |me, v| op1(me, v[0], v[1]))
            }
        }
    }

    fn select(&mut self, s: Scalar, c: &Val, a: &Val, r: &Val) -> Val {
        match c {
            Val::U(c) => match (a, r) {
                (Val::U(x), Val::U(y)) => Val::U(self.b.ins().select(*c, *x, *y)),
                _ => {
                    let ca = self.materialize(s, a);
                    let cr = self.materialize(s, r);
                    Val::V(
                        ca.iter()
                            .zip(&cr)
                            .map(|(&x, &y)| self.b.ins().select(*c, x, y))
                            .collect(),
                    )
                }
            },
            c => {
                let m = self.bool_mask(c);
                let ca = self.materialize(s, a);
                let cr = self.materialize(s, r);
                let mg = self.mask_geom(s, &m);
                Val::V(
                    (0..ca.len())
                        .map(|i| {
                            if s == Scalar::Bool {
                                self.b.ins().bitselect(m[i], ca[i], cr[i])
                            } else {
                                self.b.ins().bitselect(mg[i], ca[i], cr[i])
                            }
                        })
                        .collect(),
                )
            }
        }
    }

    /// Scalar conversion on uniform representations.
    fn scalar_cast(&mut self, from: Scalar, to: Scalar, x: Value) -> Value {
        if from == to {
            return x;
        }
        if to == Scalar::Bool {
            return match from {
                Scalar::F32 => {
                    let z = self.b.ins().f32const(0.0);
                    self.b.ins().fcmp(FloatCC::NotEqual, x, z)
                }
                Scalar::F64 => {
                    let z = self.b.ins().f64const(0.0);
                    self.b.ins().fcmp(FloatCC::NotEqual, x, z)
                }
                Scalar::F16 => {
                    let m = self.b.ins().band_imm_u(x, 0x7fff);
                    self.b.ins().icmp_imm_s(IntCC::NotEqual, m, 0)
                }
                _ => self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
            };
        }
        if from == Scalar::Bool {
            return match to {
                Scalar::F32 => {
                    let i = self.b.ins().uextend(types::I32, x);
                    self.b.ins().fcvt_from_uint(types::F32, i)
                }
                Scalar::F64 => {
                    let i = self.b.ins().uextend(types::I32, x);
                    self.b.ins().fcvt_from_uint(types::F64, i)
                }
                Scalar::F16 => {
                    let one = self.b.ins().iconst(types::I16, 0x3c00);
                    let z = self.b.ins().iconst(types::I16, 0);
                    self.b.ins().select(x, one, z)
                }
                _ => self.int_resize(Scalar::U8, to, x),
            };
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => self.int_resize(from, to, x),
            (false, true) => {
                if to == Scalar::F16 {
                    let w = self.int_resize(
                        from,
                        if from.is_signed() {
                            Scalar::I64
                        } else {
                            Scalar::U64
                        },
                        x,
                    );
                    let name = if from.is_signed() {
                        "xpu_i64_to_f16"
                    } else {
                        "xpu_u64_to_f16"
                    };
                    let r = self
                        .call(name, &[types::I64], &[types::I32], &[w])
                        .expect("r");
                    return self.b.ins().ireduce(types::I16, r);
                }
                let wide = if from.bits() < 32 {
                    self.int_resize(
                        from,
                        if from.is_signed() {
                            Scalar::I32
                        } else {
                            Scalar::U32
                        },
                        x,
                    )
                } else {
                    x
                };
                if from.is_signed() {
                    self.b.ins().fcvt_from_sint(uty(to), wide)
                } else {
                    self.b.ins().fcvt_from_uint(uty(to), wide)
                }
            }
            (true, false) => {
                let xf = if from == Scalar::F16 {
                    let a = self.b.ins().uextend(types::I32, x);
                    self.call("xpu_f16_to_f64", &[types::I32], &[types::F64], &[a])
                        .expect("r")
                } else {
                    x
                };
                match to.bits() {
                    64 => {
                        if to.is_signed() {
                            self.b.ins().fcvt_to_sint_sat(types::I64, xf)
                        } else {
                            self.b.ins().fcvt_to_uint_sat(types::I64, xf)
                        }
                    }
                    32 => {
                        if to.is_signed() {
                            self.b.ins().fcvt_to_sint_sat(types::I32, xf)
                        } else {
                            self.b.ins().fcvt_to_uint_sat(types::I32, xf)
                        }
                    }
                    _ => {
                        // Saturate through i32, then clamp to the narrow range.
                        let i = self.b.ins().fcvt_to_sint_sat(types::I32, xf);
                        let (lo, hi) = match to {
                            Scalar::I8 => (-128i64, 127i64),
                            Scalar::U8 => (0, 255),
                            Scalar::I16 => (-32768, 32767),
                            _ => (0, 65535),
                        };
                        let lo = self.b.ins().iconst(types::I32, lo);
                        let hi = self.b.ins().iconst(types::I32, hi);
                        let c = self.b.ins().smax(i, lo);
                        let c = self.b.ins().smin(c, hi);
                        self.b.ins().ireduce(uty(to), c)
                    }
                }
            }
            (true, true) => match (from, to) {
                (Scalar::F32, Scalar::F64) => self.b.ins().fpromote(types::F64, x),
                (Scalar::F64, Scalar::F32) => self.b.ins().fdemote(types::F32, x),
                (Scalar::F16, _) => {
                    let a = self.b.ins().uextend(types::I32, x);
                    let d = self
                        .call("xpu_f16_to_f64", &[types::I32], &[types::F64], &[a])
                        .expect("r");
                    if to == Scalar::F32 {
                        self.b.ins().fdemote(types::F32, d)
                    } else {
                        d
                    }
                }
                (Scalar::F32, _) => {
                    let r = self
                        .call("xpu_f32_to_f16", &[types::F32], &[types::I32], &[x])
                        .expect("r");
                    self.b.ins().ireduce(types::I16, r)
                }
                _ => {
                    let r = self
                        .call("xpu_f64_to_f16", &[types::F64], &[types::I32], &[x])
                        .expect("r");
                    self.b.ins().ireduce(types::I16, r)
                }
            },
        }
    }

    fn int_resize(&mut self, from: Scalar, to: Scalar, x: Value) -> Value {
        let (ft, tt) = (uty(from), uty(to));
        if ft == tt {
            x
        } else if ft.bits() > tt.bits() {
            self.b.ins().ireduce(tt, x)
        } else if from.is_signed() {
            self.b.ins().sextend(tt, x)
        } else {
            self.b.ins().uextend(tt, x)
        }
    }

    fn cast(&mut self, from: Scalar, to: Scalar, a: &Val) -> Val {
        let class = analysis::cast_class(from, to, false, class_of(a));
        if let (Val::A(b, k), Class::Affine(_)) = (a, class) {
            return Val::A(*b, *k);
        }
        match a {
            Val::U(x) => Val::U(self.scalar_cast(from, to, *x)),
            _ => {
                if from == to {
                    return Val::V(self.materialize(from, a));
                }
                // Vector forms for the common 32-bit conversions.
                let c = self.materialize(from, a);
                match (from, to) {
                    (Scalar::I32, Scalar::U32) | (Scalar::U32, Scalar::I32) => return Val::V(c),
                    (Scalar::I32, Scalar::F32) => {
                        return Val::V(
                            c.iter()
                                .map(|&x| self.b.ins().fcvt_from_sint(types::F32X4, x))
                                .collect(),
                        )
                    }
                    (Scalar::U32, Scalar::F32) => {
                        return Val::V(
                            c.iter()
                                .map(|&x| self.b.ins().fcvt_from_uint(types::F32X4, x))
                                .collect(),
                        )
                    }
                    (Scalar::F32, Scalar::I32) => {
                        return Val::V(
                            c.iter()
                                .map(|&x| self.b.ins().fcvt_to_sint_sat(types::I32X4, x))
                                .collect(),
                        )
                    }
                    (Scalar::F32, Scalar::U32) => {
                        return Val::V(
                            c.iter()
                                .map(|&x| self.b.ins().fcvt_to_uint_sat(types::I32X4, x))
                                .collect(),
                        )
                    }
                    _ => {}
                }
                let v = Val::V(c);
                self.map_lanes(to, &[(from, &v)], |me, x| me.scalar_cast(from, to, x[0]))
            }
        }
    }

    fn bitcast(&mut self, from_t: Type, to_t: Type, a: &[Val]) -> Vec<Val> {
        let fs = scalar_of(from_t);
        let ts = scalar_of(to_t);
        let (fc, tc) = (comps_of(from_t), comps_of(to_t));
        let conv = |me: &mut Self, x: Value, from: Scalar, to: Scalar| -> Value {
            let (ft, tt) = (uty(from), uty(to));
            if ft == tt {
                x
            } else {
                me.b.ins().bitcast(tt, le(), x)
            }
        };
        if fc == tc {
            return a
                .iter()
                .map(|v| match v {
                    Val::U(x) => Val::U(conv(self, *x, fs, ts)),
                    Val::A(b, k) if uty(fs) == uty(ts) => Val::A(*b, *k),
                    v => {
                        let c = self.materialize(fs, v);
                        if vty(fs) == vty(ts) {
                            Val::V(c)
                        } else if fs == Scalar::Bool || ts == Scalar::Bool {
                            let v = Val::V(c);
                            self.map_lanes(ts, &[(fs, &v)], |me, x| conv(me, x[0], fs, ts))
                        } else {
                            Val::V(
                                c.iter()
                                    .map(|&x| self.b.ins().bitcast(vty(ts), le(), x))
                                    .collect(),
                            )
                        }
                    }
                })
                .collect();
        }
        // Lane counts differ: go through a byte buffer per lane.
        let total = fc as u32 * fs.size();
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            total.max(8),
            4,
        ));
        let uniform = a.iter().all(|v| matches!(v, Val::U(_)));
        let nl = if uniform { 1 } else { self.n };
        let fl: Vec<Vec<Value>> = a
            .iter()
            .map(|v| {
                if uniform {
                    vec![match v {
                        Val::U(x) => *x,
                        _ => unreachable!(),
                    }]
                } else {
                    self.lanes(fs, v)
                }
            })
            .collect();
        let mut outs: Vec<Vec<Value>> = vec![Vec::new(); tc];
        for l in 0..nl as usize {
            for (c, lanes) in fl.iter().enumerate() {
                self.b
                    .ins()
                    .stack_store(types::I64, lanes[l], slot, (c as u32 * fs.size()) as i32);
            }
            for (c, out) in outs.iter_mut().enumerate() {
                let v = self.b.ins().stack_load(
                    types::I64,
                    uty(ts),
                    slot,
                    (c as u32 * ts.size()) as i32,
                );
                out.push(v);
            }
        }
        outs.into_iter()
            .map(|o| {
                if uniform {
                    Val::U(o[0])
                } else {
                    Val::V(self.pack_lanes(ts, &o))
                }
            })
            .collect()
    }

    fn math(&mut self, fun: MathFn, s: Scalar, ops: &[Val]) -> Val {
        let uniform = ops.iter().all(|v| matches!(v, Val::U(_)));
        // Vector forms where Cranelift has the instruction.
        if !uniform && matches!(s, Scalar::F32 | Scalar::F64) {
            let cs: Vec<Vec<Value>> = ops.iter().map(|v| self.materialize(s, v)).collect();
            let n = cs[0].len();
            let ok = match fun {
                MathFn::Sqrt
                | MathFn::Abs
                | MathFn::Floor
                | MathFn::Ceil
                | MathFn::Trunc
                | MathFn::Min
                | MathFn::Max
                | MathFn::Clamp
                | MathFn::Round => true,
                MathFn::Fma => self.cfg.fma,
                _ => false,
            };
            if ok {
                let r = (0..n)
                    .map(|i| {
                        let a: Vec<Value> = cs.iter().map(|c| c[i]).collect();
                        self.float_fn(fun, s, &a, true)
                    })
                    .collect();
                return Val::V(r);
            }
        }
        if !uniform && s.is_int() {
            let cs: Vec<Vec<Value>> = ops.iter().map(|v| self.materialize(s, v)).collect();
            let n = cs[0].len();
            let ok = matches!(fun, MathFn::Min | MathFn::Max | MathFn::Clamp)
                || (fun == MathFn::Abs && s.is_signed());
            if ok {
                let r = (0..n)
                    .map(|i| {
                        let a: Vec<Value> = cs.iter().map(|c| c[i]).collect();
                        self.int_fn(fun, s, &a)
                    })
                    .collect();
                return Val::V(r);
            }
        }
        let refs: Vec<(Scalar, &Val)> = ops.iter().map(|v| (s, v)).collect();
        if uniform {
            let xs: Vec<Value> = ops
                .iter()
                .map(|v| match v {
                    Val::U(x) => *x,
                    _ => unreachable!(),
                })
                .collect();
            return Val::U(self.scalar_math(fun, s, &xs));
        }
        self.map_lanes(s, &refs, |me, v| me.scalar_math(fun, s, v))
    }

    fn int_fn(&mut self, fun: MathFn, s: Scalar, a: &[Value]) -> Value {
        let signed = s.is_signed();
        let min = |me: &mut Self, x, y| {
            if signed {
                me.b.ins().smin(x, y)
            } else {
                me.b.ins().umin(x, y)
            }
        };
        let max = |me: &mut Self, x, y| {
            if signed {
                me.b.ins().smax(x, y)
            } else {
                me.b.ins().umax(x, y)
            }
        };
        match fun {
            MathFn::Min => min(self, a[0], a[1]),
            MathFn::Max => max(self, a[0], a[1]),
            MathFn::Clamp => {
                let m = max(self, a[0], a[1]);
                min(self, m, a[2])
            }
            MathFn::Abs => {
                if signed {
                    self.b.ins().iabs(a[0])
                } else {
                    a[0]
                }
            }
            _ => a[0],
        }
    }

    /// minimumNumber / maximumNumber: Cranelift's fmin/fmax propagate NaN (and order -0 < +0);
    /// a NaN operand yields the other.
    fn min_max_num(&mut self, is_min: bool, x: Value, y: Value) -> Value {
        let r = if is_min {
            self.b.ins().fmin(x, y)
        } else {
            self.b.ins().fmax(x, y)
        };
        let xn = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let yn = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        let ty = self.b.func.dfg.value_type(x);
        if ty.is_vector() {
            let xbits = self.b.ins().bitcast(ty, le(), xn);
            let r1 = self.b.ins().bitselect(xbits, y, r);
            let ybits = self.b.ins().bitcast(ty, le(), yn);
            self.b.ins().bitselect(ybits, x, r1)
        } else {
            let r1 = self.b.ins().select(xn, y, r);
            self.b.ins().select(yn, x, r1)
        }
    }

    fn float_fn(&mut self, fun: MathFn, s: Scalar, a: &[Value], _vector: bool) -> Value {
        match fun {
            MathFn::Sqrt => self.b.ins().sqrt(a[0]),
            MathFn::Abs => self.b.ins().fabs(a[0]),
            MathFn::Floor => self.b.ins().floor(a[0]),
            MathFn::Ceil => self.b.ins().ceil(a[0]),
            MathFn::Trunc => self.b.ins().trunc(a[0]),
            MathFn::Min => self.min_max_num(true, a[0], a[1]),
            MathFn::Max => self.min_max_num(false, a[0], a[1]),
            MathFn::Clamp => {
                let m = self.min_max_num(false, a[0], a[1]);
                self.min_max_num(true, m, a[2])
            }
            MathFn::Fma => self.b.ins().fma(a[0], a[1], a[2]),
            MathFn::Round => {
                // Half-way cases away from zero: trunc, then one more unit when the dropped
                // fraction is at least one half.
                let x = a[0];
                let ty = self.b.func.dfg.value_type(x);
                let t = self.b.ins().trunc(x);
                let d = self.b.ins().fsub(x, t);
                let ad = self.b.ins().fabs(d);
                let (half, one, zero) = if s == Scalar::F32 {
                    (
                        self.b.ins().f32const(0.5),
                        self.b.ins().f32const(1.0),
                        self.b.ins().f32const(0.0),
                    )
                } else {
                    (
                        self.b.ins().f64const(0.5),
                        self.b.ins().f64const(1.0),
                        self.b.ins().f64const(0.0),
                    )
                };
                let (half, one, zero) = if ty.is_vector() {
                    (
                        self.b.ins().splat(ty, half),
                        self.b.ins().splat(ty, one),
                        self.b.ins().splat(ty, zero),
                    )
                } else {
                    (half, one, zero)
                };
                // copysign(1, x) by bits (Cranelift has no vector fcopysign on x86).
                let ity = ty.as_int();
                let xi = self.b.ins().bitcast(ity, le(), x);
                let oi = self.b.ins().bitcast(ity, le(), one);
                let sm = if s == Scalar::F32 {
                    0x8000_0000u64
                } else {
                    0x8000_0000_0000_0000u64
                };
                let sm = if ty.is_vector() {
                    let c = self.b.ins().iconst(ity.lane_type(), sm as i64);
                    self.b.ins().splat(ity, c)
                } else {
                    self.b.ins().iconst(ity, sm as i64)
                };
                let sb = self.b.ins().band(xi, sm);
                let si = self.b.ins().bor(oi, sb);
                let sign = self.b.ins().bitcast(ty, le(), si);
                let ge = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, ad, half);
                let _ = zero;
                // trunc itself when no step is due (keeps -0.0 for -0.3).
                let up = self.b.ins().fadd(t, sign);
                if ty.is_vector() {
                    let m = self.b.ins().bitcast(ty, le(), ge);
                    self.b.ins().bitselect(m, up, t)
                } else {
                    self.b.ins().select(ge, up, t)
                }
            }
            _ => a[0],
        }
    }

    fn scalar_math(&mut self, fun: MathFn, s: Scalar, a: &[Value]) -> Value {
        if s.is_int() {
            if fun == MathFn::Abs && !s.is_signed() {
                return a[0];
            }
            return self.int_fn(fun, s, a);
        }
        if s == Scalar::F16 {
            use super::rt::f16op;
            let ext: Vec<Value> = a
                .iter()
                .map(|&x| self.b.ins().uextend(types::I32, x))
                .collect();
            let r = match fun {
                MathFn::Fma => self
                    .call("xpu_f16_fma", &[types::I32; 3], &[types::I32], &ext)
                    .expect("r"),
                MathFn::Clamp => self
                    .call("xpu_f16_clamp", &[types::I32; 3], &[types::I32], &ext)
                    .expect("r"),
                MathFn::Abs => {
                    let m = self.b.ins().band_imm_u(a[0], 0x7fff);
                    return m;
                }
                _ => {
                    let code = match fun {
                        MathFn::Pow => f16op::POW,
                        MathFn::Min => f16op::MIN,
                        MathFn::Max => f16op::MAX,
                        MathFn::Sqrt => f16op::SQRT,
                        MathFn::Rsqrt => f16op::RSQRT,
                        MathFn::Exp => f16op::EXP,
                        MathFn::Exp2 => f16op::EXP2,
                        MathFn::Log => f16op::LOG,
                        MathFn::Log2 => f16op::LOG2,
                        MathFn::Sin => f16op::SIN,
                        MathFn::Cos => f16op::COS,
                        MathFn::Tanh => f16op::TANH,
                        MathFn::Floor => f16op::FLOOR,
                        MathFn::Ceil => f16op::CEIL,
                        MathFn::Trunc => f16op::TRUNC,
                        _ => f16op::ROUND,
                    };
                    let c = self.b.ins().iconst(types::I32, code as i64);
                    let y = if ext.len() > 1 { ext[1] } else { ext[0] };
                    self.call(
                        "xpu_f16_op",
                        &[types::I32; 3],
                        &[types::I32],
                        &[c, ext[0], y],
                    )
                    .expect("r")
                }
            };
            return self.b.ins().ireduce(types::I16, r);
        }
        let t = uty(s);
        let f32 = s == Scalar::F32;
        let helper1 =
            |name32: &'static str, name64: &'static str| if f32 { name32 } else { name64 };
        match fun {
            MathFn::Fma if !self.cfg.fma => {
                let name = helper1("xpu_fma_f32", "xpu_fma_f64");
                self.call(name, &[t, t, t], &[t], a).expect("r")
            }
            MathFn::Sqrt
            | MathFn::Abs
            | MathFn::Floor
            | MathFn::Ceil
            | MathFn::Trunc
            | MathFn::Min
            | MathFn::Max
            | MathFn::Clamp
            | MathFn::Fma
            | MathFn::Round => self.float_fn(fun, s, a, false),
            MathFn::Pow => {
                let name = helper1("xpu_pow_f32", "xpu_pow_f64");
                self.call(name, &[t, t], &[t], a).expect("r")
            }
            _ => {
                let name = match fun {
                    MathFn::Rsqrt => helper1("xpu_rsqrt_f32", "xpu_rsqrt_f64"),
                    MathFn::Exp => helper1("xpu_exp_f32", "xpu_exp_f64"),
                    MathFn::Exp2 => helper1("xpu_exp2_f32", "xpu_exp2_f64"),
                    MathFn::Log => helper1("xpu_log_f32", "xpu_log_f64"),
                    MathFn::Log2 => helper1("xpu_log2_f32", "xpu_log2_f64"),
                    MathFn::Sin => helper1("xpu_sin_f32", "xpu_sin_f64"),
                    MathFn::Cos => helper1("xpu_cos_f32", "xpu_cos_f64"),
                    _ => helper1("xpu_tanh_f32", "xpu_tanh_f64"),
                };
                self.call(name, &[t], &[t], &a[..1]).expect("r")
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Atomics

    fn atomic(
        &mut self,
        op: AtomicOp,
        place: &Place,
        value: ExprId,
        compare: Option<ExprId>,
        ty: Type,
        span: Span,
    ) -> Result<Val, JitError> {
        let Place::Element { base, index } = *place else {
            return Err(self.internal("an atomic on a local"));
        };
        let mut list = vec![index];
        list.extend(compare);
        list.push(value);
        let mut ops = self
            .eval_ops(&list)?
            .into_iter()
            .map(|e| e.vals().remove(0));
        let idx = ops.next().expect("index");
        let cmp = if compare.is_some() { ops.next() } else { None };
        let v = ops.next().expect("value");
        let s = scalar_of(ty);
        let (ptr, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        self.bounds(&idx, 1, len, site);
        let size = s.size() as i64;
        let t = uty(s);
        let flags = MemFlagsData::new().with_notrap().with_aligned();
        let rmw = |me: &mut Self, addr: Value, x: Value, c: Option<Value>| -> Value {
            let aop = match op {
                AtomicOp::Add => AtomicRmwOp::Add,
                AtomicOp::Sub => AtomicRmwOp::Sub,
                AtomicOp::And => AtomicRmwOp::And,
                AtomicOp::Or => AtomicRmwOp::Or,
                AtomicOp::Xor => AtomicRmwOp::Xor,
                AtomicOp::Exchange => AtomicRmwOp::Xchg,
                AtomicOp::Min => {
                    if s.is_signed() {
                        AtomicRmwOp::Smin
                    } else {
                        AtomicRmwOp::Umin
                    }
                }
                AtomicOp::Max => {
                    if s.is_signed() {
                        AtomicRmwOp::Smax
                    } else {
                        AtomicRmwOp::Umax
                    }
                }
                AtomicOp::CompareExchange => {
                    return me.b.ins().atomic_cas(flags, addr, c.expect("expected"), x);
                }
            };
            if s == Scalar::F32 {
                // f32 add: a compare-and-swap loop on the bits.
                let head = me.b.create_block();
                let done = me.b.create_block();
                me.b.append_block_param(head, types::I32);
                me.b.append_block_param(done, types::I32);
                let old0 = me.b.ins().atomic_load(types::I32, flags, addr);
                me.b.ins().jump(head, &[old0.into()]);
                me.b.switch_to_block(head);
                let old = me.b.block_params(head)[0];
                let of = me.b.ins().bitcast(types::F32, le(), old);
                let nf = me.b.ins().fadd(of, x);
                let ni = me.b.ins().bitcast(types::I32, le(), nf);
                let seen = me.b.ins().atomic_cas(flags, addr, old, ni);
                let ok = me.b.ins().icmp(IntCC::Equal, seen, old);
                me.b.ins()
                    .brif(ok, done, &[old.into()], head, &[seen.into()]);
                me.b.switch_to_block(done);
                let r = me.b.block_params(done)[0];
                return me.b.ins().bitcast(types::F32, le(), r);
            }
            me.b.ins().atomic_rmw(t, flags, aop, addr, x)
        };
        // Each active lane in lane order (a uniform index and value still update once per
        // lane, as separate work-items would).
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let il = self.lanes(Scalar::U32, &idx);
        let vl = self.lanes(s, &v);
        let cl = cmp.as_ref().map(|c| self.lanes(s, c));
        let mut outs = Vec::new();
        for l in 0..self.n as usize {
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let bit = self.b.ins().band_imm_u(bit, 1);
            let doit = self.b.create_block();
            let join = self.b.create_block();
            self.b.append_block_param(join, t);
            let zero = self.uconst(s, 0);
            self.b.ins().brif(bit, doit, &[], join, &[zero.into()]);
            self.b.switch_to_block(doit);
            let i64v = self.b.ins().uextend(types::I64, il[l]);
            let o = self.b.ins().imul_imm_s(i64v, size);
            let addr = self.b.ins().iadd(ptr, o);
            let r = rmw(self, addr, vl[l], cl.as_ref().map(|c| c[l]));
            self.b.ins().jump(join, &[r.into()]);
            self.b.switch_to_block(join);
            outs.push(self.b.block_params(join)[0]);
        }
        Ok(Val::V(self.pack_lanes(s, &outs)))
    }

    // -----------------------------------------------------------------------------------
    // Waves

    fn wave(
        &mut self,
        op: WaveOp,
        s: Scalar,
        args: &[Vec<Val>],
        span: Span,
    ) -> Result<Vec<Val>, JitError> {
        let n = self.n as usize;
        if let (WaveOp::Reduce(r), Known::Full) = (op, self.known) {
            // Every lane active, known at compile time: the fold, no mask test.
            let xs = self.lanes(s, &args[0][0]);
            return Ok(vec![Val::U(self.fold_lanes(r, s, &xs))]);
        }
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let active: Vec<Value> = (0..n)
            .map(|l| {
                let b = self.b.ins().ushr_imm_u(bits, l as i64);
                let b = self.b.ins().band_imm_u(b, 1);
                self.b.ins().ireduce(types::I8, b)
            })
            .collect();
        let _ = span;
        match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let x = &args[0][0];
                let xs = self.lanes(s, x);
                let f = |me: &mut Self, a: Value, b: Value| me.reduce_op(r, s, a, b);
                let join = if let WaveOp::Reduce(_) = op {
                    // Every lane active (the usual case): a plain fold in lane order.
                    let full = if self.n == 64 {
                        -1i64
                    } else {
                        ((1u64 << self.n) - 1) as i64
                    };
                    let is_full = self.b.ins().icmp_imm_s(IntCC::Equal, bits, full);
                    let fast = self.b.create_block();
                    let slow = self.b.create_block();
                    let join = self.b.create_block();
                    self.b.append_block_param(join, uty(s));
                    self.b.ins().brif(is_full, fast, &[], slow, &[]);
                    self.b.switch_to_block(fast);
                    let acc = self.fold_lanes(r, s, &xs);
                    self.b.ins().jump(join, &[acc.into()]);
                    self.b.switch_to_block(slow);
                    Some(join)
                } else {
                    None
                };
                let ident = self.reduce_identity(r, s);
                let mut acc = ident;
                let f0 = self.b.ins().iconst(types::I8, 0);
                let mut started = f0;
                let mut outs = Vec::new();
                for l in 0..n {
                    let before = acc;
                    let comb = f(self, acc, xs[l]);
                    let nacc = self.b.ins().select(started, comb, xs[l]);
                    acc = self.b.ins().select(active[l], nacc, acc);
                    started = self.b.ins().bor(started, active[l]);
                    match op {
                        WaveOp::ExclusiveScan(_) => outs.push(before),
                        _ => outs.push(acc),
                    }
                }
                if let Some(join) = join {
                    self.b.ins().jump(join, &[acc.into()]);
                    self.b.switch_to_block(join);
                    return Ok(vec![Val::U(self.b.block_params(join)[0])]);
                }
                Ok(vec![Val::V(self.pack_lanes(s, &outs))])
            }
            WaveOp::Ballot | WaveOp::Any | WaveOp::All => {
                let p = &args[0][0];
                let pm = self.bool_mask(p);
                let pbits = self.mask_bits(&pm);
                let m = self.b.ins().band(pbits, bits);
                Ok(vec![Val::U(match op {
                    WaveOp::Ballot => m,
                    WaveOp::Any => self.b.ins().icmp_imm_s(IntCC::NotEqual, m, 0),
                    _ => self.b.ins().icmp(IntCC::Equal, m, bits),
                })])
            }
            WaveOp::Elect => {
                let low = self.b.ins().ctz(bits);
                let lanes: Vec<Value> = (0..n)
                    .map(|l| self.b.ins().icmp_imm_s(IntCC::Equal, low, l as i64))
                    .collect();
                Ok(vec![Val::V(self.pack_lanes(Scalar::Bool, &lanes))])
            }
            _ => {
                // Lane exchange: each component through a stack copy of the wave's lanes.
                let comps = &args[0];
                let lsrc = &args[1][0];
                let size = s.size();
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    n as u32 * size.max(1) + 16,
                    4,
                ));
                let src_lanes: Vec<Value> = self.lanes(Scalar::U32, lsrc);
                let mut out = Vec::new();
                for x in comps {
                    let xs = self.lanes(s, x);
                    for (l, &v) in xs.iter().enumerate() {
                        self.b
                            .ins()
                            .stack_store(types::I64, v, slot, (l as u32 * size) as i32);
                    }
                    let base = self.b.ins().stack_addr(types::I64, slot, 0);
                    let mut res = Vec::new();
                    for l in 0..n {
                        let me = self.b.ins().iconst(types::I32, l as i64);
                        let d = src_lanes[l];
                        let wm = (n - 1) as i64;
                        // (source lane, use own value)
                        let (src, own) = match op {
                            WaveOp::Broadcast | WaveOp::Shuffle => {
                                (self.b.ins().band_imm_u(d, wm), None)
                            }
                            WaveOp::ShuffleXor => {
                                let t = self.b.ins().bxor(me, d);
                                let out_of =
                                    self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, t, wm);
                                (self.b.ins().band_imm_u(t, wm), Some(out_of))
                            }
                            WaveOp::ShuffleUp => {
                                let t = self.b.ins().isub(me, d);
                                let out_of = self.b.ins().icmp(IntCC::UnsignedGreaterThan, d, me);
                                (self.b.ins().band_imm_u(t, wm), Some(out_of))
                            }
                            WaveOp::ShuffleDown => {
                                let t = self.b.ins().iadd(me, d);
                                // me + d >= n, without wrapping: d >= n - me.
                                let room = self.b.ins().iconst(types::I32, (n - l) as i64);
                                let out_of =
                                    self.b
                                        .ins()
                                        .icmp(IntCC::UnsignedGreaterThanOrEqual, d, room);
                                (self.b.ins().band_imm_u(t, wm), Some(out_of))
                            }
                            _ => {
                                let t = self.b.ins().iadd(me, d);
                                (self.b.ins().band_imm_u(t, wm), None)
                            }
                        };
                        let s64 = self.b.ins().uextend(types::I64, src);
                        let o = self.b.ins().imul_imm_s(s64, size as i64);
                        let a = self.b.ins().iadd(base, o);
                        let v = self.b.ins().load(uty(s), notrap(), a, 0);
                        let v = match own {
                            Some(c) => self.b.ins().select(c, xs[l], v),
                            None => v,
                        };
                        res.push(v);
                    }
                    if op == WaveOp::Broadcast {
                        // Uniform: take the first active lane's result.
                        let mut acc = res[n - 1];
                        for l in (0..n).rev() {
                            acc = self.b.ins().select(active[l], res[l], acc);
                        }
                        out.push(Val::U(acc));
                    } else {
                        out.push(Val::V(self.pack_lanes(s, &res)));
                    }
                }
                Ok(out)
            }
        }
    }

    /// A full wave's reduction: every lane's value combined in lane order (the order the
    /// semantics fix for floats).
    fn fold_lanes(&mut self, r: ReduceOp, s: Scalar, xs: &[Value]) -> Value {
        let mut acc = xs[0];
        for &x in &xs[1..] {
            acc = self.reduce_op(r, s, acc, x);
        }
        acc
    }

    fn reduce_op(&mut self, r: ReduceOp, s: Scalar, a: Value, b: Value) -> Value {
        match r {
            ReduceOp::Sum => self.scalar_bin(BinaryOp::Add, s, a, b),
            ReduceOp::And => self.b.ins().band(a, b),
            ReduceOp::Or => self.b.ins().bor(a, b),
            ReduceOp::Xor => self.b.ins().bxor(a, b),
            ReduceOp::Min => self.scalar_math(MathFn::Min, s, &[a, b]),
            ReduceOp::Max => self.scalar_math(MathFn::Max, s, &[a, b]),
        }
    }

    fn reduce_identity(&mut self, r: ReduceOp, s: Scalar) -> Value {
        let bits = s.bits();
        let all = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let v: u64 = match r {
            ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor => 0,
            ReduceOp::And => all,
            ReduceOp::Min => match s {
                Scalar::F16 => 0x7c00,
                Scalar::F32 => f32::INFINITY.to_bits() as u64,
                Scalar::F64 => f64::INFINITY.to_bits(),
                s if s.is_signed() => all >> 1,
                _ => all,
            },
            ReduceOp::Max => match s {
                Scalar::F16 => 0xfc00,
                Scalar::F32 => f32::NEG_INFINITY.to_bits() as u64,
                Scalar::F64 => f64::NEG_INFINITY.to_bits(),
                s if s.is_signed() => 1u64 << (bits - 1),
                _ => 0,
            },
        };
        self.uconst(s, v)
    }

    // -----------------------------------------------------------------------------------
    // Helpers (inlined) and tags

    fn call_helper(&mut self, function: Handle<Function>, args: &[ExprId]) -> Result<Ev, JitError> {
        let vals = self.eval_ops(args)?;
        self.inline(function, vals)
    }

    fn inline(&mut self, function: Handle<Function>, vals: Vec<Ev>) -> Result<Ev, JitError> {
        let g: &'m Function = &self.m.functions[function];
        if self.frames.len() > 64 {
            return Err(self.internal("helpers nested too deeply"));
        }
        let classes: Vec<Class> = vals
            .iter()
            .map(|v| match v {
                Ev::Vals(vs) if vs.iter().all(|x| matches!(x, Val::U(_))) => Class::Uniform,
                Ev::Mat(_) => Class::Uniform,
                _ => Class::Varying,
            })
            .collect();
        let an = self.an.analyse(function, classes.clone());
        let types = (self.types_of)(function);
        let mark = self.scope.len();
        let mut params = Vec::new();
        for (i, (p, v)) in g.params.iter().zip(vals).enumerate() {
            let s = scalar_of(p.ty);
            let comps = comps_of(p.ty);
            let slot = match (&p.ty, classes[i]) {
                (Type::Matrix { rows, cols, .. }, _) => {
                    let n = *rows as u32 * *cols as u32;
                    let off = self.alloc_state(n as u64 * 8);
                    Slot::Mat { off, n }
                }
                (_, Class::Uniform) => {
                    Slot::Uni((0..comps).map(|_| self.new_var(uty(s))).collect())
                }
                _ => Slot::Var(
                    (0..comps)
                        .map(|_| {
                            (0..chunks(s, self.n))
                                .map(|_| self.new_var(vty(s)))
                                .collect()
                        })
                        .collect(),
                ),
            };
            match v {
                Ev::Vals(vs) => self.write_slot(&slot, s, &vs, false)?,
                Ev::Mat(ptr) => self.copy_mat(&slot, ptr),
                Ev::Void => {}
            }
            params.push(slot);
        }
        let exit = self.b.create_block();
        let ret = match g.ret {
            None => None,
            Some(Type::Matrix { rows, cols, .. }) => {
                let n = rows as u32 * cols as u32;
                let off = self.alloc_state(n as u64 * 8);
                Some(Slot::Mat { off, n })
            }
            Some(t) => {
                let s = scalar_of(t);
                let comps = comps_of(t);
                Some(if an.ret_var || an.ret != Class::Uniform {
                    Slot::Var(
                        (0..comps)
                            .map(|_| {
                                (0..chunks(s, self.n))
                                    .map(|_| self.new_var(vty(s)))
                                    .collect()
                            })
                            .collect(),
                    )
                } else {
                    Slot::Uni((0..comps).map(|_| self.new_var(uty(s))).collect())
                })
            }
        };
        let saved_exec = self.mask_vars();
        let e = self.exec();
        self.def_vars(&saved_exec, &e);
        let known = self.known;
        let loop_base = self.loops.len();
        self.frames.push(Frame {
            func: function,
            f: g,
            an,
            types,
            params,
            locals: vec![None; g.locals.len()],
            ret: ret.clone(),
            exit: Some(exit),
            loop_base,
            is_kernel: false,
        });
        self.regions.push(exit);
        let open = self.block(&g.body)?;
        self.regions.pop();
        if open {
            self.b.ins().jump(exit, &[]);
        }
        self.b.switch_to_block(exit);
        self.frames.pop();
        let e = self.use_vars(&saved_exec);
        self.set_exec(&e);
        self.known = known;
        let result = match &ret {
            None => Ev::Void,
            Some(slot) => {
                let t = g.ret.unwrap_or(Type::U32);
                self.read_slot(slot, t)
            }
        };
        self.scope.truncate(mark);
        let _ = self.frames.last().map(|f| f.func);
        Ok(result)
    }

    fn dispatch(&mut self, tag: ExprId, args: &[ExprId], ty: Type) -> Result<Ev, JitError> {
        let mut list = vec![tag];
        list.extend_from_slice(args);
        let mut vals = self.eval_ops(&list)?;
        let t = vals.remove(0).vals().remove(0);
        let Type::Tag(set) = self.ty(tag) else {
            return Err(self.internal("dispatch through a non-tag"));
        };
        let members = self.m.tag_sets[set].members.clone();
        let rty = self
            .m
            .functions
            .try_get(*members.first().expect("member"))
            .and_then(|f| f.ret);
        let s = rty.map(scalar_of).unwrap_or(Scalar::U32);
        let comps = rty.map(comps_of).unwrap_or(0);
        let _ = ty;
        // The result, zero unless a member runs.
        let res: Vec<Vec<Variable>> = (0..comps)
            .map(|_| {
                (0..chunks(s, self.n))
                    .map(|_| self.new_var(vty(s)))
                    .collect()
            })
            .collect();
        for r in &res {
            let z = self.const_vec(vty(s), &[]);
            let zs = vec![z; r.len()];
            self.def_vars(r, &zs);
        }
        let saved = self.mask_vars();
        let e = self.exec();
        self.def_vars(&saved, &e);
        let known = self.known;
        let tv = Val::V(self.materialize(Scalar::U32, &t));
        // Held in variables: a member's barrier resumes without this block's values.
        let tv_h = self.hold(Scalar::U32, tv);
        let arg_types: Vec<Scalar> = args.iter().map(|&a| scalar_of(self.ty(a))).collect();
        let held_args: Vec<Option<Vec<(Slot, Scalar)>>> = vals
            .iter()
            .zip(&arg_types)
            .map(|(ev, &s)| match ev {
                Ev::Vals(vs) if self.has_barrier => {
                    Some(vs.iter().map(|v| self.hold(s, v.clone())).collect())
                }
                _ => None,
            })
            .collect();
        for (i, &mf) in members.iter().enumerate() {
            let tv = self.unhold(&tv_h);
            let vals: Vec<Ev> = vals
                .iter()
                .zip(&held_args)
                .map(|(ev, h)| match h {
                    Some(slots) => Ev::Vals(slots.iter().map(|x| self.unhold(x)).collect()),
                    None => ev.clone(),
                })
                .collect();
            let k = self.b.ins().iconst(types::I32, i as i64);
            let hit = self.compare(BinaryOp::Eq, Scalar::U32, &tv, &Val::U(k));
            let hm = self.bool_mask(&hit);
            let base = self.use_vars(&saved);
            let m = self.mask_and(&base, &hm);
            let any = self.mask_any(&m);
            let run = self.b.create_block();
            let next = self.b.create_block();
            self.b.ins().brif(any, run, &[], next, &[]);
            self.b.switch_to_block(run);
            self.set_exec(&m);
            let mv = self.mask_vars();
            self.def_vars(&mv, &m);
            let r = self.inline(mf, vals.clone())?;
            let m = self.use_vars(&mv);
            if let Ev::Vals(rv) = r {
                for (slot, v) in res.iter().zip(&rv) {
                    let new = self.materialize(s, v);
                    let old = self.use_vars(slot);
                    let bl = self.blend(s, &m, &new, &old);
                    self.def_vars(slot, &bl);
                }
            }
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
        let e = self.use_vars(&saved);
        self.set_exec(&e);
        self.known = known;
        if comps == 0 {
            return Ok(Ev::Void);
        }
        Ok(Ev::Vals(
            res.iter().map(|r| Val::V(self.use_vars(r))).collect(),
        ))
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
                    | StmtKind::Loop { .. }
                    | StmtKind::Break(_)
                    | StmtKind::Continue(_)
                    | StmtKind::Return(_)
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
        && !f
            .exprs
            .iter()
            .any(|(_, e)| matches!(e, Expr::Atomic { .. } | Expr::MatrixLoad { .. }))
}

/// Whether `f` reads buffer parameter `p` anywhere.
fn reads_buffer(f: &Function, p: u32) -> bool {
    f.exprs.iter().any(|(_, e)| match e {
        Expr::Index { base, .. } | Expr::VLoad { base, .. } | Expr::MatrixLoad { base, .. } => {
            *base == Base::Param(p)
        }
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
            Expr::Call { .. } | Expr::Dispatch { .. } | Expr::Atomic { .. }
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
