//! Narrow mode: waves of W < S lanes, S / W of them per subgroup.
//!
//! A wave is a cluster of W consecutive subgroup invocations (subgroups hold consecutive linear
//! local ids, as every driver lays them out). Reductions, scans and votes run once per cluster
//! c over the whole subgroup, every lane outside cluster c contributing the operator's
//! identity, and each lane keeps the result of its own cluster's pass: the active lanes of
//! the other clusters never mix in, whatever the divergence. Shuffles address
//! `cluster base + lane`; ballots and elect read the cluster's bits of a subgroup ballot.

use super::*;

impl Emitter<'_> {
    /// `(lane, cluster, base)`: the lane within the wave, the wave's index in the subgroup and
    /// its first subgroup invocation.
    pub(super) fn narrow_lane(&mut self) -> SpirvResult<(Word, Word, Word)> {
        let sub = self.subgroup_scalar(spirv::BuiltIn::SubgroupLocalInvocationId)?;
        let u = self.u32t();
        let m = self.cu32(self.wave_w - 1);
        let sh = self.cu32(self.wave_w.trailing_zeros());
        let lane = self.opi(Op::BitwiseAnd, u, &[sub, m]);
        let cl = self.opi(Op::ShiftRightLogical, u, &[sub, sh]);
        let base = self.opi(Op::ShiftLeftLogical, u, &[cl, sh]);
        Ok((lane, cl, base))
    }

    /// `c ? a : b` for values of `lanes` lanes with a scalar condition.
    pub(super) fn select_lanes(&mut self, t: Word, c: Word, a: Word, b: Word, lanes: u8) -> Word {
        let c = if lanes > 1 {
            let bt = self.boolt();
            let bv = self.tk(TyKey::Vec(bt, lanes as u32));
            self.opi(Op::CompositeConstruct, bv, &vec![c; lanes as usize])
        } else {
            c
        };
        self.opi(Op::Select, t, &[c, a, b])
    }

    /// A float `min`/`max` wave reduction or scan (`f16`/`f32`, up to 4 lanes) with the
    /// interpreter's rules, which `OpGroupNonUniformFMin`/`FMax` do not keep: a NaN lane
    /// yields to any number (all-NaN gives NaN, not the identity ±inf) and `-0 < +0`. Each
    /// value becomes an unsigned key whose order is the float order with `-0 < +0` (the
    /// sign-magnitude to biased mapping); a NaN becomes the key that loses every comparison
    /// (`u32::MAX` for min, 0 for max), which decodes back to a NaN. `run(op, ty, v, id)`
    /// performs the group operation `op` on `v` of type `ty` with identity `id`. An exclusive
    /// scan's first active lane gets the float identity (found by a second scan of ones).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn float_minmax_wave(
        &mut self,
        min: bool,
        s: Scalar,
        t: Word,
        lanes: u8,
        exclusive: bool,
        v: Word,
        mut run: impl FnMut(&mut Self, Op, Word, Word, Word) -> SpirvResult<Word>,
    ) -> SpirvResult<Word> {
        let ft = self.vec_ty(Scalar::F32, lanes)?;
        let ut = self.vec_ty(Scalar::U32, lanes)?;
        let bt = self.boolt();
        let bty = if lanes > 1 {
            self.tk(TyKey::Vec(bt, lanes as u32))
        } else {
            bt
        };
        let x = if s == Scalar::F16 {
            self.opi(Op::FConvert, ft, &[v])
        } else {
            v
        };
        let bits = self.opi(Op::Bitcast, ut, &[x]);
        let sign = self.konst(ut, 0x8000_0000);
        let zero = self.konst(ut, 0);
        let sb = self.opi(Op::BitwiseAnd, ut, &[bits, sign]);
        let neg = self.opi(Op::INotEqual, bty, &[sb, zero]);
        let inv = self.opi(Op::Not, ut, &[bits]);
        let biased = self.opi(Op::BitwiseOr, ut, &[bits, sign]);
        let key = self.opi(Op::Select, ut, &[neg, inv, biased]);
        let lose = self.konst(ut, if min { u32::MAX as u64 } else { 0 });
        let nan = self.opi(Op::IsNan, bty, &[x]);
        let key = self.opi(Op::Select, ut, &[nan, lose, key]);
        let op = if min {
            Op::GroupNonUniformUMin
        } else {
            Op::GroupNonUniformUMax
        };
        let k = run(self, op, ut, key, lose)?;
        let kb = self.opi(Op::BitwiseAnd, ut, &[k, sign]);
        let pos = self.opi(Op::INotEqual, bty, &[kb, zero]);
        let unb = self.opi(Op::BitwiseXor, ut, &[k, sign]);
        let kinv = self.opi(Op::Not, ut, &[k]);
        let bits = self.opi(Op::Select, ut, &[pos, unb, kinv]);
        let f = self.opi(Op::Bitcast, ft, &[bits]);
        let mut r = if s == Scalar::F16 {
            self.opi(Op::FConvert, t, &[f])
        } else {
            f
        };
        if exclusive {
            let one = self.konst(ut, 1);
            let prior = run(self, Op::GroupNonUniformUMax, ut, one, zero)?;
            let first = self.opi(Op::IEqual, bty, &[prior, zero]);
            let rop = if min { ReduceOp::Min } else { ReduceOp::Max };
            let id = self.const_of(s, lanes, Self::identity_bits(rop, s))?;
            r = self.opi(Op::Select, t, &[first, id, r]);
        }
        Ok(r)
    }

    /// The identity of `r` on scalar `s` (`semantics.md`: 0, all ones, the type's max/min).
    pub(super) fn identity_bits(r: ReduceOp, s: Scalar) -> u64 {
        let w = s.bits();
        let ones = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let inf = match s {
            Scalar::F16 => 0x7c00u64,
            Scalar::F32 => 0x7f80_0000,
            _ => 0x7ff0_0000_0000_0000,
        };
        match (r, s) {
            (ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor, _) => 0,
            (ReduceOp::And, Scalar::Bool) => 1,
            (ReduceOp::And, _) => ones,
            (ReduceOp::Min, s) if s.is_float() => inf,
            (ReduceOp::Max, s) if s.is_float() => inf | (1u64 << (w - 1)),
            (ReduceOp::Min, s) if s.is_signed() => ones >> 1,
            (ReduceOp::Max, s) if s.is_signed() => 1u64 << (w - 1),
            (ReduceOp::Min, _) => ones,
            (ReduceOp::Max, _) => 0,
        }
    }

    /// Runs `pass(value)` once per cluster with the other clusters' lanes given `identity`;
    /// each lane keeps its own cluster's result.
    pub(super) fn per_cluster(
        &mut self,
        t: Word,
        lanes: u8,
        v: Word,
        identity: Word,
        mut pass: impl FnMut(&mut Self, Word) -> Word,
    ) -> SpirvResult<Word> {
        let (_, cl, _) = self.narrow_lane()?;
        let bt = self.boolt();
        let u = self.u32t();
        let mut acc = None;
        for c in 0..self.caps.subgroup_size / self.wave_w {
            let cc = self.konst(u, c as u64);
            let mine = self.opi(Op::IEqual, bt, &[cl, cc]);
            let vc = self.select_lanes(t, mine, v, identity, lanes);
            let r = pass(self, vc);
            acc = Some(match acc {
                None => r,
                Some(a) => self.select_lanes(t, mine, r, a, lanes),
            });
        }
        Ok(acc.expect("S / W >= 2 clusters"))
    }

    /// This wave's bits of a subgroup ballot of `p`, as a `u32` (W ≤ 32 here).
    pub(super) fn cluster_ballot(&mut self, p: Word) -> SpirvResult<Word> {
        if !self.caps.subgroup_ballot {
            return refuse("subgroup ballots (VK_SUBGROUP_FEATURE_BALLOT)");
        }
        self.cap(Capability::GroupNonUniformBallot);
        let (_, _, base) = self.narrow_lane()?;
        let u = self.u32t();
        let uv4 = self.tk(TyKey::Vec(u, 4));
        let sc = self.cu32(SCOPE_SUBGROUP);
        let b = self.op(
            Op::GroupNonUniformBallot,
            uv4,
            vec![Operand::IdScope(sc), Operand::IdRef(p)],
        );
        let five = self.cu32(5);
        let word = self.opi(Op::ShiftRightLogical, u, &[base, five]);
        let comp = self.opi(Op::VectorExtractDynamic, u, &[b, word]);
        let m31 = self.cu32(31);
        let shift = self.opi(Op::BitwiseAnd, u, &[base, m31]);
        let bits = self.opi(Op::ShiftRightLogical, u, &[comp, shift]);
        let mask = self.cu32(if self.wave_w >= 32 {
            u32::MAX
        } else {
            (1u32 << self.wave_w) - 1
        });
        Ok(self.opi(Op::BitwiseAnd, u, &[bits, mask]))
    }

    pub(super) fn wave_narrow(
        &mut self,
        op: WaveOp,
        args: &[ExprId],
        ty: Option<Type>,
    ) -> SpirvResult<Word> {
        let vs = args
            .iter()
            .map(|a| self.expr(*a))
            .collect::<SpirvResult<Vec<_>>>()?;
        self.wave_narrow_vals(op, args, &vs, ty)
    }

    /// [`wave_narrow`](Self::wave_narrow) of operands `vs` already evaluated.
    pub(super) fn wave_narrow_vals(
        &mut self,
        op: WaveOp,
        args: &[ExprId],
        vs: &[Word],
        ty: Option<Type>,
    ) -> SpirvResult<Word> {
        self.cap(Capability::GroupNonUniform);
        let sc = self.cu32(SCOPE_SUBGROUP);
        let t = self.value_ty(ty.unwrap_or(Type::BOOL))?;
        let (s, lanes) = if args.is_empty() {
            (Scalar::Bool, 1)
        } else {
            self.sl(args[0])
        };
        let u = self.u32t();
        let bt = self.boolt();
        let w = self.wave_w;
        Ok(match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                if !self.caps.subgroup_arithmetic {
                    return refuse("subgroup arithmetic (VK_SUBGROUP_FEATURE_ARITHMETIC)");
                }
                self.cap(Capability::GroupNonUniformArithmetic);
                let (group, o) = group_reduction(op, r, s);
                if matches!(r, ReduceOp::Min | ReduceOp::Max)
                    && matches!(s, Scalar::F16 | Scalar::F32)
                    && !self.wide.contains_key(&t)
                {
                    let excl = group == spirv::GroupOperation::ExclusiveScan;
                    return self.float_minmax_wave(
                        r == ReduceOp::Min,
                        s,
                        t,
                        lanes,
                        excl,
                        vs[0],
                        |em, o, ty, v, id| {
                            em.per_cluster(ty, lanes, v, id, |em, v| {
                                em.op(
                                    o,
                                    ty,
                                    vec![
                                        Operand::IdScope(sc),
                                        Operand::GroupOperation(group),
                                        Operand::IdRef(v),
                                    ],
                                )
                            })
                        },
                    );
                }
                let id = self.const_of(s, lanes, Self::identity_bits(r, s))?;
                let float = s.is_float();
                self.per_cluster(t, lanes, vs[0], id, |em, v| {
                    let r = em.op(
                        o,
                        t,
                        vec![
                            Operand::IdScope(sc),
                            Operand::GroupOperation(group),
                            Operand::IdRef(v),
                        ],
                    );
                    if float {
                        em.b.decorate(r, spirv::Decoration::NoContraction, vec![]);
                    }
                    r
                })?
            }
            WaveOp::Any | WaveOp::All => {
                if !self.caps.subgroup_vote {
                    return refuse("subgroup votes (VK_SUBGROUP_FEATURE_VOTE)");
                }
                self.cap(Capability::GroupNonUniformVote);
                let (o, id) = if op == WaveOp::Any {
                    (Op::GroupNonUniformAny, 0)
                } else {
                    (Op::GroupNonUniformAll, 1)
                };
                let id = self.konst(bt, id);
                self.per_cluster(bt, 1, vs[0], id, |em, v| {
                    em.op(o, bt, vec![Operand::IdScope(sc), Operand::IdRef(v)])
                })?
            }
            WaveOp::Broadcast | WaveOp::Shuffle => {
                let (ls, _) = self.sl(args[1]);
                let l = self.cast(vs[1], ls, Scalar::U32, 1)?;
                let (_, _, base) = self.narrow_lane()?;
                let m = self.cu32(w - 1);
                let l = self.opi(Op::BitwiseAnd, u, &[l, m]);
                let src = self.opi(Op::BitwiseOr, u, &[base, l]);
                self.shuffle(t, vs[0], src)?
            }
            WaveOp::ShuffleXor | WaveOp::ShuffleUp | WaveOp::ShuffleDown | WaveOp::Rotate => {
                let (ls, _) = self.sl(args[1]);
                let d = self.cast(vs[1], ls, Scalar::U32, 1)?;
                let (lane, _, base) = self.narrow_lane()?;
                let width = self.cu32(w);
                let src = match op {
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
                        let mask = self.cu32(w - 1);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::BitwiseAnd, u, &[x, mask])
                    }
                };
                let abs = self.opi(Op::BitwiseOr, u, &[base, src]);
                self.shuffle(t, vs[0], abs)?
            }
            WaveOp::Ballot => {
                let bits = self.cluster_ballot(vs[0])?;
                self.opi(Op::UConvert, t, &[bits])
            }
            WaveOp::Elect => {
                let tr = self.konst(bt, 1);
                let bits = self.cluster_ballot(tr)?;
                let low = self.ext_inst(u, glsl::FIND_ILSB, &[bits]);
                let (lane, _, _) = self.narrow_lane()?;
                self.opi(Op::IEqual, bt, &[lane, low])
            }
        })
    }
}
