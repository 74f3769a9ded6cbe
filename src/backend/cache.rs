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

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a lookup was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    Memory,
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

/// An in-memory and on-disk store of device code.
#[derive(Debug)]
pub struct CodeCache {
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<(DeviceKey, String), Code>>,
}

impl CodeCache {
    /// A cache persisting under `dir` (memory-only when `None`).
    pub fn new(dir: Option<PathBuf>) -> Self {
        CodeCache {
            dir,
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// The documented default directory (module docs), or `None`.
    pub fn default_dir() -> Option<PathBuf> {
        crate::config::get().cache_dir.clone()
    }

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
        let bytes = std::fs::read(self.path(key, hash, ext)?).ok()?;
        let v = Arc::new(bytes);
        self.memory.lock().insert(mk, v.clone());
        Some((v, Hit::Disk))
    }

    /// Stores code in memory and, best effort, on disk.
    pub fn put(&self, key: &DeviceKey, hash: &str, ext: &str, code: Vec<u8>) -> Arc<Vec<u8>> {
        let v = Arc::new(code);
        self.memory
            .lock()
            .insert((key.clone(), format!("{hash}.{ext}")), v.clone());
        if let Some(path) = self.path(key, hash, ext) {
            let _ = write_atomic(&path, &v);
        }
        v
    }

    /// Drops every entry from memory (the disk files stay); a later `get` reads the disk.
    pub fn clear_memory(&self) {
        self.memory.lock().clear();
    }
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
