//! `print` and `assert` (issue 23 item 9): per active lane in lane order, a call to the
//! runtime helper that claims a record of the launch's buffer and writes it
//! (`rt::xpu_debug_print`, `rt::xpu_debug_assert`; layout in [`crate::ir::debug`]).

use super::*;
use crate::ir::debug::{DebugSite, SiteKind, MAX_PRINT_VALUES};

impl<'a, 'm> Lower<'a, 'm> {
    /// The value of lane `v` of scalar `s` as the 64 bits a record holds.
    fn debug_bits(&mut self, s: Scalar, v: Value) -> Value {
        match s {
            Scalar::F32 => {
                let i = self.b.ins().bitcast(types::I32, le(), v);
                self.b.ins().uextend(types::I64, i)
            }
            Scalar::F64 => self.b.ins().bitcast(types::I64, le(), v),
            Scalar::I64 | Scalar::U64 => v,
            _ => self.b.ins().uextend(types::I64, v),
        }
    }

    pub(super) fn debug_stmt(&mut self, st: &Stmt) -> Result<(), Error> {
        let (roots, kind, is_assert) = match &st.kind {
            StmtKind::Print { format, args } => {
                let scalars = args.iter().map(|&a| scalar_of(self.ty(a))).collect();
                (
                    args.clone(),
                    SiteKind::Print {
                        format: format.clone(),
                        args: scalars,
                    },
                    false,
                )
            }
            StmtKind::Assert { cond, message } => (
                vec![*cond],
                SiteKind::Assert {
                    message: message.clone(),
                },
                true,
            ),
            _ => return Err(self.internal("debug_stmt on another statement")),
        };
        if roots.len() > MAX_PRINT_VALUES {
            return Err(self.internal("a print of more values than the verifier allows"));
        }
        let scalars: Vec<Scalar> = roots.iter().map(|&r| scalar_of(self.ty(r))).collect();
        let vals: Vec<Val> = self
            .eval_ops(&roots)?
            .into_iter()
            .map(|e| e.vals().remove(0))
            .collect();
        let site = self.debug_sites.len() as i64;
        self.debug_sites.push(DebugSite {
            line: st.span.line,
            kind,
        });
        let lanes: Vec<Vec<Value>> = vals
            .iter()
            .zip(&scalars)
            .map(|(v, s)| self.lanes(*s, v))
            .collect();
        let ids = self.local_ids.clone();
        let lid: Vec<Vec<Value>> = ids.iter().map(|v| self.lanes(Scalar::U32, v)).collect();
        // The workgroup's linear id: x + nx * (y + ny * z).
        let gz = self.b.ins().imul(self.group[2], self.ngroups[1]);
        let gyz = self.b.ins().iadd(self.group[1], gz);
        let gyz = self.b.ins().imul(gyz, self.ngroups[0]);
        let group = self.b.ins().iadd(self.group[0], gyz);
        let buf = self
            .b
            .ins()
            .load(types::I64, notrap(), self.ctx, ctx_off::DEBUG);
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            8 * MAX_PRINT_VALUES as u32,
            3,
        ));
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let site_v = self.b.ins().iconst(types::I32, site);
        for l in 0..self.n as usize {
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let mut go = self.b.ins().band_imm_u(bit, 1);
            if is_assert {
                let failed = self.b.ins().icmp_imm_s(IntCC::Equal, lanes[0][l], 0);
                let failed = self.b.ins().uextend(types::I64, failed);
                go = self.b.ins().band(go, failed);
            }
            let doit = self.b.create_block();
            let join = self.b.create_block();
            self.b.ins().brif(go, doit, &[], join, &[]);
            self.b.switch_to_block(doit);
            let z = self.b.ins().imul(lid[2][l], self.bdim[1]);
            let yz = self.b.ins().iadd(lid[1][l], z);
            let yz = self.b.ins().imul(yz, self.bdim[0]);
            let item = self.b.ins().iadd(lid[0][l], yz);
            if is_assert {
                self.call(
                    "xpu_debug_assert",
                    &[types::I64, types::I32, types::I32, types::I32],
                    &[],
                    &[buf, site_v, group, item],
                );
            } else {
                for (k, s) in scalars.iter().enumerate() {
                    let w = self.debug_bits(*s, lanes[k][l]);
                    self.b
                        .ins()
                        .stack_store(types::I64, w, slot, (8 * k) as i32);
                }
                let addr = self.b.ins().stack_addr(types::I64, slot, 0);
                let n = self.b.ins().iconst(types::I64, scalars.len() as i64);
                self.call(
                    "xpu_debug_print",
                    &[
                        types::I64,
                        types::I32,
                        types::I32,
                        types::I32,
                        types::I64,
                        types::I64,
                    ],
                    &[],
                    &[buf, site_v, group, item, addr, n],
                );
            }
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(join);
        }
        Ok(())
    }
}
