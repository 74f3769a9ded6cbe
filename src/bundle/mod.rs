//! The bundle (contract §1, §4; issue 16 item 6): one file holding, per declared backend, each
//! kernel's device code and manifest, and the module's canonical IR, so that a program loads
//! on a device without lowering again where code for that device is present
//! ([`Device::load_bundle`](crate::Device::load_bundle)) and lowers lazily from the IR where it
//! is not (a host unknown at build time).
//!
//! [`BundleWriter`] makes one from entries (backend, target, kernel, code bytes, manifest) and
//! the canonical IR text; [`Bundle::open`] reads one through a memory map (`memmap2`), so a
//! large bundle loads without a copy, and checks all of it before anything is used.
//!
//! # Format (version 1)
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..8 | magic `XPUBNDL\x01` |
//! | 8..12 | format version, `u32` little-endian (1) |
//! | 12..16 | reserved, zero |
//! | 16..24 | index length `n`, `u64` little-endian |
//! | 24..56 | SHA-256 of the index |
//! | 56..56+n | the index: JSON ([`Index`]): per section its offset (from the end of the index), length and SHA-256; per entry its backend, target, kernel, code kind, code section, launch metadata and manifest |
//! | 56+n.. | the sections (the IR first, then each entry's code), back to back |
//!
//! The sections tile the rest of the file exactly: a gap, an overlap or a trailing byte is an
//! error, so every byte of a valid bundle is covered by the magic, a checked field or a hash,
//! and a truncated, foreign or tampered bundle is a [`BundleError`] with a code
//! (`XPU-B001`..`XPU-B012`), never a panic.
//!
//! The *target* of an entry says which devices its code is for: the NVIDIA architecture
//! (`sm_90`), the AMD processor (`gfx90a`), the Vulkan device's capability key (see
//! `backend::vulkan::stored`), `host` for the CPU (whose code, the verified IR, is made where
//! it runs: a CPU entry carries its manifest and no code section).

use crate::hal::manifest::KernelManifest;
use crate::hal::Backend;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::Path;

/// The codes of [`BundleError`] (docs/errors.md, family `XPU-B`).
pub mod codes {
    /// The bundle cannot be read or mapped (I/O).
    pub const IO: &str = "XPU-B001";
    /// Not a bundle: the magic is wrong (a foreign file).
    pub const FOREIGN: &str = "XPU-B002";
    /// A bundle of a format version this build does not read.
    pub const VERSION: &str = "XPU-B003";
    /// The file ends before the header, the index or a section does.
    pub const TRUNCATED: &str = "XPU-B004";
    /// The index does not match its hash (tampered or damaged).
    pub const INDEX_HASH: &str = "XPU-B005";
    /// A section does not match its hash (tampered or damaged).
    pub const SECTION_HASH: &str = "XPU-B006";
    /// The index is not the JSON this version writes.
    pub const INDEX: &str = "XPU-B007";
    /// The sections do not tile the file: a gap, an overlap, trailing bytes, a reserved field
    /// that is not zero.
    pub const LAYOUT: &str = "XPU-B008";
    /// The canonical IR does not parse or verify.
    pub const IR: &str = "XPU-B009";
    /// An entry that contradicts the bundle: a kernel the IR lacks, a duplicate, a manifest
    /// of another kernel or backend, code of the wrong kind.
    pub const ENTRY: &str = "XPU-B010";
    /// The bundle cannot be written (I/O).
    pub const WRITE: &str = "XPU-B011";
    /// The device refused the bundle's code at load (its launch metadata included).
    pub const DEVICE: &str = "XPU-B012";
    /// `xpu run --bundle`: a kernel file whose module is not the bundle's canonical IR.
    pub const OTHER_MODULE: &str = "XPU-B013";
}

/// A bundle that cannot be written, read or loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("error[{code}]: bundle {path}: {message}")]
pub struct BundleError {
    /// One of [`codes`].
    pub code: &'static str,
    /// The bundle's path (`<memory>` for bytes).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl BundleError {
    /// An error `code` about the bundle at `path`.
    pub fn new(code: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        BundleError {
            code,
            path: path.into(),
            message: message.into(),
        }
    }

    /// The error's stable code (`XPU-Bnnn`).
    pub fn code(&self) -> &'static str {
        self.code
    }
}

/// The first eight bytes of every bundle.
pub const MAGIC: [u8; 8] = *b"XPUBNDL\x01";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Bytes before the index.
pub const HEADER_BYTES: usize = 56;

/// What an entry's code is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodeKind {
    /// PTX text (with the backend's ABI header line).
    Ptx,
    /// An AMDGPU code object (ELF).
    CodeObject,
    /// SPIR-V words, little-endian.
    Spirv,
    /// The verified IR itself (the CPU: Cranelift code is made where it runs); no section.
    Ir,
}

impl CodeKind {
    /// The kind of code `backend` keeps in a bundle.
    pub fn of(backend: Backend) -> CodeKind {
        match backend {
            Backend::Cuda => CodeKind::Ptx,
            Backend::Hip => CodeKind::CodeObject,
            Backend::Vulkan => CodeKind::Spirv,
            Backend::Cpu | Backend::Interp => CodeKind::Ir,
        }
    }
}

/// Where a section lies: `offset` bytes after the end of the index, `len` bytes, and its
/// SHA-256 in hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// Bytes after the end of the index where the section starts.
    pub offset: u64,
    /// The section's length in bytes.
    pub len: u64,
    /// The section's SHA-256, in lowercase hex.
    pub sha256: String,
}

/// One entry of the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// The backend the code is for.
    pub backend: Backend,
    /// The devices the code is for (`sm_90`, `gfx90a`, a Vulkan capability key).
    pub target: String,
    /// The kernel's name (instances by their instance name).
    pub kernel: String,
    /// What the code is.
    pub kind: CodeKind,
    /// The code's section (`None` for [`CodeKind::Ir`]).
    pub code: Option<Section>,
    /// What the backend needs beside the code to launch it (Vulkan: the parameter layout).
    pub meta: Option<String>,
    /// The kernel's manifest as built.
    pub manifest: KernelManifest,
}

/// The index: the IR's section and the entries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// `xpu-bundle`.
    pub format: String,
    /// The crate version that wrote the bundle (informative).
    pub writer: String,
    /// The canonical IR text's section.
    pub ir: Section,
    /// One per (backend, target, kernel).
    pub entries: Vec<IndexEntry>,
}

/// One (backend, target, kernel) of a bundle being written.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The backend the code is for.
    pub backend: Backend,
    /// The devices the code is for (module docs).
    pub target: String,
    /// The kernel's name (instances by their instance name).
    pub kernel: String,
    /// The device code; `None` for a CPU entry (the IR is its code).
    pub code: Option<Vec<u8>>,
    /// The backend's launch metadata beside the code.
    pub meta: Option<String>,
    /// The kernel's manifest as built.
    pub manifest: KernelManifest,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The canonical IR `text` as a verified module, or `XPU-B009`.
pub fn verify_ir(path: &str, text: &str) -> Result<crate::ir::VerifiedModule, BundleError> {
    crate::ir::parse(text)
        .and_then(|m| m.verify())
        .map_err(|d| {
            BundleError::new(
                codes::IR,
                path,
                format!("the canonical IR does not verify:\n{}", d.render(path)),
            )
        })
}

/// Makes a bundle: the canonical IR and the entries, checked as [`Bundle::open`] checks them.
#[derive(Clone, Debug)]
pub struct BundleWriter {
    ir: String,
    entries: Vec<Entry>,
}

impl BundleWriter {
    /// A bundle of the module whose canonical IR is `ir_text` (`xpu::ir::print` of the parsed
    /// module), with no entries yet.
    pub fn new(ir_text: impl Into<String>) -> Self {
        BundleWriter {
            ir: ir_text.into(),
            entries: Vec::new(),
        }
    }

    /// Adds an entry (checked when the bundle is made).
    pub fn add(&mut self, entry: Entry) -> &mut Self {
        self.entries.push(entry);
        self
    }

    /// The entries added so far, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The bundle's bytes. The IR must verify, every entry must name one of its kernels once
    /// per (backend, target), carry that kernel's manifest for that backend, and code exactly
    /// where its kind has some (`XPU-B009`, `XPU-B010`).
    pub fn to_bytes(&self) -> Result<Vec<u8>, BundleError> {
        let path = "<writer>";
        let module = verify_ir(path, &self.ir)?;
        let mut seen = HashSet::new();
        for e in &self.entries {
            check_entry(
                path,
                &module,
                &mut seen,
                e.backend,
                &e.target,
                &e.kernel,
                &e.manifest,
                e.code.is_some(),
            )?;
        }
        let mut data: Vec<u8> = Vec::new();
        let section = |bytes: &[u8], data: &mut Vec<u8>| {
            let s = Section {
                offset: data.len() as u64,
                len: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            };
            data.extend_from_slice(bytes);
            s
        };
        let ir = section(self.ir.as_bytes(), &mut data);
        let entries = self
            .entries
            .iter()
            .map(|e| IndexEntry {
                backend: e.backend,
                target: e.target.clone(),
                kernel: e.kernel.clone(),
                kind: CodeKind::of(e.backend),
                code: e.code.as_deref().map(|c| section(c, &mut data)),
                meta: e.meta.clone(),
                manifest: e.manifest.clone(),
            })
            .collect();
        let index = Index {
            format: "xpu-bundle".into(),
            writer: env!("CARGO_PKG_VERSION").into(),
            ir,
            entries,
        };
        let index = serde_json::to_vec(&index)
            .map_err(|e| BundleError::new(codes::WRITE, path, e.to_string()))?;
        let mut out = Vec::with_capacity(HEADER_BYTES + index.len() + data.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(index.len() as u64).to_le_bytes());
        out.extend_from_slice(&Sha256::digest(&index));
        out.extend_from_slice(&index);
        out.extend_from_slice(&data);
        Ok(out)
    }

    /// Writes the bundle to `path` (a temporary name, then renamed: a reader never sees half
    /// of one).
    pub fn write(&self, path: &Path) -> Result<(), BundleError> {
        let shown = path.display().to_string();
        let bytes = self.to_bytes().map_err(|mut e| {
            e.path = shown.clone();
            e
        })?;
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let io = |e: std::io::Error| BundleError::new(codes::WRITE, shown.clone(), e.to_string());
        std::fs::write(&tmp, &bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn check_entry(
    path: &str,
    module: &crate::ir::VerifiedModule,
    seen: &mut HashSet<(Backend, String, String)>,
    backend: Backend,
    target: &str,
    kernel: &str,
    manifest: &KernelManifest,
    has_code: bool,
) -> Result<(), BundleError> {
    let bad = |m: String| BundleError::new(codes::ENTRY, path, m);
    if module.kernel(kernel).is_none() {
        return Err(bad(format!(
            "an entry for {backend} names kernel `{kernel}`, which the IR does not have"
        )));
    }
    if !seen.insert((backend, target.to_string(), kernel.to_string())) {
        return Err(bad(format!(
            "two entries for kernel `{kernel}` on {backend} ({target})"
        )));
    }
    if manifest.kernel != kernel || manifest.backend != backend {
        return Err(bad(format!(
            "the entry for kernel `{kernel}` on {backend} carries the manifest of `{}` on {}",
            manifest.kernel, manifest.backend
        )));
    }
    let wants_code = CodeKind::of(backend) != CodeKind::Ir;
    if has_code != wants_code {
        return Err(bad(format!(
            "the entry for kernel `{kernel}` on {backend} {}",
            if wants_code {
                "has no code"
            } else {
                "has a code section, but the IR is this backend's code"
            }
        )));
    }
    Ok(())
}

/// The bytes of a bundle: a memory map of its file, or owned bytes.
enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A bundle read and checked: every hash, length and entry (module docs).
pub struct Bundle {
    path: String,
    bytes: Bytes,
    index: Index,
    /// Where the sections begin (the end of the index).
    data_start: usize,
    module: crate::ir::VerifiedModule,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("path", &self.path)
            .field("bytes", &self.bytes.len())
            .field("entries", &self.index.entries.len())
            .finish()
    }
}

/// One entry of an open bundle, its code borrowed from the map.
#[derive(Clone, Copy, Debug)]
pub struct EntryRef<'b> {
    /// The backend the code is for.
    pub backend: Backend,
    /// The devices the code is for.
    pub target: &'b str,
    /// The kernel's name.
    pub kernel: &'b str,
    /// What the code is.
    pub kind: CodeKind,
    /// The device code (`None` for [`CodeKind::Ir`]).
    pub code: Option<&'b [u8]>,
    /// The backend's launch metadata beside the code.
    pub meta: Option<&'b str>,
    /// The kernel's manifest as built.
    pub manifest: &'b KernelManifest,
}

impl Bundle {
    /// Opens the bundle at `path` through a memory map and checks it. The file must not be
    /// changed while the bundle is open (it is written by renaming a whole file into place,
    /// which leaves an open map on the old one).
    pub fn open(path: &Path) -> Result<Bundle, BundleError> {
        let shown = path.display().to_string();
        let io = |e: std::io::Error| BundleError::new(codes::IO, shown.clone(), e.to_string());
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let bytes = if len == 0 {
            // An empty file cannot be mapped; it is not a bundle either.
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and private to this bundle. Bundles are replaced by
            // rename, never rewritten in place (`BundleWriter::write`), so the mapped file does
            // not change under the map; every byte is checked against its hash before use.
            Bytes::Map(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Bundle::check(shown, bytes)
    }

    /// Reads a bundle from bytes in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Bundle, BundleError> {
        Bundle::check("<memory>".into(), Bytes::Owned(bytes))
    }

    fn check(path: String, bytes: Bytes) -> Result<Bundle, BundleError> {
        let err = |code, m: String| BundleError::new(code, path.clone(), m);
        let b: &[u8] = &bytes;
        let n = b.len();
        if n < MAGIC.len() || b[..MAGIC.len()] != MAGIC {
            return Err(err(
                codes::FOREIGN,
                "not an xpu bundle (no `XPUBNDL` magic)".into(),
            ));
        }
        if n < HEADER_BYTES {
            return Err(err(
                codes::TRUNCATED,
                format!("{n} bytes end inside the {HEADER_BYTES}-byte header"),
            ));
        }
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let version = word(8);
        if version != VERSION {
            return Err(err(
                codes::VERSION,
                format!("format version {version}; this build reads version {VERSION}"),
            ));
        }
        if word(12) != 0 {
            return Err(err(
                codes::LAYOUT,
                "the reserved header field is not zero".into(),
            ));
        }
        let index_len = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let avail = (n - HEADER_BYTES) as u64;
        if index_len > avail {
            return Err(err(
                codes::TRUNCATED,
                format!("the index is {index_len} bytes but only {avail} follow the header"),
            ));
        }
        let data_start = HEADER_BYTES + index_len as usize;
        let index_bytes = &b[HEADER_BYTES..data_start];
        if Sha256::digest(index_bytes)[..] != b[24..56] {
            return Err(err(
                codes::INDEX_HASH,
                "the index does not match its hash (tampered or damaged)".into(),
            ));
        }
        let index: Index = serde_json::from_slice(index_bytes)
            .map_err(|e| err(codes::INDEX, format!("the index is malformed: {e}")))?;
        if index.format != "xpu-bundle" {
            return Err(err(
                codes::INDEX,
                format!("the index is of format `{}`", index.format),
            ));
        }
        // The sections must tile the rest of the file, in order.
        let data_len = (n - data_start) as u64;
        let mut sections: Vec<(&str, &Section)> = vec![("the IR", &index.ir)];
        for e in &index.entries {
            if let Some(s) = &e.code {
                sections.push((e.kernel.as_str(), s));
            }
        }
        for (what, s) in &sections {
            if s.offset.checked_add(s.len).is_none_or(|end| end > data_len) {
                return Err(err(
                    codes::TRUNCATED,
                    format!(
                        "the section of {what} ({} bytes at {}) ends past the file's {data_len} bytes of sections",
                        s.len, s.offset
                    ),
                ));
            }
        }
        let mut order: Vec<&Section> = sections.iter().map(|(_, s)| *s).collect();
        order.sort_by_key(|s| s.offset);
        let mut at = 0u64;
        for s in order {
            if s.offset != at {
                return Err(err(
                    codes::LAYOUT,
                    format!(
                        "a section starts at {} where the previous one ends at {at}",
                        s.offset
                    ),
                ));
            }
            at = s.offset + s.len;
        }
        if at != data_len {
            return Err(err(
                codes::LAYOUT,
                format!("{} bytes follow the last section", data_len - at),
            ));
        }
        for (what, s) in &sections {
            let start = data_start + s.offset as usize;
            let bytes = &b[start..start + s.len as usize];
            if sha256_hex(bytes) != s.sha256 {
                return Err(err(
                    codes::SECTION_HASH,
                    format!("the section of {what} does not match its hash (tampered or damaged)"),
                ));
            }
        }
        let ir_start = data_start + index.ir.offset as usize;
        let ir = std::str::from_utf8(&b[ir_start..ir_start + index.ir.len as usize])
            .map_err(|e| err(codes::IR, format!("the canonical IR is not UTF-8: {e}")))?;
        let module = verify_ir(&path, ir)?;
        let mut seen = HashSet::new();
        for e in &index.entries {
            check_entry(
                &path,
                &module,
                &mut seen,
                e.backend,
                &e.target,
                &e.kernel,
                &e.manifest,
                e.code.is_some(),
            )?;
            if e.kind != CodeKind::of(e.backend) {
                return Err(err(
                    codes::ENTRY,
                    format!(
                        "the entry for kernel `{}` on {} holds {:?} code",
                        e.kernel, e.backend, e.kind
                    ),
                ));
            }
        }
        Ok(Bundle {
            path,
            bytes,
            index,
            data_start,
            module,
        })
    }

    /// The path the bundle was opened from (`<memory>` for bytes).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The bundle's size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the bundle has no byte (never true of a bundle that opened).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bundle's index: the IR's section and the entries.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The canonical IR text.
    pub fn ir(&self) -> &str {
        let s = self.data_start + self.index.ir.offset as usize;
        std::str::from_utf8(&self.bytes[s..s + self.index.ir.len as usize])
            .expect("checked at open")
    }

    /// The canonical IR, verified at open.
    pub fn module(&self) -> &crate::ir::VerifiedModule {
        &self.module
    }

    fn section(&self, s: &Section) -> &[u8] {
        let start = self.data_start + s.offset as usize;
        &self.bytes[start..start + s.len as usize]
    }

    /// Every entry, in the order written.
    pub fn entries(&self) -> impl Iterator<Item = EntryRef<'_>> {
        self.index.entries.iter().map(|e| EntryRef {
            backend: e.backend,
            target: &e.target,
            kernel: &e.kernel,
            kind: e.kind,
            code: e.code.as_ref().map(|s| self.section(s)),
            meta: e.meta.as_deref(),
            manifest: &e.manifest,
        })
    }

    /// The entries for `backend` built for `target`.
    pub fn entries_for<'b>(
        &'b self,
        backend: Backend,
        target: &'b str,
    ) -> impl Iterator<Item = EntryRef<'b>> + 'b {
        self.entries()
            .filter(move |e| e.backend == backend && e.target == target)
    }

    /// The backends the bundle has entries for.
    pub fn backends(&self) -> Vec<Backend> {
        let mut v: Vec<Backend> = self.index.entries.iter().map(|e| e.backend).collect();
        v.sort();
        v.dedup();
        v
    }
}
