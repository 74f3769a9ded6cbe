//! CUPTI's activity API as the profiler's `DEVICE` tier on CUDA (contract §5.4): where
//! `libcupti` is present it is loaded at run time (`libloading`, no build-time dependency),
//! concurrent-kernel activity is enabled, and each kernel's device start and end go into the
//! trace ([`crate::profile::device_record`]). Where it is absent, or fails to start, CUDA
//! launches keep their event brackets (`EVENT`) and the trace's `device_sources` says why.
//!
//! - **Where it is looked for**: `XPU_CUPTI` (a file), then `libcupti.so` / `.so.13` / `.so.12`
//!   on the loader's path, then the CUDA toolkit (`/usr/local/cuda/extras/CUPTI/lib64`, ...)
//!   and the pip wheels' folders (`site-packages/nvidia/*/lib`).
//! - **Which record is whose**: around each launch the runtime pushes an external correlation
//!   id (the profiler's id for the launch) onto CUPTI's per-thread stack; CUPTI's
//!   external-correlation records map its own correlation ids to ours, and a kernel record
//!   carries its correlation id. A kernel record with no mapping takes the oldest launch not
//!   yet timed (launch order: exact on one stream).
//! - **Clocks**: CUPTI's timestamps (`cuptiGetTimestamp`, nanoseconds) are placed on the
//!   profiler's counter by the pair (CUPTI now, counter now) read each time a buffer is
//!   processed.
//!
//! Only the fields of the stable prefix of the kernel record (`CUpti_ActivityKernel4` to the
//! current version) are read: `kind` at 0, `start` at 16, `end` at 24, `correlationId` at 92.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const SUCCESS: u32 = 0;
const KIND_CONCURRENT_KERNEL: u32 = 10;
const KIND_EXTERNAL_CORRELATION: u32 = 39;
/// `CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`.
const EXTERNAL_KIND: u32 = 3;
const BUFFER_BYTES: usize = 1 << 20;

type RequestFn = extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

struct Api {
    _lib: libloading::Library,
    path: PathBuf,
    enable: unsafe extern "C" fn(u32) -> u32,
    next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> u32,
    flush_all: unsafe extern "C" fn(u32) -> u32,
    push: unsafe extern "C" fn(u32, u64) -> u32,
    pop: unsafe extern "C" fn(u32, *mut u64) -> u32,
    timestamp: unsafe extern "C" fn(*mut u64) -> u32,
}

/// What matching needs across buffers.
#[derive(Default)]
struct Matcher {
    /// CUPTI correlation id -> our launch id.
    external: HashMap<u32, u64>,
    /// Launches not yet timed, in launch order.
    order: VecDeque<u64>,
    /// Launches timed through their correlation (skipped when `order` is popped).
    done: HashSet<u64>,
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();
static MATCHER: Mutex<Option<Matcher>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Kernel records read, and those matched by correlation.
static KERNELS: AtomicU64 = AtomicU64::new(0);
static CORRELATED: AtomicU64 = AtomicU64::new(0);

/// Candidate files for `libcupti`, best first.
fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(p) = crate::config::get().cupti.clone() {
        out.push(p);
    }
    for n in ["libcupti.so", "libcupti.so.13", "libcupti.so.12"] {
        out.push(PathBuf::from(n));
    }
    let mut dirs: Vec<PathBuf> = [
        "/usr/local/cuda/extras/CUPTI/lib64",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    // The pip wheels (`nvidia-cuda-cupti`): site-packages/nvidia/<pkg>/lib.
    let roots: Vec<PathBuf> = ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"]
        .iter()
        .map(PathBuf::from)
        .collect();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.starts_with("python3") {
                continue;
            }
            for site in ["site-packages", "dist-packages"] {
                let nvidia = e.path().join(site).join("nvidia");
                if let Ok(pkgs) = std::fs::read_dir(&nvidia) {
                    for p in pkgs.flatten() {
                        dirs.push(p.path().join("lib"));
                    }
                }
            }
        }
    }
    for d in dirs {
        if let Ok(files) = std::fs::read_dir(&d) {
            let mut found: Vec<PathBuf> = files
                .flatten()
                .map(|f| f.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libcupti.so"))
                })
                .collect();
            found.sort();
            out.extend(found);
        }
    }
    out
}

fn load() -> Result<Api, String> {
    let mut tried = Vec::new();
    for path in candidates() {
        // SAFETY: loading CUPTI runs its initialisers, which only register with the driver.
        let lib = match unsafe { libloading::Library::new(&path) } {
            Ok(l) => l,
            Err(_) => {
                tried.push(path.display().to_string());
                continue;
            }
        };
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is CUPTI's, with the C signature of the field it fills
                // (cupti_activity.h).
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: no {}: {e}", path.display(), $name))?
            };
        }
        let register: unsafe extern "C" fn(RequestFn, CompleteFn) -> u32 =
            sym!("cuptiActivityRegisterCallbacks");
        let api = Api {
            enable: sym!("cuptiActivityEnable"),
            next_record: sym!("cuptiActivityGetNextRecord"),
            flush_all: sym!("cuptiActivityFlushAll"),
            push: sym!("cuptiActivityPushExternalCorrelationId"),
            pop: sym!("cuptiActivityPopExternalCorrelationId"),
            timestamp: sym!("cuptiGetTimestamp"),
            path: path.clone(),
            _lib: lib,
        };
        // SAFETY: the two callbacks have CUPTI's signatures and live for the process.
        let r = unsafe { register(buffer_requested, buffer_completed) };
        if r != SUCCESS {
            return Err(format!(
                "{}: cuptiActivityRegisterCallbacks returned {r}",
                path.display()
            ));
        }
        // SAFETY: plain calls with valid kinds.
        let r = unsafe { (api.enable)(KIND_CONCURRENT_KERNEL) };
        if r != SUCCESS {
            return Err(format!(
                "{}: cuptiActivityEnable(CONCURRENT_KERNEL) returned {r}",
                path.display()
            ));
        }
        // Without external correlation, records are matched in launch order.
        // SAFETY: as above.
        let _ = unsafe { (api.enable)(KIND_EXTERNAL_CORRELATION) };
        return Ok(api);
    }
    Err(format!("no libcupti (tried {})", tried.join(", ")))
}

/// Starts CUPTI once, when the profiler is armed (the CUDA device's open calls it); says in
/// the trace which source times CUDA's device spans.
pub fn start() {
    if !crate::profile::armed() {
        return;
    }
    let api = API.get_or_init(|| {
        let api = load();
        match &api {
            Ok(a) => {
                crate::profile::set_device_source("cuda", format!("cupti ({})", a.path.display()));
                crate::profile::on_finish(flush);
            }
            Err(e) => crate::profile::set_device_source("cuda", format!("events ({e})")),
        }
        api
    });
    let _ = api;
}

fn api() -> Option<&'static Api> {
    API.get().and_then(|a| a.as_ref().ok())
}

/// Whether CUPTI times this process's CUDA launches.
pub fn active() -> bool {
    api().is_some()
}

/// Before a launch: our id for it, pushed as CUPTI's external correlation id.
pub fn begin() -> Option<u64> {
    let api = api()?;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    MATCHER
        .lock()
        .get_or_insert_with(Matcher::default)
        .order
        .push_back(id);
    // SAFETY: a plain call.
    unsafe { (api.push)(EXTERNAL_KIND, id) };
    Some(id)
}

/// After the launch call: the external correlation id is popped.
pub fn end(_id: u64) {
    if let Some(api) = api() {
        let mut last = 0u64;
        // SAFETY: writes one u64.
        unsafe { (api.pop)(EXTERNAL_KIND, &mut last) };
    }
}

/// Delivers every buffered record (at the end of a capture).
fn flush() {
    if let Some(api) = api() {
        // SAFETY: a plain call; 1 is CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.
        unsafe { (api.flush_all)(1) };
    }
    let kernels = KERNELS.load(Ordering::Relaxed);
    let correlated = CORRELATED.load(Ordering::Relaxed);
    if let Some(a) = api() {
        crate::profile::set_device_source(
            "cuda",
            format!(
                "cupti ({}; {kernels} kernel records, {correlated} by correlation)",
                a.path.display()
            ),
        );
    }
}

extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let mem: Box<[u64]> = vec![0u64; BUFFER_BYTES / 8].into_boxed_slice();
    let ptr = Box::into_raw(mem) as *mut u64 as *mut u8;
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = ptr;
        *size = BUFFER_BYTES;
        *max_records = 0;
    }
}

extern "C" fn buffer_completed(
    _ctx: *mut c_void,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    if let Some(api) = api() {
        read_buffer(api, buffer, valid);
    }
    // SAFETY: `buffer` is one that `buffer_requested` made from a boxed slice of that size.
    drop(unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            buffer as *mut u64,
            BUFFER_BYTES / 8,
        ))
    });
}

fn read_u32(p: *const u8, at: usize) -> u32 {
    // SAFETY: the caller's record is at least `at + 4` bytes.
    unsafe { std::ptr::read_unaligned(p.add(at) as *const u32) }
}
fn read_u64(p: *const u8, at: usize) -> u64 {
    // SAFETY: the caller's record is at least `at + 8` bytes.
    unsafe { std::ptr::read_unaligned(p.add(at) as *const u64) }
}

fn read_buffer(api: &Api, buffer: *mut u8, valid: usize) {
    let mut now_cupti = 0u64;
    // SAFETY: writes one u64.
    unsafe { (api.timestamp)(&mut now_cupti) };
    let now = crate::profile::stamp().0;
    let place = |t: u64| {
        crate::profile::Stamp(
            now.saturating_sub(crate::profile::ticks_of_ns(now_cupti.saturating_sub(t))),
        )
    };
    let mut kernels: Vec<(u32, u64, u64)> = Vec::new();
    let mut guard = MATCHER.lock();
    let m = guard.get_or_insert_with(Matcher::default);
    let mut record: *mut u8 = std::ptr::null_mut();
    loop {
        // SAFETY: `buffer` holds `valid` bytes of records; CUPTI walks them.
        let r = unsafe { (api.next_record)(buffer, valid, &mut record) };
        if r != SUCCESS || record.is_null() {
            break;
        }
        match read_u32(record, 0) {
            KIND_CONCURRENT_KERNEL => {
                kernels.push((
                    read_u32(record, 92),
                    read_u64(record, 16),
                    read_u64(record, 24),
                ));
            }
            KIND_EXTERNAL_CORRELATION if read_u32(record, 4) == EXTERNAL_KIND => {
                m.external.insert(read_u32(record, 16), read_u64(record, 8));
            }
            _ => {}
        }
    }
    // Launch order for those without a correlation: by start, as one stream runs them.
    kernels.sort_by_key(|k| k.1);
    for (corr, start, end) in kernels {
        KERNELS.fetch_add(1, Ordering::Relaxed);
        let id = match m.external.remove(&corr) {
            Some(id) => {
                CORRELATED.fetch_add(1, Ordering::Relaxed);
                m.done.insert(id);
                Some(id)
            }
            None => loop {
                match m.order.pop_front() {
                    Some(id) if m.done.remove(&id) => continue,
                    other => break other,
                }
            },
        };
        if let Some(id) = id {
            if start != 0 && end >= start {
                crate::profile::device_record(id, place(start), place(end));
            }
        }
    }
    // Keep `order` from holding ids already timed by correlation.
    while let Some(&front) = m.order.front() {
        if m.done.remove(&front) {
            m.order.pop_front();
        } else {
            break;
        }
    }
}
