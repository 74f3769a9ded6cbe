//! Uniformity analysis: which values are the same in every lane of a wave (*uniform*, kept as
//! one scalar), which are `base + lane × stride` (*affine*, kept as a scalar base and a
//! compile-time stride), and which differ arbitrarily (*varying*, kept as lane vectors); and
//! which `if`s and loops diverge (run under lane masks rather than plain branches).
//!
//! The analysis runs per function *instance*: a kernel, or a device helper for one pattern of
//! argument classes (helpers are inlined, so each call site sees its own instance). It is a
//! fixed point: locals start uniform and only ever move up the lattice
//! `Uniform < Affine(s) < Varying`, and loops only ever become divergent, so it terminates.
//!
//! The lowering (`lower.rs`) must produce exactly the class computed here for every local: it
//! uses [`binary_class`] and friends, the same rules, on the classes of operands.

use crate::ir::{
    BinaryOp, Builtin, Dim, Expr, ExprId, Function, Handle, Literal, LoopKind, Module, Place,
    Scalar, Stmt, StmtKind, Type, UnaryOp, WaveOp,
};
use std::collections::HashMap;

/// How a value varies across the lanes of a wave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Class {
    /// The same in every lane.
    #[default]
    Uniform,
    /// `base + lane × stride` (integers, wrapping in the type's width).
    Affine(i64),
    /// Anything else.
    Varying,
}

impl Class {
    pub fn join(self, other: Class) -> Class {
        match (self, other) {
            (Class::Uniform, Class::Uniform) => Class::Uniform,
            (Class::Affine(a), Class::Affine(b)) if a == b => Class::Affine(a),
            _ => Class::Varying,
        }
    }

    /// Uniform or affine: no lane vector is needed to hold it.
    pub fn is_uniform(self) -> bool {
        self == Class::Uniform
    }
}

/// What the launch geometry makes of the coordinate built-ins (the kernel is compiled for one
/// block shape and one wave width).
#[derive(Clone, Copy, Debug)]
pub struct GeometryClass {
    /// `local_id.d` / `global_id.d` per dimension.
    pub local: [Class; 3],
}

impl GeometryClass {
    /// Within a wave of `wave` consecutive linear ids: `local_id.x` is affine when rows of the
    /// block hold whole waves (or the block is one row), and `y`/`z` are then uniform.
    pub fn new(block: [u32; 3], wave: u32) -> Self {
        let one_d = block[1] == 1 && block[2] == 1;
        let rows_hold_waves = block[0] % wave == 0;
        let x = if one_d || rows_hold_waves {
            Class::Affine(1)
        } else {
            Class::Varying
        };
        let yz = if one_d || rows_hold_waves {
            Class::Uniform
        } else {
            Class::Varying
        };
        let z = if block[2] == 1 { Class::Uniform } else { yz };
        let y = if block[1] == 1 { Class::Uniform } else { yz };
        GeometryClass { local: [x, y, z] }
    }
}

/// The integer value of a literal operand, for `affine × constant`.
pub fn literal_int(func: &Function, e: ExprId) -> Option<i64> {
    match func.exprs.try_get(e)? {
        Expr::Literal(Literal::Int { bits, ty }) => Some(if ty.is_signed() {
            match ty.bits() {
                8 => *bits as i8 as i64,
                16 => *bits as i16 as i64,
                32 => *bits as i32 as i64,
                _ => *bits as i64,
            }
        } else {
            *bits as i64
        }),
        _ => None,
    }
}

/// The class of `op` on operands of classes `a` and `b` and scalar type `s` (the operands'
/// type). `lit_a`/`lit_b` are the operands' values when they are integer literals.
pub fn binary_class(
    op: BinaryOp,
    s: Scalar,
    vector: bool,
    a: Class,
    b: Class,
    lit_a: Option<i64>,
    lit_b: Option<i64>,
) -> Class {
    use Class::*;
    if a == Uniform && b == Uniform {
        return Uniform;
    }
    if vector || !s.is_int() {
        return Varying;
    }
    match (op, a, b) {
        (BinaryOp::Add, Affine(x), Uniform) | (BinaryOp::Add, Uniform, Affine(x)) => Affine(x),
        (BinaryOp::Add, Affine(x), Affine(y)) => Affine(x.wrapping_add(y)),
        (BinaryOp::Sub, Affine(x), Uniform) => Affine(x),
        (BinaryOp::Sub, Uniform, Affine(x)) => Affine(x.wrapping_neg()),
        (BinaryOp::Sub, Affine(x), Affine(y)) => Affine(x.wrapping_sub(y)),
        (BinaryOp::Mul, Affine(x), Uniform) if lit_b.is_some() => {
            Affine(x.wrapping_mul(lit_b.unwrap_or(0)))
        }
        (BinaryOp::Mul, Uniform, Affine(x)) if lit_a.is_some() => {
            Affine(x.wrapping_mul(lit_a.unwrap_or(0)))
        }
        (BinaryOp::Shl, Affine(x), Uniform) if lit_b.is_some() => {
            let k = (lit_b.unwrap_or(0) as u64 & (u64::from(s.bits()) - 1)) as u32;
            Affine(x.wrapping_shl(k))
        }
        _ => Varying,
    }
}

/// The class of a unary operator.
pub fn unary_class(op: UnaryOp, s: Scalar, vector: bool, a: Class) -> Class {
    match (op, a) {
        (_, Class::Uniform) => Class::Uniform,
        (UnaryOp::Neg, Class::Affine(x)) if !vector && s.is_int() => {
            Class::Affine(x.wrapping_neg())
        }
        _ => Class::Varying,
    }
}

/// The class of a conversion from `from` to `to`: integer reinterpretations of one width keep
/// an affine value affine (wrapping arithmetic commutes with them).
pub fn cast_class(from: Scalar, to: Scalar, vector: bool, a: Class) -> Class {
    match a {
        Class::Uniform => Class::Uniform,
        Class::Affine(x) if !vector && from.is_int() && to.is_int() && from.bits() == to.bits() => {
            Class::Affine(x)
        }
        _ => Class::Varying,
    }
}

/// The result of analysing one function instance.
#[derive(Debug, Default)]
pub struct Analysis {
    /// Per local (by handle index): its class. Arrays, matrices: `Varying` (arrays are held
    /// per lane; matrices are held per wave in memory and never consult this).
    pub locals: Vec<Class>,
    /// Per expression (by handle index).
    pub exprs: Vec<Class>,
    /// Loops (by statement address) that run under lane masks.
    pub divergent_loops: HashMap<usize, bool>,
    /// Per local: whether some assignment to it needs blending under the current mask (it
    /// happens under a divergent construct entered after the local's declaration).
    pub blended: Vec<bool>,
    /// A helper's result: uniform only when its single `return` ends its body.
    pub ret: Class,
    /// Whether the result is held in a variable written by every `return` (as opposed to the
    /// value of the one final `return`).
    pub ret_var: bool,
}

impl Analysis {
    pub fn expr(&self, e: ExprId) -> Class {
        self.exprs.get(e.index()).copied().unwrap_or(Class::Varying)
    }

    pub fn local(&self, l: Handle<crate::ir::Local>) -> Class {
        self.locals
            .get(l.index())
            .copied()
            .unwrap_or(Class::Varying)
    }

    pub fn loop_divergent(&self, s: &Stmt) -> bool {
        self.divergent_loops
            .get(&stmt_key(s))
            .copied()
            .unwrap_or(true)
    }
}

/// A statement's identity for side tables: its address (functions are not moved while a
/// kernel is compiled).
pub fn stmt_key(s: &Stmt) -> usize {
    s as *const Stmt as usize
}

/// Memoised analyses of every function instance a kernel reaches.
pub struct Analyzer<'m> {
    pub module: &'m Module,
    pub geometry: GeometryClass,
    /// Expression types per function (by handle index).
    pub types: &'m dyn Fn(Handle<Function>) -> &'m [Option<Type>],
    memo: HashMap<(usize, Vec<Class>), std::rc::Rc<Analysis>>,
}

impl<'m> Analyzer<'m> {
    pub fn new(
        module: &'m Module,
        geometry: GeometryClass,
        types: &'m dyn Fn(Handle<Function>) -> &'m [Option<Type>],
    ) -> Self {
        Analyzer {
            module,
            geometry,
            types,
            memo: HashMap::new(),
        }
    }

    /// The analysis of `func` with parameters of classes `params` (a kernel: all uniform).
    pub fn analyse(&mut self, func: Handle<Function>, params: Vec<Class>) -> std::rc::Rc<Analysis> {
        let key = (func.index(), params.clone());
        if let Some(a) = self.memo.get(&key) {
            return a.clone();
        }
        let f = &self.module.functions[func];
        let types = (self.types)(func);
        let mut w = Walk {
            an: self,
            f,
            types,
            params,
            res: Analysis {
                locals: vec![Class::Uniform; f.locals.len()],
                exprs: vec![Class::Uniform; f.exprs.len()],
                blended: vec![false; f.locals.len()],
                ret: Class::Uniform,
                ..Default::default()
            },
            decl_depth: vec![0; f.locals.len()],
            div: Vec::new(),
            loops: Vec::new(),
            changed: true,
            returns: 0,
            seen: vec![false; f.locals.len()],
        };
        // Arrays and matrices are never scalars in a register.
        for (h, l) in f.locals.iter() {
            if matches!(l.ty, Type::Array { .. } | Type::Matrix { .. }) {
                w.res.locals[h.index()] = Class::Varying;
                w.seen[h.index()] = true;
            }
        }
        let mut rounds = 0;
        while w.changed && rounds < 64 {
            w.changed = false;
            w.returns = 0;
            w.res.ret = Class::Uniform;
            w.res.ret_var = false;
            w.block(&f.body);
            rounds += 1;
        }
        // The result: one `return` at the very end of the body keeps its value's class;
        // anything else goes through a blended variable.
        let single_final = w.returns == 1
            && matches!(
                f.body.last().map(|s| &s.kind),
                Some(StmtKind::Return(Some(_)))
            );
        if !single_final {
            w.res.ret_var = true;
            w.res.ret = Class::Varying;
        } else if w.res.ret != Class::Uniform {
            w.res.ret = Class::Varying;
        }
        let res = std::rc::Rc::new(w.res);
        self.memo.insert(key, res.clone());
        res
    }
}

struct LoopCtx {
    label: Option<String>,
    key: usize,
    /// `div.len()` inside the loop's body.
    body_depth: usize,
}

struct Walk<'a, 'm> {
    an: &'a mut Analyzer<'m>,
    f: &'m Function,
    types: &'m [Option<Type>],
    params: Vec<Class>,
    res: Analysis,
    decl_depth: Vec<usize>,
    /// Per enclosing construct: whether it diverges.
    div: Vec<bool>,
    loops: Vec<LoopCtx>,
    changed: bool,
    returns: usize,
    /// Per local: whether any value has been given to it yet (before that it is bottom).
    seen: Vec<bool>,
}

impl Walk<'_, '_> {
    fn ty(&self, e: ExprId) -> Option<Type> {
        self.types.get(e.index()).copied().flatten()
    }

    fn set_local(&mut self, l: usize, c: Class) {
        let old = self.res.locals[l];
        // The first value a local gets is its class; later ones join it.
        let new = if self.seen[l] { old.join(c) } else { c };
        self.seen[l] = true;
        if new != old {
            self.res.locals[l] = new;
            self.changed = true;
        }
    }

    fn divergent_since(&self, depth: usize) -> bool {
        self.div.get(depth..).is_some_and(|d| d.iter().any(|&x| x))
    }

    fn assign_local(&mut self, l: Handle<crate::ir::Local>, c: Class) {
        let i = l.index();
        if i >= self.res.locals.len() {
            return;
        }
        if self.divergent_since(self.decl_depth[i]) {
            if !self.res.blended[i] {
                self.res.blended[i] = true;
                self.changed = true;
            }
            self.set_local(i, Class::Varying);
        } else {
            self.set_local(i, c);
        }
    }

    fn block(&mut self, b: &[Stmt]) {
        for s in b {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let { local, init } => {
                if let Some(d) = self.decl_depth.get_mut(local.index()) {
                    *d = self.div.len();
                }
                if let Some(e) = init {
                    let c = self.expr(*e);
                    self.set_local(local.index(), c);
                }
            }
            StmtKind::Assign { place, value } => {
                let c = self.expr(*value);
                match place {
                    Place::Local(l) => self.assign_local(*l, c),
                    Place::Lane { local, .. } => {
                        // A lane of a vector: vectors are uniform or varying, never affine.
                        let c = if c == Class::Uniform {
                            Class::Uniform
                        } else {
                            Class::Varying
                        };
                        self.assign_local(*local, c)
                    }
                    Place::Element { index, .. } => {
                        self.expr(*index);
                    }
                }
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.expr(*cond);
                self.div.push(c != Class::Uniform);
                self.block(then_block);
                self.block(else_block);
                self.div.pop();
            }
            StmtKind::Loop { label, kind, body } => {
                let key = stmt_key(s);
                let known = *self.res.divergent_loops.entry(key).or_insert(false);
                let mut divergent = known;
                self.div.push(divergent);
                match kind {
                    LoopKind::Infinite | LoopKind::Cond { .. } => {}
                    LoopKind::While(c) => {
                        if self.expr(*c) != Class::Uniform {
                            divergent = true;
                        }
                    }
                    LoopKind::For {
                        var,
                        start,
                        end,
                        step,
                    } => {
                        // The variable is declared by the loop and dies with it: lanes that
                        // left never read it again, so its update needs no blending.
                        let cs = self.expr(*start);
                        let ce = self.expr(*end);
                        let cst = step.map(|e| self.expr(e)).unwrap_or(Class::Uniform);
                        if let Some(d) = self.decl_depth.get_mut(var.index()) {
                            *d = self.div.len();
                        }
                        let vi = var.index();
                        if vi < self.res.locals.len() {
                            self.set_local(vi, cs);
                            let vc = self.res.locals[vi];
                            let s = self.f.locals[*var].ty.scalar().unwrap_or(Scalar::U32);
                            let stepped =
                                binary_class(BinaryOp::Add, s, false, vc, cst, None, None);
                            self.set_local(vi, stepped);
                            let vc = self.res.locals[vi];
                            if vc != Class::Uniform || ce != Class::Uniform {
                                divergent = true;
                            }
                        }
                    }
                }
                if let LoopKind::Cond {
                    var,
                    init,
                    cond,
                    update,
                } = kind
                {
                    // Declared by the loop and dead after it, like a `for` variable: its
                    // class is that of every value it takes; the loop diverges when its
                    // condition does.
                    let ci = self.expr(*init);
                    if let Some(d) = self.decl_depth.get_mut(var.index()) {
                        *d = self.div.len();
                    }
                    let vi = var.index();
                    if vi < self.res.locals.len() {
                        self.set_local(vi, ci);
                        let cu = self.expr(*update);
                        self.set_local(vi, cu);
                        if self.expr(*cond) != Class::Uniform {
                            divergent = true;
                        }
                    }
                }
                if divergent != known {
                    self.res.divergent_loops.insert(key, true);
                    self.changed = true;
                    if let Some(d) = self.div.last_mut() {
                        *d = true;
                    }
                }
                self.loops.push(LoopCtx {
                    label: label.clone(),
                    key,
                    body_depth: self.div.len(),
                });
                self.block(body);
                self.loops.pop();
                self.div.pop();
            }
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                let target = match label {
                    None => self.loops.len().checked_sub(1),
                    Some(l) => self
                        .loops
                        .iter()
                        .rposition(|c| c.label.as_deref() == Some(l)),
                };
                if let Some(t) = target {
                    for j in t..self.loops.len() {
                        if self.divergent_since(self.loops[j].body_depth) {
                            let key = self.loops[j].key;
                            if self.res.divergent_loops.get(&key) != Some(&true) {
                                self.res.divergent_loops.insert(key, true);
                                self.changed = true;
                            }
                        }
                    }
                }
            }
            StmtKind::Return(v) => {
                self.returns += 1;
                if let Some(e) = v {
                    let c = self.expr(*e);
                    self.res.ret = self.res.ret.join(c);
                }
                if self.divergent_since(0) {
                    self.res.ret = Class::Varying;
                }
            }
            StmtKind::Expr(e) => {
                self.expr(*e);
            }
            StmtKind::Block(b) => self.block(b),
            StmtKind::Barrier | StmtKind::WaveBarrier | StmtKind::Fence(_) => {}
            StmtKind::VStore { index, value, .. } => {
                self.expr(*index);
                self.expr(*value);
            }
            StmtKind::MatrixStore {
                value,
                offset,
                stride,
                ..
            } => {
                self.expr(*value);
                self.expr(*offset);
                self.expr(*stride);
            }
            StmtKind::Print { args, .. } => {
                for a in args {
                    self.expr(*a);
                }
            }
            StmtKind::Assert { cond, .. } => {
                self.expr(*cond);
            }
        }
    }

    fn expr(&mut self, e: ExprId) -> Class {
        let Some(expr) = self.f.exprs.try_get(e) else {
            return Class::Varying;
        };
        let ty = self.ty(e);
        let vector = matches!(ty, Some(Type::Vector(..)));
        let all = |w: &mut Self, ops: &[ExprId]| {
            let mut c = Class::Uniform;
            for &o in ops {
                if w.expr(o) != Class::Uniform {
                    c = Class::Varying;
                }
            }
            c
        };
        let c = match expr {
            Expr::Literal(_)
            | Expr::TemplateParam(_)
            | Expr::Len(_)
            | Expr::Ref(_)
            | Expr::Tag { .. } => Class::Uniform,
            Expr::Param(i) => self
                .params
                .get(*i as usize)
                .copied()
                .unwrap_or(Class::Uniform),
            Expr::Local(l) => self
                .res
                .locals
                .get(l.index())
                .copied()
                .unwrap_or(Class::Varying),
            Expr::Builtin(b) => match b {
                Builtin::GroupId(_)
                | Builtin::GroupSize(_)
                | Builtin::NumGroups(_)
                | Builtin::WaveWidth => Class::Uniform,
                Builtin::LocalId(d) | Builtin::GlobalId(d) => self.an.geometry.local[dim(*d)],
                Builtin::LaneId => Class::Affine(1),
            },
            Expr::Unary { op, arg } => {
                let a = self.expr(*arg);
                let s = ty.and_then(|t| t.scalar()).unwrap_or(Scalar::Bool);
                unary_class(*op, s, vector, a)
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(*lhs);
                let b = self.expr(*rhs);
                let lt = self.ty(*lhs);
                let s = lt.and_then(|t| t.scalar()).unwrap_or(Scalar::Bool);
                let vec = matches!(lt, Some(Type::Vector(..)));
                let (la, lb) = (literal_int(self.f, *lhs), literal_int(self.f, *rhs));
                match op {
                    BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
                        if a == Class::Uniform && b == Class::Uniform {
                            Class::Uniform
                        } else {
                            Class::Varying
                        }
                    }
                    _ => binary_class(*op, s, vec, a, b, la, lb),
                }
            }
            Expr::Cast { to, arg } => {
                let a = self.expr(*arg);
                let from = self
                    .ty(*arg)
                    .and_then(|t| t.scalar())
                    .unwrap_or(Scalar::Bool);
                cast_class(from, *to, vector, a)
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(*arg);
                let from = self.ty(*arg);
                match (from, to) {
                    (Some(Type::Scalar(f)), Type::Scalar(t)) => cast_class(f, *t, false, a),
                    _ => {
                        if a == Class::Uniform {
                            Class::Uniform
                        } else {
                            Class::Varying
                        }
                    }
                }
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => all(self, &[*cond, *accept, *reject]),
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => {
                // The arms run under the condition: divergent when it varies.
                let c = self.expr(*cond);
                self.div.push(c != Class::Uniform);
                let a = self.expr(*accept);
                let r = self.expr(*reject);
                self.div.pop();
                if c == Class::Uniform && a == Class::Uniform && r == Class::Uniform {
                    Class::Uniform
                } else {
                    Class::Varying
                }
            }
            Expr::Compose { parts, .. } => all(self, parts),
            Expr::Splat { value, .. } => all(self, &[*value]),
            Expr::Extract { vector, .. } | Expr::Swizzle { vector, .. } => all(self, &[*vector]),
            Expr::Math { args, .. } | Expr::Bits { args, .. } => all(self, args),
            Expr::Index { base, index } | Expr::VLoad { base, index, .. } => {
                let i = self.expr(*index);
                match base {
                    crate::ir::Base::Local(_) => Class::Varying,
                    _ => {
                        if i == Class::Uniform {
                            Class::Uniform
                        } else {
                            Class::Varying
                        }
                    }
                }
            }
            Expr::Call { function, args } => {
                let classes: Vec<Class> = args
                    .iter()
                    .map(|&a| match self.expr(a) {
                        Class::Uniform => Class::Uniform,
                        _ => Class::Varying,
                    })
                    .collect();
                let callee = self.an.analyse(*function, classes);
                callee.ret
            }
            Expr::Dispatch { tag, args } => {
                self.expr(*tag);
                for &a in args {
                    self.expr(a);
                }
                Class::Varying
            }
            Expr::Atomic {
                place,
                value,
                compare,
                ..
            } => {
                if let Place::Element { index, .. } = place {
                    self.expr(*index);
                }
                if let Some(c) = compare {
                    self.expr(*c);
                }
                self.expr(*value);
                Class::Varying
            }
            Expr::AtomicLoad { place, .. } => {
                if let Place::Element { index, .. } = place {
                    self.expr(*index);
                }
                Class::Varying
            }
            Expr::AtomicStore { place, value, .. } => {
                if let Place::Element { index, .. } = place {
                    self.expr(*index);
                }
                self.expr(*value);
                Class::Varying
            }
            Expr::Wave { op, args, width } => {
                for &a in args {
                    self.expr(a);
                }
                match op {
                    // Within a tile the result differs between tiles.
                    _ if width.is_some() => Class::Varying,
                    WaveOp::Reduce(_)
                    | WaveOp::Broadcast
                    | WaveOp::Ballot
                    | WaveOp::Any
                    | WaveOp::All => Class::Uniform,
                    _ => Class::Varying,
                }
            }
            Expr::MatrixFill { value, .. } => {
                self.expr(*value);
                Class::Uniform
            }
            Expr::MatrixLoad { offset, stride, .. } => {
                self.expr(*offset);
                self.expr(*stride);
                Class::Uniform
            }
            Expr::MatrixMma { a, b, c } => {
                self.expr(*a);
                self.expr(*b);
                self.expr(*c);
                Class::Uniform
            }
        };
        if let Some(slot) = self.res.exprs.get_mut(e.index()) {
            *slot = c;
        }
        c
    }
}

fn dim(d: Dim) -> usize {
    d.index()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lattice() {
        use Class::*;
        assert_eq!(Uniform.join(Uniform), Uniform);
        assert_eq!(Affine(1).join(Affine(1)), Affine(1));
        assert_eq!(Affine(1).join(Affine(2)), Varying);
        assert_eq!(Uniform.join(Affine(1)), Varying);
        assert_eq!(
            binary_class(
                BinaryOp::Mul,
                Scalar::U32,
                false,
                Affine(1),
                Uniform,
                None,
                Some(4)
            ),
            Affine(4)
        );
        assert_eq!(
            binary_class(
                BinaryOp::Mul,
                Scalar::U32,
                false,
                Affine(1),
                Uniform,
                None,
                None
            ),
            Varying
        );
        assert_eq!(
            binary_class(
                BinaryOp::Add,
                Scalar::F32,
                false,
                Affine(1),
                Uniform,
                None,
                None
            ),
            Varying
        );
    }

    #[test]
    fn geometry() {
        let g = GeometryClass::new([256, 1, 1], 8);
        assert_eq!(g.local, [Class::Affine(1), Class::Uniform, Class::Uniform]);
        let g = GeometryClass::new([16, 16, 1], 8);
        assert_eq!(g.local, [Class::Affine(1), Class::Uniform, Class::Uniform]);
        let g = GeometryClass::new([6, 4, 1], 8);
        assert_eq!(g.local, [Class::Varying, Class::Varying, Class::Uniform]);
    }
}
