//! Expression typing: the type of every expression by the IR's rules, and the reason when an
//! expression is ill-typed.
//!
//! Two entry points share one engine:
//! - [`expr_type`], [`place_type`], [`base_elem`] answer one question and return `None` for
//!   anything ill-typed or dangling (the printer and parser use these);
//! - [`check_function`] types every expression of a function once and keeps the reason for
//!   each failure as a [`TypeError`] with a verifier code (the verifier uses this, and its
//!   types become the side table backends read).
//!
//! Nothing here panics on any input: handles are looked up with `try_get`, and the walk over
//! operands is iterative with cycle detection, so a malformed or deeply nested module costs
//! neither a panic nor the stack.
//!
//! An operand that is ill-typed makes its parent fail *silently* ([`Failure::Operand`]): the
//! verifier reports each problem once, at the node that has it.

use super::verify::codes;
use super::{Access, Len};
use super::{
    AtomicOp, Base, BinaryOp, BitOp, ElemType, Expr, ExprId, Function, FunctionKind, Literal,
    MathFn, MatrixRole, MemoryOrder, Module, Place, ReduceOp, Scalar, Type, UnaryOp, WaveOp,
    VECTOR_LANES,
};
use std::collections::HashMap;

/// Why one expression is ill-typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError {
    /// A verifier code from [`codes`].
    pub code: &'static str,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl TypeError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        TypeError {
            code,
            message: message.into(),
        }
    }
}

/// Why an expression has no type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The expression itself breaks a rule.
    Here(TypeError),
    /// An operand is ill-typed; the problem is reported at the operand.
    Operand,
}

/// The outcome of typing one expression: `Ok(Some(ty))` a value, `Ok(None)` a call that
/// returns nothing.
pub type Typing = Result<Option<Type>, Failure>;

/// The type of `expr`, or `None` if it is ill-typed, yields nothing, or refers to something
/// missing.
pub fn expr_type(module: &Module, func: &Function, expr: ExprId) -> Option<Type> {
    Typer::new(module, func).typing(expr).ok().flatten()
}

/// The type a place holds (what an assignment to it must supply), or `None` if the place is
/// malformed.
pub fn place_type(module: &Module, func: &Function, place: &Place) -> Option<Type> {
    Typer::new(module, func).place(place).ok()
}

/// The element type of a buffer parameter, shared array or private array.
pub fn base_elem(module: &Module, func: &Function, base: Base) -> Option<ElemType> {
    let _ = module;
    base_elem_checked(func, base).ok()
}

/// Every expression of `func`, typed once.
#[derive(Clone, Debug)]
pub struct FunctionTypes {
    results: Vec<Typing>,
}

impl FunctionTypes {
    /// The typing of `expr` (`Err(Operand)` for a handle out of range).
    pub fn get(&self, expr: ExprId) -> &Typing {
        self.results
            .get(expr.index())
            .unwrap_or(&Err(Failure::Operand))
    }

    /// Each expression's value type, `None` where it is void or ill-typed; indexed by
    /// [`ExprId::index`].
    pub fn types(&self) -> Vec<Option<Type>> {
        self.results
            .iter()
            .map(|r| r.as_ref().ok().copied().flatten())
            .collect()
    }

    /// The expressions that break a rule themselves, in arena order.
    pub fn errors(&self) -> impl Iterator<Item = (ExprId, &TypeError)> {
        self.results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Err(Failure::Here(e)) => Some((ExprId::from_index(i), e)),
                _ => None,
            })
    }
}

/// Types every expression of `func`.
pub fn check_function(module: &Module, func: &Function) -> FunctionTypes {
    let mut typer = Typer::new(module, func);
    for e in func.exprs.handles() {
        let _ = typer.typing(e);
    }
    let results = func
        .exprs
        .handles()
        .map(|e| match typer.slots.remove(&e.index()) {
            Some(Slot::Done(r)) => r,
            // Unreachable after typing every handle; fail closed rather than panic.
            _ => Err(Failure::Operand),
        })
        .collect();
    FunctionTypes { results }
}

/// The element type of `base`, with the reason when it has none.
pub fn base_elem_checked(func: &Function, base: Base) -> Result<ElemType, TypeError> {
    match base {
        Base::Param(i) => match func.params.get(i as usize) {
            None => Err(TypeError::new(
                codes::HANDLE,
                format!("parameter index {i} out of range"),
            )),
            Some(p) => match p.ty {
                Type::Buffer { elem, .. }
                | Type::Array { elem, .. }
                | Type::Shared { elem, .. } => Ok(elem),
                _ => Err(TypeError::new(
                    codes::INDEX,
                    format!("parameter `{}` is not a buffer or array", p.name),
                )),
            },
        },
        Base::Shared(h) => func.shared.try_get(h).map(|s| s.elem).ok_or_else(|| {
            TypeError::new(codes::HANDLE, format!("shared array {h:?} does not exist"))
        }),
        Base::Local(h) => match func.locals.try_get(h) {
            None => Err(TypeError::new(
                codes::HANDLE,
                format!("local {h:?} does not exist"),
            )),
            Some(l) => match l.ty {
                Type::Array { elem, .. } => Ok(elem),
                _ => Err(TypeError::new(
                    codes::INDEX,
                    format!("local `{}` is not an array", l.name),
                )),
            },
        },
    }
}

/// Whether `base` may be written: everything but a read-only buffer. `None` if malformed.
pub fn base_writable(func: &Function, base: Base) -> Option<bool> {
    match base {
        Base::Param(i) => match func.params.get(i as usize)?.ty {
            Type::Buffer { access, .. } => Some(access == Access::ReadWrite),
            Type::Array { .. } | Type::Shared { .. } => Some(true),
            _ => None,
        },
        Base::Shared(h) => func.shared.try_get(h).map(|_| true),
        Base::Local(h) => func.locals.try_get(h).map(|_| true),
    }
}

/// Whether `base` is private memory: a private array local, or a helper's private-array
/// parameter (atomics and `matrix_store` need a buffer or shared array).
pub fn base_is_private(func: &Function, base: Base) -> bool {
    match base {
        Base::Local(_) => true,
        Base::Param(i) => matches!(
            func.params.get(i as usize).map(|p| p.ty),
            Some(Type::Array { .. })
        ),
        Base::Shared(_) => false,
    }
}

/// Whether `base` is a buffer: a kernel's buffer parameter or a helper's buffer parameter.
pub fn base_is_buffer(func: &Function, base: Base) -> bool {
    match base {
        Base::Param(i) => matches!(
            func.params.get(i as usize).map(|p| p.ty),
            Some(Type::Buffer { .. })
        ),
        _ => false,
    }
}

/// The type a reference to `base` has ([`Expr::Ref`]): a buffer parameter's type, a
/// shared array as [`Type::Shared`], a private array's type. `None` if malformed.
pub fn ref_type(func: &Function, base: Base) -> Option<Type> {
    match base {
        Base::Param(i) => func.params.get(i as usize).map(|p| p.ty),
        Base::Shared(h) => func.shared.try_get(h).map(|s| Type::Shared {
            elem: s.elem,
            len: s.len,
        }),
        Base::Local(h) => func.locals.try_get(h).map(|l| l.ty),
    }
}

/// Whether memory of type `arg` may be passed for a helper parameter of type `param`
/// (both [`Type::is_memory`]): the code and the reason when it may not. A length that is
/// still a template's constant expression is checked per instance.
pub fn memory_arg_error(arg: Type, param: Type) -> Option<(&'static str, String)> {
    fn same_len(a: Len, p: Len) -> bool {
        match (a, p) {
            (Len::Fixed(a), Len::Fixed(p)) => a == p,
            _ => true,
        }
    }
    let kind = |t: Type| match t {
        Type::Buffer { .. } => "a buffer",
        Type::Shared { .. } => "a shared array",
        Type::Array { .. } => "a private array",
        _ => "not memory",
    };
    let ok = match (arg, param) {
        (
            Type::Buffer { elem: ae, access },
            Type::Buffer {
                elem: pe,
                access: pa,
            },
        ) if ae == pe => {
            if pa == Access::ReadWrite && access == Access::Read {
                return Some((
                    codes::MEMORY_ACCESS,
                    "a read-only buffer, where the parameter is `rw`".to_string(),
                ));
            }
            true
        }
        (Type::Shared { elem: ae, len: al }, Type::Shared { elem: pe, len: pl }) if ae == pe => {
            match (al, pl) {
                (_, None) => true,
                (Some(a), Some(p)) => same_len(a, p),
                (None, Some(_)) => false,
            }
        }
        (Type::Array { elem: ae, len: al }, Type::Array { elem: pe, len: pl }) if ae == pe => {
            same_len(al, pl)
        }
        _ => false,
    };
    if ok {
        None
    } else {
        Some((
            codes::MEMORY_ARG,
            format!("{} of another type or length", kind(arg)),
        ))
    }
}

/// The code of a write to a base that may not be written: `XPU-V160` for a constant buffer
/// (`buf<_, const>`), the read-only code otherwise.
fn read_only_code(func: &Function, base: Base) -> &'static str {
    match base {
        Base::Param(i) => match func.params.get(i as usize).map(|p| p.ty) {
            Some(Type::Buffer {
                access: Access::Constant,
                ..
            }) => codes::CONSTANT_WRITE,
            _ => codes::READ_ONLY,
        },
        _ => codes::READ_ONLY,
    }
}

/// The name of `base` for messages.
pub fn base_name(func: &Function, base: Base) -> String {
    let name = match base {
        Base::Param(i) => func.params.get(i as usize).map(|p| p.name.as_str()),
        Base::Shared(h) => func.shared.try_get(h).map(|s| s.name.as_str()),
        Base::Local(h) => func.locals.try_get(h).map(|l| l.name.as_str()),
    };
    name.unwrap_or("?").to_string()
}

/// The text-format spelling of a type, for messages.
pub fn type_name(module: &Module, ty: Type) -> String {
    fn elem(e: ElemType) -> String {
        if e.lanes == 1 {
            e.scalar.name().to_string()
        } else {
            format!("vec{}<{}>", e.lanes, e.scalar.name())
        }
    }
    match ty {
        Type::Scalar(s) => s.name().to_string(),
        Type::Vector(s, n) => format!("vec{n}<{}>", s.name()),
        Type::Buffer { elem: e, access } => access.buffer_name(&elem(e)),
        Type::Array { elem: e, len } => match len {
            Len::Fixed(n) => format!("[{}; {n}]", elem(e)),
            Len::Const(_) => format!("[{}; <const>]", elem(e)),
        },
        Type::Matrix {
            role,
            scalar,
            rows,
            cols,
        } => format!("matrix<{}, {}, {rows}, {cols}>", role.name(), scalar.name()),
        Type::Tag(set) => match module.tag_sets.try_get(set) {
            Some(t) => format!("tag<{}>", t.name),
            None => "tag<?>".to_string(),
        },
        Type::Shared { elem: e, len } => match len {
            Some(Len::Fixed(n)) => format!("shared [{}; {n}]", elem(e)),
            Some(Len::Const(_)) => format!("shared [{}; <const>]", elem(e)),
            None => format!("shared [{}]", elem(e)),
        },
    }
}

#[derive(Clone, Debug)]
enum Slot {
    Unvisited,
    InProgress,
    Done(Typing),
}

/// The memoising engine behind every entry point.
struct Typer<'a> {
    module: &'a Module,
    func: &'a Function,
    /// Typings by expression index; absent means not visited. A map, not a vector, so that
    /// one question about a small subtree costs the subtree, not the arena.
    slots: HashMap<usize, Slot>,
}

static UNVISITED: Slot = Slot::Unvisited;

fn here<T>(code: &'static str, message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure::Here(TypeError::new(code, message)))
}

impl<'a> Typer<'a> {
    fn new(module: &'a Module, func: &'a Function) -> Self {
        Typer {
            module,
            func,
            slots: HashMap::new(),
        }
    }

    fn slot(&self, e: ExprId) -> &Slot {
        self.slots.get(&e.index()).unwrap_or(&UNVISITED)
    }

    fn tn(&self, ty: Type) -> String {
        type_name(self.module, ty)
    }

    /// Types `root` and everything below it, iteratively (post-order).
    fn typing(&mut self, root: ExprId) -> Typing {
        if !self.func.exprs.contains(root) {
            return here(codes::HANDLE, format!("expression {root:?} does not exist"));
        }
        let mut stack = vec![root];
        while let Some(&top) = stack.last() {
            match self.slot(top) {
                Slot::Done(_) => {
                    stack.pop();
                    continue;
                }
                Slot::Unvisited => {
                    self.slots.insert(top.index(), Slot::InProgress);
                    let mut cycle = false;
                    let expr = &self.func.exprs[top];
                    let mut pending = Vec::new();
                    expr.for_each_operand(|op| {
                        if self.func.exprs.contains(op) {
                            match self.slot(op) {
                                Slot::Unvisited => pending.push(op),
                                Slot::InProgress => cycle = true,
                                Slot::Done(_) => {}
                            }
                        }
                    });
                    if cycle {
                        let r = here(codes::EXPR_REUSED, "expression is its own operand");
                        self.slots.insert(top.index(), Slot::Done(r));
                        stack.pop();
                        continue;
                    }
                    // Push in reverse so operands are typed left to right.
                    stack.extend(pending.into_iter().rev());
                }
                Slot::InProgress => {
                    // Every operand has been typed (or was in progress higher up, which
                    // was reported as a cycle).
                    let result = self.shallow(top);
                    self.slots.insert(top.index(), Slot::Done(result));
                    stack.pop();
                }
            }
        }
        match self.slot(root) {
            Slot::Done(r) => r.clone(),
            _ => Err(Failure::Operand),
        }
    }

    /// The typing of an operand already typed: a value type, or a silent failure.
    fn operand(&self, e: ExprId) -> Result<Type, Failure> {
        if !self.func.exprs.contains(e) {
            return here(codes::HANDLE, format!("expression {e:?} does not exist"));
        }
        match self.slots.get(&e.index()) {
            None => Err(Failure::Operand),
            Some(Slot::Done(Ok(Some(t)))) => Ok(*t),
            Some(Slot::Done(Ok(None))) => here(
                codes::VOID_VALUE,
                "a call to a helper that returns nothing is used as a value",
            ),
            Some(Slot::Done(Err(_))) => Err(Failure::Operand),
            // A cycle through this operand, reported where it was found.
            Some(_) => Err(Failure::Operand),
        }
    }

    fn value_operand(&self, e: ExprId, what: &str) -> Result<Type, Failure> {
        let t = self.operand(e)?;
        if t.is_value() {
            Ok(t)
        } else {
            here(
                codes::OPERAND_TYPE,
                format!("{what} must be a scalar or vector, not {}", self.tn(t)),
            )
        }
    }

    fn u32_operand(&self, e: ExprId, code: &'static str, what: &str) -> Result<(), Failure> {
        let t = self.operand(e)?;
        if t == Type::U32 {
            Ok(())
        } else {
            here(code, format!("{what} must be u32, not {}", self.tn(t)))
        }
    }

    fn base(&self, base: Base) -> Result<ElemType, Failure> {
        base_elem_checked(self.func, base).map_err(Failure::Here)
    }

    /// The type of a place, checking its handles and index (not its writability).
    fn place(&mut self, place: &Place) -> Result<Type, Failure> {
        match *place {
            Place::Local(h) => match self.func.locals.try_get(h) {
                Some(l) => Ok(l.ty),
                None => here(codes::HANDLE, format!("local {h:?} does not exist")),
            },
            Place::Lane { local, lane } => match self.func.locals.try_get(local) {
                None => here(codes::HANDLE, format!("local {local:?} does not exist")),
                Some(l) => match l.ty {
                    Type::Vector(s, n) if lane < n => Ok(Type::Scalar(s)),
                    Type::Vector(_, n) => here(
                        codes::LANE_INDEX,
                        format!("lane {lane} of `{}`, which has {n} lanes", l.name),
                    ),
                    t => here(
                        codes::LANE_INDEX,
                        format!("lane {lane} of `{}`, which is {}", l.name, self.tn(t)),
                    ),
                },
            },
            Place::Element { base, index } => {
                let elem = self.base(base)?;
                self.typing(index)?;
                self.u32_operand(index, codes::INDEX, "an index")?;
                Ok(elem.value_type())
            }
        }
    }

    /// Types one expression whose operands are typed.
    fn shallow(&mut self, id: ExprId) -> Typing {
        let func = self.func;
        let module = self.module;
        let expr = &func.exprs[id];
        // Operands out of range are reported at the parent.
        let mut dangling = None;
        expr.for_each_operand(|op| {
            if !func.exprs.contains(op) && dangling.is_none() {
                dangling = Some(op);
            }
        });
        if let Some(op) = dangling {
            return here(codes::HANDLE, format!("expression {op:?} does not exist"));
        }
        let t = match expr {
            Expr::Literal(lit) => {
                if let Literal::Int { ty, .. } | Literal::Float { ty, .. } = lit {
                    let ok = match lit {
                        Literal::Int { .. } => ty.is_int(),
                        _ => ty.is_float(),
                    };
                    if !ok {
                        return here(
                            codes::OPERAND_TYPE,
                            format!("literal of kind and type {} disagree", ty.name()),
                        );
                    }
                }
                Type::Scalar(lit.scalar())
            }
            Expr::Param(i) => match func.params.get(*i as usize) {
                Some(p) => p.ty,
                None => return here(codes::HANDLE, format!("parameter index {i} out of range")),
            },
            Expr::Local(h) => match func.locals.try_get(*h) {
                Some(l) => l.ty,
                None => return here(codes::HANDLE, format!("local {h:?} does not exist")),
            },
            Expr::TemplateParam(i) => match &func.template {
                Some(t) if (*i as usize) < t.params.len() => Type::U32,
                Some(_) => {
                    return here(
                        codes::HANDLE,
                        format!("template parameter index {i} out of range"),
                    )
                }
                None => {
                    return here(
                        codes::NOT_TEMPLATE,
                        "a template parameter outside a template",
                    )
                }
            },
            Expr::Builtin(_) => Type::U32,
            Expr::Unary { op, arg } => {
                let t = self.value_operand(*arg, "the operand")?;
                let s = t.scalar().unwrap_or(Scalar::Bool);
                let ok = match op {
                    UnaryOp::Neg => s.is_numeric(),
                    UnaryOp::Not => s == Scalar::Bool || s.is_int(),
                };
                if !ok {
                    return here(
                        codes::OPERAND_TYPE,
                        format!("`{}` does not apply to {}", unary_sym(*op), self.tn(t)),
                    );
                }
                t
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, *lhs, *rhs)?,
            Expr::Cast { to, arg } => {
                let t = self.value_operand(*arg, "a cast's operand")?;
                match t {
                    Type::Vector(_, n) => Type::Vector(*to, n),
                    _ => Type::Scalar(*to),
                }
            }
            Expr::Bitcast { to, arg } => {
                let t = self.value_operand(*arg, "a bitcast's operand")?;
                let Some(te) = to.as_elem() else {
                    return here(
                        codes::OPERAND_TYPE,
                        format!(
                            "bitcast to {}, which is not a scalar or vector",
                            self.tn(*to)
                        ),
                    );
                };
                if te.lanes != 1 && !VECTOR_LANES.contains(&te.lanes) {
                    return here(
                        codes::VECTOR_LANES,
                        format!("a vector of {} lanes", te.lanes),
                    );
                }
                let from = t.as_elem().map(|e| e.size()).unwrap_or(0);
                if from != te.size() {
                    return here(
                        codes::OPERAND_TYPE,
                        format!(
                            "bitcast from {} ({from} bytes) to {} ({} bytes)",
                            self.tn(t),
                            self.tn(*to),
                            te.size()
                        ),
                    );
                }
                *to
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.operand(*cond)?;
                let a = self.value_operand(*accept, "a select arm")?;
                let b = self.value_operand(*reject, "a select arm")?;
                if a != b {
                    return here(
                        codes::OPERAND_TYPE,
                        format!("select arms differ: {} and {}", self.tn(a), self.tn(b)),
                    );
                }
                let ok = match c {
                    Type::Scalar(Scalar::Bool) => true,
                    Type::Vector(Scalar::Bool, n) => a.lanes() == Some(n),
                    _ => false,
                };
                if !ok {
                    return here(
                        codes::OPERAND_TYPE,
                        format!(
                            "select condition must be bool (or a bool vector of the arms' lanes), not {}",
                            self.tn(c)
                        ),
                    );
                }
                a
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => {
                let c = self.operand(*cond)?;
                let a = self.value_operand(*accept, "an `if` arm")?;
                let b = self.value_operand(*reject, "an `if` arm")?;
                if c != Type::BOOL {
                    return here(
                        codes::IF_EXPR,
                        format!(
                            "an `if` expression's condition must be bool, not {}",
                            self.tn(c)
                        ),
                    );
                }
                if a != b {
                    return here(
                        codes::IF_EXPR,
                        format!("`if` arms differ: {} and {}", self.tn(a), self.tn(b)),
                    );
                }
                if !matches!(a, Type::Scalar(_) | Type::Vector(..)) {
                    return here(
                        codes::IF_EXPR,
                        format!(
                            "an `if` expression yields a scalar or vector, not {}",
                            self.tn(a)
                        ),
                    );
                }
                a
            }
            Expr::Compose {
                scalar,
                lanes,
                parts,
            } => {
                lanes_ok(*lanes)?;
                if parts.is_empty() {
                    return here(codes::OPERAND_TYPE, "a vector constructor with no parts");
                }
                let mut total = 0u32;
                for &p in parts {
                    let t = self.value_operand(p, "a vector part")?;
                    if t.scalar() != Some(*scalar) {
                        return here(
                            codes::OPERAND_TYPE,
                            format!("a part of {} in a vector of {}", self.tn(t), scalar.name()),
                        );
                    }
                    total += u32::from(t.lanes().unwrap_or(1));
                }
                if total != u32::from(*lanes) {
                    return here(
                        codes::OPERAND_TYPE,
                        format!("parts with {total} lanes build a vector of {lanes}"),
                    );
                }
                Type::Vector(*scalar, *lanes)
            }
            Expr::Splat { lanes, value } => {
                lanes_ok(*lanes)?;
                let t = self.operand(*value)?;
                match t {
                    Type::Scalar(s) => Type::Vector(s, *lanes),
                    _ => {
                        return here(
                            codes::OPERAND_TYPE,
                            format!("a splat of {}, which is not a scalar", self.tn(t)),
                        )
                    }
                }
            }
            Expr::Extract { vector, lane } => {
                let t = self.operand(*vector)?;
                match t {
                    Type::Vector(s, n) if lane < &n => Type::Scalar(s),
                    Type::Vector(_, n) => {
                        return here(
                            codes::LANE_INDEX,
                            format!("lane {lane} of a vector of {n} lanes"),
                        )
                    }
                    _ => {
                        return here(
                            codes::OPERAND_TYPE,
                            format!("a lane of {}, which is not a vector", self.tn(t)),
                        )
                    }
                }
            }
            Expr::Swizzle { vector, lanes } => {
                let t = self.operand(*vector)?;
                let Type::Vector(s, n) = t else {
                    return here(
                        codes::OPERAND_TYPE,
                        format!("a swizzle of {}, which is not a vector", self.tn(t)),
                    );
                };
                if lanes.len() > 16 || !VECTOR_LANES.contains(&(lanes.len() as u8)) {
                    return here(
                        codes::VECTOR_LANES,
                        format!("a swizzle of {} lanes", lanes.len()),
                    );
                }
                if let Some(bad) = lanes.iter().find(|&&l| l >= n) {
                    return here(
                        codes::LANE_INDEX,
                        format!("lane {bad} of a vector of {n} lanes"),
                    );
                }
                Type::Vector(s, lanes.len() as u8)
            }
            Expr::Index { base, index } => {
                let elem = self.base(*base)?;
                self.u32_operand(*index, codes::INDEX, "an index")?;
                elem.value_type()
            }
            Expr::Ref(base) => match ref_type(func, *base) {
                Some(t) if t.is_memory() => t,
                Some(_) => {
                    return here(
                        codes::MEMORY_REF,
                        format!(
                            "`{}` is not a buffer or array to pass by reference",
                            base_name(func, *base)
                        ),
                    )
                }
                None => return here(codes::HANDLE, format!("{base:?} does not exist")),
            },
            Expr::Len(i) => match func.params.get(*i as usize) {
                None => return here(codes::HANDLE, format!("parameter index {i} out of range")),
                Some(p) => match p.ty {
                    Type::Buffer { .. } => Type::U32,
                    t => {
                        return here(
                            codes::LEN,
                            format!("len of `{}`, which is {}", p.name, self.tn(t)),
                        )
                    }
                },
            },
            Expr::Call { function, args } => {
                let Some(callee) = module.functions.try_get(*function) else {
                    return here(
                        codes::HANDLE,
                        format!("function {function:?} does not exist"),
                    );
                };
                if callee.kind == FunctionKind::Kernel || callee.template.is_some() {
                    return here(
                        codes::KERNEL_CALL,
                        format!("`{}` is a kernel; kernels cannot be called", callee.name),
                    );
                }
                self.args(&callee.name, &callee.params, args, codes::CALL_ARGS)?;
                return Ok(callee.ret);
            }
            Expr::Tag { set, index } => {
                let Some(ts) = module.tag_sets.try_get(*set) else {
                    return here(codes::HANDLE, format!("tag set {set:?} does not exist"));
                };
                if *index as usize >= ts.members.len() {
                    return here(
                        codes::DISPATCH,
                        format!(
                            "member {index} of tag set `{}`, which has {}",
                            ts.name,
                            ts.members.len()
                        ),
                    );
                }
                Type::Tag(*set)
            }
            Expr::Dispatch { tag, args } => {
                let t = self.operand(*tag)?;
                let Type::Tag(set) = t else {
                    return here(
                        codes::DISPATCH,
                        format!("dispatch through {}, which is not a tag", self.tn(t)),
                    );
                };
                let Some(ts) = module.tag_sets.try_get(set) else {
                    return here(codes::HANDLE, format!("tag set {set:?} does not exist"));
                };
                // The tag-set rule (V056) makes every member agree with the first.
                let Some(first) = ts
                    .members
                    .first()
                    .and_then(|&m| module.functions.try_get(m))
                else {
                    return here(
                        codes::DISPATCH,
                        format!("dispatch through empty tag set `{}`", ts.name),
                    );
                };
                self.args(&ts.name, &first.params, args, codes::DISPATCH)?;
                return Ok(first.ret);
            }
            Expr::Math { fun, args } => self.math(*fun, args)?,
            Expr::Bits { op, args } => self.bits(*op, args)?,
            Expr::Atomic {
                op,
                place,
                value,
                compare,
                ..
            } => self.atomic(*op, place, *value, *compare)?,
            Expr::Wave { op, args, width } => {
                self.tile(*op, *width)?;
                self.wave(*op, args)?
            }
            Expr::AtomicLoad { order, place } => self.atomic_access(*order, place, None)?,
            Expr::AtomicStore {
                order,
                place,
                value,
            } => {
                self.atomic_access(*order, place, Some(*value))?;
                return Ok(None);
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let s = vector_access(func, *base, *lanes, *align, "vload")?;
                self.u32_operand(*index, codes::INDEX, "a vload index")?;
                Type::Vector(s, *lanes)
            }
            Expr::MatrixFill {
                role,
                scalar,
                rows,
                cols,
                value,
            } => {
                matrix_shape_ok(*rows, *cols)?;
                let t = self.operand(*value)?;
                if t != Type::Scalar(*scalar) {
                    return here(
                        codes::MATRIX,
                        format!("a fragment of {} filled with {}", scalar.name(), self.tn(t)),
                    );
                }
                Type::Matrix {
                    role: *role,
                    scalar: *scalar,
                    rows: *rows,
                    cols: *cols,
                }
            }
            Expr::MatrixLoad {
                role,
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
            } => {
                matrix_shape_ok(*rows, *cols)?;
                let elem = self.base(*base)?;
                if elem != ElemType::scalar(*scalar) {
                    return here(
                        codes::MATRIX,
                        format!(
                            "a fragment of {} loaded from `{}` of {}",
                            scalar.name(),
                            base_name(func, *base),
                            self.tn(elem.value_type())
                        ),
                    );
                }
                self.u32_operand(*offset, codes::MATRIX, "a matrix offset")?;
                self.u32_operand(*stride, codes::MATRIX, "a matrix stride")?;
                Type::Matrix {
                    role: *role,
                    scalar: *scalar,
                    rows: *rows,
                    cols: *cols,
                }
            }
            Expr::MatrixMma { a, b, c } => {
                let (ta, tb, tc) = (self.operand(*a)?, self.operand(*b)?, self.operand(*c)?);
                match (ta, tb, tc) {
                    (
                        Type::Matrix {
                            role: MatrixRole::A,
                            scalar: sa,
                            rows: m,
                            cols: k,
                        },
                        Type::Matrix {
                            role: MatrixRole::B,
                            scalar: sb,
                            rows: k2,
                            cols: n,
                        },
                        Type::Matrix {
                            role: MatrixRole::Acc,
                            rows: m2,
                            cols: n2,
                            ..
                        },
                    ) => {
                        if sa != sb {
                            return here(
                                codes::MATRIX,
                                format!("matrix_mma of a {} and b {}", sa.name(), sb.name()),
                            );
                        }
                        if k != k2 || m != m2 || n != n2 {
                            return here(
                                codes::MATRIX,
                                format!(
                                    "matrix_mma shapes disagree: a {m}×{k}, b {k2}×{n}, acc {m2}×{n2}"
                                ),
                            );
                        }
                        tc
                    }
                    _ => {
                        return here(
                            codes::MATRIX,
                            format!(
                                "matrix_mma takes fragments a, b, acc; got {}, {}, {}",
                                self.tn(ta),
                                self.tn(tb),
                                self.tn(tc)
                            ),
                        )
                    }
                }
            }
        };
        Ok(Some(t))
    }

    fn binary(&self, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> Result<Type, Failure> {
        let a = self.value_operand(lhs, "an operand")?;
        let b = self.value_operand(rhs, "an operand")?;
        let sym = binary_sym(op);
        if a != b {
            return here(
                codes::OPERAND_TYPE,
                format!("`{sym}` of {} and {}", self.tn(a), self.tn(b)),
            );
        }
        let s = a.scalar().unwrap_or(Scalar::Bool);
        let ok = match op {
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Rem
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => s.is_numeric(),
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
                s.is_int() || s == Scalar::Bool
            }
            BinaryOp::Shl | BinaryOp::Shr => s.is_int(),
            BinaryOp::Eq | BinaryOp::Ne => true,
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => a == Type::BOOL,
        };
        if !ok {
            return here(
                codes::OPERAND_TYPE,
                format!("`{sym}` does not apply to {}", self.tn(a)),
            );
        }
        Ok(if op.is_comparison() {
            match a {
                Type::Vector(_, n) => Type::Vector(Scalar::Bool, n),
                _ => Type::BOOL,
            }
        } else {
            a
        })
    }

    fn args(
        &self,
        callee: &str,
        params: &[super::Param],
        args: &[ExprId],
        code: &'static str,
    ) -> Result<(), Failure> {
        if params.len() != args.len() {
            return here(
                code,
                format!(
                    "`{callee}` takes {} arguments, {} given",
                    params.len(),
                    args.len()
                ),
            );
        }
        for (i, (p, &a)) in params.iter().zip(args).enumerate() {
            if p.ty.is_memory() || matches!(self.func.exprs.try_get(a), Some(Expr::Ref(_))) {
                let t = match self.func.exprs.try_get(a) {
                    Some(Expr::Ref(_)) => self.operand(a)?,
                    _ => {
                        return here(
                            codes::MEMORY_ARG,
                            format!(
                                "argument {} of `{callee}` (`{}`, {}) takes the name of a buffer, \
                                 shared array or private array",
                                i + 1,
                                p.name,
                                self.tn(p.ty)
                            ),
                        )
                    }
                };
                let problem = if p.ty.is_memory() {
                    memory_arg_error(t, p.ty)
                } else {
                    Some((
                        codes::MEMORY_ARG,
                        "memory, where a value is taken".to_string(),
                    ))
                };
                if let Some((code, why)) = problem {
                    return here(
                        code,
                        format!(
                            "argument {} of `{callee}` (`{}`) must be {}, not {} ({why})",
                            i + 1,
                            p.name,
                            self.tn(p.ty),
                            self.tn(t)
                        ),
                    );
                }
                continue;
            }
            let t = self.operand(a)?;
            if t != p.ty {
                return here(
                    code,
                    format!(
                        "argument {} of `{callee}` (`{}`) must be {}, not {}",
                        i + 1,
                        p.name,
                        self.tn(p.ty),
                        self.tn(t)
                    ),
                );
            }
        }
        Ok(())
    }

    fn math(&self, fun: MathFn, args: &[ExprId]) -> Result<Type, Failure> {
        if args.len() != fun.arity() {
            return here(
                codes::OPERAND_TYPE,
                format!(
                    "`{}` takes {} arguments, {} given",
                    fun.name(),
                    fun.arity(),
                    args.len()
                ),
            );
        }
        let first = self.value_operand(args[0], "a math argument")?;
        for &a in &args[1..] {
            let t = self.value_operand(a, "a math argument")?;
            if t != first {
                return here(
                    codes::OPERAND_TYPE,
                    format!("`{}` of {} and {}", fun.name(), self.tn(first), self.tn(t)),
                );
            }
        }
        let s = first.scalar().unwrap_or(Scalar::Bool);
        let ok = if fun.float_only() {
            s.is_float()
        } else {
            s.is_numeric()
        };
        if !ok {
            return here(
                codes::OPERAND_TYPE,
                format!("`{}` does not apply to {}", fun.name(), self.tn(first)),
            );
        }
        Ok(first)
    }

    /// A bit operation: values of one integer scalar type, amounts of `u32`; the result has
    /// the values' type.
    fn bits(&self, op: BitOp, args: &[ExprId]) -> Result<Type, Failure> {
        if args.len() != op.arity() {
            return here(
                codes::BITS,
                format!(
                    "`{}` takes {} arguments, {} given",
                    op.name(),
                    op.arity(),
                    args.len()
                ),
            );
        }
        let mut value: Option<Type> = None;
        for (i, &a) in args.iter().enumerate() {
            let t = self.operand(a)?;
            if op.is_amount(i) {
                if t != Type::U32 {
                    return here(
                        codes::BITS,
                        format!(
                            "argument {} of `{}` is a u32 amount, not {}",
                            i + 1,
                            op.name(),
                            self.tn(t)
                        ),
                    );
                }
                continue;
            }
            match (value, t) {
                (None, Type::Scalar(s)) if s.is_int() => value = Some(t),
                (None, _) => {
                    return here(
                        codes::BITS,
                        format!("`{}` takes integer scalars, not {}", op.name(), self.tn(t)),
                    )
                }
                (Some(v), t) if v != t => {
                    return here(
                        codes::BITS,
                        format!("`{}` of {} and {}", op.name(), self.tn(v), self.tn(t)),
                    )
                }
                _ => {}
            }
        }
        value.ok_or_else(|| Failure::Here(TypeError::new(codes::BITS, "no value argument")))
    }

    /// `atomic_load` (no value) or `atomic_store`: a buffer or shared element of `i32 u32 i64
    /// u64 f32 f64`, an order that suits the access, a value of the element's type, and (to
    /// store) a writable base. Yields the element's type.
    fn atomic_access(
        &self,
        order: MemoryOrder,
        place: &Place,
        value: Option<ExprId>,
    ) -> Result<Type, Failure> {
        let name = if value.is_some() {
            "atomic_store"
        } else {
            "atomic_load"
        };
        let Place::Element { base, index } = *place else {
            return here(
                codes::ATOMIC,
                format!("`{name}` needs a buffer or shared element"),
            );
        };
        if !self.func.exprs.contains(index) {
            return here(
                codes::HANDLE,
                format!("expression {index:?} does not exist"),
            );
        }
        if base_is_private(self.func, base) {
            return here(
                codes::ATOMIC,
                format!(
                    "`{name}` on private array `{}`; atomics need a buffer or shared element",
                    base_name(self.func, base)
                ),
            );
        }
        let elem = self.base(base)?;
        self.u32_operand(index, codes::INDEX, "an index")?;
        let ok = elem.lanes == 1
            && matches!(
                elem.scalar,
                Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::F32 | Scalar::F64
            );
        if !ok {
            return here(
                codes::ATOMIC,
                format!(
                    "`{name}` on an element of {}; it takes i32, u32, i64, u64, f32, f64",
                    self.tn(elem.value_type())
                ),
            );
        }
        let order_ok = match value {
            None => !matches!(order, MemoryOrder::Release | MemoryOrder::AcqRel),
            Some(_) => !matches!(order, MemoryOrder::Acquire | MemoryOrder::AcqRel),
        };
        if !order_ok {
            return here(
                codes::ATOMIC_ORDER,
                format!("`{name}` with order {}", order.name()),
            );
        }
        let want = elem.value_type();
        if let Some(v) = value {
            if base_writable(self.func, base) == Some(false) {
                return here(
                    read_only_code(self.func, base),
                    format!(
                        "`{name}` to read-only buffer `{}`",
                        base_name(self.func, base)
                    ),
                );
            }
            let t = self.operand(v)?;
            if t != want {
                return here(
                    codes::ATOMIC,
                    format!("`{name}` of {} to {}", self.tn(t), self.tn(want)),
                );
            }
        }
        Ok(want)
    }

    fn atomic(
        &self,
        op: AtomicOp,
        place: &Place,
        value: ExprId,
        compare: Option<ExprId>,
    ) -> Result<Type, Failure> {
        let Place::Element { base, index } = *place else {
            return here(
                codes::ATOMIC,
                format!("`{}` needs a buffer or shared element", op.name()),
            );
        };
        if !self.func.exprs.contains(index) {
            return here(
                codes::HANDLE,
                format!("expression {index:?} does not exist"),
            );
        }
        if base_is_private(self.func, base) {
            return here(
                codes::ATOMIC,
                format!(
                    "`{}` on private array `{}`; atomics need a buffer or shared element",
                    op.name(),
                    base_name(self.func, base)
                ),
            );
        }
        let elem = self.base(base)?;
        self.u32_operand(index, codes::INDEX, "an index")?;
        let s = elem.scalar;
        let ok = elem.lanes == 1 && op.takes(s);
        if !ok {
            return here(
                codes::ATOMIC,
                format!(
                    "`{}` on an element of {}; atomics take i32, u32, i64, u64 (f32 for atomic_add, atomic_min, atomic_max; f64 and f16 for atomic_add)",
                    op.name(),
                    self.tn(elem.value_type())
                ),
            );
        }
        if base_writable(self.func, base) == Some(false) {
            return here(
                read_only_code(self.func, base),
                format!(
                    "`{}` on read-only buffer `{}`",
                    op.name(),
                    base_name(self.func, base)
                ),
            );
        }
        match (op == AtomicOp::CompareExchange, compare) {
            (true, None) => {
                return here(
                    codes::ATOMIC_COMPARE,
                    "atomic_compare_exchange needs an expected value",
                )
            }
            (false, Some(_)) => {
                return here(
                    codes::ATOMIC_COMPARE,
                    format!("`{}` takes no expected value", op.name()),
                )
            }
            _ => {}
        }
        let want = elem.value_type();
        for e in compare.into_iter().chain([value]) {
            let t = self.operand(e)?;
            if t != want {
                return here(
                    codes::ATOMIC,
                    format!(
                        "`{}` on {} with a value of {}",
                        op.name(),
                        self.tn(want),
                        self.tn(t)
                    ),
                );
            }
        }
        Ok(want)
    }

    /// A wave verb's tile (`width = T`, issue 23 item 3): only on the lane exchanges,
    /// reductions and scans, `T` a power of two from 1 to 64 (`XPU-V120`), and no wider
    /// than the kernel's declared `@wave` (`XPU-V121`).
    fn tile(&self, op: WaveOp, width: Option<u32>) -> Result<(), Failure> {
        let Some(t) = width else { return Ok(()) };
        let name = wave_name(op);
        if matches!(
            op,
            WaveOp::Ballot | WaveOp::Any | WaveOp::All | WaveOp::Elect
        ) {
            return here(
                codes::TILE_WIDTH,
                format!("`{name}` takes no `width`; the lane exchanges, reductions and scans do"),
            );
        }
        if !t.is_power_of_two() || t > 64 {
            return here(
                codes::TILE_WIDTH,
                format!("`{name}(..., width = {t})`: a tile width is a power of two from 1 to 64"),
            );
        }
        if self.func.kind == crate::ir::FunctionKind::Kernel {
            if let Some((w, _)) = self.func.attrs.wave {
                if t > w {
                    return here(
                        codes::TILE_WAVE,
                        format!(
                            "`{name}(..., width = {t})` in a kernel declared `@wave({w})`: a tile \
                             is at most the wave"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn wave(&self, op: WaveOp, args: &[ExprId]) -> Result<Type, Failure> {
        let name = wave_name(op);
        let arity = match op {
            WaveOp::Elect => 0,
            WaveOp::Broadcast
            | WaveOp::Shuffle
            | WaveOp::ShuffleXor
            | WaveOp::ShuffleUp
            | WaveOp::ShuffleDown
            | WaveOp::Rotate => 2,
            _ => 1,
        };
        if args.len() != arity {
            return here(
                codes::WAVE_ARGS,
                format!("`{name}` takes {arity} arguments, {} given", args.len()),
            );
        }
        match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let t = self.operand(args[0])?;
                let ok = match (t, r) {
                    (Type::Scalar(s), ReduceOp::Sum | ReduceOp::Min | ReduceOp::Max) => {
                        s.is_numeric()
                    }
                    (Type::Scalar(s), _) => s.is_int(),
                    _ => false,
                };
                if !ok {
                    return here(
                        codes::WAVE_ARGS,
                        format!("`{name}` does not apply to {}", self.tn(t)),
                    );
                }
                Ok(t)
            }
            WaveOp::Broadcast
            | WaveOp::Shuffle
            | WaveOp::ShuffleXor
            | WaveOp::ShuffleUp
            | WaveOp::ShuffleDown
            | WaveOp::Rotate => {
                let t = self.operand(args[0])?;
                if !t.is_value() {
                    return here(
                        codes::WAVE_ARGS,
                        format!(
                            "`{name}` of {}, which is not a scalar or vector",
                            self.tn(t)
                        ),
                    );
                }
                self.u32_operand(args[1], codes::WAVE_ARGS, "a lane, delta or mask")?;
                Ok(t)
            }
            WaveOp::Ballot | WaveOp::Any | WaveOp::All => {
                let t = self.operand(args[0])?;
                if t != Type::BOOL {
                    return here(
                        codes::WAVE_ARGS,
                        format!("`{name}` takes a bool, not {}", self.tn(t)),
                    );
                }
                Ok(if op == WaveOp::Ballot {
                    Type::U64
                } else {
                    Type::BOOL
                })
            }
            WaveOp::Elect => Ok(Type::BOOL),
        }
    }
}

fn lanes_ok(lanes: u8) -> Result<(), Failure> {
    if VECTOR_LANES.contains(&lanes) {
        Ok(())
    } else {
        here(
            codes::VECTOR_LANES,
            format!("a vector of {lanes} lanes; vectors have 2, 3, 4, 8 or 16"),
        )
    }
}

fn matrix_shape_ok(rows: u8, cols: u8) -> Result<(), Failure> {
    if rows == 0 || cols == 0 {
        here(codes::MATRIX, format!("a {rows}×{cols} fragment"))
    } else {
        Ok(())
    }
}

/// Checks a `vload`/`vstore` of `lanes` lanes at `base` with the promised `align`; returns
/// the buffer's scalar.
pub fn vector_access(
    func: &Function,
    base: Base,
    lanes: u8,
    align: Option<u8>,
    what: &str,
) -> Result<Scalar, Failure> {
    if !VECTOR_LANES.contains(&lanes) {
        return here(
            codes::VLOAD,
            format!("{what}<{lanes}>; the lane count is 2, 3, 4, 8 or 16"),
        );
    }
    let elem = base_elem_checked(func, base).map_err(Failure::Here)?;
    if !base_is_buffer(func, base) || elem.lanes != 1 {
        return here(
            codes::VLOAD,
            format!(
                "{what} on `{}`; it takes a buffer of scalars",
                base_name(func, base)
            ),
        );
    }
    if let Some(a) = align {
        let width = u32::from(lanes) * elem.scalar.size();
        if !a.is_power_of_two() || a > 16 {
            return here(
                codes::ALIGN,
                format!("align = {a}; it is a power of two from 1 to 16"),
            );
        }
        if u32::from(a) > width {
            return here(
                codes::ALIGN,
                format!("align = {a} is wider than the {width}-byte access"),
            );
        }
    }
    Ok(elem.scalar)
}

fn unary_sym(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-",
        UnaryOp::Not => "!",
    }
}

/// The text-format symbol of a binary operator.
pub fn binary_sym(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Rem => "%",
        BinaryOp::BitAnd => "&",
        BinaryOp::BitOr => "|",
        BinaryOp::BitXor => "^",
        BinaryOp::Shl => "<<",
        BinaryOp::Shr => ">>",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        BinaryOp::LogicalAnd => "&&",
        BinaryOp::LogicalOr => "||",
    }
}

/// The text-format name of a wave verb.
pub fn wave_name(op: WaveOp) -> String {
    match op {
        WaveOp::Reduce(r) => format!("wave_reduce_{}", r.name()),
        WaveOp::InclusiveScan(r) => format!("wave_inclusive_scan_{}", r.name()),
        WaveOp::ExclusiveScan(r) => format!("wave_exclusive_scan_{}", r.name()),
        WaveOp::Broadcast => "wave_broadcast".into(),
        WaveOp::Shuffle => "wave_shuffle".into(),
        WaveOp::ShuffleXor => "wave_shuffle_xor".into(),
        WaveOp::ShuffleUp => "wave_shuffle_up".into(),
        WaveOp::ShuffleDown => "wave_shuffle_down".into(),
        WaveOp::Rotate => "wave_rotate".into(),
        WaveOp::Ballot => "wave_ballot".into(),
        WaveOp::Any => "wave_any".into(),
        WaveOp::All => "wave_all".into(),
        WaveOp::Elect => "wave_elect".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Access, Handle, Local, Param, Span};

    fn saxpy_like() -> (Module, Function) {
        let mut f = Function::new("k", FunctionKind::Kernel);
        f.params.push(Param {
            name: "y".into(),
            ty: Type::Buffer {
                elem: ElemType::scalar(Scalar::F32),
                access: Access::ReadWrite,
            },
            span: Span::UNKNOWN,
        });
        f.params.push(Param {
            name: "a".into(),
            ty: Type::F32,
            span: Span::UNKNOWN,
        });
        (Module::new(), f)
    }

    #[test]
    fn arithmetic_and_comparison() {
        let (m, mut f) = saxpy_like();
        let i = f.add_expr(Expr::Builtin(crate::ir::Builtin::LaneId), Span::UNKNOWN);
        let y = f.add_expr(
            Expr::Index {
                base: Base::Param(0),
                index: i,
            },
            Span::UNKNOWN,
        );
        let a = f.add_expr(Expr::Param(1), Span::UNKNOWN);
        let mul = f.add_expr(
            Expr::Binary {
                op: BinaryOp::Mul,
                lhs: a,
                rhs: y,
            },
            Span::UNKNOWN,
        );
        assert_eq!(expr_type(&m, &f, mul), Some(Type::F32));
        let lt = f.add_expr(
            Expr::Binary {
                op: BinaryOp::Lt,
                lhs: mul,
                rhs: a,
            },
            Span::UNKNOWN,
        );
        assert_eq!(expr_type(&m, &f, lt), Some(Type::BOOL));
        let bad = f.add_expr(
            Expr::Binary {
                op: BinaryOp::Add,
                lhs: i,
                rhs: a,
            },
            Span::UNKNOWN,
        );
        assert_eq!(expr_type(&m, &f, bad), None);
        let types = check_function(&m, &f);
        let errs: Vec<_> = types.errors().map(|(e, t)| (e, t.code)).collect();
        assert_eq!(errs, vec![(bad, codes::OPERAND_TYPE)]);
    }

    #[test]
    fn dangling_and_cycles_do_not_panic() {
        let (m, mut f) = saxpy_like();
        let ghost = ExprId::from_index(99);
        let u = f.add_expr(
            Expr::Unary {
                op: UnaryOp::Neg,
                arg: ghost,
            },
            Span::UNKNOWN,
        );
        assert_eq!(expr_type(&m, &f, u), None);
        assert_eq!(expr_type(&m, &f, ghost), None);
        // e1 = -e1
        let me = ExprId::from_index(f.exprs.len());
        f.add_expr(
            Expr::Unary {
                op: UnaryOp::Neg,
                arg: me,
            },
            Span::UNKNOWN,
        );
        assert_eq!(expr_type(&m, &f, me), None);
        let l = f.add_expr(Expr::Local(Handle::<Local>::from_index(5)), Span::UNKNOWN);
        assert_eq!(expr_type(&m, &f, l), None);
        assert_eq!(
            place_type(
                &m,
                &f,
                &Place::Lane {
                    local: Handle::from_index(3),
                    lane: 9
                }
            ),
            None
        );
        assert_eq!(base_elem(&m, &f, Base::Param(7)), None);
        let types = check_function(&m, &f);
        assert!(types.errors().count() >= 3);
    }

    #[test]
    fn deep_chain_is_iterative() {
        let (m, mut f) = saxpy_like();
        let mut e = f.add_expr(Expr::Param(1), Span::UNKNOWN);
        for _ in 0..200_000 {
            e = f.add_expr(
                Expr::Unary {
                    op: UnaryOp::Neg,
                    arg: e,
                },
                Span::UNKNOWN,
            );
        }
        assert_eq!(expr_type(&m, &f, e), Some(Type::F32));
    }
}
