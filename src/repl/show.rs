//! What the REPL prints: buffers (a slice, with shape), manifests, a kernel's text and its
//! device code.

use crate::hal::launch::{elem_name, format_scalar};
use crate::hal::manifest::KernelManifest;
use crate::hal::Backend;
use crate::ir::text::run::Value;
use crate::ir::{ElemType, Module, Scalar, VerifiedModule};
use std::fmt::Write as _;

/// The scalar slot `i` of little-endian `bytes`.
fn slot(bytes: &[u8], scalar: Scalar, i: usize) -> u64 {
    let size = scalar.size() as usize;
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
    u64::from_le_bytes(b)
}

/// One element (the lanes of a vector in parentheses).
fn element(bytes: &[u8], elem: ElemType, i: usize) -> String {
    let lanes = elem.lanes as usize;
    if lanes == 1 {
        return format_scalar(elem.scalar, slot(bytes, elem.scalar, i));
    }
    let parts: Vec<String> = (0..lanes)
        .map(|l| format_scalar(elem.scalar, slot(bytes, elem.scalar, i * lanes + l)))
        .collect();
    format!("({})", parts.join(", "))
}

/// The most elements a `print` without a slice shows.
const SHOWN: usize = 64;

/// `name[lo..hi]` of a buffer of `len` elements: a header with its type and shape, then the
/// values (in rows of `shape`'s columns where given).
pub fn render(
    name: &str,
    elem: ElemType,
    len: usize,
    bytes: &[u8],
    lo: usize,
    hi: usize,
    shape: Option<(usize, usize)>,
) -> Result<String, String> {
    let mut out = String::new();
    let ty = elem_name(elem);
    match shape {
        Some((rows, cols)) => {
            if rows * cols != hi - lo {
                return Err(format!(
                    "shape {rows} x {cols} holds {} elements, the slice {lo}..{hi} has {}",
                    rows * cols,
                    hi - lo
                ));
            }
            let _ = writeln!(
                out,
                "{name}[{lo}..{hi}]: {ty}, shape [{rows}, {cols}] (of {len})"
            );
            let cells: Vec<String> = (lo..hi).map(|i| element(bytes, elem, i)).collect();
            let width = cells.iter().map(|c| c.len()).max().unwrap_or(1);
            for r in 0..rows {
                let row: Vec<String> = cells[r * cols..(r + 1) * cols]
                    .iter()
                    .map(|c| format!("{c:>width$}"))
                    .collect();
                let _ = writeln!(out, "  [{}]", row.join(", "));
            }
        }
        None => {
            let whole = lo == 0 && hi == len;
            let shown_hi = if whole { hi.min(lo + SHOWN) } else { hi };
            if whole {
                let _ = writeln!(out, "{name}: {ty}, shape [{len}]");
            } else {
                let _ = writeln!(
                    out,
                    "{name}[{lo}..{hi}]: {ty}, shape [{}] (of {len})",
                    hi - lo
                );
            }
            let cells: Vec<String> = (lo..shown_hi).map(|i| element(bytes, elem, i)).collect();
            let more = if shown_hi < hi {
                format!(
                    ", ... ({} more; print {name}[{shown_hi}..{hi}])",
                    hi - shown_hi
                )
            } else {
                String::new()
            };
            let _ = writeln!(out, "  [{}{more}]", cells.join(", "));
        }
    }
    Ok(out)
}

/// Where two buffers' bytes first differ, as `index I: A vs B`; `None` when they agree
/// (floats bit for bit, any NaN equal to any NaN).
pub fn first_difference(elem: ElemType, a: &[u8], b: &[u8]) -> Option<String> {
    let scalar = elem.scalar;
    let n = a.len() / scalar.size() as usize;
    for k in 0..n {
        let (x, y) = (slot(a, scalar, k), slot(b, scalar, k));
        let nan = |v: u64| match scalar {
            Scalar::F16 => half::f16::from_bits(v as u16).is_nan(),
            Scalar::F32 => f32::from_bits(v as u32).is_nan(),
            Scalar::F64 => f64::from_bits(v).is_nan(),
            _ => false,
        };
        if x != y && !(nan(x) && nan(y)) {
            let i = k / elem.lanes as usize;
            return Some(format!(
                "index {i}: {} vs {}",
                format_scalar(scalar, x),
                format_scalar(scalar, y)
            ));
        }
    }
    None
}

/// A scalar slot as a run-block literal that reads back as the same bits.
pub fn slot_value(bits: u64, scalar: Scalar) -> Value {
    match scalar {
        Scalar::Bool => Value::Bool(bits != 0),
        Scalar::F16 => Value::Float(half::f16::from_bits(bits as u16).to_f64()),
        Scalar::F32 => Value::Float(f32::from_bits(bits as u32) as f64),
        Scalar::F64 => Value::Float(f64::from_bits(bits)),
        s if s.is_signed() => {
            let shift = 64 - s.bits();
            Value::Int((((bits << shift) as i64) >> shift) as i128)
        }
        _ => Value::Int(bits as i128),
    }
}

/// A manifest, one `key = value` per line (absent fields say so).
pub fn manifest(m: &KernelManifest) -> String {
    fn opt<T: std::fmt::Debug>(v: &Option<T>) -> String {
        match v {
            Some(v) => format!("{v:?}"),
            None => "absent".into(),
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "manifest {} on {}:", m.kernel, m.backend.name());
    let rows = [
        ("registers_per_thread", opt(&m.registers_per_thread)),
        ("scalar_registers", opt(&m.scalar_registers)),
        ("max_block_threads", opt(&m.max_block_threads)),
        ("spill_store_bytes", opt(&m.spill_store_bytes)),
        ("spill_load_bytes", opt(&m.spill_load_bytes)),
        ("stack_frame_bytes", opt(&m.stack_frame_bytes)),
        ("static_shared_bytes", opt(&m.static_shared_bytes)),
        ("dynamic_shared", m.dynamic_shared.to_string()),
        ("declared_wave", opt(&m.declared_wave)),
        ("built_wave", opt(&m.built_wave)),
        ("pinned_block", opt(&m.pinned_block)),
        ("max_threads", opt(&m.max_threads)),
        ("max_waves", opt(&m.max_waves)),
        ("min_resident", opt(&m.min_resident)),
        ("max_registers", opt(&m.max_registers)),
        ("feasible_blocks", opt(&m.feasible_blocks)),
        ("occupancy_limiter", opt(&m.occupancy_limiter)),
        (
            "code_hash",
            m.code_hash.map_or("absent".into(), |h| format!("{h:016x}")),
        ),
        ("code_bytes", opt(&m.code_bytes)),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "  {k} = {v}");
    }
    for op in &m.native_ops {
        let _ = writeln!(
            out,
            "  native_op = {} -> {} ({})",
            op.op, op.instruction, op.tier
        );
    }
    out
}

/// The canonical text of the function `name` of `module` (with its attributes).
pub fn function_text(module: &Module, name: &str) -> Option<String> {
    module.functions.iter().find(|(_, f)| f.name == name)?;
    // Print the whole module and keep the chunk that defines `name` (functions are printed
    // one after another, separated by a blank line, attributes first).
    let text = crate::ir::text::print(module);
    for chunk in text.split("\n\n") {
        let header = chunk
            .lines()
            .find(|l| !l.starts_with('@') && !l.starts_with("tagset"))
            .unwrap_or("");
        let defines = ["kernel ", "device fn "].iter().any(|k| {
            header.strip_prefix(k).is_some_and(|rest| {
                rest.starts_with(name) && rest[name.len()..].starts_with(['(', '<'])
            })
        });
        if defines {
            let body: Vec<&str> = chunk.lines().filter(|l| !l.starts_with("tagset")).collect();
            return Some(format!("{}\n", body.join("\n")));
        }
    }
    None
}

/// The device code of `kernel` for `target`: `clif` (Cranelift IR, the CPU backend's),
/// `spirv` (SPIR-V disassembly: `spirv-dis` when installed, else rspirv's), `ptx` (builds with
/// the `cuda` feature). `current` is the session's backend (SPIR-V uses the Vulkan device's
/// capabilities when it is Vulkan, else every capability at a subgroup of 32).
pub fn asm(
    module: &VerifiedModule,
    kernel: &str,
    target: &str,
    current: Backend,
) -> Result<String, String> {
    let handle = module
        .kernel(kernel)
        .ok_or_else(|| format!("no kernel named `{kernel}`"))?;
    match target {
        "clif" | "cranelift" | "cpu" => {
            let f = module.function(handle);
            let wave = crate::backend::cpu::build_wave(f);
            let (result, text) = crate::codegen::cpu::capture_clif(|| {
                crate::backend::cpu::compile(module, handle, [0, 1, 1], wave, false, false, false)
            });
            result.map_err(|e| format!("the CPU lowering refused `{kernel}`: {e}"))?;
            Ok(text)
        }
        "spirv" | "spir-v" | "vulkan" => {
            let caps = if current == Backend::Vulkan {
                crate::backend::vulkan::VulkanDevice::open()
                    .map(|d| d.caps().clone())
                    .unwrap_or_else(|_| crate::codegen::spirv::Caps::all(32))
            } else {
                crate::codegen::spirv::Caps::all(32)
            };
            let emitted = crate::codegen::spirv::emit_kernel(module, handle, &caps)
                .map_err(|e| format!("the SPIR-V lowering refused `{kernel}`: {e:?}"))?;
            Ok(disassemble_spirv(&emitted.words))
        }
        "ptx" | "cuda" => ptx(module, handle, kernel),
        "amdgpu" | "hip" | "gcn" => amdgpu(module, handle, kernel),
        // The interpreter runs the verified IR itself: its "device code" is the kernel's IR.
        "ir" | "interp" => function_text(module.module(), kernel)
            .ok_or_else(|| format!("no kernel named `{kernel}`")),
        other => Err(format!(
            "`{other}`: the targets are clif, spirv, ptx, amdgpu and ir"
        )),
    }
}

#[cfg(feature = "cuda")]
fn ptx(
    module: &VerifiedModule,
    handle: crate::ir::Handle<crate::ir::Function>,
    kernel: &str,
) -> Result<String, String> {
    use crate::codegen::llvm::{self, nvptx::Nvptx, KernelRef};
    let target = Nvptx::new(90);
    let out = llvm::lower(
        module,
        &[KernelRef::plain(handle)],
        &target,
        &llvm::Options::default(),
    )
    .map_err(|e| format!("the NVPTX lowering refused `{kernel}`: {e}"))?;
    Ok(out.text())
}

#[cfg(not(feature = "cuda"))]
fn ptx(
    _: &VerifiedModule,
    _: crate::ir::Handle<crate::ir::Function>,
    _: &str,
) -> Result<String, String> {
    Err("PTX needs a build with the `cuda` feature (`cargo build --features cuda`)".into())
}

#[cfg(feature = "hip")]
fn amdgpu(
    module: &VerifiedModule,
    handle: crate::ir::Handle<crate::ir::Function>,
    kernel: &str,
) -> Result<String, String> {
    use crate::codegen::llvm::codeobj::{self, BuildOptions};
    use crate::codegen::llvm::{amdgpu::Amdgpu, KernelRef};
    let target = Amdgpu::new("gfx90a").ok_or("LLVM has no gfx90a target")?;
    let opts = BuildOptions {
        assembly: true,
        ..Default::default()
    };
    let objects = codeobj::build(module, &[KernelRef::plain(handle)], &target, &opts)
        .map_err(|e| format!("the AMDGPU lowering refused `{kernel}`: {e}"))?;
    let mut text = String::new();
    for o in &objects {
        text.push_str(&format!("; {} wave{}\n", o.arch, o.wave));
        text.push_str(o.assembly.as_deref().unwrap_or("; (no assembly)\n"));
    }
    Ok(text)
}

#[cfg(not(feature = "hip"))]
fn amdgpu(
    _: &VerifiedModule,
    _: crate::ir::Handle<crate::ir::Function>,
    _: &str,
) -> Result<String, String> {
    Err(
        "AMDGPU assembly needs a build with the `hip` feature (`cargo build --features hip`)"
            .into(),
    )
}

/// SPIR-V words as text: `spirv-dis` when it is installed, else rspirv's disassembler.
fn disassemble_spirv(words: &[u32]) -> String {
    use std::io::Write as _;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let tool = std::process::Command::new("spirv-dis")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = tool {
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&bytes);
        }
        if let Ok(out) = child.wait_with_output() {
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).into_owned();
            }
        }
    }
    use rspirv::binary::Disassemble;
    match rspirv::dr::load_words(words) {
        Ok(m) => m.disassemble(),
        Err(e) => format!("; the module does not parse as SPIR-V: {e}"),
    }
}
