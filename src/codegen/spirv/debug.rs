//! `print` and `assert` in SPIR-V (issue 23 item 9): the launch's debug buffer (a storage
//! buffer of `u32`s, bound after the checks' report buffer) and the records the statements
//! write into it, as [`crate::ir::debug`] lays them out.

use super::*;
use crate::ir::debug::PRINT_REGION_WORDS;
use crate::ir::debug::{DebugSite, SiteKind, ASSERT_BASE, ASSERT_REGION_WORDS, HEADER_WORDS};

impl Emitter<'_> {
    /// The debug buffer's variable, declared on first use; its binding is decorated when the
    /// entry point is finished.
    fn debug_var(&mut self) -> Word {
        if let Some(v) = self.debug_var {
            return v;
        }
        let var = self.u32_storage_var();
        self.debug_var = Some(var);
        var
    }

    fn debug_word(&mut self, at: Word) -> Word {
        let var = self.debug_var();
        let u = self.u32t();
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, u));
        let z = self.cu32(0);
        self.opi(Op::AccessChain, pt, &[var, z, at])
    }

    /// The two words (low, high) of a value of `s`.
    fn debug_words(&mut self, s: Scalar, v: Word) -> SpirvResult<[Word; 2]> {
        let u = self.u32t();
        let zero = self.cu32(0);
        Ok(match s {
            Scalar::Bool => {
                let one = self.cu32(1);
                [self.opi(Op::Select, u, &[v, one, zero]), zero]
            }
            Scalar::U32 => [v, zero],
            Scalar::I32 | Scalar::F32 => [self.opi(Op::Bitcast, u, &[v]), zero],
            Scalar::I64 | Scalar::U64 | Scalar::F64 => {
                let uv2 = self.tk(TyKey::Vec(u, 2));
                let p = self.opi(Op::Bitcast, uv2, &[v]);
                let lo = self.op(
                    Op::CompositeExtract,
                    u,
                    vec![Operand::IdRef(p), Operand::LiteralBit32(0)],
                );
                let hi = self.op(
                    Op::CompositeExtract,
                    u,
                    vec![Operand::IdRef(p), Operand::LiteralBit32(1)],
                );
                [lo, hi]
            }
            Scalar::F16 => {
                let u16t = self.scalar_ty(Scalar::U16)?;
                let b = self.opi(Op::Bitcast, u16t, &[v]);
                [self.opi(Op::UConvert, u, &[b]), zero]
            }
            Scalar::I8 | Scalar::U8 | Scalar::I16 | Scalar::U16 => {
                [self.opi(Op::UConvert, u, &[v]), zero]
            }
        })
    }

    /// Claims `words.len()` words of the region behind cursor word `cursor` (starting at
    /// buffer word `base`, `cap` words long) and writes `words` there where they fit.
    fn debug_record(&mut self, cursor: u32, base: u32, cap: u32, words: &[Word]) {
        let u = self.u32t();
        let bt = self.boolt();
        let c = self.cu32(cursor);
        let pc = self.debug_word(c);
        let scope = self.cu32(SCOPE_DEVICE);
        let relaxed = self.cu32(0);
        let n = self.cu32(words.len() as u32);
        let at = self.op(
            Op::AtomicIAdd,
            u,
            vec![
                Operand::IdRef(pc),
                Operand::IdScope(scope),
                Operand::IdMemorySemantics(relaxed),
                Operand::IdRef(n),
            ],
        );
        // `at <= cap - n`: no overflow of `at + n`.
        let room = self.cu32(cap - words.len() as u32);
        let fits = self.opi(Op::ULessThanEqual, bt, &[at, room]);
        let (write, m) = (self.b.id(), self.b.id());
        self.sel_merge(m);
        self.branch_cond(fits, write, m);
        self.block(write);
        let b = self.cu32(base);
        let start = self.opi(Op::IAdd, u, &[at, b]);
        for (j, w) in words.iter().enumerate() {
            let jj = self.cu32(j as u32);
            let i = self.opi(Op::IAdd, u, &[start, jj]);
            let p = self.debug_word(i);
            self.store(p, *w);
        }
        self.branch(m);
        self.block(m);
    }

    /// The workgroup's linear id and the work-item's linear local id.
    fn debug_ids(&mut self) -> (Word, Word) {
        let u = self.u32t();
        let g = [Dim::X, Dim::Y, Dim::Z].map(|d| self.builtin_vec(spirv::BuiltIn::WorkgroupId, d));
        let n =
            [Dim::X, Dim::Y, Dim::Z].map(|d| self.builtin_vec(spirv::BuiltIn::NumWorkgroups, d));
        let z = self.opi(Op::IMul, u, &[g[2], n[1]]);
        let yz = self.opi(Op::IAdd, u, &[g[1], z]);
        let yz = self.opi(Op::IMul, u, &[yz, n[0]]);
        let group = self.opi(Op::IAdd, u, &[g[0], yz]);
        let var = self.builtin(spirv::BuiltIn::LocalInvocationIndex, u);
        let item = self.load(u, var);
        (group, item)
    }

    pub(super) fn debug_stmt(&mut self, kind: &StmtKind) -> SpirvResult<()> {
        let fh = self.frame().func;
        match kind {
            StmtKind::Print { format, args } => {
                let mut types = Vec::new();
                let mut words = Vec::new();
                for &a in args {
                    let Some(Type::Scalar(s)) = self.m.expr_type(fh, a) else {
                        return refuse("print of a value that is not a scalar");
                    };
                    let v = self.expr(a)?;
                    words.extend(self.debug_words(s, v)?);
                    types.push(s);
                }
                let site = self.debug_sites.len() as u32;
                self.debug_sites.push(DebugSite {
                    line: self.cur_line,
                    kind: SiteKind::Print {
                        format: format.clone(),
                        args: types,
                    },
                });
                let (group, item) = self.debug_ids();
                let s = self.cu32(site);
                let mut rec = vec![s, group, item];
                rec.extend(words);
                self.debug_record(0, HEADER_WORDS, PRINT_REGION_WORDS, &rec);
            }
            StmtKind::Assert { cond, message } => {
                let c = self.expr(*cond)?;
                let site = self.debug_sites.len() as u32;
                self.debug_sites.push(DebugSite {
                    line: self.cur_line,
                    kind: SiteKind::Assert {
                        message: message.clone(),
                    },
                });
                let (bad, m) = (self.b.id(), self.b.id());
                self.sel_merge(m);
                self.branch_cond(c, m, bad);
                self.block(bad);
                let (group, item) = self.debug_ids();
                let s = self.cu32(site);
                self.debug_record(1, ASSERT_BASE, ASSERT_REGION_WORDS, &[s, group, item]);
                self.branch(m);
                self.block(m);
            }
            _ => return refuse("debug_stmt on another statement"),
        }
        Ok(())
    }
}
