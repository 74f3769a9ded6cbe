//! The file-test runner: executes the `run` blocks of kernel files on devices and judges
//! their expectations (docs/text-format.md, "Run blocks"; DESIGN.md, "Conventions").
//!
//! Each file is parsed ([`crate::ir::parse_file`]) and verified; each run block becomes one
//! *case* per device. A case builds its arguments from the block's initialisers, typed by the
//! kernel's parameters, launches once, and checks every `expect`:
//!
//! - `expect NAME = VALUE;` compares the buffer with the value: integers and `bool` bit for
//!   bit; floats within the block's `ulps` (distance in representable values, where `-0.0` and
//!   `+0.0` are one apart, so `ulps = 0` is bit-exact), and any NaN equals any NaN.
//! - `expect NAME = interp;` runs the same block on the reference interpreter (at the wave width
//!   the backend built the kernel at) and compares the same way. On the interpreter itself the
//!   expectation is skipped, never passed.
//! - `expect ub KIND;` requires the interpreter to report undefined behaviour of that kind
//!   (`XPU-REF02`). Other backends answer it as [`ub_answer`] says: the CPU must refuse the
//!   kinds it checks with its own code (`XPU-L013` out of bounds, `XPU-L015` division by zero,
//!   `XPU-L010` a broken `align`), and runs the kinds it does not detect (the process must
//!   survive; the case is skipped, saying so); GPUs run the case in checked mode
//!   (docs/checked-mode.md), which refuses out-of-bounds memory accesses (`XPU-L013`) and broken
//!   `align` statements (`XPU-L010`), and skip the kinds it does not detect without launching.
//! - `expect refused CODE;` requires verification, the kernel lookup or the launch to be refused
//!   with that code (the interpreter's `XPU-REF01`/`XPU-REF02` are judged on the interpreter
//!   only, like `expect ub`).
//!
//! A case passes when every expectation that applies holds (a block with none passes when its
//! launch succeeds), is skipped when none applies, and fails otherwise. The report prints one
//! line per case, `PASS|FAIL|SKIP  file:line  kernel  backend`, a failure's detail indented
//! beneath (the first mismatching index with expected and actual values), and closes with
//! `N passed, N failed` (`, N skipped` when any were).
//!
//! `random(len, lo, hi, seed S)` is splitmix64, specified in docs/text-format.md so that
//! expected values can be computed outside Rust; [`random_slot`] is that formula.

use crate::hal::kernel_function;
use crate::hal::launch::{format_scalar, type_name, ArgValue, HostValue, Launch, LaunchError};
use crate::hal::{Backend, DeviceError, Init, ProgramOptions};
use crate::ir::text::run::{ArgInit, Expect, RunSpec, Value};
use crate::ir::{Access, Diagnostics, ElemType, Function, Scalar, Type, VerifiedModule};
use crate::runtime::buffer::RawBuffer;
use crate::runtime::device::{Device, Program};
use crate::runtime::stream::KernelStream;
use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// How a case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every expectation held.
    Pass,
    /// Failed, with the detail printed beneath the case's line.
    Fail(String),
    /// Nothing in the case applies to this backend, with the reason.
    Skip(String),
}

/// One run block on one backend (or, for a file that cannot be parsed, the file itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The file as the user named it.
    pub file: String,
    /// The line of the `run` block (of the first diagnostic, for a file-level failure).
    pub line: u32,
    /// The kernel, or `-` for a file-level failure.
    pub kernel: String,
    /// The backend's name, or `-` for a file-level failure.
    pub backend: String,
    /// How it ended.
    pub outcome: Outcome,
}

impl Case {
    /// The case as JSON (docs/json.md): `file`, `line`, `kernel`, `backend`, `outcome`
    /// (`pass`, `fail`, `skip`) and `detail` (a failure's detail or a skip's reason, else
    /// null).
    pub fn to_json(&self) -> serde_json::Value {
        let (outcome, detail) = match &self.outcome {
            Outcome::Pass => ("pass", None),
            Outcome::Fail(d) => ("fail", Some(d.as_str())),
            Outcome::Skip(d) => ("skip", Some(d.as_str())),
        };
        serde_json::json!({
            "type": "case",
            "file": self.file,
            "line": self.line,
            "kernel": self.kernel,
            "backend": self.backend,
            "outcome": outcome,
            "detail": detail,
        })
    }
}

impl fmt::Display for Case {
    /// `PASS  file:line  kernel  backend`, and a failure's detail or a skip's reason indented
    /// beneath.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail(_) => "FAIL",
            Outcome::Skip(_) => "SKIP",
        };
        write!(
            f,
            "{tag}  {}:{}  {}  {}",
            self.file, self.line, self.kernel, self.backend
        )?;
        if let Outcome::Fail(detail) | Outcome::Skip(detail) = &self.outcome {
            for line in detail.lines() {
                write!(f, "\n    {line}")?;
            }
        }
        Ok(())
    }
}

/// Counts of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases skipped (nothing in them applies to the backend).
    pub skipped: usize,
}

impl Summary {
    /// Counts one case.
    pub fn add(&mut self, case: &Case) {
        match case.outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail(_) => self.failed += 1,
            Outcome::Skip(_) => self.skipped += 1,
        }
    }

    /// Every case that ran, skipped ones included.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.skipped
    }

    /// The closing line: `N passed, N failed`, with `, N skipped` when any were.
    pub fn closing_line(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            line.push_str(&format!(", {} skipped", self.skipped));
        }
        line
    }
}

/// The devices a `--backend` argument names: one backend by name, `all` (every backend
/// present), or `best` (the device selected for this process, [`Device::current`]).
pub fn select_devices(backend: &str) -> Result<Vec<Device>, DeviceError> {
    match backend.trim() {
        "best" => Ok(vec![Device::current()?]),
        "all" => Device::available().into_iter().map(Device::open).collect(),
        name => {
            let b = Backend::from_name(name).ok_or_else(|| DeviceError::UnknownBackend {
                name: name.to_string(),
            })?;
            Ok(vec![Device::open(b)?])
        }
    }
}

/// Runs kernel files on a fixed set of devices.
pub struct Runner {
    devices: Vec<Device>,
    interp: Device,
    deadline: Option<std::time::Duration>,
    options: ProgramOptions,
    /// Cases (in report order) passed over without running or reporting them: those a
    /// process that lost its device ran before it handed on ([`Runner::with_resume`]).
    skip: usize,
    /// Cases met so far, skipped ones included.
    seen: std::cell::Cell<usize>,
    /// The number of cases met when a CUDA/HIP device could not be recovered after a fault
    /// (`XPU-D016`): the run stops there.
    lost_at: std::cell::Cell<Option<usize>>,
    /// `xpu run --bundle`: programs are loaded from this bundle ([`Runner::with_bundle`]).
    bundle: Option<Arc<crate::bundle::Bundle>>,
    /// One line per (file, device) loaded from the bundle: how many kernels were lowered.
    bundle_lines: std::cell::RefCell<Vec<String>>,
}

impl Runner {
    /// A runner for `devices` (the interpreter is opened too, as the oracle of `interp`
    /// expectations).
    pub fn new(devices: Vec<Device>) -> Result<Runner, DeviceError> {
        Ok(Runner {
            devices,
            interp: Device::open(Backend::Interp)?,
            deadline: None,
            options: ProgramOptions {
                checked: ProgramOptions::from_env()?.checked,
                ub_traps: true,
                print: ProgramOptions::from_env()?.print,
            },
            skip: 0,
            seen: std::cell::Cell::new(0),
            lost_at: std::cell::Cell::new(None),
            bundle: None,
            bundle_lines: std::cell::RefCell::new(Vec::new()),
        })
    }

    /// Loads every file's module from `bundle` ([`Device::load_from_bundle`]) instead of
    /// lowering it: the bundle's code for each device is used, and kernels it has none for
    /// are lowered from its IR. A file whose module is not the bundle's canonical IR fails
    /// its cases with `XPU-B013`. [`Runner::take_bundle_lines`] says, per file and device,
    /// how many kernels were lowered after all.
    pub fn with_bundle(mut self, bundle: crate::bundle::Bundle) -> Runner {
        self.bundle = Some(Arc::new(bundle));
        self
    }

    /// The lines about bundle loads since the last call (`xpu run --bundle`): per file and
    /// device, the kernels the bundle had code for and the lowerings the run needed.
    pub fn take_bundle_lines(&self) -> Vec<String> {
        std::mem::take(&mut *self.bundle_lines.borrow_mut())
    }

    /// The program of `verified` on `device`: from the bundle where one is set (`printed`,
    /// the file's module in canonical form, must be its IR), else lowered with the runner's
    /// options.
    fn program(
        &self,
        file: &str,
        printed: Option<&str>,
        verified: &Arc<VerifiedModule>,
        device: &Device,
    ) -> Result<Program, String> {
        let Some(bundle) = &self.bundle else {
            return device
                .load_with(verified, self.options)
                .map_err(|e| e.to_string());
        };
        if printed != Some(bundle.ir()) {
            return Err(format!(
                "error[{}]: {file} is not the module of bundle {} (it was built from another \
                 file or version of it)",
                crate::bundle::codes::OTHER_MODULE,
                bundle.path()
            ));
        }
        device.load_from_bundle(bundle).map_err(|e| e.to_string())
    }

    /// Records how the bundle served `program` on `device` (after its cases ran).
    fn note_bundle_use(&self, file: &str, device: &Device, program: &Program) {
        let Some(bundle) = &self.bundle else {
            return;
        };
        let backend = device.backend();
        let target = device.implementation().code_target();
        let with_code = bundle
            .entries()
            .filter(|e| e.backend == backend && e.code.is_some())
            .filter(|e| target.as_deref() == Some(e.target))
            .count();
        let lowered = program
            .lowerings()
            .map_or("not counted by this backend".to_string(), |n| {
                format!("{n} lowered here")
            });
        self.bundle_lines.borrow_mut().push(format!(
            "bundle  {file}  {}  {with_code} kernels with code for this device ({}) in the \
             bundle, {lowered}",
            backend.name(),
            target.as_deref().unwrap_or("the IR is the code"),
        ));
    }

    /// Passes over the first `skip` cases without running or reporting them: the cases an
    /// earlier process ran before its device was lost (`xpu run` goes on in a new process,
    /// [`run_command`]).
    pub fn with_resume(mut self, skip: usize) -> Runner {
        self.skip = skip;
        self
    }

    /// The number of cases met (run, or passed over by [`Runner::with_resume`]) when a device
    /// could not be recovered after a fault and the run stopped; `None` if it did not stop.
    pub fn lost_at(&self) -> Option<usize> {
        self.lost_at.get()
    }

    /// Counts one case; whether to run and report it (not one passed over, and no device
    /// lost).
    fn next_case(&self) -> bool {
        if self.lost_at.get().is_some() {
            return false;
        }
        let n = self.seen.get();
        self.seen.set(n + 1);
        n >= self.skip
    }

    /// Sets the options programs are loaded with (default: ub-traps on, as in the test suites;
    /// checked mode as `CAJETA_XPU_CHECKED` says). A case of `expect ub` on a GPU backend
    /// always runs in checked mode.
    pub fn with_options(mut self, options: ProgramOptions) -> Runner {
        self.options = options;
        self
    }

    /// Applies what `xpu run --checked` and `--ub-traps` ask for; an option left `None` keeps
    /// the runner's default.
    pub fn with_run_options(self, options: RunOptions) -> Runner {
        let o = self.options;
        self.with_options(ProgramOptions {
            checked: options.checked.unwrap_or(o.checked),
            ub_traps: options.ub_traps.unwrap_or(o.ub_traps),
            ..o
        })
    }

    /// Sets the deadline of every case whose run block names none (`xpu run --deadline`;
    /// `None`, the default here: no limit).
    pub fn with_deadline(mut self, deadline: Option<std::time::Duration>) -> Runner {
        self.deadline = deadline;
        self
    }

    /// The devices the runner runs cases on.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Runs every `.xk` file under `paths` (folders walked in sorted order), printing each
    /// case as it completes and the closing line. An unreadable path is an I/O error; a file
    /// that does not parse is a failed case.
    pub fn run_paths(&self, paths: &[PathBuf], out: &mut dyn Write) -> io::Result<Summary> {
        let files = super::kernel_files(paths)?;
        if files.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no .xk files under the given paths",
            ));
        }
        let mut summary = Summary::default();
        for file in files {
            self.run_file(&file, &mut |case| {
                summary.add(case);
                // What the case's launches printed (the oracle's too), before its verdict.
                for line in crate::hal::debug::take_printed() {
                    writeln!(out, "  print {line}")?;
                }
                writeln!(out, "{case}")
            })?;
            for line in self.take_bundle_lines() {
                writeln!(out, "{line}")?;
            }
            if self.lost_at.get().is_some() {
                return Ok(summary);
            }
        }
        writeln!(out, "{}", summary.closing_line())?;
        Ok(summary)
    }

    /// Runs the run blocks of the file at `file`, calling `report` with each case as it
    /// completes. An unreadable file is an I/O error; one that is not UTF-8 or does not parse
    /// is a failed case.
    pub fn run_file(
        &self,
        file: &std::path::Path,
        report: &mut dyn FnMut(&Case) -> io::Result<()>,
    ) -> io::Result<()> {
        let source = std::fs::read(file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
        let shown = file.display().to_string();
        match String::from_utf8(source) {
            Ok(source) => self.run_source(&shown, &source, report),
            Err(_) => report(&Case {
                file: shown,
                line: 1,
                kernel: "-".into(),
                backend: "-".into(),
                outcome: Outcome::Fail("the file is not UTF-8".into()),
            }),
        }
    }

    /// Runs the run blocks of one file's `source`, calling `report` with each case as it
    /// completes. `file` is how the file is named in the report.
    pub fn run_source(
        &self,
        file: &str,
        source: &str,
        report: &mut dyn FnMut(&Case) -> io::Result<()>,
    ) -> io::Result<()> {
        let case = |line: u32, kernel: &str, backend: &str, outcome: Outcome| Case {
            file: file.to_string(),
            line,
            kernel: kernel.to_string(),
            backend: backend.to_string(),
            outcome,
        };
        let (module, specs) = match crate::ir::parse_file(source) {
            Ok(parsed) => parsed,
            Err(diags) => {
                if !self.next_case() {
                    return Ok(());
                }
                let line = diags.0.first().map_or(1, |d| d.span.line);
                return report(&case(line, "-", "-", Outcome::Fail(diags.render(file))));
            }
        };
        // The canonical text of the module, which a bundle's IR must be (`--bundle`).
        let printed = self.bundle.as_ref().map(|_| crate::ir::print(&module));
        let verified = match module.verify() {
            Ok(v) => Arc::new(v),
            Err(diags) => {
                if specs.is_empty() {
                    if !self.next_case() {
                        return Ok(());
                    }
                    let line = diags.0.first().map_or(1, |d| d.span.line);
                    return report(&case(line, "-", "-", Outcome::Fail(diags.render(file))));
                }
                for spec in &specs {
                    for device in &self.devices {
                        if !self.next_case() {
                            continue;
                        }
                        let outcome =
                            refused_by_verifier(spec, &diags, file, device.backend().name());
                        report(&case(
                            spec.span.line,
                            &spec.kernel,
                            device.backend().name(),
                            outcome,
                        ))?;
                    }
                }
                return Ok(());
            }
        };
        let interp = self.interp.load(&verified);
        for device in &self.devices {
            let program = self.program(file, printed.as_deref(), &verified, device);
            for spec in &specs {
                if !self.next_case() {
                    continue;
                }
                let mut timed;
                let spec = if spec.deadline.is_none() && self.deadline.is_some() {
                    timed = spec.clone();
                    timed.deadline = self.deadline;
                    &timed
                } else {
                    spec
                };
                let outcome = match (&program, &interp) {
                    (Ok(program), Ok(interp)) => run_case(spec, program, interp),
                    (Err(e), _) => Outcome::Fail(e.clone()),
                    (_, Err(e)) => Outcome::Fail(e.to_string()),
                };
                report(&case(
                    spec.span.line,
                    &spec.kernel,
                    device.backend().name(),
                    outcome,
                ))?;
                // A CUDA/HIP device that could not be recovered after a fault runs nothing
                // more in this process: the run stops, and `xpu run` goes on in a new one.
                if unrecovered(device) {
                    self.lost_at.set(Some(self.seen.get()));
                    return Ok(());
                }
            }
            if let Ok(program) = &program {
                self.note_bundle_use(file, device, program);
            }
        }
        Ok(())
    }
}

/// Whether `device` is a CUDA or HIP device lost for this process: a sticky fault the driver
/// does not let the process recover from (`XPU-D016`, docs/checked-mode.md).
fn unrecovered(device: &Device) -> bool {
    matches!(device.backend(), Backend::Cuda | Backend::Hip)
        && matches!(
            RawBuffer::alloc_with(device, 4, Init::Any),
            Err(e) if e.code() == crate::hal::seam::codes::UNRECOVERED
        )
}

/// The outcome of a case whose module the verifier refused: a pass exactly when the case
/// expects a refusal with one of the verifier's codes.
fn refused_by_verifier(spec: &RunSpec, diags: &Diagnostics, file: &str, backend: &str) -> Outcome {
    let expected: Vec<&str> = spec
        .expects
        .iter()
        .filter_map(|e| e.refusal_on(backend))
        .collect();
    if !expected.is_empty()
        && expected
            .iter()
            .all(|c| diags.0.iter().any(|d| d.code == *c))
    {
        Outcome::Pass
    } else {
        Outcome::Fail(format!(
            "the module does not verify:\n{}",
            diags.render(file)
        ))
    }
}

/// Runs one block on one device and judges it.
pub fn run_case(spec: &RunSpec, program: &Program, interp: &Program) -> Outcome {
    let backend = program.device().backend();
    let on_interp = backend == Backend::Interp;
    // The codes this backend may refuse the launch with (any of them).
    let refusals: Vec<String> = spec
        .expects
        .iter()
        .filter_map(|e| e.refusal_on(backend.name()))
        .map(str::to_string)
        .collect();
    let refusal = refusals.first().cloned();
    let ub = spec.expects.iter().find_map(|e| match e {
        Expect::Ub { kind, .. } => Some(kind.clone()),
        _ => None,
    });
    if let (Some(kind), false) = (&ub, on_interp) {
        return run_ub_case(spec, program, interp, kind);
    }
    // `XPU-REF01`/`XPU-REF02` are the interpreter's refusals.
    if !on_interp && refusal.as_deref().is_some_and(|c| c.starts_with("XPU-REF")) {
        return Outcome::Skip("the interpreter's refusal is judged on the interpreter only".into());
    }

    let Some(function) = kernel_function(program.module(), &spec.kernel) else {
        return match refusal {
            Some(code) if code == crate::hal::launch::codes::NO_CODE => Outcome::Pass,
            _ => Outcome::Fail(format!("the file has no kernel named `{}`", spec.kernel)),
        };
    };
    let wave = if on_interp { spec.wave } else { None };
    // A GPU cannot cancel a kernel: one expected to outlive its deadline would keep the device
    // busy for good (CUDA and NVIDIA's Vulkan driver report the deadline and leave it
    // running), so such a case is not launched there.
    if !on_interp
        && !matches!(program.device().backend(), Backend::Cpu)
        && refusals
            .iter()
            .any(|c| c == crate::hal::launch::codes::DEADLINE)
    {
        return Outcome::Skip(format!(
            "not launched: the {} backend cannot cancel a kernel that outlives its deadline",
            program.device().backend().name()
        ));
    }
    let launched = launch_spec(spec, function, program, wave);

    let (kernel, buffers) = match launched {
        Err(Failure::Spec(message)) => return Outcome::Fail(message),
        Err(Failure::Launch(e)) => {
            // A device that cannot run the case (a capability it lacks, one of its limits,
            // its driver's loop limit: `LaunchError::refused_by_device`) has not failed it.
            if !on_interp && e.refused_by_device() && !refusals.iter().any(|c| c == e.code()) {
                return Outcome::Skip(e.to_string());
            }
            return judge_refusal(e, &refusals, ub.as_deref());
        }
        Err(Failure::Device(e)) => {
            return if refusals.iter().any(|c| c == e.code()) {
                Outcome::Pass
            } else {
                Outcome::Fail(e.to_string())
            };
        }
        Ok(done) => done,
    };
    if refusal.is_some() {
        return Outcome::Fail(format!(
            "expected the launch to be refused with {}, but it ran",
            refusals.join(" or ")
        ));
    }
    if let Some(kind) = ub {
        return Outcome::Fail(format!(
            "expected undefined behaviour ({kind}), but the interpreter reported none"
        ));
    }

    let mut checked = 0;
    let mut skipped_interp = false;
    let mut interp_result: Option<Result<Vec<Vec<u8>>, String>> = None;
    for expect in &spec.expects {
        match expect {
            Expect::Buffer { name, value, .. } => {
                let Some((index, elem)) = buffer_param(function, name) else {
                    return Outcome::Fail(format!("`expect {name}`: no buffer parameter `{name}`"));
                };
                let expected = match slots(value, elem) {
                    Ok(s) => s,
                    Err(e) => return Outcome::Fail(format!("`expect {name}`: {e}")),
                };
                let actual = match download(&buffers[index]) {
                    Ok(bytes) => bytes_to_slots(&bytes, elem.scalar),
                    Err(e) => return Outcome::Fail(format!("reading `{name}`: {e}")),
                };
                if let Err(m) = compare(name, elem, &expected, &actual, spec.ulps, "expected") {
                    return Outcome::Fail(m);
                }
                checked += 1;
            }
            Expect::Interp { name, .. } => {
                let Some((index, elem)) = buffer_param(function, name) else {
                    return Outcome::Fail(format!("`expect {name}`: no buffer parameter `{name}`"));
                };
                if on_interp {
                    skipped_interp = true;
                    continue;
                }
                let reference = interp_result.get_or_insert_with(|| {
                    // The interpreter models the wave the backend built the kernel at.
                    let wave = kernel.manifest().built_wave.or(spec.wave);
                    match launch_spec(spec, function, interp, wave) {
                        Ok((_, bufs)) => bufs
                            .iter()
                            .map(|b| download(b).map_err(|e| e.to_string()))
                            .collect(),
                        Err(Failure::Spec(m)) => Err(m),
                        Err(Failure::Launch(e)) => Err(format!("the interpreter: {e}")),
                        Err(Failure::Device(e)) => Err(format!("the interpreter: {e}")),
                    }
                });
                let reference = match reference {
                    Ok(r) => r,
                    Err(e) => return Outcome::Fail(e.clone()),
                };
                let expected = bytes_to_slots(&reference[index], elem.scalar);
                let actual = match download(&buffers[index]) {
                    Ok(bytes) => bytes_to_slots(&bytes, elem.scalar),
                    Err(e) => return Outcome::Fail(format!("reading `{name}`: {e}")),
                };
                if let Err(m) = compare(name, elem, &expected, &actual, spec.ulps, "interp") {
                    return Outcome::Fail(m);
                }
                checked += 1;
            }
            Expect::Ub { .. } | Expect::Refused { .. } => {}
        }
    }
    if checked == 0 && skipped_interp {
        return Outcome::Skip("`expect = interp` on the interpreter itself".into());
    }
    if checked > 0 {
        // The kernel's output was compared and agreed: it counts for the census (§7).
        crate::record::census::note_checked(backend.name(), &spec.kernel);
    }
    Outcome::Pass
}

/// What a backend other than the interpreter does with undefined behaviour of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UbAnswer {
    /// The launch is refused with this code (a checked mode).
    Refuses(&'static str),
    /// The backend does not detect it: the case runs (the process must survive it), its
    /// result is undefined and not judged.
    Undetected,
    /// The backend has no checked mode: the case is not launched.
    NotLaunched,
}

/// How `backend` answers undefined behaviour of `kind` (a [`UbKind`](crate::interp) name);
/// `wave_lane` when the interpreter reports an out-of-range wave lane rather than an index
/// into memory (the CPU masks such lanes into the wave, docs/cpu-backend.md).
pub fn ub_answer(backend: Backend, kind: &str, wave_lane: bool) -> UbAnswer {
    use crate::hal::launch::codes;
    match backend {
        // Checked mode (the UB cases of GPU backends load their program with it) reports
        // out-of-bounds accesses to memory and broken `align` statements.
        Backend::Cuda | Backend::Hip | Backend::Vulkan => match kind {
            "out_of_bounds" if !wave_lane => UbAnswer::Refuses(codes::OUT_OF_BOUNDS),
            "misaligned" => UbAnswer::Refuses(codes::BROKEN_ALIGN),
            _ => UbAnswer::NotLaunched,
        },
        // The oracle reports every kind (`XPU-REF02`).
        Backend::Interp => UbAnswer::Refuses(codes::UNDEFINED_BEHAVIOR),
        Backend::Cpu => match kind {
            "out_of_bounds" if !wave_lane => UbAnswer::Refuses(codes::OUT_OF_BOUNDS),
            "div_by_zero" => UbAnswer::Refuses(codes::DEVICE),
            "misaligned" => UbAnswer::Refuses(codes::BROKEN_ALIGN),
            _ => UbAnswer::Undetected,
        },
    }
}

/// A case of `expect ub KIND;` on a backend other than the interpreter (see [`ub_answer`]).
fn run_ub_case(spec: &RunSpec, program: &Program, interp: &Program, kind: &str) -> Outcome {
    let backend = program.device().backend();
    let Some(function) = kernel_function(program.module(), &spec.kernel) else {
        return Outcome::Fail(format!("the file has no kernel named `{}`", spec.kernel));
    };
    // The interpreter's report tells a wave lane from a memory index (for `out_of_bounds`).
    let wave_lane = kind == "out_of_bounds"
        && match launch_spec(spec, function, interp, spec.wave) {
            Err(Failure::Launch(LaunchError::Undefined { report, .. })) => {
                report.contains(" lane ")
            }
            _ => false,
        };
    let mut answer = ub_answer(backend, kind, wave_lane);
    // The CPU tests `align` statements only under ub-traps (`xpu run --ub-traps off`).
    if matches!(backend, Backend::Cpu) && kind == "misaligned" && !program.options().ub_traps {
        answer = UbAnswer::Undetected;
    }
    if answer == UbAnswer::NotLaunched {
        return Outcome::Skip(format!(
            "undefined behaviour ({kind}) is not launched on {}: its checked mode does not \
             detect it",
            backend.name()
        ));
    }
    // GPU backends detect what they do in checked mode: the case runs in a checked program.
    let checked;
    let program = if matches!(backend, Backend::Interp | Backend::Cpu) || program.options().checked
    {
        program
    } else {
        match program
            .device()
            .load_with(program.module().clone(), ProgramOptions::all())
        {
            Ok(p) => {
                checked = p;
                &checked
            }
            Err(e) => return Outcome::Fail(e.to_string()),
        }
    };
    let launched = launch_spec(spec, function, program, None);
    match (answer, launched) {
        (_, Err(Failure::Spec(message))) => Outcome::Fail(message),
        (UbAnswer::Refuses(code), Err(Failure::Launch(e))) if e.code() == code => Outcome::Pass,
        (UbAnswer::Refuses(code), Err(Failure::Launch(e))) => Outcome::Fail(format!(
            "expected {} to refuse undefined behaviour ({kind}) with {code}, got:\n{e}",
            backend.name()
        )),
        (UbAnswer::Refuses(code), Ok(_)) => Outcome::Fail(format!(
            "expected {} to refuse undefined behaviour ({kind}) with {code}, but it ran",
            backend.name()
        )),
        (_, Err(Failure::Launch(e))) if e.refused_by_device() => Outcome::Skip(e.to_string()),
        (_, outcome) => Outcome::Skip(format!(
            "{} does not detect undefined behaviour ({kind}); it {} (the result is not judged)",
            backend.name(),
            match outcome {
                Ok(_) => "ran".to_string(),
                Err(Failure::Launch(e)) => format!("refused it with {}", e.code()),
                Err(Failure::Device(e)) => format!("refused it with {}", e.code()),
                Err(Failure::Spec(_)) => unreachable!("judged above"),
            }
        )),
    }
}

fn judge_refusal(e: LaunchError, refusals: &[String], ub: Option<&str>) -> Outcome {
    if !refusals.is_empty() {
        return if refusals.iter().any(|c| c == e.code()) {
            Outcome::Pass
        } else {
            Outcome::Fail(format!(
                "expected a refusal with {}, got:\n{e}",
                refusals.join(" or ")
            ))
        };
    }
    if let Some(kind) = ub {
        return match &e {
            LaunchError::Undefined { kind: got, .. } if got == kind => Outcome::Pass,
            _ => Outcome::Fail(format!("expected undefined behaviour ({kind}), got:\n{e}")),
        };
    }
    Outcome::Fail(e.to_string())
}

enum Failure {
    /// The run block itself is wrong for the kernel (a missing argument, a value of the wrong
    /// kind).
    Spec(String),
    Launch(LaunchError),
    /// The device refused an argument's buffer (`XPU-D005` for one larger than it holds).
    Device(DeviceError),
}

/// The index and element type of the buffer parameter `name`.
fn buffer_param(function: &Function, name: &str) -> Option<(usize, ElemType)> {
    function
        .params
        .iter()
        .enumerate()
        .find_map(|(i, p)| match p.ty {
            Type::Buffer { elem, .. } if p.name == name => Some((i, elem)),
            _ => None,
        })
}

/// Builds the block's arguments on `program`'s device, launches, waits, and returns the
/// kernel and each parameter's buffer (`None` for values).
fn launch_spec(
    spec: &RunSpec,
    function: &Function,
    program: &Program,
    wave: Option<u32>,
) -> Result<(crate::runtime::device::Kernel, Vec<Option<RawBuffer>>), Failure> {
    for arg in &spec.args {
        if !function.params.iter().any(|p| p.name == arg.name) {
            return Err(Failure::Spec(format!(
                "`arg {}`: `{}` has no parameter of that name",
                arg.name, spec.kernel
            )));
        }
    }
    let kernel = program.kernel(&spec.kernel).map_err(Failure::Launch)?;
    let device = program.device();
    let mut buffers: Vec<Option<RawBuffer>> = Vec::new();
    let mut values: Vec<Option<ArgValue<'static>>> = Vec::new();
    for param in &function.params {
        let Some(arg) = spec.args.iter().find(|a| a.name == param.name) else {
            return Err(Failure::Spec(format!(
                "no `arg {}` for the parameter {}: {}",
                param.name,
                param.name,
                type_name(param.ty)
            )));
        };
        let bad = |e: String| Failure::Spec(format!("`arg {}`: {e}", param.name));
        match (param.ty, &arg.init) {
            (Type::Buffer { elem, .. }, ArgInit::Uninit { len }) => {
                let bytes = *len as usize * elem.size() as usize;
                // A buffer the device cannot hold is its refusal (`XPU-D005`), judged like a
                // launch's.
                let raw =
                    RawBuffer::alloc_with(device, bytes, Init::Poison).map_err(Failure::Device)?;
                buffers.push(Some(raw));
                values.push(None);
            }
            (Type::Buffer { elem, .. }, init @ ArgInit::Scalar(_)) => {
                let _ = init;
                return Err(bad(format!(
                    "a buffer of {} takes a list, fill, iota, random or uninit",
                    crate::hal::launch::elem_name(elem)
                )));
            }
            (Type::Buffer { elem, .. }, init) => {
                let count = slot_count(init, elem).map_err(bad)?;
                let bytes = count
                    .checked_mul(elem.scalar.size() as u64)
                    .and_then(|b| usize::try_from(b).ok())
                    .ok_or_else(|| bad(format!("{count} scalars overflow the address space")))?;
                let raw =
                    RawBuffer::alloc_with(device, bytes, Init::Any).map_err(Failure::Device)?;
                write_slots(&raw, init, elem).map_err(bad)?;
                buffers.push(Some(raw));
                values.push(None);
            }
            (Type::Scalar(s), ArgInit::Scalar(v)) => {
                let bits = scalar_bits(*v, s).map_err(bad)?;
                buffers.push(None);
                values.push(Some(ArgValue::Value(HostValue::scalar(s, bits))));
            }
            (Type::Vector(s, n), ArgInit::Scalar(v)) => {
                let bits = scalar_bits(*v, s).map_err(bad)?;
                buffers.push(None);
                values.push(HostValue::vector(s, &vec![bits; n as usize]).map(ArgValue::Value));
            }
            (Type::Vector(s, n), ArgInit::List(list)) if list.len() == n as usize => {
                let lanes = list
                    .iter()
                    .map(|v| scalar_bits(*v, s))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(bad)?;
                buffers.push(None);
                values.push(HostValue::vector(s, &lanes).map(ArgValue::Value));
            }
            (Type::Tag(_), ArgInit::Scalar(v)) => {
                let index = scalar_bits(*v, Scalar::U32).map_err(bad)?;
                buffers.push(None);
                values.push(Some(ArgValue::Tag(index as u32)));
            }
            (ty, _) => {
                return Err(bad(format!(
                    "a value that does not fit a parameter of type {}",
                    type_name(ty)
                )))
            }
        }
    }
    let mut args: Vec<ArgValue<'_>> = Vec::with_capacity(function.params.len());
    for ((param, buffer), value) in function.params.iter().zip(&mut buffers).zip(&values) {
        match (param.ty, buffer, value) {
            (Type::Buffer { elem, access }, Some(raw), _) => {
                args.push(if access == Access::ReadWrite {
                    ArgValue::raw_mut(raw, elem)
                } else {
                    ArgValue::raw(raw, elem)
                })
            }
            (_, _, Some(v)) => args.push(*v),
            _ => {
                return Err(Failure::Spec(format!(
                    "parameter {} has an argument of the wrong kind",
                    param.name
                )))
            }
        }
    }
    let mut launch = Launch::grid(spec.grid)
        .block(spec.block)
        .shared_bytes(spec.shared_bytes);
    launch.wave = wave;
    launch.deadline = spec.deadline;
    launch.interp = crate::hal::launch::InterpLaunch {
        allow_races: spec.allow_races,
        shuffle_seed: spec.shuffle_seed,
        max_steps: spec.max_steps,
    };
    let stream = KernelStream::current(device);
    kernel
        .launch(&stream, launch, &mut args)
        .map_err(Failure::Launch)?;
    stream.sync().map_err(|e| {
        Failure::Launch(match e {
            // A device fault seen at the sync is the launch's refusal (`XPU-L022`).
            DeviceError::DeviceFault { kernel, message } => {
                LaunchError::DeviceFault { kernel, message }
            }
            // A missed deadline seen at the sync (a GPU reports it there) is refusal 6.
            DeviceError::Deadline {
                kernel, deadline, ..
            } => LaunchError::Deadline {
                kernel,
                deadline,
                cancelled: false,
            },
            e => LaunchError::Device {
                kernel: spec.kernel.clone(),
                message: e.to_string(),
            },
        })
    })?;
    Ok((kernel, buffers))
}

fn download(buffer: &Option<RawBuffer>) -> Result<Vec<u8>, DeviceError> {
    match buffer {
        Some(raw) => raw.read(),
        None => Ok(Vec::new()),
    }
}

/// The bits of `value` as a scalar of type `scalar`: integers wrapped into the type's width
/// (refused when out of its range), floats rounded to nearest-even, `bool` as 0 or 1.
pub fn scalar_bits(value: Value, scalar: Scalar) -> Result<u64, String> {
    match (value, scalar) {
        (Value::Bool(b), Scalar::Bool) => Ok(b as u64),
        (Value::Int(i), s) if s.is_int() => {
            let bits = s.bits();
            let (min, max) = if s.is_signed() {
                (-(1i128 << (bits - 1)), (1i128 << bits) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            if i < min || i > max {
                return Err(format!("{i} does not fit {}", s.name()));
            }
            Ok(wrap(i, s))
        }
        (Value::Int(i), s) if s.is_float() => Ok(float_bits(i as f64, s)),
        (Value::Float(x), s) if s.is_float() => Ok(float_bits(x, s)),
        (v, s) => Err(format!("{} is not a {} value", show_value(v), s.name())),
    }
}

fn show_value(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(x) => format!("{x:?}"),
        Value::Bool(b) => b.to_string(),
    }
}

/// An integer wrapped (two's complement) into `scalar`'s width.
fn wrap(i: i128, scalar: Scalar) -> u64 {
    let bits = scalar.bits();
    let v = i as u128 as u64;
    if bits == 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

/// `x` rounded to nearest-even in the float type `scalar`, as bits.
fn float_bits(x: f64, scalar: Scalar) -> u64 {
    match scalar {
        Scalar::F16 => half::f16::from_f64(x).to_bits() as u64,
        Scalar::F32 => (x as f32).to_bits() as u64,
        _ => x.to_bits(),
    }
}

/// Splitmix64's `k`-th output for `seed` (docs/text-format.md, "The random generator").
pub fn splitmix64(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Scalar slot `k` of `random(_, lo, hi, seed)` for an element of `scalar`, as bits.
pub fn random_slot(lo: Value, hi: Value, seed: u64, k: u64, scalar: Scalar) -> Result<u64, String> {
    let z = splitmix64(seed, k);
    match scalar {
        Scalar::Bool => Ok(z >> 63),
        s if s.is_float() => {
            let as_f64 = |v: Value| match v {
                Value::Int(i) => Ok(i as f64),
                Value::Float(x) => Ok(x),
                Value::Bool(_) => Err("random bounds are numbers".to_string()),
            };
            let (lo, hi) = (as_f64(lo)?, as_f64(hi)?);
            let u = (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            Ok(float_bits(lo + (hi - lo) * u, s))
        }
        s => {
            let (Value::Int(lo), Value::Int(hi)) = (lo, hi) else {
                return Err(format!(
                    "random bounds of a {} buffer are integers",
                    s.name()
                ));
            };
            if hi <= lo {
                return Err(format!("random({lo}, {hi}) needs hi > lo"));
            }
            let span = (hi - lo) as u128;
            Ok(wrap(lo + (z as u128 % span) as i128, s))
        }
    }
}

/// The scalar slots (lanes of vector elements consecutive) an initialiser gives a buffer of
/// `elem`. The slots are one `u64` per scalar, sized by the input: an initialiser the host
/// cannot hold is an error (checked against the host's available memory, then reserved
/// fallibly), never an abort.
pub fn slots(init: &ArgInit, elem: ElemType) -> Result<Vec<u64>, String> {
    let count = slot_count(init, elem)?;
    let bytes = count.saturating_mul(8);
    if let Err(available) = crate::facts::check_host_memory(bytes) {
        return Err(format!(
            "{count} scalars need {bytes} bytes of host memory; {available} are available"
        ));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(count as usize)
        .map_err(|e| format!("{count} scalars: {e}"))?;
    slots_into(init, elem, 0, count, &mut out)?;
    Ok(out)
}

/// How many scalar slots `init` gives a buffer of `elem` (64-bit: `fill(4294967295, ...)` of a
/// vector type is more than 2^32).
pub fn slot_count(init: &ArgInit, elem: ElemType) -> Result<u64, String> {
    let lanes = elem.lanes as u64;
    match init {
        ArgInit::Scalar(_) => Err("a single value is not a buffer".into()),
        ArgInit::Uninit { .. } => Err("uninit() describes no values".into()),
        ArgInit::List(list) => {
            if list.len() as u64 % lanes != 0 {
                return Err(format!(
                    "{} scalars are not a whole number of {}",
                    list.len(),
                    crate::hal::launch::elem_name(elem)
                ));
            }
            Ok(list.len() as u64)
        }
        ArgInit::Fill { len, .. } | ArgInit::Iota { len, .. } | ArgInit::Random { len, .. } => {
            Ok(*len as u64 * lanes)
        }
    }
}

/// Appends slots `from..to` of `init` (see [`slots`]) to `out`.
fn slots_into(
    init: &ArgInit,
    elem: ElemType,
    from: u64,
    to: u64,
    out: &mut Vec<u64>,
) -> Result<(), String> {
    let lanes = elem.lanes as u64;
    let s = elem.scalar;
    match init {
        ArgInit::Scalar(_) | ArgInit::Uninit { .. } => {
            slot_count(init, elem)?;
        }
        ArgInit::List(list) => {
            for v in &list[from as usize..to as usize] {
                out.push(scalar_bits(*v, s)?);
            }
        }
        ArgInit::Fill { value, .. } => {
            let bits = scalar_bits(*value, s)?;
            out.extend(std::iter::repeat_n(bits, (to - from) as usize));
        }
        ArgInit::Iota { start, step, .. } => {
            for k in from..to {
                let i = k / lanes;
                let bits = match (start, step) {
                    (Value::Int(a), Value::Int(d)) if s.is_int() => {
                        wrap(a.wrapping_add((i as i128).wrapping_mul(*d)), s)
                    }
                    (a, d) if s.is_float() => {
                        let f = |v: &Value| match v {
                            Value::Int(i) => Ok(*i as f64),
                            Value::Float(x) => Ok(*x),
                            Value::Bool(_) => Err("iota takes numbers".to_string()),
                        };
                        float_bits(f(a)? + i as f64 * f(d)?, s)
                    }
                    _ => {
                        return Err(format!(
                            "iota({}, {}) does not fit {}",
                            show_value(*start),
                            show_value(*step),
                            s.name()
                        ))
                    }
                };
                out.push(bits);
            }
        }
        ArgInit::Random { lo, hi, seed, .. } => {
            for k in from..to {
                out.push(random_slot(*lo, *hi, *seed, k, s)?);
            }
        }
    }
    Ok(())
}

/// Writes `init`'s values into `raw` (a buffer of exactly its slots) a chunk at a time, so
/// that no host copy of the whole buffer's slots is built.
fn write_slots(raw: &RawBuffer, init: &ArgInit, elem: ElemType) -> Result<(), String> {
    const CHUNK: u64 = 1 << 20;
    let count = slot_count(init, elem)?;
    let size = elem.scalar.size() as usize;
    let mut chunk = Vec::new();
    let mut from = 0;
    while from < count {
        let to = (from + CHUNK).min(count);
        chunk.clear();
        slots_into(init, elem, from, to, &mut chunk)?;
        let bytes = slots_to_bytes(&chunk, elem.scalar);
        raw.sub(from as usize * size, bytes.len())
            .and_then(|view| view.write(&bytes))
            .map_err(|e| e.to_string())?;
        from = to;
    }
    Ok(())
}

fn slots_to_bytes(slots: &[u64], scalar: Scalar) -> Vec<u8> {
    let size = scalar.size() as usize;
    slots
        .iter()
        .flat_map(|bits| bits.to_le_bytes().into_iter().take(size))
        .collect()
}

fn bytes_to_slots(bytes: &[u8], scalar: Scalar) -> Vec<u64> {
    let size = scalar.size() as usize;
    bytes
        .chunks_exact(size)
        .map(|chunk| {
            let mut buf = [0u8; 8];
            buf[..size].copy_from_slice(chunk);
            u64::from_le_bytes(buf)
        })
        .collect()
}

/// Distance in representable values between two floats of `scalar` (`None` if either is
/// NaN). Crossing zero counts `-0.0` → `+0.0` as one step.
fn ulp_distance(a: u64, b: u64, scalar: Scalar) -> Option<u64> {
    let (sign, exp_mask) = match scalar {
        Scalar::F16 => (1u64 << 15, 0x7c00u64),
        Scalar::F32 => (1u64 << 31, 0x7f80_0000u64),
        _ => (1u64 << 63, 0x7ff0_0000_0000_0000u64),
    };
    let mant = (sign - 1) & !exp_mask;
    let is_nan = |x: u64| x & exp_mask == exp_mask && x & mant != 0;
    if is_nan(a) || is_nan(b) {
        return None;
    }
    let mag = |x: u64| x & (sign - 1);
    if (a & sign) == (b & sign) {
        Some(mag(a).abs_diff(mag(b)))
    } else {
        Some(mag(a) + mag(b) + 1)
    }
}

/// Compares scalar slots; on a mismatch names the first index with both values.
fn compare(
    name: &str,
    elem: ElemType,
    expected: &[u64],
    actual: &[u64],
    ulps: u32,
    what: &str,
) -> Result<(), String> {
    let lanes = elem.lanes as usize;
    if expected.len() != actual.len() {
        return Err(format!(
            "{name}: {what} {} elements, the buffer holds {}",
            expected.len() / lanes,
            actual.len() / lanes
        ));
    }
    let s = elem.scalar;
    for (k, (&e, &a)) in expected.iter().zip(actual).enumerate() {
        let same = if s.is_float() {
            let nan = |x| ulp_distance(x, x, s).is_none();
            match ulp_distance(e, a, s) {
                Some(d) => d <= ulps as u64,
                None => nan(e) && nan(a),
            }
        } else {
            e == a
        };
        if !same {
            let index = if lanes == 1 {
                format!("{name}[{k}]")
            } else {
                format!("{name}[{}].{}", k / lanes, k % lanes)
            };
            let mut detail = format!(
                "{index}: {what} {}, got {}",
                format_scalar(s, e),
                format_scalar(s, a)
            );
            if s.is_float() {
                if let Some(d) = ulp_distance(e, a, s) {
                    detail.push_str(&format!(" ({d} ulps apart; allowed {ulps})"));
                }
            }
            let mismatches = expected.iter().zip(actual).filter(|(e, a)| e != a).count();
            if mismatches > 1 {
                detail.push_str(&format!(" [{mismatches} slots differ in bits]"));
            }
            return Err(detail);
        }
    }
    Ok(())
}

/// Runs `paths` on the devices `backend` names, printing to `out` (the `xpu run` command's
/// runner, as `xpu census` uses it). Exit status: 0 when nothing failed, 1 on a failed case,
/// 2 on a usage or I/O error. `deadline` is each case's deadline where its run block names
/// none. A CUDA/HIP device lost for the process (`XPU-D016`) stops the run there: a failure
/// (`xpu run` itself goes on in a new process instead).
pub fn run_command(
    paths: &[PathBuf],
    backend: &str,
    deadline: Option<std::time::Duration>,
    options: RunOptions,
    out: &mut dyn Write,
) -> u8 {
    let devices = match select_devices(backend) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("xpu run: {e}");
            return 2;
        }
    };
    let runner = match Runner::new(devices) {
        Ok(r) => r.with_deadline(deadline).with_run_options(options),
        Err(e) => {
            eprintln!("xpu run: {e}");
            return 2;
        }
    };
    match runner.run_paths(paths, out) {
        Ok(_) if runner.lost_at().is_some() => {
            let _ = out.flush();
            eprintln!(
                "xpu run: the device could not be recovered after a fault (XPU-D016); the \
                 cases after case {} were not run",
                runner.lost_at().unwrap_or(0)
            );
            1
        }
        Ok(summary) if summary.failed == 0 => 0,
        Ok(_) => 1,
        Err(e) => {
            let _ = out.flush();
            eprintln!("xpu run: {e}");
            2
        }
    }
}

/// What `xpu run --checked` and `--ub-traps on|off` ask for (`None`: the runner's default,
/// ub-traps on and checked mode as `CAJETA_XPU_CHECKED` says).
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Checked mode on or off (`--checked`).
    pub checked: Option<bool>,
    /// Unconfirmed `align = N` statements tested or not (`--ub-traps on|off`).
    pub ub_traps: Option<bool>,
}

/// A verified module for tests of the runner's pieces.
#[cfg(test)]
fn verified(src: &str) -> Arc<crate::ir::VerifiedModule> {
    Arc::new(crate::ir::parse(src).unwrap().verify().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // The standard splitmix64 stream seeded with 1234567 (Vigna's reference values).
        let expected = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for (k, e) in expected.iter().enumerate() {
            assert_eq!(splitmix64(1234567, k as u64), *e);
        }
    }

    #[test]
    fn random_slots_stay_in_range() {
        for k in 0..1000 {
            let bits =
                random_slot(Value::Float(-1.0), Value::Float(1.0), 7, k, Scalar::F32).unwrap();
            let x = f32::from_bits(bits as u32);
            assert!((-1.0..=1.0).contains(&x));
            let i = random_slot(Value::Int(-5), Value::Int(5), 7, k, Scalar::I8).unwrap();
            assert!((-5..5).contains(&(i as u8 as i8)));
        }
        assert!(random_slot(Value::Int(3), Value::Int(3), 0, 0, Scalar::U32).is_err());
        assert!(random_slot(Value::Float(0.0), Value::Int(3), 0, 0, Scalar::U32).is_err());
    }

    #[test]
    fn typing_of_values() {
        assert_eq!(scalar_bits(Value::Int(-1), Scalar::I8), Ok(0xff));
        assert!(scalar_bits(Value::Int(256), Scalar::U8).is_err());
        assert!(scalar_bits(Value::Int(-129), Scalar::I8).is_err());
        assert_eq!(scalar_bits(Value::Int(255), Scalar::I8), Ok(0xff)); // bits of a u8 literal
        assert_eq!(
            scalar_bits(Value::Int(2), Scalar::F32),
            Ok(2.0f32.to_bits() as u64)
        );
        assert!(scalar_bits(Value::Float(1.5), Scalar::U32).is_err());
        assert_eq!(scalar_bits(Value::Bool(true), Scalar::Bool), Ok(1));
        // f16 rounds directly from f64 (no double rounding through f32).
        assert_eq!(scalar_bits(Value::Float(1.0), Scalar::F16), Ok(0x3c00));
    }

    #[test]
    fn initialisers() {
        let f32x1 = ElemType::scalar(Scalar::F32);
        let iota = ArgInit::Iota {
            len: 3,
            start: Value::Int(1),
            step: Value::Float(0.5),
        };
        let got: Vec<f32> = slots(&iota, f32x1)
            .unwrap()
            .into_iter()
            .map(|b| f32::from_bits(b as u32))
            .collect();
        assert_eq!(got, vec![1.0, 1.5, 2.0]);
        let vec2 = ElemType::vector(Scalar::U32, 2);
        let fill = ArgInit::Fill {
            len: 2,
            value: Value::Int(7),
        };
        assert_eq!(slots(&fill, vec2).unwrap(), vec![7; 4]);
        assert!(slots(&ArgInit::List(vec![Value::Int(1); 3]), vec2).is_err());
    }

    #[test]
    fn float_comparison() {
        let one = 1.0f32.to_bits() as u64;
        let next = (1.0f32.to_bits() + 1) as u64;
        let nan = f32::NAN.to_bits() as u64;
        let other_nan = 0x7fc0_0001u64;
        let neg_zero = (-0.0f32).to_bits() as u64;
        let f = ElemType::scalar(Scalar::F32);
        assert!(compare("y", f, &[one], &[one], 0, "expected").is_ok());
        assert!(compare("y", f, &[one], &[next], 0, "expected").is_err());
        assert!(compare("y", f, &[one], &[next], 1, "expected").is_ok());
        assert!(compare("y", f, &[nan], &[other_nan], 0, "expected").is_ok());
        assert!(compare("y", f, &[nan], &[one], 100, "expected").is_err());
        assert!(compare("y", f, &[0], &[neg_zero], 0, "expected").is_err());
        assert!(compare("y", f, &[0], &[neg_zero], 1, "expected").is_ok());
        let err = compare("y", f, &[one, one], &[one, next], 0, "expected").unwrap_err();
        assert_eq!(
            err,
            "y[1]: expected 1.0, got 1.0000001 (1 ulps apart; allowed 0)"
        );
        let v = ElemType::vector(Scalar::I32, 2);
        let err = compare("v", v, &[1, 2], &[1, 3], 0, "interp").unwrap_err();
        assert_eq!(err, "v[0].1: interp 2, got 3");
        assert!(compare("v", v, &[1, 2], &[1], 0, "expected").is_err());
    }

    const SAXPY: &str = "
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}

run saxpy {
    grid = [4];
    block = [256];
    arg y = fill(1000, 1.0);
    arg x = iota(1000);
    arg a = 2.0;
    arg n = 1000;
    expect y = iota(1000, 1, 2);
}

run saxpy {
    grid = [4];
    block = [256];
    arg y = fill(1000, 1.0);
    arg x = iota(1000);
    arg a = 2.0;
    arg n = 1000;
    expect y = fill(1000, 1.0);
}

run saxpy {
    grid = [1];
    block = [4];
    arg y = fill(4, 0.0);
    arg x = fill(4, 0.0);
    arg a = 2.0;
    arg n = 4;
    expect y = interp;
}

run saxpy {
    grid = [0];
    block = [4];
    arg y = fill(4, 0.0);
    arg x = fill(4, 0.0);
    arg a = 2.0;
    arg n = 4;
    expect refused XPU-L004;
}

run saxpy {
    grid = [1];
    block = [8];
    arg y = fill(4, 0.0);
    arg x = fill(4, 0.0);
    arg a = 2.0;
    arg n = 8;
    expect ub out_of_bounds;
}

run saxpy {
    grid = [1];
    block = [4];
    arg y = fill(4, 0.0);
    arg a = 2.0;
    arg n = 4;
}
";

    fn run_text(src: &str) -> Vec<Case> {
        let runner = Runner::new(vec![Device::open(Backend::Interp).unwrap()]).unwrap();
        let mut cases = Vec::new();
        runner
            .run_source("t.xk", src, &mut |c| {
                cases.push(c.clone());
                Ok(())
            })
            .unwrap();
        cases
    }

    #[test]
    fn runs_and_judges_on_the_interpreter() {
        let cases = run_text(SAXPY);
        let lines: Vec<String> = cases.iter().map(|c| c.to_string()).collect();
        assert_eq!(cases.len(), 6, "{lines:#?}");
        assert_eq!(lines[0], "PASS  t.xk:9  saxpy  interp");
        assert!(lines[1].starts_with("FAIL  t.xk:19  saxpy  interp\n    y[1]: expected 1.0, got 3.0 (12582912 ulps apart; allowed 0)"), "{}", lines[1]);
        assert!(
            lines[1].contains("[999 slots differ in bits]"),
            "{}",
            lines[1]
        );
        assert!(lines[2].starts_with("SKIP  t.xk:29"), "{}", lines[2]);
        assert!(lines[3].starts_with("PASS  t.xk:39"), "{}", lines[3]);
        assert!(lines[4].starts_with("PASS  t.xk:49"), "{}", lines[4]);
        assert!(lines[5].starts_with("FAIL  t.xk:59"), "{}", lines[5]);
        assert!(lines[5].contains("no `arg x`"), "{}", lines[5]);
        let mut summary = Summary::default();
        cases.iter().for_each(|c| summary.add(c));
        assert_eq!(summary.closing_line(), "3 passed, 2 failed, 1 skipped");
    }

    #[test]
    fn parse_and_verify_failures_are_cases() {
        let cases = run_text("kernel k( {");
        assert_eq!(cases.len(), 1);
        assert!(matches!(cases[0].outcome, Outcome::Fail(_)));
        assert_eq!(cases[0].kernel, "-");
        // A module the verifier refuses: a case expecting that code passes, another fails.
        let bad = "kernel k(o: buf<u32, rw>) { o[0] = 1.0; }\n\
            run k { grid = [1]; block = [1]; arg o = fill(1, 0); expect refused XPU-V031; }\n\
            run k { grid = [1]; block = [1]; arg o = fill(1, 0); expect refused XPU-V001; }";
        let cases = run_text(bad);
        assert_eq!(cases[0].outcome, Outcome::Pass, "{}", cases[0]);
        assert!(matches!(cases[1].outcome, Outcome::Fail(_)), "{}", cases[1]);
        assert!(
            cases[1].to_string().contains("error[XPU-V031]"),
            "{}",
            cases[1]
        );
    }

    #[test]
    fn interp_device_programs_share_the_module() {
        let module = verified(SAXPY);
        let device = Device::open(Backend::Interp).unwrap();
        let program = device.load(&module).unwrap();
        assert!(program.kernel("saxpy").is_ok());
        assert_eq!(
            program.kernel("nope").unwrap_err().code(),
            crate::hal::launch::codes::NO_CODE
        );
        let m = program.manifest("saxpy").unwrap();
        assert_eq!(m.backend, Backend::Interp);
        assert_eq!(m.registers_per_thread, None);
    }
    /// The interpreter behind another backend's name: lets the runner's non-interpreter paths
    /// (comparison with the oracle, skipped UB and interpreter refusals) run without a JIT.
    struct Disguised(crate::backend::interp::InterpDevice);

    impl crate::hal::DeviceImpl for Disguised {
        fn backend(&self) -> Backend {
            Backend::Cpu
        }
        fn facts(&self) -> &crate::hal::facts::DeviceFacts {
            self.0.facts()
        }
        fn alloc(
            &self,
            bytes: usize,
            init: Init,
        ) -> Result<Arc<dyn crate::hal::DeviceMemory>, DeviceError> {
            self.0.alloc(bytes, init)
        }
        fn write(
            &self,
            s: &dyn crate::hal::StreamImpl,
            m: &Arc<dyn crate::hal::DeviceMemory>,
            o: usize,
            src: &[u8],
        ) -> Result<(), DeviceError> {
            self.0.write(s, m, o, src)
        }
        fn read(
            &self,
            s: &dyn crate::hal::StreamImpl,
            m: &Arc<dyn crate::hal::DeviceMemory>,
            o: usize,
            len: usize,
        ) -> Result<Box<dyn crate::hal::ReadTicket>, DeviceError> {
            self.0.read(s, m, o, len)
        }
        fn copy(
            &self,
            s: &dyn crate::hal::StreamImpl,
            a: &Arc<dyn crate::hal::DeviceMemory>,
            ao: usize,
            b: &Arc<dyn crate::hal::DeviceMemory>,
            bo: usize,
            len: usize,
        ) -> Result<(), DeviceError> {
            self.0.copy(s, a, ao, b, bo, len)
        }
        fn create_stream(&self) -> Result<Arc<dyn crate::hal::StreamImpl>, DeviceError> {
            self.0.create_stream()
        }
        fn load(
            &self,
            m: &Arc<crate::ir::VerifiedModule>,
        ) -> Result<Arc<dyn crate::hal::ProgramImpl>, DeviceError> {
            self.0.load(m)
        }
    }

    #[test]
    fn other_backends_compare_with_the_interpreter_and_skip_its_judgements() {
        let other = Device::from_impl(Arc::new(Disguised(
            crate::backend::interp::InterpDevice::new(),
        )));
        let runner = Runner::new(vec![other]).unwrap();
        let src = "
kernel k(o: buf<u32, rw>, n: u32) {
    o[global_id.x] = global_id.x * n;
}

run k { grid = [2]; block = [4]; arg o = fill(8, 0); arg n = 3; expect o = interp; }
run k { grid = [2]; block = [4]; arg o = fill(4, 0); arg n = 3; expect ub out_of_bounds; }
run k { grid = [2]; block = [4]; arg o = fill(8, 0); arg n = 3; expect refused XPU-REF01; }
run k { grid = [2]; block = [4]; arg o = fill(8, 0); arg n = 3; expect o = interp; expect o = iota(8, 0, 3); }

kernel w(o: buf<u32, rw>) {
    o[global_id.x] = wave_width;
}

run w { grid = [1]; block = [4]; wave = 16; arg o = fill(4, 0); expect o = interp; }
";
        let mut lines = Vec::new();
        runner
            .run_source("o.xk", src, &mut |c| {
                lines.push(c.to_string());
                Ok(())
            })
            .unwrap();
        // UB runs on the CPU, which must refuse it with its own code (here the disguised
        // interpreter refuses with XPU-REF02 instead).
        assert!(
            lines[1].starts_with(
                "FAIL  o.xk:7  k  cpu\n    expected cpu to refuse undefined behaviour \
                 (out_of_bounds) with XPU-L013, got:\n"
            ),
            "{}",
            lines[1]
        );
        lines.remove(1);
        assert_eq!(
            lines,
            vec![
                "PASS  o.xk:6  k  cpu",
                "SKIP  o.xk:8  k  cpu\n    the interpreter's refusal is judged on the interpreter only",
                "PASS  o.xk:9  k  cpu",
                // The backend ran at its own wave (here the disguised interpreter's 32); the
                // oracle at the block's 16: the comparison sees the difference.
                "FAIL  o.xk:15  w  cpu\n    o[0]: interp 16, got 32 [4 slots differ in bits]",
            ]
        );
    }

    /// `expect refused CODE on NAME, ...`: judged on the named backends only; the others
    /// judge the block's other expectations; several codes for one backend accept any; the
    /// form prints back as written.
    #[test]
    fn backend_qualified_refusals_apply_to_their_backends_only() {
        let other = Device::from_impl(Arc::new(Disguised(
            crate::devices::interp::InterpDevice::new(),
        )));
        let interp = Device::open(Backend::Interp).unwrap();
        let runner = Runner::new(vec![interp, other]).unwrap();
        let src = "kernel k(o: buf<u32, rw>) {
    o[global_id.x * 2] = 7;
}

run k {
    grid = [1];
    block = [4];
    arg o = fill(4, 0);
    expect refused XPU-REF02 on interp;
    expect refused XPU-L013 on cpu, vulkan;
    expect o = fill(4, 7);
}

run k {
    grid = [1];
    block = [2];
    arg o = fill(4, 0);
    expect refused XPU-L006 on interp;
    expect refused XPU-L013 on interp;
    expect o = [7, 0, 7, 0];
}
";
        let (module, specs) = crate::ir::parse_file(src).unwrap();
        assert_eq!(crate::ir::text::print_file(&module, &specs), src);
        let mut lines = Vec::new();
        runner
            .run_source("q.xk", src, &mut |c| {
                lines.push(c.to_string());
                Ok(())
            })
            .unwrap();
        assert_eq!(lines.len(), 4, "{lines:?}");
        // Devices in order, each over the blocks. The interpreter's out-of-bounds report is
        // its refusal.
        assert_eq!(lines[0], "PASS  q.xk:5  k  interp");
        // In bounds: the interpreter was to refuse with one of two codes but ran.
        assert!(
            lines[1].starts_with("FAIL  q.xk:14  k  interp"),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].contains("refused with XPU-L006 or XPU-L013, but it ran"),
            "{}",
            lines[1]
        );
        // The disguised interpreter (named cpu) reports XPU-REF02, not the cpu's XPU-L013.
        assert!(lines[2].starts_with("FAIL  q.xk:5  k  cpu"), "{}", lines[2]);
        assert!(
            lines[2].contains("expected a refusal with XPU-L013"),
            "{}",
            lines[2]
        );
        // No refusal applies to cpu: its buffer expectation is judged.
        assert_eq!(lines[3], "PASS  q.xk:14  k  cpu");
    }
}
