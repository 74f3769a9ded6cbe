//! Statements under the execution mask.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    pub(super) fn frame(&self) -> &Frame<'m> {
        self.frames.last().expect("a frame")
    }

    pub(super) fn ty(&self, e: ExprId) -> Type {
        self.frame()
            .types
            .get(e.index())
            .copied()
            .flatten()
            .unwrap_or(Type::U32)
    }

    /// Lowers a block; returns whether its end is reachable (no unconditional jump away).
    pub(super) fn block(&mut self, stmts: &'m [Stmt]) -> Result<bool, Error> {
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

    pub(super) fn declare_local(&mut self, l: Handle<Local>) -> Slot {
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

    pub(super) fn local_slot(&mut self, l: Handle<Local>) -> Slot {
        match self.frame().locals.get(l.index()).cloned().flatten() {
            Some(s) => s,
            None => self.declare_local(l),
        }
    }

    pub(super) fn read_slot(&mut self, slot: &Slot, ty: Type) -> ExprValue {
        match slot {
            Slot::Uni(vs) => {
                ExprValue::Vals(vs.iter().map(|&v| Val::U(self.b.use_var(v))).collect())
            }
            Slot::Aff(v, k) => ExprValue::Vals(vec![Val::A(self.b.use_var(*v), *k)]),
            Slot::Var(cs) => ExprValue::Vals(cs.iter().map(|c| Val::V(self.use_vars(c))).collect()),
            Slot::Mat { off, .. } => {
                ExprValue::Mat(self.b.ins().iadd_imm_s(self.state, *off as i64))
            }
            Slot::Arr { .. } => {
                let _ = ty;
                ExprValue::Void
            }
        }
    }

    /// Writes `vals` to a local; `blend`: only the lanes of the exec mask.
    pub(super) fn write_slot(
        &mut self,
        slot: &Slot,
        s: Scalar,
        vals: &[Val],
        blend: bool,
    ) -> Result<(), Error> {
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

    pub(super) fn internal(&self, what: &str) -> Error {
        Error::internal(format!("internal lowering error: {what}")).in_function(&self.kernel_name)
    }

    pub(super) fn stmt(&mut self, st: &'m Stmt) -> Result<bool, Error> {
        match &st.kind {
            StmtKind::Let { local, init } => {
                let slot = self.declare_local(*local);
                if let Some(e) = init {
                    let ty = self.frame().f.locals[*local].ty;
                    match self.expr(*e)? {
                        ExprValue::Mat(p) => self.copy_mat(&slot, p),
                        ExprValue::Vals(v) => self.write_slot(&slot, scalar_of(ty), &v, false)?,
                        ExprValue::Void => {}
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
            StmtKind::Block(b) => return self.block(b),
            StmtKind::Break(label) => return self.break_stmt(label.as_deref(), true),
            StmtKind::Continue(label) => return self.break_stmt(label.as_deref(), false),
            StmtKind::Return(v) => return self.return_stmt(*v),
            StmtKind::Expr(e) => {
                self.expr(*e)?;
            }
            StmtKind::Barrier => self.barrier(),
            // A wave is one vector here, its lanes' accesses already in program order: the
            // fence keeps memory ordered across the barrier for the code generator too.
            StmtKind::Fence(_) | StmtKind::WaveBarrier => {
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
            StmtKind::Print { .. } | StmtKind::Assert { .. } => self.debug_stmt(st)?,
        }
        Ok(true)
    }

    pub(super) fn copy_mat(&mut self, slot: &Slot, src: Value) {
        if let Slot::Mat { off, n } = slot {
            let dst = self.b.ins().iadd_imm_s(self.state, *off as i64);
            for i in 0..*n {
                let v = self.b.ins().load(types::I64, notrap(), src, (i * 8) as i32);
                self.b.ins().store(notrap(), v, dst, (i * 8) as i32);
            }
        }
    }

    /// Whether an assignment to `l` must keep the lanes outside the exec mask.
    pub(super) fn needs_blend(&self, l: Handle<Local>) -> bool {
        self.frame()
            .an
            .blended
            .get(l.index())
            .copied()
            .unwrap_or(true)
    }

    pub(super) fn assign(&mut self, place: &Place, value: ExprId, span: Span) -> Result<(), Error> {
        match *place {
            Place::Local(l) => {
                let slot = self.local_slot(l);
                let ty = self.frame().f.locals[l].ty;
                let blend = self.needs_blend(l);
                match self.expr(value)? {
                    ExprValue::Mat(p) => self.copy_mat(&slot, p),
                    ExprValue::Vals(v) => self.write_slot(&slot, scalar_of(ty), &v, blend)?,
                    ExprValue::Void => {}
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
                let idx = ops.next().map(ExprValue::vals).unwrap_or_default();
                let v = ops.next().map(ExprValue::vals).unwrap_or_default();
                let idx = idx
                    .into_iter()
                    .next()
                    .unwrap_or(Val::U(self.b.ins().iconst(types::I32, 0)));
                self.store_elem(base, &idx, &v, span, 1)?;
            }
        }
        Ok(())
    }

    pub(super) fn if_stmt(
        &mut self,
        cond: ExprId,
        then_b: &'m [Stmt],
        else_b: &'m [Stmt],
    ) -> Result<bool, Error> {
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
    pub(super) fn if_affine(
        &mut self,
        cond: ExprId,
        then_b: &'m [Stmt],
        else_b: &'m [Stmt],
    ) -> Result<Option<bool>, Error> {
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
        let a = ops
            .next()
            .map(ExprValue::vals)
            .unwrap_or_default()
            .remove(0);
        let b = ops
            .next()
            .map(ExprValue::vals)
            .unwrap_or_default()
            .remove(0);
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
    pub(super) fn if_on(
        &mut self,
        c: Val,
        then_b: &'m [Stmt],
        else_b: &'m [Stmt],
    ) -> Result<bool, Error> {
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
    pub(super) fn after_divergent_exit(&mut self, a: &[Stmt], b: &[Stmt]) {
        if !exits(a) && !exits(b) {
            return;
        }
        self.check_empty();
    }

    pub(super) fn check_empty(&mut self) {
        let Some(&target) = self.regions.last() else {
            return;
        };
        let e = self.exec();
        let any = self.mask_any(&e);
        let cont = self.b.create_block();
        self.b.ins().brif(any, cont, &[], target, &[]);
        self.b.switch_to_block(cont);
    }

    pub(super) fn loop_stmt(
        &mut self,
        st: &'m Stmt,
        label: &Option<String>,
        kind: &LoopKind,
        body: &'m [Stmt],
    ) -> Result<bool, Error> {
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
        // `for var = init; cond; update`: the variable's first value.
        let mut cond_slot = None;
        if let LoopKind::Cond { var, init, .. } = kind {
            let s = scalar_of(self.frame().f.locals[*var].ty);
            let slot = self.declare_local(*var);
            let v0 = self.expr(*init)?.vals();
            self.write_slot(&slot, s, &v0, false)?;
            cond_slot = Some((s, slot));
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
            LoopKind::For { step, .. } => {
                let (var, s, slot, e, stp) = for_parts.clone().expect("for parts");
                let v = self.read_slot(&slot, Type::Scalar(s)).vals().remove(0);
                let _ = var;
                let e = self.unhold(&e);
                let lt = self.compare(BinaryOp::Lt, s, &v, &e);
                if step.is_some() && s.is_signed() {
                    // A negative step counts down: while `var > end`.
                    let stp = self.unhold(&stp);
                    let zero = Val::U(self.uconst(s, 0));
                    let neg = self.compare(BinaryOp::Lt, s, &stp, &zero);
                    let gt = self.compare(BinaryOp::Gt, s, &v, &e);
                    Some(self.select(Scalar::Bool, &neg, &gt, &lt))
                } else {
                    Some(lt)
                }
            }
            LoopKind::Cond { cond, .. } => Some(self.expr(*cond)?.vals().remove(0)),
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
        if let (Some((s, slot)), LoopKind::Cond { update, .. }) = (&cond_slot, kind) {
            // Like a `for` variable's step: the variable dies with the loop, so lanes that
            // left need no blending.
            let nv = self.expr(*update)?.vals();
            self.write_slot(slot, *s, &nv, false)?;
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
    pub(super) fn hold(&mut self, s: Scalar, v: Val) -> (Slot, Scalar) {
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

    pub(super) fn unhold(&mut self, h: &(Slot, Scalar)) -> Val {
        self.read_slot(&h.0, Type::Scalar(h.1)).vals().remove(0)
    }

    pub(super) fn break_stmt(
        &mut self,
        label: Option<&str>,
        is_break: bool,
    ) -> Result<bool, Error> {
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

    pub(super) fn return_stmt(&mut self, v: Option<ExprId>) -> Result<bool, Error> {
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
        if let (Some(slot), Some(ExprValue::Vals(vals))) = (&ret, &val) {
            let s = ret_ty.map(scalar_of).unwrap_or(Scalar::U32);
            let blend = matches!(slot, Slot::Var(_));
            self.write_slot(slot, s, vals, blend)?;
        }
        if let (Some(slot @ Slot::Mat { .. }), Some(ExprValue::Mat(p))) = (&ret, &val) {
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

    pub(super) fn barrier(&mut self) {
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
}
