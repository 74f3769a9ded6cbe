//! The autotune store (contract §6.3): one small file per (device key, name) under a
//! directory the caller supplies, `<dir>/<deviceKey>/<name>`, behind an in-memory memo so that
//! a machine without a writable store tunes once per process.
//!
//! - The device key is [`DeviceFacts::device_key`]: the backend plus the geometry an answer
//!   depends on; a part that reports nothing is keyed `<backend>-unknown` and shares nothing
//!   (its values live in the memo only).
//! - [`AutotuneStore::remember_for`]/[`AutotuneStore::recall_for`] carry a build id; a value
//!   recalled against another build is discarded and reported (`XPU-T02`).
//! - Writes are atomic (a temporary file in the same folder, then a rename). A file that does
//!   not parse (`XPU-T04`) or was written for another key or name (`XPU-T05`) is reported and
//!   ignored, never trusted; the next `remember` replaces it.
//! - [`AutotuneStore::claim_once`] serialises a one-time probe across threads (a mutex per
//!   name) and processes (`flock` on `<name>.lock` beside the value).
//!
//! A file is four lines: `xpu-autotune 1`, `key <device key>`, `name <name>`,
//! `build <id or ->`, `value <value>`; names are percent-encoded into file names.

use super::codes;
use super::Report;
use crate::hal::facts::DeviceFacts;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: &str = "xpu-autotune 1";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    build: Option<String>,
    value: String,
}

/// The autotune store of one device.
pub struct AutotuneStore {
    /// `<dir>/<deviceKey>`, `None` where values live in the memo only.
    folder: Option<PathBuf>,
    key: String,
    memo: Mutex<HashMap<String, Entry>>,
    persisting: AtomicBool,
    reports: Mutex<Vec<Report>>,
    claims: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl AutotuneStore {
    /// The store of the device `facts` describe under `dir` (`None`: the memo only). A device
    /// keyed `unknown` shares nothing, so it never reads or writes `dir`.
    pub fn open(dir: Option<&Path>, facts: &DeviceFacts) -> AutotuneStore {
        AutotuneStore::with_key(dir, &facts.device_key())
    }

    /// The store of device key `key` under `dir` (tests and tools that key by hand).
    pub fn with_key(dir: Option<&Path>, key: &str) -> AutotuneStore {
        let shares = !key.ends_with("-unknown") && key != "unknown";
        let folder = dir.filter(|_| shares).map(|d| d.join(encode(key)));
        let store = AutotuneStore {
            persisting: AtomicBool::new(folder.is_some()),
            folder,
            key: key.to_string(),
            memo: Mutex::default(),
            reports: Mutex::default(),
            claims: Mutex::default(),
        };
        if let Some(folder) = &store.folder {
            if let Err(e) = fs::create_dir_all(folder) {
                store.not_persisting(format!("cannot create {}: {e}", folder.display()));
            }
        }
        store
    }

    /// The device key values are filed under.
    pub fn device_key(&self) -> &str {
        &self.key
    }

    /// The folder this device's values are in, `None` where they live in the memo only.
    pub fn folder(&self) -> Option<&Path> {
        self.folder.as_deref()
    }

    /// Whether this process's values are surviving it (a writable store for a device that
    /// shares; false after any write failed).
    pub fn persists(&self) -> bool {
        self.persisting.load(Ordering::Relaxed)
    }

    /// Everything reported so far (discarded values, corrupt files, failed writes), and
    /// cleared.
    pub fn take_reports(&self) -> Vec<Report> {
        std::mem::take(&mut *self.reports.lock())
    }

    fn report(&self, code: &'static str, message: String) {
        self.reports.lock().push(Report { code, message });
    }

    fn not_persisting(&self, why: String) {
        if self.persisting.swap(false, Ordering::Relaxed) {
            self.report(
                codes::NOT_PERSISTING,
                format!("the autotune store is not persisting: {why}; values live in memory"),
            );
        }
    }

    /// Remembers `value` for `name` with no build id.
    pub fn remember(&self, name: &str, value: &str) {
        self.put(name, None, value);
    }

    /// The value remembered for `name` (with or without a build id).
    pub fn recall(&self, name: &str) -> Option<String> {
        self.get(name).map(|e| e.value)
    }

    /// Remembers `value` for `name` under build id `build`.
    pub fn remember_for(&self, name: &str, build: &str, value: &str) {
        self.put(name, Some(build), value);
    }

    /// The value remembered for `name` under `build`. A value remembered under another build
    /// is discarded (memo and file) and reported (`XPU-T02`).
    pub fn recall_for(&self, name: &str, build: &str) -> Option<String> {
        let e = self.get(name)?;
        if e.build.as_deref() == Some(build) {
            return Some(e.value);
        }
        self.report(
            codes::BUILD_MISMATCH,
            format!(
                "`{name}` was tuned for build {} and this is build {build}: discarded",
                e.build.as_deref().unwrap_or("(none)")
            ),
        );
        self.invalidate(name);
        None
    }

    /// Drops the value of `name` (memo and file).
    pub fn invalidate(&self, name: &str) {
        self.memo.lock().remove(name);
        if let Some(path) = self.path(name) {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => self.not_persisting(format!("cannot remove {}: {e}", path.display())),
            }
        }
    }

    /// Records that the value tuned for `name` measured below its promise (`XPU-T01`) and
    /// drops it, so that the next use tunes again.
    pub fn report_underperforming(&self, name: &str, promised: &str, measured: &str) {
        let value = self.recall(name).unwrap_or_else(|| "(none)".into());
        self.report(
            codes::UNDERPERFORMING,
            format!("`{name}` = {value} promised {promised} and measured {measured}: dropped"),
        );
        self.invalidate(name);
    }

    /// The value of `name`, made by `probe` exactly once across the threads and processes
    /// sharing this store: the first caller probes and remembers; the others wait for it and
    /// recall. `build` is the build id the value is remembered under.
    pub fn claim_once(
        &self,
        name: &str,
        build: Option<&str>,
        probe: impl FnOnce() -> String,
    ) -> String {
        let recall = |s: &Self| match build {
            Some(b) => s.recall_for(name, b),
            None => s.recall(name),
        };
        if let Some(v) = recall(self) {
            return v;
        }
        let gate = self
            .claims
            .lock()
            .entry(name.to_string())
            .or_default()
            .clone();
        let _thread = gate.lock();
        let _process = self.path(name).and_then(|p| {
            let lock = p.with_file_name(format!("{}.lock", file_name(&p)));
            match FileLock::exclusive(&lock) {
                Ok(l) => Some(l),
                Err(e) => {
                    self.report(
                        codes::LOCK,
                        format!("cannot lock {}: {e}; probing unserialised", lock.display()),
                    );
                    None
                }
            }
        });
        // Another process may have probed while this one waited: drop what the memo holds
        // and read the file again (without a file the memo is the only copy).
        if self.folder.is_some() {
            self.memo.lock().remove(name);
        }
        if let Some(v) = recall(self) {
            return v;
        }
        let v = probe();
        self.put(name, build, &v);
        v
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        Some(self.folder.as_ref()?.join(encode(name)))
    }

    fn get(&self, name: &str) -> Option<Entry> {
        if let Some(e) = self.memo.lock().get(name) {
            return Some(e.clone());
        }
        let path = self.path(name)?;
        let text = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(_) => return None,
        };
        match self.parse(name, &text) {
            Ok(e) => {
                self.memo.lock().insert(name.to_string(), e.clone());
                Some(e)
            }
            Err((code, why)) => {
                self.report(code, format!("{}: {why}; ignored", path.display()));
                None
            }
        }
    }

    fn parse(&self, name: &str, bytes: &[u8]) -> Result<Entry, (&'static str, String)> {
        let corrupt = |why: &str| (codes::CORRUPT, why.to_string());
        let text = std::str::from_utf8(bytes).map_err(|_| corrupt("not UTF-8"))?;
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(corrupt("not an autotune file"));
        }
        let mut field = |key: &str| -> Result<String, (&'static str, String)> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix(' '))
                .map(str::to_string)
                .ok_or_else(|| corrupt(&format!("no `{key}` line")))
        };
        let key = field("key")?;
        let stored_name = field("name")?;
        let build = field("build")?;
        let value = field("value")?;
        if lines.next().is_some() {
            return Err(corrupt("trailing lines"));
        }
        if key != self.key || stored_name != name {
            return Err((
                codes::FOREIGN,
                format!(
                    "written for `{stored_name}` on {key}, not `{name}` on {}",
                    self.key
                ),
            ));
        }
        Ok(Entry {
            build: (build != "-").then_some(build),
            value,
        })
    }

    fn put(&self, name: &str, build: Option<&str>, value: &str) {
        // One line each: a newline in a value or build id would forge the next field.
        let clean = |s: &str| s.replace(['\n', '\r'], " ");
        let entry = Entry {
            build: build.map(clean),
            value: clean(value),
        };
        self.memo.lock().insert(name.to_string(), entry.clone());
        let Some(path) = self.path(name) else {
            return;
        };
        let text = format!(
            "{MAGIC}\nkey {}\nname {}\nbuild {}\nvalue {}\n",
            self.key,
            clean(name),
            entry.build.as_deref().unwrap_or("-"),
            entry.value
        );
        if let Err(e) = write_atomic(&path, text.as_bytes()) {
            self.not_persisting(format!("cannot write {}: {e}", path.display()));
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so
/// that a reader sees the old file or the new one, never a part.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!(
        ".{}.{}.{}.tmp",
        file_name(path),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `name` as one file name: letters, digits, `.`, `_` and `-` kept (but a leading `.`),
/// everything else `%XX`.
fn encode(name: &str) -> String {
    let mut out = String::new();
    for (i, b) in name.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    out
}

/// An exclusive `flock` held until drop.
struct FileLock {
    file: fs::File,
}

impl FileLock {
    fn exclusive(path: &Path) -> std::io::Result<FileLock> {
        use std::os::unix::io::AsRawFd;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        loop {
            // SAFETY: `file` is an open descriptor for the whole call.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(FileLock { file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::unix::io::AsRawFd;
        // SAFETY: the descriptor is open until `file` drops, after this.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Removes every device's values under `dir` (`xpu tune --reset DIR`): each folder holding
/// autotune files is emptied of them and of their locks. Files that are not the store's
/// are left alone. Returns how many files were removed.
pub fn reset(dir: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    for device in fs::read_dir(dir)? {
        let device = device?.path();
        if !device.is_dir() {
            continue;
        }
        for f in fs::read_dir(&device)? {
            let p = f?.path();
            let ours = p.extension().is_some_and(|e| e == "lock")
                || fs::read(&p).is_ok_and(|b| b.starts_with(MAGIC.as_bytes()));
            if p.is_file() && ours {
                fs::remove_file(&p)?;
                removed += 1;
            }
        }
        // Only an emptied folder goes.
        let _ = fs::remove_dir(&device);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_encode_to_one_file_name() {
        assert_eq!(encode("shape.gemm.1x2x3"), "shape.gemm.1x2x3");
        assert_eq!(encode("a/b"), "a%2Fb");
        assert_eq!(encode(".."), "%2E.");
        assert_eq!(encode(""), "%00");
        assert_eq!(encode("Gemm<64,64>"), "Gemm%3C64%2C64%3E");
    }
}
