//! Reading the REPL's input: where one entry ends (a definition spans lines until its braces
//! balance), and the small syntaxes of the REPL's own entries (the short launch, buffers,
//! `print`), parsed into plain values.

use crate::ir::text::run::Value;

/// Accumulates lines until they form one complete entry.
#[derive(Debug, Default)]
pub struct Reader {
    text: String,
    /// The line (1-based, over the whole session) the pending entry starts at.
    start_line: usize,
    lines_seen: usize,
}

/// A complete entry: its text and the session line it starts at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The entry as typed, every line of it.
    pub text: String,
    /// The session line (1-based) the entry starts at.
    pub line: usize,
}

impl Reader {
    /// Whether a definition is pending (the prompt shows continuation).
    pub fn pending(&self) -> bool {
        !self.text.is_empty()
    }

    /// The pending text (an entry the input ended inside of).
    pub fn take_pending(&mut self) -> Option<Entry> {
        if self.text.is_empty() {
            return None;
        }
        Some(Entry {
            text: std::mem::take(&mut self.text),
            line: self.start_line,
        })
    }

    /// Adds one line; returns the entry it completes, if any.
    pub fn push(&mut self, line: &str) -> Option<Entry> {
        self.lines_seen += 1;
        if self.text.is_empty() {
            if line.trim().is_empty() || line.trim_start().starts_with("//") {
                return None;
            }
            self.start_line = self.lines_seen;
        }
        self.text.push_str(line);
        self.text.push('\n');
        if is_complete(&self.text) {
            let text = std::mem::take(&mut self.text);
            return Some(Entry {
                text,
                line: self.start_line,
            });
        }
        None
    }
}

/// Whether an entry starts a definition or run block (an entry that may span lines).
pub fn is_block_start(text: &str) -> bool {
    let t = text.trim_start();
    let word = t
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    t.starts_with('@') || matches!(word, "kernel" | "device" | "tagset" | "run")
}

/// Whether `text` is a complete entry: a one-line entry always is; a definition once a `{`
/// has been opened and every brace closed (a tag set once its `;` ends it at depth 0).
fn is_complete(text: &str) -> bool {
    if !is_block_start(text) {
        return true;
    }
    let (depth, opened, semi_at_zero) = scan_braces(text);
    if depth < 0 {
        return true;
    }
    let tagset = text.trim_start().starts_with("tagset");
    (opened && depth == 0) || (tagset && semi_at_zero && depth == 0)
}

/// Brace depth at the end of `text`, whether a `{` was seen, and whether a `;` was seen at
/// depth 0; comments and string literals are skipped.
fn scan_braces(text: &str) -> (i64, bool, bool) {
    let (mut depth, mut opened, mut semi) = (0i64, false, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
            }
            '{' => {
                depth += 1;
                opened = true;
            }
            '}' => depth -= 1,
            ';' if depth == 0 => semi = true,
            _ => {}
        }
    }
    (depth, opened, semi)
}

/// A launch in the short syntax: `NAME<<<GRID, BLOCK[, SHARED]>>>(ARG, ...)`.
#[derive(Clone, Debug, PartialEq)]
pub struct ShortLaunch {
    /// The kernel launched.
    pub kernel: String,
    /// The grid (workgroups per dimension).
    pub grid: [u32; 3],
    /// The block (work-items per workgroup).
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory (the optional third launch parameter).
    pub shared_bytes: u32,
    /// The arguments, in parameter order.
    pub args: Vec<LaunchArg>,
}

/// One argument of a short launch.
#[derive(Clone, Debug, PartialEq)]
pub enum LaunchArg {
    /// A session buffer, by name.
    Buffer(String),
    /// A literal for a scalar (or, broadcast, a vector) parameter.
    Value(Value),
}

/// Whether `text` is written as a short launch (has `<<<`).
pub fn is_short_launch(text: &str) -> bool {
    text.contains("<<<")
}

/// Parses a short launch; the error says what is malformed.
pub fn parse_short_launch(text: &str) -> Result<ShortLaunch, String> {
    let text = text.trim().trim_end_matches(';').trim_end();
    let open = text.find("<<<").ok_or("no `<<<`")?;
    let kernel: String = text[..open]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    if kernel.is_empty() {
        return Err("no kernel name before `<<<`".into());
    }
    let rest = &text[open + 3..];
    let close = rest.find(">>>").ok_or("no `>>>` closing the geometry")?;
    let geometry = split_top(&rest[..close]);
    if !(2..=3).contains(&geometry.len()) {
        return Err(format!(
            "the geometry is `<<<GRID, BLOCK>>>` or `<<<GRID, BLOCK, SHARED_BYTES>>>`, got {} parts",
            geometry.len()
        ));
    }
    let grid = parse_dims(geometry[0]).map_err(|e| format!("grid: {e}"))?;
    let block = parse_dims(geometry[1]).map_err(|e| format!("block: {e}"))?;
    let shared_bytes = match geometry.get(2) {
        Some(s) => s
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("shared bytes `{}`: not a u32", s.trim()))?,
        None => 0,
    };
    let after = rest[close + 3..].trim();
    let inner = after
        .strip_prefix('(')
        .and_then(|a| a.strip_suffix(')'))
        .ok_or("the arguments follow `>>>` in parentheses: `(a, b, 2.0)`")?;
    let mut args = Vec::new();
    if !inner.trim().is_empty() {
        for part in split_top(inner) {
            let part = part.trim();
            if is_ident(part) && !matches!(part, "true" | "false" | "inf" | "nan") {
                args.push(LaunchArg::Buffer(part.to_string()));
            } else {
                args.push(LaunchArg::Value(
                    parse_value(part)
                        .ok_or_else(|| format!("`{part}`: not a buffer or a literal"))?,
                ));
            }
        }
    }
    Ok(ShortLaunch {
        kernel,
        grid,
        block,
        shared_bytes,
        args,
    })
}

/// `4` or `[4, 2]` or `[4, 2, 1]`.
fn parse_dims(text: &str) -> Result<[u32; 3], String> {
    let t = text.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(t);
    let parts = split_top(inner);
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("`{t}`: one to three dimensions"));
    }
    let mut dims = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        dims[i] = p
            .trim()
            .parse()
            .map_err(|_| format!("`{}`: not a u32", p.trim()))?;
    }
    Ok(dims)
}

/// Splits at commas outside brackets and parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text[start..].trim().is_empty() || !out.is_empty() {
        out.push(&text[start..]);
    }
    out
}

/// A name: a letter or `_`, then letters, digits, `_`.
pub fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// A run-block literal: an integer (decimal or hex, `-` allowed), a float (`inf`, `nan`),
/// `true` or `false`.
pub fn parse_value(text: &str) -> Option<Value> {
    let t = text.trim();
    match t {
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        _ => {}
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t),
    };
    let int = if let Some(hex) = body.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).ok()
    } else if body.chars().all(|c| c.is_ascii_digit()) && !body.is_empty() {
        body.parse::<i128>().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Some(Value::Int(if neg { -i } else { i }));
    }
    let f: f64 = match body {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ if body.starts_with(|c: char| c.is_ascii_digit()) => body.parse().ok()?,
        _ => return None,
    };
    Some(Value::Float(if neg { -f } else { f }))
}

/// `print NAME`, `print NAME[LO..HI]`, either followed by `as R x C`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintSpec {
    /// The buffer printed.
    pub name: String,
    /// The elements `LO..HI` printed, when a range is given.
    pub range: Option<(usize, usize)>,
    /// The `R x C` shape the elements are shown in, when one is given.
    pub shape: Option<(usize, usize)>,
}

/// Parses what follows `print`.
pub fn parse_print(text: &str) -> Result<PrintSpec, String> {
    let text = text.trim().trim_end_matches(';').trim_end();
    let (target, shape) = match text.split_once(" as ") {
        Some((t, s)) => {
            let s = s.replace(' ', "");
            let (r, c) = s
                .split_once(['x', '*'])
                .ok_or_else(|| format!("shape `{s}`: write `as ROWS x COLS`"))?;
            let rows = r
                .parse::<usize>()
                .map_err(|_| format!("`{r}`: not a count"))?;
            let cols = c
                .parse::<usize>()
                .map_err(|_| format!("`{c}`: not a count"))?;
            if rows == 0 || cols == 0 {
                return Err("a shape has no zero dimension".into());
            }
            (t.trim(), Some((rows, cols)))
        }
        None => (text, None),
    };
    let (name, range) = match target.split_once('[') {
        Some((n, r)) => {
            let r = r
                .strip_suffix(']')
                .ok_or("a slice is `NAME[LO..HI]`")?
                .replace(' ', "");
            let (lo, hi) = r.split_once("..").ok_or("a slice is `NAME[LO..HI]`")?;
            let lo = if lo.is_empty() {
                0
            } else {
                lo.parse().map_err(|_| format!("`{lo}`: not an index"))?
            };
            let hi = if hi.is_empty() {
                usize::MAX
            } else {
                hi.parse().map_err(|_| format!("`{hi}`: not an index"))?
            };
            (n.trim(), Some((lo, hi)))
        }
        None => (target, None),
    };
    if !is_ident(name) {
        return Err(format!("`{name}`: not a buffer name"));
    }
    Ok(PrintSpec {
        name: name.to_string(),
        range,
        shape,
    })
}

/// `buf NAME: TYPE = INIT`: the three parts as text.
pub fn split_buffer(text: &str) -> Result<(String, String, String), String> {
    let text = text.trim().trim_end_matches(';').trim_end();
    let rest = text.strip_prefix("buf").unwrap_or(text).trim_start();
    let (name, rest) = rest
        .split_once(':')
        .ok_or("a buffer is `buf NAME: TYPE = INIT` (`buf x: f32 = iota(16)`)")?;
    let (ty, init) = rest
        .split_once('=')
        .ok_or("a buffer is `buf NAME: TYPE = INIT` (`buf x: f32 = iota(16)`)")?;
    let name = name.trim();
    if !is_ident(name) {
        return Err(format!("`{name}`: not a buffer name"));
    }
    Ok((
        name.to_string(),
        ty.trim().to_string(),
        init.trim().to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_end_when_braces_balance() {
        let mut r = Reader::default();
        assert_eq!(r.push("kernel k(a: buf<f32, rw>) {"), None);
        assert!(r.pending());
        assert_eq!(r.push("    a[0] = 1.0; // }"), None);
        let e = r.push("}").unwrap();
        assert_eq!(e.line, 1);
        assert!(e.text.starts_with("kernel k"));
        assert!(!r.pending());
        let e = r.push("buf x: f32 = iota(4)").unwrap();
        assert_eq!(e.line, 4);
        assert_eq!(r.push("@wave(32)"), None);
        assert!(
            r.push("tagset T = [a, b];").is_none(),
            "attribute lines continue"
        );
        let mut r = Reader::default();
        assert!(r.push("tagset T = [a, b];").is_some());
    }

    #[test]
    fn short_launch_parses() {
        let l = parse_short_launch("saxpy<<<[4, 2], 256, 64>>>(y, x, -2.5, 0x10)").unwrap();
        assert_eq!(l.kernel, "saxpy");
        assert_eq!(l.grid, [4, 2, 1]);
        assert_eq!(l.block, [256, 1, 1]);
        assert_eq!(l.shared_bytes, 64);
        assert_eq!(
            l.args,
            vec![
                LaunchArg::Buffer("y".into()),
                LaunchArg::Buffer("x".into()),
                LaunchArg::Value(Value::Float(-2.5)),
                LaunchArg::Value(Value::Int(16)),
            ]
        );
        assert!(parse_short_launch("k<<<1>>>()").is_err());
        assert!(parse_short_launch("k<<<1, 1>>> x").is_err());
        let t = parse_short_launch("T<64,64><<<1, 1>>>()").unwrap();
        assert_eq!(t.kernel, "T<64,64>");
        assert!(t.args.is_empty());
    }

    #[test]
    fn print_parses() {
        let p = parse_print("y[2..10] as 2 x 4").unwrap();
        assert_eq!(p.range, Some((2, 10)));
        assert_eq!(p.shape, Some((2, 4)));
        assert!(parse_print("y[2..").is_err());
        assert!(parse_print("1y").is_err());
    }
}
