//! A compiled kernel's machine code as bytes, for the persistent CPU code cache (issue 21,
//! item 3; `docs/cpu-backend.md`, "Code cache").
//!
//! An image is what Cranelift emitted for the kernel's one function, before relocation: the
//! code buffer (its constant pool included), the buffer's alignment, and its relocations, each
//! naming its target by what it is (a runtime helper by its symbol name, a Cranelift libcall,
//! an offset in the function itself), never by an address: the helpers' addresses differ per
//! process. [`super::CompiledKernel::from_image`] copies the code into executable memory of a
//! new JIT module whose symbol table is the one [`super::CompiledKernel::compile`] uses, and
//! the JIT applies the relocations against it, so a second process runs the code without the
//! IR → CLIF lowering or Cranelift's code generation.
//!
//! With the code go the facts the launch needs (state per wave, barrier regions, static
//! shared bytes, the fault sites and the `print`/`assert` sites) and the ISA the code was
//! made for (triple and flags), which must equal the host's. Reading is total: a short, long
//! or inconsistent image (a relocation past the code, an unknown kind, a helper the runtime
//! does not have, another ISA or kernel) reads as `None`, never a panic.

use super::{ImageError, Site};
use crate::ir::debug::DebugSite;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::LibCall;

/// The first bytes of an image, with its format version.
const MAGIC: &[u8; 8] = b"XPUCPU\x00\x01";

/// The relocation kinds an image may carry (an image stores the index): those the JIT
/// applies on the hosts Cranelift targets natively.
const KINDS: [Reloc; 10] = [
    Reloc::Abs4,
    Reloc::Abs8,
    Reloc::X86PCRel4,
    Reloc::X86CallPCRel4,
    Reloc::X86CallPLTRel4,
    Reloc::X86GOTPCRel4,
    Reloc::Arm64Call,
    Reloc::Aarch64AdrGotPage21,
    Reloc::Aarch64Ld64GotLo12Nc,
    Reloc::Aarch64AdrPrelPgHi21,
];

/// What a relocation points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An imported runtime helper, by its symbol name ([`super::rt::symbols`],
    /// [`super::stream::symbols`]).
    Symbol(String),
    /// One of Cranelift's libcalls (resolved through `default_libcall_names`).
    LibCall(LibCall),
    /// An offset inside the function itself.
    SelfOffset(u32),
}

/// One relocation of the code buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageReloc {
    /// Where it applies, from the start of the code.
    pub offset: u32,
    pub kind: Reloc,
    pub target: Target,
    pub addend: i64,
}

/// A kernel's code and the facts its launches need, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeImage {
    /// The host ISA the code was made for ([`super::host_isa_id`]).
    pub isa: String,
    pub name: String,
    pub wave: u32,
    pub block: [u32; 3],
    pub state_bytes: u32,
    pub barriers: u32,
    pub static_shared: u64,
    pub dynamic_shared_elem: Option<u32>,
    pub streaming: bool,
    pub can_stream: bool,
    /// The code buffer's alignment (a power of two).
    pub align: u64,
    /// The code, unrelocated (what `code_hash` hashes).
    pub code: Vec<u8>,
    pub relocs: Vec<ImageReloc>,
    pub sites: Vec<Site>,
    pub debug_sites: Vec<DebugSite>,
}

/// The index of `kind` in `KINDS`, `None` for a kind images do not carry.
pub fn kind_index(kind: Reloc) -> Option<u8> {
    KINDS.iter().position(|k| *k == kind).map(|i| i as u8)
}

fn libcall_index(l: LibCall) -> Option<u16> {
    LibCall::all_libcalls()
        .iter()
        .position(|x| *x == l)
        .map(|i| i as u16)
}

/// Bytes a relocation of `kind` patches.
fn width(kind: Reloc) -> u32 {
    match kind {
        Reloc::Abs8 => 8,
        _ => 4,
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
    /// A count of items of at least `min` bytes each, refused when the rest cannot hold it
    /// (so that a damaged count never reserves memory).
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.checked_mul(min)? <= self.0.len()).then_some(n)
    }
}

impl CodeImage {
    /// The image as bytes ([`CodeImage::from_bytes`] reads them back); `None` where a
    /// relocation has a kind or libcall images do not carry (the code is then not stored).
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let mut w = Writer(Vec::with_capacity(self.code.len() + 256));
        w.0.extend_from_slice(MAGIC);
        w.str(&self.isa);
        w.str(&self.name);
        w.u32(self.wave);
        for b in self.block {
            w.u32(b);
        }
        w.u32(self.state_bytes);
        w.u32(self.barriers);
        w.u64(self.static_shared);
        match self.dynamic_shared_elem {
            Some(e) => {
                w.u8(1);
                w.u32(e);
            }
            None => w.u8(0),
        }
        w.u8(self.streaming as u8);
        w.u8(self.can_stream as u8);
        w.u64(self.align);
        w.bytes(&self.code);
        w.u32(self.relocs.len() as u32);
        for r in &self.relocs {
            w.u32(r.offset);
            w.u8(kind_index(r.kind)?);
            w.u64(r.addend as u64);
            match &r.target {
                Target::Symbol(s) => {
                    w.u8(0);
                    w.str(s);
                }
                Target::LibCall(l) => {
                    w.u8(1);
                    w.u32(libcall_index(*l)? as u32);
                }
                Target::SelfOffset(o) => {
                    w.u8(2);
                    w.u32(*o);
                }
            }
        }
        w.u32(self.sites.len() as u32);
        for s in &self.sites {
            w.u32(s.line);
            w.u32(s.col);
            w.str(&s.what);
        }
        w.u32(self.debug_sites.len() as u32);
        for d in &self.debug_sites {
            w.str(&d.to_line());
        }
        Some(w.0)
    }

    /// Reads an image written by [`CodeImage::to_bytes`] and checks it is one this process
    /// can run: made for `isa`, of the kernel `name`, its relocations inside the code and
    /// pointing at helpers in `symbols`. Anything else is `None`.
    pub fn from_bytes(bytes: &[u8], isa: &str, name: &str, symbols: &[&str]) -> Option<CodeImage> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return None;
        }
        let img_isa = r.str()?;
        let img_name = r.str()?;
        if img_isa != isa || img_name != name {
            return None;
        }
        let wave = r.u32()?;
        let block = [r.u32()?, r.u32()?, r.u32()?];
        let state_bytes = r.u32()?;
        let barriers = r.u32()?;
        let static_shared = r.u64()?;
        let dynamic_shared_elem = if r.bool()? { Some(r.u32()?) } else { None };
        let streaming = r.bool()?;
        let can_stream = r.bool()?;
        let align = r.u64()?;
        if !align.is_power_of_two() || align > 4096 || !(1..=64).contains(&wave) {
            return None;
        }
        let code = r.bytes()?.to_vec();
        if code.is_empty() {
            return None;
        }
        let n = r.count(14)?;
        let mut relocs = Vec::with_capacity(n);
        for _ in 0..n {
            let offset = r.u32()?;
            let kind = *KINDS.get(r.u8()? as usize)?;
            let addend = r.u64()? as i64;
            let target = match r.u8()? {
                0 => {
                    let s = r.str()?;
                    if !symbols.contains(&s) {
                        return None;
                    }
                    Target::Symbol(s.to_string())
                }
                1 => Target::LibCall(*LibCall::all_libcalls().get(r.u32()? as usize)?),
                2 => {
                    let o = r.u32()?;
                    if o as usize >= code.len() {
                        return None;
                    }
                    Target::SelfOffset(o)
                }
                _ => return None,
            };
            if offset as u64 + width(kind) as u64 > code.len() as u64 {
                return None;
            }
            relocs.push(ImageReloc {
                offset,
                kind,
                target,
                addend,
            });
        }
        let n = r.count(12)?;
        let mut sites = Vec::with_capacity(n);
        for _ in 0..n {
            let line = r.u32()?;
            let col = r.u32()?;
            let what = r.str()?.to_string();
            sites.push(Site { line, col, what });
        }
        let n = r.count(4)?;
        let mut debug_sites = Vec::with_capacity(n);
        for _ in 0..n {
            debug_sites.push(DebugSite::from_line(r.str()?)?);
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(CodeImage {
            isa: img_isa.to_string(),
            name: img_name.to_string(),
            wave,
            block,
            state_bytes,
            barriers,
            static_shared,
            dynamic_shared_elem,
            streaming,
            can_stream,
            align,
            code,
            relocs,
            sites,
            debug_sites,
        })
    }
}

impl From<cranelift_module::ModuleError> for ImageError {
    fn from(e: cranelift_module::ModuleError) -> Self {
        ImageError(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> CodeImage {
        CodeImage {
            isa: "x86_64 test".into(),
            name: "k".into(),
            wave: 8,
            block: [0, 1, 1],
            state_bytes: 32,
            barriers: 1,
            static_shared: 64,
            dynamic_shared_elem: Some(4),
            streaming: false,
            can_stream: true,
            align: 16,
            code: vec![0x90; 64],
            relocs: vec![
                ImageReloc {
                    offset: 8,
                    kind: Reloc::Abs8,
                    target: Target::Symbol("xpu_exp_f32".into()),
                    addend: -4,
                },
                ImageReloc {
                    offset: 20,
                    kind: Reloc::Abs8,
                    target: Target::LibCall(LibCall::CeilF32),
                    addend: 0,
                },
                ImageReloc {
                    offset: 30,
                    kind: Reloc::X86PCRel4,
                    target: Target::SelfOffset(40),
                    addend: 0,
                },
            ],
            sites: vec![Site {
                line: 3,
                col: 7,
                what: "buffer y".into(),
            }],
            debug_sites: vec![],
        }
    }

    const SYMS: &[&str] = &["xpu_exp_f32"];

    #[test]
    fn an_image_reads_back() {
        let b = image().to_bytes().unwrap();
        assert_eq!(
            CodeImage::from_bytes(&b, "x86_64 test", "k", SYMS),
            Some(image())
        );
    }

    #[test]
    fn every_truncation_and_every_foreign_field_is_refused() {
        let b = image().to_bytes().unwrap();
        for n in 0..b.len() {
            assert!(CodeImage::from_bytes(&b[..n], "x86_64 test", "k", SYMS).is_none());
        }
        let mut long = b.clone();
        long.push(0);
        assert!(CodeImage::from_bytes(&long, "x86_64 test", "k", SYMS).is_none());
        assert!(CodeImage::from_bytes(&b, "aarch64 test", "k", SYMS).is_none());
        assert!(CodeImage::from_bytes(&b, "x86_64 test", "other", SYMS).is_none());
        // A helper the runtime does not have is never resolved.
        assert!(CodeImage::from_bytes(&b, "x86_64 test", "k", &[]).is_none());
        // A relocation past the code.
        let mut past = image();
        past.relocs[0].offset = 60;
        let b = past.to_bytes().unwrap();
        assert!(CodeImage::from_bytes(&b, "x86_64 test", "k", SYMS).is_none());
        // Every single-byte change reads as another image or none, never a panic.
        let b = image().to_bytes().unwrap();
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0xff;
            let _ = CodeImage::from_bytes(&c, "x86_64 test", "k", SYMS);
        }
    }
}
