//! What the checked lowerings share (contract §2.3; issue 15 item 3, issue 16 item 4): the
//! options a program is lowered under, the device-side report buffer's layout, the table of
//! check sites a report names, and the alignment proof that decides which `align:` statements
//! cost nothing.
//!
//! - **Checked mode** ([`Checks::bounds`]): every buffer, shared and private access the
//!   lowering emits is tested against its object's length. The first out-of-bounds access of a
//!   launch writes its site, index and length into the report buffer; the access itself is
//!   skipped (a store, an atomic) or reads 0 (a load). The launch then fails with `XPU-L013`.
//! - **ub-traps** ([`Checks::ub_traps`]): every `vload`/`vstore` `align = N` statement that
//!   [`align_confirmed`] cannot prove is tested; a broken one is recorded (first writer wins),
//!   the access proceeds at the index rounded down to the statement, and the launch fails with
//!   `XPU-L010`. A statement the proof confirms gets no code.
//!
//! The report buffer is [`REPORT_WORDS`] `u32`s, zero before a launch. Word 0 is taken by
//! compare-and-swap from 0 to the kind ([`KIND_OUT_OF_BOUNDS`], [`KIND_MISALIGNED`]); the
//! winner writes the site, the index and the length (or the stated alignment) into words 1..4,
//! every later writer into the scratch words 4..8, so no second branch is needed.

use crate::ir::{BinaryOp, Expr, ExprId, Function, Literal, Scalar};

/// `u32` words of the report buffer.
pub const REPORT_WORDS: usize = 8;
/// Word 0 of a report that nothing wrote.
pub const KIND_NONE: u32 = 0;
/// An out-of-bounds access (`XPU-L013`): word 3 is the object's length in elements.
pub const KIND_OUT_OF_BOUNDS: u32 = 1;
/// A broken `align = N` statement (`XPU-L010`): word 3 is `N`.
pub const KIND_MISALIGNED: u32 = 2;
/// The first word of the winner's record, and of the losers' scratch record.
pub const WINNER_SLOT: u32 = 1;
/// The first word of the scratch record every later writer fills (words 4..8).
pub const LOSER_SLOT: u32 = 4;

/// What a lowering tests at run time. The default tests nothing: code is what it was before
/// checked mode existed (the snapshots under `tests/out` are built so).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Checks {
    /// Bounds-check every buffer, shared and private access (checked mode).
    pub bounds: bool,
    /// Test every `align = N` statement the proof does not confirm (ub-traps).
    pub ub_traps: bool,
}

impl Checks {
    /// Whether the lowering needs a report buffer at all.
    pub fn any(&self) -> bool {
        self.bounds || self.ub_traps
    }
}

/// One place in the kernel a report can name: its source line and what it accesses
/// (`buffer y`, `shared tile`, `array acc`, `align = 16`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckSite {
    /// The kernel source line of the access.
    pub line: u32,
    /// What it accesses, as a report names it (`buffer y`, `align = 16`).
    pub what: String,
}

/// A decoded report: the first failed check of a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The kind of failure ([`KIND_OUT_OF_BOUNDS`] or [`KIND_MISALIGNED`]).
    pub kind: u32,
    /// The index of the [`CheckSite`] in the kernel's site table.
    pub site: u32,
    /// The element index of the access.
    pub index: u32,
    /// The length (out of bounds) or the stated alignment (misaligned).
    pub len: u32,
}

impl Report {
    /// The report in `words` (at least [`REPORT_WORDS`] of them), `None` when nothing failed.
    pub fn decode(words: &[u32]) -> Option<Report> {
        let w = |i: u32| words.get(i as usize).copied().unwrap_or(0);
        match w(0) {
            KIND_NONE => None,
            kind => Some(Report {
                kind,
                site: w(WINNER_SLOT),
                index: w(WINNER_SLOT + 1),
                len: w(WINNER_SLOT + 2),
            }),
        }
    }

    /// `words` as the little-endian bytes a device read gives.
    pub fn decode_bytes(bytes: &[u8]) -> Option<Report> {
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Report::decode(&words)
    }
}

/// The largest power of two (up to 2^16) that provably divides the value of `e`, from its
/// own arithmetic: literals, template arguments, products, sums and left shifts by constants.
pub fn known_multiple(f: &Function, e: ExprId, args: &[u32], depth: u32) -> u64 {
    const CAP: u64 = 1 << 16;
    if depth > 64 {
        return 1;
    }
    let Some(x) = f.exprs.try_get(e) else {
        return 1;
    };
    let pow2 = |v: u64| {
        if v == 0 {
            CAP
        } else {
            (1u64 << v.trailing_zeros().min(16)).min(CAP)
        }
    };
    match x {
        Expr::Literal(Literal::Int { bits, .. }) => pow2(*bits),
        Expr::TemplateParam(i) => args.get(*i as usize).map_or(1, |v| pow2(*v as u64)),
        Expr::Binary { op, lhs, rhs } => {
            let a = known_multiple(f, *lhs, args, depth + 1);
            let b = known_multiple(f, *rhs, args, depth + 1);
            match op {
                BinaryOp::Mul => (a * b).min(CAP),
                BinaryOp::Add | BinaryOp::Sub => a.min(b),
                BinaryOp::BitAnd => a.max(b),
                BinaryOp::Shl => match f.exprs.try_get(*rhs) {
                    Some(Expr::Literal(Literal::Int { bits, .. })) if *bits < 16 => {
                        (a << bits).min(CAP)
                    }
                    _ => a,
                },
                _ => 1,
            }
        }
        Expr::Cast { arg, .. } => known_multiple(f, *arg, args, depth + 1),
        _ => 1,
    }
}

/// Whether the proof confirms `align = stated` on an access of `scalar`s at scalar `index`:
/// the index's own arithmetic makes its byte offset a multiple of the statement (the base's
/// alignment is the launch's check, `XPU-L009`). A confirmed statement gets no trap.
pub fn align_confirmed(
    f: &Function,
    index: ExprId,
    args: &[u32],
    scalar: Scalar,
    stated: u8,
) -> bool {
    let bytes = known_multiple(f, index, args, 0).saturating_mul(scalar.size() as u64);
    stated <= 1 || bytes >= stated as u64
}

/// The scalar-index mask that rounds an index down to `align = stated` over `scalar`s
/// (`None`: every index satisfies the statement, it is no wider than one scalar).
pub fn round_down_mask(scalar: Scalar, stated: u8) -> Option<u32> {
    let per = stated as u32 / scalar.size().max(1);
    (per > 1).then(|| !(per - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_decodes_its_winner_and_nothing_when_clear() {
        assert_eq!(Report::decode(&[0; REPORT_WORDS]), None);
        let r = Report::decode(&[KIND_OUT_OF_BOUNDS, 3, 64, 64, 9, 9, 9, 0]).unwrap();
        assert_eq!(
            (r.kind, r.site, r.index, r.len),
            (KIND_OUT_OF_BOUNDS, 3, 64, 64)
        );
        let bytes: Vec<u8> = [KIND_MISALIGNED, 1, 5, 16, 0, 0, 0, 0]
            .iter()
            .flat_map(|w: &u32| w.to_le_bytes())
            .collect();
        assert_eq!(Report::decode_bytes(&bytes).unwrap().len, 16);
    }

    #[test]
    fn round_down_masks() {
        assert_eq!(round_down_mask(Scalar::F32, 16), Some(!3));
        assert_eq!(round_down_mask(Scalar::U32, 8), Some(!1));
        assert_eq!(round_down_mask(Scalar::U32, 4), None);
        assert_eq!(round_down_mask(Scalar::U8, 16), Some(!15));
    }
}
