//! `print` and `assert` from inside a kernel (issue 23 item 9), the host end every backend
//! shares: a launch's buffer ([`crate::ir::debug`] defines its layout and decoding) becomes
//! its printed lines, sent to the process-wide sink ([`take_printed`]), and its first failed
//! assert, the launch's [`LaunchError::AssertFailed`] (`XPU-L035`).

use crate::hal::launch::LaunchError;
pub use crate::ir::debug::{
    decode, DebugSite, Decoded, HostBuffer, PrintLine, SiteKind, ASSERT_BASE, ASSERT_REGION_WORDS,
    BUFFER_WORDS, HEADER_WORDS, PRINT_REGION_WORDS,
};
use std::sync::Mutex;

static SINK: Mutex<Vec<PrintLine>> = Mutex::new(Vec::new());

/// Decodes a launch's buffer, sends its lines to the sink (a note line where records were
/// dropped), and gives the failed assert as the launch's error.
pub fn finish(
    kernel: &str,
    words: &[u32],
    sites: &[DebugSite],
    grid: [u32; 3],
    block: [u32; 3],
) -> Result<(), LaunchError> {
    let d = decode(kernel, words, sites, grid, block);
    let mut lines = d.lines;
    if d.dropped {
        lines.push(crate::ir::debug::dropped_note(kernel));
    }
    emit(lines);
    match d.failed {
        None => Ok(()),
        Some(f) => Err(LaunchError::AssertFailed {
            kernel: kernel.to_string(),
            line: f.line,
            group: f.group,
            item: f.item,
            message: f.message,
        }),
    }
}

/// [`finish`] over a buffer read back as little-endian bytes.
pub fn finish_bytes(
    kernel: &str,
    bytes: &[u8],
    sites: &[DebugSite],
    grid: [u32; 3],
    block: [u32; 3],
) -> Result<(), LaunchError> {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    finish(kernel, &words, sites, grid, block)
}

/// A launch's buffer read from device memory through `read(first, dst)`, a completed copy of
/// `dst.len()` words from buffer word `first`: the two cursors first, then only the words they
/// claim (clamped to their regions), so a launch that printed little copies little. Words
/// not read stay 0, which [`decode`] never reaches.
pub fn read_back<E>(mut read: impl FnMut(u32, &mut [u32]) -> Result<(), E>) -> Result<Vec<u32>, E> {
    let mut words = vec![0u32; BUFFER_WORDS as usize];
    read(0, &mut words[..HEADER_WORDS as usize])?;
    let regions = [
        (HEADER_WORDS, words[0].min(PRINT_REGION_WORDS)),
        (ASSERT_BASE, words[1].min(ASSERT_REGION_WORDS)),
    ];
    for (first, len) in regions {
        if len > 0 {
            read(first, &mut words[first as usize..(first + len) as usize])?;
        }
    }
    Ok(words)
}

/// Appends `lines` to the process-wide sink.
pub fn emit(lines: Vec<PrintLine>) {
    if lines.is_empty() {
        return;
    }
    let mut s = SINK.lock().unwrap_or_else(|p| p.into_inner());
    s.extend(lines);
}

/// Takes every line printed so far, by every launch of the process, in launch order (each
/// launch's lines in work-item order).
pub fn take_printed() -> Vec<PrintLine> {
    std::mem::take(&mut *SINK.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Takes the lines printed so far by launches of `kernel`, leaving the others'.
pub fn take_printed_by(kernel: &str) -> Vec<PrintLine> {
    let mut s = SINK.lock().unwrap_or_else(|p| p.into_inner());
    let (mine, rest): (Vec<_>, Vec<_>) = s.drain(..).partition(|l| l.kernel == kernel);
    *s = rest;
    mine
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::debug::format_value;
    use crate::ir::Scalar;

    #[test]
    fn records_decode_in_work_item_order_and_the_first_assert_fails() {
        let sites = vec![
            DebugSite {
                line: 3,
                kind: SiteKind::Print {
                    format: "v={} f={}".into(),
                    args: vec![Scalar::I32, Scalar::F32],
                },
            },
            DebugSite {
                line: 4,
                kind: SiteKind::Assert {
                    message: "bad".into(),
                },
            },
        ];
        let mut b = HostBuffer::default();
        b.print(0, 1, 0, &[(-2i64) as u64, 1.5f32.to_bits() as u64]);
        b.print(0, 0, 5, &[7, 0]);
        b.assert_failed(1, 1, 1);
        b.assert_failed(1, 0, 9);
        let d = decode("k", &b.words, &sites, [2, 1, 1], [4, 4, 1]);
        assert_eq!(d.lines.len(), 2);
        assert_eq!(d.lines[0].text, "v=7 f=0.0");
        assert_eq!(d.lines[0].item, [1, 1, 0]);
        assert_eq!(d.lines[1].text, "v=-2 f=1.5");
        assert_eq!(
            d.lines[1].to_string(),
            "[k:3 group 1,0,0 item 0,0,0] v=-2 f=1.5"
        );
        assert!(d.failed.is_some());
        let e = finish("k_decode_test", &b.words, &sites, [2, 1, 1], [4, 4, 1]).unwrap_err();
        assert_eq!(take_printed_by("k_decode_test").len(), 2);
        assert_eq!(e.code(), "XPU-L035");
        let t = e.to_string();
        assert!(
            t.contains("line 4") && t.contains("(1, 2, 0)") && t.contains("bad"),
            "{t}"
        );
        assert!(!d.dropped);
    }

    #[test]
    fn read_back_copies_the_cursors_then_only_the_claimed_words() {
        let sites = vec![
            DebugSite {
                line: 2,
                kind: SiteKind::Print {
                    format: "{}".into(),
                    args: vec![Scalar::U32],
                },
            },
            DebugSite {
                line: 5,
                kind: SiteKind::Assert {
                    message: "m".into(),
                },
            },
        ];
        let mut device = HostBuffer::default();
        device.print(0, 0, 3, &[11]);
        device.print(0, 0, 1, &[22]);
        device.assert_failed(1, 0, 2);
        // Junk past the cursors, which a launch never wrote: never copied.
        device.words[HEADER_WORDS as usize + 20] = 0xdead;
        let mut copies = Vec::new();
        let words = read_back(|first, dst: &mut [u32]| {
            copies.push((first, dst.len()));
            let f = first as usize;
            dst.copy_from_slice(&device.words[f..f + dst.len()]);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(
            copies,
            vec![(0, 2), (HEADER_WORDS, 10), (ASSERT_BASE, 3)],
            "the cursors, 2 print records of 5 words, 1 assert record"
        );
        assert_eq!(words[HEADER_WORDS as usize + 20], 0);
        let d = decode("k", &words, &sites, [1, 1, 1], [4, 1, 1]);
        let texts: Vec<_> = d.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["22", "11"], "work-item 1 before work-item 3");
        assert_eq!(d.failed.unwrap().item, [2, 0, 0]);
        // A cursor past its region (records dropped) reads the region's words only.
        let mut full = HostBuffer::default();
        full.words[0] = PRINT_REGION_WORDS + 40;
        let mut copies = Vec::new();
        read_back(|first, dst: &mut [u32]| {
            copies.push((first, dst.len()));
            let f = first as usize;
            dst.copy_from_slice(&full.words[f..f + dst.len()]);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(
            copies,
            vec![(0, 2), (HEADER_WORDS, PRINT_REGION_WORDS as usize)]
        );
        // A clear buffer reads its cursors only.
        let clear = HostBuffer::default();
        let mut copies = Vec::new();
        read_back(|first, dst: &mut [u32]| {
            copies.push((first, dst.len()));
            let f = first as usize;
            dst.copy_from_slice(&clear.words[f..f + dst.len()]);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(copies, vec![(0, 2)]);
        // A failed copy is the caller's error.
        assert_eq!(read_back(|_, _: &mut [u32]| Err("gone")), Err("gone"));
    }

    #[test]
    fn values_format_by_type() {
        assert_eq!(format_value(Scalar::U8, 255), "255");
        assert_eq!(format_value(Scalar::I8, 0xff), "-1");
        assert_eq!(format_value(Scalar::I64, u64::MAX), "-1");
        assert_eq!(format_value(Scalar::Bool, 1), "true");
        assert_eq!(format_value(Scalar::F64, 2.0f64.to_bits()), "2.0");
    }
}
