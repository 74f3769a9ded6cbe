//! Streaming helpers: what a kernel that sweeps memory larger than the caches needs and
//! Cranelift has no instruction for (it has neither a non-temporal store nor a prefetch).
//!
//! Code compiled with [`super::Config::streaming`] calls them from the flat loop (see
//! `Lower::fast_loop`), once per wave:
//!
//! - [`xpu_prefetch_1`] .. [`xpu_prefetch_4`]: the lines [`PREFETCH_AHEAD`] bytes past each
//!   read stream's wave, into L2. The hardware's streamer alone keeps too few lines in flight
//!   for one core to reach its share of the memory bandwidth: with the prefetches, a 2-core
//!   saxpy over 64M floats moved 44 GB/s against 38 without (a Rust model of the loop).
//! - [`xpu_stream_store_1`] .. [`xpu_stream_store_8`]: a wave's chunks of an output the kernel
//!   never reads, stored non-temporally: the line is written without first being read (a
//!   plain store reads each line before writing it), so a STREAM triad moves 3 words per
//!   element rather than 4 (36 against 27 GB/s in the model).
//!
//! The chunks arrive as 128-bit vectors in registers. Non-temporal stores are weakly ordered:
//! a worker that ran streaming code ends with [`fence`] before its results are handed over.
//! Only x86-64 has the helpers ([`AVAILABLE`]); elsewhere no code streams.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m128i, _mm_prefetch, _mm_sfence, _mm_storeu_si128, _mm_stream_si128, _MM_HINT_T1,
};

/// Whether this target has the helpers (and so streaming code).
pub const AVAILABLE: bool = cfg!(target_arch = "x86_64");

/// How far ahead of a wave's read the prefetch goes, in bytes. 4 KiB and 16 KiB measured
/// alike; 4 KiB crosses least into the next worker's run at the end of a run.
pub const PREFETCH_AHEAD: i64 = 4096;

/// Work-items a worker takes at a time from a streaming launch (at least): 1 MiB of each
/// 4-byte stream. With 64 workgroups of 256 (64 KiB), a 2-core saxpy over 64M floats moved
/// 37 GB/s; with this, 40–41, and a triad 37 rather than 34.
pub const CHUNK_ITEMS: u64 = 1 << 18;

/// Bytes one prefetch brings in.
pub const LINE: i64 = 64;

/// Makes this thread's non-temporal stores visible before what follows (the hand-over of a
/// worker's results).
#[inline]
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` is in SSE, which every x86-64 has.
    unsafe {
        _mm_sfence()
    }
}

#[cfg(target_arch = "x86_64")]
pub use helpers::*;

#[cfg(target_arch = "x86_64")]
#[allow(improper_ctypes_definitions)] // `Chunk`: see its comment
mod helpers {
    use super::*;

    /// A 16-byte chunk of a wave. The x86-64 C calling convention passes `__m128i` in a
    /// vector register, as Cranelift passes an `i64x2`.
    type Chunk = __m128i;

    /// Stores `chunks` at `p`: non-temporally when `p` is 16-byte aligned (a buffer view at
    /// an odd offset is not), else plainly.
    ///
    /// # Safety
    /// `p` is valid for writes of `16 × chunks.len()` bytes.
    #[inline(always)]
    unsafe fn store(p: *mut u8, chunks: &[Chunk]) {
        let q = p as *mut __m128i;
        // SAFETY: the caller's contract; `_mm_stream_si128` only on an aligned address.
        unsafe {
            if p as usize % 16 == 0 {
                for (i, &c) in chunks.iter().enumerate() {
                    _mm_stream_si128(q.add(i), c);
                }
            } else {
                for (i, &c) in chunks.iter().enumerate() {
                    _mm_storeu_si128(q.add(i), c);
                }
            }
        }
    }

    /// Prefetches `lines` lines from `p` into L2.
    #[inline(always)]
    fn prefetch(p: *const u8, lines: u64) {
        for l in 0..lines as usize {
            // SAFETY: a prefetch has no architectural effect and never faults; any address
            // is allowed.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(l * 64) as *const i8) };
        }
    }

    macro_rules! stream_stores {
        ($($name:ident($($c:ident),+);)*) => {
            $(
                /// A wave's chunks, stored at `p` (see `store`).
                ///
                /// # Safety
                /// `p` is valid for writes of 16 bytes per chunk.
                pub unsafe extern "C" fn $name(p: *mut u8, $($c: Chunk),+) {
                    // SAFETY: the caller's contract.
                    unsafe { store(p, &[$($c),+]) }
                }
            )*
        };
    }

    stream_stores! {
        xpu_stream_store_1(a);
        xpu_stream_store_2(a, b);
        xpu_stream_store_4(a, b, c, d);
        xpu_stream_store_8(a, b, c, d, e, f, g, h);
    }

    macro_rules! prefetches {
        ($($name:ident($($p:ident),+);)*) => {
            $(
                /// `lines` lines from each pointer, into L2.
                pub extern "C" fn $name(lines: u64, $($p: *const u8),+) {
                    $(prefetch($p, lines);)+
                }
            )*
        };
    }

    prefetches! {
        xpu_prefetch_1(a);
        xpu_prefetch_2(a, b);
        xpu_prefetch_3(a, b, c);
        xpu_prefetch_4(a, b, c, d);
    }
}

/// The store helper for `n` chunks (1, 2, 4 or 8), and the prefetch helper for `n` streams
/// (1 to 4).
pub fn store_symbol(n: usize) -> &'static str {
    match n {
        1 => "xpu_stream_store_1",
        2 => "xpu_stream_store_2",
        4 => "xpu_stream_store_4",
        _ => "xpu_stream_store_8",
    }
}

pub fn prefetch_symbol(n: usize) -> &'static str {
    [
        "xpu_prefetch_1",
        "xpu_prefetch_2",
        "xpu_prefetch_3",
        "xpu_prefetch_4",
    ][n.clamp(1, 4) - 1]
}

/// Every helper's symbol and address, for `JITBuilder::symbol`.
#[cfg(target_arch = "x86_64")]
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("xpu_stream_store_1", xpu_stream_store_1 as *const u8),
        ("xpu_stream_store_2", xpu_stream_store_2 as *const u8),
        ("xpu_stream_store_4", xpu_stream_store_4 as *const u8),
        ("xpu_stream_store_8", xpu_stream_store_8 as *const u8),
        ("xpu_prefetch_1", xpu_prefetch_1 as *const u8),
        ("xpu_prefetch_2", xpu_prefetch_2 as *const u8),
        ("xpu_prefetch_3", xpu_prefetch_3 as *const u8),
        ("xpu_prefetch_4", xpu_prefetch_4 as *const u8),
    ]
}

#[cfg(not(target_arch = "x86_64"))]
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    Vec::new()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn stores_land_aligned_or_not() {
        // 16-byte aligned storage, seen as bytes: from offset 0 the stores are non-temporal,
        // from offset 1 plain.
        let mut backing = vec![0u128; 10];
        // SAFETY: 160 initialised bytes, borrowed once.
        let buf = unsafe { std::slice::from_raw_parts_mut(backing.as_mut_ptr() as *mut u8, 160) };
        let chunk = |k: u8| -> __m128i {
            // SAFETY: 16 bytes read as one 128-bit value.
            unsafe { std::mem::transmute::<[u8; 16], __m128i>([k; 16]) }
        };
        for start in [0usize, 1] {
            buf.fill(0);
            // SAFETY: `start + 16 × 8 <= buf.len()`.
            unsafe {
                let p = buf.as_mut_ptr().add(start);
                xpu_stream_store_8(
                    p,
                    chunk(1),
                    chunk(2),
                    chunk(3),
                    chunk(4),
                    chunk(5),
                    chunk(6),
                    chunk(7),
                    chunk(8),
                );
            }
            fence();
            for (i, &b) in buf.iter().enumerate() {
                let want = if i < start || i >= start + 128 {
                    0
                } else {
                    ((i - start) / 16 + 1) as u8
                };
                assert_eq!(b, want, "byte {i} from offset {start}");
            }
        }
        xpu_prefetch_2(2, buf.as_ptr(), std::ptr::null());
    }
}
