//! One thread's ring of profiler records: a preallocated single-producer, single-consumer
//! ring with no lock on the producer's side.
//!
//! The thread that owns the ring writes a slot and publishes it with one release store of
//! `head`; the consumer (the writer thread, or [`super::finish`], one at a time under the
//! store's lock) reads up to `head` and hands the slots back with a release store of `tail`.
//! A producer that finds the ring full never waits and never drops: the record goes to the
//! ring's overflow list (a lock taken only then) and the writer is woken.

use parking_lot::Mutex;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots per thread (a power of two).
pub const CAPACITY: usize = 1 << 13;

/// A thread's ring.
pub struct Ring<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    head: AtomicUsize,
    tail: AtomicUsize,
    overflow: Mutex<Vec<T>>,
    /// Records that went to the overflow list.
    pub overflowed: AtomicU64,
}

// SAFETY: a slot is written only by the one producer before `head` publishes it and read
// only by the one consumer (serialised by the caller) before `tail` returns it; `T: Send`
// moves across threads that way.
unsafe impl<T: Send> Sync for Ring<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Ring<T> {
    /// An empty ring of [`CAPACITY`] slots.
    pub fn new() -> Ring<T> {
        Ring {
            slots: (0..CAPACITY)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            overflow: Mutex::new(Vec::new()),
            overflowed: AtomicU64::new(0),
        }
    }

    /// Appends `value`. Only the ring's owning thread calls this. Returns whether the ring is
    /// now at least half full (the caller wakes the consumer then).
    ///
    /// # Safety
    /// Only one thread may ever call `push` on a ring.
    #[inline]
    pub unsafe fn push(&self, value: T) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        let used = head.wrapping_sub(tail);
        if used >= CAPACITY {
            self.overflow.lock().push(value);
            self.overflowed.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        // SAFETY: slot `head` is not in [tail, head), so the consumer does not read it, and
        // only this thread (the one producer) writes slots.
        unsafe { (*self.slots[head & (CAPACITY - 1)].get()).write(value) };
        self.head.store(head.wrapping_add(1), Ordering::Release);
        used + 1 == CAPACITY / 2
    }

    /// Moves every published record to `sink`, in order (then the overflow list's).
    ///
    /// # Safety
    /// Calls of `drain` on one ring must not overlap (the caller serialises consumers).
    pub unsafe fn drain(&self, mut sink: impl FnMut(T)) {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        let mut i = tail;
        while i != head {
            // SAFETY: slots in [tail, head) were written and published by the producer and
            // are not touched by it again until `tail` passes them.
            let v = unsafe { (*self.slots[i & (CAPACITY - 1)].get()).assume_init_read() };
            sink(v);
            i = i.wrapping_add(1);
        }
        self.tail.store(head, Ordering::Release);
        let spilled = std::mem::take(&mut *self.overflow.lock());
        spilled.into_iter().for_each(sink);
    }
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring::new()
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no producer or consumer is left.
        unsafe { self.drain(drop) };
    }
}
