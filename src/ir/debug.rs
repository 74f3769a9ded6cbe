//! `print` and `assert` inside a kernel (issue 23 item 9): the format strings' grammar, and
//! the pass that drops both statements from a module before lowering when
//! `ProgramOptions::print` is off (so they cost nothing then).
//!
//! A format is text with `{}` placeholders, one per value; `{{` and `}}` stand for literal
//! braces; any other `{` or `}` is an error (`XPU-P032` in the text format, `XPU-V110` in a
//! module built in Rust).
//!
//! # The buffer
//!
//! [`BUFFER_WORDS`] `u32`s, zero before a launch. Word 0 counts the words claimed in the
//! print region, word 1 those claimed in the assert region. A `print` claims
//! `3 + 2 * values` words of the print region by an atomic add on word 0 and, where they fit,
//! writes its record there: the site, the workgroup's linear id, the work-item's linear
//! local id, then each value as 64 bits (low word first; integers sign- or zero-extended by
//! their type, floats as their bits, `bool` as 0 or 1). A failed `assert` writes a 3-word
//! record (site, workgroup, work-item) into the assert region the same way. A record that
//! does not fit is dropped: the print region holds [`PRINT_REGION_WORDS`] words, the assert
//! region [`ASSERT_REGION_WORDS`].
//!
//! One work-item's records are claimed in its program order; [`decode`] orders all records by
//! (workgroup, work-item) with a stable sort, so the lines come out in the order
//! docs/semantics.md defines whatever order the device ran the work-items in.

use super::{Block, Module, Scalar, StmtKind};
use std::fmt;

/// The most values one `print` takes (`XPU-V111` beyond).
pub const MAX_PRINT_VALUES: usize = 8;

/// One piece of a format: literal text, or the place of the next value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (braces unescaped).
    Text(String),
    /// A `{}`: the next value.
    Value,
}

/// The pieces of `format`, or what is wrong with it.
pub fn pieces(format: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '{' if chars.peek() == Some(&'}') => {
                chars.next();
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Value);
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' | '}' => {
                return Err(format!(
                    "a lone `{c}` in the format: `{{}}` is a value, `{{{{` and `}}}}` are braces"
                ))
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// How many values `format` takes, or what is wrong with it.
pub fn placeholders(format: &str) -> Result<usize, String> {
    Ok(pieces(format)?
        .iter()
        .filter(|p| matches!(p, Piece::Value))
        .count())
}

/// Whether any function of `module` holds a `print` or an `assert`.
pub fn has_debug(module: &Module) -> bool {
    fn block(b: &Block) -> bool {
        b.iter().any(|s| {
            matches!(s.kind, StmtKind::Print { .. } | StmtKind::Assert { .. })
                || s.kind.blocks().into_iter().any(block)
        })
    }
    module.functions.iter().any(|(_, f)| block(&f.body))
}

/// Drops every `print` and `assert` statement of `module` (their operands stay in the
/// expression arenas, unreached).
pub fn strip(module: &mut Module) {
    fn block(b: &mut Block) {
        b.retain(|s| !matches!(s.kind, StmtKind::Print { .. } | StmtKind::Assert { .. }));
        for s in b.iter_mut() {
            match &mut s.kind {
                StmtKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    block(then_block);
                    block(else_block);
                }
                StmtKind::Loop { body, .. } => block(body),
                _ => {}
            }
        }
    }
    for h in module.functions.handles().collect::<Vec<_>>() {
        block(&mut module.functions[h].body);
    }
}

/// Words of the print region.
pub const PRINT_REGION_WORDS: u32 = (1 << 18) - 2 - ASSERT_REGION_WORDS;
/// Words of the assert region (4096 failed asserts).
pub const ASSERT_REGION_WORDS: u32 = 3 * 4096;
/// Header words: the two cursors.
pub const HEADER_WORDS: u32 = 2;
/// `u32` words of the whole buffer (1 MiB).
pub const BUFFER_WORDS: u32 = HEADER_WORDS + PRINT_REGION_WORDS + ASSERT_REGION_WORDS;
/// The first word of the assert region.
pub const ASSERT_BASE: u32 = HEADER_WORDS + PRINT_REGION_WORDS;

/// What one `print` or `assert` statement of a lowered kernel is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SiteKind {
    /// `print(format, values)`: the values' scalar types.
    Print {
        /// The format as written.
        format: String,
        /// The values' scalar types, in order.
        args: Vec<Scalar>,
    },
    /// `assert(cond, message)`.
    Assert {
        /// The assert's message.
        message: String,
    },
}

/// One `print` or `assert` a lowering emitted; its index in the lowering's table is the
/// record's site word. A helper inlined twice has two sites.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DebugSite {
    /// The statement's source line.
    pub line: u32,
    /// A `print` (its format and types) or an `assert` (its message).
    pub kind: SiteKind,
}

impl DebugSite {
    /// The site as one line of text, which [`DebugSite::from_line`] reads back (cached device
    /// code carries its sites so): `<line> assert <message>` or
    /// `<line> print <types> <format>`, `types` the values' scalar names joined by `,` (`-`
    /// for none), the text with its backslashes, line feeds and carriage returns escaped.
    pub fn to_line(&self) -> String {
        fn esc(t: &str) -> String {
            t.replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('\r', "\\r")
        }
        match &self.kind {
            SiteKind::Assert { message } => format!("{} assert {}", self.line, esc(message)),
            SiteKind::Print { format, args } => {
                let types = if args.is_empty() {
                    "-".to_string()
                } else {
                    args.iter().map(|s| s.name()).collect::<Vec<_>>().join(",")
                };
                format!("{} print {types} {}", self.line, esc(format))
            }
        }
    }

    /// A site back from [`DebugSite::to_line`]'s text; `None` for text it did not write.
    pub fn from_line(text: &str) -> Option<DebugSite> {
        fn unesc(t: &str) -> Option<String> {
            let mut out = String::new();
            let mut it = t.chars();
            while let Some(c) = it.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                out.push(match it.next()? {
                    '\\' => '\\',
                    'n' => '\n',
                    'r' => '\r',
                    _ => return None,
                });
            }
            Some(out)
        }
        let (line, rest) = text.split_once(' ')?;
        let line = line.parse().ok()?;
        let (what, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let kind = match what {
            "assert" => SiteKind::Assert {
                message: unesc(rest)?,
            },
            "print" => {
                let (types, format) = rest.split_once(' ').unwrap_or((rest, ""));
                let args = match types {
                    "-" => Vec::new(),
                    t => t
                        .split(',')
                        .map(Scalar::from_name)
                        .collect::<Option<Vec<_>>>()?,
                };
                SiteKind::Print {
                    format: unesc(format)?,
                    args,
                }
            }
            _ => return None,
        };
        Some(DebugSite { line, kind })
    }

    /// The words of this site's record.
    pub fn record_words(&self) -> u32 {
        match &self.kind {
            SiteKind::Print { args, .. } => 3 + 2 * args.len() as u32,
            SiteKind::Assert { .. } => 3,
        }
    }
}

/// One printed line: the kernel, the `print`'s source line, the work-item and the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintLine {
    /// The kernel launched.
    pub kernel: String,
    /// The `print`'s source line.
    pub line: u32,
    /// The workgroup's id.
    pub group: [u32; 3],
    /// The work-item's local id.
    pub item: [u32; 3],
    /// The format with its values in place.
    pub text: String,
}

impl fmt::Display for PrintLine {
    /// `[saxpy:7 group 0,0,0 item 3,0,0] text`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [gx, gy, gz] = self.group;
        let [x, y, z] = self.item;
        write!(
            f,
            "[{}:{} group {gx},{gy},{gz} item {x},{y},{z}] {}",
            self.kernel, self.line, self.text
        )
    }
}

/// The value `bits` of type `s` as a `print` shows it: integers in decimal, `bool` as
/// `true`/`false`, floats as Rust's `{:?}` writes them (`1.0`, `-0.5`, `NaN`, `inf`; `f16`
/// through `f32`).
pub fn format_value(s: Scalar, bits: u64) -> String {
    match s {
        Scalar::Bool => (bits & 1 != 0).to_string(),
        Scalar::F16 => format!("{:?}", half::f16::from_bits(bits as u16).to_f32()),
        Scalar::F32 => format!("{:?}", f32::from_bits(bits as u32)),
        Scalar::F64 => format!("{:?}", f64::from_bits(bits)),
        s if s.is_signed() => {
            let sh = 64 - s.bits();
            (((bits << sh) as i64) >> sh).to_string()
        }
        s => {
            let sh = 64 - s.bits();
            ((bits << sh) >> sh).to_string()
        }
    }
}

/// `format` with its `{}` replaced by `values` (the site's types; the format was checked by
/// the verifier).
pub fn render(format: &str, types: &[Scalar], values: &[u64]) -> String {
    let Ok(pieces) = pieces(format) else {
        return format.to_string();
    };
    let mut out = String::new();
    let mut next = 0;
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(&t),
            Piece::Value => {
                if let (Some(s), Some(v)) = (types.get(next), values.get(next)) {
                    out.push_str(&format_value(*s, *v));
                }
                next += 1;
            }
        }
    }
    out
}

/// A failed `assert`: its line, workgroup, work-item and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssertFailure {
    /// The assert's source line.
    pub line: u32,
    /// The workgroup's id.
    pub group: [u32; 3],
    /// The work-item's local id.
    pub item: [u32; 3],
    /// The assert's message.
    pub message: String,
}

/// What a launch's buffer held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// The printed lines, in work-item order.
    pub lines: Vec<PrintLine>,
    /// The first failed assert in work-item order.
    pub failed: Option<AssertFailure>,
    /// Records that did not fit and were dropped.
    pub dropped: bool,
}

fn coords(linear: u32, dims: [u32; 3]) -> [u32; 3] {
    let x = dims[0].max(1);
    let y = dims[1].max(1);
    [linear % x, (linear / x) % y, linear / (x * y)]
}

/// The records of `words` (a launch's buffer, [`BUFFER_WORDS`] or fewer) decoded against
/// `sites`, for a launch of `grid` workgroups of `block` work-items.
pub fn decode(
    kernel: &str,
    words: &[u32],
    sites: &[DebugSite],
    grid: [u32; 3],
    block: [u32; 3],
) -> Decoded {
    let w = |i: u32| words.get(i as usize).copied().unwrap_or(0);
    let mut out = Decoded::default();
    // (group, item, site, values)
    let mut prints: Vec<(u32, u32, &DebugSite, Vec<u64>)> = Vec::new();
    let used = w(0);
    out.dropped |= used > PRINT_REGION_WORDS;
    let mut at = 0;
    while at + 3 <= used.min(PRINT_REGION_WORDS) {
        let base = HEADER_WORDS + at;
        let Some(site) = sites.get(w(base) as usize) else {
            break;
        };
        let n = site.record_words();
        if at + n > PRINT_REGION_WORDS {
            break;
        }
        let values = (0..(n - 3) / 2)
            .map(|j| w(base + 3 + 2 * j) as u64 | (w(base + 4 + 2 * j) as u64) << 32)
            .collect();
        prints.push((w(base + 1), w(base + 2), site, values));
        at += n;
    }
    prints.sort_by_key(|p| (p.0, p.1));
    for (g, i, site, values) in prints {
        if let SiteKind::Print { format, args } = &site.kind {
            out.lines.push(PrintLine {
                kernel: kernel.to_string(),
                line: site.line,
                group: coords(g, grid),
                item: coords(i, block),
                text: render(format, args, &values),
            });
        }
    }
    let used = w(1);
    out.dropped |= used > ASSERT_REGION_WORDS;
    let mut first: Option<(u32, u32, &DebugSite)> = None;
    let mut at = 0;
    while at + 3 <= used.min(ASSERT_REGION_WORDS) {
        let base = ASSERT_BASE + at;
        if let Some(site) = sites.get(w(base) as usize) {
            let key = (w(base + 1), w(base + 2));
            if first.is_none_or(|f| key < (f.0, f.1)) {
                first = Some((key.0, key.1, site));
            }
        }
        at += 3;
    }
    out.failed = first.map(|(g, i, site)| AssertFailure {
        line: site.line,
        group: coords(g, grid),
        item: coords(i, block),
        message: match &site.kind {
            SiteKind::Assert { message } => message.clone(),
            SiteKind::Print { format, .. } => format.clone(),
        },
    });
    out
}

/// The line that stands for records dropped past the buffer.
pub fn dropped_note(kernel: &str) -> PrintLine {
    PrintLine {
        kernel: kernel.to_string(),
        line: 0,
        group: [0; 3],
        item: [0; 3],
        text: "(print output past the 1 MiB print buffer was dropped)".to_string(),
    }
}

/// A host-side writer of the buffer, as the device code writes it: the interpreter's and the
/// CPU's records take this path.
#[derive(Clone, Debug)]
pub struct HostBuffer {
    /// The buffer's [`BUFFER_WORDS`] words.
    pub words: Vec<u32>,
}

impl Default for HostBuffer {
    fn default() -> Self {
        HostBuffer {
            words: vec![0; BUFFER_WORDS as usize],
        }
    }
}

impl HostBuffer {
    /// Appends a `print` record (`values` as 64-bit patterns).
    pub fn print(&mut self, site: u32, group: u32, item: u32, values: &[u64]) {
        let n = 3 + 2 * values.len() as u32;
        let at = self.words[0];
        self.words[0] = at.saturating_add(n);
        if at.saturating_add(n) <= PRINT_REGION_WORDS {
            let b = (HEADER_WORDS + at) as usize;
            self.words[b] = site;
            self.words[b + 1] = group;
            self.words[b + 2] = item;
            for (j, v) in values.iter().enumerate() {
                self.words[b + 3 + 2 * j] = *v as u32;
                self.words[b + 4 + 2 * j] = (*v >> 32) as u32;
            }
        }
    }

    /// Appends a failed-assert record.
    pub fn assert_failed(&mut self, site: u32, group: u32, item: u32) {
        let at = self.words[1];
        self.words[1] = at.saturating_add(3);
        if at.saturating_add(3) <= ASSERT_REGION_WORDS {
            let b = (ASSERT_BASE + at) as usize;
            self.words[b] = site;
            self.words[b + 1] = group;
            self.words[b + 2] = item;
        }
    }

    /// Whether nothing was written.
    pub fn is_clear(&self) -> bool {
        self.words[0] == 0 && self.words[1] == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_split_into_text_and_values() {
        assert_eq!(
            pieces("a {} b {{x}} {}").unwrap(),
            vec![
                Piece::Text("a ".into()),
                Piece::Value,
                Piece::Text(" b {x} ".into()),
                Piece::Value
            ]
        );
        assert_eq!(placeholders("{}{}{}").unwrap(), 3);
        assert!(placeholders("a { b").is_err());
        assert!(placeholders("a } b").is_err());
        assert!(placeholders("{x}").is_err());
    }

    #[test]
    fn sites_round_trip_through_their_line() {
        let sites = [
            DebugSite {
                line: 7,
                kind: SiteKind::Print {
                    format: "a\\b {} \n{{}} x ".into(),
                    args: vec![Scalar::I8, Scalar::F16, Scalar::Bool],
                },
            },
            DebugSite {
                line: 1,
                kind: SiteKind::Print {
                    format: String::new(),
                    args: vec![],
                },
            },
            DebugSite {
                line: 12,
                kind: SiteKind::Assert {
                    message: "i < n\r\nsecond line".into(),
                },
            },
        ];
        for s in &sites {
            let l = s.to_line();
            assert!(!l.contains('\n') && !l.contains('\r'), "{l}");
            assert_eq!(DebugSite::from_line(&l).as_ref(), Some(s), "{l}");
        }
        assert_eq!(DebugSite::from_line("x print - y"), None);
        assert_eq!(DebugSite::from_line("3 print q8 {}"), None);
        assert_eq!(DebugSite::from_line("3 assert bad\\q"), None);
    }
}
