//! Wave verbs: exchanges through the target, reductions, scans, ballots and broadcasts.

use super::*;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    /// Exchanges any scalar or vector value through the target's 32-bit exchange.
    pub(super) fn exchange_value(
        &self,
        kind: Exchange,
        mask: IntValue<'ctx>,
        v: BasicValueEnum<'ctx>,
        arg: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        match v {
            BasicValueEnum::VectorValue(vv) => {
                let mut out = vv.get_type().get_undef();
                for k in 0..vv.get_type().get_size() as u64 {
                    let x = self.b().build_extract_element(vv, self.cx.i32(k), "")?;
                    let y = self.exchange_value(kind, mask, x, arg)?;
                    out = self.b().build_insert_element(out, y, self.cx.i32(k), "")?;
                }
                Ok(out.into())
            }
            BasicValueEnum::IntValue(iv) => {
                let bits = iv.get_type().get_bit_width();
                if bits == 32 {
                    return Ok(self.t.exchange(self.cx, kind, mask, iv, arg)?.into());
                }
                if bits < 32 {
                    let w = self.b().build_int_z_extend(iv, i32t, "")?;
                    let r = self.t.exchange(self.cx, kind, mask, w, arg)?;
                    return Ok(self.b().build_int_truncate(r, iv.get_type(), "")?.into());
                }
                // 64 bits: two halves.
                let lo = self.b().build_int_truncate(iv, i32t, "")?;
                let hi = self.b().build_right_shift(
                    iv,
                    iv.get_type().const_int(32, false),
                    false,
                    "",
                )?;
                let hi = self.b().build_int_truncate(hi, i32t, "")?;
                let lo = self.t.exchange(self.cx, kind, mask, lo, arg)?;
                let hi = self.t.exchange(self.cx, kind, mask, hi, arg)?;
                let lo = self.b().build_int_z_extend(lo, iv.get_type(), "")?;
                let hi = self.b().build_int_z_extend(hi, iv.get_type(), "")?;
                let hi = self
                    .b()
                    .build_left_shift(hi, iv.get_type().const_int(32, false), "")?;
                Ok(self.b().build_or(lo, hi, "")?.into())
            }
            BasicValueEnum::FloatValue(fv) => {
                let bits = fv.get_type().get_bit_width();
                let it = match bits {
                    16 => ctx.i16_type(),
                    32 => ctx.i32_type(),
                    _ => ctx.i64_type(),
                };
                let i = self.b().build_cast(O::BitCast, v, it, "")?;
                let r = self.exchange_value(kind, mask, i, arg)?;
                Ok(self.b().build_cast(O::BitCast, r, fv.get_type(), "")?)
            }
            _ => self.err(codes::UNSUPPORTED, "a wave exchange of this type"),
        }
    }

    pub(super) fn reduce_identity(
        &self,
        op: ReduceOp,
        s: Scalar,
        ty: BasicTypeEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        if s.is_float() {
            return match op {
                ReduceOp::Min => self.const_float(ty, f64::INFINITY),
                ReduceOp::Max => self.const_float(ty, f64::NEG_INFINITY),
                _ => self.const_float(ty, 0.0),
            };
        }
        let bits = s.bits();
        let all = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let v = match op {
            ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor => 0,
            ReduceOp::And => all,
            ReduceOp::Min if s.is_signed() => all >> 1,
            ReduceOp::Min => all,
            ReduceOp::Max if s.is_signed() => 1u64 << (bits - 1),
            ReduceOp::Max => 0,
        };
        self.const_int(ty, v, false)
    }

    pub(super) fn combine(
        &self,
        op: ReduceOp,
        s: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let t = a.get_type();
        let f = s.is_float();
        match op {
            ReduceOp::Sum => self.binop(if f { O::FAdd } else { O::Add }, a, b),
            ReduceOp::And => self.binop(O::And, a, b),
            ReduceOp::Or => self.binop(O::Or, a, b),
            ReduceOp::Xor => self.binop(O::Xor, a, b),
            ReduceOp::Min | ReduceOp::Max => {
                let name = match (op == ReduceOp::Min, f, s.is_signed()) {
                    (true, true, _) => "llvm.minnum",
                    (false, true, _) => "llvm.maxnum",
                    (true, false, true) => "llvm.smin",
                    (false, false, true) => "llvm.smax",
                    (true, false, false) => "llvm.umin",
                    (false, false, false) => "llvm.umax",
                };
                let m = self.cx.call_value(name, &[t], &[a, b])?;
                if !f {
                    return Ok(m);
                }
                // The interpreter orders -0 < +0; `minnum`/`maxnum` may return either zero
                // for two zeros. Two equal operands differ only in a zero's sign, so OR-ing
                // their bits gives min's answer (-0 if either is) and AND-ing gives max's.
                let int_of = |bits: u32| match bits {
                    16 => self.cx.context.i16_type(),
                    32 => self.cx.context.i32_type(),
                    _ => self.cx.context.i64_type(),
                };
                let it: BasicTypeEnum = match t {
                    BasicTypeEnum::VectorType(v) => {
                        let bits = v.get_element_type().into_float_type().get_bit_width();
                        int_of(bits).vec_type(v.get_size()).into()
                    }
                    _ => int_of(t.into_float_type().get_bit_width()).into(),
                };
                let ai = self.b().build_cast(O::BitCast, a, it, "")?;
                let bi = self.b().build_cast(O::BitCast, b, it, "")?;
                let z = self.binop(if op == ReduceOp::Min { O::Or } else { O::And }, ai, bi)?;
                let z = self.b().build_cast(O::BitCast, z, t, "")?;
                let eq = self.fcmp(inkwell::FloatPredicate::OEQ, a, b)?;
                self.select(eq, z, m)
            }
        }
    }

    pub(super) fn full_mask(&self) -> IntValue<'ctx> {
        let w = self.t.wave_width();
        self.cx
            .i64(if w >= 64 { u64::MAX } else { (1u64 << w) - 1 })
    }

    pub(super) fn wave(
        &mut self,
        op: WaveOp,
        ty: Option<Type>,
        args: &[BasicValueEnum<'ctx>],
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let ctx = self.cx.context;
        let mask = self.lanes()?;
        let w = self.t.wave_width() as u64;
        let lane = || self.t.coord(self.cx, Coord::LaneId);
        Ok(match op {
            WaveOp::Broadcast | WaveOp::Shuffle => {
                self.exchange_value(Exchange::Index, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::ShuffleXor => {
                self.exchange_value(Exchange::Xor, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::ShuffleUp => {
                self.exchange_value(Exchange::Up, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::ShuffleDown => {
                self.exchange_value(Exchange::Down, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::Rotate => {
                let l = lane()?;
                let s = self.b().build_int_add(l, args[1].into_int_value(), "")?;
                let src = self.b().build_int_unsigned_rem(s, self.cx.i32(w), "")?;
                self.exchange_value(Exchange::Index, mask, args[0], src)?
            }
            WaveOp::Ballot => self
                .t
                .ballot(self.cx, mask, args[0].into_int_value())?
                .into(),
            WaveOp::Any => {
                let b = self.t.ballot(self.cx, mask, args[0].into_int_value())?;
                self.b()
                    .build_int_compare(IntPredicate::NE, b, self.cx.i64(0), "")?
                    .into()
            }
            WaveOp::All => {
                let b = self.t.ballot(self.cx, mask, args[0].into_int_value())?;
                self.b()
                    .build_int_compare(IntPredicate::EQ, b, mask, "")?
                    .into()
            }
            WaveOp::Elect => {
                let first = self.cx.call_value(
                    "llvm.cttz",
                    &[ctx.i64_type().into()],
                    &[mask.into(), ctx.bool_type().const_zero().into()],
                )?;
                let l = self.b().build_int_z_extend(lane()?, ctx.i64_type(), "")?;
                self.b()
                    .build_int_compare(IntPredicate::EQ, l, first.into_int_value(), "")?
                    .into()
            }
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let Some(ty) = ty else {
                    return self.err(codes::INPUT, "a wave verb without a value");
                };
                let s = ty.scalar().unwrap_or(Scalar::Bool);
                let x = args[0];
                let scan = match op {
                    WaveOp::Reduce(_) => None,
                    WaveOp::InclusiveScan(_) => Some(true),
                    _ => Some(false),
                };
                if scan.is_none() && ty.lanes() == Some(1) && s.bits() == 32 && s.is_int() {
                    if let Some(v) =
                        self.t
                            .native_reduce(self.cx, r, s, mask, x.into_int_value())?
                    {
                        return Ok(v.into());
                    }
                }
                // bool reductions go through i32 (and/or/xor are the only ones that type).
                if s == Scalar::Bool {
                    let i32t: BasicTypeEnum = match ty {
                        Type::Vector(_, n) => ctx.i32_type().vec_type(n as u32).into(),
                        _ => ctx.i32_type().into(),
                    };
                    let xi = self.b().build_cast(O::ZExt, x, i32t, "")?;
                    let r32 = self.wave(
                        op,
                        Some(match ty {
                            Type::Vector(_, n) => Type::Vector(Scalar::U32, n),
                            _ => Type::U32,
                        }),
                        &[xi],
                    )?;
                    let z = r32.get_type().const_zero();
                    return self.icmp(IntPredicate::NE, r32, z);
                }
                self.wave_collective(r, s, scan, mask, x)?
            }
        })
    }

    /// A wave verb within tiles of `t` consecutive lanes, `t` below the wave width
    /// (docs/semantics.md, "Tiles"): exchanges go through the indexed exchange to a lane of
    /// the tile (the lane's own value where the source leaves it); reductions and scans
    /// combine the tile's active lanes.
    pub(super) fn wave_tile(
        &mut self,
        op: WaveOp,
        ty: Option<Type>,
        args: &[BasicValueEnum<'ctx>],
        t: u32,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let ctx = self.cx.context;
        let mask = self.lanes()?;
        let tm = self.cx.i32(u64::from(t - 1));
        let lane = self.t.coord(self.cx, Coord::LaneId)?;
        let inner = self.b().build_and(lane, tm, "")?;
        let tb = self.b().build_xor(lane, inner, "")?;
        match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let Some(ty) = ty else {
                    return self.err(codes::INPUT, "a wave verb without a value");
                };
                let s = ty.scalar().unwrap_or(Scalar::Bool);
                let scan = match op {
                    WaveOp::Reduce(_) => None,
                    WaveOp::InclusiveScan(_) => Some(true),
                    _ => Some(false),
                };
                if s == Scalar::Bool {
                    let i32t: BasicTypeEnum = match ty {
                        Type::Vector(_, n) => ctx.i32_type().vec_type(n as u32).into(),
                        _ => ctx.i32_type().into(),
                    };
                    let xi = self.b().build_cast(O::ZExt, args[0], i32t, "")?;
                    let u = match ty {
                        Type::Vector(_, n) => Type::Vector(Scalar::U32, n),
                        _ => Type::U32,
                    };
                    let r32 = self.wave_tile(op, Some(u), &[xi], t)?;
                    let z = r32.get_type().const_zero();
                    return self.icmp(IntPredicate::NE, r32, z);
                }
                self.tile_collective(r, s, scan, mask, args[0], t, inner, tb)
            }
            WaveOp::Ballot | WaveOp::Any | WaveOp::All | WaveOp::Elect => self.err(
                codes::INPUT,
                "a vote with a tile width (the verifier refuses it)",
            ),
            _ => {
                let d = args[1].into_int_value();
                let b = self.b();
                let (x, own) = match op {
                    WaveOp::Broadcast | WaveOp::Shuffle => (d, None),
                    WaveOp::ShuffleXor => {
                        let x = b.build_xor(inner, d, "")?;
                        (x, Some(b.build_int_compare(IntPredicate::UGT, x, tm, "")?))
                    }
                    WaveOp::ShuffleUp => {
                        let x = b.build_int_sub(inner, d, "")?;
                        (
                            x,
                            Some(b.build_int_compare(IntPredicate::UGT, d, inner, "")?),
                        )
                    }
                    WaveOp::ShuffleDown => {
                        let x = b.build_int_add(inner, d, "")?;
                        // inner + d >= t without wrapping: d >= t - inner.
                        let room = b.build_int_sub(self.cx.i32(u64::from(t)), inner, "")?;
                        (
                            x,
                            Some(b.build_int_compare(IntPredicate::UGE, d, room, "")?),
                        )
                    }
                    _ => (b.build_int_add(inner, d, "")?, None),
                };
                let x = b.build_and(x, tm, "")?;
                let src = b.build_or(tb, x, "")?;
                let v = self.exchange_value(Exchange::Index, mask, args[0], src)?;
                match own {
                    Some(c) => self.select(c.into(), args[0], v),
                    None => Ok(v),
                }
            }
        }
    }

    /// The reduction or scan of `x` over groups of `width` lanes when every lane is active: a
    /// butterfly (reductions) or a Kogge–Stone tree (scans), `lane` being each lane's place in
    /// its group and `ident` the operation's identity (an exclusive scan's first lane). Whole
    /// waves ([`wave_collective`](Self::wave_collective)) and tiles
    /// ([`tile_collective`](Self::tile_collective)) share it.
    #[allow(clippy::too_many_arguments)]
    fn full_tree(
        &mut self,
        r: ReduceOp,
        s: Scalar,
        scan: Option<bool>,
        mask: IntValue<'ctx>,
        x: BasicValueEnum<'ctx>,
        width: u64,
        lane: IntValue<'ctx>,
        ident: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let Some(inclusive) = scan else {
            let mut v = x;
            let mut off = width / 2;
            while off >= 1 {
                let o = self.exchange_value(Exchange::Xor, mask, v, self.cx.i32(off))?;
                v = self.combine(r, s, v, o)?;
                off /= 2;
            }
            return Ok(v);
        };
        let mut v = x;
        let mut off = 1;
        while off < width {
            let o = self.exchange_value(Exchange::Up, mask, v, self.cx.i32(off))?;
            let c = self.combine(r, s, v, o)?;
            let has = self
                .b()
                .build_int_compare(IntPredicate::UGE, lane, self.cx.i32(off), "")?;
            v = self.select(has.into(), c, v)?;
            off *= 2;
        }
        if inclusive {
            return Ok(v);
        }
        let prev = self.exchange_value(Exchange::Up, mask, v, self.cx.i32(1))?;
        let first = self
            .b()
            .build_int_compare(IntPredicate::EQ, lane, self.cx.i32(0), "")?;
        self.select(first.into(), ident, prev)
    }

    /// [`wave_collective`](Self::wave_collective) within tiles of `t` lanes: `inner` is the
    /// lane's place in its tile and `tb` the tile's first lane.
    #[allow(clippy::too_many_arguments)]
    fn tile_collective(
        &mut self,
        r: ReduceOp,
        s: Scalar,
        scan: Option<bool>,
        mask: IntValue<'ctx>,
        x: BasicValueEnum<'ctx>,
        t: u32,
        inner: IntValue<'ctx>,
        tb: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let ty = x.get_type();
        let ident = self.reduce_identity(r, s, ty);
        let full_bb = ctx.append_basic_block(self.llfn, "tile.full");
        let part_bb = ctx.append_basic_block(self.llfn, "tile.partial");
        let end_bb = ctx.append_basic_block(self.llfn, "tile.end");
        let full = self
            .b()
            .build_int_compare(IntPredicate::EQ, mask, self.full_mask(), "")?;
        self.b().build_conditional_branch(full, full_bb, part_bb)?;

        // Whole wave active: a butterfly or Kogge–Stone tree inside each tile.
        self.b().position_at_end(full_bb);
        let t = u64::from(t);
        let full_v = self.full_tree(r, s, scan, mask, x, t, inner, ident)?;
        let full_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(end_bb)?;

        // Some lanes inactive: visit the tile's lanes in order (every lane of the mask runs
        // the same `t` iterations, each reading a lane of its own tile).
        self.b().position_at_end(part_bb);
        let acc = self.entry_alloca(ty, "tile.acc")?;
        let idx = self.entry_alloca(ctx.i32_type().into(), "tile.lane")?;
        let started = self.entry_alloca(ctx.bool_type().into(), "tile.started")?;
        self.b().build_store(acc, ident)?;
        self.b().build_store(idx, self.cx.i32(0))?;
        self.b()
            .build_store(started, ctx.bool_type().const_zero())?;
        let head = ctx.append_basic_block(self.llfn, "tile.loop");
        let done = ctx.append_basic_block(self.llfn, "tile.loopend");
        self.b().build_unconditional_branch(head)?;
        self.b().position_at_end(head);
        let k = self
            .b()
            .build_load(ctx.i32_type(), idx, "")?
            .into_int_value();
        let l = self.b().build_or(tb, k, "")?;
        let v = self.exchange_value(Exchange::Index, mask, x, l)?;
        let l64 = self.b().build_int_z_extend(l, ctx.i64_type(), "")?;
        let bit = self.b().build_right_shift(mask, l64, false, "")?;
        let bit = self.b().build_and(bit, self.cx.i64(1), "")?;
        let mut take = self
            .b()
            .build_int_compare(IntPredicate::NE, bit, self.cx.i64(0), "")?;
        if let Some(inclusive) = scan {
            let p = if inclusive {
                IntPredicate::ULE
            } else {
                IntPredicate::ULT
            };
            let before = self.b().build_int_compare(p, k, inner, "")?;
            take = self.b().build_and(take, before, "")?;
        }
        let cur = self.b().build_load(ty, acc, "")?;
        let was = self
            .b()
            .build_load(ctx.bool_type(), started, "")?
            .into_int_value();
        let comb = self.combine(r, s, cur, v)?;
        let comb = self.select(was.into(), comb, v)?;
        let next = self.select(take.into(), comb, cur)?;
        self.b().build_store(acc, next)?;
        let now = self.b().build_or(was, take, "")?;
        self.b().build_store(started, now)?;
        let k1 = self.b().build_int_add(k, self.cx.i32(1), "")?;
        self.b().build_store(idx, k1)?;
        let more = self
            .b()
            .build_int_compare(IntPredicate::ULT, k1, self.cx.i32(t), "")?;
        self.b().build_conditional_branch(more, head, done)?;
        self.b().position_at_end(done);
        let part_v = self.b().build_load(ty, acc, "")?;
        let part_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(end_bb)?;

        self.b().position_at_end(end_bb);
        let phi = self.b().build_phi(ty, "")?;
        phi.add_incoming(&[(&full_v, full_end), (&part_v, part_end)]);
        Ok(phi.as_basic_value())
    }

    /// A reduction (`scan == None`) or an inclusive/exclusive scan over the active lanes:
    /// a butterfly or Kogge–Stone tree when the whole wave is active, and a loop over the
    /// lanes of the mask otherwise (correct for any active set).
    pub(super) fn wave_collective(
        &mut self,
        r: ReduceOp,
        s: Scalar,
        scan: Option<bool>,
        mask: IntValue<'ctx>,
        x: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let w = self.t.wave_width() as u64;
        let ty = x.get_type();
        let ident = self.reduce_identity(r, s, ty);
        let lane = self.t.coord(self.cx, Coord::LaneId)?;
        let full_bb = ctx.append_basic_block(self.llfn, "wave.full");
        let part_bb = ctx.append_basic_block(self.llfn, "wave.partial");
        let end_bb = ctx.append_basic_block(self.llfn, "wave.end");
        let full = self
            .b()
            .build_int_compare(IntPredicate::EQ, mask, self.full_mask(), "")?;
        self.b().build_conditional_branch(full, full_bb, part_bb)?;

        // Whole wave.
        self.b().position_at_end(full_bb);
        let full_v = self.full_tree(r, s, scan, mask, x, w, lane, ident)?;
        let full_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(end_bb)?;

        // Some lanes inactive: visit every lane of the mask in order.
        self.b().position_at_end(part_bb);
        let acc = self.entry_alloca(ty, "wave.acc")?;
        let idx = self.entry_alloca(ctx.i32_type().into(), "wave.lane")?;
        let started = self.entry_alloca(ctx.bool_type().into(), "wave.started")?;
        self.b().build_store(acc, ident)?;
        self.b().build_store(idx, self.cx.i32(0))?;
        self.b()
            .build_store(started, ctx.bool_type().const_zero())?;
        let head = ctx.append_basic_block(self.llfn, "wave.loop");
        let done = ctx.append_basic_block(self.llfn, "wave.loopend");
        self.b().build_unconditional_branch(head)?;
        self.b().position_at_end(head);
        let l = self
            .b()
            .build_load(ctx.i32_type(), idx, "")?
            .into_int_value();
        let v = self.exchange_value(Exchange::Index, mask, x, l)?;
        let l64 = self.b().build_int_z_extend(l, ctx.i64_type(), "")?;
        let bit = self.b().build_right_shift(mask, l64, false, "")?;
        let bit = self.b().build_and(bit, self.cx.i64(1), "")?;
        let mut take = self
            .b()
            .build_int_compare(IntPredicate::NE, bit, self.cx.i64(0), "")?;
        if let Some(inclusive) = scan {
            let p = if inclusive {
                IntPredicate::ULE
            } else {
                IntPredicate::ULT
            };
            let before = self.b().build_int_compare(p, l, lane, "")?;
            take = self.b().build_and(take, before, "")?;
        }
        // The first taken lane's value starts the fold (as in the interpreter), so a lone
        // NaN survives a min/max and a lone -0.0 a sum; no lane taken leaves the identity,
        // an exclusive scan's answer in the first active lane.
        let cur = self.b().build_load(ty, acc, "")?;
        let was = self
            .b()
            .build_load(ctx.bool_type(), started, "")?
            .into_int_value();
        let comb = self.combine(r, s, cur, v)?;
        let comb = self.select(was.into(), comb, v)?;
        let next = self.select(take.into(), comb, cur)?;
        self.b().build_store(acc, next)?;
        let now = self.b().build_or(was, take, "")?;
        self.b().build_store(started, now)?;
        let l1 = self.b().build_int_add(l, self.cx.i32(1), "")?;
        self.b().build_store(idx, l1)?;
        let more = self
            .b()
            .build_int_compare(IntPredicate::ULT, l1, self.cx.i32(w), "")?;
        self.b().build_conditional_branch(more, head, done)?;
        self.b().position_at_end(done);
        let part_v = self.b().build_load(ty, acc, "")?;
        let part_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(end_bb)?;

        self.b().position_at_end(end_bb);
        let phi = self.b().build_phi(ty, "")?;
        phi.add_incoming(&[(&full_v, full_end), (&part_v, part_end)]);
        Ok(phi.as_basic_value())
    }
}
