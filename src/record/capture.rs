//! The launch path's half of recording: what the runtime calls around a launch
//! ([`before`], [`after`]) and after a stream drains ([`on_sync`]).

use super::writer::{self, ArgRec, Head, LaunchRec, Msg};
use super::{RecordError, RecordSummary};
use crate::hal::launch::{elem_name, Launch};
use crate::hal::{Backend, DeviceArg, DeviceImpl, DeviceMemory, Init, StreamImpl};
use crate::ir::{Function, VerifiedModule};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

struct Recorder {
    dir: PathBuf,
    /// The devices recorded (by id); `None`: every device.
    devices: Mutex<Option<HashSet<u64>>>,
    tx: Mutex<Option<Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<WriterResult>>>,
    seq: AtomicU64,
}

/// What the writer thread ends with: its summary and the first error it met.
type WriterResult = (RecordSummary, Option<String>);
/// Modules sent to the writer: by `Arc` address, the module and its hash.
type SentModules = HashMap<usize, (Arc<VerifiedModule>, Arc<str>)>;

static RECORDER: RwLock<Option<Arc<Recorder>>> = RwLock::new(None);
/// Modules already sent to the writer, by the address of their `Arc` (kept alive here so the
/// address is not reused), with their hash.
static MODULES: Mutex<Option<SentModules>> = Mutex::new(None);
/// Per asynchronous stream (by [`stream_key`]): the launches whose buffers are downloaded at
/// its next sync, and the arena their snapshots are copied into.
static PENDING: Mutex<Option<HashMap<usize, StreamPending>>> = Mutex::new(None);

#[derive(Default)]
struct StreamPending {
    launches: Vec<Pending>,
    /// The arena snapshots are copied into now (earlier, full ones live on in their snaps).
    arena: Option<Arc<Arena>>,
}

/// Device memory that a sync window's snapshots are copied into back to back, so that a
/// window of launches costs one allocation and one download per arena rather than one of
/// each per buffer snapshot (on Vulkan each was a `vkAllocateMemory`, a staging buffer and a
/// wait: 3.5 ms a record on the H200's NVIDIA driver).
struct Arena {
    /// The device the memory is on (a stream's address may be reused by another device's).
    device: std::sync::Weak<dyn DeviceImpl>,
    mem: Arc<dyn DeviceMemory>,
    cap: usize,
    /// Bytes handed out (each snapshot at a multiple of [`ARENA_ALIGN`]).
    used: Mutex<usize>,
}

/// The first arena of a stream; each next one is twice its predecessor, up to
/// [`ARENA_MAX`].
const ARENA_MIN: usize = 1 << 20;
const ARENA_MAX: usize = 64 << 20;
const ARENA_ALIGN: usize = 256;

/// Starts recording into `dir` with `budget` compressed bytes: every device when `device` is
/// `None`, else that device (by id) as well as any already recorded.
pub fn start(dir: &Path, budget: u64, device: Option<u64>) -> Result<(), RecordError> {
    let mut slot = RECORDER.write();
    if let Some(r) = slot.as_ref() {
        if r.dir != dir {
            return Err(RecordError::AlreadyRecording {
                current: r.dir.clone(),
                requested: dir.to_path_buf(),
            });
        }
        let mut devices = r.devices.lock();
        match (devices.as_mut(), device) {
            (Some(set), Some(id)) => {
                set.insert(id);
            }
            (_, None) => *devices = None,
            (None, Some(_)) => {}
        }
        return Ok(());
    }
    for sub in [
        super::launches_dir(dir),
        super::modules_dir(dir),
        super::blobs_dir(dir),
    ] {
        std::fs::create_dir_all(&sub).map_err(|e| RecordError::Write {
            path: sub.clone(),
            message: e.to_string(),
        })?;
    }
    // A folder that already holds records is appended to.
    let existing = std::fs::read_dir(super::launches_dir(dir))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let (tx, rx) = channel();
    let owned = dir.to_path_buf();
    let thread = std::thread::Builder::new()
        .name("xpu-record".into())
        .spawn(move || writer::run(owned, budget, rx))
        .map_err(|e| RecordError::Write {
            path: dir.to_path_buf(),
            message: format!("cannot start the writer thread: {e}"),
        })?;
    *slot = Some(Arc::new(Recorder {
        dir: dir.to_path_buf(),
        devices: Mutex::new(device.map(|id| HashSet::from([id]))),
        tx: Mutex::new(Some(tx)),
        thread: Mutex::new(Some(thread)),
        seq: AtomicU64::new(existing + 1),
    }));
    super::set_armed(true);
    Ok(())
}

/// Stops recording: pending launches are resolved (their streams synced), the writer drains
/// and its summary is returned (`None`: nothing was recording).
pub(crate) fn stop() -> Result<Option<RecordSummary>, RecordError> {
    let Some(recorder) = RECORDER.read().clone() else {
        return Ok(None);
    };
    let pending: Vec<StreamPending> = PENDING
        .lock()
        .take()
        .map(|p| p.into_values().collect())
        .unwrap_or_default();
    for entry in pending {
        if let Some(first) = entry.launches.first() {
            let synced = first.stream.sync().is_ok();
            let mut reads = ArenaReads::new();
            for p in entry.launches {
                resolve(p, synced, &mut reads);
            }
        }
    }
    *RECORDER.write() = None;
    super::set_armed(false);
    drop(recorder.tx.lock().take());
    let Some(thread) = recorder.thread.lock().take() else {
        return Ok(None);
    };
    let (summary, error) = thread.join().map_err(|_| RecordError::Write {
        path: recorder.dir.clone(),
        message: "the writer thread panicked".into(),
    })?;
    if let Some(message) = error {
        return Err(RecordError::Write {
            path: recorder.dir.clone(),
            message,
        });
    }
    if summary.unrecorded > 0 {
        eprintln!(
            "note[{}]: {} launch(es) were not recorded into {} (budget {} bytes, {} used)",
            super::codes::UNRECORDED,
            summary.unrecorded,
            summary.dir.display(),
            summary.budget,
            summary.bytes
        );
    }
    Ok(Some(summary))
}

/// A buffer's contents as captured: bytes already on the host, or a device-side copy not yet
/// downloaded.
enum Snap {
    Bytes(Vec<u8>),
    Device(Arc<dyn DeviceMemory>, usize),
    /// `len` bytes at `offset` of an arena.
    Arena(Arc<Arena>, usize, usize),
}

enum ArgSnap {
    Value {
        param: String,
        bytes: Vec<u8>,
    },
    Buffer {
        param: String,
        elem: String,
        binding: crate::hal::BufferBinding,
        before: Snap,
        after: Option<Snap>,
    },
}

/// A launch captured before it ran, completed by [`after`].
pub struct Pre {
    recorder: Arc<Recorder>,
    device: Arc<dyn DeviceImpl>,
    stream: Arc<dyn StreamImpl>,
    eager: bool,
    seq: u64,
    head: Head,
    args: Vec<ArgSnap>,
}

struct Pending {
    pre: Pre,
    stream: Arc<dyn StreamImpl>,
}

fn stream_key(stream: &Arc<dyn StreamImpl>) -> usize {
    Arc::as_ptr(stream) as *const () as usize
}

/// Whether the backend's streams run a launch inside the call (the host backends).
fn eager(backend: Backend) -> bool {
    matches!(backend, Backend::Interp | Backend::Cpu)
}

fn snapshot(
    device: &Arc<dyn DeviceImpl>,
    stream: &Arc<dyn StreamImpl>,
    b: &crate::hal::BufferBinding,
    eager: bool,
) -> Result<Snap, crate::hal::DeviceError> {
    if eager {
        return Ok(Snap::Bytes(
            device
                .read(stream.as_ref(), &b.memory, b.offset, b.len)?
                .wait()?,
        ));
    }
    if b.len > ARENA_MAX / 2 {
        let copy = device.alloc(b.len, Init::Any)?;
        device.copy(stream.as_ref(), &b.memory, b.offset, &copy, 0, b.len)?;
        return Ok(Snap::Device(copy, b.len));
    }
    let (arena, offset) = arena_space(device, stream, b.len)?;
    device.copy(
        stream.as_ref(),
        &b.memory,
        b.offset,
        &arena.mem,
        offset,
        b.len,
    )?;
    Ok(Snap::Arena(arena, offset, b.len))
}

/// Room for `len` bytes in `stream`'s arena: the current one, or a new one (twice the size,
/// or the size `len` needs) when it is full.
fn arena_space(
    device: &Arc<dyn DeviceImpl>,
    stream: &Arc<dyn StreamImpl>,
    len: usize,
) -> Result<(Arc<Arena>, usize), crate::hal::DeviceError> {
    let mut pending = PENDING.lock();
    let entry = pending
        .get_or_insert_with(HashMap::new)
        .entry(stream_key(stream))
        .or_default();
    let ours = |a: &Arena| {
        a.device
            .upgrade()
            .is_some_and(|d| std::ptr::addr_eq(Arc::as_ptr(&d), Arc::as_ptr(device)))
    };
    if let Some(a) = entry.arena.as_ref().filter(|a| ours(a)) {
        let mut used = a.used.lock();
        if *used + len <= a.cap {
            let at = *used;
            *used = (at + len).next_multiple_of(ARENA_ALIGN);
            return Ok((a.clone(), at));
        }
    }
    let cap = entry
        .arena
        .as_ref()
        .filter(|a| ours(a))
        .map_or(ARENA_MIN, |a| (a.cap * 2).min(ARENA_MAX))
        .max(len.next_multiple_of(ARENA_ALIGN));
    let arena = Arc::new(Arena {
        device: Arc::downgrade(device),
        mem: device.alloc(cap, Init::Any)?,
        cap,
        used: Mutex::new(len.next_multiple_of(ARENA_ALIGN)),
    });
    entry.arena = Some(arena.clone());
    Ok((arena, 0))
}

/// The kernel `kernel` of `module` is about to be launched on `stream` of device `device_id`:
/// captures its arguments (enqueuing device-side copies of its buffers on asynchronous
/// streams). `None` when the device is not recorded or its buffers could not be copied (then
/// the launch is counted as unrecorded).
#[allow(clippy::too_many_arguments)]
pub fn before(
    device_id: u64,
    device: &Arc<dyn DeviceImpl>,
    stream: &Arc<dyn StreamImpl>,
    module: &Arc<VerifiedModule>,
    kernel: &str,
    function: &Function,
    built_wave: Option<u32>,
    launch: &Launch,
    args: &[DeviceArg],
) -> Option<Pre> {
    let recorder = RECORDER.read().clone()?;
    if let Some(set) = recorder.devices.lock().as_ref() {
        if !set.contains(&device_id) {
            return None;
        }
    }
    let tx = recorder.tx.lock().clone()?;
    let module_hash = module_hash(module, &tx);
    let backend = device.backend();
    let eager = eager(backend);
    let mut snaps = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let param = function
            .params
            .get(i)
            .map_or_else(|| format!("#{i}"), |p| p.name.clone());
        snaps.push(match arg {
            DeviceArg::Value(v) => ArgSnap::Value {
                param,
                bytes: v.to_le_bytes(),
            },
            DeviceArg::Buffer(b) => match snapshot(device, stream, b, eager) {
                Ok(before) => ArgSnap::Buffer {
                    param,
                    elem: elem_name(b.elem),
                    binding: b.clone(),
                    before,
                    after: None,
                },
                Err(_) => {
                    let _ = tx.send(Msg::Unrecorded);
                    return None;
                }
            },
        });
    }
    let seq = recorder.seq.fetch_add(1, Ordering::Relaxed);
    let head = Head {
        kernel: kernel.into(),
        module: module_hash,
        backend: backend.name(),
        device: device_key(device),
        grid: launch.grid,
        block: launch.block,
        shared_bytes: launch.shared_bytes,
        shared_opt_in: launch.shared_opt_in,
        wave: built_wave.or(launch.wave),
    };
    Some(Pre {
        recorder,
        device: device.clone(),
        stream: stream.clone(),
        eager,
        seq,
        head,
        args: snaps,
    })
}

/// The device key of a record (`backend:name`), made once per device.
fn device_key(device: &Arc<dyn DeviceImpl>) -> Arc<str> {
    type Keys = Vec<(std::sync::Weak<dyn DeviceImpl>, Arc<str>)>;
    static KEYS: Mutex<Keys> = Mutex::new(Vec::new());
    let mut keys = KEYS.lock();
    keys.retain(|(d, _)| d.strong_count() > 0);
    let weak = Arc::downgrade(device);
    if let Some((_, k)) = keys.iter().find(|(d, _)| d.ptr_eq(&weak)) {
        return k.clone();
    }
    let key: Arc<str> = format!(
        "{}:{}",
        device.backend().name(),
        device.facts().name.as_deref().unwrap_or("unknown")
    )
    .into();
    keys.push((weak, key.clone()));
    key
}

fn module_hash(module: &Arc<VerifiedModule>, tx: &Sender<Msg>) -> Arc<str> {
    let key = Arc::as_ptr(module) as usize;
    let mut modules = MODULES.lock();
    let modules = modules.get_or_insert_with(HashMap::new);
    if let Some((_, h)) = modules.get(&key) {
        return h.clone();
    }
    let text = super::canonical_text(module);
    let hash: Arc<str> = super::content_hash(text.as_bytes()).into();
    let _ = tx.send(Msg::Module {
        hash: hash.to_string(),
        text,
    });
    modules.insert(key, (module.clone(), hash.clone()));
    hash
}

/// The launch captured by [`before`] was handed to the backend: `ok` when it was accepted.
/// Captures what it may have written (now on the host backends; on the others a device-side
/// copy is enqueued and downloaded at the stream's next sync).
pub fn after(mut pre: Pre, ok: bool) {
    if !ok {
        // A refused launch did not run: there is nothing to record.
        return;
    }
    let (device, stream, eager) = (pre.device.clone(), pre.stream.clone(), pre.eager);
    for arg in &mut pre.args {
        if let ArgSnap::Buffer {
            binding,
            after: slot,
            ..
        } = arg
        {
            if binding.writable {
                match snapshot(&device, &stream, binding, eager) {
                    Ok(s) => *slot = Some(s),
                    Err(_) => {
                        if let Some(tx) = pre.recorder.tx.lock().clone() {
                            let _ = tx.send(Msg::Unrecorded);
                        }
                        return;
                    }
                }
            }
        }
    }
    if eager {
        resolve(
            Pending {
                pre,
                stream: stream.clone(),
            },
            true,
            &mut ArenaReads::new(),
        );
    } else {
        PENDING
            .lock()
            .get_or_insert_with(HashMap::new)
            .entry(stream_key(&stream))
            .or_default()
            .launches
            .push(Pending { pre, stream });
    }
}

/// `stream` has drained (its sync returned, or a download on it completed): downloads what the
/// launches pending on it captured and hands them to the writer.
pub fn on_sync(stream: &Arc<dyn StreamImpl>) {
    let Some(entry) = PENDING
        .lock()
        .as_mut()
        .and_then(|p| p.remove(&stream_key(stream)))
    else {
        return;
    };
    let mut reads = ArenaReads::new();
    for p in entry.launches {
        resolve(p, true, &mut reads);
    }
    // The window's snapshots are downloaded: its arena starts over for the next one, unless
    // a launch on the stream has made another meanwhile.
    if let Some(arena) = entry.arena.filter(|a| Arc::strong_count(a) == 1) {
        *arena.used.lock() = 0;
        PENDING
            .lock()
            .get_or_insert_with(HashMap::new)
            .entry(stream_key(stream))
            .or_default()
            .arena
            .get_or_insert(arena);
    }
}

/// The arenas downloaded while resolving one stream's launches: each once, by address.
type ArenaReads = HashMap<usize, Option<Vec<u8>>>;

fn download(
    device: &Arc<dyn DeviceImpl>,
    stream: &Arc<dyn StreamImpl>,
    snap: Snap,
    reads: &mut ArenaReads,
) -> Option<Vec<u8>> {
    match snap {
        Snap::Bytes(b) => Some(b),
        Snap::Device(mem, len) => device.read(stream.as_ref(), &mem, 0, len).ok()?.wait().ok(),
        Snap::Arena(arena, offset, len) => {
            let bytes = reads
                .entry(Arc::as_ptr(&arena) as usize)
                .or_insert_with(|| {
                    let used = (*arena.used.lock()).min(arena.cap);
                    device
                        .read(stream.as_ref(), &arena.mem, 0, used)
                        .ok()?
                        .wait()
                        .ok()
                })
                .as_ref()?;
            bytes.get(offset..offset + len).map(<[u8]>::to_vec)
        }
    }
}

fn resolve(p: Pending, synced: bool, reads: &mut ArenaReads) {
    let pre = p.pre;
    let Some(tx) = pre.recorder.tx.lock().clone() else {
        return;
    };
    if !synced {
        let _ = tx.send(Msg::Unrecorded);
        return;
    }
    let mut args = Vec::with_capacity(pre.args.len());
    for arg in pre.args {
        args.push(match arg {
            ArgSnap::Value { param, bytes } => ArgRec::Value { param, bytes },
            ArgSnap::Buffer {
                param,
                elem,
                binding,
                before,
                after,
            } => {
                let before = download(&pre.device, &p.stream, before, reads);
                let after = after.map(|a| download(&pre.device, &p.stream, a, reads));
                match (before, after) {
                    (Some(before), None) => ArgRec::Buffer {
                        param,
                        elem,
                        writable: binding.writable,
                        before,
                        after: None,
                    },
                    (Some(before), Some(Some(after))) => ArgRec::Buffer {
                        param,
                        elem,
                        writable: binding.writable,
                        before,
                        after: Some(after),
                    },
                    _ => {
                        let _ = tx.send(Msg::Unrecorded);
                        return;
                    }
                }
            }
        });
    }
    let _ = tx.send(Msg::Launch(Box::new(LaunchRec {
        seq: pre.seq,
        head: pre.head,
        args,
    })));
}
