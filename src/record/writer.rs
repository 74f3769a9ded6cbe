//! The writer thread of a recording: hashes, deduplicates and compresses buffer contents,
//! keeps the compressed bytes under the budget, and writes the folder's files. The launch path
//! only sends it messages.

use super::{blobs_dir, content_hash, launches_dir, modules_dir, RecordSummary};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;

/// One argument of a launch as captured.
pub(crate) enum ArgRec {
    /// A value's little-endian bytes.
    Value { param: String, bytes: Vec<u8> },
    Buffer {
        param: String,
        elem: String,
        writable: bool,
        before: Vec<u8>,
        /// What a writable buffer held after the launch.
        after: Option<Vec<u8>>,
    },
}

/// The fields of a record other than its arguments, as the launch path captured them (the
/// JSON is made on the writer thread).
pub(crate) struct Head {
    pub kernel: std::sync::Arc<str>,
    pub module: std::sync::Arc<str>,
    pub backend: &'static str,
    /// The device key (`backend:name`).
    pub device: std::sync::Arc<str>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub shared_opt_in: bool,
    pub wave: Option<u32>,
}

impl Head {
    fn json(&self, seq: u64) -> Map<String, Value> {
        let mut head = Map::new();
        head.insert("format".into(), json!(super::FORMAT));
        head.insert("seq".into(), json!(seq));
        head.insert("kernel".into(), json!(&*self.kernel));
        head.insert("module".into(), json!(&*self.module));
        head.insert("backend".into(), json!(self.backend));
        head.insert("device".into(), json!(&*self.device));
        head.insert("grid".into(), json!(self.grid));
        head.insert("block".into(), json!(self.block));
        head.insert("shared_bytes".into(), json!(self.shared_bytes));
        head.insert("shared_opt_in".into(), json!(self.shared_opt_in));
        head.insert("wave".into(), json!(self.wave));
        head
    }
}

/// One launch as captured: every field of the record but the arguments, and the arguments.
pub(crate) struct LaunchRec {
    pub seq: u64,
    pub head: Head,
    pub args: Vec<ArgRec>,
}

/// What the launch path sends.
pub(crate) enum Msg {
    /// A module seen for the first time.
    Module {
        hash: String,
        text: String,
    },
    Launch(Box<LaunchRec>),
    /// A launch that could not be captured (its buffers could not be copied or read back).
    Unrecorded,
}

struct Writer {
    /// One compression context for the run (making one per buffer costs more than small
    /// buffers' compression).
    zstd: Option<zstd::bulk::Compressor<'static>>,
    dir: PathBuf,
    budget: u64,
    known: HashSet<String>,
    summary: RecordSummary,
    first_error: Option<String>,
}

/// Runs the writer until every sender has gone; returns the summary and the first write
/// error, if any.
pub(crate) fn run(dir: PathBuf, budget: u64, rx: Receiver<Msg>) -> (RecordSummary, Option<String>) {
    let mut w = Writer {
        zstd: zstd::bulk::Compressor::new(3).ok(),
        summary: RecordSummary {
            dir: dir.clone(),
            budget,
            ..RecordSummary::default()
        },
        dir,
        budget,
        known: HashSet::new(),
        first_error: None,
    };
    for msg in rx {
        match msg {
            Msg::Module { hash, text } => {
                let path = modules_dir(&w.dir).join(format!("{hash}.xk"));
                w.summary.bytes += text.len() as u64;
                if let Err(e) = std::fs::write(&path, text) {
                    w.error(&path, e);
                }
            }
            Msg::Launch(rec) => w.launch(*rec),
            Msg::Unrecorded => w.summary.unrecorded += 1,
        }
    }
    let s = &w.summary;
    let summary = json!({
        "format": super::FORMAT,
        "recorded": s.recorded,
        "unrecorded": s.unrecorded,
        "bytes": s.bytes,
        "budget": s.budget,
        "error": w.first_error,
    });
    let path = w.dir.join("summary.json");
    if let Err(e) = std::fs::write(&path, summary.to_string()) {
        w.error(&path, e);
    }
    (w.summary, w.first_error)
}

impl Writer {
    fn error(&mut self, path: &Path, e: std::io::Error) {
        self.first_error
            .get_or_insert_with(|| format!("{}: {e}", path.display()));
    }

    fn launch(&mut self, rec: LaunchRec) {
        // Hash every buffer; compress those not yet stored.
        let mut fresh: Vec<(String, Vec<u8>)> = Vec::new();
        let mut fresh_names: HashSet<String> = HashSet::new();
        let zstd = &mut self.zstd;
        let known = &self.known;
        let mut hash_of = |bytes: &[u8], fresh: &mut Vec<(String, Vec<u8>)>| -> String {
            let h = content_hash(bytes);
            if !known.contains(&h) && fresh_names.insert(h.clone()) {
                let z = match zstd.as_mut() {
                    Some(c) => c.compress(bytes),
                    None => zstd::bulk::compress(bytes, 3),
                };
                fresh.push((h.clone(), z.unwrap_or_else(|_| bytes.to_vec())));
            }
            h
        };
        let mut args = Vec::with_capacity(rec.args.len());
        for arg in &rec.args {
            args.push(match arg {
                ArgRec::Value { param, bytes } => {
                    json!({"param": param, "value": super::hex(bytes)})
                }
                ArgRec::Buffer {
                    param,
                    elem,
                    writable,
                    before,
                    after,
                } => {
                    let b = hash_of(before, &mut fresh);
                    let a = after.as_ref().map(|a| hash_of(a, &mut fresh));
                    json!({"param": param, "elem": elem, "bytes": before.len(),
                        "writable": writable, "before": b, "after": a})
                }
            });
        }
        let new_bytes: u64 = fresh.iter().map(|(_, z)| z.len() as u64).sum();
        if self.summary.bytes + new_bytes > self.budget {
            self.summary.unrecorded += 1;
            return;
        }
        for (h, z) in &fresh {
            let path = blobs_dir(&self.dir).join(format!("{h}.zst"));
            if let Err(e) = std::fs::write(&path, z) {
                self.error(&path, e);
                self.summary.unrecorded += 1;
                return;
            }
            self.known.insert(h.clone());
        }
        self.summary.bytes += new_bytes;
        let mut head = rec.head.json(rec.seq);
        head.insert("args".into(), Value::Array(args));
        let path = launches_dir(&self.dir).join(format!("{:08}.json", rec.seq));
        match std::fs::write(&path, Value::Object(head).to_string()) {
            Ok(()) => self.summary.recorded += 1,
            Err(e) => {
                self.error(&path, e);
                self.summary.unrecorded += 1;
            }
        }
    }
}
