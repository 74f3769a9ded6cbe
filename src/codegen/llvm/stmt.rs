//! Statements: blocks, assignments, loops, and the escape and reconvergence machinery of
//! structured control flow.

use super::*;

impl<'a, 'ctx> FnCx<'a, 'ctx> {
    pub(super) fn block(&mut self, stmts: &[Stmt]) -> LResult<()> {
        for s in stmts {
            self.span = s.span;
            self.stmt(s)?;
        }
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> LResult<()> {
        match &s.kind {
            StmtKind::Let { local, init } => {
                if let Some(init) = init {
                    let v = self.value(*init)?;
                    let slot = self.local_slot(*local)?;
                    self.b().build_store(slot, v)?;
                }
            }
            StmtKind::Assign { place, value } => self.assign(place, *value)?,
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.value(*cond)?.into_int_value();
                let sync = self.converge_begin()?;
                let then_bb = self.cx.context.append_basic_block(self.llfn, "then");
                let else_bb = self.cx.context.append_basic_block(self.llfn, "else");
                let merge = self.cx.context.append_basic_block(self.llfn, "endif");
                self.b().build_conditional_branch(c, then_bb, else_bb)?;
                self.enter_sync(sync, merge);
                self.b().position_at_end(then_bb);
                let r = self.block(then_block);
                if r.is_ok() && self.open() {
                    self.b().build_unconditional_branch(merge)?;
                }
                self.b().position_at_end(else_bb);
                let r = r.and_then(|()| self.block(else_block));
                if r.is_ok() && self.open() {
                    self.b().build_unconditional_branch(merge)?;
                }
                self.leave_sync(sync);
                r?;
                self.b().position_at_end(merge);
                self.converge_end(sync)?;
                if sync.is_some() && self.escapes_from(&[then_block, else_block], None) {
                    self.dispatch_escape()?;
                }
            }
            StmtKind::Loop { label, kind, body } => self.loop_stmt(label, kind, body)?,
            StmtKind::Block(b) => self.block(b)?,
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                let is_break = matches!(s.kind, StmtKind::Break(_));
                let frame = match label {
                    None => self.loops.last(),
                    Some(l) => self
                        .loops
                        .iter()
                        .rev()
                        .find(|f| f.label.as_deref() == Some(l)),
                };
                let Some(frame) = frame else {
                    return self.err(codes::INPUT, "`break`/`continue` outside its loop");
                };
                let to = if is_break { frame.brk } else { frame.cont };
                let k = self
                    .loops
                    .iter()
                    .rposition(|f| f.brk == frame.brk)
                    .expect("the frame is on the stack");
                match self.syncs.last() {
                    // A synced construct inside loop `k` is in the way: through its merge.
                    Some(sync) if sync.loops > k => {
                        let merge = sync.merge;
                        self.set_escape(1 + 2 * k as u64 + (!is_break) as u64)?;
                        self.b().build_unconditional_branch(merge)?;
                    }
                    _ => {
                        self.b().build_unconditional_branch(to)?;
                    }
                }
                self.dead_block();
            }
            StmtKind::Return(v) => {
                let v = v.map(|e| self.value(e)).transpose()?;
                match self.syncs.last() {
                    // A helper's return inside synced constructs goes out through their
                    // merges (a kernel's return ends the lane, which holds up no wait).
                    Some(sync) if !self.is_kernel => {
                        let merge = sync.merge;
                        if let Some(v) = v {
                            let slot = self.return_slot(v.get_type())?;
                            self.b().build_store(slot, v)?;
                        }
                        self.set_escape(ESCAPE_RETURN)?;
                        self.b().build_unconditional_branch(merge)?;
                    }
                    _ => {
                        self.b().build_return(v.as_ref().map(|v| v as _))?;
                    }
                }
                self.dead_block();
            }
            StmtKind::Expr(e) => {
                self.expr(*e)?;
            }
            StmtKind::Barrier => self.t.barrier(self.cx)?,
            StmtKind::Fence(scope) => self.t.fence(self.cx, *scope)?,
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                let v = self.value(*value)?;
                let vty = self.ty(*value)?;
                let lanes = vty.lanes().unwrap_or(1) as u32;
                let (ptr, elem) = self.vector_ptr(*base, *index, lanes, *align)?;
                self.last_ok = None;
                let a = self.vector_align(*base, *index, elem.scalar, lanes, *align);
                let st = self
                    .b()
                    .build_store(ptr, self.value_to_mem(v, elem.scalar)?)?;
                st.set_alignment(a)
                    .map_err(|e| LowerError::new(codes::LLVM, e.to_string()))?;
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                let v = self.value(*value)?;
                let Type::Matrix {
                    scalar, rows, cols, ..
                } = self.ty(*value)?
                else {
                    return self.err(codes::INPUT, "matrix_store of a non-fragment");
                };
                let off = self.value(*offset)?.into_int_value();
                let stride = self.value(*stride)?.into_int_value();
                self.note_matrix(
                    super::matrix::Verb::Store,
                    ir::MatrixRole::Acc,
                    scalar,
                    rows,
                    cols,
                    0,
                    scalar,
                );
                if self.cx.software_matrices.get() {
                    self.sw_store(scalar, v, *base, off, stride, rows, cols)?;
                } else {
                    let ptr = self.scalar_ptr(*base, off)?;
                    self.t.matrix_store(self.cx, scalar, v, ptr, stride)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn local_slot(&self, l: Handle<ir::Local>) -> LResult<PointerValue<'ctx>> {
        match self.locals.get(l.index()).copied().flatten() {
            Some(p) => Ok(p),
            None => self.err(codes::INPUT, "a local without a slot"),
        }
    }

    pub(super) fn assign(&mut self, place: &Place, value: ExprId) -> LResult<()> {
        match place {
            Place::Local(l) => {
                let v = self.value(value)?;
                let slot = self.local_slot(*l)?;
                self.b().build_store(slot, v)?;
            }
            Place::Lane { local, lane } => {
                let v = self.value(value)?;
                let slot = self.local_slot(*local)?;
                let lty = self.vt(self.f.locals[*local].ty)?;
                let cur = self.b().build_load(lty, slot, "")?.into_vector_value();
                let new = self
                    .b()
                    .build_insert_element(cur, v, self.cx.i32(*lane as u64), "")?;
                self.b().build_store(slot, new)?;
            }
            Place::Element { base, index } => {
                // Index first, then value: the printed source's order (`b[i] = v`).
                let (ptr, elem) = self.element_ptr(*base, *index)?;
                self.last_ok = None;
                let v = self.value(value)?;
                let st = self
                    .b()
                    .build_store(ptr, self.value_to_mem(v, elem.scalar)?)?;
                st.set_alignment(natural_align(elem.size()).max(natural_align(elem.scalar.size())))
                    .map_err(|e| LowerError::new(codes::LLVM, e.to_string()))?;
            }
        }
        Ok(())
    }

    pub(super) fn loop_stmt(
        &mut self,
        label: &Option<String>,
        kind: &LoopKind,
        body: &[Stmt],
    ) -> LResult<()> {
        let ctx = self.cx.context;
        let header = ctx.append_basic_block(self.llfn, "loop");
        let body_bb = ctx.append_basic_block(self.llfn, "body");
        let latch = ctx.append_basic_block(self.llfn, "latch");
        let exit = ctx.append_basic_block(self.llfn, "endloop");
        let sync = self.converge_begin()?;
        let mut for_state = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let s = self.value(*start)?;
            let e = self.value(*end)?;
            let st = match step {
                Some(st) => self.value(*st)?,
                None => {
                    let t = self.vt(self.f.locals[*var].ty)?;
                    t.into_int_type().const_int(1, false).into()
                }
            };
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, s)?;
            let signed = self.f.locals[*var]
                .ty
                .scalar()
                .is_some_and(|s| s.is_signed());
            for_state = Some((slot, e.into_int_value(), st.into_int_value(), signed));
        }
        if let LoopKind::Cond { var, init, .. } = kind {
            let v = self.value(*init)?;
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, v)?;
        }
        self.b().build_unconditional_branch(header)?;
        self.b().position_at_end(header);
        match kind {
            LoopKind::Infinite => {
                self.b().build_unconditional_branch(body_bb)?;
            }
            LoopKind::While(c) => {
                let c = self.value(*c)?.into_int_value();
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
            LoopKind::For { .. } => {
                let (slot, end, step_v, signed) = for_state.expect("for state");
                let v = self
                    .b()
                    .build_load(end.get_type(), slot, "")?
                    .into_int_value();
                let pred = if signed {
                    IntPredicate::SLT
                } else {
                    IntPredicate::ULT
                };
                let mut c = self.b().build_int_compare(pred, v, end, "")?;
                if let (LoopKind::For { step: Some(_), .. }, true) = (kind, signed) {
                    // A negative step counts down: while `var > end`.
                    let zero = step_v.get_type().const_zero();
                    let neg = self
                        .b()
                        .build_int_compare(IntPredicate::SLT, step_v, zero, "")?;
                    let gt = self.b().build_int_compare(IntPredicate::SGT, v, end, "")?;
                    c = self.b().build_select(neg, gt, c, "")?.into_int_value();
                }
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
            LoopKind::Cond { cond, .. } => {
                let c = self.value(*cond)?.into_int_value();
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
        }
        self.enter_sync(sync, exit);
        self.loops.push(LoopFrame {
            label: label.clone(),
            brk: exit,
            cont: latch,
        });
        self.b().position_at_end(body_bb);
        let r = self.block(body);
        self.loops.pop();
        self.leave_sync(sync);
        r?;
        if self.open() {
            self.b().build_unconditional_branch(latch)?;
        }
        self.b().position_at_end(latch);
        if let Some((slot, end, step, _)) = for_state {
            let v = self
                .b()
                .build_load(end.get_type(), slot, "")?
                .into_int_value();
            let n = self.b().build_int_add(v, step, "")?;
            self.b().build_store(slot, n)?;
        }
        if let LoopKind::Cond { var, update, .. } = kind {
            let v = self.value(*update)?;
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, v)?;
        }
        self.b().build_unconditional_branch(header)?;
        self.b().position_at_end(exit);
        self.converge_end(sync)?;
        if sync.is_some() && self.escapes_from(&[body], Some(label)) {
            self.dispatch_escape()?;
        }
        Ok(())
    }

    /// On entry to an if or a loop in a function that uses wave verbs: the mask of the lanes
    /// arriving together, which the target waits for again at the merge point
    /// (`converge_end`), since the IR's lanes reconverge at the end of every if/loop and wave
    /// verbs rely on it (NVIDIA's independent thread scheduling does not promise it). Lanes
    /// that leave the construct early pass through its merge too (`SyncFrame`), so all of
    /// them arrive. A kernel's `return` ends the lane, and ended lanes do not hold up a warp
    /// sync.
    pub(super) fn converge_begin(&self) -> LResult<Option<IntValue<'ctx>>> {
        if !self.sync_waves || !self.open() {
            return Ok(None);
        }
        self.t.converge_begin(self.cx)
    }

    pub(super) fn enter_sync(&mut self, sync: Option<IntValue<'ctx>>, merge: BasicBlock<'ctx>) {
        if sync.is_some() {
            self.syncs.push(SyncFrame {
                merge,
                loops: self.loops.len(),
            });
        }
    }

    pub(super) fn leave_sync(&mut self, sync: Option<IntValue<'ctx>>) {
        if sync.is_some() {
            self.syncs.pop();
        }
    }

    /// Whether lanes can leave `blocks` (of a loop labelled `looping`, when it is one) other
    /// than by falling off their end.
    pub(super) fn escapes_from(
        &self,
        blocks: &[&[Stmt]],
        looping: Option<&Option<String>>,
    ) -> bool {
        let inner: Vec<Option<String>> = looping.into_iter().cloned().collect();
        blocks
            .iter()
            .any(|b| escapes(b, &mut inner.clone(), !self.is_kernel))
    }

    pub(super) fn set_escape(&mut self, code: u64) -> LResult<()> {
        let slot = self
            .escape_slot
            .ok_or_else(|| LowerError::new(codes::LLVM, "an escape without its slot"))?;
        let i32t = self.cx.context.i32_type();
        self.b().build_store(slot, i32t.const_int(code, false))?;
        Ok(())
    }

    pub(super) fn return_slot(&mut self, ty: BasicTypeEnum<'ctx>) -> LResult<PointerValue<'ctx>> {
        if let Some(s) = self.return_slot {
            return Ok(s);
        }
        let s = self.entry_alloca(ty, "ret")?;
        self.return_slot = Some(s);
        Ok(s)
    }

    /// After a synced construct's merge: a lane that came there escaping goes on, to the
    /// next synced construct's merge if one is in the way, else to its target (the loop's
    /// exit or latch, or the helper's return), clearing the slot.
    pub(super) fn dispatch_escape(&mut self) -> LResult<()> {
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        let slot = self
            .escape_slot
            .ok_or_else(|| LowerError::new(codes::LLVM, "an escape without its slot"))?;
        let code = self.b().build_load(i32t, slot, "escape")?.into_int_value();
        let on = ctx.append_basic_block(self.llfn, "noescape");
        let next = self.syncs.last().map(|s| (s.merge, s.loops));
        let mut cases = Vec::new();
        let mut targets = Vec::new();
        for (k, frame) in self.loops.iter().enumerate() {
            for (cont, to) in [(false, frame.brk), (true, frame.cont)] {
                targets.push((1 + 2 * k as u64 + cont as u64, next.filter(|n| n.1 > k), to));
            }
        }
        for (code, through, to) in targets {
            let bb = ctx.append_basic_block(self.llfn, "escape.to");
            cases.push((i32t.const_int(code, false), bb));
            self.b().position_at_end(bb);
            match through {
                Some((merge, _)) => {
                    self.b().build_unconditional_branch(merge)?;
                }
                None => {
                    self.b().build_store(slot, i32t.const_zero())?;
                    self.b().build_unconditional_branch(to)?;
                }
            }
        }
        if !self.is_kernel {
            let bb = ctx.append_basic_block(self.llfn, "escape.ret");
            cases.push((i32t.const_int(ESCAPE_RETURN, false), bb));
            self.b().position_at_end(bb);
            match next {
                Some((merge, _)) => {
                    self.b().build_unconditional_branch(merge)?;
                }
                None => match self.f.ret {
                    Some(t) => {
                        let ty = self.vt(t)?;
                        let slot = self.return_slot(ty)?;
                        let v = self.b().build_load(ty, slot, "ret")?;
                        self.b().build_return(Some(&v))?;
                    }
                    None => {
                        self.b().build_return(None)?;
                    }
                },
            }
        }
        // The switch goes in the merge block, which the builder left before the cases.
        let merge_end = code
            .as_instruction()
            .and_then(|i| i.get_parent())
            .ok_or_else(|| LowerError::new(codes::LLVM, "escape load without a block"))?;
        self.b().position_at_end(merge_end);
        self.b().build_switch(code, on, &cases)?;
        self.b().position_at_end(on);
        Ok(())
    }

    pub(super) fn converge_end(&self, mask: Option<IntValue<'ctx>>) -> LResult<()> {
        match mask {
            Some(m) => self.t.converge_end(self.cx, m),
            None => Ok(()),
        }
    }
}
