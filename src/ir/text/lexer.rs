//! The lexer: source text to tokens, each with its 1-based `line:col` (columns count
//! characters) and byte range. It never fails: a character or literal it cannot read becomes
//! a diagnostic (`XPU-P001`, `XPU-P002`) and is skipped, and lexing goes on.

use super::codes;
use crate::ir::{Diagnostic, Scalar, Span};

/// Words that are never names.
pub const KEYWORDS: &[&str] = &[
    "kernel",
    "device",
    "fn",
    "tagset",
    "let",
    "shared",
    "if",
    "else",
    "loop",
    "while",
    "for",
    "in",
    "step",
    "break",
    "continue",
    "return",
    "requires",
    "instantiate",
    "as",
    "true",
    "false",
    "run",
    "expect",
];

/// A numeric literal as written: the sign is not part of it (the parser folds a `-` written
/// directly before it).
#[derive(Clone, Debug, PartialEq)]
pub enum Number {
    /// An integer: its magnitude (at most `u64::MAX`), whether it was written in hex.
    Int {
        /// The magnitude.
        value: u64,
        /// Whether it was written `0x...`.
        hex: bool,
        /// The type suffix written (`7u8`), if any.
        suffix: Option<Scalar>,
    },
    /// A float: its decimal text without `_` (`1.5e-3`, `inf`, `nan`), read later at its type.
    Float {
        /// The text.
        text: String,
        /// The type suffix written (`1.0f16`), if any.
        suffix: Option<Scalar>,
    },
}

impl Number {
    /// The type suffix written, if any.
    pub fn suffix(&self) -> Option<Scalar> {
        match self {
            Number::Int { suffix, .. } | Number::Float { suffix, .. } => *suffix,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
/// A token's kind and payload.
pub enum Tok {
    /// An identifier that is not a keyword.
    Ident(String),
    /// A keyword from [`KEYWORDS`].
    Kw(&'static str),
    /// A number.
    Num(Number),
    /// A string literal, escapes decoded.
    Str(String),
    /// `'name`.
    Label(String),
    /// Punctuation and operators, longest match: `<<=` before `<<` before `<`.
    Punct(&'static str),
    /// The end of the input.
    Eof,
}

impl Tok {
    /// How the token reads in a message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Kw(k) => format!("`{k}`"),
            Tok::Num(_) => "a number".into(),
            Tok::Str(_) => "a string".into(),
            Tok::Label(l) => format!("`'{l}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

/// A token with where it starts (`span`) and its byte range in the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What the token is.
    pub tok: Tok,
    /// Where it starts (line and column).
    pub span: Span,
    /// Its first byte in the source.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
}

const PUNCTS: &[&str] = &[
    "<<=", ">>=", "::", "..", "->", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "(", ")", "{", "}", "[", "]", "<", ">", "=", "+", "-", "*",
    "/", "%", "&", "|", "^", "!", ",", ";", ":", ".", "@",
];

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: u32,
    col: u32,
    tokens: Vec<Token>,
    diags: Vec<Diagnostic>,
}

/// Splits `src` into tokens (the last is always [`Tok::Eof`]) and the diagnostics of what
/// could not be read.
pub fn tokenize(src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let mut lx = Lexer {
        src,
        pos: 0,
        line: 1,
        col: 1,
        tokens: Vec::new(),
        diags: Vec::new(),
    };
    lx.run();
    (lx.tokens, lx.diags)
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl<'a> Lexer<'a> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.src[self.pos..].chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn span(&self) -> Span {
        Span::new(self.line, self.col)
    }

    fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn push(&mut self, tok: Tok, span: Span, start: usize) {
        self.tokens.push(Token {
            tok,
            span,
            start,
            end: self.pos,
        });
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            let span = self.span();
            let start = self.pos;
            if c.is_whitespace() {
                self.bump();
            } else if c == '/' && self.peek_at(1) == Some('/') {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.bump();
                }
            } else if is_ident_start(c) {
                self.word(span, start);
            } else if c.is_ascii_digit() {
                self.number(span, start);
            } else if c == '"' {
                self.string(span, start);
            } else if c == '\'' {
                self.bump();
                let name_start = self.pos;
                if self.peek().is_some_and(is_ident_start) {
                    while self.peek().is_some_and(is_ident_char) {
                        self.bump();
                    }
                    let name = self.src[name_start..self.pos].to_string();
                    self.push(Tok::Label(name), span, start);
                } else {
                    self.error(codes::LITERAL, span, "expected a label name after `'`");
                }
            } else if let Some(p) = PUNCTS
                .iter()
                .find(|p| self.src[self.pos..].starts_with(**p))
            {
                for _ in 0..p.len() {
                    self.bump();
                }
                self.push(Tok::Punct(p), span, start);
            } else {
                self.bump();
                self.error(codes::CHAR, span, format!("unexpected character {:?}", c));
            }
        }
        let span = self.span();
        let end = self.pos;
        self.push(Tok::Eof, span, end);
    }

    fn word(&mut self, span: Span, start: usize) {
        while self.peek().is_some_and(is_ident_char) {
            self.bump();
        }
        let word = &self.src[start..self.pos];
        if let Some(k) = KEYWORDS.iter().find(|k| **k == word) {
            self.push(Tok::Kw(k), span, start);
            return;
        }
        // `inf` and `nan` are float literals, optionally suffixed: `inf_f16`, `nanf64`.
        for special in ["inf", "nan"] {
            if let Some(rest) = word.strip_prefix(special) {
                let suffix = rest.trim_start_matches('_');
                if rest.is_empty() {
                    let num = Number::Float {
                        text: special.into(),
                        suffix: None,
                    };
                    self.push(Tok::Num(num), span, start);
                    return;
                }
                if let Some(s) = Scalar::from_name(suffix).filter(|s| s.is_float()) {
                    let num = Number::Float {
                        text: special.into(),
                        suffix: Some(s),
                    };
                    self.push(Tok::Num(num), span, start);
                    return;
                }
            }
        }
        self.push(Tok::Ident(word.to_string()), span, start);
    }

    fn number(&mut self, span: Span, start: usize) {
        if self.src[self.pos..].starts_with("0x") || self.src[self.pos..].starts_with("0X") {
            self.bump();
            self.bump();
            let digits_start = self.pos;
            while self
                .peek()
                .is_some_and(|c| c.is_ascii_hexdigit() || c == '_')
            {
                self.bump();
            }
            let digits: String = self.src[digits_start..self.pos]
                .chars()
                .filter(|c| *c != '_')
                .collect();
            let suffix = self.suffix(span);
            let value = if digits.is_empty() {
                self.error(codes::LITERAL, span, "expected hex digits after `0x`");
                0
            } else {
                match u64::from_str_radix(&digits, 16) {
                    Ok(v) => v,
                    Err(_) => {
                        self.error(codes::RANGE, span, "integer literal too large");
                        0
                    }
                }
            };
            let suffix = match suffix {
                Some(s) if s.is_float() => {
                    self.error(codes::LITERAL, span, "a hex literal is an integer");
                    None
                }
                s => s,
            };
            self.push(
                Tok::Num(Number::Int {
                    value,
                    hex: true,
                    suffix,
                }),
                span,
                start,
            );
            return;
        }
        let mut text = String::new();
        let mut is_float = false;
        self.digits(&mut text);
        // A `.` belongs to the number only when a digit follows: `0..n` and `v.x` stay apart.
        if self.peek() == Some('.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            is_float = true;
            self.bump();
            text.push('.');
            self.digits(&mut text);
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let sign = matches!(self.peek_at(1), Some('+' | '-'));
            let digit_at = if sign { 2 } else { 1 };
            if self.peek_at(digit_at).is_some_and(|c| c.is_ascii_digit()) {
                is_float = true;
                text.push('e');
                self.bump();
                if sign {
                    text.push(self.bump().unwrap_or('+'));
                }
                self.digits(&mut text);
            }
        }
        let suffix = self.suffix(span);
        let num = if is_float || suffix.is_some_and(|s| s.is_float()) {
            Number::Float { text, suffix }
        } else {
            let value = match text.parse::<u64>() {
                Ok(v) => v,
                Err(_) => {
                    self.error(codes::RANGE, span, "integer literal too large");
                    0
                }
            };
            Number::Int {
                value,
                hex: false,
                suffix,
            }
        };
        self.push(Tok::Num(num), span, start);
    }

    fn digits(&mut self, text: &mut String) {
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() {
                text.push(c);
            } else if c != '_' {
                break;
            }
            self.bump();
        }
    }

    /// A type suffix directly after a number (`u8`, `_f32`); anything else glued to the
    /// number is an error.
    fn suffix(&mut self, span: Span) -> Option<Scalar> {
        let start = self.pos;
        while self.peek().is_some_and(is_ident_char) {
            self.bump();
        }
        let word = self.src[start..self.pos].trim_start_matches('_');
        if self.src[start..self.pos].is_empty() || word.is_empty() {
            return None;
        }
        match Scalar::from_name(word) {
            Some(s) if s != Scalar::Bool => Some(s),
            _ => {
                self.error(
                    codes::LITERAL,
                    span,
                    format!("unknown literal suffix `{word}`"),
                );
                None
            }
        }
    }

    fn string(&mut self, span: Span, start: usize) {
        self.bump();
        let mut value = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => {
                    self.error(codes::LITERAL, span, "unterminated string");
                    break;
                }
                Some('"') => break,
                Some('\\') => {
                    let esc_span = self.span();
                    match self.bump() {
                        Some('n') => value.push('\n'),
                        Some('t') => value.push('\t'),
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('u') if self.peek() == Some('{') => {
                            self.bump();
                            let hex_start = self.pos;
                            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                                self.bump();
                            }
                            let hex = &self.src[hex_start..self.pos];
                            let ch = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32);
                            if self.peek() == Some('}') && ch.is_some() {
                                self.bump();
                                value.extend(ch);
                            } else {
                                self.error(codes::LITERAL, esc_span, "bad `\\u{...}` escape");
                            }
                        }
                        _ => self.error(codes::LITERAL, esc_span, "unknown escape in string"),
                    }
                }
                Some(c) => value.push(c),
            }
        }
        self.push(Tok::Str(value), span, start);
    }
}

/// `s` as a string literal: `"`, `\`, and control characters escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` reads as one identifier token (not a keyword, not a literal word).
pub fn is_plain_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_ident_start)
        && chars.all(is_ident_char)
        && !KEYWORDS.contains(&s)
        && {
            let (toks, diags) = tokenize(s);
            diags.is_empty() && toks.len() == 2 && matches!(toks[0].tok, Tok::Ident(_))
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        let (toks, diags) = tokenize(src);
        assert!(diags.is_empty(), "{diags:?}");
        toks.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_and_ranges() {
        assert_eq!(
            kinds("0..n"),
            vec![
                Tok::Num(Number::Int {
                    value: 0,
                    hex: false,
                    suffix: None
                }),
                Tok::Punct(".."),
                Tok::Ident("n".into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            kinds("0xff_u8 1_000u32 2.5e-3f16 1e9 inf_f16"),
            vec![
                Tok::Num(Number::Int {
                    value: 255,
                    hex: true,
                    suffix: Some(Scalar::U8)
                }),
                Tok::Num(Number::Int {
                    value: 1000,
                    hex: false,
                    suffix: Some(Scalar::U32)
                }),
                Tok::Num(Number::Float {
                    text: "2.5e-3".into(),
                    suffix: Some(Scalar::F16)
                }),
                Tok::Num(Number::Float {
                    text: "1e9".into(),
                    suffix: None
                }),
                Tok::Num(Number::Float {
                    text: "inf".into(),
                    suffix: Some(Scalar::F16)
                }),
                Tok::Eof
            ]
        );
        assert_eq!(kinds("1.x")[1], Tok::Punct("."));
    }

    #[test]
    fn positions_count_characters() {
        let (toks, _) = tokenize("// é\n  let é x");
        assert_eq!(toks[0].span, Span::new(2, 3));
        assert_eq!(toks[1].span, Span::new(2, 9));
    }

    #[test]
    fn bad_input_is_reported_not_fatal() {
        let (toks, diags) = tokenize("a $ 99999999999999999999 \"abc");
        assert_eq!(diags.len(), 3);
        assert_eq!(toks.last().unwrap().tok, Tok::Eof);
    }
}
