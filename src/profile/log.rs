//! One thread's log of finished spans: append-only chunks that the owning thread writes with
//! no lock and no copy elsewhere, read (copied, never consumed) only when the trace is
//! written.
//!
//! A span that is final when its thread records it (a host span; a launch on a host backend,
//! whose device span is its call's window) goes here rather than through the ring
//! ([`super::ring`]): no other thread touches it until [`super::finish`], so the launch path
//! pays one fixed-size write into memory its own core holds, and the writer thread does
//! nothing for it. A full chunk is handed to the log's list (a lock taken once per
//! [`CHUNK`] spans) and a fresh one started; nothing is ever dropped.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Spans per chunk.
pub const CHUNK: usize = 4096;

/// A thread's log of `T`s.
pub struct Log<T: Copy> {
    /// The chunk being written (`CHUNK` slots, the first `len` written). Replaced only under
    /// `full`'s lock, which readers hold.
    cur: AtomicPtr<T>,
    len: AtomicUsize,
    /// Chunks written to the end, oldest first.
    full: Mutex<Vec<*mut T>>,
    /// Fresh chunks whose pages another thread has already touched ([`Log::refill`]), so
    /// that the producer does not take the page faults of a growing capture.
    spare: Mutex<Vec<*mut T>>,
}

/// Spare chunks [`Log::refill`] keeps ready.
pub const SPARES: usize = 4;

// SAFETY: the chunks are plain memory of `T: Copy + Send`; the producer writes slots past
// `len` only, readers read slots before it (published by a release store), and the current
// chunk is replaced only under the lock that readers hold.
unsafe impl<T: Copy + Send> Sync for Log<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + Send> Send for Log<T> {}

fn chunk<T>() -> *mut T {
    let mut v: Vec<T> = Vec::with_capacity(CHUNK);
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

impl<T: Copy> Log<T> {
    /// An empty log (its first chunk allocated).
    pub fn new() -> Log<T> {
        Log {
            cur: AtomicPtr::new(chunk()),
            len: AtomicUsize::new(0),
            full: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// Tops the spare chunks up to [`SPARES`], touching every page of each (the writer
    /// thread calls this); returns whether the producer has used a spare since the last call.
    pub fn refill(&self) -> bool {
        let have = self.spare.lock().len();
        for _ in have..SPARES {
            let c = chunk::<T>();
            let bytes = CHUNK * std::mem::size_of::<T>();
            // SAFETY: `c` holds `bytes` bytes of writable memory; writing zero bytes to it
            // touches its pages and creates no value of `T` (the slots stay unread until the
            // producer writes them).
            unsafe {
                let base = c as *mut u8;
                let mut at = 0;
                while at < bytes {
                    base.add(at).write_volatile(0);
                    at += 4096;
                }
            }
            self.spare.lock().push(c);
        }
        have < SPARES
    }

    /// Appends `value`. Returns whether the spares run low (the caller wakes the thread that
    /// calls [`Log::refill`]).
    ///
    /// # Safety
    /// Only one thread may ever call `push` on a log.
    #[inline]
    pub unsafe fn push(&self, value: T) -> bool {
        let mut i = self.len.load(Ordering::Relaxed);
        let mut low = false;
        if i == CHUNK {
            let next = {
                let mut spare = self.spare.lock();
                let next = spare.pop();
                low = spare.len() < SPARES / 2;
                next
            }
            .unwrap_or_else(chunk);
            let mut full = self.full.lock();
            full.push(self.cur.load(Ordering::Relaxed));
            self.cur.store(next, Ordering::Relaxed);
            self.len.store(0, Ordering::Relaxed);
            i = 0;
        }
        let p = self.cur.load(Ordering::Relaxed);
        // SAFETY: slot `i < CHUNK` of the current chunk: no reader reads it before `len`
        // passes it, and only this thread (the one producer) writes.
        unsafe { p.add(i).write(value) };
        self.len.store(i + 1, Ordering::Release);
        low
    }

    /// Calls `f` on every value appended so far, in order.
    pub fn for_each(&self, mut f: impl FnMut(&T)) {
        let full = self.full.lock();
        for &c in full.iter() {
            // SAFETY: a full chunk: its CHUNK slots were written and are never written again.
            unsafe { std::slice::from_raw_parts(c, CHUNK) }
                .iter()
                .for_each(&mut f);
        }
        let p = self.cur.load(Ordering::Relaxed);
        let len = self.len.load(Ordering::Acquire);
        // SAFETY: the current chunk cannot be replaced while the lock is held, and its first
        // `len` slots were written before the release store of `len`.
        unsafe { std::slice::from_raw_parts(p, len) }
            .iter()
            .for_each(f);
    }

    /// How many values the log holds.
    pub fn len(&self) -> usize {
        let full = self.full.lock();
        full.len() * CHUNK + self.len.load(Ordering::Acquire)
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Copy> Default for Log<T> {
    fn default() -> Self {
        Log::new()
    }
}

impl<T: Copy> Drop for Log<T> {
    fn drop(&mut self) {
        let free = |p: *mut T| {
            // SAFETY: `p` came from a `Vec<T>` of capacity CHUNK; `T: Copy` needs no drop.
            drop(unsafe { Vec::from_raw_parts(p, 0, CHUNK) })
        };
        for &c in self.full.get_mut().iter() {
            free(c);
        }
        for &c in self.spare.get_mut().iter() {
            free(c);
        }
        free(*self.cur.get_mut());
    }
}
