//! Launch records, their replay through the interpreter, and the census (contract §2.5, §7).
//!
//! - **Record** (`CAJETA_XPU_RECORD=<dir>`, or [`Device::record_to`](crate::Device::record_to)):
//!   every launch writes one record ([`capture`]): the module's canonical IR text and its hash,
//!   the backend and device key, the geometry and dynamic shared bytes, every argument (values;
//!   each buffer's contents before the launch) and the buffers the kernel may write as they were
//!   after it. On the host backends (interpreter, CPU), whose streams run a launch inside the
//!   call, the buffers are read around the launch; on the others a device-side copy of each
//!   buffer is enqueued before and after the launch, and those copies are downloaded at the
//!   stream's next sync (never by an extra sync on the launch path). Compression (zstd),
//!   content hashing, deduplication and file writing happen on a writer thread
//!   ([`writer`]). The compressed bytes stay under a budget (`CAJETA_XPU_RECORD_BUDGET`,
//!   1 GiB by default); a launch past it is counted as unrecorded in `summary.json` and in a
//!   note at exit, never dropped silently.
//! - **Replay** ([`replay`], `xpu conform DIR`, `CAJETA_XPU_CONFORMANCE=<dir>`): each record
//!   runs through the interpreter; integers must agree bit for bit, floats within the held
//!   list's ulps.
//! - **Census** ([`census`], `xpu census DIR --backend B`): every registered kernel was
//!   value-checked, or is excused by name in a committed table.
//!
//! With recording off a launch pays one relaxed load of a cached flag ([`armed`]).
//!
//! # The folder
//!
//! ```text
//! DIR/launches/00000001.json   one record per launch (format below)
//! DIR/modules/<hash>.xk        canonical IR text, by hash
//! DIR/blobs/<hash>.zst         buffer contents, zstd, by the hash of the raw bytes
//! DIR/summary.json             recorded and unrecorded launches, bytes, budget
//! ```
//!
//! A record is a JSON object: `format` (`"xpu-record 1"`), `seq`, `kernel`, `module` (hash),
//! `backend`, `device` (the device key), `grid`, `block`, `shared_bytes`, `shared_opt_in`,
//! `wave` (the launch's, or the wave the backend built the kernel at), and `args`, one per
//! parameter in order: `{"param", "value": HEX}` (the value's little-endian bytes) or
//! `{"param", "elem", "bytes", "writable", "before": HASH, "after": HASH|null}`. Hashes are
//! the first 32 hex digits of SHA-256.

pub mod capture;
pub mod census;
pub mod replay;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// Codes of record, replay and census errors and findings.
pub mod codes {
    /// The record folder cannot be created or written.
    pub const WRITE: &str = "XPU-R001";
    /// A record cannot be read or is malformed.
    pub const MALFORMED: &str = "XPU-R002";
    /// A record's module text is missing, does not match its hash, or does not verify.
    pub const MODULE: &str = "XPU-R003";
    /// A record's buffer blob is missing or does not match its hash.
    pub const BLOB: &str = "XPU-R004";
    /// A held-list line is malformed.
    pub const HELD_LIST: &str = "XPU-R005";
    /// Recording was already started into another folder.
    pub const ALREADY_RECORDING: &str = "XPU-R006";
    /// A replayed record disagrees with the interpreter.
    pub const DISAGREE: &str = "XPU-R007";
    /// A held kernel now agrees exactly: its held-list line is stale.
    pub const STALE: &str = "XPU-R008";
    /// The interpreter refused a record (it cannot define the kernel, or the replay failed).
    pub const REPLAY_FAILED: &str = "XPU-R009";
    /// A registered kernel was not value-checked and is not excused.
    pub const UNCOVERED: &str = "XPU-R010";
    /// A census table line is malformed.
    pub const CENSUS_TABLE: &str = "XPU-R011";
    /// Launches past the record budget were not recorded.
    pub const UNRECORDED: &str = "XPU-R012";
    /// The folder holds no records.
    pub const EMPTY: &str = "XPU-R013";
    /// A census table excuses a kernel that was value-checked or never registered.
    pub const STALE_EXCUSE: &str = "XPU-R014";
    /// The replay budget ran out before every record was replayed.
    pub const NOT_REACHED: &str = "XPU-R015";
}

/// A failure of recording, replay or the census.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("error[{}]: {}: {message}", codes::WRITE, .path.display())]
    /// The record folder cannot be written (`XPU-R001`).
    Write {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    #[error("error[{}]: {}: {message}", codes::MALFORMED, .path.display())]
    /// A record is unreadable or malformed (`XPU-R002`).
    Malformed {
        /// The record.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    #[error("error[{}]: {}: {message}", codes::MODULE, .path.display())]
    /// A record's module is missing, mismatched or does not verify (`XPU-R003`).
    Module {
        /// The record.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    #[error("error[{}]: {}: {message}", codes::BLOB, .path.display())]
    /// A record's buffer blob is missing or mismatched (`XPU-R004`).
    Blob {
        /// The record.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    #[error("error[{}]: {}:{line}: {message}", codes::HELD_LIST, .path.display())]
    /// A held-list line is malformed (`XPU-R005`).
    HeldList {
        /// The held list.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    #[error("error[{}]: already recording into {}; cannot also record into {}", codes::ALREADY_RECORDING, .current.display(), .requested.display())]
    /// Recording was armed again for another folder (`XPU-R006`).
    AlreadyRecording {
        /// The folder being recorded into.
        current: PathBuf,
        /// The folder asked for.
        requested: PathBuf,
    },
    #[error("error[{}]: {}:{line}: {message}", codes::CENSUS_TABLE, .path.display())]
    /// A census table line is malformed (`XPU-R011`).
    CensusTable {
        /// The table.
        path: PathBuf,
        /// The line, from 1 (0: the file could not be read).
        line: usize,
        /// What is wrong.
        message: String,
    },
    #[error("error[{}]: {}: no launch records", codes::EMPTY, .path.display())]
    /// The folder holds no records (`XPU-R013`).
    Empty {
        /// The folder.
        path: PathBuf,
    },
    #[error("{0}")]
    /// A malformed environment value.
    Config(#[from] crate::config::BadValue),
}

impl RecordError {
    /// The error's stable code (`XPU-Rnnn`, or `XPU-C001`).
    pub fn code(&self) -> &'static str {
        match self {
            RecordError::Write { .. } => codes::WRITE,
            RecordError::Malformed { .. } => codes::MALFORMED,
            RecordError::Module { .. } => codes::MODULE,
            RecordError::Blob { .. } => codes::BLOB,
            RecordError::HeldList { .. } => codes::HELD_LIST,
            RecordError::AlreadyRecording { .. } => codes::ALREADY_RECORDING,
            RecordError::CensusTable { .. } => codes::CENSUS_TABLE,
            RecordError::Empty { .. } => codes::EMPTY,
            RecordError::Config(_) => crate::config::BAD_VALUE,
        }
    }
}

/// The record format's name and version.
pub const FORMAT: &str = "xpu-record 1";

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether any launch may be recorded: one relaxed load once the environment has been read.
#[inline]
pub fn armed() -> bool {
    match STATE.load(Ordering::Relaxed) {
        OFF => false,
        ON => true,
        _ => init_from_config(),
    }
}

#[cold]
fn init_from_config() -> bool {
    let config = crate::config::get();
    let dir = config.record.clone().or_else(|| config.conformance.clone());
    if let Some(dir) = dir {
        let budget = match &config.record_budget {
            Ok(b) => *b,
            Err(e) => {
                eprintln!("note: {e}; recording with the default budget");
                crate::config::DEFAULT_RECORD_BUDGET
            }
        };
        if let Err(e) = capture::start(&dir, budget, None) {
            eprintln!("note: {e}; launches are not recorded");
        }
    }
    let _ = STATE.compare_exchange(UNKNOWN, OFF, Ordering::Relaxed, Ordering::Relaxed);
    STATE.load(Ordering::Relaxed) == ON
}

pub(crate) fn set_armed(on: bool) {
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// What recording did: launches recorded and not, and the compressed bytes written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// The record folder.
    pub dir: PathBuf,
    /// Launches recorded.
    pub recorded: u64,
    /// Launches past the budget, or whose buffers could not be read back.
    pub unrecorded: u64,
    /// Compressed bytes written.
    pub bytes: u64,
    /// The byte budget recording ran under.
    pub budget: u64,
}

/// What [`finish`] did.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// The recording's summary (`None`: nothing was being recorded).
    pub summary: Option<RecordSummary>,
    /// The replay of the folder, under `CAJETA_XPU_CONFORMANCE`.
    pub conformance: Option<replay::Report>,
}

/// Finishes recording: downloads what pending launches wrote (syncing their streams: this is
/// the end of the run, not a launch), writes every record and `summary.json`, and stops the
/// writer. Under `CAJETA_XPU_CONFORMANCE`, then replays the folder (the held list
/// `DIR/held.txt` when there is one) and prints the report on stderr. The `xpu` command calls
/// it at exit (and fails when the replay does); a program that records calls it before it
/// exits.
pub fn finish() -> Result<Finished, RecordError> {
    let summary = capture::stop()?;
    let mut conformance = None;
    if let (Some(s), Some(dir)) = (&summary, crate::config::get().conformance.as_ref()) {
        if s.dir == *dir && s.recorded > 0 {
            let held = dir.join("held.txt");
            let options = replay::Options {
                held: held.is_file().then_some(held),
                budget: None,
            };
            let report = replay::replay_dir(dir, &options)?;
            eprintln!("conformance of {}:\n{report}", dir.display());
            conformance = Some(report);
        }
    }
    Ok(Finished {
        summary,
        conformance,
    })
}

/// The first 32 hex digits of the SHA-256 of `bytes`.
pub fn content_hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The canonical IR text of a module (the printer's form), which parses and verifies back
/// to the same kernels: the module as written, without the template instances verification
/// added (the templates' `instantiate` clauses make them again). Instances follow the
/// module's own functions, so dropping them leaves every other handle as it was.
pub fn canonical_text(module: &crate::ir::VerifiedModule) -> String {
    let source = module.module();
    let mut own = crate::ir::Module {
        functions: crate::ir::Arena::new(),
        tag_sets: source.tag_sets.clone(),
        families: source.families.clone(),
    };
    for (h, f) in source.functions.iter() {
        if module.instance_of(h).is_none() {
            own.functions.append(f.clone());
        }
    }
    crate::ir::text::print(&own)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn launches_dir(dir: &Path) -> PathBuf {
    dir.join("launches")
}
fn modules_dir(dir: &Path) -> PathBuf {
    dir.join("modules")
}
fn blobs_dir(dir: &Path) -> PathBuf {
    dir.join("blobs")
}
