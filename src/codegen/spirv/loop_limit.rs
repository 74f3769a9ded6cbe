//! The loop-limit probe (Caps::loop_limit).

use super::*;

impl Emitter<'_> {
    /// The kernel's `OpReturn`, after the loop-limit probe where a loop may have run.
    pub(super) fn kernel_return(&mut self) {
        if self.caps.loop_limit.is_some() && self.loop_opened {
            self.loop_limit_probe();
        }
        self.b.ret().expect("in a block");
    }

    /// The status buffer's binding: the one after the buffer parameters'.
    pub(super) fn status_binding(&self) -> u32 {
        self.slots
            .iter()
            .filter(|s| matches!(s, ParamSlot::Buffer { .. }))
            .count() as u32
    }

    /// A storage buffer of `u32`s in descriptor set 0, its binding left to the caller: the
    /// loop-limit status and the checked-mode report buffer are both one.
    pub(super) fn u32_storage_var(&mut self) -> Word {
        let st = self
            .buffer_struct(Scalar::U32, false)
            .expect("32-bit buffer elements need no capability");
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, st));
        let var = self.b.id();
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::Variable,
                Some(pt),
                Some(var),
                vec![Operand::StorageClass(StorageClass::StorageBuffer)],
            ));
        self.b.decorate(
            var,
            spirv::Decoration::DescriptorSet,
            vec![Operand::LiteralBit32(0)],
        );
        var
    }

    pub(super) fn status_var(&mut self) -> Word {
        if let Some(v) = self.loop_status {
            return v;
        }
        let var = self.u32_storage_var();
        let binding = self.status_binding();
        self.b.decorate(
            var,
            spirv::Decoration::Binding,
            vec![Operand::LiteralBit32(binding)],
        );
        self.loop_status = Some(var);
        var
    }

    /// Finds out whether the driver's loop limiter is spent and flags it in the status buffer.
    ///
    /// llvmpipe keeps one limiter per invocation for all its loops and never resets it:
    /// once a loop has been cut short, every later loop is left after one pass. So a loop
    /// that should run `bound` (= 2, read from the status buffer so that the compiler can
    /// neither unroll the loop nor know its trip count) passes, run just before the
    /// invocation ends, comes out short exactly when the limiter was spent before it (or had
    /// fewer than 2 passes left: a kernel whose loops took 65,534 or 65,535 passes, still
    /// right, is refused too). A
    /// check after each of the kernel's own loops would not do: the compiler knows a loop
    /// is only left through its exits and folds such a check away.
    pub(super) fn loop_limit_probe(&mut self) {
        let u = self.u32t();
        let bt = self.boolt();
        let zero = self.cu32(0);
        let one = self.cu32(1);
        let bound = self.probe_bound();
        let k = self.fn_var(u);
        self.store(k, zero);
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
        let x = self.load(u, k);
        let more = self.opi(Op::ULessThan, bt, &[x, bound]);
        self.branch_cond(more, bodyb, merge);
        self.block(bodyb);
        let y = self.opi(Op::IAdd, u, &[x, one]);
        self.store(k, y);
        self.branch(cont);
        self.block(cont);
        self.branch(header);
        self.block(merge);
        // `!=` rather than `<`: a different comparison from the loop's, which the compiler
        // cannot take as already decided at the merge.
        let x = self.load(u, k);
        let cut = self.opi(Op::INotEqual, bt, &[x, bound]);
        let (set, after) = (self.b.id(), self.b.id());
        self.sel_merge(after);
        self.branch_cond(cut, set, after);
        self.block(set);
        self.flag_loop_limit();
        self.branch(after);
        self.block(after);
    }

    /// Word `k` of the status buffer: 0 the flag, 1 the probe bound.
    pub(super) fn status_word(&mut self, k: u32) -> Word {
        let status = self.status_var();
        let u = self.u32t();
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, u));
        let zero = self.cu32(0);
        let k = self.cu32(k);
        self.opi(Op::AccessChain, pt, &[status, zero, k])
    }

    /// The probe loop's bound, 2, loaded from the status buffer (so no compiler knows it).
    pub(super) fn probe_bound(&mut self) -> Word {
        let p = self.status_word(1);
        let u = self.u32t();
        self.load(u, p)
    }

    /// Sets the status flag: the launch reached the driver's loop limit.
    pub(super) fn flag_loop_limit(&mut self) {
        let p = self.status_word(0);
        let scope = self.cu32(SCOPE_DEVICE);
        let relaxed = self.cu32(0);
        let one = self.cu32(1);
        self.op_void(
            Op::AtomicStore,
            vec![
                Operand::IdRef(p),
                Operand::IdScope(scope),
                Operand::IdMemorySemantics(relaxed),
                Operand::IdRef(one),
            ],
        );
    }
}
