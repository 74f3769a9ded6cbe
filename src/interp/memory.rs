//! Memory as the interpreter sees it: byte arrays with a "defined" bit per byte (poison
//! tracking) and, for memory that more than one work-item can write, a per-byte shadow of the
//! last writer and readers (race tracking).
//!
//! Race model (docs/semantics.md, "Data races"): the launch is cut into *phases*. A phase
//! starts when a workgroup starts and after each barrier it passes; phase ids grow
//! monotonically over the launch, and workgroups run one after another, so the phases of the
//! running workgroup are exactly those at or above its first phase (`group_start`). Two
//! accesses to one byte by different work-items conflict when at least one writes, they are
//! not both atomic, and they are not ordered by a barrier: they are in the same phase, or in
//! different workgroups (an earlier access in a phase below `group_start`).
//!
//! `wave_barrier()` refines this: the phases since the workgroup's last barrier form a
//! *segment* (from `seg_start`), and each wave has its own phase within it, advanced by each
//! `wave_barrier()` its lanes meet at. An earlier access in the segment is ordered before a
//! later one only when both are by lanes of one wave and a wave barrier lies between them
//! (the earlier phase is below the accessor's).

use crate::ir::Scalar;
use half::f16;

/// A buffer for the interpreter: bytes plus a defined bit per byte. Fresh buffers made with
/// [`Buffer::uninit`] are poison: reading a byte no one wrote is undefined behaviour the
/// interpreter reports (`uninit_read`). Writes define bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    pub(crate) bytes: Vec<u8>,
    /// One bit per byte, 1 = defined.
    pub(crate) defined: Vec<u64>,
}

/// A scalar type a [`Buffer`] can be built from or read as.
pub trait Element: Copy {
    /// The IR scalar with this representation.
    const SCALAR: Scalar;
    /// Little-endian bytes, `SCALAR.size()` of them.
    fn write_le(self, out: &mut [u8]);
    /// The value from `SCALAR.size()` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $s:ident) => {
        impl Element for $t {
            const SCALAR: Scalar = Scalar::$s;
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element width"))
            }
        }
    };
}
element!(i8, I8);
element!(i16, I16);
element!(i32, I32);
element!(i64, I64);
element!(u8, U8);
element!(u16, U16);
element!(u32, U32);
element!(u64, U64);
element!(f32, F32);
element!(f64, F64);
element!(f16, F16);

impl Element for bool {
    const SCALAR: Scalar = Scalar::Bool;
    fn write_le(self, out: &mut [u8]) {
        out[0] = self as u8;
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] & 1 != 0
    }
}

fn words(len: usize) -> usize {
    len.div_ceil(64)
}

impl Buffer {
    /// `len` bytes, all poison (their content is 0xFF, the contract's CAJETA_XPU_POISON
    /// pattern, but reading them is reported as undefined behaviour).
    pub fn uninit(len: usize) -> Self {
        Buffer {
            bytes: vec![0xff; len],
            defined: vec![0; words(len)],
        }
    }

    /// `len` zero bytes, all defined.
    pub fn zeroed(len: usize) -> Self {
        Self::from_bytes(vec![0; len])
    }

    /// The given bytes, all defined.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        let n = bytes.len();
        let mut defined = vec![u64::MAX; words(n)];
        if n % 64 != 0 {
            if let Some(last) = defined.last_mut() {
                *last = (1u64 << (n % 64)) - 1;
            }
        }
        Buffer { bytes, defined }
    }

    /// A buffer holding `values` in order, all defined.
    pub fn from_values<T: Element>(values: &[T]) -> Self {
        let size = T::SCALAR.size() as usize;
        let mut bytes = vec![0u8; values.len() * size];
        for (v, chunk) in values.iter().zip(bytes.chunks_exact_mut(size)) {
            v.write_le(chunk);
        }
        Self::from_bytes(bytes)
    }

    /// The content read as elements of `T` (a trailing partial element is ignored).
    pub fn to_values<T: Element>(&self) -> Vec<T> {
        let size = T::SCALAR.size() as usize;
        self.bytes.chunks_exact(size).map(T::read_le).collect()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the buffer holds no byte.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The content, as bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Overwrites bytes from `offset` and marks them defined. Panics if the range is outside
    /// the buffer, like slice indexing.
    pub fn write_bytes(&mut self, offset: usize, data: &[u8]) {
        self.bytes[offset..offset + data.len()].copy_from_slice(data);
        set_defined(&mut self.defined, offset, data.len(), true);
    }

    /// Whether byte `i` has been written (or was given at creation).
    pub fn is_defined(&self, i: usize) -> bool {
        i < self.bytes.len() && self.defined[i / 64] >> (i % 64) & 1 != 0
    }

    /// Whether every byte of the buffer is defined.
    pub fn all_defined(&self) -> bool {
        all_defined(&self.defined, 0, self.bytes.len())
    }
}

/// Whether bits `[off, off+len)` are all set.
#[inline]
pub(crate) fn all_defined(bits: &[u64], off: usize, len: usize) -> bool {
    let (w, b) = (off / 64, off % 64);
    if b + len <= 64 {
        let mask = if len == 64 {
            u64::MAX
        } else {
            ((1u64 << len) - 1) << b
        };
        return bits[w] & mask == mask;
    }
    (off..off + len).all(|i| bits[i / 64] >> (i % 64) & 1 != 0)
}

#[inline]
pub(crate) fn set_defined(bits: &mut [u64], off: usize, len: usize, value: bool) {
    let (w, b) = (off / 64, off % 64);
    if b + len <= 64 {
        let mask = if len == 64 {
            u64::MAX
        } else {
            ((1u64 << len) - 1) << b
        };
        if value {
            bits[w] |= mask;
        } else {
            bits[w] &= !mask;
        }
        return;
    }
    for i in off..off + len {
        if value {
            bits[i / 64] |= 1 << (i % 64);
        } else {
            bits[i / 64] &= !(1 << (i % 64));
        }
    }
}

/// The race shadow of one byte.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    /// The last writer's work-item + 1 (0: none), with [`ATOMIC`] set for an atomic write;
    /// [`MANY`] for atomic writes by several work-items not ordered with one another (the
    /// earliest of them in `w_phase`), each of which a plain access by any work-item races
    /// with. A plain write by a work-item stays recorded over its own atomics in the same
    /// phase (it races with everything they race with, and with other atomics).
    w_item: u32,
    w_phase: u32,
    /// The last reader's work-item + 1 (0: none; [`MANY`]: several readers, the earliest of
    /// them in `r_phase`).
    r_item: u32,
    r_phase: u32,
    /// Where the last write and the last read happened ([`pack_site`]).
    w_site: u32,
    r_site: u32,
}

const ATOMIC: u32 = 1 << 31;
/// Several readers (`r_item`) or several atomic writers (`w_item`, with [`ATOMIC`]), all
/// lanes of one wave in one phase: the low 30 bits are that wave's first work-item + 1.
const WAVE: u32 = 1 << 30;
/// Several readers (`r_item`) or several atomic writers (`w_item`, where it reads as an atomic
/// write by a work-item that is no one).
const MANY: u32 = u32::MAX;

/// How an access touches memory, for the race shadow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// An atomic read-modify-write or `atomic_load`: reads defined bytes.
    Atomic,
    /// An `atomic_store`: as `Atomic` for races, but defines the bytes like a write.
    AtomicStore,
}

/// Who is accessing: a work-item (linear over the launch), in a phase of a workgroup whose
/// first phase is `group_start`.
#[derive(Clone, Copy)]
pub(crate) struct Accessor {
    pub item: u32,
    /// The phase of the accessor's wave.
    pub phase: u32,
    pub group_start: u32,
    /// The first phase of the running barrier segment.
    pub seg_start: u32,
    /// The first work-item of the accessor's wave and the wave width: the work-items
    /// `wave_first .. wave_first + wave_w` are its wave.
    pub wave_first: u32,
    pub wave_w: u32,
    /// The access's source location ([`pack_site`]).
    pub site: u32,
}

/// A source location in 32 bits for the race shadow: line and column, 16 bits each
/// (saturating; 0 = unknown).
pub(crate) fn pack_site(span: crate::ir::Span) -> u32 {
    (span.line.min(0xffff) << 16) | span.col.min(0xffff)
}

pub(crate) fn unpack_site(site: u32) -> crate::ir::Span {
    crate::ir::Span::new(site >> 16, site & 0xffff)
}

/// A race found: the other access's work-item (linear over the launch) and whether it wrote.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conflict {
    pub other_item: u32,
    pub other_wrote: bool,
    /// Where the other access happened ([`pack_site`]).
    pub other_site: u32,
}

/// A memory fault: the byte range is not all defined.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    Uninit,
    Race(Conflict),
}

/// One addressable memory: a buffer's bytes during a launch, or a workgroup's shared memory.
#[derive(Default)]
pub(crate) struct Region {
    pub bytes: Vec<u8>,
    pub defined: Vec<u64>,
    /// Empty when this region's races are not tracked (read-only buffers, allowed races,
    /// checks off).
    pub shadow: Vec<Cell>,
}

impl Region {
    pub fn from_buffer(buf: &mut Buffer, track: bool) -> Region {
        let bytes = std::mem::take(&mut buf.bytes);
        let defined = std::mem::take(&mut buf.defined);
        let shadow = if track {
            vec![Cell::default(); bytes.len()]
        } else {
            Vec::new()
        };
        Region {
            bytes,
            defined,
            shadow,
        }
    }

    pub fn into_buffer(self, buf: &mut Buffer) {
        buf.bytes = self.bytes;
        buf.defined = self.defined;
    }

    /// A fresh shared-memory region of `len` poison bytes.
    pub fn shared(len: usize, track: bool) -> Region {
        Region {
            bytes: vec![0xff; len],
            defined: vec![0; words(len)],
            shadow: if track {
                vec![Cell::default(); len]
            } else {
                Vec::new()
            },
        }
    }

    /// Poisons everything and forgets every access (a new workgroup's shared memory).
    pub fn reset(&mut self) {
        self.defined.iter_mut().for_each(|w| *w = 0);
        self.shadow.iter_mut().for_each(|c| *c = Cell::default());
    }

    /// Checks (when `checks`) and records an access of `len` bytes at `off`, which the caller
    /// has bounds-checked. A read of undefined bytes is a fault; a write defines them.
    #[inline]
    pub fn access(
        &mut self,
        off: usize,
        len: usize,
        how: Access,
        who: Accessor,
        checks: bool,
    ) -> Result<(), Fault> {
        if checks
            && !matches!(how, Access::Write | Access::AtomicStore)
            && !all_defined(&self.defined, off, len)
        {
            return Err(Fault::Uninit);
        }
        if !self.shadow.is_empty() {
            let cells = &mut self.shadow[off..off + len];
            // Usually every byte of an element has the same history: track it once.
            let first = cells[0];
            if cells.iter().all(|c| *c == first) {
                let mut c = first;
                track(&mut c, how, who).map_err(Fault::Race)?;
                cells.fill(c);
            } else {
                for cell in cells {
                    track(cell, how, who).map_err(Fault::Race)?;
                }
            }
        }
        if how != Access::Read {
            set_defined(&mut self.defined, off, len, true);
        }
        Ok(())
    }
}

/// Whether an earlier access in `phase` by `rec` (a `w_item` or `r_item` record) is
/// unordered with `who`.
#[inline]
fn unordered(phase: u32, rec: u32, who: Accessor) -> bool {
    if phase < who.group_start {
        return true;
    }
    if phase < who.seg_start {
        return false;
    }
    // In this barrier segment: ordered only by a wave barrier of the accessor's own wave.
    !(phase < who.phase && same_wave(rec, who))
}

/// Whether the access or accesses `rec` records were all by lanes of `who`'s wave.
#[inline]
fn same_wave(rec: u32, who: Accessor) -> bool {
    if rec == MANY || rec & !ATOMIC == 0 {
        return false;
    }
    let r = rec & !ATOMIC;
    if r & WAVE != 0 {
        (r & !WAVE) - 1 == who.wave_first
    } else {
        (r - 1).wrapping_sub(who.wave_first) < who.wave_w
    }
}

/// The record of several concurrent accesses, the one recorded (`rec`) and `who`'s: of one
/// wave when both are of `who`'s, else [`MANY`].
#[inline]
fn several(rec: u32, who: Accessor) -> u32 {
    if same_wave(rec, who) {
        WAVE | (who.wave_first + 1)
    } else {
        MANY
    }
}

#[inline]
fn track(cell: &mut Cell, how: Access, who: Accessor) -> Result<(), Conflict> {
    let me = who.item + 1;
    // Another work-item's write (or several atomic ones), if any.
    let w = match cell.w_item & !ATOMIC {
        w if cell.w_item == MANY || w != me => w,
        _ => 0,
    };
    let w_atomic = cell.w_item & ATOMIC != 0;
    match how {
        Access::Read => {
            if w != 0 && unordered(cell.w_phase, cell.w_item, who) {
                return Err(Conflict {
                    other_item: writer(cell.w_item),
                    other_wrote: true,
                    other_site: cell.w_site,
                });
            }
            cell.r_site = who.site;
            let r = cell.r_item;
            if r == 0 || r == me || !unordered(cell.r_phase, r, who) {
                // None, our own, or ordered before us (by a barrier or a wave barrier):
                // whatever races with them races with us.
                cell.r_item = me;
                cell.r_phase = who.phase;
            } else if cell.r_phase >= who.group_start {
                // Concurrent readers in this workgroup: both must be remembered.
                cell.r_item = several(r, who);
                cell.r_phase = cell.r_phase.min(who.phase);
            } else {
                // A reader in another workgroup stays unordered with every later writer.
                cell.r_item = MANY;
            }
        }
        Access::Write | Access::Atomic | Access::AtomicStore => {
            let atomic = how != Access::Write;
            if w != 0 && !(atomic && w_atomic) && unordered(cell.w_phase, cell.w_item, who) {
                return Err(Conflict {
                    other_item: writer(cell.w_item),
                    other_wrote: true,
                    other_site: cell.w_site,
                });
            }
            let r = cell.r_item;
            if r != 0 && r != me && unordered(cell.r_phase, r, who) {
                return Err(Conflict {
                    // Several readers: name none in particular.
                    other_item: if r == MANY || r & WAVE != 0 {
                        u32::MAX
                    } else {
                        r - 1
                    },
                    other_wrote: false,
                    other_site: cell.r_site,
                });
            }
            if !atomic {
                // A plain write: every earlier access it does not race with is ordered
                // before it (or is this work-item's own), and every later access that would
                // race with one of them races with it.
                cell.w_item = me;
                cell.w_phase = who.phase;
                cell.w_site = who.site;
                cell.r_item = 0;
                return Ok(());
            }
            // An atomic write. The reads stay recorded: other work-items' atomics race with
            // them (a write by this work-item no longer orders them before those).
            let earlier = cell.w_item != 0 && unordered(cell.w_phase, cell.w_item, who);
            if !earlier {
                cell.w_item = me | ATOMIC;
                cell.w_phase = who.phase;
                cell.w_site = who.site;
            } else if cell.w_item != me && cell.w_item != me | ATOMIC {
                // Another work-item's atomic (a plain write would have raced above), not
                // ordered with this one: both stay unordered with every later plain access.
                // The earliest phase stays.
                cell.w_item = if cell.w_item == MANY {
                    MANY
                } else {
                    ATOMIC | several(cell.w_item, who)
                };
            }
            // Else this work-item's own write in this phase stays the record (a plain one
            // races with everything this atomic races with, and with other atomics too).
        }
    }
    Ok(())
}

/// The work-item a conflict names for a `w_item` record: `u32::MAX` for several.
#[inline]
fn writer(w_item: u32) -> u32 {
    if w_item == MANY || w_item & WAVE != 0 {
        u32::MAX
    } else {
        (w_item & !ATOMIC) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(item: u32, phase: u32, group_start: u32) -> Accessor {
        Accessor {
            item,
            phase,
            group_start,
            seg_start: phase,
            wave_first: item,
            wave_w: 1,
            site: 0,
        }
    }

    /// Item `item` of waves of 4 in a workgroup from phase 1, segment from `seg`, its wave at
    /// `phase`.
    fn lane(item: u32, phase: u32, seg: u32) -> Accessor {
        Accessor {
            item,
            phase,
            group_start: 1,
            seg_start: seg,
            wave_first: item & !3,
            wave_w: 4,
            site: 0,
        }
    }

    #[test]
    fn wave_barrier_orders_only_its_wave() {
        // Lane 1 writes, its wave passes a wave barrier (phase 2), lane 2 reads: ordered.
        let mut r = Region::shared(8, true);
        r.access(0, 4, Access::Write, lane(1, 1, 1), true).unwrap();
        r.access(0, 4, Access::Read, lane(2, 2, 1), true).unwrap();
        // Lane 5 (the other wave, still in phase 1 of the segment) races with both.
        assert!(r.access(0, 4, Access::Write, lane(5, 1, 1), true).is_err());
        // Without the wave barrier the read races.
        let mut r = Region::shared(8, true);
        r.access(0, 4, Access::Write, lane(1, 1, 1), true).unwrap();
        assert!(r.access(0, 4, Access::Read, lane(2, 1, 1), true).is_err());
        // Several readers of one wave, a wave barrier, then a write by one lane: ordered;
        // a write by the other wave in the segment races with them.
        let mut r2 = Region::shared(8, true);
        r2.access(0, 4, Access::Write, lane(0, 1, 1), true).unwrap();
        r2.access(0, 4, Access::Read, lane(1, 3, 1), true).unwrap();
        r2.access(0, 4, Access::Read, lane(2, 3, 1), true).unwrap();
        r2.access(0, 4, Access::Write, lane(3, 4, 1), true).unwrap();
        let mut r3 = Region::shared(8, true);
        r3.access(0, 4, Access::Write, lane(0, 1, 1), true).unwrap();
        r3.access(0, 4, Access::Read, lane(1, 3, 1), true).unwrap();
        r3.access(0, 4, Access::Read, lane(2, 3, 1), true).unwrap();
        assert!(r3.access(0, 4, Access::Write, lane(6, 2, 1), true).is_err());
        // Atomics by two lanes of one wave, a wave barrier, a plain read of that wave: ordered.
        let mut r = Region::shared(4, true);
        r.access(0, 4, Access::Atomic, lane(0, 1, 1), false)
            .unwrap();
        r.access(0, 4, Access::Atomic, lane(1, 1, 1), false)
            .unwrap();
        assert!(r.access(0, 4, Access::Read, lane(2, 1, 1), false).is_err());
        r.access(0, 4, Access::Read, lane(2, 2, 1), false).unwrap();
        // After a workgroup barrier (a new segment) every wave is ordered.
        let mut r = Region::shared(4, true);
        r.access(0, 4, Access::Write, lane(0, 1, 1), true).unwrap();
        r.access(0, 4, Access::Write, lane(7, 5, 5), true).unwrap();
    }

    #[test]
    fn defined_bits() {
        let mut b = Buffer::uninit(100);
        assert!(!b.is_defined(3));
        b.write_bytes(60, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(b.is_defined(60) && b.is_defined(67) && !b.is_defined(68));
        assert!(all_defined(&b.defined, 60, 8));
        assert!(!all_defined(&b.defined, 59, 8));
        assert!(Buffer::from_values(&[1.0f32, 2.0]).all_defined());
        assert_eq!(
            Buffer::from_values(&[1.5f32, -2.0]).to_values::<f32>(),
            vec![1.5, -2.0]
        );
    }

    #[test]
    fn races() {
        let mut r = Region::shared(8, true);
        // Two items write one byte in one phase: race.
        r.access(0, 4, Access::Write, who(0, 1, 1), true).unwrap();
        assert!(r.access(0, 4, Access::Write, who(1, 1, 1), true).is_err());
        // After a barrier (phase 2, same group) it is ordered.
        let mut r = Region::shared(8, true);
        r.access(0, 4, Access::Write, who(0, 1, 1), true).unwrap();
        r.access(0, 4, Access::Read, who(1, 2, 1), true).unwrap();
        r.access(0, 4, Access::Read, who(2, 2, 1), true).unwrap();
        // Two readers in phase 2, then a write by one of them in phase 2: race.
        assert!(r.access(0, 4, Access::Write, who(2, 2, 1), true).is_err());
        // Atomics do not race with atomics.
        let mut r = Region::shared(8, true);
        r.access(4, 4, Access::Atomic, who(0, 1, 1), false).unwrap();
        r.access(4, 4, Access::Atomic, who(1, 1, 1), false).unwrap();
        assert!(r.access(4, 4, Access::Read, who(2, 1, 1), false).is_err());
        // Another workgroup's earlier write conflicts whatever the phase.
        let mut r = Region::shared(8, true);
        r.access(0, 1, Access::Write, who(0, 1, 1), true).unwrap();
        assert!(r.access(0, 1, Access::Read, who(9, 5, 5), true).is_err());
        // A reader in another group, then a read here, then a write here by the same item.
        let mut r = Region::shared(8, true);
        r.access(0, 1, Access::Write, who(0, 0, 0), true).unwrap();
        let mut r2 = Region::shared(8, true);
        r2.access(0, 1, Access::Read, who(0, 1, 1), false).ok();
        r2.access(0, 1, Access::Read, who(5, 3, 3), false).unwrap();
        assert!(r2.access(0, 1, Access::Write, who(5, 3, 3), false).is_err());
    }

    #[test]
    fn plain_accesses_race_with_every_unordered_atomic() {
        // Atomics by items 0..4, then a plain read by the last of them: it races with the
        // other three (the record is not only the last atomic writer).
        let mut r = Region::shared(4, true);
        for item in 0..4 {
            r.access(0, 4, Access::Atomic, who(item, 1, 1), false)
                .unwrap();
        }
        let e = r.access(0, 4, Access::Read, who(3, 1, 1), false);
        assert!(matches!(e, Err(Fault::Race(c)) if c.other_wrote && c.other_item == u32::MAX));
        // A plain write by one of them races too; after a barrier both are ordered.
        let mut r = Region::shared(4, true);
        for item in 0..2 {
            r.access(0, 4, Access::Atomic, who(item, 1, 1), false)
                .unwrap();
        }
        assert!(r.access(0, 4, Access::Write, who(1, 1, 1), false).is_err());
        r.access(0, 4, Access::Read, who(1, 2, 1), false).unwrap();
        // A single atomic writer reading its own result is fine.
        let mut r = Region::shared(4, true);
        r.access(0, 4, Access::Atomic, who(5, 1, 1), false).unwrap();
        r.access(0, 4, Access::Read, who(5, 1, 1), false).unwrap();
        // Atomics of another workgroup stay unordered after this group's barrier.
        let mut r = Region::shared(4, true);
        r.access(0, 4, Access::Atomic, who(0, 1, 1), false).unwrap();
        r.access(0, 4, Access::Atomic, who(32, 3, 3), false)
            .unwrap();
        assert!(r.access(0, 4, Access::Read, who(32, 4, 3), false).is_err());
        // A plain read, then the reader's own atomic, then another's atomic: the read races.
        let mut r = Region::shared(4, true);
        r.access(0, 4, Access::Read, who(0, 1, 1), false).unwrap();
        r.access(0, 4, Access::Atomic, who(0, 1, 1), false).unwrap();
        assert!(r.access(0, 4, Access::Atomic, who(1, 1, 1), false).is_err());
        // A plain write, then the writer's own atomic, then another's atomic: it races.
        let mut r = Region::shared(4, true);
        r.access(0, 4, Access::Write, who(0, 1, 1), false).unwrap();
        r.access(0, 4, Access::Atomic, who(0, 1, 1), false).unwrap();
        assert!(r.access(0, 4, Access::Atomic, who(1, 1, 1), false).is_err());
    }

    #[test]
    fn uninit_reads() {
        let mut r = Region::shared(8, false);
        assert!(matches!(
            r.access(0, 4, Access::Read, who(0, 0, 0), true),
            Err(Fault::Uninit)
        ));
        r.access(0, 4, Access::Write, who(0, 0, 0), true).unwrap();
        r.access(0, 4, Access::Read, who(0, 0, 0), true).unwrap();
    }
}
