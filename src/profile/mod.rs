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
//!   `DEVICE` (the vendor's dispatch records: CUPTI's activity API on CUDA, [`device_record`]),
//!   `EVENT` (device-event brackets: CUDA/HIP events, Vulkan timestamp queries), `HOST`
//!   (submit to complete as the host saw it: exact on the host backends, whose streams run a
//!   launch inside the call; at the next completion the host observes on asynchronous ones).
//!   The trace's `otherData.device_sources` says which source each backend used.
//!
//! # The launch path
//!
//! Capture costs a launch two reads of a cheap counter ([`clock`]: `rdtsc` where the TSC is
//! invariant) and one fixed-size record (kernel id, grid, block, bytes, tier, two stamps):
//! no allocation, no lock, no formatting, no clock conversion; kernel names are interned once
//! per kernel ([`intern`]), backend and stage names through a thread-local cache. A span that
//! is final when recorded (every host span, and a launch on a host backend, whose device span
//! is its call's window) goes into the calling thread's [`log`]: append-only chunks that no
//! other thread reads before the trace is written. Launches on asynchronous streams, stream
//! completions and vendor dispatch records go through the thread's preallocated [`ring`],
//! which a writer thread (`xpu-profile`) drains every few milliseconds (at once when a ring
//! is half full) to resolve device spans. The writer also keeps each log a few chunks whose
//! pages it has already touched, so that the launch path does not take the page faults of a
//! growing capture. Everything is formatted only at [`finish`]. A full ring spills into a list
//! (a lock taken only then) and drops nothing; the spill count is the trace's
//! `ring_overflow`.
//!
//! Device spans of asynchronous streams wait in a pending table until their stream completes;
//! the table grows rather than dropping a launch. The trace's `otherData` carries the counters
//! that say when a capture is incomplete: `gpu_pending_overflow` (pending spans that could not
//! be held: always 0, the table grows), `unclaimed` (device spans whose stream never completed
//! before the trace was written), `records_dropped` (records lost: always 0, a full ring
//! spills), `device_unmatched` (spans that waited for a vendor dispatch record that never came:
//! they are drawn with tier `HOST`).
//!
//! The trace is written at [`finish`], which the `xpu` command calls at exit and which is
//! also registered with `atexit` when capture is armed.

pub mod clock;
pub mod log;
pub mod ring;
pub mod summary;

use parking_lot::Mutex;
use ring::Ring;
use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
    /// The trace could not be written (`XPU-F001`).
    Write {
        /// The trace's path.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    #[error("error[{}]: cannot read the trace {}: {message}", codes::READ, .path.display())]
    /// A trace could not be read or is not trace-event JSON (`XPU-F002`).
    Read {
        /// The trace's path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    #[error("error[{}]: cannot run `{command}`: {message}", codes::SPAWN)]
    /// The profiled command could not be started (`XPU-F003`).
    Spawn {
        /// The command.
        command: String,
        /// The I/O error.
        message: String,
    },
    #[error(
        "error[{}]: `xpu profile` needs a command after `--`",
        codes::NO_COMMAND
    )]
    /// `xpu profile` was given no command (`XPU-F004`).
    NoCommand,
}

impl ProfileError {
    /// The error's stable code (`XPU-Fnnn`).
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
    /// The tier's name in the trace: `DEVICE`, `EVENT` or `HOST`.
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
    /// A kernel launch.
    Launch,
    /// Lowering a kernel to device code.
    Compile,
    /// A copy between host and device.
    Copy,
    /// A stream or event synchronisation.
    Sync,
}

impl Kind {
    /// The kind's name in the trace (`launch`, `compile`, `copy`, `sync`).
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
    /// The launch's grid, in workgroups.
    pub grid: Option<[u32; 3]>,
    /// The launch's block, in work-items.
    pub block: Option<[u32; 3]>,
    /// Bytes moved (copies) or bound (launches).
    pub bytes: Option<u64>,
    /// What produced a compile span (`cranelift`, `spirv+pipeline`, `llvm+ptxas`, ...).
    pub stage: Option<&'static str>,
}

/// A reading of the profiler's counter ([`stamp`]); nanoseconds only in the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(pub u64);

/// A span's name: a static string, or a name interned once ([`intern`]).
#[derive(Clone, Copy, Debug)]
pub enum Name {
    /// A name known at compile time.
    Static(&'static str),
    /// A name interned at run time, by its index.
    Interned(u32),
}

/// How the device span of a launch is timed.
pub enum DeviceTiming {
    /// The launch ran inside the call (host backends): the call's window is exact (`HOST`).
    Exact,
    /// Resolved when the stream completes: by the clock (device events or timestamps of tier
    /// `.0`) where there is one, else submit to complete (`HOST`).
    Pending(Option<(Tier, DeviceClock)>),
    /// Resolved by the vendor's dispatch record carrying this id ([`device_record`]); drawn
    /// submit to complete, and counted in `device_unmatched`, when none comes.
    Record(u64),
    /// The launch was refused: no device span.
    None,
}

/// The device time of a span, asked once its stream has completed: nanoseconds, or `None`
/// when the device could not say.
pub type DeviceClock = Box<dyn FnOnce() -> Option<u64> + Send>;

/// What a thread writes into its ring.
enum Rec {
    /// A launch whose device span is resolved later (asynchronous streams).
    Launch {
        name: Name,
        stream: u64,
        start: u64,
        end: u64,
        args: Args,
        device: DeviceTiming,
    },
    /// A stream completed everything submitted to it before `sync_start`, seen at `end`.
    Completed {
        stream: u64,
        sync_start: u64,
        end: u64,
    },
    /// A vendor dispatch record (counter ticks).
    Record { id: u64, start: u64, end: u64 },
}

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static OUT: Mutex<Option<PathBuf>> = Mutex::new(None);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
static FINISHED: AtomicU8 = AtomicU8::new(0);
static WRITER: OnceLock<std::thread::Thread> = OnceLock::new();

/// A thread's ring, with the thread's ordinal and name.
struct Local {
    id: u64,
    name: String,
    ring: Ring<Rec>,
    /// Spans final when recorded (host spans, launches on host backends).
    log: log::Log<Out>,
}

/// Every thread's ring (never removed: a thread that exits leaves its records to drain).
static THREADS: Mutex<Vec<Arc<Local>>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's ring (kept alive by `THREADS`), null until its first record.
    static LOCAL: Cell<*const Local> = const { Cell::new(std::ptr::null()) };
}

/// Name to id, and id to name.
type Interned = (HashMap<String, u32>, Vec<String>);
/// Interned names.
static NAMES: Mutex<Option<Interned>> = Mutex::new(None);

/// Names of device streams' tracks, by stream key.
static STREAMS: Mutex<Option<HashMap<u64, String>>> = Mutex::new(None);

/// Which timing source each backend's device spans came from.
static SOURCES: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

/// Called at [`finish`] before the last drain (a vendor tracer's flush).
static FLUSHERS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

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
    clock::init();
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
        let writer = std::thread::Builder::new()
            .name("xpu-profile".into())
            .spawn(|| {
                while FINISHED.load(Ordering::Relaxed) == 0 {
                    std::thread::park_timeout(Duration::from_millis(5));
                    drain();
                }
            });
        if let Ok(handle) = writer {
            let _ = WRITER.set(handle.thread().clone());
        }
    }
}

/// The counter now (a cheap read: see [`clock`]); 0 when capture is off.
#[inline]
pub fn stamp() -> Stamp {
    if STATE.load(Ordering::Relaxed) == ON {
        Stamp(clock::ticks())
    } else {
        Stamp(0)
    }
}

/// Nanoseconds since capture was armed (0 when it is not).
pub fn now_ns() -> u64 {
    if STATE.load(Ordering::Relaxed) != ON {
        return 0;
    }
    clock::Fit::now().ns(clock::ticks())
}

/// The counter ticks that `ns` nanoseconds last (to place a vendor's timestamps).
pub fn ticks_of_ns(ns: u64) -> u64 {
    clock::Fit::now().ticks_of(ns)
}

/// The id of `name` for [`launch_span`] (one lock per call: intern once per kernel).
pub fn intern(name: &str) -> Name {
    let mut names = NAMES.lock();
    let (map, list) = names.get_or_insert_with(Default::default);
    if let Some(&id) = map.get(name) {
        return Name::Interned(id);
    }
    let id = list.len() as u32;
    list.push(name.to_string());
    map.insert(name.to_string(), id);
    Name::Interned(id)
}

#[cold]
fn register() -> *const Local {
    let id = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
    let name = std::thread::current()
        .name()
        .map_or_else(|| format!("thread {id}"), str::to_string);
    let local = Arc::new(Local {
        id,
        name,
        ring: Ring::new(),
        log: log::Log::new(),
    });
    let ptr = Arc::as_ptr(&local);
    THREADS.lock().push(local);
    LOCAL.with(|l| l.set(ptr));
    ptr
}

/// The calling thread's ring and log.
#[inline]
fn local() -> &'static Local {
    let mut ptr = LOCAL.with(Cell::get);
    if ptr.is_null() {
        ptr = register();
    }
    // SAFETY: `ptr` points into an `Arc<Local>` that `THREADS` keeps for the process's life.
    unsafe { &*ptr }
}

/// Appends a finished span to the calling thread's log (no other thread reads it before the
/// trace is written).
#[inline]
fn log_span(mut out: Out) {
    let local = local();
    out.thread = local.id as u32;
    // SAFETY: this thread is the only one that pushes into its own log.
    if unsafe { local.log.push(out) } {
        if let Some(w) = WRITER.get() {
            w.unpark();
        }
    }
}

/// Backend and stage names, indexed by [`Out::backend`] and [`Out::stage`] (0 is none).
static STATICS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

thread_local! {
    /// The last few names looked up in [`STATICS`] by this thread: (address, length, index).
    static STATIC_CACHE: Cell<[(usize, usize, u8); 4]> = const { Cell::new([(0, 0, 0); 4]) };
}

/// The index of `s` in [`STATICS`] (a thread-local cache first: no lock on the launch path).
#[inline]
fn static_index(s: &'static str) -> u8 {
    if s.is_empty() {
        return 0;
    }
    let key = (s.as_ptr() as usize, s.len());
    let mut cache = STATIC_CACHE.with(Cell::get);
    if let Some(e) = cache.iter().find(|e| (e.0, e.1) == key) {
        return e.2;
    }
    let i = static_index_slow(s);
    cache.rotate_right(1);
    cache[0] = (key.0, key.1, i);
    STATIC_CACHE.with(|c| c.set(cache));
    i
}

#[cold]
fn static_index_slow(s: &'static str) -> u8 {
    let mut statics = STATICS.lock();
    if statics.is_empty() {
        statics.push("");
    }
    if let Some(i) = statics.iter().position(|t| *t == s) {
        return i as u8;
    }
    if statics.len() == 255 {
        return 0;
    }
    statics.push(s);
    (statics.len() - 1) as u8
}

#[inline]
fn push(rec: Rec) {
    let ptr: *const Local = local();
    // SAFETY: `ptr` points into an `Arc<Local>` that `THREADS` keeps for the process's life,
    // and this thread is the only one that pushes into its own ring.
    let wake = unsafe { (*ptr).ring.push(rec) };
    if wake {
        if let Some(w) = WRITER.get() {
            w.unpark();
        }
    }
}

/// Records a host span of `name` on the calling thread from `start` ([`stamp`]) to now.
pub fn host_span(kind: Kind, name: &str, start: Stamp, args: Args) {
    let name = intern(name);
    host_span_named(kind, name, start, args)
}

/// [`host_span`] of a name already interned or static (no lock).
pub fn host_span_named(kind: Kind, name: Name, start: Stamp, args: Args) {
    let end = clock::ticks();
    let mut out = out_of(kind, name, start.0, end, &args);
    out.flags |= flag::HOST;
    log_span(out);
}

/// A launch on stream `key`: its host span from `start` to `end` on the calling thread, and
/// its device span on the stream's track, timed as `device` says.
pub fn launch_span(
    name: Name,
    key: u64,
    start: Stamp,
    end: Stamp,
    args: Args,
    device: DeviceTiming,
) {
    if let DeviceTiming::Exact = device {
        // Host streams run the launch inside the call: one record for both spans, final now.
        let mut out = out_of(Kind::Launch, name, start.0, end.0, &args);
        out.stream = key;
        out.flags |= flag::HOST | flag::DEVICE;
        log_span(out);
        return;
    }
    push(Rec::Launch {
        name,
        stream: key,
        start: start.0,
        end: end.0,
        args,
        device,
    });
}

/// Names the track of stream `key` (by default: the backend and the key).
pub fn name_stream(key: u64, name: impl FnOnce() -> String) {
    let mut streams = STREAMS.lock();
    streams
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(name);
}

/// Says which source timed `backend`'s device spans (shown in `otherData.device_sources`):
/// `"cupti"`, `"events"`, `"timestamps"`, `"host"`, with a note where a source was absent.
pub fn set_device_source(backend: &'static str, source: String) {
    let mut s = SOURCES.lock();
    match s.iter_mut().find(|(b, _)| *b == backend) {
        Some(e) => e.1 = source,
        None => s.push((backend, source)),
    }
}

/// [`set_device_source`] unless a source is already set for `backend`.
pub fn note_device_source(backend: &'static str, source: &str) {
    let mut s = SOURCES.lock();
    if !s.iter().any(|(b, _)| *b == backend) {
        s.push((backend, source.to_string()));
    }
}

/// Registers `f` to run at [`finish`] before the last records are read (a vendor tracer's
/// flush of its buffers).
pub fn on_finish(f: fn()) {
    let mut fl = FLUSHERS.lock();
    if !fl.contains(&f) {
        fl.push(f);
    }
}

/// A vendor's dispatch record for the launch that was given [`DeviceTiming::Record`]`(id)`:
/// it ran on the device from `start` to `end` (counter ticks, [`ticks_of_ns`]).
pub fn device_record(id: u64, start: Stamp, end: Stamp) {
    push(Rec::Record {
        id,
        start: start.0,
        end: end.0,
    });
}

/// Stream `key` has completed everything submitted to it before `sync_start` (the stamp
/// taken when the sync or download began): its pending spans are resolved by the writer.
pub fn stream_completed(key: u64, sync_start: Stamp) {
    push(Rec::Completed {
        stream: key,
        sync_start: sync_start.0,
        end: clock::ticks(),
    });
}

/// Bits of [`Out::flags`].
mod flag {
    /// A host span on the thread's track.
    pub const HOST: u8 = 1;
    /// A device span on the stream's track (with the span's tier).
    pub const DEVICE: u8 = 2;
    /// `dur` is nanoseconds (else counter ticks).
    pub const NS: u8 = 4;
    pub const GRID: u8 = 8;
    pub const BLOCK: u8 = 16;
    pub const BYTES: u8 = 32;
}

/// A resolved span, as kept until the trace is written: a fixed-size record, formatted only
/// then. A launch on a host backend is one record for both its host span and its device span
/// (the same window, exact); a launch on an asynchronous stream is a host record and, once
/// resolved, a device record.
#[derive(Clone, Copy)]
struct Out {
    name: Name,
    start: u64,
    /// Counter ticks, or nanoseconds with [`flag::NS`].
    dur: u64,
    /// The stream key of a device span.
    stream: u64,
    bytes: u64,
    grid: [u32; 3],
    block: [u32; 3],
    /// The thread ordinal of a host span.
    thread: u32,
    /// Indexes into [`STATICS`] (0: none).
    backend: u8,
    stage: u8,
    kind: Kind,
    tier: Tier,
    flags: u8,
}

/// Resolved spans, in chunks that are never reallocated (a long capture grows without
/// copying what it holds).
struct Chunks {
    full: Vec<Vec<Out>>,
    cur: Vec<Out>,
}

/// Spans per chunk.
const CHUNK: usize = 4096;

impl Default for Chunks {
    fn default() -> Chunks {
        Chunks {
            full: Vec::new(),
            cur: Vec::with_capacity(CHUNK),
        }
    }
}

impl Chunks {
    #[inline]
    fn push(&mut self, out: Out) {
        if self.cur.len() == self.cur.capacity() {
            let next = Vec::with_capacity(CHUNK);
            self.full.push(std::mem::replace(&mut self.cur, next));
        }
        self.cur.push(out);
    }

    fn iter(&self) -> impl Iterator<Item = &Out> {
        self.full.iter().flatten().chain(self.cur.iter())
    }
}

/// A device span waiting for its stream (or its dispatch record).
struct Pend {
    out: Out,
    /// When the launch call returned: a completion whose sync began after it covers it.
    returned: u64,
    timing: DeviceTiming,
}

#[derive(Default)]
struct Store {
    spans: Chunks,
    pending: HashMap<u64, Vec<Pend>>,
    /// Per stream: completions seen (sync start, end), sorted, the latest few.
    completions: HashMap<u64, Vec<(u64, u64)>>,
    /// Per stream: where its last resolved device span ended.
    cursor: HashMap<u64, u64>,
    /// Spans resolved on the host but waiting for a dispatch record, by id.
    awaiting: HashMap<u64, Out>,
    /// Dispatch records that came before their span, by id.
    early: HashMap<u64, (u64, u64)>,
    /// The backend of each stream's first span (to name its track).
    stream_backend: HashMap<u64, &'static str>,
    /// The stream of the last launch accepted (its backend is known).
    last_stream: Option<u64>,
}

/// A span of `kind` from `start` to `end` (ticks) with `args`, on no track yet.
#[inline]
fn out_of(kind: Kind, name: Name, start: u64, end: u64, args: &Args) -> Out {
    let mut flags = 0;
    if args.grid.is_some() {
        flags |= flag::GRID;
    }
    if args.block.is_some() {
        flags |= flag::BLOCK;
    }
    if args.bytes.is_some() {
        flags |= flag::BYTES;
    }
    Out {
        name,
        start,
        dur: end.saturating_sub(start),
        stream: 0,
        bytes: args.bytes.unwrap_or(0),
        grid: args.grid.unwrap_or_default(),
        block: args.block.unwrap_or_default(),
        thread: 0,
        backend: static_index(args.backend),
        stage: args.stage.map_or(0, static_index),
        kind,
        tier: Tier::Host,
        flags,
    }
}

static STORE: Mutex<Option<Store>> = Mutex::new(None);

/// Moves every thread's records into the store and resolves what can be.
fn drain() {
    let locals: Vec<Arc<Local>> = THREADS.lock().clone();
    let mut store = STORE.lock();
    let store = store.get_or_insert_with(Store::default);
    let mut touched: Vec<u64> = Vec::new();
    for local in &locals {
        local.log.refill();
        let id = local.id;
        // SAFETY: drains are serialised by the store's lock, held here.
        unsafe { local.ring.drain(|rec| store.accept(id, rec, &mut touched)) };
    }
    touched.sort_unstable();
    touched.dedup();
    for key in touched {
        store.resolve(key);
    }
}

impl Store {
    fn accept(&mut self, thread: u64, rec: Rec, touched: &mut Vec<u64>) {
        match rec {
            Rec::Launch {
                name,
                stream,
                start,
                end,
                args,
                device,
            } => {
                if self.last_stream != Some(stream) {
                    self.stream_backend.entry(stream).or_insert(args.backend);
                    self.last_stream = Some(stream);
                }
                let mut out = out_of(Kind::Launch, name, start, end, &args);
                out.thread = thread as u32;
                out.stream = stream;
                out.flags |= flag::HOST;
                match device {
                    DeviceTiming::None => {}
                    // Host streams run the launch inside the call: one record for both spans.
                    DeviceTiming::Exact => out.flags |= flag::DEVICE,
                    timing => {
                        let mut dev = out;
                        dev.flags = (out.flags & !flag::HOST) | flag::DEVICE;
                        self.pending.entry(stream).or_default().push(Pend {
                            out: dev,
                            returned: end,
                            timing,
                        });
                        touched.push(stream);
                    }
                }
                self.spans.push(out);
            }
            Rec::Completed {
                stream,
                sync_start,
                end,
            } => {
                let list = self.completions.entry(stream).or_default();
                let at = list.partition_point(|c| c.0 <= sync_start);
                list.insert(at, (sync_start, end));
                if list.len() > 64 {
                    list.remove(0);
                }
                touched.push(stream);
            }
            Rec::Record { id, start, end } => match self.awaiting.remove(&id) {
                Some(mut out) => {
                    out.start = start;
                    out.dur = end.saturating_sub(start);
                    out.flags &= !flag::NS;
                    out.tier = Tier::Device;
                    self.spans.push(out);
                }
                None => {
                    self.early.insert(id, (start, end));
                }
            },
        }
    }

    /// Resolves stream `key`'s pending spans that a completion covers.
    fn resolve(&mut self, key: u64) {
        let (Some(pending), Some(comps)) = (self.pending.get_mut(&key), self.completions.get(&key))
        else {
            return;
        };
        // Each pending span's covering completion: the first whose sync began after the
        // launch call returned.
        let mut batches: Vec<(u64, Vec<Pend>)> = Vec::new();
        let mut left = Vec::new();
        for p in pending.drain(..) {
            let i = comps.partition_point(|c| c.0 < p.returned);
            match comps.get(i) {
                Some(&(_, end)) => match batches.last_mut() {
                    Some((e, list)) if *e == end => list.push(p),
                    _ => batches.push((end, vec![p])),
                },
                None => left.push(p),
            }
        }
        *pending = left;
        let fit = clock::Fit::now();
        let mut cursor = self.cursor.get(&key).copied().unwrap_or(0);
        for (end, list) in batches {
            let n = list.len() as u64;
            for (i, p) in list.into_iter().enumerate() {
                let start = p.out.start.max(cursor);
                let mut out = p.out;
                out.start = start;
                out.tier = Tier::Host;
                let host_share = end.saturating_sub(start) / (n - i as u64).max(1);
                out.dur = host_share;
                match p.timing {
                    DeviceTiming::Pending(Some((tier, clock))) => match clock() {
                        Some(ns) => {
                            out.dur = ns;
                            out.flags |= flag::NS;
                            out.tier = tier;
                            cursor = start + fit.ticks_of(ns);
                        }
                        None => cursor = start + host_share,
                    },
                    DeviceTiming::Record(id) => {
                        cursor = start + host_share;
                        match self.early.remove(&id) {
                            Some((s, e)) => {
                                out.start = s;
                                out.dur = e.saturating_sub(s);
                                out.tier = Tier::Device;
                            }
                            None => {
                                self.awaiting.insert(id, out);
                                continue;
                            }
                        }
                    }
                    _ => cursor = start + host_share,
                }
                self.spans.push(out);
            }
        }
        self.cursor.insert(key, cursor);
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

/// The trace so far as Chrome trace-event JSON (every thread's records drained first).
pub fn trace_json() -> String {
    use std::fmt::Write;
    let flushers: Vec<fn()> = FLUSHERS.lock().clone();
    for f in flushers {
        f();
    }
    drain();
    let fit = clock::Fit::now();
    let locals: Vec<Arc<Local>> = THREADS.lock().clone();
    let overflowed: u64 = locals
        .iter()
        .map(|l| l.ring.overflowed.load(Ordering::Relaxed))
        .sum();
    let names = NAMES.lock();
    let interned: &[String] = names.as_ref().map_or(&[], |(_, l)| l.as_slice());
    let name_of = |n: Name| -> &str {
        match n {
            Name::Static(s) => s,
            Name::Interned(i) => interned.get(i as usize).map_or("?", String::as_str),
        }
    };
    let streams = STREAMS.lock().clone().unwrap_or_default();
    let sources = SOURCES.lock().clone();
    let store = STORE.lock();
    let empty = Store::default();
    let store = store.as_ref().unwrap_or(&empty);
    let unclaimed: usize = store.pending.values().map(Vec::len).sum();
    let unmatched = store.awaiting.len();
    let q = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into());
    let pid = 1;
    let logged: usize = locals.iter().map(|l| l.log.len()).sum();
    let mut out = String::with_capacity(256 * (logged + CHUNK * (store.spans.full.len() + 1) + 16));
    out.push_str("{\"traceEvents\":[");
    let _ = write!(
        out,
        "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_name\",\"args\":{{\"name\":\"xpu\"}}}}"
    );
    for l in &locals {
        let _ = write!(
            out,
            ",{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
            l.id,
            q(&l.name)
        );
    }
    // Stream tracks follow the host threads: tids from 1_000_000 in first-seen order.
    let mut stream_tids: HashMap<u64, u64> = HashMap::new();
    let statics: Vec<&'static str> = STATICS.lock().clone();
    let static_of = |i: u8| statics.get(i as usize).copied().unwrap_or("");
    let mut write_span = |out: &mut String, s: &Out, device: bool| {
        let tid = if device {
            let next = 1_000_000 + stream_tids.len() as u64;
            let tid = *stream_tids.entry(s.stream).or_insert(next);
            if tid == next {
                let name = streams.get(&s.stream).cloned().unwrap_or_else(|| {
                    format!(
                        "{} stream {:#x}",
                        store
                            .stream_backend
                            .get(&s.stream)
                            .copied()
                            .or(Some(static_of(s.backend)).filter(|b| !b.is_empty()))
                            .unwrap_or("device"),
                        s.stream & 0xffff_ffff
                    )
                });
                let _ = write!(
                    out,
                    ",{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
                    q(&name)
                );
            }
            tid
        } else {
            u64::from(s.thread)
        };
        let dur_ns = if s.flags & flag::NS != 0 {
            s.dur
        } else {
            fit.dur_ns(s.dur)
        };
        let name = q(name_of(s.name));
        let dev = if device { "device." } else { "" };
        let _ = write!(
            out,
            ",{{\"name\":{name},\"cat\":\"{dev}{}\",\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":{pid},\"tid\":{tid},\"args\":{{",
            s.kind.name(),
            fit.ns(s.start) as f64 / 1000.0,
            dur_ns as f64 / 1000.0,
        );
        let mut sep = "";
        let backend = static_of(s.backend);
        if !backend.is_empty() {
            let _ = write!(out, "\"backend\":{}", q(backend));
            sep = ",";
        }
        if s.kind == Kind::Launch {
            let _ = write!(out, "{sep}\"kernel\":{name}");
            sep = ",";
        }
        if s.flags & flag::GRID != 0 {
            let g = s.grid;
            let _ = write!(out, "{sep}\"grid\":[{},{},{}]", g[0], g[1], g[2]);
            sep = ",";
        }
        if s.flags & flag::BLOCK != 0 {
            let b = s.block;
            let _ = write!(out, "{sep}\"block\":[{},{},{}]", b[0], b[1], b[2]);
            sep = ",";
        }
        if s.flags & flag::BYTES != 0 {
            let _ = write!(out, "{sep}\"bytes\":{}", s.bytes);
            sep = ",";
        }
        let stage = static_of(s.stage);
        if !stage.is_empty() {
            let _ = write!(out, "{sep}\"stage\":{}", q(stage));
            sep = ",";
        }
        if device {
            let _ = write!(out, "{sep}\"tier\":\"{}\"", s.tier.name());
        }
        out.push_str("}}");
    };
    let mut both = |out: &mut String, s: &Out| {
        if s.flags & flag::HOST != 0 {
            write_span(out, s, false);
        }
        if s.flags & flag::DEVICE != 0 {
            write_span(out, s, true);
        }
    };
    for l in &locals {
        l.log.for_each(|s| both(&mut out, s));
    }
    for s in store.spans.iter() {
        both(&mut out, s);
    }
    // Spans whose dispatch record never came: submit to complete (their tier is `HOST`).
    for s in store.awaiting.values() {
        write_span(&mut out, s, true);
    }
    let device_sources: serde_json::Map<String, serde_json::Value> = sources
        .iter()
        .map(|(b, s)| (b.to_string(), serde_json::Value::from(s.as_str())))
        .collect();
    let counters = serde_json::json!({
        "gpu_pending_overflow": 0,
        "unclaimed": unclaimed,
        "records_dropped": 0,
        "device_unmatched": unmatched,
        "ring_overflow": overflowed,
    });
    let _ = write!(
        out,
        ",{{\"ph\":\"C\",\"pid\":{pid},\"tid\":0,\"ts\":{:.3},\"name\":\"capture\",\"args\":{counters}}}",
        fit.ns(clock::ticks()) as f64 / 1000.0
    );
    let mut other = counters;
    other["device_sources"] = serde_json::Value::Object(device_sources);
    other["clock"] = serde_json::Value::from(if clock::init() { "tsc" } else { "monotonic" });
    let _ = write!(out, "],\"displayTimeUnit\":\"ns\",\"otherData\":{other}}}");
    out
}
