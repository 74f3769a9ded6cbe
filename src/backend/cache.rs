//! The device-code cache (DESIGN.md, Decisions 7): GPU code produced at a kernel's first
//! launch is kept in memory for the process and on disk across processes, keyed by the
//! device key (architecture, driver version, compiler version) and a hash of the kernel's IR.
//!
//! The disk directory is the caller's choice ([`CodeCache::new`]); the documented default
//! ([`CodeCache::default_dir`]) is `$XPU_CACHE_DIR`, else `$XDG_CACHE_HOME/xpu`, else
//! `$HOME/.cache/xpu`; never `/tmp`, and none at all when none of those is set (the cache is
//! then memory-only). `XPU_CACHE_DIR=off` disables the disk cache.
//!
//! Layout: `<dir>/<device key>/<ir hash>.<ext>`, written to a temporary name and renamed,
//! so a concurrent reader sees a whole file or none. A file that cannot be read or written
//! is a miss, never an error: the cache only ever saves time.
//!
//! Every file is an envelope: the magic `XPUCACHE`, the SHA-256 of the payload, the payload.
//! A file whose envelope does not check (truncated, damaged, written by something else) is
//! ignored, removed and counted ([`CodeCache::stats`]); the caller makes the code again and
//! its `put` replaces it. A hit touches the file's modification time, and a `put` that takes
//! the folder past its cap (`XPU_CACHE_MAX_MB`, default 1 GiB) removes the least recently
//! used files until it is under it.

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a lookup was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// The in-memory cache held the code.
    Memory,
    /// The on-disk cache held the code.
    Disk,
}

/// What device code is valid for: code from one key is never served for another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceKey {
    /// The backend and processor (`cuda-sm_90`).
    pub arch: String,
    /// The driver's version (`13000`), or `none` when building without a device.
    pub driver: String,
    /// The compiler: LLVM's version, the lowering's version and this crate's.
    pub compiler: String,
}

impl DeviceKey {
    /// The key as one directory name (`[A-Za-z0-9._-]` only).
    pub fn dir_name(&self) -> String {
        format!("{}_{}_{}", self.arch, self.driver, self.compiler)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }
}

/// The SHA-256 of `parts` (each length-prefixed, so boundaries count) in hex.
pub fn hash_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Device code as stored: shared, immutable bytes.
pub type Code = Arc<Vec<u8>>;

/// What a cache's disk side has done (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Lookups answered from disk.
    pub disk_hits: u64,
    /// Files found but not trusted (their envelope did not check), removed.
    pub rejected: u64,
    /// Files removed to keep the folder under its cap.
    pub evicted: u64,
}

/// The first bytes of every cache file.
const MAGIC: &[u8; 8] = b"XPUCACHE";

/// An in-memory and on-disk store of device code.
#[derive(Debug)]
pub struct CodeCache {
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<(DeviceKey, String), Code>>,
    cap: u64,
    stats: Mutex<Stats>,
    /// Whether lookups and stores are also kept in memory for the process.
    in_memory: bool,
}

impl CodeCache {
    /// A cache persisting under `dir` (memory-only when `None`), capped at `XPU_CACHE_MAX_MB`
    /// (1 GiB when unset or malformed).
    pub fn new(dir: Option<PathBuf>) -> Self {
        let cap = crate::config::get()
            .cache_max_bytes
            .clone()
            .unwrap_or(1024 << 20);
        CodeCache::with_cap(dir, cap)
    }

    /// A cache persisting under `dir`, whose files together stay under `cap` bytes.
    pub fn with_cap(dir: Option<PathBuf>, cap: u64) -> Self {
        CodeCache {
            dir,
            memory: Mutex::new(HashMap::new()),
            cap,
            stats: Mutex::new(Stats::default()),
            in_memory: true,
        }
    }

    /// A cache on disk only (nothing kept in memory: a caller that keeps its own code per
    /// program, so that dropped programs leave nothing behind), capped as [`CodeCache::new`].
    pub fn disk_only(dir: Option<PathBuf>) -> Self {
        CodeCache {
            in_memory: false,
            ..CodeCache::new(dir)
        }
    }

    /// The cache's counters so far.
    pub fn stats(&self) -> Stats {
        *self.stats.lock()
    }

    /// The documented default directory (module docs), or `None`.
    pub fn default_dir() -> Option<PathBuf> {
        crate::config::get().cache_dir.clone()
    }

    /// The on-disk cache's directory, `None` when the cache is in memory only.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path(&self, key: &DeviceKey, hash: &str, ext: &str) -> Option<PathBuf> {
        Some(
            self.dir
                .as_ref()?
                .join(key.dir_name())
                .join(format!("{hash}.{ext}")),
        )
    }

    /// The code stored for (`key`, `hash`), from memory or else disk.
    pub fn get(&self, key: &DeviceKey, hash: &str, ext: &str) -> Option<(Arc<Vec<u8>>, Hit)> {
        let mk = (key.clone(), format!("{hash}.{ext}"));
        if let Some(v) = self.memory.lock().get(&mk) {
            return Some((v.clone(), Hit::Memory));
        }
        let path = self.path(key, hash, ext)?;
        let file = std::fs::read(&path).ok()?;
        let Some(bytes) = open_envelope(&file) else {
            // Not trusted: removed, so that the caller's `put` writes a good one.
            let _ = std::fs::remove_file(&path);
            self.stats.lock().rejected += 1;
            return None;
        };
        // The least-recently-used order is the files' modification times.
        if let Ok(f) = std::fs::File::options().write(true).open(&path) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        let v = Arc::new(bytes.to_vec());
        if self.in_memory {
            self.memory.lock().insert(mk, v.clone());
        }
        self.stats.lock().disk_hits += 1;
        Some((v, Hit::Disk))
    }

    /// Stores code in memory and, best effort, on disk.
    pub fn put(&self, key: &DeviceKey, hash: &str, ext: &str, code: Vec<u8>) -> Arc<Vec<u8>> {
        let v = Arc::new(code);
        if self.in_memory {
            self.memory
                .lock()
                .insert((key.clone(), format!("{hash}.{ext}")), v.clone());
        }
        if let Some(path) = self.path(key, hash, ext) {
            let mut file = Vec::with_capacity(MAGIC.len() + 32 + v.len());
            file.extend_from_slice(MAGIC);
            file.extend_from_slice(&Sha256::digest(v.as_slice()));
            file.extend_from_slice(&v);
            if write_atomic(&path, &file).is_ok() {
                self.evict();
            }
        }
        v
    }

    /// Removes the least recently used files until the folder holds at most the cap.
    fn evict(&self) {
        let Some(dir) = &self.dir else { return };
        let mut files = Vec::new();
        for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(sub.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Ok(m) = f.metadata() {
                    if m.is_file() {
                        let t = m.modified().unwrap_or(std::time::UNIX_EPOCH);
                        files.push((t, m.len(), f.path()));
                    }
                }
            }
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        if total <= self.cap {
            return;
        }
        files.sort();
        for (_, len, path) in files {
            if total <= self.cap {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                self.stats.lock().evicted += 1;
            }
        }
    }

    /// Forgets the entry for (`key`, `hash`): its payload checked but the caller could not
    /// use it (another layout, code that does not load). The file is removed and counted as
    /// rejected, so that the caller's `put` writes a good one.
    pub fn reject(&self, key: &DeviceKey, hash: &str, ext: &str) {
        self.memory
            .lock()
            .remove(&(key.clone(), format!("{hash}.{ext}")));
        if let Some(path) = self.path(key, hash, ext) {
            let _ = std::fs::remove_file(&path);
        }
        self.stats.lock().rejected += 1;
    }

    /// Drops every entry from memory (the disk files stay); a later `get` reads the disk.
    pub fn clear_memory(&self) {
        self.memory.lock().clear();
    }
}

/// The payload of a cache file, where its envelope checks.
fn open_envelope(file: &[u8]) -> Option<&[u8]> {
    let rest = file.strip_prefix(MAGIC)?;
    if rest.len() < 32 {
        return None;
    }
    let (hash, payload) = rest.split_at(32);
    (Sha256::digest(payload)[..] == *hash).then_some(payload)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> DeviceKey {
        DeviceKey {
            arch: "cuda-sm_90".into(),
            driver: "13000".into(),
            compiler: "llvm19/l1/0.1.0".into(),
        }
    }

    #[test]
    fn memory_then_disk() {
        let dir = std::env::current_dir()
            .unwrap()
            .join("target")
            .join(format!("cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let c = CodeCache::new(Some(dir.clone()));
        let h = hash_hex(&[b"kernel", b"ir"]);
        assert!(c.get(&key(), &h, "ptx").is_none());
        c.put(&key(), &h, "ptx", b"ptx text".to_vec());
        assert_eq!(c.get(&key(), &h, "ptx").unwrap().1, Hit::Memory);
        c.clear_memory();
        let (v, hit) = c.get(&key(), &h, "ptx").unwrap();
        assert_eq!((v.as_slice(), hit), (&b"ptx text"[..], Hit::Disk));
        // Another device key never sees it.
        let mut other = key();
        other.driver = "12080".into();
        assert!(c.get(&other, &h, "ptx").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn hashes_are_boundary_sensitive_and_keys_are_file_names() {
        assert_ne!(hash_hex(&[b"ab", b"c"]), hash_hex(&[b"a", b"bc"]));
        assert_eq!(key().dir_name(), "cuda-sm_90_13000_llvm19-l1-0.1.0");
    }

    #[test]
    fn memory_only_without_a_dir() {
        let c = CodeCache::new(None);
        c.put(&key(), "h", "ptx", vec![1]);
        c.clear_memory();
        assert!(c.get(&key(), "h", "ptx").is_none());
    }
}
