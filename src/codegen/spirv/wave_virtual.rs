//! Virtual mode: waves of W > S lanes, staged through shared memory.
//!
//! A wave of W lanes spans W / S subgroups, which exchange values only through workgroup
//! memory, so a verb is emulated with two workgroup barriers: every invocation of the
//! workgroup writes its operand (as 32-bit words) and whether it is active into a scratch
//! array indexed by its linear local id, a barrier, each invocation combines its wave's W
//! entries (in ascending lane order, exactly as the interpreter folds), a barrier. For that
//! the whole workgroup must reach every verb together: a statement holding a verb is emitted
//! for everyone, its verbs evaluated first with the lanes that would not run it marked
//! inactive (their operands are evaluated under a guard), then the statement itself under that
//! guard. An `if` holding a verb becomes this predication of its branches (conditions
//! combined), so divergent verbs see exactly the active lanes of the semantics. A `for` loop
//! holding a verb is allowed where its bounds are workgroup-uniform and nothing jumps out of
//! it. What cannot be predicated — a verb inside a helper, a loop condition, a non-uniform or
//! predicated loop, after an early `return` — is refused by name.

use super::*;

impl Emitter<'_> {
    /// The expressions a statement evaluates itself (not those of its nested blocks).
    pub(super) fn stmt_roots(k: &StmtKind) -> Vec<ExprId> {
        match k {
            StmtKind::Let { init, .. } => init.iter().copied().collect(),
            StmtKind::Assign { place, value } => match place {
                Place::Element { index, .. } => vec![*index, *value],
                _ => vec![*value],
            },
            StmtKind::If { cond, .. } => vec![*cond],
            StmtKind::Loop { kind, .. } => match kind {
                LoopKind::Infinite => vec![],
                LoopKind::While(c) => vec![*c],
                LoopKind::For {
                    start, end, step, ..
                } => {
                    let mut v = vec![*start, *end];
                    v.extend(step.iter().copied());
                    v
                }
                LoopKind::Cond {
                    init, cond, update, ..
                } => vec![*init, *cond, *update],
            },
            StmtKind::Return(v) => v.iter().copied().collect(),
            StmtKind::Expr(e) => vec![*e],
            StmtKind::VStore { index, value, .. } => vec![*index, *value],
            StmtKind::MatrixStore {
                value,
                offset,
                stride,
                ..
            } => vec![*value, *offset, *stride],
            StmtKind::Print { args, .. } => args.clone(),
            StmtKind::Assert { cond, .. } => vec![*cond],
            StmtKind::Break(_)
            | StmtKind::Continue(_)
            | StmtKind::Barrier
            | StmtKind::WaveBarrier
            | StmtKind::Fence(_)
            | StmtKind::Block(_) => {
                vec![]
            }
        }
    }

    /// The wave verbs in `e`'s tree, operands before the verbs that use them.
    pub(super) fn verbs_in(&self, e: ExprId, out: &mut Vec<ExprId>) {
        let ex = &self.func().exprs[e];
        for o in ex.operands() {
            self.verbs_in(o, out);
        }
        if matches!(ex, Expr::Wave { .. }) {
            out.push(e);
        }
    }

    pub(super) fn stmt_has_verb(&self, s: &Stmt) -> bool {
        let mut v = Vec::new();
        for e in Self::stmt_roots(&s.kind) {
            self.verbs_in(e, &mut v);
        }
        // A wave barrier spans the wave's subgroups: the workgroup meets it together.
        !v.is_empty()
            || matches!(s.kind, StmtKind::WaveBarrier)
            || s.kind
                .blocks()
                .iter()
                .any(|b| b.iter().any(|s| self.stmt_has_verb(s)))
    }

    /// Whether a jump in `block` leaves it: a `return`, or a `break`/`continue` aimed at a
    /// loop outside `block` (`inner` holds the labels of the loops of `block` around the
    /// statements looked at). A loop inside `block` that breaks out of itself only, such
    /// as a compare-exchange retry loop, does not leave it.
    pub(super) fn jumps_out(block: &[Stmt], inner: &mut Vec<Option<String>>) -> bool {
        block.iter().any(|s| match &s.kind {
            StmtKind::Return(_) => true,
            StmtKind::Break(l) | StmtKind::Continue(l) => match l {
                None => inner.is_empty(),
                Some(name) => !inner.iter().any(|x| x.as_deref() == Some(name.as_str())),
            },
            StmtKind::Loop { label, body, .. } => {
                inner.push(label.clone());
                let out = Self::jumps_out(body, inner);
                inner.pop();
                out
            }
            k => k.blocks().iter().any(|b| Self::jumps_out(b, inner)),
        })
    }

    pub(super) fn has_return(block: &[Stmt]) -> bool {
        block.iter().any(|s| {
            matches!(s.kind, StmtKind::Return(_))
                || s.kind.blocks().iter().any(|b| Self::has_return(b))
        })
    }

    pub(super) fn assigns(block: &[Stmt], var: Handle<crate::ir::Local>) -> bool {
        block.iter().any(|s| {
            matches!(&s.kind, StmtKind::Assign { place: Place::Local(l), .. } if *l == var)
                || matches!(&s.kind, StmtKind::Assign { place: Place::Lane { local, .. }, .. } if *local == var)
                || s.kind.blocks().iter().any(|b| Self::assigns(b, var))
        })
    }

    /// Whether `e` has the same value in every invocation of the workgroup (conservatively:
    /// built from literals, value parameters, lengths and workgroup-wide built-ins).
    pub(super) fn is_uniform(&self, e: ExprId) -> bool {
        let ex = &self.func().exprs[e];
        match ex {
            Expr::Literal(_) | Expr::Param(_) | Expr::Len(_) | Expr::TemplateParam(_) => true,
            Expr::Builtin(b) => matches!(
                b,
                Builtin::GroupId(_)
                    | Builtin::NumGroups(_)
                    | Builtin::GroupSize(_)
                    | Builtin::WaveWidth
            ),
            Expr::Unary { .. }
            | Expr::Binary { .. }
            | Expr::Cast { .. }
            | Expr::Bitcast { .. }
            | Expr::Select { .. }
            | Expr::Compose { .. }
            | Expr::Splat { .. }
            | Expr::Extract { .. }
            | Expr::Swizzle { .. }
            | Expr::Math { .. }
            | Expr::Bits { .. } => ex.operands().into_iter().all(|o| self.is_uniform(o)),
            _ => false,
        }
    }

    /// Kernel-level conditions for emulating verbs in a virtual wave: no `return` that could
    /// come before a verb (the invocations that left would never reach its barriers).
    pub(super) fn check_virtual_kernel(&self, body: &[Stmt]) -> SpirvResult<()> {
        let Some(last) = body.iter().rposition(|s| self.stmt_has_verb(s)) else {
            return Ok(());
        };
        if Self::has_return(&body[..=last]) {
            return refuse(format!(
                "wave verbs after a return in a virtual wave (@wave({}) on subgroups of {}): \
                 the invocations that returned cannot join the shared-memory exchange",
                self.wave_w, self.caps.subgroup_size
            ));
        }
        Ok(())
    }

    /// Virtual verbs are emulated in this frame (the kernel's own body).
    pub(super) fn virtual_here(&self) -> bool {
        matches!(self.mode, WaveMode::Virtual { .. }) && self.frames.len() == 1
    }

    /// `if c { body }` as a selection construct; the predicate is off inside (the guard
    /// already holds it).
    pub(super) fn guarded(
        &mut self,
        c: Word,
        body: impl FnOnce(&mut Self) -> SpirvResult<()>,
    ) -> SpirvResult<()> {
        let g = self.guard_begin(c);
        let r = body(self);
        self.guard_end(g, r)
    }

    /// [`Emitter::guarded`] in two halves, for a body that cannot be a closure over the emitter:
    /// opens the construct (the body follows), and returns what [`Emitter::guard_end`] needs.
    pub(super) fn guard_begin(&mut self, c: Word) -> Guard {
        let (t, merge) = (self.b.id(), self.b.id());
        self.sel_merge(merge);
        self.branch_cond(c, t, merge);
        self.block(t);
        Guard {
            merge,
            saved: self.vpred.take(),
        }
    }

    /// Closes what [`Emitter::guard_begin`] opened, after a body that gave `r`.
    pub(super) fn guard_end(&mut self, g: Guard, r: SpirvResult<()>) -> SpirvResult<()> {
        self.vpred = g.saved;
        r?;
        self.branch(g.merge);
        self.block(g.merge);
        Ok(())
    }

    /// `e` evaluated only where the predicate holds (its type's zero elsewhere).
    pub(super) fn guarded_value(&mut self, e: ExprId) -> SpirvResult<Word> {
        let Some(p) = self.vpred else {
            return self.expr(e);
        };
        let t = self.value_ty(self.ty_of(e).unwrap_or(Type::U32))?;
        let v = self.fn_var(t);
        let z = self.b.constant_null(t);
        self.store(v, z);
        self.guarded(p, |em| {
            let x = em.expr(e)?;
            em.store(v, x);
            Ok(())
        })?;
        Ok(self.load(t, v))
    }

    /// Emits a statement of the kernel body in virtual mode.
    pub(super) fn virtual_stmt(&mut self, s: &Stmt) -> SpirvResult<()> {
        if !self.stmt_has_verb(s) {
            return match self.vpred {
                Some(p) => self.guarded(p, |em| em.stmt(s)),
                None => self.stmt(s),
            };
        }
        let depth = self.frames.len();
        let mut done = Vec::new();
        let r = (|| -> SpirvResult<()> {
            match &s.kind {
                StmtKind::If {
                    cond,
                    then_block,
                    else_block,
                } => {
                    self.pre_verbs(&[*cond], &mut done)?;
                    let c = self.guarded_value(*cond)?;
                    let bt = self.boolt();
                    let outer = self.vpred;
                    let nc = self.opi(Op::LogicalNot, bt, &[c]);
                    let (pt, pe) = match outer {
                        Some(p) => (
                            self.opi(Op::LogicalAnd, bt, &[p, c]),
                            self.opi(Op::LogicalAnd, bt, &[p, nc]),
                        ),
                        None => (c, nc),
                    };
                    self.vpred = Some(pt);
                    let r = self.emit_block(then_block);
                    self.vpred = Some(pe);
                    let r = r.and_then(|_| self.emit_block(else_block));
                    self.vpred = outer;
                    r
                }
                StmtKind::Block(b) => self.emit_block(b),
                StmtKind::Loop { label, kind, body } => {
                    let why = if self.vpred.is_some() {
                        Some("inside a branch")
                    } else if Self::jumps_out(body, &mut Vec::new()) {
                        Some("with a break, continue or return")
                    } else {
                        match kind {
                            LoopKind::For {
                                var,
                                start,
                                end,
                                step,
                            } => {
                                let uniform = self.is_uniform(*start)
                                    && self.is_uniform(*end)
                                    && step.is_none_or(|x| self.is_uniform(x));
                                if !uniform {
                                    Some("whose bounds are not workgroup-uniform")
                                } else if Self::assigns(body, *var) {
                                    Some("that assigns its variable")
                                } else {
                                    None
                                }
                            }
                            _ => Some("that is not a `for` loop"),
                        }
                    };
                    if let Some(why) = why {
                        return refuse(format!(
                            "a wave verb in a loop {why} in a virtual wave (@wave({}) on \
                             subgroups of {}): the whole workgroup must reach it together",
                            self.wave_w, self.caps.subgroup_size
                        ));
                    }
                    self.emit_loop(label, kind, body)
                }
                StmtKind::WaveBarrier => {
                    // The wave spans several subgroups: a workgroup barrier, met by every
                    // invocation (a lane predicated off included), orders their accesses.
                    self.wg_barrier();
                    Ok(())
                }
                _ => {
                    self.pre_verbs(&Self::stmt_roots(&s.kind), &mut done)?;
                    match self.vpred {
                        Some(p) => self.guarded(p, |em| em.stmt(s)),
                        None => self.stmt(s),
                    }
                }
            }
        })();
        for e in done {
            self.lane_vals.remove(&(depth, e));
        }
        r
    }

    /// Emulates the verbs in `roots` (innermost first) for the whole workgroup; their values
    /// are then what the statement reads.
    pub(super) fn pre_verbs(
        &mut self,
        roots: &[ExprId],
        done: &mut Vec<ExprId>,
    ) -> SpirvResult<()> {
        let mut verbs = Vec::new();
        for &e in roots {
            self.verbs_in(e, &mut verbs);
        }
        if verbs.iter().any(|&v| self.under_if_arm(roots, v)) {
            return refuse(format!(
                "a wave verb in an `if` expression's arm in a virtual wave (@wave({}) on \
                 subgroups of {}): the whole workgroup must reach it together",
                self.wave_w, self.caps.subgroup_size
            ));
        }
        let depth = self.frames.len();
        for v in verbs {
            let Expr::Wave { op, args, width } = self.func().exprs[v].clone() else {
                continue;
            };
            let mut vals = Vec::new();
            for &a in &args {
                vals.push(self.guarded_value(a)?);
            }
            let ty = self.ty_of(v);
            let r = self.virtual_verb(op, &args, &vals, ty, width)?;
            self.lane_vals.insert((depth, v), r);
            done.push(v);
        }
        Ok(())
    }

    /// Whether verb `v` lies in an arm of an `if` expression of the trees `roots`.
    fn under_if_arm(&self, roots: &[ExprId], v: ExprId) -> bool {
        let f = self.func();
        let mut stack: Vec<(ExprId, bool)> = roots.iter().map(|&r| (r, false)).collect();
        while let Some((e, in_arm)) = stack.pop() {
            if e == v {
                return in_arm;
            }
            match &f.exprs[e] {
                Expr::IfElse {
                    cond,
                    accept,
                    reject,
                } => {
                    stack.push((*cond, in_arm));
                    stack.push((*accept, true));
                    stack.push((*reject, true));
                }
                x => stack.extend(x.operands().into_iter().map(|o| (o, in_arm))),
            }
        }
        false
    }

    /// The number of invocations of the workgroup (a spec constant from the block size).
    pub(super) fn invocations(&mut self) -> Word {
        if let Some(n) = self.vw_invocations {
            return n;
        }
        let u = self.u32t();
        let [x, y, z] = self.block_spec;
        let mul = |em: &mut Self, a: Word, b: Word| {
            let id = em.b.id();
            em.b.module_mut().types_global_values.push(Instruction::new(
                Op::SpecConstantOp,
                Some(u),
                Some(id),
                vec![
                    Operand::LiteralSpecConstantOpInteger(Op::IMul),
                    Operand::IdRef(a),
                    Operand::IdRef(b),
                ],
            ));
            id
        };
        let xy = mul(self, x, y);
        let n = mul(self, xy, z);
        self.vw_invocations = Some(n);
        n
    }

    /// A pointer to word `k` (0: the active flag) of invocation `at` in the scratch array.
    pub(super) fn scratch_ptr(&mut self, k: u32, at: Word) -> Word {
        let u = self.u32t();
        if self.vw_scratch == 0 {
            self.vw_scratch = self.b.id();
        }
        let idx = if k == 0 {
            at
        } else {
            let n = self.invocations();
            let kk = self.cu32(k);
            let off = self.opi(Op::IMul, u, &[n, kk]);
            self.opi(Op::IAdd, u, &[off, at])
        };
        let pt = self.tk(TyKey::Ptr(StorageClass::Workgroup, u));
        let var = self.vw_scratch;
        self.opi(Op::AccessChain, pt, &[var, idx])
    }

    /// Declares the scratch array once every verb has said how many words it stages.
    pub(super) fn declare_scratch(&mut self) {
        if self.vw_scratch == 0 {
            return;
        }
        let u = self.u32t();
        let n = self.invocations();
        let k = self.cu32(self.vw_words + 1);
        let len = self.b.id();
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::SpecConstantOp,
                Some(u),
                Some(len),
                vec![
                    Operand::LiteralSpecConstantOpInteger(Op::IMul),
                    Operand::IdRef(n),
                    Operand::IdRef(k),
                ],
            ));
        let at = self.b.type_array(u, len);
        let pt = self.b.type_pointer(None, StorageClass::Workgroup, at);
        let var = self.vw_scratch;
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::Variable,
                Some(pt),
                Some(var),
                vec![Operand::StorageClass(StorageClass::Workgroup)],
            ));
    }

    pub(super) fn wg_barrier(&mut self) {
        let wg = self.cu32(SCOPE_WORKGROUP);
        let sem = self.cu32(SEM_ACQ_REL | SEM_WORKGROUP);
        self.op_void(
            Op::ControlBarrier,
            vec![
                Operand::IdScope(wg),
                Operand::IdScope(wg),
                Operand::IdMemorySemantics(sem),
            ],
        );
    }

    /// A scalar as 32-bit words (one, or two for 64-bit types; low word first).
    pub(super) fn encode_words(&mut self, v: Word, s: Scalar) -> SpirvResult<Vec<Word>> {
        let u = self.u32t();
        Ok(match s {
            Scalar::Bool => {
                let (one, zero) = (self.cu32(1), self.cu32(0));
                vec![self.opi(Op::Select, u, &[v, one, zero])]
            }
            Scalar::U32 => vec![v],
            Scalar::I32 | Scalar::F32 => vec![self.opi(Op::Bitcast, u, &[v])],
            Scalar::F16 => {
                let f = self.scalar_ty(Scalar::F32)?;
                let w = self.opi(Op::FConvert, f, &[v]);
                vec![self.opi(Op::Bitcast, u, &[w])]
            }
            Scalar::I8 | Scalar::U8 | Scalar::I16 | Scalar::U16 => {
                let us = if s.bits() == 8 {
                    Scalar::U8
                } else {
                    Scalar::U16
                };
                let x = self.cast(v, s, us, 1)?;
                vec![self.opi(Op::UConvert, u, &[x])]
            }
            _ => {
                let u64t = self.scalar_ty(Scalar::U64)?;
                let x = if s == Scalar::U64 {
                    v
                } else {
                    self.opi(Op::Bitcast, u64t, &[v])
                };
                let sh = self.konst(u64t, 32);
                let hi = self.opi(Op::ShiftRightLogical, u64t, &[x, sh]);
                vec![
                    self.opi(Op::UConvert, u, &[x]),
                    self.opi(Op::UConvert, u, &[hi]),
                ]
            }
        })
    }

    pub(super) fn decode_words(&mut self, w: &[Word], s: Scalar) -> SpirvResult<Word> {
        let t = self.scalar_ty(s)?;
        Ok(match s {
            Scalar::Bool => {
                let z = self.cu32(0);
                self.opi(Op::INotEqual, t, &[w[0], z])
            }
            Scalar::U32 => w[0],
            Scalar::I32 | Scalar::F32 => self.opi(Op::Bitcast, t, &[w[0]]),
            Scalar::F16 => {
                let f = self.scalar_ty(Scalar::F32)?;
                let x = self.opi(Op::Bitcast, f, &[w[0]]);
                self.opi(Op::FConvert, t, &[x])
            }
            Scalar::I8 | Scalar::U8 | Scalar::I16 | Scalar::U16 => {
                let us = if s.bits() == 8 {
                    Scalar::U8
                } else {
                    Scalar::U16
                };
                let ut = self.scalar_ty(us)?;
                let x = self.opi(Op::UConvert, ut, &[w[0]]);
                self.cast(x, us, s, 1)?
            }
            _ => {
                let u64t = self.scalar_ty(Scalar::U64)?;
                let lo = self.opi(Op::UConvert, u64t, &[w[0]]);
                let hi = self.opi(Op::UConvert, u64t, &[w[1]]);
                let sh = self.konst(u64t, 32);
                let hi = self.opi(Op::ShiftLeftLogical, u64t, &[hi, sh]);
                let x = self.opi(Op::BitwiseOr, u64t, &[lo, hi]);
                if s == Scalar::U64 {
                    x
                } else {
                    self.opi(Op::Bitcast, t, &[x])
                }
            }
        })
    }

    /// Words per lane of scalar `s`.
    pub(super) fn words_of(s: Scalar) -> u32 {
        if s.bits() == 64 {
            2
        } else {
            1
        }
    }

    /// The staged value of invocation `at` (a value of `lanes` lanes of `s`).
    pub(super) fn read_staged(&mut self, at: Word, s: Scalar, lanes: u8) -> SpirvResult<Word> {
        let per = Self::words_of(s);
        let mut ls = Vec::new();
        let u = self.u32t();
        for k in 0..lanes as u32 {
            let mut ws = Vec::new();
            for i in 0..per {
                let p = self.scratch_ptr(1 + k * per + i, at);
                ws.push(self.load(u, p));
            }
            ls.push(self.decode_words(&ws, s)?);
        }
        if lanes == 1 {
            return Ok(ls[0]);
        }
        let t = self.vec_ty(s, lanes)?;
        Ok(self.opi(Op::CompositeConstruct, t, &ls))
    }

    /// Whether invocation `at` exists and was active at the verb, and `at` made safe to read.
    pub(super) fn staged_active(&mut self, at: Word) -> (Word, Word) {
        let u = self.u32t();
        let bt = self.boolt();
        let n = self.invocations();
        let inb = self.opi(Op::ULessThan, bt, &[at, n]);
        let zero = self.cu32(0);
        let safe = self.opi(Op::Select, u, &[inb, at, zero]);
        let p = self.scratch_ptr(0, safe);
        let a = self.load(u, p);
        let a = self.opi(Op::INotEqual, bt, &[a, zero]);
        (self.opi(Op::LogicalAnd, bt, &[inb, a]), safe)
    }

    /// `for j in 0..n { body(j) }` as a loop construct.
    pub(super) fn counted_loop(
        &mut self,
        n: u32,
        mut body: impl FnMut(&mut Self, Word) -> SpirvResult<()>,
    ) -> SpirvResult<()> {
        let u = self.u32t();
        let bt = self.boolt();
        let jv = self.fn_var(u);
        let zero = self.cu32(0);
        self.store(jv, zero);
        let (header, condb, bodyb, cont, merge) = (
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
        );
        self.branch(header);
        self.block(header);
        self.loop_header(merge, cont);
        self.branch(condb);
        self.block(condb);
        let j = self.load(u, jv);
        let nn = self.cu32(n);
        let c = self.opi(Op::ULessThan, bt, &[j, nn]);
        self.branch_cond(c, bodyb, merge);
        self.block(bodyb);
        body(self, j)?;
        self.branch(cont);
        self.block(cont);
        let j = self.load(u, jv);
        let one = self.cu32(1);
        let j1 = self.opi(Op::IAdd, u, &[j, one]);
        self.store(jv, j1);
        self.branch(header);
        self.block(merge);
        Ok(())
    }

    /// `a <op> b` for a reduction on scalar `s`.
    pub(super) fn combine(&mut self, r: ReduceOp, s: Scalar, t: Word, a: Word, b: Word) -> Word {
        match r {
            ReduceOp::Sum if s.is_float() => self.fop(Op::FAdd, t, &[a, b]),
            ReduceOp::Sum => self.opi(Op::IAdd, t, &[a, b]),
            ReduceOp::Min | ReduceOp::Max => {
                let i = match (r == ReduceOp::Min, s) {
                    (true, s) if s.is_float() => glsl::NMIN,
                    (false, s) if s.is_float() => glsl::NMAX,
                    (true, s) if s.is_signed() => glsl::SMIN,
                    (false, s) if s.is_signed() => glsl::SMAX,
                    (true, _) => glsl::UMIN,
                    (false, _) => glsl::UMAX,
                };
                self.ext_inst(t, i, &[a, b])
            }
            ReduceOp::And if s == Scalar::Bool => self.opi(Op::LogicalAnd, t, &[a, b]),
            ReduceOp::Or if s == Scalar::Bool => self.opi(Op::LogicalOr, t, &[a, b]),
            ReduceOp::Xor if s == Scalar::Bool => self.opi(Op::LogicalNotEqual, t, &[a, b]),
            ReduceOp::And => self.opi(Op::BitwiseAnd, t, &[a, b]),
            ReduceOp::Or => self.opi(Op::BitwiseOr, t, &[a, b]),
            ReduceOp::Xor => self.opi(Op::BitwiseXor, t, &[a, b]),
        }
    }

    /// One verb for the whole workgroup: stage, barrier, combine the wave's lanes, barrier.
    pub(super) fn virtual_verb(
        &mut self,
        op: WaveOp,
        args: &[ExprId],
        vals: &[Word],
        ty: Option<Type>,
        width: Option<u32>,
    ) -> SpirvResult<Word> {
        let u = self.u32t();
        let bt = self.boolt();
        // A tile of `width` lanes is a wave of that many for the exchange (lanes and the
        // fold count within it); a width above the wave is the wave.
        let w = width.map_or(self.wave_w, |t| t.min(self.wave_w));
        let t = self.value_ty(ty.unwrap_or(Type::BOOL))?;
        let (s, lanes) = if args.is_empty() {
            (Scalar::Bool, 1)
        } else {
            self.sl(args[0])
        };
        let lidv = self.builtin(spirv::BuiltIn::LocalInvocationIndex, u);
        let lid = self.load(u, lidv);
        let m = self.cu32(w - 1);
        let lane = self.opi(Op::BitwiseAnd, u, &[lid, m]);
        let nm = self.cu32(!(w - 1));
        let base = self.opi(Op::BitwiseAnd, u, &[lid, nm]);
        // Stage: the active flag, then the operand's words.
        let act = match self.vpred {
            Some(p) => {
                let (one, zero) = (self.cu32(1), self.cu32(0));
                self.opi(Op::Select, u, &[p, one, zero])
            }
            None => self.cu32(1),
        };
        let p0 = self.scratch_ptr(0, lid);
        self.store(p0, act);
        if op != WaveOp::Elect {
            let mut k = 1;
            for l in 0..lanes {
                let x = self.lane_of(vals[0], s, lanes, l)?;
                for wd in self.encode_words(x, s)? {
                    let p = self.scratch_ptr(k, lid);
                    self.store(p, wd);
                    k += 1;
                }
            }
            self.vw_words = self.vw_words.max(k - 1);
        }
        self.wg_barrier();
        let result = match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let acc = self.fn_var(t);
                let first = self.fn_var(bt);
                let tr = self.konst(bt, 1);
                let fa = self.konst(bt, 0);
                self.store(first, tr);
                let id = self.const_of(s, 1, Self::identity_bits(r, s))?;
                self.store(acc, id);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, safe) = em.staged_active(at);
                    let c = match op {
                        WaveOp::InclusiveScan(_) => {
                            let le = em.opi(Op::ULessThanEqual, bt, &[j, lane]);
                            em.opi(Op::LogicalAnd, bt, &[a, le])
                        }
                        WaveOp::ExclusiveScan(_) => {
                            let lt = em.opi(Op::ULessThan, bt, &[j, lane]);
                            em.opi(Op::LogicalAnd, bt, &[a, lt])
                        }
                        _ => a,
                    };
                    em.guarded(c, |em| {
                        let x = em.read_staged(safe, s, 1)?;
                        let f = em.load(bt, first);
                        let cur = em.load(t, acc);
                        let comb = em.combine(r, s, t, cur, x);
                        let nv = em.opi(Op::Select, t, &[f, x, comb]);
                        em.store(acc, nv);
                        em.store(first, fa);
                        Ok(())
                    })
                })?;
                self.load(t, acc)
            }
            WaveOp::Broadcast
            | WaveOp::Shuffle
            | WaveOp::ShuffleXor
            | WaveOp::ShuffleUp
            | WaveOp::ShuffleDown
            | WaveOp::Rotate => {
                let (ls, _) = self.sl(args[1]);
                let d = self.cast(vals[1], ls, Scalar::U32, 1)?;
                let width = self.cu32(w);
                let mask = self.cu32(w - 1);
                let src = match op {
                    WaveOp::Broadcast | WaveOp::Shuffle => {
                        // A lane outside the wave is UB: read one inside it.
                        self.opi(Op::BitwiseAnd, u, &[d, mask])
                    }
                    WaveOp::ShuffleXor => {
                        let x = self.opi(Op::BitwiseXor, u, &[lane, d]);
                        let ok = self.opi(Op::ULessThan, bt, &[x, width]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleUp => {
                        let ok = self.opi(Op::ULessThanEqual, bt, &[d, lane]);
                        let x = self.opi(Op::ISub, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleDown => {
                        let room = self.opi(Op::ISub, u, &[width, lane]);
                        let ok = self.opi(Op::ULessThan, bt, &[d, room]);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    _ => {
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::BitwiseAnd, u, &[x, mask])
                    }
                };
                let at = self.opi(Op::IAdd, u, &[base, src]);
                // A lane missing from a partial wave is UB: read our own.
                let n = self.invocations();
                let inb = self.opi(Op::ULessThan, bt, &[at, n]);
                let at = self.opi(Op::Select, u, &[inb, at, lid]);
                self.read_staged(at, s, lanes)?
            }
            WaveOp::Ballot => {
                let u64t = self.scalar_ty(Scalar::U64)?;
                let acc = self.fn_var(u64t);
                let z = self.konst(u64t, 0);
                self.store(acc, z);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, safe) = em.staged_active(at);
                    em.guarded(a, |em| {
                        let p = em.read_staged(safe, Scalar::Bool, 1)?;
                        let one = em.konst(u64t, 1);
                        let zero = em.konst(u64t, 0);
                        let j64 = em.opi(Op::UConvert, u64t, &[j]);
                        let bit = em.opi(Op::ShiftLeftLogical, u64t, &[one, j64]);
                        let bit = em.opi(Op::Select, u64t, &[p, bit, zero]);
                        let cur = em.load(u64t, acc);
                        let nv = em.opi(Op::BitwiseOr, u64t, &[cur, bit]);
                        em.store(acc, nv);
                        Ok(())
                    })
                })?;
                let r = self.load(u64t, acc);
                if t == u64t {
                    r
                } else {
                    self.opi(Op::Bitcast, t, &[r])
                }
            }
            WaveOp::Any | WaveOp::All => {
                let any = op == WaveOp::Any;
                let acc = self.fn_var(bt);
                let init = self.konst(bt, !any as u64);
                self.store(acc, init);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, safe) = em.staged_active(at);
                    em.guarded(a, |em| {
                        let p = em.read_staged(safe, Scalar::Bool, 1)?;
                        let cur = em.load(bt, acc);
                        let o = if any { Op::LogicalOr } else { Op::LogicalAnd };
                        let nv = em.opi(o, bt, &[cur, p]);
                        em.store(acc, nv);
                        Ok(())
                    })
                })?;
                self.load(bt, acc)
            }
            WaveOp::Elect => {
                let low = self.fn_var(u);
                let wc = self.cu32(w);
                self.store(low, wc);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, _) = em.staged_active(at);
                    let cur = em.load(u, low);
                    let m = em.ext_inst(u, glsl::UMIN, &[cur, j]);
                    let nv = em.opi(Op::Select, u, &[a, m, cur]);
                    em.store(low, nv);
                    Ok(())
                })?;
                let l = self.load(u, low);
                self.opi(Op::IEqual, bt, &[lane, l])
            }
        };
        // Everyone has read the scratch before the next verb writes it.
        self.wg_barrier();
        Ok(result)
    }
}
