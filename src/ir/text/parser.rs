//! The parser: tokens to the syntax tree ([`super::ast`]), with recovery. A syntax error is
//! reported (`XPU-P003`) and the parser skips to the end of the statement, the block or the
//! item, so one run reports several errors. Recursion is bounded: nesting deeper than
//! [`MAX_DEPTH`] is `XPU-P009`, never a stack overflow. Every loop consumes a token or stops.

use super::ast::*;
use super::codes;
use super::lexer::{Number, Tok, Token};
use super::literal;
use crate::ir::text::run::{ArgInit, Expect, RunArg, RunSpec, Value};
use crate::ir::{BinaryOp, Diagnostic, MatrixRole, Scalar, Span, UnaryOp};

/// The deepest nesting of blocks, parentheses and operator trees the parser accepts.
pub const MAX_DEPTH: u32 = 128;

/// Stop after this many diagnostics: later ones are mostly consequences.
const MAX_DIAGS: usize = 100;

/// Names that call a built-in with generic arguments: `name<...>(...)`.
pub const GENERIC_CALLS: &[&str] = &[
    "vec2",
    "vec3",
    "vec4",
    "vec8",
    "vec16",
    "bitcast",
    "vload",
    "matrix_fill",
    "matrix_load",
];

type PResult<T> = Result<T, ()>;

pub struct Parser {
    toks: Vec<Token>,
    pos: usize,
    pub diags: Vec<Diagnostic>,
    depth: u32,
}

/// The binary operators by token: operator, precedence (loosest 1).
fn binop(tok: &Tok) -> Option<(BinaryOp, u8)> {
    let Tok::Punct(p) = tok else { return None };
    Some(match *p {
        "||" => (BinaryOp::LogicalOr, 1),
        "&&" => (BinaryOp::LogicalAnd, 2),
        "==" => (BinaryOp::Eq, 3),
        "!=" => (BinaryOp::Ne, 3),
        "<" => (BinaryOp::Lt, 3),
        "<=" => (BinaryOp::Le, 3),
        ">" => (BinaryOp::Gt, 3),
        ">=" => (BinaryOp::Ge, 3),
        "|" => (BinaryOp::BitOr, 4),
        "^" => (BinaryOp::BitXor, 5),
        "&" => (BinaryOp::BitAnd, 6),
        "<<" => (BinaryOp::Shl, 7),
        ">>" => (BinaryOp::Shr, 7),
        "+" => (BinaryOp::Add, 8),
        "-" => (BinaryOp::Sub, 8),
        "*" => (BinaryOp::Mul, 9),
        "/" => (BinaryOp::Div, 9),
        "%" => (BinaryOp::Rem, 9),
        _ => return None,
    })
}

/// The compound assignment operators: `+=` is `Add`, ...
pub fn compound_op(p: &str) -> Option<BinaryOp> {
    Some(match p {
        "+=" => BinaryOp::Add,
        "-=" => BinaryOp::Sub,
        "*=" => BinaryOp::Mul,
        "/=" => BinaryOp::Div,
        "%=" => BinaryOp::Rem,
        "&=" => BinaryOp::BitAnd,
        "|=" => BinaryOp::BitOr,
        "^=" => BinaryOp::BitXor,
        "<<=" => BinaryOp::Shl,
        ">>=" => BinaryOp::Shr,
        _ => return None,
    })
}

fn is_type_name(s: &str) -> bool {
    Scalar::from_name(s).is_some()
        || matches!(
            s,
            "vec2" | "vec3" | "vec4" | "vec8" | "vec16" | "buf" | "matrix" | "tag"
        )
}

impl Parser {
    pub fn new(toks: Vec<Token>) -> Self {
        Parser {
            toks,
            pos: 0,
            diags: Vec::new(),
            depth: 0,
        }
    }

    // ---- token helpers ----

    fn tok(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].tok
    }

    fn tok_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos.min(self.toks.len() - 1)].span
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos.min(self.toks.len() - 1)].clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn at_eof(&self) -> bool {
        matches!(self.tok(), Tok::Eof)
    }

    fn at(&self, p: &str) -> bool {
        matches!(self.tok(), Tok::Punct(q) if *q == p)
    }

    fn at_kw(&self, k: &str) -> bool {
        matches!(self.tok(), Tok::Kw(q) if *q == k)
    }

    fn at_ident(&self, s: &str) -> bool {
        matches!(self.tok(), Tok::Ident(q) if q == s)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.at(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, k: &str) -> bool {
        if self.at_kw(k) {
            self.bump();
            true
        } else {
            false
        }
    }

    pub fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) {
        if self.diags.len() < MAX_DIAGS
            && !self.diags.iter().any(|d| d.span == span && d.code == code)
        {
            self.diags.push(Diagnostic::new(code, span, msg));
        }
    }

    fn expected(&mut self, what: &str) {
        let found = self.tok().describe();
        let span = self.span();
        self.error(
            codes::SYNTAX,
            span,
            format!("expected {what}, found {found}"),
        );
    }

    fn expect(&mut self, p: &str) -> PResult<Span> {
        let span = self.span();
        if self.eat(p) {
            Ok(span)
        } else {
            self.expected(&format!("`{p}`"));
            Err(())
        }
    }

    fn expect_kw(&mut self, k: &str) -> PResult<Span> {
        let span = self.span();
        if self.eat_kw(k) {
            Ok(span)
        } else {
            self.expected(&format!("`{k}`"));
            Err(())
        }
    }

    fn ident(&mut self, what: &str) -> PResult<(String, Span)> {
        let span = self.span();
        if let Tok::Ident(s) = self.tok() {
            let s = s.clone();
            self.bump();
            Ok((s, span))
        } else {
            self.expected(what);
            Err(())
        }
    }

    /// A name being declared (`what`: "a parameter name"): like [`Parser::ident`], but a
    /// keyword in its place is named as one (`XPU-P011`, a reserved word used as a name)
    /// rather than reported as a bare syntax error.
    fn name(&mut self, what: &str) -> PResult<(String, Span)> {
        if let Tok::Kw(k) = self.tok() {
            let (k, span) = (*k, self.span());
            self.error(
                codes::RESERVED,
                span,
                format!("expected {what}, found the keyword `{k}`, which cannot be a name"),
            );
            return Err(());
        }
        self.ident(what)
    }

    /// Consumes a `>` closing a generic list, splitting `>>`, `>=` and `>>=`.
    fn close_angle(&mut self) -> PResult<()> {
        let rest = match self.tok() {
            Tok::Punct(">") => None,
            Tok::Punct(">>") => Some(">"),
            Tok::Punct(">=") => Some("="),
            Tok::Punct(">>=") => Some(">="),
            _ => {
                self.expected("`>`");
                return Err(());
            }
        };
        match rest {
            None => {
                self.bump();
            }
            Some(rest) => {
                let t = &mut self.toks[self.pos];
                t.tok = Tok::Punct(rest);
                t.span.col += 1;
                t.start += 1;
            }
        }
        Ok(())
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.span();
            self.error(
                codes::DEPTH,
                span,
                format!("nesting deeper than {MAX_DEPTH} levels"),
            );
            self.depth -= 1;
            return Err(());
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn check_depth(&mut self, e: Expr) -> PResult<Expr> {
        if e.depth > MAX_DEPTH {
            self.error(
                codes::DEPTH,
                e.span,
                format!("expression nested deeper than {MAX_DEPTH} levels"),
            );
            return Err(());
        }
        Ok(e)
    }

    fn u64_lit(&mut self, what: &str) -> PResult<(u64, Span)> {
        let span = self.span();
        match self.tok() {
            Tok::Num(Number::Int {
                value,
                suffix: None,
                ..
            }) => {
                let v = *value;
                self.bump();
                Ok((v, span))
            }
            _ => {
                self.expected(what);
                Err(())
            }
        }
    }

    fn u32_lit(&mut self, what: &str) -> PResult<(u32, Span)> {
        let (v, span) = self.u64_lit(what)?;
        match u32::try_from(v) {
            Ok(v) => Ok((v, span)),
            Err(_) => {
                self.error(codes::RANGE, span, format!("{v} does not fit u32"));
                Err(())
            }
        }
    }

    // ---- recovery ----

    /// Skips to just after the next `;`, or to the `}` that closes this block (left for the
    /// block to consume), skipping nested braces whole.
    fn recover_stmt(&mut self) {
        let mut depth = 0i32;
        while !self.at_eof() {
            match self.tok() {
                Tok::Punct("{") => depth += 1,
                Tok::Punct("}") => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    if depth == 0 {
                        self.bump();
                        return;
                    }
                }
                Tok::Punct(";") if depth == 0 => {
                    self.bump();
                    return;
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// Skips to the next token that can start an item, outside braces.
    fn recover_item(&mut self) {
        let start = self.pos;
        let mut depth = 0i32;
        while !self.at_eof() {
            let starts_item = matches!(
                self.tok(),
                Tok::Punct("@") | Tok::Kw("kernel" | "device" | "tagset" | "run")
            ) || matches!(self.tok(), Tok::Ident(s) if s == "family" || s == "struct");
            if depth <= 0 && starts_item && self.pos != start {
                return;
            }
            match self.tok() {
                Tok::Punct("{") => depth += 1,
                Tok::Punct("}") => depth -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    // ---- items ----

    pub fn items(&mut self) -> Vec<Item> {
        let mut items = Vec::new();
        while !self.at_eof() && self.diags.len() < MAX_DIAGS {
            let before = self.pos;
            match self.item() {
                Ok(item) => items.push(item),
                Err(()) => {
                    if self.pos == before {
                        self.bump();
                    }
                    self.recover_item();
                }
            }
        }
        items
    }

    fn item(&mut self) -> PResult<Item> {
        match self.tok() {
            Tok::Punct("@") | Tok::Kw("kernel") | Tok::Kw("device") => {
                self.function().map(Item::Function)
            }
            Tok::Kw("tagset") => self.tagset().map(Item::TagSet),
            Tok::Kw("run") => self.run_block().map(Item::Run),
            Tok::Ident(s) if s == "family" => self.family().map(Item::Family),
            Tok::Ident(s) if s == "struct" => self.struct_def().map(Item::Struct),
            _ => {
                self.expected("`kernel`, `device fn`, `struct`, `tagset`, `family` or `run`");
                Err(())
            }
        }
    }

    /// `family NAME = Template(key = expr, ...);` (`family` is a word only here).
    fn family(&mut self) -> PResult<Family> {
        let span = self.span();
        self.bump();
        let (name, _) = self.name("a family name")?;
        self.expect("=")?;
        let (template, _) = self.ident("a kernel template name")?;
        self.expect("(")?;
        let mut keys = Vec::new();
        while !self.at(")") {
            let (key, kspan) = self.ident("a family key")?;
            self.expect("=")?;
            keys.push((key, kspan, self.expr()?));
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        self.expect(";")?;
        Ok(Family {
            name,
            template,
            keys,
            span,
        })
    }

    /// `struct NAME { field: Type, ... }` (`struct` is a word only here).
    fn struct_def(&mut self) -> PResult<StructDef> {
        self.bump();
        let (name, name_span) = self.name("a struct name")?;
        self.expect("{")?;
        let mut fields = Vec::new();
        while !self.at("}") {
            let (field, fspan) = self.ident("a field name")?;
            self.expect(":")?;
            fields.push((field, fspan, self.ty()?));
            if !self.eat(",") {
                break;
            }
        }
        self.expect("}")?;
        Ok(StructDef {
            name,
            name_span,
            fields,
        })
    }

    fn tagset(&mut self) -> PResult<TagSet> {
        let span = self.expect_kw("tagset")?;
        let (name, name_span) = self.name("a tag set name")?;
        self.expect("=")?;
        self.expect("[")?;
        let mut members = Vec::new();
        while !self.at("]") {
            members.push(self.ident("a device helper name")?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect("]")?;
        self.expect(";")?;
        Ok(TagSet {
            name,
            name_span,
            members,
            span,
        })
    }

    fn attr(&mut self) -> PResult<Attr> {
        let span = self.expect("@")?;
        let (name, _) = self.ident("an attribute name")?;
        let mut args = Vec::new();
        if self.eat("(") {
            while !self.at(")") {
                let is_named = matches!(self.tok(), Tok::Ident(_))
                    && matches!(self.tok_at(1), Tok::Punct("="));
                if is_named {
                    let (key, kspan) = self.ident("a key")?;
                    self.expect("=")?;
                    let value = if let Tok::Str(s) = self.tok() {
                        let s = s.clone();
                        self.bump();
                        AttrValue::Str(s)
                    } else {
                        AttrValue::Expr(self.expr()?)
                    };
                    args.push(AttrArg::Named {
                        key,
                        span: kspan,
                        value,
                    });
                } else {
                    args.push(AttrArg::Pos(self.expr()?));
                }
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")")?;
        }
        Ok(Attr { name, span, args })
    }

    fn function(&mut self) -> PResult<Function> {
        let mut attrs = Vec::new();
        while self.at("@") {
            attrs.push(self.attr()?);
        }
        let span = self.span();
        let kernel = if self.eat_kw("kernel") {
            true
        } else if self.eat_kw("device") {
            self.expect_kw("fn")?;
            false
        } else {
            self.expected("`kernel` or `device fn`");
            return Err(());
        };
        let (mut name, name_span) = self.name("a function name")?;
        let mut template = None;
        if self.eat("<") {
            if matches!(self.tok(), Tok::Num(_)) {
                // A template instance written out: `kernel QkTile<64, 64>(...)`.
                let mut args = Vec::new();
                while !self.at(">") {
                    args.push(self.u32_lit("an integer")?.0.to_string());
                    if !self.eat(",") {
                        break;
                    }
                }
                self.close_angle()?;
                name = format!("{name}<{}>", args.join(","));
            } else {
                let mut params = Vec::new();
                while !self.at(">") {
                    params.push(self.name("a template parameter")?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.close_angle()?;
                template = Some(Template {
                    params,
                    requires: Vec::new(),
                    instantiate: Vec::new(),
                    max: None,
                });
            }
        }
        self.expect("(")?;
        let mut params = Vec::new();
        while !self.at(")") {
            let (pname, pspan) = self.name("a parameter name")?;
            self.expect(":")?;
            let ty = self.ty()?;
            params.push(Param {
                name: pname,
                span: pspan,
                ty,
            });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        let ret = if self.eat("->") {
            Some(self.ty()?)
        } else {
            None
        };
        loop {
            let clause_span = self.span();
            if self.eat_kw("requires") {
                self.template_clause(&template, clause_span, "requires")?;
                loop {
                    let e = self.expr()?;
                    template.iter_mut().for_each(|t| t.requires.push(e.clone()));
                    if !self.eat(",") {
                        break;
                    }
                }
            } else if self.eat_kw("instantiate") {
                self.template_clause(&template, clause_span, "instantiate")?;
                loop {
                    let entry_span = self.expect("<")?;
                    let mut args = Vec::new();
                    while !self.at(">") {
                        args.push(self.u64_lit("an integer")?.0);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.close_angle()?;
                    template
                        .iter_mut()
                        .for_each(|t| t.instantiate.push((args.clone(), entry_span)));
                    if !self.eat(",") {
                        break;
                    }
                }
            } else if self.at_ident("max") && matches!(self.tok_at(1), Tok::Num(_)) {
                self.bump();
                self.template_clause(&template, clause_span, "max")?;
                let m = self.u64_lit("an integer")?;
                template.iter_mut().for_each(|t| t.max = Some(m));
            } else {
                break;
            }
        }
        let errors_before = self.diags.len();
        let body = match self.block() {
            Ok(b) if self.diags.len() == errors_before => Some(b),
            Ok(_) => None,
            Err(()) => {
                // The block's own recovery failed (unbalanced braces): resync at an item.
                self.recover_item();
                None
            }
        };
        Ok(Function {
            attrs,
            kernel,
            name,
            name_span,
            template,
            params,
            ret,
            body,
            span,
        })
    }

    fn template_clause(
        &mut self,
        template: &Option<Template>,
        span: Span,
        what: &str,
    ) -> PResult<()> {
        if template.is_none() {
            self.error(
                codes::SYNTAX,
                span,
                format!("`{what}` belongs to a template: declare its parameters `name<A, B>`"),
            );
            return Err(());
        }
        Ok(())
    }

    // ---- statements ----

    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect("{")?;
        self.enter()?;
        let mut stmts = Vec::new();
        while !self.at("}") && !self.at_eof() && self.diags.len() < MAX_DIAGS {
            let before = self.pos;
            match self.stmt() {
                Ok(s) => stmts.push(s),
                Err(()) => {
                    if self.pos == before && self.at("}") {
                        break;
                    }
                    self.recover_stmt();
                }
            }
        }
        self.leave();
        self.expect("}")?;
        Ok(stmts)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let span = self.span();
        let kind = match self.tok().clone() {
            Tok::Kw("let") => {
                self.bump();
                let (name, name_span) = self.name("a name")?;
                let ty = if self.eat(":") {
                    Some(self.ty()?)
                } else {
                    None
                };
                let init = if self.eat("=") {
                    Some(self.expr()?)
                } else {
                    None
                };
                self.expect(";")?;
                StmtKind::Let {
                    name,
                    name_span,
                    ty,
                    init,
                }
            }
            Tok::Kw("shared") => {
                self.bump();
                let (name, name_span) = self.name("a name")?;
                self.expect(":")?;
                let ty = self.ty()?;
                self.expect(";")?;
                StmtKind::Shared {
                    name,
                    name_span,
                    ty,
                }
            }
            Tok::Kw("if") => return self.if_stmt(),
            Tok::Punct("{") => StmtKind::Block(self.block()?),
            Tok::Label(l) => {
                self.bump();
                self.expect(":")?;
                return self.loop_stmt(Some((l, span)), span);
            }
            Tok::Kw("loop" | "while" | "for") => return self.loop_stmt(None, span),
            Tok::Kw(k @ ("break" | "continue")) => {
                self.bump();
                let label = if let Tok::Label(l) = self.tok() {
                    let l = (l.clone(), self.span());
                    self.bump();
                    Some(l)
                } else {
                    None
                };
                self.expect(";")?;
                if k == "break" {
                    StmtKind::Break(label)
                } else {
                    StmtKind::Continue(label)
                }
            }
            Tok::Kw("return") => {
                self.bump();
                let value = if self.at(";") {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect(";")?;
                StmtKind::Return(value)
            }
            Tok::Ident(s)
                if (s == "print" || s == "assert") && matches!(self.tok_at(1), Tok::Punct("(")) =>
            {
                return self.debug_stmt(span);
            }
            Tok::Ident(s) if s == "fence" && matches!(self.tok_at(1), Tok::Punct("(")) => {
                self.bump();
                self.bump();
                let scope_span = self.span();
                let scope = match self.tok() {
                    Tok::Ident(s) => s.clone(),
                    Tok::Kw("device") => "device".to_string(),
                    _ => {
                        self.expected("`workgroup` or `device`");
                        return Err(());
                    }
                };
                self.bump();
                self.expect(")")?;
                self.expect(";")?;
                StmtKind::Fence(scope, scope_span)
            }
            _ => {
                let e = self.expr()?;
                let op = match self.tok() {
                    Tok::Punct("=") => Some(None),
                    Tok::Punct(p) => compound_op(p).map(Some),
                    _ => None,
                };
                if let Some(op) = op {
                    self.bump();
                    let value = self.expr()?;
                    self.expect(";")?;
                    StmtKind::Assign {
                        place: e,
                        op,
                        value,
                    }
                } else {
                    self.expect(";")?;
                    StmtKind::Expr(e)
                }
            }
        };
        Ok(Stmt { kind, span })
    }

    /// `print("format", values...);` or `assert(cond, "message");` (the keyword is at the
    /// cursor, a `(` after it).
    fn debug_stmt(&mut self, span: Span) -> PResult<Stmt> {
        let is_print = matches!(self.tok(), Tok::Ident(s) if s == "print");
        self.bump();
        self.bump();
        let kind = if is_print {
            let format_span = self.span();
            let Tok::Str(format) = self.tok().clone() else {
                self.expected("a format string");
                return Err(());
            };
            self.bump();
            let mut args = Vec::new();
            while !self.at(")") {
                self.expect(",")?;
                args.push(self.expr()?);
            }
            self.expect(")")?;
            StmtKind::Print {
                format,
                format_span,
                args,
            }
        } else {
            let cond = self.expr()?;
            self.expect(",")?;
            let Tok::Str(message) = self.tok().clone() else {
                self.expected("a message string");
                return Err(());
            };
            self.bump();
            self.expect(")")?;
            StmtKind::Assert { cond, message }
        };
        self.expect(";")?;
        Ok(Stmt { kind, span })
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        let span = self.expect_kw("if")?;
        let cond = self.expr()?;
        let then_block = self.block()?;
        let else_block = if self.eat_kw("else") {
            if self.at_kw("if") {
                self.enter()?;
                let nested = self.if_stmt();
                self.leave();
                vec![nested?]
            } else {
                self.block()?
            }
        } else {
            Vec::new()
        };
        Ok(Stmt {
            kind: StmtKind::If {
                cond,
                then_block,
                else_block,
            },
            span,
        })
    }

    /// `if c { a } else { b }` in an expression; `else if` chains.
    fn if_expr(&mut self) -> PResult<Expr> {
        let span = self.expect_kw("if")?;
        self.enter()?;
        let r = self.if_expr_rest(span);
        self.leave();
        r
    }

    fn if_expr_rest(&mut self, span: Span) -> PResult<Expr> {
        let cond = self.expr()?;
        self.expect("{")?;
        let accept = self.expr()?;
        self.expect("}")?;
        if !self.eat_kw("else") {
            self.expected("`else`: an `if` expression has two arms");
            return Err(());
        }
        let reject = if self.at_kw("if") {
            self.if_expr()?
        } else {
            self.expect("{")?;
            let r = self.expr()?;
            self.expect("}")?;
            r
        };
        let e = Expr::new(
            ExprKind::IfElse(Box::new(cond), Box::new(accept), Box::new(reject)),
            span,
        );
        self.check_depth(e)
    }

    fn loop_stmt(&mut self, label: Option<(String, Span)>, span: Span) -> PResult<Stmt> {
        let kind = if self.eat_kw("loop") {
            LoopKind::Infinite
        } else if self.eat_kw("while") {
            LoopKind::While(self.expr()?)
        } else if self.eat_kw("for") {
            let (var, var_span) = self.name("a loop variable")?;
            let ty = if self.eat(":") {
                Some(self.ty()?)
            } else {
                None
            };
            if self.eat("=") {
                let init = self.expr()?;
                self.expect(";")?;
                let cond = self.expr()?;
                self.expect(";")?;
                let update_place = self.expr()?;
                let update_op = match self.tok() {
                    Tok::Punct("=") => None,
                    Tok::Punct(p) if compound_op(p).is_some() => compound_op(p),
                    _ => {
                        self.expected("an assignment to the loop variable (`i = ...`, `i >>= 1`)");
                        return Err(());
                    }
                };
                self.bump();
                let update_value = self.expr()?;
                let body = self.block()?;
                return Ok(Stmt {
                    kind: StmtKind::Loop {
                        label,
                        kind: LoopKind::Cond {
                            var,
                            var_span,
                            ty,
                            init,
                            cond,
                            update_place,
                            update_op,
                            update_value,
                        },
                        body,
                    },
                    span,
                });
            }
            self.expect_kw("in")?;
            let start = self.expr()?;
            self.expect("..")?;
            let end = self.expr()?;
            let step = if self.eat_kw("step") {
                Some(self.expr()?)
            } else {
                None
            };
            LoopKind::For {
                var,
                var_span,
                ty,
                start,
                end,
                step,
            }
        } else {
            self.expected("`loop`, `while` or `for` after a label");
            return Err(());
        };
        let body = self.block()?;
        Ok(Stmt {
            kind: StmtKind::Loop { label, kind, body },
            span,
        })
    }

    // ---- types ----

    fn ty(&mut self) -> PResult<Type> {
        let span = self.span();
        self.enter()?;
        let r = self.ty_inner(span);
        self.leave();
        r
    }

    fn ty_inner(&mut self, span: Span) -> PResult<Type> {
        // `shared [E; N]` / `shared [E]`: a shared array by reference (helper parameters).
        if self.eat_kw("shared") {
            let inner = self.ty()?;
            return Ok(Type {
                kind: TypeKind::Shared(Box::new(inner)),
                span,
            });
        }
        if self.eat("[") {
            let elem = Box::new(self.ty()?);
            let len = if self.eat(";") {
                Some(Box::new(self.expr()?))
            } else {
                None
            };
            self.expect("]")?;
            return Ok(Type {
                kind: TypeKind::Array { elem, len },
                span,
            });
        }
        let (name, _) = self.ident("a type")?;
        if let Some(s) = Scalar::from_name(&name) {
            return Ok(Type {
                kind: TypeKind::Scalar(s),
                span,
            });
        }
        let kind = match name.as_str() {
            "vec2" | "vec3" | "vec4" | "vec8" | "vec16" => {
                let lanes: u8 = name[3..].parse().unwrap_or(4);
                self.expect("<")?;
                let s = self.scalar()?;
                self.close_angle()?;
                TypeKind::Vector(s, lanes)
            }
            "swizzled" | "block_padded" => {
                self.expect("<")?;
                let array = Box::new(self.ty()?);
                if !matches!(array.kind, TypeKind::Array { .. }) {
                    self.error(
                        codes::LAYOUT,
                        array.span,
                        format!("`{name}` lays out an array type: `{name}<[E; N], ...>`"),
                    );
                    return Err(());
                }
                let want = if name == "swizzled" { 1 } else { 2 };
                let mut args = Vec::new();
                while self.eat(",") {
                    let at = self.span();
                    if !matches!(self.tok(), Tok::Num(Number::Int { suffix: None, .. })) {
                        self.error(
                            codes::LAYOUT,
                            at,
                            format!("`{name}`'s arguments are unsuffixed integer literals"),
                        );
                        return Err(());
                    }
                    args.push(self.u32_lit("a layout argument")?.0);
                }
                if args.len() != want {
                    self.error(
                        codes::LAYOUT,
                        span,
                        format!(
                            "`{name}` takes an array type and {want} integer{}, found {}",
                            if want == 1 { "" } else { "s" },
                            args.len()
                        ),
                    );
                    return Err(());
                }
                self.close_angle()?;
                let layout = if want == 1 {
                    crate::ir::layout::Layout::Swizzled { s: args[0] }
                } else {
                    crate::ir::layout::Layout::BlockPadded {
                        block: args[0],
                        pad: args[1],
                    }
                };
                TypeKind::Layout { array, layout }
            }
            "buf" => {
                self.expect("<")?;
                let elem = Box::new(self.ty()?);
                let access = if self.eat(",") {
                    let (a, aspan) = self.ident("`rw` or `const`")?;
                    match a.as_str() {
                        "rw" => crate::ir::Access::ReadWrite,
                        "const" => crate::ir::Access::Constant,
                        _ => {
                            self.error(
                                codes::SYNTAX,
                                aspan,
                                format!("expected `rw` or `const`, found `{a}`"),
                            );
                            return Err(());
                        }
                    }
                } else {
                    crate::ir::Access::Read
                };
                self.close_angle()?;
                TypeKind::Buffer { elem, access }
            }
            "matrix" => {
                self.expect("<")?;
                let role = self.role()?;
                self.expect(",")?;
                let scalar = self.scalar()?;
                self.expect(",")?;
                let rows = self.dim()?;
                self.expect(",")?;
                let cols = self.dim()?;
                self.close_angle()?;
                TypeKind::Matrix {
                    role,
                    scalar,
                    rows,
                    cols,
                }
            }
            "tag" => {
                self.expect("<")?;
                let (set, _) = self.ident("a tag set name")?;
                self.close_angle()?;
                TypeKind::Tag(set)
            }
            // Any other name is a struct's; `super::structs` resolves it (`XPU-P006` when
            // no struct has it).
            _ => TypeKind::Named(name),
        };
        Ok(Type { kind, span })
    }

    fn scalar(&mut self) -> PResult<Scalar> {
        let (name, span) = self.ident("a scalar type")?;
        match Scalar::from_name(&name) {
            Some(s) => Ok(s),
            None => {
                self.error(
                    codes::UNKNOWN_TYPE,
                    span,
                    format!("expected a scalar type, found `{name}`"),
                );
                Err(())
            }
        }
    }

    fn role(&mut self) -> PResult<MatrixRole> {
        let (name, span) = self.ident("a matrix role")?;
        role_from_name(&name).ok_or_else(|| {
            self.error(
                codes::SYNTAX,
                span,
                format!("expected a matrix role `a`, `b` or `acc`, found `{name}`"),
            )
        })
    }

    fn dim(&mut self) -> PResult<u8> {
        let (v, span) = self.u64_lit("a matrix dimension")?;
        u8::try_from(v).map_err(|_| {
            self.error(
                codes::RANGE,
                span,
                format!("matrix dimension {v} too large"),
            )
        })
    }

    // ---- expressions ----

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.binary(1);
        self.leave();
        r
    }

    fn binary(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.cast_expr()?;
        while let Some((op, prec)) = binop(self.tok()) {
            if prec < min {
                break;
            }
            let op_span = self.span();
            self.bump();
            let rhs = self.binary(prec + 1)?;
            let span = lhs.span;
            lhs = self.check_depth(Expr::new(
                ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            ))?;
            if op.is_comparison() && binop(self.tok()).is_some_and(|(_, p)| p == 3) {
                let _ = op_span;
                let span = self.span();
                self.error(
                    codes::SYNTAX,
                    span,
                    "comparisons do not chain: add parentheses",
                );
                return Err(());
            }
        }
        Ok(lhs)
    }

    fn cast_expr(&mut self) -> PResult<Expr> {
        let mut e = self.unary()?;
        while self.eat_kw("as") {
            let ty = self.ty()?;
            let span = e.span;
            e = self.check_depth(Expr::new(ExprKind::Cast(Box::new(e), ty), span))?;
        }
        Ok(e)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let span = self.span();
        let op = match self.tok() {
            Tok::Punct("-") => UnaryOp::Neg,
            Tok::Punct("!") => UnaryOp::Not,
            _ => return self.postfix(),
        };
        // A `-` written directly before a number is part of the literal.
        if op == UnaryOp::Neg {
            let next = &self.toks[(self.pos + 1).min(self.toks.len() - 1)];
            if let Tok::Num(num) = &next.tok {
                if next.start == self.toks[self.pos].end {
                    let num = num.clone();
                    self.bump();
                    self.bump();
                    let prim = Expr::new(ExprKind::Num { num, neg: true }, span);
                    return self.postfix_ops(prim);
                }
            }
        }
        self.bump();
        self.enter()?;
        let arg = self.unary();
        self.leave();
        let arg = arg?;
        self.check_depth(Expr::new(ExprKind::Unary(op, Box::new(arg)), span))
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let prim = self.primary()?;
        self.postfix_ops(prim)
    }

    fn postfix_ops(&mut self, mut e: Expr) -> PResult<Expr> {
        loop {
            let span = e.span;
            if self.at(".") {
                self.bump();
                let (field, fspan) = self.ident("a lane name")?;
                e = Expr::new(ExprKind::Field(Box::new(e), field, fspan), span);
            } else if self.at("[") {
                self.bump();
                let index = self.expr()?;
                self.expect("]")?;
                e = Expr::new(ExprKind::Index(Box::new(e), Box::new(index)), span);
            } else {
                return Ok(e);
            }
            e = self.check_depth(e)?;
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let span = self.span();
        match self.tok().clone() {
            Tok::Num(num) => {
                self.bump();
                Ok(Expr::new(ExprKind::Num { num, neg: false }, span))
            }
            Tok::Kw("true") => {
                self.bump();
                Ok(Expr::new(ExprKind::Bool(true), span))
            }
            Tok::Kw("false") => {
                self.bump();
                Ok(Expr::new(ExprKind::Bool(false), span))
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Kw("if") => self.if_expr(),
            Tok::Ident(name) => {
                self.bump();
                if self.eat("::") {
                    let (member, _) = self.ident("a tag set member")?;
                    return Ok(Expr::new(ExprKind::TagPath { set: name, member }, span));
                }
                let generics = if GENERIC_CALLS.contains(&name.as_str()) && self.at("<") {
                    self.bump();
                    let mut gs = Vec::new();
                    while !self.at(">") {
                        gs.push(self.generic()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.close_angle()?;
                    if !self.at("(") {
                        self.expected("`(`");
                        return Err(());
                    }
                    Some(gs)
                } else {
                    None
                };
                if self.eat("(") {
                    let mut args = Vec::new();
                    while !self.at(")") {
                        let named = matches!(self.tok(), Tok::Ident(_))
                            && matches!(self.tok_at(1), Tok::Punct("="));
                        if named {
                            let (key, kspan) = self.ident("a name")?;
                            self.bump();
                            args.push(Arg::Named(key, kspan, self.expr()?));
                        } else {
                            args.push(Arg::Pos(self.expr()?));
                        }
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect(")")?;
                    let e = Expr::new(
                        ExprKind::Call {
                            name,
                            generics,
                            args,
                        },
                        span,
                    );
                    return self.check_depth(e);
                }
                // `Name { field: ...`: a struct literal. The `{ ident :` lookahead keeps
                // `if c { x = 1; }` and `while c { ... }` statements apart.
                if self.at("{")
                    && matches!(self.tok_at(1), Tok::Ident(_))
                    && matches!(self.tok_at(2), Tok::Punct(":"))
                {
                    self.bump();
                    let mut fields = Vec::new();
                    while !self.at("}") {
                        let (field, fspan) = self.ident("a field name")?;
                        self.expect(":")?;
                        fields.push((field, fspan, self.expr()?));
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect("}")?;
                    let e = Expr::new(ExprKind::StructLit { name, fields }, span);
                    return self.check_depth(e);
                }
                Ok(Expr::new(ExprKind::Name(name), span))
            }
            _ => {
                self.expected("an expression");
                Err(())
            }
        }
    }

    fn generic(&mut self) -> PResult<Generic> {
        let span = self.span();
        match self.tok() {
            Tok::Num(_) => Ok(Generic::Int(self.u64_lit("an integer")?.0, span)),
            Tok::Ident(s) if !is_type_name(s) => {
                let s = s.clone();
                self.bump();
                Ok(Generic::Name(s, span))
            }
            _ => Ok(Generic::Type(self.ty()?)),
        }
    }

    // ---- run blocks ----

    fn run_block(&mut self) -> PResult<RunSpec> {
        let span = self.expect_kw("run")?;
        let (mut kernel, _) = self.ident("a kernel name")?;
        if self.eat("<") {
            let mut args = Vec::new();
            while !self.at(">") {
                args.push(self.u32_lit("an integer")?.0.to_string());
                if !self.eat(",") {
                    break;
                }
            }
            self.close_angle()?;
            kernel = format!("{kernel}<{}>", args.join(","));
        }
        self.expect("{")?;
        let mut spec = RunSpec {
            kernel,
            grid: [1; 3],
            block: [1; 3],
            shared_bytes: 0,
            wave: None,
            ulps: 0,
            deadline: None,
            allow_races: false,
            shuffle_seed: None,
            max_steps: None,
            args: Vec::new(),
            expects: Vec::new(),
            span,
        };
        let mut seen: Vec<&'static str> = Vec::new();
        let mut ok = true;
        while !self.at("}") && !self.at_eof() {
            let before = self.pos;
            if self.run_entry(&mut spec, &mut seen).is_err() {
                ok = false;
                if self.pos == before && self.at("}") {
                    break;
                }
                self.recover_stmt();
            }
        }
        self.expect("}")?;
        for key in ["grid", "block"] {
            if ok && !seen.contains(&key) {
                self.error(codes::RUN, span, format!("run block without `{key}`"));
            }
        }
        Ok(spec)
    }

    fn run_entry(&mut self, spec: &mut RunSpec, seen: &mut Vec<&'static str>) -> PResult<()> {
        let span = self.span();
        let key: &'static str = match self.tok() {
            Tok::Kw("shared") => "shared",
            Tok::Kw("expect") => "expect",
            Tok::Ident(s) => match s.as_str() {
                "grid" => "grid",
                "block" => "block",
                "wave" => "wave",
                "ulps" => "ulps",
                "deadline" => "deadline",
                "allow_races" => "allow_races",
                "shuffle" => "shuffle",
                "max_steps" => "max_steps",
                "arg" => "arg",
                _ => "",
            },
            _ => "",
        };
        if key.is_empty() {
            self.expected(
                "`grid`, `block`, `shared`, `wave`, `ulps`, `deadline`, `allow_races`, `shuffle`, `max_steps`, `arg` or `expect`",
            );
            return Err(());
        }
        self.bump();
        match key {
            "arg" => {
                let (name, name_span) = self.name("a parameter name")?;
                self.expect("=")?;
                let init = self.arg_init()?;
                self.expect(";")?;
                // One value per parameter: a second `arg` for it would otherwise be ignored.
                if spec.args.iter().any(|a| a.name == name) {
                    self.error(codes::RUN, name_span, format!("`arg {name}` given twice"));
                    return Ok(());
                }
                spec.args.push(RunArg { name, init, span });
                return Ok(());
            }
            "expect" => {
                let word = match self.tok() {
                    Tok::Ident(s) if !matches!(self.tok_at(1), Tok::Punct("=")) => s.clone(),
                    _ => String::new(),
                };
                let e = if word == "ub" || word == "refused" {
                    self.bump();
                    let code = self.code_word()?;
                    if word == "ub" {
                        Expect::Ub { kind: code, span }
                    } else {
                        // `on NAME, NAME`: the refusal of those backends only.
                        let mut backends = Vec::new();
                        if self.at_ident("on") {
                            self.bump();
                            loop {
                                let (name, _) = self.ident("a backend name")?;
                                backends.push(name);
                                if !self.eat(",") {
                                    break;
                                }
                            }
                        }
                        Expect::Refused {
                            code,
                            backends,
                            span,
                        }
                    }
                } else {
                    let (name, _) = self.ident("a buffer parameter, `ub` or `refused`")?;
                    self.expect("=")?;
                    if self.at_ident("interp") {
                        self.bump();
                        Expect::Interp { name, span }
                    } else {
                        let vspan = self.span();
                        let value = self.arg_init()?;
                        if matches!(value, ArgInit::Uninit { .. }) {
                            self.error(codes::RUN, vspan, "`uninit` is not an expectation");
                            return Err(());
                        }
                        Expect::Buffer { name, value, span }
                    }
                };
                self.expect(";")?;
                spec.expects.push(e);
                return Ok(());
            }
            _ => {}
        }
        if seen.contains(&key) {
            self.error(codes::RUN, span, format!("`{key}` given twice"));
            return Err(());
        }
        seen.push(key);
        if key == "allow_races" {
            spec.allow_races = true;
            self.expect(";")?;
            return Ok(());
        }
        self.expect("=")?;
        match key {
            "grid" | "block" => {
                self.expect("[")?;
                let mut dims = [1u32; 3];
                let mut n = 0;
                while !self.at("]") {
                    let (v, vspan) = self.u32_lit("a dimension")?;
                    if n == 3 {
                        self.error(codes::RUN, vspan, "at most three dimensions");
                        return Err(());
                    }
                    dims[n] = v;
                    n += 1;
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                if n == 0 {
                    self.error(codes::RUN, span, format!("`{key}` needs a dimension"));
                    return Err(());
                }
                if key == "grid" {
                    spec.grid = dims;
                } else {
                    spec.block = dims;
                }
            }
            "shared" => spec.shared_bytes = self.u32_lit("a byte count")?.0,
            "wave" => spec.wave = Some(self.u32_lit("a wave width")?.0),
            "shuffle" | "max_steps" => {
                let vspan = self.span();
                let v = match self.value()? {
                    Value::Int(i) => u64::try_from(i).ok(),
                    _ => None,
                };
                let Some(v) = v else {
                    self.error(
                        codes::RUN,
                        vspan,
                        format!("`{key}` takes an integer from 0 to 2^64 - 1"),
                    );
                    return Err(());
                };
                if key == "shuffle" {
                    spec.shuffle_seed = Some(v);
                } else {
                    spec.max_steps = Some(v);
                }
            }
            "deadline" => {
                let vspan = self.span();
                let secs = match self.value()? {
                    Value::Int(i) => i as f64,
                    Value::Float(x) => x,
                    Value::Bool(_) => f64::NAN,
                };
                match crate::deadline::parse_seconds(secs) {
                    Some(d) => spec.deadline = Some(d),
                    None => {
                        self.error(
                            codes::RUN,
                            vspan,
                            "a deadline is a number of seconds, more than 0 and at most a year",
                        );
                        return Err(());
                    }
                }
            }
            _ => spec.ulps = self.u32_lit("a count of ulps")?.0,
        }
        self.expect(";")?;
        Ok(())
    }

    /// A code or kind: `out_of_bounds`, `XPU-REF01` (words joined by `-` with no spaces), or
    /// a string.
    fn code_word(&mut self) -> PResult<String> {
        if let Tok::Str(s) = self.tok() {
            let s = s.clone();
            self.bump();
            return Ok(s);
        }
        let (mut word, _) = self.ident("a code")?;
        loop {
            let glued = |p: &Parser, i: usize| p.toks[p.pos + i].start == p.toks[p.pos + i - 1].end;
            if self.at("-") && glued(self, 0) && glued(self, 1) {
                let next = match self.tok_at(1) {
                    Tok::Ident(s) => s.clone(),
                    Tok::Num(Number::Int {
                        value, hex: false, ..
                    }) if self.toks[self.pos + 1].end - self.toks[self.pos + 1].start
                        == value.to_string().len() =>
                    {
                        value.to_string()
                    }
                    _ => break,
                };
                self.bump();
                self.bump();
                word.push('-');
                word.push_str(&next);
            } else {
                break;
            }
        }
        Ok(word)
    }

    fn arg_init(&mut self) -> PResult<ArgInit> {
        if self.eat("[") {
            let mut values = Vec::new();
            while !self.at("]") {
                values.push(self.value()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("]")?;
            return Ok(ArgInit::List(values));
        }
        let form = match self.tok() {
            Tok::Ident(s) if matches!(self.tok_at(1), Tok::Punct("(")) => s.clone(),
            _ => return Ok(ArgInit::Scalar(self.value()?)),
        };
        let span = self.span();
        self.bump();
        self.bump();
        let init = match form.as_str() {
            "fill" => {
                let len = self.u32_lit("a length")?.0;
                self.expect(",")?;
                let value = self.value()?;
                ArgInit::Fill { len, value }
            }
            "iota" => {
                let len = self.u32_lit("a length")?.0;
                let (start, step) = if self.eat(",") {
                    let start = self.value()?;
                    self.expect(",")?;
                    (start, self.value()?)
                } else {
                    (Value::Int(0), Value::Int(1))
                };
                ArgInit::Iota { len, start, step }
            }
            "random" => {
                let len = self.u32_lit("a length")?.0;
                self.expect(",")?;
                let lo = self.value()?;
                self.expect(",")?;
                let hi = self.value()?;
                self.expect(",")?;
                let (s, sspan) = self.ident("`seed`")?;
                if s != "seed" {
                    self.error(
                        codes::SYNTAX,
                        sspan,
                        format!("expected `seed`, found `{s}`"),
                    );
                    return Err(());
                }
                let seed = self.u64_lit("a seed")?.0;
                ArgInit::Random { len, lo, hi, seed }
            }
            "uninit" => ArgInit::Uninit {
                len: self.u32_lit("a length")?.0,
            },
            _ => {
                self.error(
                    codes::RUN,
                    span,
                    format!("unknown initialiser `{form}`: use fill, iota, random or uninit"),
                );
                return Err(());
            }
        };
        self.expect(")")?;
        Ok(init)
    }

    fn value(&mut self) -> PResult<Value> {
        let span = self.span();
        match self.tok() {
            Tok::Kw("true") => {
                self.bump();
                return Ok(Value::Bool(true));
            }
            Tok::Kw("false") => {
                self.bump();
                return Ok(Value::Bool(false));
            }
            _ => {}
        }
        let neg = self.eat("-");
        let Tok::Num(num) = self.tok().clone() else {
            self.expected("a number");
            return Err(());
        };
        let nspan = self.span();
        self.bump();
        if num.suffix().is_some() {
            self.error(
                codes::RUN,
                nspan,
                "run block values take their type from the parameter: drop the suffix",
            );
            return Err(());
        }
        let _ = span;
        Ok(match num {
            Number::Int { value, .. } => {
                let v = value as i128;
                Value::Int(if neg { -v } else { v })
            }
            Number::Float { text, .. } => {
                let Some(v) = literal::parse_float(&text, Scalar::F64) else {
                    self.error(codes::LITERAL, nspan, "malformed float");
                    return Err(());
                };
                Value::Float(if neg { -v } else { v })
            }
        })
    }
}

/// `a`, `b`, `acc`.
pub fn role_from_name(name: &str) -> Option<MatrixRole> {
    match name {
        "a" => Some(MatrixRole::A),
        "b" => Some(MatrixRole::B),
        "acc" => Some(MatrixRole::Acc),
        _ => None,
    }
}
