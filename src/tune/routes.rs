//! Routing (contract §6.4): which kernel serves which data format in which regime, as a
//! declaration the layer audits rather than a predicate each package restates.
//!
//! A [`RouteTable`] is rows, each one kernel variant serving one format in one regime, with a
//! static shape refusal (its [`ShapeGate`]s, walked by [`RouteTable::audit`] from any machine
//! with no data loaded) and a run-time ready refusal read at bind (the registry:
//! [`Device::kernel_available`](crate::Device::kernel_available); the capabilities it needs:
//! [`Device::supports`](crate::Device::supports)). Both answer with the [`Gate`] that refused,
//! never a bare boolean.
//!
//! The text form (`xpu routes FILE --audit`), one declaration a line, `#` comments:
//!
//! ```text
//! module gemm_family.xk          # the kernels rows name (relative to this file)
//! formats f32 f16                # every format the table must serve
//! regimes prefill decode
//! shapes 1x4096x4096 512x4096x4096   # problems the audit walks
//! row f32 prefill Gemm<64,64,16,4,4> when m>=64 k%16==0
//! row f32 decode gemv needs f16
//! ```

use super::codes;
use super::filter::Problem;
use crate::hal::facts::{Feature, Support};
use crate::ir::VerifiedModule;
use crate::runtime::device::Device;
use std::fmt;

/// What refused a row: the gate's name (`m>=64`, `registry`, `supports f16`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The refusal's code (`XPU-T...`).
    pub code: &'static str,
    /// The gate's name as written (`m>=64`, `registry`, `supports f16`).
    pub gate: String,
    /// Why it refused, in one sentence.
    pub reason: String,
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gate `{}` [{}]: {}", self.gate, self.code, self.reason)
    }
}

/// A problem dimension a shape gate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// Rows of the output, `m` in `MxNxK`.
    M,
    /// Columns of the output, `n`.
    N,
    /// The reduction depth, `k`.
    K,
}

/// A static condition on the problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeGate {
    /// `d>=v`.
    AtLeast(Dim, u64),
    /// `d<=v`.
    AtMost(Dim, u64),
    /// `d%v==0`.
    MultipleOf(Dim, u64),
}

impl Dim {
    fn of(self, p: &Problem) -> u64 {
        match self {
            Dim::M => p.m,
            Dim::N => p.n,
            Dim::K => p.k,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Dim::M => "m",
            Dim::N => "n",
            Dim::K => "k",
        }
    }
}

impl fmt::Display for ShapeGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeGate::AtLeast(d, v) => write!(f, "{}>={v}", d.name()),
            ShapeGate::AtMost(d, v) => write!(f, "{}<={v}", d.name()),
            ShapeGate::MultipleOf(d, v) => write!(f, "{}%{v}==0", d.name()),
        }
    }
}

impl ShapeGate {
    /// `m>=64`, `n<=4096`, `k%16==0`.
    pub fn parse(text: &str) -> Option<ShapeGate> {
        let dim = match text.as_bytes().first()? {
            b'm' => Dim::M,
            b'n' => Dim::N,
            b'k' => Dim::K,
            _ => return None,
        };
        let rest = &text[1..];
        let num = |s: &str| s.parse::<u64>().ok();
        if let Some(v) = rest.strip_prefix(">=") {
            return Some(ShapeGate::AtLeast(dim, num(v)?));
        }
        if let Some(v) = rest.strip_prefix("<=") {
            return Some(ShapeGate::AtMost(dim, num(v)?));
        }
        let v = rest.strip_prefix('%')?.strip_suffix("==0")?;
        Some(ShapeGate::MultipleOf(dim, num(v).filter(|&v| v > 0)?))
    }

    fn passes(&self, p: &Problem) -> bool {
        match *self {
            ShapeGate::AtLeast(d, v) => d.of(p) >= v,
            ShapeGate::AtMost(d, v) => d.of(p) <= v,
            ShapeGate::MultipleOf(d, v) => d.of(p) % v == 0,
        }
    }
}

/// One kernel variant serving one format in one regime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteRow {
    /// The data format the row serves (`f32`, `f16`).
    pub format: String,
    /// The regime it serves (`prefill`, `decode`).
    pub regime: String,
    /// The kernel (a template instance's name).
    pub kernel: String,
    /// Static conditions on the problem (`when ...`); all must pass.
    pub shape_gates: Vec<ShapeGate>,
    /// Capabilities the kernel needs natively or emulated.
    pub needs: Vec<Feature>,
}

impl RouteRow {
    /// The static refusal: the first shape gate `problem` fails.
    pub fn shape_refusal(&self, problem: &Problem) -> Option<Gate> {
        let g = self.shape_gates.iter().find(|g| !g.passes(problem))?;
        Some(Gate {
            code: codes::SHAPE_REFUSAL,
            gate: g.to_string(),
            reason: format!("{} does not serve {problem}", self.kernel),
        })
    }

    /// The run-time refusal read at bind: the registry (`kernel_available`), then each
    /// capability the row needs.
    pub fn ready_refusal(&self, device: &Device) -> Option<Gate> {
        if !device.kernel_available(&self.kernel) {
            return Some(Gate {
                code: codes::READY_REFUSAL,
                gate: "registry".into(),
                reason: format!(
                    "no code for {} on the {} backend whose shared memory fits this device",
                    self.kernel,
                    device.backend()
                ),
            });
        }
        for &f in &self.needs {
            if device.supports(f) == Support::No {
                return Some(Gate {
                    code: codes::READY_REFUSAL,
                    gate: format!("supports {}", f.name()),
                    reason: format!(
                        "{} needs {}, which this device lacks",
                        self.kernel,
                        f.name()
                    ),
                });
            }
        }
        None
    }
}

/// Why a bind found no row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteRefusal {
    /// The format asked for.
    pub format: String,
    /// The regime asked for.
    pub regime: String,
    /// The problem asked for.
    pub problem: Problem,
    /// Each row considered and the gate that refused it (empty: no row for the pair).
    pub refused: Vec<(String, Gate)>,
}

impl fmt::Display for RouteRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.refused.is_empty() {
            return write!(
                f,
                "error[{}]: no row serves format {} in regime {}",
                codes::NO_ROUTE,
                self.format,
                self.regime
            );
        }
        let each: Vec<String> = self
            .refused
            .iter()
            .map(|(k, g)| format!("{k} refused by {g}"))
            .collect();
        write!(
            f,
            "error[{}]: no row serves format {} in regime {} at {}: {}",
            codes::NO_ROUTE,
            self.format,
            self.regime,
            self.problem,
            each.join("; ")
        )
    }
}

/// One problem the audit found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The finding's code (`XPU-T...`).
    pub code: &'static str,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: {}", self.code, self.message)
    }
}

/// The table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// The module file the rows' kernels are in (the text form's `module`).
    pub module: Option<String>,
    /// Every format the table must serve.
    pub formats: Vec<String>,
    /// Every regime the table must serve.
    pub regimes: Vec<String>,
    /// Problems the audit walks.
    pub shapes: Vec<Problem>,
    /// The rows, in declaration order.
    pub rows: Vec<RouteRow>,
}

impl RouteTable {
    /// Parses the text form; `Err` with `line N: error[XPU-S014]: ...` lines.
    pub fn parse(text: &str) -> Result<RouteTable, String> {
        let mut t = RouteTable::default();
        let mut errors = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut err = |m: String| {
                errors.push(format!("line {}: error[{}]: {m}", i + 1, codes::ROUTE_FILE))
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[0] {
                "module" if words.len() == 2 => t.module = Some(words[1].to_string()),
                "formats" => t.formats.extend(words[1..].iter().map(|w| w.to_string())),
                "regimes" => t.regimes.extend(words[1..].iter().map(|w| w.to_string())),
                "shapes" => {
                    for w in &words[1..] {
                        match Problem::parse(w) {
                            Some(p) => t.shapes.push(p),
                            None => err(format!("`{w}` is not MxNxK")),
                        }
                    }
                }
                "row" if words.len() >= 4 => {
                    let mut row = RouteRow {
                        format: words[1].to_string(),
                        regime: words[2].to_string(),
                        kernel: words[3].to_string(),
                        shape_gates: Vec::new(),
                        needs: Vec::new(),
                    };
                    let mut mode = "";
                    for w in &words[4..] {
                        match *w {
                            "when" | "needs" => mode = w,
                            _ if mode == "when" => match ShapeGate::parse(w) {
                                Some(g) => row.shape_gates.push(g),
                                None => err(format!(
                                    "`{w}` is not a shape gate (m>=N, n<=N, k%N==0)"
                                )),
                            },
                            _ if mode == "needs" => {
                                match Feature::ALL.iter().find(|f| f.name() == *w) {
                                    Some(f) => row.needs.push(*f),
                                    None => err(format!("`{w}` is not a feature")),
                                }
                            }
                            _ => err(format!("`{w}`: expected `when` or `needs`")),
                        }
                    }
                    t.rows.push(row);
                }
                other => err(format!(
                    "`{other}`: expected module, formats, regimes, shapes or row FORMAT REGIME KERNEL"
                )),
            }
        }
        if errors.is_empty() {
            Ok(t)
        } else {
            Err(errors.join("\n"))
        }
    }

    /// The row serving `format` in `regime` at `problem` on `device`: the first whose static
    /// and ready refusals both pass, else every row's refusing gate.
    pub fn bind(
        &self,
        format: &str,
        regime: &str,
        problem: Problem,
        device: &Device,
    ) -> Result<&RouteRow, RouteRefusal> {
        let mut refused = Vec::new();
        for row in self
            .rows
            .iter()
            .filter(|r| r.format == format && r.regime == regime)
        {
            match row
                .shape_refusal(&problem)
                .or_else(|| row.ready_refusal(device))
            {
                None => return Ok(row),
                Some(g) => refused.push((row.kernel.clone(), g)),
            }
        }
        Err(RouteRefusal {
            format: format.to_string(),
            regime: regime.to_string(),
            problem,
            refused,
        })
    }

    /// The audit, from any machine and with no data loaded: every (format, regime) a
    /// declared format lacks a row for (`XPU-S015`, naming the formats that have one), every
    /// row whose kernel `module` lacks (`XPU-S016`), and every declared shape that every row
    /// of a pair refuses statically (`XPU-S011`, with each row's gate).
    pub fn audit(&self, module: Option<&VerifiedModule>) -> Vec<Finding> {
        let mut out = Vec::new();
        let mut formats = self.formats.clone();
        let mut regimes = self.regimes.clone();
        for r in &self.rows {
            if !formats.contains(&r.format) {
                formats.push(r.format.clone());
            }
            if !regimes.contains(&r.regime) {
                regimes.push(r.regime.clone());
            }
        }
        for regime in &regimes {
            let having: Vec<&str> = formats
                .iter()
                .filter(|f| {
                    self.rows
                        .iter()
                        .any(|r| &r.format == *f && &r.regime == regime)
                })
                .map(|f| f.as_str())
                .collect();
            for f in &formats {
                if !having.contains(&f.as_str()) {
                    out.push(Finding {
                        code: codes::MISSING_ROW,
                        message: format!(
                            "format {f} lacks a row for regime {regime}{}",
                            if having.is_empty() {
                                String::new()
                            } else {
                                format!(" (served for {})", having.join(", "))
                            }
                        ),
                    });
                }
            }
        }
        if let Some(m) = module {
            for r in &self.rows {
                if m.kernel(&r.kernel).is_none() {
                    out.push(Finding {
                        code: codes::UNKNOWN_KERNEL,
                        message: format!(
                            "row {} {} names {}, which the module does not have",
                            r.format, r.regime, r.kernel
                        ),
                    });
                }
            }
        }
        for p in &self.shapes {
            for f in &formats {
                for regime in &regimes {
                    let rows: Vec<&RouteRow> = self
                        .rows
                        .iter()
                        .filter(|r| &r.format == f && &r.regime == regime)
                        .collect();
                    if rows.is_empty() {
                        continue;
                    }
                    let gates: Vec<String> = rows
                        .iter()
                        .filter_map(|r| {
                            r.shape_refusal(p)
                                .map(|g| format!("{} by `{}`", r.kernel, g.gate))
                        })
                        .collect();
                    if gates.len() == rows.len() {
                        out.push(Finding {
                            code: codes::SHAPE_REFUSAL,
                            message: format!(
                                "format {f} regime {regime} serves nothing at {p}: {}",
                                gates.join(", ")
                            ),
                        });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "
module m.xk
formats f32 f16 q8   # q8 is new
regimes prefill decode
shapes 1x4096x4096 512x512x512
row f32 prefill big when m>=64 k%16==0
row f32 decode small when m<=8
row f16 prefill big16 when m>=64 needs f16
row f16 decode small16 needs f16
";

    #[test]
    fn the_audit_names_what_a_new_format_lacks() {
        let t = RouteTable::parse(TABLE).unwrap();
        let found: Vec<String> = t.audit(None).iter().map(|f| f.to_string()).collect();
        assert!(
            found
                .iter()
                .any(|f| f
                    .contains("format q8 lacks a row for regime prefill (served for f32, f16)")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|f| f.contains("format q8 lacks a row for regime decode")),
            "{found:?}"
        );
        // 1x4096x4096 is refused by every prefill row; 512^3 by every decode row.
        assert!(
            found.iter().any(|f| f.contains(
                "format f32 regime prefill serves nothing at 1x4096x4096: big by `m>=64`"
            )),
            "{found:?}"
        );
        assert!(
            !found
                .iter()
                .any(|f| f.contains("format f16 regime decode serves nothing")),
            "{found:?}"
        );
        assert_eq!(found.iter().filter(|f| f.contains("XPU-S015")).count(), 2);
    }

    #[test]
    fn gates_and_malformed_files() {
        assert_eq!(
            ShapeGate::parse("k%16==0"),
            Some(ShapeGate::MultipleOf(Dim::K, 16))
        );
        assert_eq!(ShapeGate::parse("k%0==0"), None);
        assert_eq!(ShapeGate::parse("x>=1"), None);
        let e = RouteTable::parse("row a b\nbogus\nrow f r k when q>1").unwrap_err();
        assert_eq!(e.lines().count(), 3, "{e}");
        assert!(e.contains("line 2: error[XPU-S014]"));
    }
}
