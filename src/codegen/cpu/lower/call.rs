//! Helper calls (inlined) and tag dispatch.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    pub(super) fn call_helper(
        &mut self,
        function: Handle<Function>,
        args: &[ExprId],
    ) -> Result<ExprValue, Error> {
        let vals = self.eval_ops(args)?;
        self.inline(function, vals)
    }

    pub(super) fn inline(
        &mut self,
        function: Handle<Function>,
        vals: Vec<ExprValue>,
    ) -> Result<ExprValue, Error> {
        let g: &'m Function = &self.m.functions[function];
        if self.frames.len() > 64 {
            return Err(self.internal("helpers nested too deeply"));
        }
        let classes: Vec<Class> = vals
            .iter()
            .map(|v| match v {
                ExprValue::Vals(vs) if vs.iter().all(|x| matches!(x, Val::U(_))) => Class::Uniform,
                ExprValue::Mat(_) => Class::Uniform,
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
                ExprValue::Vals(vs) => self.write_slot(&slot, s, &vs, false)?,
                ExprValue::Mat(ptr) => self.copy_mat(&slot, ptr),
                ExprValue::Void => {}
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
            None => ExprValue::Void,
            Some(slot) => {
                let t = g.ret.unwrap_or(Type::U32);
                self.read_slot(slot, t)
            }
        };
        self.scope.truncate(mark);
        let _ = self.frames.last().map(|f| f.func);
        Ok(result)
    }

    pub(super) fn dispatch(
        &mut self,
        tag: ExprId,
        args: &[ExprId],
        ty: Type,
    ) -> Result<ExprValue, Error> {
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
                ExprValue::Vals(vs) if self.has_barrier => {
                    Some(vs.iter().map(|v| self.hold(s, v.clone())).collect())
                }
                _ => None,
            })
            .collect();
        for (i, &mf) in members.iter().enumerate() {
            let tv = self.unhold(&tv_h);
            let vals: Vec<ExprValue> = vals
                .iter()
                .zip(&held_args)
                .map(|(ev, h)| match h {
                    Some(slots) => ExprValue::Vals(slots.iter().map(|x| self.unhold(x)).collect()),
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
            if let ExprValue::Vals(rv) = r {
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
            return Ok(ExprValue::Void);
        }
        Ok(ExprValue::Vals(
            res.iter().map(|r| Val::V(self.use_vars(r))).collect(),
        ))
    }
}
