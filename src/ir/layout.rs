//! Shared-tile layouts (contract §2.2: `Swizzled<T, S>`, `BlockPadded<T, Block, Pad>`; issue
//! 23 item 8): a layout changes where a shared array's elements are placed, to spread a
//! wave's accesses over the memory banks, and never what an index means. A kernel reads the
//! same values from `tile[i]` as with the plain array.
//!
//! The mapping is one function, [`physical_index`], that every compiled backend applies the
//! same way: [`applied`] (and [`crate::ir::VerifiedModule::with_layouts`]) rewrite each access
//! `tile[i]` of a laid-out array into `tile[p(i)]` over the array's physical length before
//! the CPU, LLVM (NVPTX, AMDGPU) and SPIR-V lowerings see the module. The reference
//! interpreter keeps the identity layout (logical placement, so its bounds and race reports
//! name the index the kernel wrote); the manifest's `shared_layouts` says which backend
//! applied what.
//!
//! - `swizzled<[[E; C]; R], S>`: element `i` (row `i / C`) lives at `i ^ ((i / C) % S)`, the
//!   column XORed with the row's low bits. `S` is a power of two dividing the row length `C`,
//!   so an element stays in its row; the physical length is the logical one. In a 32 × 32
//!   `f32` tile with `S = 32` a column read by 32 lanes touches 32 banks.
//! - `block_padded<[E; N], B, P>` (any array shape): `P` unused elements after every `B`:
//!   element `i` lives at `i + (i / B) * P`; the physical length is
//!   `N + ((N - 1) / B) * P`. `block_padded<[[f32; 32]; 32], 32, 1>` is the classic 33-wide
//!   padded tile.
//!
//! A laid-out array is read and written element by element only: `matrix_load` and
//! `matrix_store` need contiguous elements and are refused (`XPU-V163`), and
//! its index expressions may not have effects (`XPU-V164`: the mapping evaluates the index
//! more than once).

use super::{
    BinaryOp, Block, Expr, ExprId, Function, Handle, Literal, Module, Place, Scalar, SharedDecl,
    StmtKind, Type,
};

/// The placement of a shared array's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `swizzled<T, S>`: the column XORed with the row modulo `s` (a power of two dividing
    /// the row length).
    Swizzled {
        /// The swizzle's period in elements.
        s: u32,
    },
    /// `block_padded<T, B, P>`: `pad` unused elements after every `block`.
    BlockPadded {
        /// Elements per block (at least 1).
        block: u32,
        /// Padding elements after each block.
        pad: u32,
    },
}

impl Layout {
    /// The text format's spelling around the array type `array` (already spelled).
    pub fn spell(self, array: &str) -> String {
        match self {
            Layout::Swizzled { s } => format!("swizzled<{array}, {s}>"),
            Layout::BlockPadded { block, pad } => format!("block_padded<{array}, {block}, {pad}>"),
        }
    }

    /// A short name for manifests: `swizzled<32>`, `block_padded<32, 1>`.
    pub fn name(self) -> String {
        match self {
            Layout::Swizzled { s } => format!("swizzled<{s}>"),
            Layout::BlockPadded { block, pad } => format!("block_padded<{block}, {pad}>"),
        }
    }
}

/// The physical element index of logical element `i` under `layout`, on integers (the
/// mapping [`applied`] emits as IR). `row` is the swizzled array's row length.
pub fn physical_index(layout: Layout, row: u32, i: u32) -> u64 {
    match layout {
        Layout::Swizzled { s } => u64::from(i ^ ((i / row.max(1)) % s.max(1))),
        Layout::BlockPadded { block, pad } => {
            u64::from(i) + u64::from(i / block.max(1)) * u64::from(pad)
        }
    }
}

/// The physical element count of an array of `len` logical elements under `layout` (the
/// shared memory it takes); `None` past `u32`.
pub fn physical_len(layout: Layout, len: u32) -> Option<u32> {
    match layout {
        Layout::Swizzled { .. } => Some(len),
        Layout::BlockPadded { block, pad } => {
            if len == 0 {
                return Some(0);
            }
            let extra = u64::from((len - 1) / block.max(1)) * u64::from(pad);
            u32::try_from(u64::from(len) + extra).ok()
        }
    }
}

/// Why `layout` does not fit shared array `h` of `f` (`XPU-V162`), or `None` when it does:
/// a launch-sized array, a swizzle of a one-dimensional array or with a period that is not a
/// power of two dividing the row length, a block of zero, or a physical size past `u32`.
pub fn shape_error(f: &Function, h: Handle<SharedDecl>, layout: Layout) -> Option<String> {
    let d = f.shared.try_get(h)?;
    let len = match d.len {
        None => return Some("a launch-sized shared array `[E]` takes no layout".into()),
        Some(super::Len::Fixed(n)) => Some(n),
        Some(super::Len::Const(_)) => None,
    };
    match layout {
        Layout::Swizzled { s } => {
            let Some(row) = f.dims_of(super::Base::Shared(h)).and_then(|d| d.last()) else {
                return Some(format!(
                    "`swizzled` needs a two-dimensional array `[[E; C]; R]`; `{}` has one dimension",
                    d.name
                ));
            };
            if s == 0 || !s.is_power_of_two() || row % s != 0 {
                return Some(format!(
                    "`swizzled<_, {s}>`: the period must be a power of two dividing the row length {row}"
                ));
            }
        }
        Layout::BlockPadded { block, .. } => {
            if block == 0 {
                return Some("`block_padded<_, 0, _>`: a block has at least one element".into());
            }
        }
    }
    if let Some(n) = len {
        let bytes = physical_len(layout, n).map(|p| u64::from(p) * u64::from(d.elem.size()));
        if bytes.is_none_or(|b| b > u64::from(u32::MAX)) {
            return Some(format!("`{}` padded to more than 2^32 - 1 bytes", d.name));
        }
    }
    None
}

/// The physical element count shared array `h` of `f` takes on a compiled backend: its
/// layout's [`physical_len`] where it has a layout that fits and a fixed length, else `None`
/// (the logical length stands).
pub fn placed_len(f: &Function, h: Handle<SharedDecl>) -> Option<u32> {
    let layout = f.layout_of(h)?;
    if shape_error(f, h, layout).is_some() {
        return None;
    }
    match f.shared.try_get(h)?.len? {
        super::Len::Fixed(n) => physical_len(layout, n),
        super::Len::Const(_) => None,
    }
}

/// Whether evaluating `e` twice is the same as once: no call, dispatch or atomic in its tree.
pub fn is_pure(f: &Function, e: ExprId) -> bool {
    let mut stack = vec![e];
    let mut seen = 0usize;
    while let Some(x) = stack.pop() {
        seen += 1;
        if seen > f.exprs.len() {
            return false;
        }
        let Some(expr) = f.exprs.try_get(x) else {
            return false;
        };
        if matches!(
            expr,
            Expr::Call { .. }
                | Expr::Dispatch { .. }
                | Expr::Atomic { .. }
                | Expr::AtomicLoad { .. }
                | Expr::AtomicStore { .. }
        ) {
            return false;
        }
        expr.for_each_operand(|o| stack.push(o));
    }
    true
}

/// `module` with every laid-out shared array placed as its layout says (see the module
/// documentation); `None` when no function has a layout, so nothing is copied.
pub fn applied(module: &Module) -> Option<Module> {
    if !module.functions.iter().any(|(_, f)| !f.layouts.is_empty()) {
        return None;
    }
    let mut m = module.clone();
    for h in m.functions.handles().collect::<Vec<_>>() {
        apply(&mut m.functions[h], None);
    }
    Some(m)
}

/// Rewrites `f`'s accesses to its laid-out shared arrays into physical indices and sets their
/// lengths to the physical ones; `types` (the verifier's table for `f`) gets the new
/// expressions' types. A template (lengths not yet known) and a function without layouts are
/// left as they are; so is a layout the verifier would refuse.
pub fn apply(f: &mut Function, types: Option<&mut Vec<Option<Type>>>) {
    if f.layouts.is_empty() || f.template.is_some() {
        return;
    }
    let mut plan = Vec::new();
    for &(h, layout) in &f.layouts {
        if shape_error(f, h, layout).is_some() {
            continue;
        }
        let Some(super::Len::Fixed(n)) = f.shared.try_get(h).and_then(|d| d.len) else {
            continue;
        };
        let row = f
            .dims_of(super::Base::Shared(h))
            .and_then(|d| d.last().copied())
            .unwrap_or(n);
        plan.push((h, layout, n, row));
    }
    if plan.is_empty() {
        return;
    }
    let find = |base: super::Base| match base {
        super::Base::Shared(h) => plan.iter().find(|p| p.0 == h).copied(),
        _ => None,
    };
    let mut rw = Rewriter { f, types };
    // Expressions: element reads and atomics (the arena as it was; new nodes are physical).
    let originals: Vec<ExprId> = rw.f.exprs.handles().collect();
    for e in originals {
        let target = match &rw.f.exprs[e] {
            Expr::Index { base, index } => find(*base).map(|p| (p, *index)),
            Expr::Atomic {
                place: Place::Element { base, index },
                ..
            }
            | Expr::AtomicLoad {
                place: Place::Element { base, index },
                ..
            }
            | Expr::AtomicStore {
                place: Place::Element { base, index },
                ..
            } => find(*base).map(|p| (p, *index)),
            _ => None,
        };
        let Some(((_, layout, n, row), index)) = target else {
            continue;
        };
        if !is_pure(rw.f, index) {
            continue;
        }
        let mapped = rw.map(index, layout, n, row);
        match &mut rw.f.exprs[e] {
            Expr::Index { index, .. } => *index = mapped,
            Expr::Atomic { place, .. }
            | Expr::AtomicLoad { place, .. }
            | Expr::AtomicStore { place, .. } => {
                if let Place::Element { index, .. } = place {
                    *index = mapped;
                }
            }
            _ => {}
        }
    }
    // Statements: element assignments.
    let mut body = std::mem::take(&mut rw.f.body);
    rw.block(&mut body, &find);
    rw.f.body = body;
    for (h, layout, n, _) in plan {
        if let Some(p) = physical_len(layout, n) {
            f.shared[h].len = Some(super::Len::Fixed(p));
        }
    }
}

struct Rewriter<'a> {
    f: &'a mut Function,
    types: Option<&'a mut Vec<Option<Type>>>,
}

type Plan = (Handle<SharedDecl>, Layout, u32, u32);

impl Rewriter<'_> {
    fn block(&mut self, b: &mut Block, find: &dyn Fn(super::Base) -> Option<Plan>) {
        for s in b.iter_mut() {
            match &mut s.kind {
                StmtKind::Assign {
                    place: Place::Element { base, index },
                    ..
                } => {
                    if let Some((_, layout, n, row)) = find(*base) {
                        if is_pure(self.f, *index) {
                            *index = self.map(*index, layout, n, row);
                        }
                    }
                }
                StmtKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    self.block(then_block, find);
                    self.block(else_block, find);
                }
                StmtKind::Loop { body, .. } => self.block(body, find),
                StmtKind::Block(inner) => self.block(inner, find),
                _ => {}
            }
        }
    }

    fn add(&mut self, e: Expr, like: ExprId, ty: Option<Type>) -> ExprId {
        let span = self.f.expr_span(like);
        let h = self.f.add_expr(e, span);
        if let Some(t) = self.types.as_deref_mut() {
            if t.len() < h.index() {
                t.resize(h.index(), None);
            }
            t.push(ty);
        }
        h
    }

    fn lit(&mut self, v: u32, like: ExprId) -> ExprId {
        self.add(
            Expr::Literal(Literal::Int {
                bits: u64::from(v),
                ty: Scalar::U32,
            }),
            like,
            Some(Type::U32),
        )
    }

    fn bin(&mut self, op: BinaryOp, lhs: ExprId, rhs: ExprId, ty: Type) -> ExprId {
        self.add(Expr::Binary { op, lhs, rhs }, lhs, Some(ty))
    }

    /// A copy of the tree at `e` (fresh handles, same types and spans).
    fn copy(&mut self, e: ExprId) -> ExprId {
        let mut expr = self.f.exprs[e].clone();
        for o in expr.operands_mut() {
            *o = self.copy(*o);
        }
        let ty = self
            .types
            .as_deref()
            .and_then(|t| t.get(e.index()).copied().flatten());
        self.add(expr, e, ty)
    }

    /// The physical index of the logical index `i` (uses `i` once, copies it for the rest).
    fn map(&mut self, i: ExprId, layout: Layout, n: u32, row: u32) -> ExprId {
        match layout {
            Layout::Swizzled { s } => {
                // i ^ ((i / row) & (s - 1))
                let i2 = self.copy(i);
                let r = self.lit(row, i);
                let q = self.bin(BinaryOp::Div, i2, r, Type::U32);
                let m = self.lit(s - 1, i);
                let low = self.bin(BinaryOp::BitAnd, q, m, Type::U32);
                self.bin(BinaryOp::BitXor, i, low, Type::U32)
            }
            Layout::BlockPadded { block, pad } => {
                // j = i < n ? i : n (an index past the end stays past the end, no wrap);
                // j + (j / block) * pad
                let cond_i = self.copy(i);
                let limit = self.lit(n, i);
                let cond = self.bin(BinaryOp::Lt, cond_i, limit, Type::BOOL);
                let limit2 = self.lit(n, i);
                let j = self.add(
                    Expr::Select {
                        cond,
                        accept: i,
                        reject: limit2,
                    },
                    i,
                    Some(Type::U32),
                );
                let j2 = self.copy(j);
                let b = self.lit(block, i);
                let q = self.bin(BinaryOp::Div, j2, b, Type::U32);
                let p = self.lit(pad, i);
                let off = self.bin(BinaryOp::Mul, q, p, Type::U32);
                self.bin(BinaryOp::Add, j, off, Type::U32)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzle_is_a_permutation_of_each_row() {
        let row = 32;
        for r in 0..32u32 {
            let mut seen = [false; 32];
            for c in 0..32u32 {
                let p = physical_index(Layout::Swizzled { s: 32 }, row, r * row + c) as u32;
                assert_eq!(p / row, r);
                seen[(p % row) as usize] = true;
            }
            assert!(seen.iter().all(|&x| x));
        }
        // A column read by 32 lanes lands on 32 distinct banks (4-byte words, 32 banks).
        let banks: std::collections::HashSet<u64> = (0..32u32)
            .map(|r| physical_index(Layout::Swizzled { s: 32 }, row, r * row + 5) % 32)
            .collect();
        assert_eq!(banks.len(), 32);
    }

    #[test]
    fn block_padding_matches_a_wider_row() {
        let l = Layout::BlockPadded { block: 32, pad: 1 };
        for r in 0..32u32 {
            for c in 0..32u32 {
                assert_eq!(physical_index(l, 32, r * 32 + c), u64::from(r * 33 + c));
            }
        }
        assert_eq!(physical_len(l, 1024), Some(32 * 33 - 1));
        assert_eq!(
            physical_len(Layout::BlockPadded { block: 1, pad: 4 }, u32::MAX),
            None
        );
    }
}
