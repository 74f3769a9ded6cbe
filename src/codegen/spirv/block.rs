//! Statements and structured control flow.

use super::*;

impl Emitter<'_> {
    pub(super) fn frame(&self) -> &Frame {
        self.frames.last().expect("a frame is open")
    }

    pub(super) fn func(&self) -> &Function {
        self.m.function(self.frame().func)
    }

    pub(super) fn local_var(&mut self, h: Handle<crate::ir::Local>) -> SpirvResult<Word> {
        if let Some(v) = self.frame().locals[h.index()] {
            return Ok(v);
        }
        let ty = self.func().locals[h].ty;
        let t = self.value_ty(ty)?;
        let v = self.fn_var(t);
        self.frames.last_mut().expect("frame").locals[h.index()] = Some(v);
        Ok(v)
    }

    pub(super) fn local_ty(&self, h: Handle<crate::ir::Local>) -> Type {
        self.func().locals[h].ty
    }

    pub(super) fn emit_block(&mut self, block: &[Stmt]) -> SpirvResult<()> {
        for s in block {
            if self.terminated() {
                break;
            }
            if self.virtual_here() {
                self.virtual_stmt(s)?;
            } else {
                self.stmt(s)?;
            }
        }
        Ok(())
    }

    pub(super) fn jump_var(&mut self) -> Word {
        if let Some(v) = self.jump_var {
            return v;
        }
        let u = self.u32t();
        let zero = self.konst(u, 0);
        let p = self.tk(TyKey::Ptr(StorageClass::Function, u));
        let id = self.b.id();
        self.fn_vars.push(Instruction::new(
            Op::Variable,
            Some(p),
            Some(id),
            vec![
                Operand::StorageClass(StorageClass::Function),
                Operand::IdRef(zero),
            ],
        ));
        self.jump_var = Some(id);
        id
    }

    /// Leaves for region `target`: its merge (`continue_ == false`) or its continue block.
    pub(super) fn jump(&mut self, target: usize, continue_: bool) {
        let inner = self.regions.len() - 1;
        if !continue_ {
            self.regions[target].reached = true;
        }
        if target == inner {
            let r = &self.regions[target];
            let to = if continue_ { r.cont } else { r.merge };
            self.branch(to);
            return;
        }
        let code = self.regions[target].code + continue_ as u32;
        let jv = self.jump_var();
        let c = self.cu32(code);
        self.store(jv, c);
        for r in &mut self.regions[target + 1..] {
            r.routed = true;
            r.reached = true;
        }
        let merge = self.regions[inner].merge;
        self.branch(merge);
    }

    /// After a region's merge: take a routed jump aimed at the enclosing region, or pass it
    /// on outward.
    pub(super) fn ladder_rung(&mut self) {
        let jv = self.jump_var();
        let u = self.u32t();
        let bt = self.boolt();
        let zero = self.konst(u, 0);
        let j = self.load(u, jv);
        let nz = self.opi(Op::INotEqual, bt, &[j, zero]);
        let (m, h) = (self.b.id(), self.b.id());
        self.sel_merge(m);
        self.branch_cond(nz, h, m);
        self.block(h);
        let e = self.regions.len() - 1;
        let (code, kind, cont, merge) = {
            let r = &self.regions[e];
            (r.code, r.kind, r.cont, r.merge)
        };
        let cb = self.cu32(code);
        let cc = self.cu32(code + 1);
        let is_b = self.opi(Op::IEqual, bt, &[j, cb]);
        let is_c = self.opi(Op::IEqual, bt, &[j, cc]);
        let hit = self.opi(Op::LogicalOr, bt, &[is_b, is_c]);
        let nj = self.opi(Op::Select, u, &[hit, zero, j]);
        self.store(jv, nj);
        self.regions[e].reached = true;
        if kind == RegionKind::Loop {
            self.branch_cond(is_c, cont, merge);
        } else {
            self.branch(merge);
        }
        self.block(m);
    }

    pub(super) fn push_region(
        &mut self,
        kind: RegionKind,
        label: Option<String>,
        merge: Word,
        cont: Word,
    ) {
        let code = self.next_code;
        self.next_code += 2;
        self.regions.push(Region {
            kind,
            label,
            merge,
            cont,
            frame: self.frames.len() - 1,
            code,
            routed: false,
            reached: false,
        });
    }

    /// Opens the merge block of a popped region (unreachable when nothing leaves for it).
    pub(super) fn close_region(&mut self, r: Region) {
        self.block(r.merge);
        if !r.reached {
            self.b.unreachable().expect("in a block");
            return;
        }
        if r.routed && !self.regions.is_empty() {
            self.ladder_rung();
        }
    }

    pub(super) fn find_loop(&self, label: &Option<String>) -> SpirvResult<usize> {
        let frame = self.frames.len() - 1;
        for (i, r) in self.regions.iter().enumerate().rev() {
            if r.frame != frame || r.kind != RegionKind::Loop {
                continue;
            }
            if label.is_none() || r.label == *label {
                return Ok(i);
            }
        }
        refuse(format!("a break or continue outside its loop ({label:?})"))
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> SpirvResult<()> {
        let line = std::mem::replace(&mut self.cur_line, s.span.line);
        let roots = s.kind.value_roots();
        self.prefetch(&roots)?;
        // The innermost statement and the (inlined) helper it is in place the refusal.
        let r = self
            .stmt_body(s)
            .map_err(|e| e.at(s.span).in_function(&self.func().name));
        self.prefetched.clear();
        self.cur_line = line;
        r
    }

    /// Issues the statement's buffer loads before any of its arithmetic: a load's address
    /// only, never its use, waits on earlier work. Otherwise a load that follows a
    /// branch the arithmetic makes (f32 `+ - *` on a device that flushes subnormals,
    /// `f32_unflushed`) waits for the branch, whose condition waits for the earlier load:
    /// one load in flight at a time (on the H200 saxpy lost 30 %). Only loads that run
    /// whatever happens are moved (`Function::unconditional_loads`), and only scalar ones.
    pub(super) fn prefetch(&mut self, roots: &[ExprId]) -> SpirvResult<()> {
        let Some(loads) = self.func().unconditional_loads(roots) else {
            return Ok(());
        };
        let depth = self.frames.len();
        for e in loads {
            if self.ty_of(e).and_then(|t| t.lanes()) != Some(1)
                || self.needs_scalarising(e)?.is_some()
            {
                continue;
            }
            let w = self.expr(e)?;
            self.prefetched.insert((depth, e), w);
        }
        Ok(())
    }

    pub(super) fn stmt_body(&mut self, s: &Stmt) -> SpirvResult<()> {
        match &s.kind {
            StmtKind::Let { local, init } => {
                let v = self.local_var(*local)?;
                if let Some(e) = init {
                    let x = self.expr(*e)?;
                    self.store(v, x);
                }
            }
            StmtKind::Assign { place, value } => match place {
                Place::Local(h) => {
                    let x = self.expr(*value)?;
                    let v = self.local_var(*h)?;
                    self.store(v, x);
                }
                Place::Lane { local, lane } => {
                    let x = self.expr(*value)?;
                    let v = self.local_var(*local)?;
                    let s = self.local_ty(*local).scalar().unwrap_or(Scalar::U32);
                    let st = self.scalar_ty(s)?;
                    let p = self.tk(TyKey::Ptr(StorageClass::Function, st));
                    let c = self.cu32(*lane as u32);
                    let ptr = self.opi(Op::AccessChain, p, &[v, c]);
                    self.store(ptr, x);
                }
                Place::Element { base, index } => {
                    let i = self.expr_u32(*index)?;
                    let x = self.expr(*value)?;
                    let elem = self.base_elem(*base)?;
                    self.store_elem(*base, elem, i, x)?;
                }
            },
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.expr(*cond)?;
                let (t, m) = (self.b.id(), self.b.id());
                let e = if else_block.is_empty() {
                    m
                } else {
                    self.b.id()
                };
                self.sel_merge(m);
                self.branch_cond(c, t, e);
                self.block(t);
                self.emit_block(then_block)?;
                let then_done = self.terminated();
                self.branch(m);
                let mut else_done = false;
                if !else_block.is_empty() {
                    self.block(e);
                    self.emit_block(else_block)?;
                    else_done = self.terminated();
                    self.branch(m);
                }
                self.block(m);
                if then_done && else_done {
                    self.b.unreachable().expect("in a block");
                }
            }
            StmtKind::Loop { label, kind, body } => self.emit_loop(label, kind, body)?,
            StmtKind::Block(b) => self.emit_block(b)?,
            StmtKind::Break(label) => {
                let t = self.find_loop(label)?;
                self.jump(t, false);
            }
            StmtKind::Continue(label) => {
                let t = self.find_loop(label)?;
                self.jump(t, true);
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => Some(self.expr(*e)?),
                    None => None,
                };
                let (ret_var, body) = (self.frame().ret_var, self.frame().body_region);
                match body {
                    None => self.kernel_return(),
                    Some(r) => {
                        if let (Some(rv), Some(v)) = (ret_var, v) {
                            self.store(rv, v);
                        }
                        self.jump(r, false);
                    }
                }
            }
            StmtKind::Expr(e) => {
                self.expr_void(*e)?;
            }
            StmtKind::Barrier => {
                let wg = self.cu32(SCOPE_WORKGROUP);
                let sem = self.cu32(SEM_ACQ_REL | SEM_WORKGROUP | SEM_UNIFORM);
                self.op_void(
                    Op::ControlBarrier,
                    vec![
                        Operand::IdScope(wg),
                        Operand::IdScope(wg),
                        Operand::IdMemorySemantics(sem),
                    ],
                );
            }
            StmtKind::WaveBarrier => {
                if matches!(self.mode, WaveMode::Virtual { .. }) {
                    // The kernel body's own are workgroup barriers (`virtual_stmt`).
                    return refuse(format!(
                        "wave_barrier() inside a helper in a virtual wave (@wave({}) on \
                         subgroups of {}): the wave's subgroups meet only at a workgroup \
                         barrier, which the whole workgroup must reach",
                        self.wave_w, self.caps.subgroup_size
                    ));
                }
                let sg = self.cu32(SCOPE_SUBGROUP);
                let sem = self.cu32(SEM_ACQ_REL | SEM_WORKGROUP | SEM_UNIFORM);
                self.op_void(
                    Op::ControlBarrier,
                    vec![
                        Operand::IdScope(sg),
                        Operand::IdScope(sg),
                        Operand::IdMemorySemantics(sem),
                    ],
                );
            }
            StmtKind::Fence(scope) => {
                let (sc, bits) = match scope {
                    FenceScope::Workgroup => (SCOPE_WORKGROUP, SEM_WORKGROUP | SEM_UNIFORM),
                    FenceScope::Device => (SCOPE_DEVICE, SEM_UNIFORM),
                };
                let sc = self.cu32(sc);
                let sem = self.cu32(SEM_ACQ_REL | bits);
                self.op_void(
                    Op::MemoryBarrier,
                    vec![Operand::IdScope(sc), Operand::IdMemorySemantics(sem)],
                );
            }
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                let i = self.expr_u32(*index)?;
                let fh = self.frame().func;
                let vt = self.m.expr_type(fh, *value);
                let x = self.expr(*value)?;
                let (s, n) = match vt {
                    Some(Type::Vector(s, n)) => (s, n),
                    Some(Type::Scalar(s)) => (s, 1),
                    _ => return refuse("vstore of a non-vector value"),
                };
                let i = self.align_trap(*index, i, s, *align);
                let se = ElemType::scalar(s);
                for k in 0..n {
                    let lane = if n == 1 {
                        x
                    } else {
                        let st = self.scalar_ty(s)?;
                        self.op(
                            Op::CompositeExtract,
                            st,
                            vec![Operand::IdRef(x), Operand::LiteralBit32(k as u32)],
                        )
                    };
                    let kk = self.cu32(k as u32);
                    let u = self.u32t();
                    let ik = self.opi(Op::IAdd, u, &[i, kk]);
                    self.store_elem(*base, se, ik, lane)?;
                }
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => self.matrix_store(*value, *base, *offset, *stride)?,
            StmtKind::Print { .. } | StmtKind::Assert { .. } => self.debug_stmt(&s.kind)?,
        }
        Ok(())
    }

    pub(super) fn emit_loop(
        &mut self,
        label: &Option<String>,
        kind: &LoopKind,
        body: &[Stmt],
    ) -> SpirvResult<()> {
        let mut for_state = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let s = self.expr(*start)?;
            let e = self.expr(*end)?;
            let st = match step {
                Some(x) => self.expr(*x)?,
                None => {
                    let sc = self.local_ty(*var).scalar().unwrap_or(Scalar::U32);
                    self.const_of(sc, 1, 1)?
                }
            };
            let v = self.local_var(*var)?;
            self.store(v, s);
            for_state = Some((*var, v, e, st));
        }
        if let LoopKind::Cond { var, init, .. } = kind {
            let x = self.expr(*init)?;
            let v = self.local_var(*var)?;
            self.store(v, x);
        }
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
        self.push_region(RegionKind::Loop, label.clone(), merge, cont);
        match kind {
            LoopKind::Infinite => self.branch(bodyb),
            LoopKind::While(c) => {
                let c = self.expr(*c)?;
                self.branch_cond(c, bodyb, merge);
                self.regions.last_mut().expect("region").reached = true;
            }
            LoopKind::For { .. } => {
                let (var, v, e, _) = for_state.expect("for state");
                let sc = self.local_ty(var).scalar().unwrap_or(Scalar::U32);
                let t = self.scalar_ty(sc)?;
                let x = self.load(t, v);
                let bt = self.boolt();
                let lt = if sc.is_signed() {
                    Op::SLessThan
                } else {
                    Op::ULessThan
                };
                let mut c = self.opi(lt, bt, &[x, e]);
                if let (LoopKind::For { step: Some(_), .. }, true) = (kind, sc.is_signed()) {
                    // A negative step counts down: while `var > end`.
                    let (_, _, _, st) = for_state.expect("for state");
                    let zero = self.const_of(sc, 1, 0)?;
                    let neg = self.opi(Op::SLessThan, bt, &[st, zero]);
                    let gt = self.opi(Op::SGreaterThan, bt, &[x, e]);
                    c = self.opi(Op::Select, bt, &[neg, gt, c]);
                }
                self.branch_cond(c, bodyb, merge);
                self.regions.last_mut().expect("region").reached = true;
            }
            LoopKind::Cond { cond, .. } => {
                let c = self.expr(*cond)?;
                self.branch_cond(c, bodyb, merge);
                self.regions.last_mut().expect("region").reached = true;
            }
        }
        self.block(bodyb);
        self.emit_block(body)?;
        self.branch(cont);
        self.block(cont);
        if let Some((var, v, _, st)) = for_state {
            let sc = self.local_ty(var).scalar().unwrap_or(Scalar::U32);
            let t = self.scalar_ty(sc)?;
            let x = self.load(t, v);
            let y = self.opi(Op::IAdd, t, &[x, st]);
            self.store(v, y);
        }
        if let LoopKind::Cond { var, update, .. } = kind {
            let x = self.expr(*update)?;
            let v = self.local_var(*var)?;
            self.store(v, x);
        }
        // A loop nothing leaves (no break reaches its merge) is still left where the driver's
        // loop limiter runs out: give it an exit the compiler cannot rule out (the status
        // buffer's probe bound is never 0), and flag the launch there.
        let limiter_exit = self.caps.loop_limit.is_some()
            && !self.regions.last().expect("region").reached
            && !self.terminated();
        if limiter_exit {
            let bound = self.probe_bound();
            let (u, bt) = (self.u32t(), self.boolt());
            let zero = self.konst(u, 0);
            let never = self.opi(Op::IEqual, bt, &[bound, zero]);
            self.branch_cond(never, merge, header);
        } else {
            self.branch(header);
        }
        let r = self.regions.pop().expect("region");
        if limiter_exit {
            self.block(r.merge);
            self.flag_loop_limit();
            self.b.ret().expect("in a block");
            return Ok(());
        }
        self.close_region(r);
        Ok(())
    }

    /// Inlines helper `h` with argument values `args`; its result, if it has one.
    pub(super) fn inline_call(
        &mut self,
        h: Handle<Function>,
        args: Vec<Word>,
    ) -> SpirvResult<Option<Word>> {
        let helper = self.m.function(h);
        if self.frames.iter().any(|f| f.func == h) {
            return refuse(format!("recursive call of {}", helper.name));
        }
        if !helper.shared.is_empty() {
            return refuse(format!("shared memory declared in helper {}", helper.name));
        }
        let ret_ty = match helper.ret {
            Some(t) => Some(self.value_ty(t)?),
            None => None,
        };
        let ret_var = ret_ty.map(|t| self.fn_var(t));
        let (header, bodyb, cont, merge) = (self.b.id(), self.b.id(), self.b.id(), self.b.id());
        self.branch(header);
        self.block(header);
        self.loop_header(merge, cont);
        self.branch(bodyb);
        self.block(bodyb);
        self.frames.push(Frame {
            func: h,
            locals: vec![None; helper.locals.len()],
            params: args,
            ret_var,
            body_region: None,
        });
        self.push_region(RegionKind::Body, None, merge, cont);
        let ri = self.regions.len() - 1;
        self.frames.last_mut().expect("frame").body_region = Some(ri);
        self.emit_block(&helper.body)?;
        if !self.terminated() {
            self.regions[ri].reached = true;
            self.branch(merge);
        }
        self.block(cont);
        self.branch(header);
        let mut r = self.regions.pop().expect("region");
        self.frames.pop();
        // A helper that never returns still continues its caller's code here (its end is UB).
        r.reached = true;
        self.close_region(r);
        Ok(match (ret_var, ret_ty) {
            (Some(v), Some(t)) => Some(self.load(t, v)),
            _ => None,
        })
    }
}
