//! Atomics and wave verbs.

use super::*;

impl Emitter<'_> {
    pub(super) fn atomic(
        &mut self,
        op: AtomicOp,
        order: MemoryOrder,
        place: Place,
        value: ExprId,
        compare: Option<ExprId>,
    ) -> SpirvResult<Word> {
        let Place::Element { base, index } = place else {
            return refuse("an atomic on a local");
        };
        let (s, _) = self.sl(value);
        if s.bits() == 64 {
            if !self.caps.int64_atomics {
                return refuse("64-bit integer atomics (shaderBufferInt64Atomics)");
            }
            self.cap(Capability::Int64Atomics);
        }
        let i = self.expr_u32(index)?;
        let cmp = match compare {
            Some(c) => Some(self.expr(c)?),
            None => None,
        };
        let v = self.expr(value)?;
        if !self.checks.bounds {
            return self.atomic_at(op, order, base, s, i, v, cmp);
        }
        // Checked mode: the atomic runs only in bounds; its value is 0 elsewhere.
        let t = self.scalar_ty(s)?;
        self.checked_value(base, i, t, |em| em.atomic_at(op, order, base, s, i, v, cmp))
    }

    /// The atomic `op` on element `i` of `base` (scalar `s`), operands evaluated.
    #[allow(clippy::too_many_arguments)]
    fn atomic_at(
        &mut self,
        op: AtomicOp,
        order: MemoryOrder,
        base: Base,
        s: Scalar,
        i: Word,
        v: Word,
        cmp: Option<Word>,
    ) -> SpirvResult<Word> {
        let (ptr, st, stored, scope, storage_bits) = match base {
            Base::Param(p) => {
                let (ptr, st, ss) = self.buffer_ptr(p, i);
                (ptr, st, ss, SCOPE_DEVICE, SEM_UNIFORM)
            }
            Base::Shared(_) => {
                let (ptr, st, se) = self.elem_ptr_other(base, i)?;
                (ptr, st, se.scalar, SCOPE_WORKGROUP, SEM_WORKGROUP)
            }
            Base::Local(_) => return refuse("an atomic on a private array"),
        };
        let order_bits = match order {
            MemoryOrder::Relaxed => 0,
            MemoryOrder::Acquire => SEM_ACQUIRE,
            MemoryOrder::Release => SEM_RELEASE,
            MemoryOrder::AcqRel | MemoryOrder::SeqCst => SEM_ACQ_REL,
        };
        let sem_bits = if order_bits == 0 || self.caps.barrier_suspends {
            0
        } else {
            order_bits | storage_bits
        };
        let scope_c = self.cu32(scope);
        let sem = self.cu32(sem_bits);
        let t = self.scalar_ty(s)?;
        if s == Scalar::F16 {
            return refuse("f16 atomics (Vulkan has no 16-bit atomics)");
        }
        if s.is_float() || matches!(op, AtomicOp::Inc | AtomicOp::Dec) {
            // A compare-exchange loop on the element's bits (floats are stored as integers):
            // float add/min/max and CUDA's wrapping inc/dec, which SPIR-V lacks.
            // The canonical form: the value a failed exchange saw is the next iteration's
            // expected value (a phi in the header), so the element is loaded once.
            let (header, body, cont, merge) = (self.b.id(), self.b.id(), self.b.id(), self.b.id());
            let relaxed = self.cu32(0);
            let first = self.op(
                Op::AtomicLoad,
                st,
                vec![
                    Operand::IdRef(ptr),
                    Operand::IdScope(scope_c),
                    Operand::IdMemorySemantics(relaxed),
                ],
            );
            let entry = self.cur_label;
            let old = self.b.id();
            let got_id = self.b.id();
            self.branch(header);
            self.block(header);
            self.b
                .insert_into_block(
                    InsertPoint::End,
                    Instruction::new(
                        Op::Phi,
                        Some(st),
                        Some(old),
                        ids(&[first, entry, got_id, cont]),
                    ),
                )
                .map_err(|e| Error::internal(format!("SPIR-V builder: {e:?}")))?;
            self.loop_header(merge, cont);
            self.branch(body);
            self.block(body);
            let bt = self.boolt();
            let oldf = if s.is_float() {
                self.opi(Op::Bitcast, t, &[old])
            } else {
                old
            };
            let sum = match op {
                AtomicOp::Min | AtomicOp::Max if s.is_float() => {
                    self.fminmax(s, 1, op == AtomicOp::Min, t, bt, oldf, v)?
                }
                AtomicOp::Inc => {
                    let ge = self.opi(Op::UGreaterThanEqual, bt, &[oldf, v]);
                    let one = self.konst(t, 1);
                    let up = self.opi(Op::IAdd, t, &[oldf, one]);
                    let zero = self.konst(t, 0);
                    self.opi(Op::Select, t, &[ge, zero, up])
                }
                AtomicOp::Dec => {
                    let zero = self.konst(t, 0);
                    let z = self.opi(Op::IEqual, bt, &[oldf, zero]);
                    let gt = self.opi(Op::UGreaterThan, bt, &[oldf, v]);
                    let wrap = self.opi(Op::LogicalOr, bt, &[z, gt]);
                    let one = self.konst(t, 1);
                    let down = self.opi(Op::ISub, t, &[oldf, one]);
                    self.opi(Op::Select, t, &[wrap, v, down])
                }
                _ => self.fop(Op::FAdd, t, &[oldf, v]),
            };
            let new = if s.is_float() {
                self.opi(Op::Bitcast, st, &[sum])
            } else {
                sum
            };
            let neq_sem = self.cu32(
                sem_bits & !(SEM_RELEASE | SEM_ACQ_REL)
                    | if sem_bits & SEM_ACQ_REL != 0 {
                        SEM_ACQUIRE
                    } else {
                        0
                    },
            );
            self.b
                .insert_into_block(
                    InsertPoint::End,
                    Instruction::new(
                        Op::AtomicCompareExchange,
                        Some(st),
                        Some(got_id),
                        vec![
                            Operand::IdRef(ptr),
                            Operand::IdScope(scope_c),
                            Operand::IdMemorySemantics(sem),
                            Operand::IdMemorySemantics(neq_sem),
                            Operand::IdRef(new),
                            Operand::IdRef(old),
                        ],
                    ),
                )
                .map_err(|e| Error::internal(format!("SPIR-V builder: {e:?}")))?;
            let ok = self.opi(Op::IEqual, bt, &[got_id, old]);
            self.branch_cond(ok, merge, cont);
            self.block(cont);
            self.branch(header);
            self.block(merge);
            let _ = stored;
            return Ok(oldf);
        }
        let o = match op {
            AtomicOp::Add => Op::AtomicIAdd,
            AtomicOp::Sub => Op::AtomicISub,
            AtomicOp::Min if s.is_signed() => Op::AtomicSMin,
            AtomicOp::Min => Op::AtomicUMin,
            AtomicOp::Max if s.is_signed() => Op::AtomicSMax,
            AtomicOp::Max => Op::AtomicUMax,
            AtomicOp::And => Op::AtomicAnd,
            AtomicOp::Or => Op::AtomicOr,
            AtomicOp::Xor => Op::AtomicXor,
            AtomicOp::Exchange => Op::AtomicExchange,
            AtomicOp::Inc | AtomicOp::Dec => unreachable!("a compare-exchange loop above"),
            AtomicOp::CompareExchange => {
                let neq = sem_bits & !(SEM_RELEASE | SEM_ACQ_REL)
                    | if sem_bits & SEM_ACQ_REL != 0 {
                        SEM_ACQUIRE
                    } else {
                        0
                    };
                let neq = if neq & (SEM_ACQUIRE) == 0 { 0 } else { neq };
                let neq_c = self.cu32(neq);
                let c = cmp.expect("compare_exchange has an expected value");
                return Ok(self.op(
                    Op::AtomicCompareExchange,
                    t,
                    vec![
                        Operand::IdRef(ptr),
                        Operand::IdScope(scope_c),
                        Operand::IdMemorySemantics(sem),
                        Operand::IdMemorySemantics(neq_c),
                        Operand::IdRef(v),
                        Operand::IdRef(c),
                    ],
                ));
            }
        };
        Ok(self.op(
            o,
            t,
            vec![
                Operand::IdRef(ptr),
                Operand::IdScope(scope_c),
                Operand::IdMemorySemantics(sem),
                Operand::IdRef(v),
            ],
        ))
    }

    pub(super) fn shuffle(&mut self, t: Word, x: Word, lane: Word) -> SpirvResult<Word> {
        if let Some(&(lt, n)) = self.wide.get(&t) {
            // A wide vector (an array) is shuffled lane by lane.
            let mut ls = Vec::new();
            for k in 0..n {
                let xk = self.op(
                    Op::CompositeExtract,
                    lt,
                    vec![Operand::IdRef(x), Operand::LiteralBit32(k as u32)],
                );
                ls.push(self.shuffle(lt, xk, lane)?);
            }
            return Ok(self.opi(Op::CompositeConstruct, t, &ls));
        }
        if !self.caps.subgroup_shuffle {
            return refuse("subgroup shuffles (VK_SUBGROUP_FEATURE_SHUFFLE)");
        }
        self.cap(Capability::GroupNonUniformShuffle);
        let sc = self.cu32(SCOPE_SUBGROUP);
        Ok(self.op(
            Op::GroupNonUniformShuffle,
            t,
            vec![
                Operand::IdScope(sc),
                Operand::IdRef(x),
                Operand::IdRef(lane),
            ],
        ))
    }

    pub(super) fn wave(
        &mut self,
        op: WaveOp,
        args: &[ExprId],
        width: Option<u32>,
        ty: Option<Type>,
    ) -> SpirvResult<Word> {
        if let WaveMode::Virtual { slots } = self.mode {
            // Verbs of the kernel body are emulated before their statement (`pre_verbs`);
            // one reaching here sits where the workgroup cannot be made to meet it.
            return refuse(format!(
                "{} in a virtual wave (@wave({}) on subgroups of {}, {slots} subgroups per \
                 wave) inside a helper, a loop condition or a loop bound: the \
                 shared-memory exchange needs the whole workgroup at the verb",
                wave_verb_name(op),
                self.wave_w,
                self.caps.subgroup_size
            ));
        }
        if !self.caps.subgroup_basic {
            return refuse("subgroup operations (VK_SUBGROUP_FEATURE_BASIC)");
        }
        self.uses_wave_verbs = true;
        if let Some(t) = width
            .map(|t| t.min(self.wave_w))
            .filter(|&t| t < self.wave_w)
        {
            // Tiles of `t` lanes within a wave of one subgroup or less: the narrow lowering
            // with waves of `t` (clusters of `t` consecutive subgroup invocations). The
            // operands are evaluated first, under the kernel's own wave.
            let vs = args
                .iter()
                .map(|a| self.expr(*a))
                .collect::<SpirvResult<Vec<_>>>()?;
            let (mode, w) = (self.mode, self.wave_w);
            self.mode = WaveMode::Narrow;
            self.wave_w = t;
            let r = self.wave_narrow_vals(op, args, &vs, ty);
            self.mode = mode;
            self.wave_w = w;
            return r;
        }
        if self.mode == WaveMode::Narrow {
            return self.wave_narrow(op, args, ty);
        }
        self.cap(Capability::GroupNonUniform);
        let sc = self.cu32(SCOPE_SUBGROUP);
        let t = self.value_ty(ty.unwrap_or(Type::BOOL))?;
        let (s, _) = if args.is_empty() {
            (Scalar::Bool, 1)
        } else {
            self.sl(args[0])
        };
        let vs = args
            .iter()
            .map(|a| self.expr(*a))
            .collect::<SpirvResult<Vec<_>>>()?;
        let u = self.u32t();
        let bt = self.boolt();
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
                    let (_, lanes) = self.sl(args[0]);
                    let excl = group == spirv::GroupOperation::ExclusiveScan;
                    return self.float_minmax_wave(
                        r == ReduceOp::Min,
                        s,
                        t,
                        lanes,
                        excl,
                        vs[0],
                        |em, o, ty, v, _| {
                            Ok(em.op(
                                o,
                                ty,
                                vec![
                                    Operand::IdScope(sc),
                                    Operand::GroupOperation(group),
                                    Operand::IdRef(v),
                                ],
                            ))
                        },
                    );
                }
                let r = self.op(
                    o,
                    t,
                    vec![
                        Operand::IdScope(sc),
                        Operand::GroupOperation(group),
                        Operand::IdRef(vs[0]),
                    ],
                );
                if s.is_float() {
                    self.b.decorate(r, spirv::Decoration::NoContraction, vec![]);
                }
                if s.is_float() && r_op_is_sum(op) && self.caps.float_sum_from_positive_zero {
                    let (_, lanes) = self.sl(args[0]);
                    self.negative_zero_sum(group, s, lanes, t, vs[0], r)?
                } else {
                    r
                }
            }
            WaveOp::Broadcast | WaveOp::Shuffle => {
                let (ls, _) = self.sl(args[1]);
                let l = self.cast(vs[1], ls, Scalar::U32, 1)?;
                // `width = W`: the lane counts modulo the tile, here the wave.
                let l = if width.is_some() {
                    let m = self.cu32(self.wave_w - 1);
                    self.opi(Op::BitwiseAnd, u, &[l, m])
                } else {
                    l
                };
                self.shuffle(t, vs[0], l)?
            }
            WaveOp::ShuffleXor | WaveOp::ShuffleUp | WaveOp::ShuffleDown | WaveOp::Rotate => {
                let (ls, _) = self.sl(args[1]);
                let d = self.cast(vs[1], ls, Scalar::U32, 1)?;
                let lane = self.subgroup_scalar(spirv::BuiltIn::SubgroupLocalInvocationId)?;
                let width = self.subgroup_scalar(spirv::BuiltIn::SubgroupSize)?;
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
                        let one = self.cu32(1);
                        let mask = self.opi(Op::ISub, u, &[width, one]);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::BitwiseAnd, u, &[x, mask])
                    }
                };
                self.shuffle(t, vs[0], src)?
            }
            WaveOp::Ballot => {
                if !self.caps.subgroup_ballot {
                    return refuse("subgroup ballots (VK_SUBGROUP_FEATURE_BALLOT)");
                }
                self.cap(Capability::GroupNonUniformBallot);
                let uv4 = self.tk(TyKey::Vec(u, 4));
                let b = self.op(
                    Op::GroupNonUniformBallot,
                    uv4,
                    vec![Operand::IdScope(sc), Operand::IdRef(vs[0])],
                );
                let uv2 = self.tk(TyKey::Vec(u, 2));
                let lo = self.op(
                    Op::VectorShuffle,
                    uv2,
                    vec![
                        Operand::IdRef(b),
                        Operand::IdRef(b),
                        Operand::LiteralBit32(0),
                        Operand::LiteralBit32(1),
                    ],
                );
                self.opi(Op::Bitcast, t, &[lo])
            }
            WaveOp::Any | WaveOp::All => {
                if !self.caps.subgroup_vote {
                    return refuse("subgroup votes (VK_SUBGROUP_FEATURE_VOTE)");
                }
                self.cap(Capability::GroupNonUniformVote);
                let o = if op == WaveOp::Any {
                    Op::GroupNonUniformAny
                } else {
                    Op::GroupNonUniformAll
                };
                self.op(o, bt, vec![Operand::IdScope(sc), Operand::IdRef(vs[0])])
            }
            WaveOp::Elect => self.op(Op::GroupNonUniformElect, bt, vec![Operand::IdScope(sc)]),
        })
    }
}

/// Whether `op` is a float sum (a reduction or a scan of `+`).
fn r_op_is_sum(op: WaveOp) -> bool {
    matches!(
        op,
        WaveOp::Reduce(ReduceOp::Sum)
            | WaveOp::InclusiveScan(ReduceOp::Sum)
            | WaveOp::ExclusiveScan(ReduceOp::Sum)
    )
}

impl Emitter<'_> {
    /// A subgroup float sum `r` of `x` corrected where the driver starts it from +0.0
    /// ([`Caps::float_sum_from_positive_zero`]): an IEEE sum is -0.0 exactly when every term
    /// is -0.0, so where every lane the operation covers holds -0.0 (counted by an integer
    /// scan of the lanes that do not), the result is -0.0; an exclusive scan's first active
    /// lane keeps the identity, +0.0, as the interpreter's does. An f16 sum on a device
    /// without 16-bit integers, or f64 without 64-bit ones, stays the driver's.
    fn negative_zero_sum(
        &mut self,
        group: spirv::GroupOperation,
        s: Scalar,
        lanes: u8,
        t: Word,
        x: Word,
        r: Word,
    ) -> SpirvResult<Word> {
        let (bits_scalar, sign) = match s {
            Scalar::F16 if self.caps.int16 => (Scalar::U16, 1u64 << 15),
            Scalar::F32 => (Scalar::U32, 1u64 << 31),
            Scalar::F64 if self.caps.int64 => (Scalar::U64, 1u64 << 63),
            _ => return Ok(r),
        };
        if self.wide.contains_key(&t) {
            return Ok(r);
        }
        let bits_ty = self.vec_ty(bits_scalar, lanes)?;
        let xb = self.opi(Op::Bitcast, bits_ty, &[x]);
        let sign_c = self.konst(bits_ty, sign);
        let bt = self.bool_of(t);
        let is_neg_zero = self.opi(Op::IEqual, bt, &[xb, sign_c]);
        let ut = self.vec_ty(Scalar::U32, lanes)?;
        let (zero, one) = (self.konst(ut, 0), self.konst(ut, 1));
        let other = self.opi(Op::Select, ut, &[is_neg_zero, zero, one]);
        let sc = self.cu32(SCOPE_SUBGROUP);
        let count = self.op(
            Op::GroupNonUniformIAdd,
            ut,
            vec![
                Operand::IdScope(sc),
                Operand::GroupOperation(group),
                Operand::IdRef(other),
            ],
        );
        let mut all = self.opi(Op::IEqual, bt, &[count, zero]);
        if group == spirv::GroupOperation::ExclusiveScan {
            let sbt = self.boolt();
            let first = self.op(Op::GroupNonUniformElect, sbt, vec![Operand::IdScope(sc)]);
            let later = self.not_of(sbt, first);
            let later = if lanes > 1 {
                self.op(
                    Op::CompositeConstruct,
                    bt,
                    vec![Operand::IdRef(later); lanes as usize],
                )
            } else {
                later
            };
            all = self.opi(Op::LogicalAnd, bt, &[all, later]);
        }
        let neg_zero = self.konst(t, sign);
        Ok(self.opi(Op::Select, t, &[all, neg_zero, r]))
    }
}
