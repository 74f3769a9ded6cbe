//! Wave verbs: reductions, scans, ballots, shuffles and broadcasts over a wave's lanes.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    pub(super) fn wave(
        &mut self,
        op: WaveOp,
        s: Scalar,
        args: &[Vec<Val>],
        span: Span,
    ) -> Result<Vec<Val>, Error> {
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
    pub(super) fn fold_lanes(&mut self, r: ReduceOp, s: Scalar, xs: &[Value]) -> Value {
        let mut acc = xs[0];
        for &x in &xs[1..] {
            acc = self.reduce_op(r, s, acc, x);
        }
        acc
    }

    pub(super) fn reduce_op(&mut self, r: ReduceOp, s: Scalar, a: Value, b: Value) -> Value {
        match r {
            ReduceOp::Sum => self.scalar_bin(BinaryOp::Add, s, a, b),
            ReduceOp::And => self.b.ins().band(a, b),
            ReduceOp::Or => self.b.ins().bor(a, b),
            ReduceOp::Xor => self.b.ins().bxor(a, b),
            ReduceOp::Min => self.scalar_math(MathFn::Min, s, &[a, b]),
            ReduceOp::Max => self.scalar_math(MathFn::Max, s, &[a, b]),
        }
    }

    pub(super) fn reduce_identity(&mut self, r: ReduceOp, s: Scalar) -> Value {
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
}
