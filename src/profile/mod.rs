//! The profiler (contract §5.4): `CAJETA_PROFILER=1` arms capture before any backend
//! initialises, and every launch, compile, copy and sync becomes a span of a Chrome
//! trace-event file (`CAJETA_PROFILER_OUT`, default `xpu-trace.json`) that Perfetto and
//! `chrome://tracing` open.
//!
//! A leaf of the layer order (beside `config`): the runtime and the backends push spans
//! here; nothing here knows a device.
//!
//! - **Host spans** sit on the track of the thread that made the call (a launch call, a
//!   compile, a copy, a sync).
//! - **Device spans** sit on one track per stream and carry the [`Tier`] that produced them:
//!   `DEVICE` (the vendor's dispatch records, or device timestamps written inside the command
//!   buffer), `EVENT` (device-event brackets), `HOST` (submit to complete as the host saw it:
//!   exact on the host backends, whose streams run a launch inside the call; at the next
//!   completion the host observes on asynchronous ones).
//!
//! Spans go into a per-thread buffer (a `Vec` behind a `thread_local!`, registered once per
//! thread in a global list that is read only when the trace is written), so a launch never
//! waits on another thread. Device spans of asynchronous streams wait in a pending table
//! until their stream completes; the table grows rather than dropping a launch. The trace's
//! `otherData` carries the counters that say when a capture is incomplete:
//! `gpu_pending_overflow` (pending spans that could not be held: always 0 here, the table
//! grows), `unclaimed` (device spans whose stream never completed before the trace was
//! written), `records_dropped` (spans past a thread's cap of [`MAX_SPANS_PER_THREAD`]).
//!
//! The trace is written at [`finish`], which the `xpu` command calls at exit and which is
//! also registered with `atexit` when capture is armed.

pub mod summary;

use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Codes of profiler errors.
pub mod codes {
    /// The trace could not be written.
    pub const WRITE: &str = "XPU-F001";
    /// A trace file could not be read or is not trace-event JSON.
    pub const READ: &str = "XPU-F002";
    /// `xpu profile`: the command could not be started.
    pub const SPAWN: &str = "XPU-F003";
    /// `xpu profile`: no command was given.
    pub const NO_COMMAND: &str = "XPU-F004";
}

/// A profiler failure.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("error[{}]: cannot write the trace {}: {message}", codes::WRITE, .path.display())]
    Write { path: PathBuf, message: String },
    #[error("error[{}]: cannot read the trace {}: {message}", codes::READ, .path.display())]
    Read { path: PathBuf, message: String },
    #[error("error[{}]: cannot run `{command}`: {message}", codes::SPAWN)]
    Spawn { command: String, message: String },
    #[error(
        "error[{}]: `xpu profile` needs a command after `--`",
        codes::NO_COMMAND
    )]
    NoCommand,
}

impl ProfileError {
    pub fn code(&self) -> &'static str {
        match self {
            ProfileError::Write { .. } => codes::WRITE,
            ProfileError::Read { .. } => codes::READ,
            ProfileError::Spawn { .. } => codes::SPAWN,
            ProfileError::NoCommand => codes::NO_COMMAND,
        }
    }
}

/// Which clock produced a device span (contract §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// The vendor's dispatch records, or timestamps written by the device inside the command
    /// buffer (Vulkan timestamp queries).
    Device,
    /// Device events around the work.
    Event,
    /// Submit to complete, as the host saw it.
    Host,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Device => "DEVICE",
            Tier::Event => "EVENT",
            Tier::Host => "HOST",
        }
    }
}

/// What a span is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Launch,
    Compile,
    Copy,
    Sync,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Launch => "launch",
            Kind::Compile => "compile",
            Kind::Copy => "copy",
            Kind::Sync => "sync",
        }
    }
}

/// A span's arguments as they appear in the trace.
#[derive(Clone, Debug, Default)]
pub struct Args {
    /// The backend's name.
    pub backend: &'static str,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    /// Bytes moved (copies) or bound (launches).
    pub bytes: Option<u64>,
    /// What produced a compile span (`cranelift`, `spirv+pipeline`, `llvm+ptxas`, ...).
    pub stage: Option<&'static str>,
}

/// Where a span is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Track {
    /// The host thread (its ordinal in the trace).
    Thread(u64),
    /// A device stream, by a key unique to it in the process.
    Stream(u64),
}

/// One span.
#[derive(Clone, Debug)]
pub struct Span {
    pub kind: Kind,
    pub name: String,
    /// Nanoseconds since capture was armed.
    pub start_ns: u64,
    pub dur_ns: u64,
    pub track: Track,
    /// The tier of a device span; `None` on host spans.
    pub tier: Option<Tier>,
    pub args: Args,
}

/// The most spans one thread keeps; more are counted in `records_dropped`.
pub const MAX_SPANS_PER_THREAD: usize = 64 << 20;

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static EPOCH: OnceLock<Instant> = OnceLock::new();
static OUT: Mutex<Option<PathBuf>> = Mutex::new(None);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
static FINISHED: AtomicU8 = AtomicU8::new(0);

type Buffer = Arc<Mutex<Vec<Span>>>;

/// Every thread's buffer, with the thread's ordinal and name.
static THREADS: Mutex<Vec<(u64, String, Buffer)>> = Mutex::new(Vec::new());

/// The device time of a span, asked once its stream has completed: nanoseconds, or `None`
/// when the device could not say.
pub type DeviceClock = Box<dyn FnOnce() -> Option<u64> + Send>;

/// Device spans waiting for their stream to complete, by stream key.
static PENDING: Mutex<Option<HashMap<u64, Vec<(Span, Option<DeviceClock>)>>>> = Mutex::new(None);

/// Names of device streams' tracks, by stream key.
static STREAMS: Mutex<Option<HashMap<u64, String>>> = Mutex::new(None);

thread_local! {
    static LOCAL: RefCell<Option<(u64, Buffer)>> = const { RefCell::new(None) };
}

/// Whether capture is armed: one relaxed load once the setting has been read.
#[inline]
pub fn armed() -> bool {
    match STATE.load(Ordering::Relaxed) {
        OFF => false,
        ON => true,
        _ => init_from_config(),
    }
}

/// Whether the profiler's device sink is live: device spans of launches are being captured
/// (the deferred-streams work reads it to keep every launch direct while it is, §2.4).
pub fn device_sink_live() -> bool {
    armed() && FINISHED.load(Ordering::Relaxed) == 0
}

#[cold]
fn init_from_config() -> bool {
    let config = crate::config::get();
    let on = match &config.profiler {
        Ok(on) => *on,
        Err(e) => {
            eprintln!("note: {e}; the profiler stays off");
            false
        }
    };
    if on {
        arm(&config.profiler_out);
    } else {
        let _ = STATE.compare_exchange(UNKNOWN, OFF, Ordering::Relaxed, Ordering::Relaxed);
    }
    STATE.load(Ordering::Relaxed) == ON
}

/// Arms capture for this process, writing the trace to `out` at [`finish`] (the API form of
/// `CAJETA_PROFILER=1`; call it before the first device touch to capture every compile).
pub fn arm(out: &Path) {
    EPOCH.get_or_init(Instant::now);
    *OUT.lock() = Some(out.to_path_buf());
    if STATE.swap(ON, Ordering::Relaxed) != ON {
        extern "C" fn at_exit() {
            let _ = finish();
        }
        // SAFETY: `at_exit` is a plain `extern "C"` function with no arguments that only
        // writes the trace; registering it has no other precondition.
        unsafe {
            libc::atexit(at_exit);
        }
    }
}

/// Nanoseconds since capture was armed (0 when it is not).
#[inline]
pub fn now_ns() -> u64 {
    match EPOCH.get() {
        Some(e) => e.elapsed().as_nanos() as u64,
        None => 0,
    }
}

/// This thread's ordinal and buffer, registered on first use.
fn local<R>(f: impl FnOnce(u64, &Buffer) -> R) -> R {
    LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        let (id, buf) = local.get_or_insert_with(|| {
            let id = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            let name = std::thread::current()
                .name()
                .map_or_else(|| format!("thread {id}"), str::to_string);
            let buf: Buffer = Arc::new(Mutex::new(Vec::new()));
            THREADS.lock().push((id, name, buf.clone()));
            (id, buf)
        });
        f(*id, buf)
    })
}

fn push(span: Span) {
    local(|_, buf| {
        let mut buf = buf.lock();
        if buf.len() >= MAX_SPANS_PER_THREAD {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        } else {
            buf.push(span);
        }
    })
}

fn thread_track() -> Track {
    local(|id, _| Track::Thread(id))
}

/// Records a host span on the calling thread from `start_ns` ([`now_ns`]) to now.
pub fn host_span(kind: Kind, name: &str, start_ns: u64, args: Args) {
    let end = now_ns();
    let track = thread_track();
    push(Span {
        kind,
        name: name.to_string(),
        start_ns,
        dur_ns: end.saturating_sub(start_ns),
        track,
        tier: None,
        args,
    });
}

/// Names the track of stream `key` (shown as the track's name in the trace).
pub fn name_stream(key: u64, name: impl FnOnce() -> String) {
    let mut streams = STREAMS.lock();
    streams
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(name);
}

/// Records a finished device span on stream `key`'s track.
pub fn device_span(key: u64, name: &str, start_ns: u64, end_ns: u64, tier: Tier, args: Args) {
    push(Span {
        kind: Kind::Launch,
        name: name.to_string(),
        start_ns,
        dur_ns: end_ns.saturating_sub(start_ns),
        track: Track::Stream(key),
        tier: Some(tier),
        args,
    });
}

/// Holds a device span of an asynchronous stream, submitted at `start_ns`, until
/// [`stream_completed`] says the stream has drained. With a `clock` (device events or
/// timestamps around the launch, tier `tier`) the span lasts what the clock says; without
/// one, or when it cannot say, it gets tier `HOST` (submit to complete).
pub fn pend_device_span(
    key: u64,
    name: &str,
    start_ns: u64,
    args: Args,
    clock: Option<(Tier, DeviceClock)>,
) {
    let (tier, clock) = match clock {
        Some((t, c)) => (t, Some(c)),
        None => (Tier::Host, None),
    };
    let span = Span {
        kind: Kind::Launch,
        name: name.to_string(),
        start_ns,
        dur_ns: 0,
        track: Track::Stream(key),
        tier: Some(tier),
        args,
    };
    PENDING
        .lock()
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_default()
        .push((span, clock));
}

/// Stream `key` has completed everything submitted to it: its pending spans are resolved. A
/// span with a device clock lasts what the clock measured and starts at its submission or
/// where the previous span on the stream ended, whichever is later (a stream runs its work in
/// order); the others share the window from their submission to now (tier `HOST`).
pub fn stream_completed(key: u64) {
    let spans = PENDING.lock().as_mut().and_then(|p| p.remove(&key));
    let Some(spans) = spans else { return };
    let end = now_ns();
    let n = spans.len() as u64;
    let mut cursor = 0u64;
    for (i, (mut span, clock)) in spans.into_iter().enumerate() {
        let start = span.start_ns.max(cursor);
        span.start_ns = start;
        match clock.and_then(|c| c()) {
            Some(dur) => span.dur_ns = dur,
            None => {
                let remaining = n - i as u64;
                span.tier = Some(Tier::Host);
                span.dur_ns = end.saturating_sub(start) / remaining.max(1);
            }
        }
        cursor = start + span.dur_ns;
        push(span);
    }
}

/// Writes the trace (once; later calls do nothing) and returns its path, or `None` when
/// capture was never armed.
pub fn finish() -> Result<Option<PathBuf>, ProfileError> {
    if STATE.load(Ordering::Relaxed) != ON {
        return Ok(None);
    }
    if FINISHED.swap(1, Ordering::Relaxed) != 0 {
        return Ok(None);
    }
    let Some(path) = OUT.lock().clone() else {
        return Ok(None);
    };
    let text = trace_json();
    std::fs::write(&path, text).map_err(|e| ProfileError::Write {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(Some(path))
}

/// The trace so far as Chrome trace-event JSON.
pub fn trace_json() -> String {
    use serde_json::{json, Map, Value};
    let unclaimed: usize = PENDING
        .lock()
        .as_ref()
        .map_or(0, |p| p.values().map(Vec::len).sum());
    let threads: Vec<(u64, String, Buffer)> = THREADS.lock().clone();
    let streams = STREAMS.lock().clone().unwrap_or_default();
    let mut events = Vec::new();
    let pid = 1;
    events.push(json!({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": "xpu"}}));
    // Stream tracks follow the host threads: tids from 1_000_000 in first-seen order.
    let mut stream_tids: HashMap<u64, u64> = HashMap::new();
    for (id, name, _) in &threads {
        events.push(
            json!({"ph": "M", "pid": pid, "tid": id, "name": "thread_name",
            "args": {"name": name}}),
        );
    }
    for (_, _, buf) in &threads {
        for span in buf.lock().iter() {
            let tid = match span.track {
                Track::Thread(id) => id,
                Track::Stream(key) => {
                    let next = 1_000_000 + stream_tids.len() as u64;
                    let tid = *stream_tids.entry(key).or_insert(next);
                    if tid == next {
                        let name = streams
                            .get(&key)
                            .cloned()
                            .unwrap_or_else(|| format!("stream {}", tid - 1_000_000));
                        events.push(json!({"ph": "M", "pid": pid, "tid": tid,
                            "name": "thread_name", "args": {"name": name}}));
                    }
                    tid
                }
            };
            let mut args = Map::new();
            if !span.args.backend.is_empty() {
                args.insert("backend".into(), json!(span.args.backend));
            }
            if span.kind == Kind::Launch {
                args.insert("kernel".into(), json!(span.name));
            }
            if let Some(g) = span.args.grid {
                args.insert("grid".into(), json!(g));
            }
            if let Some(b) = span.args.block {
                args.insert("block".into(), json!(b));
            }
            if let Some(b) = span.args.bytes {
                args.insert("bytes".into(), json!(b));
            }
            if let Some(s) = span.args.stage {
                args.insert("stage".into(), json!(s));
            }
            if let Some(t) = span.tier {
                args.insert("tier".into(), json!(t.name()));
            }
            events.push(json!({
                "name": span.name,
                "cat": if span.tier.is_some() { format!("device.{}", span.kind.name()) }
                       else { span.kind.name().to_string() },
                "ph": "X",
                "ts": span.start_ns as f64 / 1000.0,
                "dur": span.dur_ns as f64 / 1000.0,
                "pid": pid,
                "tid": tid,
                "args": Value::Object(args),
            }));
        }
    }
    let counters = json!({
        "gpu_pending_overflow": 0,
        "unclaimed": unclaimed,
        "records_dropped": DROPPED.load(Ordering::Relaxed),
    });
    events.push(
        json!({"ph": "C", "pid": pid, "tid": 0, "ts": now_ns() as f64 / 1000.0,
        "name": "capture", "args": counters.clone()}),
    );
    serde_json::to_string(&json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": counters,
    }))
    .unwrap_or_default()
}
