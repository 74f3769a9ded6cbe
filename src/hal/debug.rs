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
    fn values_format_by_type() {
        assert_eq!(format_value(Scalar::U8, 255), "255");
        assert_eq!(format_value(Scalar::I8, 0xff), "-1");
        assert_eq!(format_value(Scalar::I64, u64::MAX), "-1");
        assert_eq!(format_value(Scalar::Bool, 1), "true");
        assert_eq!(format_value(Scalar::F64, 2.0f64.to_bits()), "2.0");
    }
}
