//! Running compiled bytecode: one work-item at a time until it finishes or suspends at a
//! barrier or a wave verb, and the workgroup scheduler that decides when suspended work-items
//! meet (docs/semantics.md, "Execution model" and "Convergence").
//!
//! A work-item's state is an explicit stack of frames over its own slot file, so it can stop
//! at any suspension point and resume later; nothing on the host stack survives a suspension.

use super::compile::{Inst, Mem, Program, Slot, NONE};
use super::error::{UbKind, UbReport, WorkItem};
use super::memory::{self, Access, Accessor, Fault, Region};
use super::value::{self, canon};
use crate::ir::{AtomicOp, Builtin, Scalar, Span, WaveOp};
use std::cmp::Ordering;

/// Where a work-item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Ready,
    /// Suspended at a `Barrier` instruction (its frame's `pc` points at it).
    Barrier,
    /// Suspended at a wave verb.
    Wave,
    Done,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    func: u32,
    pc: u32,
    base: u32,
    /// The caller's slot for the result, and its size.
    ret: Slot,
    ret_n: u32,
    /// The position stack's depth when this frame was entered (before its call entry).
    pos_len: u32,
}

/// One work-item's resumable state.
pub(crate) struct Item {
    frames: Vec<Frame>,
    regs: Vec<u64>,
    /// 1 where a slot of a checked local is defined.
    defs: Vec<u8>,
    /// The position stack: `(pc of a LoopEnter, iteration + 1)` per open loop and `(pc of a
    /// call, 0)` per open call. With the current pc appended it orders work-items by how
    /// far along structured control flow they are.
    pos: Vec<(u32, u32)>,
    pub state: State,
    local: [u32; 3],
    /// Linear local index (x fastest).
    lid: u32,
    /// Linear index over the launch (for the race shadow).
    gid: u32,
    global: [u32; 3],
}

impl Item {
    pub fn new() -> Self {
        Item {
            frames: Vec::new(),
            regs: Vec::new(),
            defs: Vec::new(),
            pos: Vec::new(),
            state: State::Done,
            local: [0; 3],
            lid: 0,
            gid: 0,
            global: [0; 3],
        }
    }

    fn top(&self) -> &Frame {
        self.frames.last().expect("a live work-item has a frame")
    }

    /// The position key's order between two suspended work-items.
    fn key_cmp(&self, other: &Item) -> Ordering {
        let a = self.pos.iter().copied().chain([(self.top().pc, 0)]);
        let b = other.pos.iter().copied().chain([(other.top().pc, 0)]);
        a.cmp(b)
    }

    /// Whether two suspended work-items are at the same dynamic instance.
    fn key_eq(&self, other: &Item) -> bool {
        self.top().pc == other.top().pc && self.pos == other.pos
    }

    fn slot(&self, s: Slot) -> u64 {
        self.regs[self.top().base as usize + s as usize]
    }

    fn slots(&self, s: Slot, n: u32) -> &[u64] {
        let b = self.top().base as usize + s as usize;
        &self.regs[b..b + n as usize]
    }

    fn slots_mut(&mut self, s: Slot, n: u32) -> &mut [u64] {
        let b = self.top().base as usize + s as usize;
        &mut self.regs[b..b + n as usize]
    }

    /// Moves past the instruction it is suspended at.
    fn resume(&mut self) {
        self.frames.last_mut().expect("frame").pc += 1;
        self.state = State::Ready;
    }
}

/// Why running stopped early.
pub(crate) enum Halt {
    Ub(Box<UbReport>),
    StepLimit,
    /// The cancellation flag was set.
    Cancelled,
}

type Res<T> = Result<T, Halt>;

/// The launch-wide machine: program, memories, geometry and counters.
pub(crate) struct Machine<'p> {
    pub prog: &'p Program,
    pub kernel: String,
    /// Per kernel parameter: the buffer's memory (empty for scalars).
    pub bufs: Vec<Region>,
    /// Per kernel parameter: elements in the buffer.
    pub buf_len: Vec<u64>,
    pub buf_names: Vec<String>,
    /// Per shared array: its memory in the running workgroup.
    pub shared: Vec<Region>,
    /// Per shared array: its length in elements at this launch.
    pub shared_len: Vec<u64>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub wave: u32,
    pub checks: bool,
    pub group: [u32; 3],
    pub group_linear: u32,
    /// The newest phase id handed out (phases, `memory.rs`).
    pub phase: u32,
    pub group_start: u32,
    /// The first phase of the running barrier segment: every access of the workgroup since
    /// its last `barrier()` has a phase at or above it.
    pub seg_start: u32,
    /// Per wave of the workgroup (kernels with `wave_barrier()` only): its current phase,
    /// advanced by each `wave_barrier()` it passes.
    pub wave_phase: Vec<u32>,
    pub steps: u64,
    pub budget: u64,
    /// Nonzero once the launch is cancelled (its deadline passed).
    pub cancel: &'p std::sync::atomic::AtomicU32,
    /// The kernel frame as every work-item starts it: arguments and constants.
    pub init: Vec<u64>,
    /// The records of `print` and failed `assert` statements (allocated only for a kernel
    /// that has any).
    pub debug: Option<Box<crate::ir::debug::HostBuffer>>,
}

fn block_volume(b: [u32; 3]) -> u32 {
    b[0] * b[1] * b[2]
}

impl<'p> Machine<'p> {
    /// Stops the launch once its cancellation flag is set.
    #[inline]
    pub fn check_cancel(&self) -> Res<()> {
        if self.cancel.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            Err(Halt::Cancelled)
        } else {
            Ok(())
        }
    }

    fn coords(&self, gid: u32) -> WorkItem {
        let vol = block_volume(self.block);
        let (g, l) = (gid / vol, gid % vol);
        let group = [
            g % self.grid[0],
            g / self.grid[0] % self.grid[1],
            g / (self.grid[0] * self.grid[1]),
        ];
        let local = [
            l % self.block[0],
            l / self.block[0] % self.block[1],
            l / (self.block[0] * self.block[1]),
        ];
        let global = [0, 1, 2].map(|d| group[d].wrapping_mul(self.block[d]).wrapping_add(local[d]));
        WorkItem {
            group,
            local,
            global,
        }
    }

    fn ub(&self, it: &Item, func: u32, span: Span, kind: UbKind, detail: String) -> Halt {
        Halt::Ub(Box::new(UbReport {
            kind,
            kernel: self.kernel.clone(),
            function: self.prog.funcs[func as usize].name.clone(),
            span,
            item: WorkItem {
                group: self.group,
                local: it.local,
                global: it.global,
            },
            detail,
            steps: self.steps,
        }))
    }

    fn who(&self, it: &Item, span: Span) -> Accessor {
        let lane = it.lid % self.wave;
        Accessor {
            item: it.gid,
            phase: match self.wave_phase.get((it.lid / self.wave) as usize) {
                Some(&p) => p,
                None => self.seg_start,
            },
            group_start: self.group_start,
            seg_start: self.seg_start,
            wave_first: it.gid - lane,
            wave_w: self.wave,
            site: memory::pack_site(span),
        }
    }

    /// Starts a barrier segment at the newest phase (a workgroup's start, a released
    /// barrier): every wave of the workgroup's `vol` work-items is in it.
    pub fn new_segment(&mut self, vol: u32) {
        self.seg_start = self.phase;
        if self.prog.wave_barriers {
            let waves = vol.div_ceil(self.wave) as usize;
            self.wave_phase.clear();
            self.wave_phase.resize(waves, self.phase);
        }
    }

    fn mem_name(&self, mem: Mem) -> String {
        match mem {
            Mem::Buf { id, .. } => format!("buffer `{}`", self.buf_names[id as usize]),
            Mem::Shared { id, .. } => {
                format!("shared array `{}`", self.prog.shared[id as usize].name)
            }
            Mem::Private { .. } => "a private array".into(),
        }
    }

    /// Describes a memory fault at element `index` of `mem`.
    /// The out-of-bounds message of an atomic `verb` (`"atomic_load"`, an RMW's name) `prep`
    /// (`of`, `on`, `to`) element `i` of `mem`, or `None` when `i` is inside it.
    fn atomic_out_of_bounds(&mut self, mem: Mem, i: u64, verb: &str, prep: &str) -> Option<String> {
        let (_, len, _) = self.region(mem);
        if i < len {
            return None;
        }
        Some(format!(
            "{verb} {prep} element {i} of {}, which has {len}",
            self.mem_name(mem)
        ))
    }

    fn fault_detail(&self, mem: Mem, index: u64, what: &str, f: Fault) -> (UbKind, String) {
        match f {
            Fault::Uninit => (
                UbKind::UninitRead,
                format!(
                    "{what} of element {index} of {}, which nothing wrote",
                    self.mem_name(mem)
                ),
            ),
            Fault::Race(c) => {
                let other = if c.other_item == u32::MAX {
                    "several other work-items".to_string()
                } else {
                    let w = self.coords(c.other_item);
                    format!(
                        "work-item global ({}, {}, {})",
                        w.global[0], w.global[1], w.global[2]
                    )
                };
                let at = match memory::unpack_site(c.other_site) {
                    s if s.is_known() => format!(" at {s}"),
                    _ => String::new(),
                };
                (
                    UbKind::DataRace,
                    format!(
                        "{what} of element {index} of {} races with a {} by {other}{at} that no barrier orders",
                        self.mem_name(mem),
                        if c.other_wrote { "write" } else { "read" }
                    ),
                )
            }
        }
    }

    /// The region, element count and base byte offset of a buffer or shared array.
    fn region(&mut self, mem: Mem) -> (&mut Region, u64, usize) {
        match mem {
            Mem::Buf { id, .. } => (&mut self.bufs[id as usize], self.buf_len[id as usize], 0),
            Mem::Shared { id, .. } => (
                &mut self.shared[id as usize],
                self.shared_len[id as usize],
                0,
            ),
            Mem::Private { .. } => unreachable!("private arrays live in slots"),
        }
    }

    /// Reads `out.len()` lanes of `s` starting at scalar `first` of `mem` (bounds already
    /// checked by the caller in elements).
    fn read_scalars(
        &mut self,
        mem: Mem,
        first: u64,
        s: Scalar,
        out: &mut [u64],
        how: Access,
        who: Accessor,
    ) -> Result<(), Fault> {
        let checks = self.checks;
        let (region, _, base) = self.region(mem);
        let size = s.size() as usize;
        let off = base + first as usize * size;
        let len = out.len() * size;
        region.access(off, len, how, who, checks)?;
        for (k, o) in out.iter_mut().enumerate() {
            *o = value::load_lane(s, &region.bytes[off + k * size..]);
        }
        Ok(())
    }

    fn write_scalars(
        &mut self,
        mem: Mem,
        first: u64,
        s: Scalar,
        vals: &[u64],
        how: Access,
        who: Accessor,
    ) -> Result<(), Fault> {
        let checks = self.checks;
        let (region, _, base) = self.region(mem);
        let size = s.size() as usize;
        let off = base + first as usize * size;
        region.access(off, vals.len() * size, how, who, checks)?;
        for (k, &v) in vals.iter().enumerate() {
            value::store_lane(s, v, &mut region.bytes[off + k * size..]);
        }
        Ok(())
    }

    fn builtin(&self, it: &Item, b: Builtin) -> u64 {
        u64::from(match b {
            Builtin::GlobalId(d) => it.global[d.index()],
            Builtin::LocalId(d) => it.local[d.index()],
            Builtin::GroupId(d) => self.group[d.index()],
            Builtin::GroupSize(d) => self.block[d.index()],
            Builtin::NumGroups(d) => self.grid[d.index()],
            Builtin::WaveWidth => self.wave,
            Builtin::LaneId => it.lid % self.wave,
        })
    }

    /// Prepares `it` to run the kernel from its first instruction as work-item `lid` of the
    /// current workgroup.
    pub fn start(&self, it: &mut Item, lid: u32) {
        let vol = block_volume(self.block);
        it.frames.clear();
        it.frames.push(Frame {
            func: 0,
            pc: 0,
            base: 0,
            ret: NONE,
            ret_n: 0,
            pos_len: 0,
        });
        if it.regs.len() < self.init.len() {
            it.regs.resize(self.init.len(), 0);
            it.defs.resize(self.init.len(), 0);
        }
        it.regs[..self.init.len()].copy_from_slice(&self.init);
        it.pos.clear();
        it.state = State::Ready;
        it.lid = lid;
        it.local = [
            lid % self.block[0],
            lid / self.block[0] % self.block[1],
            lid / (self.block[0] * self.block[1]),
        ];
        it.gid = self.group_linear * vol + lid;
        it.global = [0, 1, 2].map(|d| {
            self.group[d]
                .wrapping_mul(self.block[d])
                .wrapping_add(it.local[d])
        });
    }

    /// Runs `it` until it finishes or suspends.
    pub fn run(&mut self, it: &mut Item) -> Res<()> {
        let prog = self.prog;
        let top = *it.top();
        let mut fi = top.func;
        let mut code: &[Inst] = &prog.funcs[fi as usize].code;
        let mut pc = top.pc as usize;
        let mut base = top.base as usize;
        let mut steps: u64 = 0;
        let checks = self.checks;

        macro_rules! r {
            ($s:expr) => {
                it.regs[base + $s as usize]
            };
        }
        macro_rules! ub {
            ($span:expr, $kind:expr, $($fmt:tt)*) => {{
                self.steps += steps;
                return Err(self.ub(it, fi, $span, $kind, format!($($fmt)*)));
            }};
        }
        macro_rules! save {
            () => {{
                let f = it.frames.last_mut().expect("frame");
                f.pc = pc as u32;
            }};
        }

        loop {
            let inst = &code[pc];
            pc += 1;
            steps += 1;
            match inst {
                Inst::Copy { dst, src, n } => {
                    if *n == 1 {
                        r!(*dst) = r!(*src);
                    } else {
                        let (s, d) = (base + *src as usize, base + *dst as usize);
                        it.regs.copy_within(s..s + *n as usize, d);
                    }
                }
                Inst::Builtin { dst, b } => r!(*dst) = self.builtin(it, *b),
                Inst::Un { f, dst, a, n } => {
                    for i in 0..*n {
                        r!(dst + i) = f(r!(a + i));
                    }
                }
                Inst::Bin { f, dst, a, b, n: 1 } => r!(*dst) = f(r!(*a), r!(*b)),
                Inst::Bin { f, dst, a, b, n } => {
                    for i in 0..*n {
                        r!(dst + i) = f(r!(a + i), r!(b + i));
                    }
                }
                Inst::Bits { op, s, dst, a } => {
                    let mut v = [0u64; 4];
                    for (k, &slot) in a.iter().enumerate().take(op.arity()) {
                        v[k] = r!(slot);
                    }
                    r!(*dst) = value::canon(*s, op.eval(*s, &v));
                }
                Inst::Ter { f, dst, a, b, c, n } => {
                    for i in 0..*n {
                        r!(dst + i) = f(r!(a + i), r!(b + i), r!(c + i));
                    }
                }
                Inst::DivRem {
                    s,
                    rem,
                    dst,
                    a,
                    b,
                    n,
                    span,
                } => {
                    for i in 0..*n {
                        match value::int_div(*s, *rem, r!(a + i), r!(b + i)) {
                            Some(v) => r!(dst + i) = v,
                            None => ub!(
                                *span,
                                UbKind::DivByZero,
                                "integer {} by zero",
                                if *rem { "remainder" } else { "division" }
                            ),
                        }
                    }
                }
                Inst::Cast {
                    from,
                    to,
                    dst,
                    a,
                    n,
                } => {
                    for i in 0..*n {
                        r!(dst + i) = value::cast(*from, *to, r!(a + i));
                    }
                }
                Inst::Bitcast { from, to, dst, a } => {
                    let mut bytes = [0u8; 128];
                    let fs = from.scalar.size() as usize;
                    for i in 0..from.lanes as usize {
                        value::store_lane(from.scalar, r!(*a + i as u32), &mut bytes[i * fs..]);
                    }
                    let ts = to.scalar.size() as usize;
                    for i in 0..to.lanes as usize {
                        r!(*dst + i as u32) = value::load_lane(to.scalar, &bytes[i * ts..]);
                    }
                }
                Inst::Select {
                    dst,
                    c,
                    a,
                    b,
                    n,
                    cvec,
                } => {
                    for i in 0..*n {
                        let ci = if *cvec { r!(c + i) } else { r!(*c) };
                        r!(dst + i) = if ci != 0 { r!(a + i) } else { r!(b + i) };
                    }
                }
                Inst::Splat { dst, a, n } => {
                    let v = r!(*a);
                    for i in 0..*n {
                        r!(dst + i) = v;
                    }
                }
                Inst::Len { dst, buf } => r!(*dst) = self.buf_len[*buf as usize],
                Inst::Load {
                    mem,
                    dst,
                    idx,
                    span,
                } => {
                    let i = r!(*idx);
                    match *mem {
                        Mem::Private {
                            slot, len, lanes, ..
                        } => {
                            if i >= u64::from(len) {
                                ub!(
                                    *span,
                                    UbKind::OutOfBounds,
                                    "read of element {i} of a private array of {len} elements"
                                );
                            }
                            let src = base + (slot as usize) + i as usize * lanes as usize;
                            if checks && it.defs[src..src + lanes as usize].contains(&0) {
                                ub!(*span, UbKind::UninitRead, "read of element {i} of a private array before anything was written to it");
                            }
                            it.regs
                                .copy_within(src..src + lanes as usize, base + *dst as usize);
                        }
                        // The common case, a scalar element of a buffer, straight through.
                        Mem::Buf { id, s, lanes: 1 } => {
                            let len = self.buf_len[id as usize];
                            if i >= len {
                                ub!(
                                    *span,
                                    UbKind::OutOfBounds,
                                    "read of element {i} of {}, which has {len}",
                                    self.mem_name(*mem)
                                );
                            }
                            let size = s.size() as usize;
                            let off = i as usize * size;
                            let who = self.who(it, *span);
                            let res =
                                self.bufs[id as usize].access(off, size, Access::Read, who, checks);
                            if let Err(f) = res {
                                let (k, m) = self.fault_detail(*mem, i, "read", f);
                                ub!(*span, k, "{m}");
                            }
                            r!(*dst) = value::load_lane(s, &self.bufs[id as usize].bytes[off..]);
                        }
                        _ => {
                            let (_, len, _) = self.region(*mem);
                            if i >= len {
                                ub!(
                                    *span,
                                    UbKind::OutOfBounds,
                                    "read of element {i} of {}, which has {len}",
                                    self.mem_name(*mem)
                                );
                            }
                            let lanes = mem.lanes() as usize;
                            let who = self.who(it, *span);
                            let d = base + *dst as usize;
                            if let Err(f) = self.read_scalars(
                                *mem,
                                i * lanes as u64,
                                mem.scalar(),
                                &mut it.regs[d..d + lanes],
                                Access::Read,
                                who,
                            ) {
                                let (k, m) = self.fault_detail(*mem, i, "read", f);
                                ub!(*span, k, "{m}");
                            }
                        }
                    }
                }
                Inst::Store {
                    mem,
                    src,
                    idx,
                    span,
                } => {
                    let i = r!(*idx);
                    match *mem {
                        Mem::Private {
                            slot, len, lanes, ..
                        } => {
                            if i >= u64::from(len) {
                                ub!(
                                    *span,
                                    UbKind::OutOfBounds,
                                    "write of element {i} of a private array of {len} elements"
                                );
                            }
                            let d = base + (slot as usize) + i as usize * lanes as usize;
                            it.regs.copy_within(
                                base + *src as usize..base + *src as usize + lanes as usize,
                                d,
                            );
                            if checks {
                                it.defs[d..d + lanes as usize].fill(1);
                            }
                        }
                        Mem::Buf { id, s, lanes: 1 } => {
                            let len = self.buf_len[id as usize];
                            if i >= len {
                                ub!(
                                    *span,
                                    UbKind::OutOfBounds,
                                    "write of element {i} of {}, which has {len}",
                                    self.mem_name(*mem)
                                );
                            }
                            let size = s.size() as usize;
                            let off = i as usize * size;
                            let who = self.who(it, *span);
                            let res = self.bufs[id as usize].access(
                                off,
                                size,
                                Access::Write,
                                who,
                                checks,
                            );
                            if let Err(f) = res {
                                let (k, m) = self.fault_detail(*mem, i, "write", f);
                                ub!(*span, k, "{m}");
                            }
                            value::store_lane(
                                s,
                                r!(*src),
                                &mut self.bufs[id as usize].bytes[off..],
                            );
                        }
                        _ => {
                            let (_, len, _) = self.region(*mem);
                            if i >= len {
                                ub!(
                                    *span,
                                    UbKind::OutOfBounds,
                                    "write of element {i} of {}, which has {len}",
                                    self.mem_name(*mem)
                                );
                            }
                            let lanes = mem.lanes() as usize;
                            let who = self.who(it, *span);
                            let s = base + *src as usize;
                            if let Err(f) = self.write_scalars(
                                *mem,
                                i * lanes as u64,
                                mem.scalar(),
                                &it.regs[s..s + lanes],
                                Access::Write,
                                who,
                            ) {
                                let (k, m) = self.fault_detail(*mem, i, "write", f);
                                ub!(*span, k, "{m}");
                            }
                        }
                    }
                }
                Inst::VLoad {
                    buf,
                    s,
                    lanes,
                    align,
                    dst,
                    idx,
                    span,
                }
                | Inst::VStore {
                    buf,
                    s,
                    lanes,
                    align,
                    src: dst,
                    idx,
                    span,
                } => {
                    let store = matches!(inst, Inst::VStore { .. });
                    let what = if store { "vstore" } else { "vload" };
                    let i = r!(*idx);
                    let mem = Mem::Buf {
                        id: *buf,
                        s: *s,
                        lanes: 1,
                    };
                    let len = self.buf_len[*buf as usize];
                    let n = u64::from(*lanes);
                    if i.checked_add(n).is_none_or(|end| end > len) {
                        ub!(
                            *span,
                            UbKind::OutOfBounds,
                            "{what}<{lanes}> at element {i} of {}, which has {len}",
                            self.mem_name(mem)
                        );
                    }
                    let byte = i * u64::from(s.size());
                    if *align != 0 && byte % u64::from(*align) != 0 {
                        ub!(*span, UbKind::Misaligned, "{what} at element {i} (byte {byte}) of {} breaks its promise align = {align}", self.mem_name(mem));
                    }
                    let who = self.who(it, *span);
                    let d = base + *dst as usize;
                    let r = if store {
                        self.write_scalars(
                            mem,
                            i,
                            *s,
                            &it.regs[d..d + n as usize],
                            Access::Write,
                            who,
                        )
                    } else {
                        self.read_scalars(
                            mem,
                            i,
                            *s,
                            &mut it.regs[d..d + n as usize],
                            Access::Read,
                            who,
                        )
                    };
                    if let Err(f) = r {
                        let (k, m) = self.fault_detail(mem, i, what, f);
                        ub!(*span, k, "{m}");
                    }
                }
                Inst::Atomic {
                    op,
                    mem,
                    dst,
                    idx,
                    val,
                    cmp,
                    span,
                } => {
                    let i = r!(*idx);
                    if let Some(m) = self.atomic_out_of_bounds(*mem, i, op.name(), "on") {
                        ub!(*span, UbKind::OutOfBounds, "{m}");
                    }
                    let s = mem.scalar();
                    let who = self.who(it, *span);
                    let mut old = [0u64];
                    let v = r!(*val);
                    let c = if *cmp == NONE { 0 } else { r!(*cmp) };
                    if let Err(f) = self.read_scalars(*mem, i, s, &mut old, Access::Atomic, who) {
                        let (k, m) = self.fault_detail(*mem, i, op.name(), f);
                        ub!(*span, k, "{m}");
                    }
                    let new = atomic_result(*op, s, old[0], v, c);
                    // The read above recorded the atomic access; the store below only
                    // changes bytes.
                    let (region, _, b) = self.region(*mem);
                    let sz = s.size() as usize;
                    value::store_lane(s, new, &mut region.bytes[b + i as usize * sz..]);
                    r!(*dst) = old[0];
                }
                Inst::AtomicLoad {
                    mem,
                    dst,
                    idx,
                    span,
                } => {
                    let i = r!(*idx);
                    if let Some(m) = self.atomic_out_of_bounds(*mem, i, "atomic_load", "of") {
                        ub!(*span, UbKind::OutOfBounds, "{m}");
                    }
                    let who = self.who(it, *span);
                    let mut v = [0u64];
                    let s = mem.scalar();
                    if let Err(f) = self.read_scalars(*mem, i, s, &mut v, Access::Atomic, who) {
                        let (k, m) = self.fault_detail(*mem, i, "atomic_load", f);
                        ub!(*span, k, "{m}");
                    }
                    r!(*dst) = v[0];
                }
                Inst::AtomicStore {
                    mem,
                    src,
                    idx,
                    span,
                } => {
                    let i = r!(*idx);
                    if let Some(m) = self.atomic_out_of_bounds(*mem, i, "atomic_store", "to") {
                        ub!(*span, UbKind::OutOfBounds, "{m}");
                    }
                    let who = self.who(it, *span);
                    let v = [r!(*src)];
                    let s = mem.scalar();
                    let stored = self.write_scalars(*mem, i, s, &v, Access::AtomicStore, who);
                    if let Err(f) = stored {
                        let (k, m) = self.fault_detail(*mem, i, "atomic_store", f);
                        ub!(*span, k, "{m}");
                    }
                }
                Inst::CheckDef {
                    slot,
                    n,
                    local,
                    span,
                } => {
                    let s = base + *slot as usize;
                    if it.defs[s..s + *n as usize].contains(&0) {
                        let name = &prog.funcs[fi as usize].local_names[*local as usize];
                        ub!(
                            *span,
                            UbKind::UninitRead,
                            "read of local `{name}` before it was assigned"
                        );
                    }
                }
                Inst::MarkDef { slot, n } => {
                    let s = base + *slot as usize;
                    it.defs[s..s + *n as usize].fill(1);
                }
                Inst::Undef { slot, n } => {
                    let s = base + *slot as usize;
                    it.defs[s..s + *n as usize].fill(0);
                }
                Inst::Jump { to } => pc = *to as usize,
                Inst::JumpIf { c, to } => {
                    if r!(*c) != 0 {
                        pc = *to as usize;
                    }
                }
                Inst::JumpIfNot { c, to } => {
                    if r!(*c) == 0 {
                        pc = *to as usize;
                    }
                }
                Inst::Inc { slot, s } => r!(*slot) = canon(*s, r!(*slot).wrapping_add(1)),
                Inst::LoopEnter => it.pos.push(((pc - 1) as u32, 1)),
                Inst::LoopNext { to } => {
                    if let Some(p) = it.pos.last_mut() {
                        p.1 = p.1.wrapping_add(1);
                    }
                    pc = *to as usize;
                    if self.steps + steps > self.budget {
                        self.steps += steps;
                        return Err(Halt::StepLimit);
                    }
                    if self.cancel.load(std::sync::atomic::Ordering::Relaxed) != 0 {
                        self.steps += steps;
                        return Err(Halt::Cancelled);
                    }
                }
                Inst::PopLoops { n } => {
                    let keep = it.pos.len().saturating_sub(*n as usize);
                    it.pos.truncate(keep);
                }
                Inst::Call { func, args, dst, n } => {
                    self.call(
                        it, &mut fi, &mut code, &mut pc, &mut base, *func, args, *dst, *n,
                    );
                    if self.steps + steps > self.budget {
                        self.steps += steps;
                        return Err(Halt::StepLimit);
                    }
                }
                Inst::Dispatch {
                    set,
                    tag,
                    args,
                    dst,
                    n,
                } => {
                    let t = r!(*tag);
                    match prog.tag_sets[*set as usize].get(t as usize) {
                        Some(&func) => self.call(
                            it, &mut fi, &mut code, &mut pc, &mut base, func, args, *dst, *n,
                        ),
                        // An out-of-range tag: no call, the zero of the result type.
                        None => {
                            for i in 0..*n {
                                r!(dst + i) = value::ZERO;
                            }
                        }
                    }
                }
                Inst::Ret { src, n } => {
                    if it.frames.len() == 1 {
                        save!();
                        it.state = State::Done;
                        self.steps += steps;
                        return Ok(());
                    }
                    let done = it.frames.pop().expect("frame");
                    let caller = *it.frames.last().expect("caller frame");
                    if done.ret_n > 0 {
                        let s = base + *src as usize;
                        it.regs.copy_within(
                            s..s + (*n).min(done.ret_n) as usize,
                            caller.base as usize + done.ret as usize,
                        );
                    }
                    it.pos.truncate(done.pos_len as usize);
                    fi = caller.func;
                    code = &prog.funcs[fi as usize].code;
                    pc = caller.pc as usize;
                    base = caller.base as usize;
                }
                Inst::NoReturn { span } => {
                    ub!(
                        *span,
                        UbKind::UninitRead,
                        "`{}` ended without returning a value",
                        prog.funcs[fi as usize].name
                    )
                }
                Inst::Print { site, args } => {
                    let mut vals = [0u64; crate::ir::debug::MAX_PRINT_VALUES];
                    for (k, a) in args.iter().enumerate().take(vals.len()) {
                        vals[k] = r!(*a);
                    }
                    let (g, l) = (self.group_linear, it.lid);
                    if let Some(d) = self.debug.as_mut() {
                        d.print(*site, g, l, &vals[..args.len().min(vals.len())]);
                    }
                }
                Inst::Assert { site, c } => {
                    if r!(*c) == 0 {
                        let (g, l) = (self.group_linear, it.lid);
                        if let Some(d) = self.debug.as_mut() {
                            d.assert_failed(*site, g, l);
                        }
                    }
                }
                Inst::Barrier { .. } => {
                    pc -= 1;
                    save!();
                    it.state = State::Barrier;
                    self.steps += steps;
                    return Ok(());
                }
                Inst::Wave { .. }
                | Inst::WaveBarrier { .. }
                | Inst::MFill { .. }
                | Inst::MLoad { .. }
                | Inst::MMma { .. }
                | Inst::MStore { .. } => {
                    pc -= 1;
                    save!();
                    it.state = State::Wave;
                    self.steps += steps;
                    return Ok(());
                }
            }
        }
    }

    /// Enters `func` from the instruction just executed (`pc` is already past it).
    #[allow(clippy::too_many_arguments)]
    fn call<'c>(
        &self,
        it: &mut Item,
        fi: &mut u32,
        code: &mut &'c [Inst],
        pc: &mut usize,
        base: &mut usize,
        func: u32,
        args: &[(Slot, u32)],
        dst: Slot,
        n: u32,
    ) where
        'p: 'c,
    {
        let prog: &'c Program = self.prog;
        let callee = &prog.funcs[func as usize];
        let new_base = *base + prog.funcs[*fi as usize].frame as usize;
        let need = new_base + callee.frame as usize;
        if it.regs.len() < need {
            it.regs.resize(need, 0);
            it.defs.resize(need, 0);
        }
        let cb = new_base + callee.const_base as usize;
        it.regs[cb..cb + callee.consts.len()].copy_from_slice(&callee.consts);
        for (&(src, cnt), &(pslot, _)) in args.iter().zip(&callee.params) {
            let s = *base + src as usize;
            it.regs
                .copy_within(s..s + cnt as usize, new_base + pslot as usize);
        }
        it.frames.last_mut().expect("frame").pc = *pc as u32;
        let pos_len = it.pos.len() as u32;
        it.pos.push(((*pc - 1) as u32, 0));
        it.frames.push(Frame {
            func,
            pc: 0,
            base: new_base as u32,
            ret: dst,
            ret_n: n,
            pos_len,
        });
        *fi = func;
        *code = &callee.code;
        *pc = 0;
        *base = new_base;
    }

    // ------------------------------------------------------------------ scheduling

    /// Runs one workgroup to completion: `items[l]` is local work-item `l`; `order` is the
    /// order in which ready work-items run (identity, or shuffled).
    pub fn run_group(&mut self, items: &mut [Item], order: &[u32], rank: &[u32]) -> Res<()> {
        for &l in order {
            let it = &mut items[l as usize];
            self.start(it, l);
        }
        if !self.prog.synchronises {
            for &l in order {
                self.run(&mut items[l as usize])?;
            }
            return Ok(());
        }
        let vol = items.len();
        let w = self.wave as usize;
        let mut group: Vec<usize> = Vec::with_capacity(w);
        loop {
            for &l in order {
                if items[l as usize].state == State::Ready {
                    self.run(&mut items[l as usize])?;
                }
            }
            // Resolve wave verbs, earliest dynamic instance first, until every wave is
            // finished or its earliest suspended lane is at a barrier.
            for first in (0..vol).step_by(w) {
                if !self.prog.waves {
                    break;
                }
                let lanes = first..(first + w).min(vol);
                loop {
                    if !items[lanes.clone()]
                        .iter()
                        .any(|it| it.state == State::Wave)
                    {
                        break;
                    }
                    let mut min: Option<usize> = None;
                    for l in lanes.clone() {
                        if matches!(items[l].state, State::Barrier | State::Wave)
                            && min.is_none_or(|m| items[l].key_cmp(&items[m]) == Ordering::Less)
                        {
                            min = Some(l);
                        }
                    }
                    let Some(m) = min else { break };
                    if items[m].state == State::Barrier {
                        break;
                    }
                    group.clear();
                    group.extend(
                        lanes.clone().filter(|&l| {
                            items[l].state == State::Wave && items[l].key_eq(&items[m])
                        }),
                    );
                    self.resolve_wave(items, first, lanes.len(), &group)?;
                    group.sort_by_key(|&l| rank[l]);
                    for &l in &group {
                        self.run(&mut items[l])?;
                    }
                }
            }
            if items.iter().all(|it| it.state == State::Done) {
                return Ok(());
            }
            self.check_cancel()?;
            self.release_barrier(items)?;
        }
    }

    /// Every work-item is finished or suspended at a barrier or at a wave verb that cannot
    /// complete: release the barrier if all meet at one instance of it, else report
    /// divergence.
    fn release_barrier(&mut self, items: &mut [Item]) -> Res<()> {
        let Some(b) = items.iter().position(|it| it.state == State::Barrier) else {
            // Unreachable: a wave stalls only behind a barrier.
            let it = items
                .iter()
                .find(|it| it.state == State::Wave)
                .expect("stalled item");
            let span = self.inst_span(it);
            return Err(self.ub(
                it,
                it.top().func,
                span,
                UbKind::BarrierDivergence,
                "a wave verb that cannot complete".into(),
            ));
        };
        let at = &items[b];
        let span = self.inst_span(at);
        for other in items.iter() {
            let why = match other.state {
                State::Done => "finished without reaching it".to_string(),
                State::Wave => format!(
                    "is waiting at a wave verb at {} instead",
                    self.inst_span(other)
                ),
                State::Barrier if !other.key_eq(at) => {
                    let s = self.inst_span(other);
                    if s == span {
                        "is waiting at it in another iteration or call".to_string()
                    } else {
                        format!("is waiting at the barrier at {s} instead")
                    }
                }
                _ => continue,
            };
            let o = self.coords(other.gid);
            let detail = format!(
                "work-item local ({}, {}, {}) of this workgroup waits at this barrier, but local ({}, {}, {}) {why}",
                at.local[0], at.local[1], at.local[2], o.local[0], o.local[1], o.local[2]
            );
            return Err(self.ub(at, at.top().func, span, UbKind::BarrierDivergence, detail));
        }
        self.phase = self.phase.wrapping_add(1);
        self.new_segment(items.len() as u32);
        for it in items.iter_mut() {
            it.resume();
        }
        Ok(())
    }

    fn inst(&self, it: &Item) -> &'p Inst {
        let f = it.top();
        &self.prog.funcs[f.func as usize].code[f.pc as usize]
    }

    fn inst_span(&self, it: &Item) -> Span {
        match self.inst(it) {
            Inst::Barrier { span }
            | Inst::WaveBarrier { span }
            | Inst::Wave { span, .. }
            | Inst::MFill { span, .. }
            | Inst::MLoad { span, .. }
            | Inst::MMma { span, .. }
            | Inst::MStore { span, .. } => *span,
            _ => Span::UNKNOWN,
        }
    }

    /// Completes the wave verb at which the lanes `group` (ascending, all at one dynamic
    /// instance) wait; the wave has `wave_len` lanes from local index `first`.
    fn resolve_wave(
        &mut self,
        items: &mut [Item],
        first: usize,
        wave_len: usize,
        group: &[usize],
    ) -> Res<()> {
        let lead = group[0];
        let inst = self.inst(&items[lead]);
        let func = items[lead].top().func;
        let w = self.wave as usize;
        let lane = |l: usize| l - first;
        match *inst {
            Inst::WaveBarrier { span } => {
                self.collective(items, group, wave_len, func, span, "wave_barrier")?;
                // Every lane of the wave meets here: what each did before is ordered before
                // what any does after (a new phase for this wave only).
                self.phase = self.phase.wrapping_add(1);
                let k = first / w;
                if let Some(p) = self.wave_phase.get_mut(k) {
                    *p = self.phase;
                }
                for &l in group {
                    items[l].resume();
                }
                Ok(())
            }
            Inst::Wave {
                op,
                s,
                dst,
                a,
                b,
                n,
                width,
                span,
            } => {
                // Which lanes are active, by lane id.
                let mut active = [false; 64];
                for &l in group {
                    active[lane(l)] = true;
                }
                // The tile: `t` consecutive lanes (the whole wave without `width`, and a
                // width above the wave is the wave), `base(l)` its first lane.
                let t = if width == 0 {
                    w
                } else {
                    (width as usize).min(w)
                };
                let base = |l: usize| l & !(t - 1);
                let mut out: Vec<u64> = vec![0; group.len() * n as usize];
                let val = |items: &[Item], l: usize, i: u32| items[l].slot(a + i);
                match op {
                    WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                        let f = value::reduce_fn(r, s).unwrap_or(|a, _| a);
                        for i in 0..n {
                            // `group` ascends, so each tile's lanes are one run of it.
                            let mut k0 = 0;
                            while k0 < group.len() {
                                let tile = base(lane(group[k0]));
                                let mut k1 = k0;
                                while k1 < group.len() && base(lane(group[k1])) == tile {
                                    k1 += 1;
                                }
                                let mut acc = value::reduce_identity(r, s);
                                let mut started = false;
                                for (k, &l) in group.iter().enumerate().take(k1).skip(k0) {
                                    let v = val(items, l, i);
                                    let before = acc;
                                    // The first active lane's value starts the fold, so a
                                    // lone -0.0 or NaN survives a sum or a min.
                                    acc = if started { f(acc, v) } else { v };
                                    started = true;
                                    out[k * n as usize + i as usize] = match op {
                                        WaveOp::ExclusiveScan(_) => before,
                                        _ => acc,
                                    };
                                }
                                if let WaveOp::Reduce(_) = op {
                                    for k in k0..k1 {
                                        out[k * n as usize + i as usize] = acc;
                                    }
                                }
                                k0 = k1;
                            }
                        }
                    }
                    WaveOp::Broadcast => {
                        let src = items[lead].slot(b);
                        if let Some(&l) = group.iter().find(|&&l| items[l].slot(b) != src) {
                            return Err(self.ub(
                                &items[l],
                                func,
                                span,
                                UbKind::NonUniform,
                                format!(
                                    "wave_broadcast from lane {} here but lane {src} in lane {}",
                                    items[l].slot(b),
                                    lane(lead)
                                ),
                            ));
                        }
                        if width != 0 && src >= t as u64 {
                            return Err(self.ub(
                                &items[lead],
                                func,
                                span,
                                UbKind::OutOfBounds,
                                format!("wave_broadcast from lane {src}, outside a tile of {t}"),
                            ));
                        }
                        for (k, &l) in group.iter().enumerate() {
                            let from = base(lane(l)) as u64 + src;
                            if from >= w as u64 || !active[from as usize] {
                                return Err(self.ub(
                                    &items[l],
                                    func,
                                    span,
                                    UbKind::OutOfBounds,
                                    format!(
                                        "wave_broadcast from lane {from}, which is {}",
                                        self.lane_state(from, wave_len)
                                    ),
                                ));
                            }
                            for i in 0..n {
                                out[k * n as usize + i as usize] =
                                    val(items, first + from as usize, i);
                            }
                        }
                    }
                    WaveOp::Shuffle
                    | WaveOp::ShuffleXor
                    | WaveOp::ShuffleUp
                    | WaveOp::ShuffleDown
                    | WaveOp::Rotate => {
                        for (k, &l) in group.iter().enumerate() {
                            // Within the tile: `me` the lane's place in it, `tb` its first lane.
                            let tb = base(lane(l)) as u64;
                            let me = lane(l) as u64 - tb;
                            let x = items[l].slot(b);
                            let w = t;
                            // `None`: out of range, own value (docs/semantics.md).
                            let src: Option<u64> = match op {
                                WaveOp::Shuffle if width != 0 => Some(x % t as u64),
                                WaveOp::Shuffle => {
                                    if x >= w as u64 {
                                        return Err(self.ub(
                                            &items[l],
                                            func,
                                            span,
                                            UbKind::OutOfBounds,
                                            format!(
                                                "wave_shuffle from lane {x}, outside a wave of {w}"
                                            ),
                                        ));
                                    }
                                    Some(x)
                                }
                                WaveOp::ShuffleXor => Some(me ^ x).filter(|&s| s < w as u64),
                                WaveOp::ShuffleUp => me.checked_sub(x),
                                WaveOp::ShuffleDown => me.checked_add(x).filter(|&s| s < w as u64),
                                _ => Some((me + x % w as u64) % w as u64),
                            };
                            let from = match src.map(|s| s + tb) {
                                None => l,
                                Some(s) => {
                                    if !active[s as usize] {
                                        return Err(self.ub(
                                            &items[l],
                                            func,
                                            span,
                                            UbKind::OutOfBounds,
                                            format!(
                                                "{} reads lane {s}, which is {}",
                                                crate::ir::typeck::wave_name(op),
                                                self.lane_state(s, wave_len)
                                            ),
                                        ));
                                    }
                                    first + s as usize
                                }
                            };
                            for i in 0..n {
                                out[k * n as usize + i as usize] = val(items, from, i);
                            }
                        }
                    }
                    WaveOp::Ballot | WaveOp::Any | WaveOp::All => {
                        let mut mask = 0u64;
                        for &l in group {
                            if items[l].slot(a) != 0 {
                                mask |= 1 << lane(l);
                            }
                        }
                        let count = mask.count_ones() as usize;
                        let r = match op {
                            WaveOp::Ballot => mask,
                            WaveOp::Any => (count > 0) as u64,
                            _ => (count == group.len()) as u64,
                        };
                        out.iter_mut().for_each(|o| *o = r);
                    }
                    WaveOp::Elect => {
                        for (k, o) in out.iter_mut().enumerate() {
                            *o = (k == 0) as u64;
                        }
                    }
                }
                let out_n = if op == WaveOp::Ballot { 1 } else { n };
                for (k, &l) in group.iter().enumerate() {
                    let st = k * n as usize;
                    items[l]
                        .slots_mut(dst, out_n)
                        .copy_from_slice(&out[st..st + out_n as usize]);
                    items[l].resume();
                }
                Ok(())
            }
            Inst::MFill { dst, val, n, span } => {
                self.collective(items, group, wave_len, func, span, "matrix_fill")?;
                self.uniform(items, group, &[(val, 1)], func, span, "matrix_fill value")?;
                let v = items[lead].slot(val);
                for &l in group {
                    items[l].slots_mut(dst, n).fill(v);
                    items[l].resume();
                }
                Ok(())
            }
            Inst::MLoad {
                dst,
                mem,
                off,
                stride,
                rows,
                cols,
                span,
            } => {
                self.collective(items, group, wave_len, func, span, "matrix_load")?;
                self.uniform(
                    items,
                    group,
                    &[(off, 1), (stride, 1)],
                    func,
                    span,
                    "matrix_load offset and stride",
                )?;
                let mut tile = vec![0u64; (rows * cols) as usize];
                self.matrix_access(
                    &items[lead],
                    func,
                    span,
                    mem,
                    off,
                    stride,
                    rows,
                    cols,
                    &mut tile,
                    false,
                )?;
                for &l in group {
                    items[l].slots_mut(dst, rows * cols).copy_from_slice(&tile);
                    items[l].resume();
                }
                Ok(())
            }
            Inst::MMma {
                dst,
                a,
                b,
                c,
                m,
                n,
                k,
                sa,
                sc,
                span,
            } => {
                self.collective(items, group, wave_len, func, span, "matrix_mma")?;
                self.uniform(
                    items,
                    group,
                    &[(a, m * k), (b, k * n), (c, m * n)],
                    func,
                    span,
                    "matrix_mma operands",
                )?;
                let lead_it = &items[lead];
                let (fa, fb, fc) = (
                    lead_it.slots(a, m * k),
                    lead_it.slots(b, k * n),
                    lead_it.slots(c, m * n),
                );
                let mul = value::binary_fn(crate::ir::BinaryOp::Mul, sc).unwrap_or(|a, _| a);
                let add = value::binary_fn(crate::ir::BinaryOp::Add, sc).unwrap_or(|a, _| a);
                let mut d = vec![0u64; (m * n) as usize];
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = fc[(i * n + j) as usize];
                        for kk in 0..k {
                            let x = value::cast(sa, sc, fa[(i * k + kk) as usize]);
                            let y = value::cast(sa, sc, fb[(kk * n + j) as usize]);
                            acc = add(acc, mul(x, y));
                        }
                        d[(i * n + j) as usize] = acc;
                    }
                }
                for &l in group {
                    items[l].slots_mut(dst, m * n).copy_from_slice(&d);
                    items[l].resume();
                }
                Ok(())
            }
            Inst::MStore {
                src,
                mem,
                off,
                stride,
                rows,
                cols,
                span,
            } => {
                self.collective(items, group, wave_len, func, span, "matrix_store")?;
                self.uniform(
                    items,
                    group,
                    &[(src, rows * cols), (off, 1), (stride, 1)],
                    func,
                    span,
                    "matrix_store operands",
                )?;
                let mut tile = items[lead].slots(src, rows * cols).to_vec();
                self.matrix_access(
                    &items[lead],
                    func,
                    span,
                    mem,
                    off,
                    stride,
                    rows,
                    cols,
                    &mut tile,
                    true,
                )?;
                for &l in group {
                    items[l].resume();
                }
                Ok(())
            }
            _ => unreachable!("resolve_wave at a non-wave instruction"),
        }
    }

    fn lane_state(&self, lane: u64, wave_len: usize) -> &'static str {
        if lane >= self.wave as u64 {
            "outside the wave"
        } else if lane as usize >= wave_len {
            "past the end of this partial wave"
        } else {
            "inactive"
        }
    }

    /// A cooperative-matrix verb needs every lane of the wave.
    fn collective(
        &self,
        items: &[Item],
        group: &[usize],
        wave_len: usize,
        func: u32,
        span: Span,
        what: &str,
    ) -> Res<()> {
        if group.len() == wave_len {
            return Ok(());
        }
        Err(self.ub(&items[group[0]], func, span, UbKind::BarrierDivergence, format!(
            "{what} is wave-collective, but only {} of the wave's {wave_len} lanes reached it together",
            group.len()
        )))
    }

    /// Operands that must hold the same slots in every lane of `group`.
    fn uniform(
        &self,
        items: &[Item],
        group: &[usize],
        ops: &[(Slot, u32)],
        func: u32,
        span: Span,
        what: &str,
    ) -> Res<()> {
        let lead = &items[group[0]];
        for &l in &group[1..] {
            for &(s, n) in ops {
                if items[l].slots(s, n) != lead.slots(s, n) {
                    return Err(self.ub(
                        &items[l],
                        func,
                        span,
                        UbKind::NonUniform,
                        format!(
                            "{what} differ between lanes {} and {} of the wave",
                            lead.lid % self.wave,
                            items[l].lid % self.wave
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads (`store == false`) or writes a `rows × cols` tile at `off`, rows `stride`
    /// elements apart, on behalf of work-item `it`.
    #[allow(clippy::too_many_arguments)]
    fn matrix_access(
        &mut self,
        it: &Item,
        func: u32,
        span: Span,
        mem: Mem,
        off: Slot,
        stride: Slot,
        rows: u32,
        cols: u32,
        tile: &mut [u64],
        store: bool,
    ) -> Res<()> {
        let (off, stride) = (it.slot(off), it.slot(stride));
        let (_, len, _) = self.region(mem);
        let who = self.who(it, span);
        let s = mem.scalar();
        let what = if store { "matrix_store" } else { "matrix_load" };
        for i in 0..u64::from(rows) {
            let row = off + i * stride;
            if row + u64::from(cols) > len {
                return Err(self.ub(
                    it,
                    func,
                    span,
                    UbKind::OutOfBounds,
                    format!(
                        "{what} row {i} covers elements {row}..{} of {}, which has {len}",
                        row + u64::from(cols),
                        self.mem_name(mem)
                    ),
                ));
            }
            let part =
                &mut tile[(i * u64::from(cols)) as usize..((i + 1) * u64::from(cols)) as usize];
            let r = if store {
                self.write_scalars(mem, row, s, part, Access::Write, who)
            } else {
                self.read_scalars(mem, row, s, part, Access::Read, who)
            };
            if let Err(f) = r {
                let (k, m) = self.fault_detail(mem, row, what, f);
                return Err(self.ub(it, func, span, k, m));
            }
        }
        Ok(())
    }
}

/// The value an atomic leaves in memory, given the old one.
fn atomic_result(op: AtomicOp, s: Scalar, old: u64, v: u64, cmp: u64) -> u64 {
    use crate::ir::{BinaryOp, MathFn};
    let f = match op {
        AtomicOp::Add => value::binary_fn(BinaryOp::Add, s),
        AtomicOp::Sub => value::binary_fn(BinaryOp::Sub, s),
        AtomicOp::Min => value::math2_fn(MathFn::Min, s),
        AtomicOp::Max => value::math2_fn(MathFn::Max, s),
        AtomicOp::And => value::binary_fn(BinaryOp::BitAnd, s),
        AtomicOp::Or => value::binary_fn(BinaryOp::BitOr, s),
        AtomicOp::Xor => value::binary_fn(BinaryOp::BitXor, s),
        AtomicOp::Exchange => return v,
        AtomicOp::CompareExchange => return if old == cmp { v } else { old },
        // CUDA's wrapping increment and decrement, comparing the bits unsigned.
        AtomicOp::Inc | AtomicOp::Dec => {
            let m = if s.bits() == 64 {
                u64::MAX
            } else {
                (1u64 << s.bits()) - 1
            };
            let (o, b) = (old & m, v & m);
            let r = if op == AtomicOp::Inc {
                if o >= b {
                    0
                } else {
                    o + 1
                }
            } else if o == 0 || o > b {
                b
            } else {
                o - 1
            };
            return canon(s, r);
        }
    };
    f.map_or(old, |f| f(old, v))
}
