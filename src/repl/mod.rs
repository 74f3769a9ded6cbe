//! `xpu repl`: an interactive session for kernels (docs/repl.md).
//!
//! A [`Session`] holds the definitions entered so far (kernels, device helpers, tag sets, in
//! the text format), named buffers made with the run-block generators, and the devices its
//! launches go to. Each complete entry ([`input::Reader`] decides where one ends: a definition
//! spans lines until its braces balance) is evaluated by [`Session::eval`]:
//!
//! - a definition is added, or replaces the definition of the same name; the session's
//!   module is parsed and verified whole, and an entry that breaks it is refused with the
//!   diagnostics (source line and caret), the session unchanged. Accepted, the old
//!   [`Program`]s are dropped (their code freed) and every kernel of the entry is compiled
//!   anew on the session's devices;
//! - a run block (`run K { ... }`) runs as in `xpu run`, printing `PASS|FAIL|SKIP`;
//! - `buf NAME: TYPE = INIT` makes a buffer (`fill`, `iota`, `random`, or a list);
//! - `K<<<GRID, BLOCK[, SHARED]>>>(ARGS)` launches with session buffers and literals;
//! - `print NAME[LO..HI] as R x C` (slice and shape optional) shows a buffer;
//! - `:backend`, `:time`, `:manifest`, `:ir`, `:asm`, `:save`, `:list`, `:help`, `:quit`.
//!
//! Errors print as `error[CODE]: message` (with the source line and a caret where there is
//! one) on the error stream, and the session goes on. The codes are `XPU-Q001`..`XPU-Q013`
//! ([`codes`]).

#![warn(missing_docs)]

pub mod input;
mod show;

use crate::filetest::runner::{self, Outcome};
use crate::hal::launch::{ArgValue, HostValue, Launch, LaunchError};
use crate::hal::{Backend, DeviceError, Init};
use crate::ir::text::run::{ArgInit, Expect, RunArg, RunSpec};
use crate::ir::{Access, Diagnostics, ElemType, Module, Scalar, Span, Type, VerifiedModule};
use crate::runtime::buffer::RawBuffer;
use crate::runtime::device::{Device, Program};
use crate::runtime::stream::KernelStream;
use input::{Entry, LaunchArg, ShortLaunch};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The REPL's error codes (docs/repl.md).
pub mod codes {
    /// An unknown `:command`.
    pub const UNKNOWN_COMMAND: &str = "XPU-Q001";
    /// An entry that is none of the REPL's forms.
    pub const UNKNOWN_ENTRY: &str = "XPU-Q002";
    /// No kernel of that name in the session.
    pub const UNKNOWN_KERNEL: &str = "XPU-Q003";
    /// No buffer of that name in the session.
    pub const UNKNOWN_BUFFER: &str = "XPU-Q004";
    /// A malformed short launch (`K<<<GRID, BLOCK>>>(ARGS)`).
    pub const LAUNCH_SYNTAX: &str = "XPU-Q005";
    /// Short-launch arguments that do not fit the kernel's parameters.
    pub const LAUNCH_ARGS: &str = "XPU-Q006";
    /// A malformed buffer definition (`buf NAME: TYPE = INIT`).
    pub const BUFFER: &str = "XPU-Q007";
    /// A malformed `print`, or a slice or shape that does not fit the buffer.
    pub const PRINT: &str = "XPU-Q008";
    /// `:backend` naming an unknown or absent backend.
    pub const BACKEND: &str = "XPU-Q009";
    /// `:asm` with no code to show (no such target in this build, or the lowering failed).
    pub const ASM: &str = "XPU-Q010";
    /// `:save` could not write the file.
    pub const SAVE: &str = "XPU-Q011";
    /// The input ended inside a definition.
    pub const UNFINISHED: &str = "XPU-Q012";
    /// An entry that mixes definitions and run blocks, or defines nothing.
    pub const ONE_ITEM: &str = "XPU-Q013";
}

/// The default deadline of a launch, as `xpu run`'s.
const DEADLINE: Duration = Duration::from_secs(60);

/// A problem with one entry; the session goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplError {
    /// `XPU-Q...`, or the code of the diagnostic or launch error it carries.
    pub code: String,
    /// The rendered text (one or more `error[CODE]: ...` lines, with source and caret).
    pub text: String,
}

impl ReplError {
    fn new(code: &'static str, message: impl std::fmt::Display) -> Self {
        ReplError {
            code: code.to_string(),
            text: format!("error[{code}]: {message}"),
        }
    }
}

impl std::fmt::Display for ReplError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What the driver does after an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Read the next entry; `ok` is false when this one failed.
    Continue {
        /// Whether the entry succeeded.
        ok: bool,
    },
    /// `:quit`.
    Quit,
}

/// One definition: the names it defines and its source text.
#[derive(Clone, Debug)]
struct Item {
    names: Vec<String>,
    text: String,
}

/// A session buffer: host bytes are the truth, uploaded to the device at each launch.
#[derive(Clone, Debug)]
struct Buf {
    elem: ElemType,
    /// Element count.
    len: usize,
    bytes: Vec<u8>,
    /// How it was made, while no launch has written it (what `:save` writes for it).
    origin: Option<ArgInit>,
}

/// A REPL session (see the module docs).
pub struct Session {
    items: Vec<Item>,
    buffers: BTreeMap<String, Buf>,
    /// Run blocks, typed or made from short launches, for `:save`.
    runs: Vec<RunSpec>,
    devices: Vec<Device>,
    interp: Device,
    module: Option<Arc<VerifiedModule>>,
    /// The module's program on each device, loaded on first use; dropped on a redefinition.
    programs: Vec<Option<Program>>,
    interp_program: Option<Program>,
    reader: input::Reader,
}

impl Session {
    /// A session launching on `devices` (at least one; `:backend` changes them).
    pub fn new(devices: Vec<Device>) -> Result<Session, DeviceError> {
        let interp = Device::open(Backend::Interp)?;
        let devices = if devices.is_empty() {
            vec![interp.clone()]
        } else {
            devices
        };
        Ok(Session {
            items: Vec::new(),
            buffers: BTreeMap::new(),
            runs: Vec::new(),
            programs: vec![None; devices.len()],
            devices,
            interp,
            module: None,
            interp_program: None,
            reader: input::Reader::default(),
        })
    }

    /// The devices launches go to.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Whether a multi-line entry is pending (the prompt shows continuation).
    pub fn pending(&self) -> bool {
        self.reader.pending()
    }

    /// Feeds one line of input: evaluates the entry it completes, if any.
    pub fn feed(&mut self, line: &str, out: &mut dyn Write, err: &mut dyn Write) -> Flow {
        match self.reader.push(line) {
            Some(entry) => self.eval_reporting(&entry, out, err),
            None => Flow::Continue { ok: true },
        }
    }

    /// Ends the input: an entry left unfinished is an error (`XPU-Q012`).
    pub fn finish(&mut self, err: &mut dyn Write) -> bool {
        match self.reader.take_pending() {
            Some(entry) => {
                let e = ReplError::new(
                    codes::UNFINISHED,
                    format!(
                        "the input ended inside the entry begun at line {} (its braces do not balance)",
                        entry.line
                    ),
                );
                let _ = writeln!(err, "{e}");
                false
            }
            None => true,
        }
    }

    fn eval_reporting(&mut self, entry: &Entry, out: &mut dyn Write, err: &mut dyn Write) -> Flow {
        match self.eval(entry, out) {
            Ok(flow) => flow,
            Err(e) => {
                let _ = writeln!(err, "{e}");
                Flow::Continue { ok: false }
            }
        }
    }

    /// Evaluates one complete entry, writing what it shows to `out`.
    pub fn eval(&mut self, entry: &Entry, out: &mut dyn Write) -> Result<Flow, ReplError> {
        let text = entry.text.trim();
        let ok = Ok(Flow::Continue { ok: true });
        if let Some(command) = text.strip_prefix(':') {
            return self.command(command.trim(), out);
        }
        if input::is_block_start(text) {
            if text.starts_with("run") && text["run".len()..].starts_with(char::is_whitespace) {
                self.run_block(&entry.text, out)?;
            } else {
                self.define(&entry.text, out)?;
            }
            return ok;
        }
        if text.starts_with("buf") && text["buf".len()..].starts_with(char::is_whitespace) {
            self.buffer(text, out)?;
            return ok;
        }
        if let Some(rest) = text.strip_prefix("print") {
            if rest.starts_with(char::is_whitespace) {
                let spec = input::parse_print(rest).map_err(|e| ReplError::new(codes::PRINT, e))?;
                self.print(&spec, out)?;
                return ok;
            }
        }
        if input::is_short_launch(text) {
            self.launch(text, false, out)?;
            return ok;
        }
        let bare = text.trim_end_matches(';').trim();
        if self.buffers.contains_key(bare) {
            let spec = input::PrintSpec {
                name: bare.to_string(),
                range: None,
                shape: None,
            };
            self.print(&spec, out)?;
            return ok;
        }
        Err(ReplError::new(
            codes::UNKNOWN_ENTRY,
            format!(
                "`{}`: not a definition, run block, `buf`, `print`, launch (`K<<<GRID, BLOCK>>>(ARGS)`) or `:command` (`:help`)",
                first_line(text)
            ),
        ))
    }

    // ---- definitions ----

    fn define(&mut self, text: &str, out: &mut dyn Write) -> Result<(), ReplError> {
        // The entry alone, for its syntax and the names it defines.
        let (tokens, mut diags) = crate::ir::text::lexer::tokenize(text);
        let mut parser = crate::ir::text::parser::Parser::new(tokens);
        let parsed = parser.items();
        diags.append(&mut parser.diags);
        if !diags.is_empty() {
            diags.sort_by_key(|d| d.span);
            return Err(render_diags(&Diagnostics(diags), text, 0, &[]));
        }
        use crate::ir::text::ast::Item as AstItem;
        let mut names = Vec::new();
        let mut kernels = Vec::new();
        for item in &parsed {
            match item {
                AstItem::Function(f) => {
                    names.push(f.name.clone());
                    if f.kernel {
                        kernels.push(f.name.clone());
                    }
                }
                AstItem::TagSet(t) => names.push(t.name.clone()),
                AstItem::Struct(s) => names.push(s.name.clone()),
                AstItem::Family(f) => names.push(f.name.clone()),
                AstItem::Run(_) => {
                    return Err(ReplError::new(
                        codes::ONE_ITEM,
                        "enter a run block on its own, after the definitions it launches",
                    ))
                }
            }
        }
        if names.is_empty() {
            return Err(ReplError::new(codes::ONE_ITEM, "the entry defines nothing"));
        }
        let mut items: Vec<Item> = self
            .items
            .iter()
            .filter(|i| !i.names.iter().any(|n| names.contains(n)))
            .cloned()
            .collect();
        let replaced = items.len() < self.items.len();
        // The names this entry takes from an earlier definition, and whether any was a kernel.
        let old_kernels: Vec<String> = self
            .module
            .as_ref()
            .map(|m| m.kernels().map(|(_, f)| f.name.clone()).collect())
            .unwrap_or_default();
        let replaced_names: Vec<&String> = self
            .items
            .iter()
            .flat_map(|i| i.names.iter())
            .filter(|n| names.contains(n))
            .collect();
        items.push(Item {
            names: names.clone(),
            text: text.to_string(),
        });
        let (source, starts) = assemble(&items);
        let module = crate::ir::parse(&source)
            .and_then(|m| m.verify())
            .map_err(|d| {
                let entry_start = *starts.last().unwrap_or(&0);
                render_diags(&d, &source, entry_start, &items_at(&items, &starts))
            })?;
        // Accepted: the old programs (and their compiled code) go, and so do the recorded runs
        // of what changed (all of them when a helper or tag set changed).
        let helper_changed = replaced_names.iter().any(|n| !old_kernels.contains(n));
        let before = self.runs.len();
        self.runs.retain(|r| {
            !helper_changed
                && !replaced_names
                    .iter()
                    .any(|n| kernel_base(&r.kernel) == n.as_str())
        });
        let dropped = before - self.runs.len();
        self.items = items;
        self.module = Some(Arc::new(module));
        self.programs = vec![None; self.devices.len()];
        self.interp_program = None;
        let verb = if replaced { "redefined" } else { "defined" };
        let _ = writeln!(out, "{verb} {}", names.join(", "));
        if dropped > 0 {
            let _ = writeln!(
                out,
                "note: {dropped} recorded run block(s) of the old definition dropped from `:save`"
            );
        }
        // Compile each kernel of the entry now, so that a backend refusing it says so here.
        for kernel in kernels {
            for i in 0..self.devices.len() {
                let program = self.program(i)?;
                if let Err(e) = program.kernel(&kernel) {
                    let _ = writeln!(
                        out,
                        "note: {} has no code for `{kernel}`: {e}",
                        self.devices[i].backend().name()
                    );
                }
            }
        }
        Ok(())
    }

    /// The session's module.
    fn module(&self) -> Result<&Arc<VerifiedModule>, ReplError> {
        self.module
            .as_ref()
            .ok_or_else(|| ReplError::new(codes::UNKNOWN_KERNEL, "no kernel is defined yet"))
    }

    /// The program of the session's module on device `i`, loaded on first use.
    fn program(&mut self, i: usize) -> Result<Program, ReplError> {
        if let Some(p) = &self.programs[i] {
            return Ok(p.clone());
        }
        let module = self.module()?.clone();
        let p = self.devices[i]
            .load(&module)
            .map_err(|e| ReplError::new(e.code(), e))?;
        self.programs[i] = Some(p.clone());
        Ok(p)
    }

    fn interp_program(&mut self) -> Result<Program, ReplError> {
        if let Some(p) = &self.interp_program {
            return Ok(p.clone());
        }
        let module = self.module()?.clone();
        let p = self
            .interp
            .load(&module)
            .map_err(|e| ReplError::new(e.code(), e))?;
        self.interp_program = Some(p.clone());
        Ok(p)
    }

    fn kernel_params(&self, kernel: &str) -> Result<Vec<(String, Type)>, ReplError> {
        let module = self.module()?;
        let f = crate::hal::kernel_function(module, kernel).ok_or_else(|| {
            ReplError::new(
                codes::UNKNOWN_KERNEL,
                format!("no kernel named `{kernel}` (`:list` shows the session)"),
            )
        })?;
        Ok(f.params.iter().map(|p| (p.name.clone(), p.ty)).collect())
    }

    // ---- run blocks ----

    fn run_block(&mut self, text: &str, out: &mut dyn Write) -> Result<(), ReplError> {
        let (_, specs) = crate::ir::parse_file(text).map_err(|d| render_diags(&d, text, 0, &[]))?;
        let [spec] = specs.as_slice() else {
            return Err(ReplError::new(
                codes::ONE_ITEM,
                "enter one run block at a time",
            ));
        };
        self.kernel_params(&spec.kernel)?;
        let mut timed = spec.clone();
        if timed.deadline.is_none() {
            timed.deadline = Some(DEADLINE);
        }
        let interp = self.interp_program()?;
        let mut failed = false;
        for i in 0..self.devices.len() {
            let program = self.program(i)?;
            let outcome = runner::run_case(&timed, &program, &interp);
            let tag = match &outcome {
                Outcome::Pass => "PASS",
                Outcome::Fail(_) => "FAIL",
                Outcome::Skip(_) => "SKIP",
            };
            let _ = writeln!(
                out,
                "{tag}  {}  {}",
                spec.kernel,
                self.devices[i].backend().name()
            );
            if let Outcome::Fail(d) | Outcome::Skip(d) = &outcome {
                for line in d.lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
            failed |= matches!(outcome, Outcome::Fail(_));
        }
        if failed {
            return Err(ReplError {
                code: "FAIL".into(),
                text: format!("error: the run block of `{}` failed", spec.kernel),
            });
        }
        self.runs.push(spec.clone());
        Ok(())
    }

    // ---- buffers ----

    fn buffer(&mut self, text: &str, out: &mut dyn Write) -> Result<(), ReplError> {
        let (name, ty, init) =
            input::split_buffer(text).map_err(|e| ReplError::new(codes::BUFFER, e))?;
        let elem = parse_elem(&ty)?;
        let init = parse_init(&init)?;
        if matches!(init, ArgInit::Uninit { .. } | ArgInit::Scalar(_)) {
            return Err(ReplError::new(
                codes::BUFFER,
                "a buffer takes a list, fill, iota or random",
            ));
        }
        let slots = runner::slots(&init, elem).map_err(|e| ReplError::new(codes::BUFFER, e))?;
        let len = slots.len() / elem.lanes as usize;
        let bytes = slots_to_bytes(&slots, elem.scalar);
        let _ = writeln!(
            out,
            "{name}: buf<{}>, {len} elements",
            crate::hal::launch::elem_name(elem)
        );
        self.buffers.insert(
            name,
            Buf {
                elem,
                len,
                bytes,
                origin: Some(init),
            },
        );
        Ok(())
    }

    fn print(&self, spec: &input::PrintSpec, out: &mut dyn Write) -> Result<(), ReplError> {
        let buf = self.buffer_named(&spec.name)?;
        let (lo, hi) = match spec.range {
            Some((lo, hi)) => (lo, hi.min(buf.len)),
            None => (0, buf.len),
        };
        if lo > hi {
            return Err(ReplError::new(
                codes::PRINT,
                format!("slice {lo}..{hi} of `{}` ({} elements)", spec.name, buf.len),
            ));
        }
        let text = show::render(
            &spec.name, buf.elem, buf.len, &buf.bytes, lo, hi, spec.shape,
        )
        .map_err(|e| ReplError::new(codes::PRINT, e))?;
        let _ = write!(out, "{text}");
        Ok(())
    }

    fn buffer_named(&self, name: &str) -> Result<&Buf, ReplError> {
        self.buffers.get(name).ok_or_else(|| {
            ReplError::new(
                codes::UNKNOWN_BUFFER,
                format!(
                    "no buffer named `{name}` (make one with `buf {name}: f32 = fill(16, 0.0)`)"
                ),
            )
        })
    }

    // ---- launches ----

    fn launch(&mut self, text: &str, time: bool, out: &mut dyn Write) -> Result<(), ReplError> {
        let short =
            input::parse_short_launch(text).map_err(|e| ReplError::new(codes::LAUNCH_SYNTAX, e))?;
        let params = self.kernel_params(&short.kernel)?;
        let plan = self.plan(&short, &params)?;
        let mut results: Vec<(Backend, Vec<Vec<u8>>)> = Vec::new();
        for i in 0..self.devices.len() {
            let program = self.program(i)?;
            let t0 = Instant::now();
            let got = launch_on(&program, &short, &params, &plan, &self.buffers)
                .map_err(|e| self.launch_error(e))?;
            let elapsed = t0.elapsed();
            let backend = self.devices[i].backend();
            if time {
                let _ = writeln!(
                    out,
                    "{}: {:.3} ms (wall, with uploads and downloads)",
                    backend.name(),
                    elapsed.as_secs_f64() * 1e3
                );
            }
            results.push((backend, got));
        }
        // The first device's results are the session's; the others are compared with them.
        let (first_backend, first) = &results[0];
        for (backend, got) in &results[1..] {
            for ((name, _), (a, b)) in written(&params, &plan).zip(first.iter().zip(got)) {
                let buf = &self.buffers[name];
                match show::first_difference(buf.elem, a, b) {
                    None => {
                        let _ = writeln!(
                            out,
                            "{}: `{name}` agrees with {}",
                            backend.name(),
                            first_backend.name()
                        );
                    }
                    Some(d) => {
                        let _ = writeln!(
                            out,
                            "{}: `{name}` differs from {} at {d}",
                            backend.name(),
                            first_backend.name()
                        );
                    }
                }
            }
        }
        // Record the launch as a run block (inputs before, results after) for `:save`.
        let mut spec = RunSpec {
            kernel: short.kernel.clone(),
            grid: short.grid,
            block: short.block,
            shared_bytes: short.shared_bytes,
            wave: None,
            ulps: 0,
            deadline: None,
            allow_races: false,
            shuffle_seed: None,
            max_steps: None,
            args: Vec::new(),
            expects: Vec::new(),
            span: Span::UNKNOWN,
        };
        for ((pname, _), arg) in params.iter().zip(&short.args) {
            let init = match arg {
                LaunchArg::Value(v) => ArgInit::Scalar(*v),
                LaunchArg::Buffer(b) => init_of(&self.buffers[b]),
            };
            spec.args.push(RunArg {
                name: pname.clone(),
                init,
                span: Span::UNKNOWN,
            });
        }
        let first = results.swap_remove(0).1;
        for ((pname, bname), bytes) in written(&params, &plan).zip(first) {
            let buf = self.buffers.get_mut(bname).expect("planned");
            buf.bytes = bytes;
            buf.origin = None;
            spec.expects.push(Expect::Buffer {
                name: pname.clone(),
                value: init_of(buf),
                span: Span::UNKNOWN,
            });
        }
        let written: Vec<&str> = written(&params, &plan).map(|(_, b)| b.as_str()).collect();
        let _ = writeln!(
            out,
            "ran {} on {}{}",
            short.kernel,
            self.devices
                .iter()
                .map(|d| d.backend().name())
                .collect::<Vec<_>>()
                .join(", "),
            if written.is_empty() {
                String::new()
            } else {
                format!("; wrote {}", written.join(", "))
            }
        );
        self.runs.push(spec);
        Ok(())
    }

    /// Checks the short launch's arguments against the parameters: for each parameter, the
    /// session buffer or the value it takes.
    fn plan(
        &self,
        short: &ShortLaunch,
        params: &[(String, Type)],
    ) -> Result<Vec<Planned>, ReplError> {
        if short.args.len() != params.len() {
            return Err(ReplError::new(
                codes::LAUNCH_ARGS,
                format!(
                    "`{}` takes {} arguments ({}), got {}",
                    short.kernel,
                    params.len(),
                    params
                        .iter()
                        .map(|(n, t)| format!("{n}: {}", crate::hal::launch::type_name(*t)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    short.args.len()
                ),
            ));
        }
        let mut plan = Vec::new();
        for ((pname, ty), arg) in params.iter().zip(&short.args) {
            let bad =
                |m: String| ReplError::new(codes::LAUNCH_ARGS, format!("argument `{pname}`: {m}"));
            plan.push(match (ty, arg) {
                (Type::Buffer { elem, access }, LaunchArg::Buffer(b)) => {
                    let buf = self.buffer_named(b)?;
                    if buf.elem != *elem {
                        return Err(bad(format!(
                            "`{b}` is a buffer of {}, the parameter takes {}",
                            crate::hal::launch::elem_name(buf.elem),
                            crate::hal::launch::elem_name(*elem)
                        )));
                    }
                    Planned::Buffer {
                        name: b.clone(),
                        writable: *access == Access::ReadWrite,
                    }
                }
                (Type::Buffer { .. }, LaunchArg::Value(_)) => {
                    return Err(bad(
                        "a buffer parameter takes a session buffer's name".into()
                    ))
                }
                (Type::Scalar(s), LaunchArg::Value(v)) => Planned::Value(HostValue::scalar(
                    *s,
                    runner::scalar_bits(*v, *s).map_err(bad)?,
                )),
                (Type::Vector(s, n), LaunchArg::Value(v)) => {
                    let bits = runner::scalar_bits(*v, *s).map_err(bad)?;
                    Planned::Value(
                        HostValue::vector(*s, &vec![bits; *n as usize])
                            .ok_or_else(|| bad("not a vector value".into()))?,
                    )
                }
                (Type::Tag(_), LaunchArg::Value(v)) => {
                    Planned::Tag(runner::scalar_bits(*v, Scalar::U32).map_err(bad)? as u32)
                }
                (ty, LaunchArg::Buffer(b)) => {
                    return Err(bad(format!(
                        "`{b}` is a buffer, the parameter is {}",
                        crate::hal::launch::type_name(*ty)
                    )))
                }
                (ty, _) => {
                    return Err(bad(format!(
                        "a parameter of type {} cannot be given here",
                        crate::hal::launch::type_name(*ty)
                    )))
                }
            });
        }
        // A buffer written through one parameter and passed again would alias.
        for (i, p) in plan.iter().enumerate() {
            if let Planned::Buffer { name, writable } = p {
                let again = plan[i + 1..]
                    .iter()
                    .any(|q| matches!(q, Planned::Buffer { name: n, .. } if n == name));
                if again && (*writable || plan.iter().any(|q| matches!(q, Planned::Buffer { name: n, writable: true } if n == name))) {
                    return Err(ReplError::new(
                        codes::LAUNCH_ARGS,
                        format!("`{name}` is passed twice and written: each argument is its own buffer here"),
                    ));
                }
            }
        }
        Ok(plan)
    }

    /// A launch error, with the source line and a caret where it says where it happened.
    fn launch_error(&self, e: Failure) -> ReplError {
        let e = match e {
            Failure::Launch(e) => e,
            Failure::Device(d) => return ReplError::new(d.code(), d),
        };
        let mut text = e.to_string();
        if let Some(site) = e.site() {
            let (source, starts) = assemble(&self.items);
            if let Some(shown) = caret(&source, site.span, &items_at(&self.items, &starts)) {
                text.push('\n');
                text.push_str(&shown);
            }
        }
        ReplError {
            code: e.code().to_string(),
            text,
        }
    }

    // ---- commands ----

    fn command(&mut self, command: &str, out: &mut dyn Write) -> Result<Flow, ReplError> {
        let (name, rest) = command
            .split_once(char::is_whitespace)
            .map(|(a, b)| (a, b.trim()))
            .unwrap_or((command, ""));
        let ok = Ok(Flow::Continue { ok: true });
        match name {
            "quit" | "q" | "exit" => Ok(Flow::Quit),
            "help" | "h" => {
                let _ = write!(out, "{HELP}");
                ok
            }
            "backend" => {
                if rest.is_empty() {
                    let _ = writeln!(out, "backend: {}", self.backend_names());
                    return ok;
                }
                let devices = runner::select_devices(rest)
                    .map_err(|e| ReplError::new(codes::BACKEND, format!("`{rest}`: {e}")))?;
                self.programs = vec![None; devices.len()];
                self.devices = devices;
                let _ = writeln!(out, "backend: {}", self.backend_names());
                ok
            }
            "time" => {
                if rest.is_empty() {
                    return Err(ReplError::new(
                        codes::LAUNCH_SYNTAX,
                        "`:time K<<<GRID, BLOCK>>>(ARGS)` times one launch",
                    ));
                }
                self.launch(rest, true, out)?;
                ok
            }
            "manifest" => {
                let kernel = self.kernel_arg(rest)?;
                for i in 0..self.devices.len() {
                    let program = self.program(i)?;
                    let k = program
                        .kernel(&kernel)
                        .map_err(|e| ReplError::new(e.code(), e))?;
                    let _ = write!(out, "{}", show::manifest(k.manifest()));
                }
                ok
            }
            "ir" => {
                let kernel = self.kernel_arg(rest)?;
                let module = self.module()?;
                let text = show::function_text(module.module(), &kernel).ok_or_else(|| {
                    ReplError::new(codes::UNKNOWN_KERNEL, format!("no kernel named `{kernel}`"))
                })?;
                let _ = write!(out, "{text}");
                ok
            }
            "asm" => {
                let mut words = rest.split_whitespace();
                let kernel = self.kernel_arg(words.next().unwrap_or(""))?;
                let target = match words.next() {
                    Some(t) => t.to_string(),
                    None => match self.devices[0].backend() {
                        Backend::Cpu => "clif".into(),
                        Backend::Vulkan => "spirv".into(),
                        Backend::Cuda => "ptx".into(),
                        Backend::Hip => "amdgpu".into(),
                        Backend::Interp => "ir".into(),
                    },
                };
                let module = self.module()?.clone();
                let text = show::asm(&module, &kernel, &target, self.devices[0].backend())
                    .map_err(|e| ReplError::new(codes::ASM, e))?;
                let _ = write!(out, "{text}");
                if !text.ends_with('\n') {
                    let _ = writeln!(out);
                }
                ok
            }
            "save" => {
                if rest.is_empty() {
                    return Err(ReplError::new(codes::SAVE, "`:save FILE`"));
                }
                let text = self.saved_text();
                std::fs::write(rest, text)
                    .map_err(|e| ReplError::new(codes::SAVE, format!("{rest}: {e}")))?;
                let _ = writeln!(
                    out,
                    "saved {} definitions and {} run blocks to {rest}",
                    self.items.len(),
                    self.runs.len()
                );
                ok
            }
            "list" | "ls" => {
                for item in &self.items {
                    let _ = writeln!(out, "def  {}", item.names.join(", "));
                }
                for (name, b) in &self.buffers {
                    let _ = writeln!(
                        out,
                        "buf  {name}: buf<{}>, {} elements",
                        crate::hal::launch::elem_name(b.elem),
                        b.len
                    );
                }
                let _ = writeln!(out, "backend: {}", self.backend_names());
                ok
            }
            _ => Err(ReplError::new(
                codes::UNKNOWN_COMMAND,
                format!("`:{name}`: no such command (`:help` lists them)"),
            )),
        }
    }

    fn backend_names(&self) -> String {
        self.devices
            .iter()
            .map(|d| d.backend().name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn kernel_arg(&self, rest: &str) -> Result<String, ReplError> {
        let kernel = rest.trim();
        if kernel.is_empty() {
            return Err(ReplError::new(codes::UNKNOWN_KERNEL, "name a kernel"));
        }
        self.kernel_params(kernel)?;
        Ok(kernel.to_string())
    }

    /// The session as a kernel file: the definitions in canonical form, then the run blocks.
    pub fn saved_text(&self) -> String {
        let module: Module = match &self.module {
            Some(m) => m.module().clone(),
            None => Module::default(),
        };
        let mut text = String::from("// Saved by `xpu repl`.\n\n");
        text.push_str(&crate::ir::text::print_file(&module, &self.runs));
        text
    }
}

/// What a short launch passes for one parameter.
#[derive(Clone, Debug)]
enum Planned {
    Buffer { name: String, writable: bool },
    Value(HostValue),
    Tag(u32),
}

/// The (parameter, buffer) pairs a launch writes.
fn written<'a>(
    params: &'a [(String, Type)],
    plan: &'a [Planned],
) -> impl Iterator<Item = (&'a String, &'a String)> {
    params.iter().zip(plan).filter_map(|((p, _), q)| match q {
        Planned::Buffer {
            name,
            writable: true,
        } => Some((p, name)),
        _ => None,
    })
}

enum Failure {
    Launch(LaunchError),
    Device(DeviceError),
}

/// Uploads the planned buffers to `program`'s device, launches, waits, and returns the bytes
/// of each written buffer (in parameter order).
fn launch_on(
    program: &Program,
    short: &ShortLaunch,
    params: &[(String, Type)],
    plan: &[Planned],
    buffers: &BTreeMap<String, Buf>,
) -> Result<Vec<Vec<u8>>, Failure> {
    let device = program.device();
    let kernel = program.kernel(&short.kernel).map_err(Failure::Launch)?;
    let mut raws: Vec<Option<RawBuffer>> = Vec::new();
    for p in plan {
        raws.push(match p {
            Planned::Buffer { name, .. } => {
                let buf = &buffers[name];
                let raw = RawBuffer::alloc_with(device, buf.bytes.len(), Init::Any)
                    .map_err(Failure::Device)?;
                raw.write(&buf.bytes).map_err(Failure::Device)?;
                Some(raw)
            }
            _ => None,
        });
    }
    let mut args: Vec<ArgValue<'_>> = Vec::new();
    for (((_, ty), p), raw) in params.iter().zip(plan).zip(raws.iter_mut()) {
        args.push(match (ty, p, raw) {
            (Type::Buffer { elem, .. }, Planned::Buffer { writable: true, .. }, Some(r)) => {
                ArgValue::raw_mut(r, *elem)
            }
            (Type::Buffer { elem, .. }, Planned::Buffer { .. }, Some(r)) => ArgValue::raw(r, *elem),
            (_, Planned::Value(v), _) => ArgValue::Value(*v),
            (_, Planned::Tag(t), _) => ArgValue::Tag(*t),
            _ => unreachable!("planned against the parameters"),
        });
    }
    let launch = Launch::grid(short.grid)
        .block(short.block)
        .shared_bytes(short.shared_bytes)
        .deadline(DEADLINE);
    let stream = KernelStream::current(device);
    kernel
        .launch(&stream, launch, &mut args)
        .map_err(Failure::Launch)?;
    stream.sync().map_err(|e| {
        Failure::Launch(LaunchError::Device {
            kernel: short.kernel.clone(),
            message: e.to_string(),
        })
    })?;
    drop(args);
    let mut out = Vec::new();
    for (p, raw) in plan.iter().zip(&raws) {
        if let (Planned::Buffer { writable: true, .. }, Some(r)) = (p, raw) {
            out.push(r.read().map_err(Failure::Device)?);
        }
    }
    Ok(out)
}

/// A buffer's contents as a run-block initialiser: how it was made while no launch wrote it,
/// else its values as a list.
fn init_of(buf: &Buf) -> ArgInit {
    if let Some(origin) = &buf.origin {
        return origin.clone();
    }
    let size = buf.elem.scalar.size() as usize;
    let values = buf
        .bytes
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            show::slot_value(u64::from_le_bytes(b), buf.elem.scalar)
        })
        .collect();
    ArgInit::List(values)
}

fn slots_to_bytes(slots: &[u64], scalar: Scalar) -> Vec<u8> {
    let size = scalar.size() as usize;
    let mut out = Vec::with_capacity(slots.len() * size);
    for s in slots {
        out.extend_from_slice(&s.to_le_bytes()[..size]);
    }
    out
}

/// A buffer's element type as the text format writes it (`f32`, `vec4<f16>`).
fn parse_elem(ty: &str) -> Result<ElemType, ReplError> {
    let wrapped = format!("device fn repl_type(x: buf<{ty}>) {{}}\n");
    let bad = || {
        ReplError::new(
            codes::BUFFER,
            format!("`{ty}`: not an element type (`f32`, `u8`, `vec4<f16>`, ...)"),
        )
    };
    let module = crate::ir::parse(&wrapped).map_err(|_| bad())?;
    let f = module
        .functions
        .iter()
        .next()
        .map(|(_, f)| f)
        .ok_or_else(bad)?;
    match f.params.first().map(|p| p.ty) {
        Some(Type::Buffer { elem, .. }) => Ok(elem),
        _ => Err(bad()),
    }
}

/// A buffer initialiser as a run block's `arg` writes it.
fn parse_init(init: &str) -> Result<ArgInit, ReplError> {
    const PREFIX: &str = "run repl_buffer { grid = [1]; block = [1]; arg x = ";
    let wrapped = format!("{PREFIX}{init}; }}\n");
    match crate::ir::parse_file(&wrapped) {
        Ok((_, specs)) => specs
            .first()
            .and_then(|s| s.args.first())
            .map(|a| a.init.clone())
            .ok_or_else(|| ReplError::new(codes::BUFFER, format!("`{init}`: no initialiser"))),
        Err(d) => {
            let first = &d.0[0];
            let col = (first.span.col as usize).saturating_sub(PREFIX.len());
            Err(ReplError::new(
                codes::BUFFER,
                format!(
                    "`{init}`: {} (a list, `fill(len, v)`, `iota(len)`, `iota(len, start, step)` or `random(len, lo, hi, seed S)`)\n    {init}\n    {}^",
                    first.message,
                    " ".repeat(col.saturating_sub(1))
                ),
            ))
        }
    }
}

/// The items' sources joined, and the 0-based line each starts at.
fn assemble(items: &[Item]) -> (String, Vec<usize>) {
    let mut source = String::new();
    let mut starts = Vec::new();
    for item in items {
        starts.push(source.lines().count());
        source.push_str(&item.text);
        if !item.text.ends_with('\n') {
            source.push('\n');
        }
    }
    (source, starts)
}

/// Each item's first line and its names, for telling where a line of the assembled source is.
fn items_at(items: &[Item], starts: &[usize]) -> Vec<(usize, String)> {
    items
        .iter()
        .zip(starts)
        .map(|(i, s)| (*s, i.names.join(", ")))
        .collect()
}

/// Renders diagnostics of `source` (the assembled session, or one entry): each with the line
/// it points at and a caret. Lines from `entry_start` on are the entry's own and are numbered
/// from its first line; a line of an earlier definition names that definition.
fn render_diags(
    d: &Diagnostics,
    source: &str,
    entry_start: usize,
    items: &[(usize, String)],
) -> ReplError {
    let mut text = String::new();
    for (k, diag) in d.0.iter().enumerate() {
        if k > 0 {
            text.push('\n');
        }
        let line0 = (diag.span.line as usize).saturating_sub(1);
        let place = if line0 >= entry_start || items.is_empty() {
            format!("{}:{}", line0 + 1 - entry_start, diag.span.col)
        } else {
            let (start, names) = item_of(items, line0);
            format!("in `{names}`, line {}:{}", line0 + 1 - start, diag.span.col)
        };
        text.push_str(&format!("{place}: error[{}]: {}", diag.code, diag.message));
        if let Some(shown) = caret(source, diag.span, &[]) {
            text.push('\n');
            text.push_str(&shown);
        }
    }
    ReplError {
        code: d.0.first().map_or("XPU-P003", |x| x.code).to_string(),
        text,
    }
}

fn item_of(items: &[(usize, String)], line0: usize) -> (usize, String) {
    items
        .iter()
        .rev()
        .find(|(s, _)| *s <= line0)
        .cloned()
        .unwrap_or((0, String::new()))
}

/// The source line `span` points at and a caret under its column (under the line's first
/// character when the column is unknown); with `items`, preceded by the definition it is in.
fn caret(source: &str, span: Span, items: &[(usize, String)]) -> Option<String> {
    if !span.is_known() {
        return None;
    }
    let line0 = span.line as usize - 1;
    let line = source.lines().nth(line0)?;
    let col = if span.col == 0 {
        line.chars().take_while(|c| c.is_whitespace()).count() + 1
    } else {
        span.col as usize
    };
    let mut out = String::new();
    if !items.is_empty() {
        let (start, names) = item_of(items, line0);
        out.push_str(&format!("  --> `{names}`, line {}\n", line0 + 1 - start));
    }
    out.push_str(&format!(
        "    {line}\n    {}^",
        " ".repeat(col.saturating_sub(1))
    ));
    Some(out)
}

/// A kernel's name without a template instance's arguments (`QkTile<64,64>` is `QkTile`).
fn kernel_base(name: &str) -> &str {
    name.split('<').next().unwrap_or(name)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

const HELP: &str = "\
Entries (docs/repl.md):
  kernel K(...) { ... }          define or redefine a kernel (also `device fn`, `tagset`);
                                 a definition ends when its braces balance
  run K { grid = [..]; ... }     a run block, run as `xpu run` runs it
  buf NAME: TYPE = INIT          a buffer: [..], fill(len, v), iota(len[, start, step]),
                                 random(len, lo, hi, seed S)
  K<<<GRID, BLOCK[, SHARED]>>>(ARGS)
                                 launch: ARGS are buffer names and literals
  print NAME[LO..HI] as R x C    show a buffer (slice and shape optional); NAME alone too
Commands:
  :backend [NAME|all|best]       show or switch the backend(s) launches go to
  :time LAUNCH                   launch and print the time it took on each backend
  :manifest K                    the kernel's manifest on each backend
  :ir K                          the kernel in canonical text
  :asm K [clif|spirv|ptx|amdgpu|ir]  device code (default: the backend's own)
  :save FILE                     write the session as a kernel file with run blocks
  :list                          definitions, buffers and backends
  :help, :quit
";
