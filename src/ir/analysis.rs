//! Facts about each function that more than one consumer needs, computed once when the module
//! is verified and held by the [`VerifiedModule`](super::VerifiedModule) beside the types (as
//! naga's `ModuleInfo` is): [`VerifiedModule::info`](super::VerifiedModule::info) answers them
//! without another walk of the body.
//!
//! A launch reads [`FunctionInfo::base_align`] (the alignment each buffer view must have) and
//! the coarsening policy reads [`FunctionInfo::has_loop`]; both used to walk the kernel on every
//! launch.

use super::{Base, Expr, Function, Stmt, StmtKind, Type};

/// What the verifier worked out about one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Per parameter, the base alignment (bytes) a buffer view must have: the element's scalar
    /// size, raised to the widest `align = N` stated on a `vload`/`vstore` over it (a stated
    /// alignment is a promise about the address, which a misaligned base breaks for every
    /// index). 1 for parameters that are not buffers.
    pub base_align: Vec<u64>,
    /// Whether the body holds a loop (of any kind, at any depth).
    pub has_loop: bool,
}

impl FunctionInfo {
    /// The facts of `f`, from one walk of its expressions and one of its statements.
    pub fn of(f: &Function) -> FunctionInfo {
        let mut base_align: Vec<u64> = f
            .params
            .iter()
            .map(|p| match p.ty {
                Type::Buffer { elem, .. } => elem.scalar.size() as u64,
                _ => 1,
            })
            .collect();
        let mut raise = |param: u32, align: u8| {
            if let Some(need) = base_align.get_mut(param as usize) {
                *need = (*need).max(align as u64);
            }
        };
        for (_, expr) in f.exprs.iter() {
            if let Expr::VLoad {
                base: Base::Param(p),
                align: Some(a),
                ..
            } = expr
            {
                raise(*p, *a);
            }
        }
        let mut has_loop = false;
        // An explicit stack, so that a deeply nested body cannot overflow the host's.
        let mut pending: Vec<&[Stmt]> = vec![&f.body];
        while let Some(block) = pending.pop() {
            for stmt in block {
                match &stmt.kind {
                    StmtKind::VStore {
                        base: Base::Param(p),
                        align: Some(a),
                        ..
                    } => raise(*p, *a),
                    StmtKind::Loop { .. } => has_loop = true,
                    _ => {}
                }
                pending.extend(stmt.kind.blocks().into_iter().map(|b| b.as_slice()));
            }
        }
        FunctionInfo {
            base_align,
            has_loop,
        }
    }
}

/// Whether what `f` computes can depend on the wave width it runs at: it (or a helper it
/// reaches) uses a wave verb, a cooperative-matrix operation, or reads `lane_id` or
/// `wave_width`. A call through a tag counts when any function of `module` does. The CPU
/// manifest records `built_wave = 1` for a kernel that does not (contract §3.7).
pub fn depends_on_wave(module: &super::Module, f: &Function) -> bool {
    fn direct(e: &Expr) -> bool {
        matches!(
            e,
            Expr::Wave { .. }
                | Expr::Builtin(super::Builtin::WaveWidth | super::Builtin::LaneId)
                | Expr::MatrixFill { .. }
                | Expr::MatrixLoad { .. }
                | Expr::MatrixMma { .. }
        )
    }
    // An explicit worklist over functions, each visited once (helpers may be shared).
    let mut seen = vec![false; module.functions.len()];
    let mut pending = vec![f];
    while let Some(g) = pending.pop() {
        for (_, e) in g.exprs.iter() {
            if direct(e) {
                return true;
            }
            match e {
                Expr::Call { function, .. } => {
                    if let Some(seen) = seen.get_mut(function.index()) {
                        if !*seen {
                            *seen = true;
                            if let Some(h) = module.functions.try_get(*function) {
                                pending.push(h);
                            }
                        }
                    }
                }
                Expr::Dispatch { .. } => {
                    return module
                        .functions
                        .iter()
                        .any(|(_, h)| h.exprs.iter().any(|(_, e)| direct(e)));
                }
                _ => {}
            }
        }
    }
    false
}
