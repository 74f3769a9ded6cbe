//! Expressions: the dispatcher, operators, casts and math over lane vectors.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    /// Whether evaluating `e` may reach a barrier (through a helper it calls).
    pub(super) fn reaches_barrier(&mut self, e: ExprId) -> bool {
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
    pub(super) fn eval_ops(&mut self, ops: &[ExprId]) -> Result<Vec<ExprValue>, Error> {
        let barrier_after: Vec<bool> = (0..ops.len())
            .map(|k| ops[k + 1..].iter().any(|&x| self.reaches_barrier(x)))
            .collect();
        let mut held: Vec<Result<ExprValue, Vec<(Slot, Scalar)>>> = Vec::new();
        for (k, &o) in ops.iter().enumerate() {
            let ev = self.expr(o)?;
            match ev {
                ExprValue::Vals(vs) if barrier_after[k] => {
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
                Err(slots) => ExprValue::Vals(slots.iter().map(|x| self.unhold(x)).collect()),
            })
            .collect())
    }

    pub(super) fn expr(&mut self, e: ExprId) -> Result<ExprValue, Error> {
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
                ExprValue::Vals(vec![Val::U(self.uconst(s, bits))])
            }
            Expr::Param(i) => {
                if self.frame().is_kernel {
                    match &self.kparams[*i as usize] {
                        KernelParam::Val(v) => ExprValue::Vals(v.clone()),
                        KernelParam::Buf { .. } => ExprValue::Void,
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
                return Err(Error::new(
                    crate::codegen::codes::INPUT,
                    "a template parameter in an uninstantiated template",
                )
                .in_function(&self.kernel_name))
            }
            Expr::Builtin(b) => ExprValue::Vals(vec![self.builtin(*b)]),
            Expr::Unary { op, arg } => {
                let a = self.expr(*arg)?.vals();
                let s = scalar_of(ty);
                ExprValue::Vals(a.iter().map(|x| self.unary(*op, s, x)).collect())
            }
            Expr::Binary { op, lhs, rhs } => {
                let s = scalar_of(self.ty(*lhs));
                match op {
                    BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
                        ExprValue::Vals(vec![self.short_circuit(*op, *lhs, *rhs)?])
                    }
                    _ => {
                        let mut ops = self.eval_ops(&[*lhs, *rhs])?.into_iter();
                        let a = ops.next().map(ExprValue::vals).unwrap_or_default();
                        let b = ops.next().map(ExprValue::vals).unwrap_or_default();
                        let (la, lb) = (
                            analysis::literal_int(f, *lhs),
                            analysis::literal_int(f, *rhs),
                        );
                        let mut out = Vec::new();
                        for (x, y) in a.iter().zip(&b) {
                            out.push(self.binary(*op, s, x, y, la, lb, span)?);
                        }
                        ExprValue::Vals(out)
                    }
                }
            }
            Expr::Cast { to, arg } => {
                let from = scalar_of(self.ty(*arg));
                let a = self.expr(*arg)?.vals();
                ExprValue::Vals(a.iter().map(|x| self.cast(from, *to, x)).collect())
            }
            Expr::Bitcast { to, arg } => {
                let from_t = self.ty(*arg);
                let a = self.expr(*arg)?.vals();
                ExprValue::Vals(self.bitcast(from_t, *to, &a))
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let mut ops = self.eval_ops(&[*cond, *accept, *reject])?.into_iter();
                let c = ops.next().map(ExprValue::vals).unwrap_or_default();
                let a = ops.next().map(ExprValue::vals).unwrap_or_default();
                let r = ops.next().map(ExprValue::vals).unwrap_or_default();
                let s = scalar_of(ty);
                let mut out = Vec::new();
                for i in 0..a.len() {
                    let ci = if c.len() == 1 { &c[0] } else { &c[i] };
                    out.push(self.select(s, ci, &a[i], &r[i]));
                }
                ExprValue::Vals(out)
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => self.if_else(class, ty, *cond, *accept, *reject)?,
            Expr::Compose { parts, .. } => {
                let mut out = Vec::new();
                for ev in self.eval_ops(parts)? {
                    out.extend(ev.vals());
                }
                ExprValue::Vals(out)
            }
            Expr::Splat { lanes, value } => {
                let v = self.expr(*value)?.vals().remove(0);
                ExprValue::Vals(vec![v; *lanes as usize])
            }
            Expr::Extract { vector, lane } => {
                let v = self.expr(*vector)?.vals();
                ExprValue::Vals(vec![v[*lane as usize].clone()])
            }
            Expr::Swizzle { vector, lanes } => {
                let v = self.expr(*vector)?.vals();
                ExprValue::Vals(lanes.iter().map(|&l| v[l as usize].clone()).collect())
            }
            Expr::Index { base, index } => {
                let i = self.expr(*index)?.vals().remove(0);
                ExprValue::Vals(self.load_elem(*base, &i, span, 1)?)
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let i = self.expr(*index)?.vals().remove(0);
                let s = scalar_of(ty);
                self.check_align(*index, &i, s, *align, span);
                ExprValue::Vals(self.load_elem(*base, &i, span, *lanes as u32)?)
            }
            // The verifier inlines every call that passes memory.
            Expr::Ref(_) => {
                return Err(
                    self.internal("a buffer or array by reference outside an inlined helper call")
                )
            }
            Expr::Len(i) => {
                let len = match self.kparams[*i as usize] {
                    KernelParam::Buf { off, .. } => self.buf_ref(off).1,
                    KernelParam::Val(_) => self.b.ins().iconst(types::I64, 0),
                };
                let max = self.b.ins().iconst(types::I64, u32::MAX as i64);
                let c = self.b.ins().umin(len, max);
                ExprValue::Vals(vec![Val::U(self.b.ins().ireduce(types::I32, c))])
            }
            Expr::Call { function, args } => self.call_helper(*function, args)?,
            Expr::Tag { index, .. } => {
                ExprValue::Vals(vec![Val::U(self.b.ins().iconst(types::I32, *index as i64))])
            }
            Expr::Dispatch { tag, args } => self.dispatch(*tag, args, ty)?,
            Expr::Math { fun, args } => {
                let vs: Vec<Vec<Val>> = self
                    .eval_ops(args)?
                    .into_iter()
                    .map(ExprValue::vals)
                    .collect();
                let s = scalar_of(ty);
                let mut out = Vec::new();
                for c in 0..vs[0].len() {
                    let ops: Vec<Val> = vs.iter().map(|v| v[c].clone()).collect();
                    out.push(self.math(*fun, s, &ops));
                }
                ExprValue::Vals(out)
            }
            Expr::AtomicLoad { place, .. } => {
                let s = scalar_of(ty);
                let v = self.atomic_access(place, None, s, span)?;
                ExprValue::Vals(v.into_iter().collect())
            }
            Expr::AtomicStore { place, value, .. } => {
                let s = scalar_of(self.ty(*value));
                self.atomic_access(place, Some(*value), s, span)?;
                ExprValue::Void
            }
            Expr::Bits { op, args } => {
                let vs: Vec<Val> = self
                    .eval_ops(args)?
                    .into_iter()
                    .map(|ev| ev.vals().remove(0))
                    .collect();
                ExprValue::Vals(vec![self.bits(*op, scalar_of(ty), &vs)])
            }
            Expr::Atomic {
                op,
                place,
                value,
                compare,
                ..
            } => ExprValue::Vals(vec![self.atomic(*op, place, *value, *compare, ty, span)?]),
            Expr::Wave { op, args, width } => {
                let vs: Vec<Vec<Val>> = self
                    .eval_ops(args)?
                    .into_iter()
                    .map(ExprValue::vals)
                    .collect();
                let s = if args.is_empty() {
                    Scalar::Bool
                } else {
                    scalar_of(self.ty(args[0]))
                };
                ExprValue::Vals(self.wave(*op, s, &vs, *width, span)?)
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
                ExprValue::Mat(p)
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
                ExprValue::Mat(p)
            }
            Expr::MatrixMma { a, b, c } => {
                let (ta, tc) = (self.ty(*a), self.ty(*c));
                let pa = self.expr(*a)?;
                let pb = self.expr(*b)?;
                let pc = self.expr(*c)?;
                let (ExprValue::Mat(pa), ExprValue::Mat(pb), ExprValue::Mat(pc)) = (pa, pb, pc)
                else {
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
                let codes = crate::codegen::cpu::rt::code_of(sa)
                    | crate::codegen::cpu::rt::code_of(sc) << 8;
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
                ExprValue::Mat(d)
            }
        };
        // Keep the class the analysis promised (the lowering may know less).
        if let (ExprValue::Vals(vs), Some(s)) = (
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
            return Ok(ExprValue::Vals(fixed));
        }
        Ok(ev)
    }

    pub(super) fn lane_to_u64(&mut self, s: Scalar, x: Value) -> Value {
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

    pub(super) fn builtin(&mut self, b: Builtin) -> Val {
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

    pub(super) fn short_circuit(
        &mut self,
        op: BinaryOp,
        lhs: ExprId,
        rhs: ExprId,
    ) -> Result<Val, Error> {
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

    pub(super) fn unary(&mut self, op: UnaryOp, s: Scalar, a: &Val) -> Val {
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
    pub(super) fn arith(
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
    pub(super) fn scalar_bin(&mut self, op: BinaryOp, s: Scalar, x: Value, y: Value) -> Value {
        use BinaryOp as B;
        if s == Scalar::F16 {
            use crate::codegen::cpu::rt::f16op;
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
    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        a: &Val,
        b: &Val,
        la: Option<i64>,
        lb: Option<i64>,
        span: Span,
    ) -> Result<Val, Error> {
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

    pub(super) fn compare(&mut self, op: BinaryOp, s: Scalar, a: &Val, b: &Val) -> Val {
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
    pub(super) fn const_of(&self, v: Value) -> Option<i64> {
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
    pub(super) fn int_div(&mut self, rem: bool, s: Scalar, a: &Val, b: &Val, span: Span) -> Val {
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

    /// `if cond { accept } else { reject }`: a uniform condition branches; a varying one
    /// evaluates each arm under the mask of its lanes (skipped when it has none), blending
    /// into the result, so an arm no lane takes has no effect.
    pub(super) fn if_else(
        &mut self,
        class: Class,
        ty: Type,
        cond: ExprId,
        accept: ExprId,
        reject: ExprId,
    ) -> Result<ExprValue, Error> {
        let s = scalar_of(ty);
        let comps = comps_of(ty);
        let c = self.expr(cond)?.vals().remove(0);
        let slot = if class == Class::Uniform && matches!(c, Val::U(_)) {
            Slot::Uni((0..comps).map(|_| self.new_var(uty(s))).collect())
        } else {
            Slot::Var(
                (0..comps)
                    .map(|_| {
                        (0..chunks(s, self.n))
                            .map(|_| self.new_var(vty(s)))
                            .collect()
                    })
                    .collect(),
            )
        };
        let zero = Val::U(self.uconst(s, 0));
        self.write_slot(&slot, s, &vec![zero; comps], false)?;
        match c {
            Val::U(c) => {
                let tb = self.b.create_block();
                let eb = self.b.create_block();
                let join = self.b.create_block();
                self.b.ins().brif(c, tb, &[], eb, &[]);
                for (block, arm) in [(tb, accept), (eb, reject)] {
                    self.b.switch_to_block(block);
                    let v = self.expr(arm)?.vals();
                    self.write_slot(&slot, s, &v, false)?;
                    self.b.ins().jump(join, &[]);
                }
                self.b.switch_to_block(join);
            }
            c => {
                let cm = self.bool_mask(&c);
                let save = self.exec();
                let then_m = self.mask_and(&save, &cm);
                let else_m = self.mask_andnot(&save, &cm);
                let saved = self.mask_vars();
                self.def_vars(&saved, &save);
                let masks = [self.mask_vars(), self.mask_vars()];
                self.def_vars(&masks[0], &then_m);
                self.def_vars(&masks[1], &else_m);
                let known = self.known;
                for (m, arm) in masks.iter().zip([accept, reject]) {
                    let m = self.use_vars(m);
                    let any = self.mask_any(&m);
                    let rb = self.b.create_block();
                    let next = self.b.create_block();
                    self.b.ins().brif(any, rb, &[], next, &[]);
                    self.b.switch_to_block(rb);
                    self.set_exec(&m);
                    let v = self.expr(arm)?.vals();
                    self.write_slot(&slot, s, &v, true)?;
                    self.b.ins().jump(next, &[]);
                    self.b.switch_to_block(next);
                }
                let s = self.use_vars(&saved);
                self.set_exec(&s);
                self.known = known;
            }
        }
        Ok(self.read_slot(&slot, ty))
    }

    pub(super) fn select(&mut self, s: Scalar, c: &Val, a: &Val, r: &Val) -> Val {
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
    pub(super) fn scalar_cast(&mut self, from: Scalar, to: Scalar, x: Value) -> Value {
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

    pub(super) fn int_resize(&mut self, from: Scalar, to: Scalar, x: Value) -> Value {
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

    pub(super) fn cast(&mut self, from: Scalar, to: Scalar, a: &Val) -> Val {
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

    pub(super) fn bitcast(&mut self, from_t: Type, to_t: Type, a: &[Val]) -> Vec<Val> {
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

    pub(super) fn math(&mut self, fun: MathFn, s: Scalar, ops: &[Val]) -> Val {
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

    pub(super) fn int_fn(&mut self, fun: MathFn, s: Scalar, a: &[Value]) -> Value {
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
    pub(super) fn min_max_num(&mut self, is_min: bool, x: Value, y: Value) -> Value {
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

    pub(super) fn float_fn(&mut self, fun: MathFn, s: Scalar, a: &[Value], _vector: bool) -> Value {
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

    pub(super) fn scalar_math(&mut self, fun: MathFn, s: Scalar, a: &[Value]) -> Value {
        if s.is_int() {
            if fun == MathFn::Abs && !s.is_signed() {
                return a[0];
            }
            return self.int_fn(fun, s, a);
        }
        if s == Scalar::F16 {
            use crate::codegen::cpu::rt::f16op;
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
}
