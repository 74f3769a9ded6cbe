//! Replay (contract §2.5): every record of a folder runs through the reference interpreter and
//! the buffers it may write are compared with what the recorded device wrote. Integers and
//! `bool` must agree bit for bit; floats within the held list's ulps for the kernel (0 by
//! default; any NaN equals any NaN; `-0.0` and `+0.0` are one ulp apart). Undefined behaviour
//! the interpreter reports is shown as such, not as a disagreement.
//!
//! The held list names kernels with a tolerance or an excuse, one per line
//! (`#` starts a comment):
//!
//! ```text
//! softmax ulps=4 -- plan item: exp on lavapipe
//! gather excused -- plan item 31: reads an unwritten pad
//! ```
//!
//! A held kernel whose every replayed record agrees exactly is `STALE` and fails until its line
//! goes. A budget (seconds) bounds the replay; records not reached are counted and listed. The
//! replay succeeds when no replayed record disagrees (beyond its tolerance), none was refused,
//! and nothing is stale.

use super::{blobs_dir, codes, content_hash, launches_dir, modules_dir, unhex, RecordError};
use crate::backend::interp::InterpDevice;
use crate::hal::launch::{format_scalar, HostValue, Launch};
use crate::hal::{BufferBinding, DeviceArg, DeviceImpl, Init, KernelImpl, ProgramImpl, StreamImpl};
use crate::ir::{ElemType, Scalar, Type, VerifiedModule};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to replay.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The held list.
    pub held: Option<PathBuf>,
    /// How long the replay may take.
    pub budget: Option<Duration>,
}

/// What the held list says of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Floats may differ by this many ulps.
    pub ulps: u64,
    /// Disagreements are excused (shown, not failed).
    pub excused: bool,
    /// The plan item or reason.
    pub reason: String,
    /// The held list's line, from 1.
    pub line: usize,
}

/// Reads a held list.
pub fn read_held(path: &Path) -> Result<BTreeMap<String, Held>, RecordError> {
    let text = std::fs::read_to_string(path).map_err(|e| RecordError::HeldList {
        path: path.to_path_buf(),
        line: 0,
        message: e.to_string(),
    })?;
    parse_held(path, &text)
}

/// Parses a held list's text (`path` names it in errors).
pub fn parse_held(path: &Path, text: &str) -> Result<BTreeMap<String, Held>, RecordError> {
    let mut out = BTreeMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let bad = |message: String| RecordError::HeldList {
            path: path.to_path_buf(),
            line,
            message,
        };
        let (left, reason) = body.split_once("--").ok_or_else(|| {
            bad("expected `KERNEL ulps=N -- REASON` or `KERNEL excused -- REASON`".into())
        })?;
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(bad(
                "a held kernel needs a reason (a plan item) after `--`".into()
            ));
        }
        let mut words = left.split_whitespace();
        let (Some(kernel), Some(what), None) = (words.next(), words.next(), words.next()) else {
            return Err(bad(
                "expected `KERNEL ulps=N` or `KERNEL excused` before `--`".into(),
            ));
        };
        let (ulps, excused) = match what.strip_prefix("ulps=") {
            Some(n) => (
                n.parse::<u64>()
                    .map_err(|_| bad(format!("`{what}`: ulps takes a whole number")))?,
                false,
            ),
            None if what == "excused" => (0, true),
            None => return Err(bad(format!("`{what}`: expected `ulps=N` or `excused`"))),
        };
        if out
            .insert(
                kernel.to_string(),
                Held {
                    ulps,
                    excused,
                    reason: reason.to_string(),
                    line,
                },
            )
            .is_some()
        {
            return Err(bad(format!("kernel `{kernel}` is held twice")));
        }
    }
    Ok(out)
}

/// How one record replayed.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every written buffer agrees; `max_ulps` is the largest float difference (0: exact).
    Agree {
        /// The largest float difference in ulps (0: exact).
        max_ulps: u64,
    },
    /// A written buffer differs beyond the tolerance (`excused`: the held list excuses it).
    Disagree {
        /// The buffer parameter that differs.
        param: String,
        /// The first element index that differs.
        index: usize,
        /// The interpreter's value.
        expected: String,
        /// The recorded device's value.
        actual: String,
        /// How far apart two floats are (`None`: integers, or a NaN against a number).
        ulps: Option<u64>,
        /// Whether the held list excuses it.
        excused: bool,
    },
    /// The interpreter reported undefined behaviour (`XPU-REF02`).
    Undefined {
        /// The UB kind's name.
        kind: String,
        /// The interpreter's report.
        report: String,
    },
    /// The interpreter could not run the record (it cannot define the kernel, or the record
    /// is unusable).
    Refused {
        /// Why.
        message: String,
    },
}

/// One replayed record.
#[derive(Clone, Debug, PartialEq)]
pub struct Replayed {
    /// The record file.
    pub file: PathBuf,
    /// The kernel it launched.
    pub kernel: String,
    /// The backend it was recorded on.
    pub backend: String,
    /// How it compares.
    pub verdict: Verdict,
}

/// The outcome of a replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Every replayed record, in replay order.
    pub replayed: Vec<Replayed>,
    /// Records the budget did not reach.
    pub not_reached: Vec<PathBuf>,
    /// Held kernels whose every replayed record agreed exactly, with the held list's line.
    pub stale: Vec<(String, usize)>,
    /// The held list used, if any.
    pub held_path: Option<PathBuf>,
}

impl Report {
    /// Records that disagree and are not excused.
    pub fn disagreements(&self) -> impl Iterator<Item = &Replayed> {
        self.replayed
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Disagree { excused: false, .. }))
    }

    /// Whether the replay proves the run: no disagreement, no refusal, nothing stale.
    pub fn ok(&self) -> bool {
        self.disagreements().next().is_none()
            && self.stale.is_empty()
            && !self
                .replayed
                .iter()
                .any(|r| matches!(r.verdict, Verdict::Refused { .. }))
    }

    fn count(&self, f: impl Fn(&Verdict) -> bool) -> usize {
        self.replayed.iter().filter(|r| f(&r.verdict)).count()
    }

    /// The report as JSON (`xpu conform --json`).
    pub fn to_json(&self) -> Value {
        let records: Vec<Value> = self
            .replayed
            .iter()
            .map(|r| {
                let mut v = json!({"file": r.file.display().to_string(), "kernel": r.kernel,
                    "backend": r.backend});
                let extra = match &r.verdict {
                    Verdict::Agree { max_ulps } => {
                        json!({"verdict": "agree", "max_ulps": max_ulps})
                    }
                    Verdict::Disagree {
                        param,
                        index,
                        expected,
                        actual,
                        ulps,
                        excused,
                    } => json!({
                        "verdict": if *excused { "held" } else { "disagree" },
                        "code": codes::DISAGREE, "param": param, "index": index,
                        "expected": expected, "actual": actual, "ulps": ulps}),
                    Verdict::Undefined { kind, report } => json!({"verdict": "undefined",
                        "kind": kind, "report": report}),
                    Verdict::Refused { message } => json!({"verdict": "refused",
                        "code": codes::REPLAY_FAILED, "message": message}),
                };
                if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
                    o.extend(e);
                }
                v
            })
            .collect();
        json!({
            "ok": self.ok(),
            "records": records,
            "stale": self.stale.iter().map(|(k, l)| json!({"kernel": k, "line": l,
                "code": codes::STALE})).collect::<Vec<_>>(),
            "not_reached": self.not_reached.iter().map(|p| p.display().to_string())
                .collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.replayed {
            let at = format!(
                "kernel {} ({} record {})",
                r.kernel,
                r.backend,
                r.file.display()
            );
            match &r.verdict {
                Verdict::Agree { .. } => {}
                Verdict::Disagree {
                    param,
                    index,
                    expected,
                    actual,
                    ulps,
                    excused,
                } => writeln!(
                    f,
                    "{}[{}] {at}: buffer `{param}` first differs at index {index}: expected {expected} (interpreter), actual {actual} (recorded){}{}",
                    if *excused { "HELD" } else { "DISAGREE" },
                    codes::DISAGREE,
                    ulps.map_or_else(String::new, |u| format!(", {u} ulps apart")),
                    if *excused { ", excused by the held list" } else { "" }
                )?,
                Verdict::Undefined { kind, report } => writeln!(
                    f,
                    "UB {at}: the interpreter reports undefined behaviour ({kind}): {report}"
                )?,
                Verdict::Refused { message } => {
                    writeln!(f, "REFUSED[{}] {at}: {message}", codes::REPLAY_FAILED)?
                }
            }
        }
        for (kernel, line) in &self.stale {
            let held = self
                .held_path
                .as_ref()
                .map_or_else(|| "the held list".to_string(), |p| p.display().to_string());
            writeln!(
                f,
                "STALE[{}] kernel {kernel}: held at {held}:{line}, but every replayed record agrees exactly; remove the line",
                codes::STALE
            )?;
        }
        if !self.not_reached.is_empty() {
            writeln!(
                f,
                "NOT REACHED[{}] {} record(s) not replayed within the budget:",
                codes::NOT_REACHED,
                self.not_reached.len()
            )?;
            for p in &self.not_reached {
                writeln!(f, "  {}", p.display())?;
            }
        }
        write!(
            f,
            "{} replayed: {} agree, {} disagree, {} held, {} undefined behaviour, {} refused; {} stale; {} not reached",
            self.replayed.len(),
            self.count(|v| matches!(v, Verdict::Agree { .. })),
            self.count(|v| matches!(v, Verdict::Disagree { excused: false, .. })),
            self.count(|v| matches!(v, Verdict::Disagree { excused: true, .. })),
            self.count(|v| matches!(v, Verdict::Undefined { .. })),
            self.count(|v| matches!(v, Verdict::Refused { .. })),
            self.stale.len(),
            self.not_reached.len()
        )
    }
}

/// The records of `dir`, in order.
pub fn record_files(dir: &Path) -> Result<Vec<PathBuf>, RecordError> {
    let launches = launches_dir(dir);
    let entries = std::fs::read_dir(&launches).map_err(|e| RecordError::Malformed {
        path: launches.clone(),
        message: e.to_string(),
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

type Loaded = (Arc<VerifiedModule>, Arc<dyn ProgramImpl>);

struct Replayer {
    dir: PathBuf,
    device: Arc<dyn DeviceImpl>,
    stream: Arc<dyn StreamImpl>,
    modules: HashMap<String, Result<Loaded, String>>,
    held: BTreeMap<String, Held>,
}

/// Replays every record under `dir`.
pub fn replay_dir(dir: &Path, options: &Options) -> Result<Report, RecordError> {
    let files = record_files(dir)?;
    if files.is_empty() {
        return Err(RecordError::Empty {
            path: dir.to_path_buf(),
        });
    }
    let held = match &options.held {
        Some(p) => read_held(p)?,
        None => BTreeMap::new(),
    };
    let device: Arc<dyn DeviceImpl> = Arc::new(InterpDevice::new());
    let stream = device.create_stream().map_err(|e| RecordError::Malformed {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut r = Replayer {
        dir: dir.to_path_buf(),
        device,
        stream,
        modules: HashMap::new(),
        held,
    };
    let start = Instant::now();
    let mut report = Report {
        held_path: options.held.clone(),
        ..Report::default()
    };
    for (i, file) in files.iter().enumerate() {
        let remaining = match options.budget {
            Some(b) => match b.checked_sub(start.elapsed()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => {
                    report.not_reached.extend(files[i..].iter().cloned());
                    break;
                }
            },
            None => None,
        };
        match r.replay_one(file, remaining)? {
            Some(replayed) => {
                if let Verdict::Agree { .. } = replayed.verdict {
                    super::census::note_checked(&replayed.backend, &replayed.kernel);
                }
                report.replayed.push(replayed)
            }
            // The budget ran out inside the launch.
            None => report.not_reached.push(file.clone()),
        }
    }
    // A held kernel whose every replayed record agreed exactly is stale.
    for (kernel, h) in &r.held {
        let mut seen = false;
        let mut exact = true;
        for rec in report.replayed.iter().filter(|x| &x.kernel == kernel) {
            seen = true;
            if !matches!(rec.verdict, Verdict::Agree { max_ulps: 0 }) {
                exact = false;
            }
        }
        if seen && exact {
            report.stale.push((kernel.clone(), h.line));
        }
    }
    Ok(report)
}

fn malformed(path: &Path, message: impl Into<String>) -> RecordError {
    RecordError::Malformed {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

impl Replayer {
    fn module(&mut self, hash: &str) -> Result<Loaded, String> {
        if let Some(m) = self.modules.get(hash) {
            return m.clone();
        }
        let path = modules_dir(&self.dir).join(format!("{hash}.xk"));
        let loaded = (|| {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("error[{}]: {}: {e}", codes::MODULE, path.display()))?;
            if content_hash(text.as_bytes()) != hash {
                return Err(format!(
                    "error[{}]: {}: the text does not match its hash",
                    codes::MODULE,
                    path.display()
                ));
            }
            let module = crate::ir::parse(&text).map_err(|d| {
                format!(
                    "error[{}]: {}",
                    codes::MODULE,
                    d.render(&path.display().to_string())
                )
            })?;
            let verified = Arc::new(module.verify().map_err(|d| {
                format!(
                    "error[{}]: {}",
                    codes::MODULE,
                    d.render(&path.display().to_string())
                )
            })?);
            let program = self
                .device
                .load(&verified)
                .map_err(|e| format!("error[{}]: {e}", codes::MODULE))?;
            Ok((verified, program))
        })();
        self.modules.insert(hash.to_string(), loaded.clone());
        loaded
    }

    fn blob(&self, hash: &str) -> Result<Vec<u8>, RecordError> {
        let path = blobs_dir(&self.dir).join(format!("{hash}.zst"));
        let bad = |message: String| RecordError::Blob {
            path: path.clone(),
            message,
        };
        let z = std::fs::read(&path).map_err(|e| bad(e.to_string()))?;
        let bytes = zstd::decode_all(&z[..]).map_err(|e| bad(e.to_string()))?;
        if content_hash(&bytes) != hash {
            return Err(bad("the contents do not match their hash".into()));
        }
        Ok(bytes)
    }

    /// Replays one record; `None` when the budget ran out during its launch.
    fn replay_one(
        &mut self,
        file: &Path,
        budget: Option<Duration>,
    ) -> Result<Option<Replayed>, RecordError> {
        let text = std::fs::read_to_string(file).map_err(|e| malformed(file, e.to_string()))?;
        let rec: Value = serde_json::from_str(&text).map_err(|e| malformed(file, e.to_string()))?;
        if rec.get("format").and_then(Value::as_str) != Some(super::FORMAT) {
            return Err(malformed(
                file,
                format!("not an `{}` record", super::FORMAT),
            ));
        }
        let field = |name: &str| {
            rec.get(name)
                .ok_or_else(|| malformed(file, format!("no `{name}`")))
        };
        let string = |name: &str| -> Result<String, RecordError> {
            field(name)?
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| malformed(file, format!("`{name}` is not a string")))
        };
        let dims = |name: &str| -> Result<[u32; 3], RecordError> {
            let v: Vec<u32> = field(name)?
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_u64().map(|x| x as u32))
                        .collect()
                })
                .unwrap_or_default();
            v.try_into()
                .map_err(|_| malformed(file, format!("`{name}` is not three integers")))
        };
        let kernel = string("kernel")?;
        let backend = string("backend")?;
        let module_hash = string("module")?;
        let launch = Launch {
            grid: dims("grid")?,
            block: dims("block")?,
            shared_bytes: field("shared_bytes")?.as_u64().unwrap_or(0) as u32,
            shared_opt_in: field("shared_opt_in")?.as_bool().unwrap_or(false),
            wave: rec.get("wave").and_then(Value::as_u64).map(|w| w as u32),
            deadline: budget,
            interp: Default::default(),
        };
        let done = |verdict| {
            Ok(Some(Replayed {
                file: file.to_path_buf(),
                kernel: kernel.clone(),
                backend: backend.clone(),
                verdict,
            }))
        };
        let (module, program) = match self.module(&module_hash) {
            Ok(m) => m,
            Err(message) => return done(Verdict::Refused { message }),
        };
        let Some(handle) = module.kernel(&kernel) else {
            return done(Verdict::Refused {
                message: format!("the recorded module has no kernel `{kernel}`"),
            });
        };
        let function = module.function(handle);
        let args = field("args")?
            .as_array()
            .ok_or_else(|| malformed(file, "`args` is not a list"))?;
        if args.len() != function.params.len() {
            return Err(malformed(
                file,
                format!(
                    "{} arguments for the {} parameters of `{kernel}`",
                    args.len(),
                    function.params.len()
                ),
            ));
        }
        // Arguments, and for each written buffer: its index, element type and recorded result.
        let mut bound = Vec::with_capacity(args.len());
        let mut written: Vec<(usize, ElemType, Vec<u8>)> = Vec::new();
        for (i, (arg, param)) in args.iter().zip(&function.params).enumerate() {
            if let Some(hex) = arg.get("value").and_then(Value::as_str) {
                let bytes = unhex(hex).ok_or_else(|| malformed(file, "a value is not hex"))?;
                let ty = match param.ty {
                    Type::Scalar(s) => ElemType::scalar(s),
                    Type::Vector(s, n) => ElemType::vector(s, n),
                    Type::Tag(_) => ElemType::scalar(Scalar::U32),
                    _ => {
                        return Err(malformed(
                            file,
                            format!("a value for the buffer parameter `{}`", param.name),
                        ))
                    }
                };
                let v = HostValue::from_le_bytes(ty, &bytes).ok_or_else(|| {
                    malformed(
                        file,
                        format!("the value of `{}` has the wrong size", param.name),
                    )
                })?;
                bound.push(DeviceArg::Value(v));
                continue;
            }
            let Type::Buffer { elem, .. } = param.ty else {
                return Err(malformed(
                    file,
                    format!("a buffer for the value parameter `{}`", param.name),
                ));
            };
            let before = self.blob(
                arg.get("before")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(file, "a buffer without `before`"))?,
            )?;
            let writable = arg
                .get("writable")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if let Some(after) = arg.get("after").and_then(Value::as_str) {
                let after = self.blob(after)?;
                if after.len() != before.len() {
                    return Err(malformed(
                        file,
                        "a buffer's before and after differ in size",
                    ));
                }
                written.push((i, elem, after));
            }
            let memory = match self.device.alloc(before.len(), Init::Any) {
                Ok(m) => m,
                Err(e) => {
                    return done(Verdict::Refused {
                        message: e.to_string(),
                    })
                }
            };
            if let Err(e) = self.device.write(self.stream.as_ref(), &memory, 0, &before) {
                return done(Verdict::Refused {
                    message: e.to_string(),
                });
            }
            bound.push(DeviceArg::Buffer(BufferBinding {
                memory,
                offset: 0,
                len: before.len(),
                elem,
                writable,
            }));
        }
        let k: Arc<dyn KernelImpl> = match program.kernel(&kernel, function) {
            Ok(k) => k,
            Err(e) => {
                return done(Verdict::Refused {
                    message: e.to_string(),
                })
            }
        };
        match k.launch(self.stream.as_ref(), &launch, &bound) {
            Ok(()) => {}
            Err(crate::hal::launch::LaunchError::Undefined { kind, report, .. }) => {
                return done(Verdict::Undefined { kind, report })
            }
            Err(crate::hal::launch::LaunchError::Deadline { .. }) if budget.is_some() => {
                return Ok(None)
            }
            Err(e) => {
                return done(Verdict::Refused {
                    message: e.to_string(),
                })
            }
        }
        let held = self.held.get(&kernel);
        let tolerance = held.map_or(0, |h| h.ulps);
        let excused = held.is_some_and(|h| h.excused);
        let mut max_ulps = 0;
        for (i, elem, recorded) in written {
            let DeviceArg::Buffer(b) = &bound[i] else {
                continue;
            };
            let ours = match self
                .device
                .read(self.stream.as_ref(), &b.memory, 0, b.len)
                .and_then(|t| t.wait())
            {
                Ok(bytes) => bytes,
                Err(e) => {
                    return done(Verdict::Refused {
                        message: e.to_string(),
                    })
                }
            };
            match compare(elem.scalar, &ours, &recorded, tolerance) {
                Ok(u) => max_ulps = max_ulps.max(u),
                Err((index, e, a, ulps)) => {
                    return done(Verdict::Disagree {
                        param: function.params[i].name.clone(),
                        index,
                        expected: e,
                        actual: a,
                        ulps,
                        excused,
                    })
                }
            }
        }
        done(Verdict::Agree { max_ulps })
    }
}

/// The distance between two floats in representable values, both given as ordered bits.
fn ordered(bits: u64, width: u32) -> i128 {
    let sign = 1u64 << (width - 1);
    if bits & sign != 0 {
        -((bits & !sign) as i128) - 1
    } else {
        bits as i128
    }
}

/// Compares two buffers of `scalar`s: `Ok(largest ulps)` when every float is within
/// `tolerance` and every integer equal, else the first differing index with the expected
/// (`ours`) and actual (`recorded`) values shown.
pub fn compare(
    scalar: Scalar,
    ours: &[u8],
    recorded: &[u8],
    tolerance: u64,
) -> Result<u64, (usize, String, String, Option<u64>)> {
    let size = scalar.size() as usize;
    let mut max = 0u64;
    for (i, (a, b)) in ours.chunks(size).zip(recorded.chunks(size)).enumerate() {
        let mut x = [0u8; 8];
        let mut y = [0u8; 8];
        x[..a.len()].copy_from_slice(a);
        y[..b.len()].copy_from_slice(b);
        let (x, y) = (u64::from_le_bytes(x), u64::from_le_bytes(y));
        if x == y {
            continue;
        }
        let ulps = match scalar {
            Scalar::F16 | Scalar::F32 | Scalar::F64 => {
                let width = scalar.bits();
                let nan = |v: u64| match scalar {
                    Scalar::F16 => half::f16::from_bits(v as u16).is_nan(),
                    Scalar::F32 => f32::from_bits(v as u32).is_nan(),
                    _ => f64::from_bits(v).is_nan(),
                };
                if nan(x) && nan(y) {
                    continue;
                }
                if nan(x) || nan(y) {
                    u64::MAX
                } else {
                    (ordered(x, width) - ordered(y, width)).unsigned_abs() as u64
                }
            }
            _ => u64::MAX,
        };
        if ulps > tolerance {
            let shown = (ulps != u64::MAX).then_some(ulps);
            return Err((i, format_scalar(scalar, x), format_scalar(scalar, y), shown));
        }
        max = max.max(ulps);
    }
    Ok(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_compare_in_ulps_and_nans_agree() {
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let one_up = f32::from_bits(1.0f32.to_bits() + 1);
        assert_eq!(
            compare(Scalar::F32, &f(&[1.0, f32::NAN]), &f(&[1.0, -f32::NAN]), 0),
            Ok(0)
        );
        assert_eq!(compare(Scalar::F32, &f(&[1.0]), &f(&[one_up]), 1), Ok(1));
        assert_eq!(
            compare(Scalar::F32, &f(&[2.0, 1.0]), &f(&[2.0, one_up]), 0),
            Err((1, "1.0".into(), format!("{one_up:?}"), Some(1)))
        );
        // -0.0 and +0.0 are one apart.
        assert_eq!(compare(Scalar::F32, &f(&[0.0]), &f(&[-0.0]), 1), Ok(1));
        assert!(compare(Scalar::I32, &5i32.to_le_bytes(), &6i32.to_le_bytes(), 100).is_err());
    }

    #[test]
    fn held_lists_parse_and_refuse_bad_lines() {
        let p = Path::new("held.txt");
        let h = parse_held(p, "# c\nk ulps=4 -- plan 3\nj excused -- plan 9 # x\n").unwrap();
        assert_eq!(h["k"].ulps, 4);
        assert!(h["j"].excused);
        for bad in [
            "k ulps=4",
            "k ulps=x -- p",
            "k sometimes -- p",
            "k ulps=1 --  ",
            "k ulps=1 -- a\nk excused -- b",
        ] {
            assert_eq!(
                parse_held(p, bad).unwrap_err().code(),
                codes::HELD_LIST,
                "{bad}"
            );
        }
    }
}
