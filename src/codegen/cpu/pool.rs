//! The worker pool that workgroups fan out over: plain threads created once per process, fed
//! one job per launch; the calling thread works too. How many take part in a launch is the
//! caller's cap (`CAJETA_XPU_CPU_WORKERS`, `CpuDevice::set_worker_cap`), at most the pool's
//! size (the host's cores).
//!
//! Each thread keeps its own state, shared-memory and scratch areas in thread-local storage,
//! grown when a launch needs more and reused by later launches (allocated once per worker,
//! not per launch).

use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

type Job = Arc<dyn Fn(usize) + Send + Sync>;
/// A job and the latch its worker counts down.
type Work = (Job, Arc<Latch>);

struct Pool {
    senders: Mutex<Vec<Sender<Work>>>,
}

struct Latch {
    left: Mutex<usize>,
    done: Condvar,
}

impl Latch {
    fn count_down(&self) {
        let mut l = self.left.lock();
        *l -= 1;
        if *l == 0 {
            self.done.notify_all();
        }
    }
}

/// The host's logical cores.
pub fn host_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut senders = Vec::new();
        // The caller is worker 0; the pool adds the rest.
        for i in 1..host_cores() {
            let (tx, rx) = channel::<Work>();
            let spawned = std::thread::Builder::new()
                .name(format!("xpu-cpu-{i}"))
                .spawn(move || {
                    while let Ok((job, latch)) = rx.recv() {
                        // A panic in a job must not leave the launch waiting forever.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(i)));
                        latch.count_down();
                    }
                });
            if spawned.is_ok() {
                senders.push(tx);
            }
        }
        Pool {
            senders: Mutex::new(senders),
        }
    })
}

/// Runs `work(worker)` on `threads` threads (this one included) and waits for all.
pub fn run(threads: usize, work: &(dyn Fn(usize) + Sync)) {
    let helpers = threads.saturating_sub(1);
    if helpers == 0 {
        work(0);
        return;
    }
    // SAFETY: the lifetime extension is sound because every job is finished (the latch
    // reaches zero) before this function returns, so `work` outlives every use.
    let work_static: &'static (dyn Fn(usize) + Sync) = unsafe {
        std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(work)
    };
    let job: Job = Arc::new(work_static);
    let p = pool();
    let senders = p.senders.lock();
    let n = helpers.min(senders.len());
    let latch = Arc::new(Latch {
        left: Mutex::new(n),
        done: Condvar::new(),
    });
    let mut sent = 0;
    for tx in senders.iter().take(n) {
        if tx.send((job.clone(), latch.clone())).is_ok() {
            sent += 1;
        }
    }
    drop(senders);
    // Workers whose thread is gone count down here.
    for _ in sent..n {
        latch.count_down();
    }
    work(0);
    let mut left = latch.left.lock();
    while *left > 0 {
        latch.done.wait(&mut left);
    }
}

/// One zeroed, 16-byte-aligned area of a worker, grown by replacing it. Allocated with
/// `alloc_zeroed` (fresh pages from the OS, untouched until the kernel uses them) rather than
/// filled, and fallibly: a launch whose areas the allocator refuses is refused, not aborted.
struct Area {
    ptr: *mut u8,
    bytes: usize,
}

impl Area {
    const fn empty() -> Area {
        Area {
            ptr: std::ptr::null_mut(),
            bytes: 0,
        }
    }

    /// At least `bytes` (plus 16 of slack), or `Err` with the size the allocator refused.
    fn grow(&mut self, bytes: usize) -> Result<*mut u8, usize> {
        let need = bytes
            .checked_next_multiple_of(16)
            .and_then(|b| b.checked_add(16))
            .ok_or(bytes)?;
        if self.bytes < need {
            let layout = std::alloc::Layout::from_size_align(need, 16).map_err(|_| need)?;
            // SAFETY: `layout` has a non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            if ptr.is_null() {
                return Err(need);
            }
            self.release();
            self.ptr = ptr;
            self.bytes = need;
        }
        Ok(self.ptr)
    }

    fn release(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated in `grow` with this size and alignment, freed once.
            unsafe {
                std::alloc::dealloc(
                    self.ptr,
                    std::alloc::Layout::from_size_align_unchecked(self.bytes, 16),
                )
            };
            self.ptr = std::ptr::null_mut();
            self.bytes = 0;
        }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        self.release();
    }
}

struct WorkerMemory {
    state: Area,
    shared: Area,
    scratch: Area,
}

thread_local! {
    static MEMORY: RefCell<WorkerMemory> = const {
        RefCell::new(WorkerMemory {
            state: Area::empty(),
            shared: Area::empty(),
            scratch: Area::empty(),
        })
    };
}

/// Which of a worker's areas the allocator refused, and its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AreaRefused {
    State(usize),
    Shared(usize),
}

/// Calls `f(state, shared, scratch)` with this thread's areas of at least the given sizes
/// (16-byte aligned, zeroed when first allocated); `Err` without calling it when an area cannot
/// be allocated.
pub fn with_worker_memory<R>(
    state_bytes: usize,
    shared_bytes: usize,
    f: impl FnOnce(*mut u8, *mut u8, *mut u8) -> R,
) -> Result<R, AreaRefused> {
    MEMORY.with(|m| {
        let mut m = m.borrow_mut();
        let state = m.state.grow(state_bytes).map_err(AreaRefused::State)?;
        let shared = m.shared.grow(shared_bytes).map_err(AreaRefused::Shared)?;
        let scratch = m
            .scratch
            .grow(super::SCRATCH_BYTES)
            .map_err(AreaRefused::State)?;
        Ok(f(state, shared, scratch))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_thread_runs_once() {
        let count = AtomicUsize::new(0);
        run(3, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        let expect = 3.min(host_cores().max(1));
        assert!(count.load(Ordering::Relaxed) >= 1);
        assert!(count.load(Ordering::Relaxed) <= expect.max(1));
    }
}
