//! A kernel's SPIR-V as stored outside the process (a bundle entry, the persistent cache):
//! the words, and beside them the launch layout the emitter produced with them
//! ([`Emitted`] less its words) as JSON, checked on the way back in against the kernel's
//! signature so that a layout that does not describe the kernel is refused, never trusted.
//!
//! The *target* ([`target`]) names the devices a module is valid for: a hash of the
//! capabilities the emitter was given and the subgroup sizes the device can require. Two
//! devices with equal capabilities get identical SPIR-V from the same IR, so a module stored
//! for one is the module the other would emit.

use crate::codegen::spirv::{Caps, Emitted, ParamSlot, WaveMode};
use crate::ir::{ElemType, Function, Scalar, Type};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layout {
    slots: Vec<Slot>,
    push_bytes: u32,
    dynamic_shared_elem: Option<u32>,
    capabilities: Vec<String>,
    entry: String,
    subgroup_size: u32,
    wave_width: u32,
    wave_mode: Mode,
    uses_wave_verbs: bool,
    loop_status: Option<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Slot {
    Buffer {
        binding: u32,
        len_offset: u32,
    },
    Value {
        offset: u32,
        scalar: String,
        lanes: u8,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Native,
    Virtual { slots: u32 },
    Narrow,
}

/// The target key of a device with capabilities `caps` that can require subgroup sizes
/// `size_control` (`vk-` and 16 hex digits).
pub fn target(caps: &Caps, size_control: Option<(u32, u32)>) -> String {
    let h = crate::backend::cache::hash_hex(&[
        format!("{caps:?}").as_bytes(),
        format!("{size_control:?}").as_bytes(),
    ]);
    format!("vk-{}", &h[..16])
}

/// The SPIR-V words as little-endian bytes.
pub fn code_bytes(e: &Emitted) -> Vec<u8> {
    e.words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The launch layout of `e` as JSON.
pub fn layout(e: &Emitted) -> String {
    let l = Layout {
        slots: e
            .slots
            .iter()
            .map(|s| match *s {
                ParamSlot::Buffer {
                    binding,
                    len_offset,
                } => Slot::Buffer {
                    binding,
                    len_offset,
                },
                ParamSlot::Value { offset, carrier } => Slot::Value {
                    offset,
                    scalar: carrier.scalar.name().to_string(),
                    lanes: carrier.lanes,
                },
            })
            .collect(),
        push_bytes: e.push_bytes,
        dynamic_shared_elem: e.dynamic_shared_elem,
        capabilities: e.capabilities.clone(),
        entry: e.entry.clone(),
        subgroup_size: e.subgroup_size,
        wave_width: e.wave_width,
        wave_mode: match e.wave_mode {
            WaveMode::Native => Mode::Native,
            WaveMode::Virtual { slots } => Mode::Virtual { slots },
            WaveMode::Narrow => Mode::Narrow,
        },
        uses_wave_verbs: e.uses_wave_verbs,
        loop_status: e.loop_status,
    };
    serde_json::to_string(&l).expect("a layout serialises")
}

/// The stored module back, checked against `function` (the kernel it was made for): SPIR-V
/// words with the SPIR-V magic, one slot per parameter of its kind, every push-constant
/// field inside the push block, distinct bindings. `Err` says what does not fit.
pub fn restore(code: &[u8], layout: &str, function: &Function) -> Result<Emitted, String> {
    if code.len() % 4 != 0 || code.len() < 20 {
        return Err(format!("{} bytes are not a SPIR-V module", code.len()));
    }
    let words: Vec<u32> = code
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words[0] != 0x0723_0203 {
        return Err("the code does not start with the SPIR-V magic".into());
    }
    let l: Layout =
        serde_json::from_str(layout).map_err(|e| format!("the layout is malformed: {e}"))?;
    if l.slots.len() != function.params.len() {
        return Err(format!(
            "the layout has {} parameters, the kernel {}",
            l.slots.len(),
            function.params.len()
        ));
    }
    let fits = |offset: u32, bytes: u32| {
        offset
            .checked_add(bytes)
            .is_some_and(|end| end <= l.push_bytes)
    };
    let mut bindings = Vec::new();
    let mut slots = Vec::with_capacity(l.slots.len());
    for (slot, param) in l.slots.iter().zip(&function.params) {
        let is_buffer = matches!(param.ty, Type::Buffer { .. });
        slots.push(match slot {
            Slot::Buffer {
                binding,
                len_offset,
            } if is_buffer && fits(*len_offset, 4) => {
                bindings.push(*binding);
                ParamSlot::Buffer {
                    binding: *binding,
                    len_offset: *len_offset,
                }
            }
            Slot::Value {
                offset,
                scalar,
                lanes,
            } if !is_buffer => {
                let scalar = Scalar::from_name(scalar)
                    .ok_or_else(|| format!("`{scalar}` is not a scalar type"))?;
                let carrier = ElemType {
                    scalar,
                    lanes: *lanes,
                };
                if !(1..=16).contains(lanes) || !fits(*offset, carrier.size()) {
                    return Err(format!(
                        "parameter {} does not fit the push constants",
                        param.name
                    ));
                }
                ParamSlot::Value {
                    offset: *offset,
                    carrier,
                }
            }
            _ => {
                return Err(format!(
                    "the layout of parameter {} does not match its type",
                    param.name
                ))
            }
        });
    }
    bindings.extend(l.loop_status);
    let count = bindings.len();
    bindings.sort_unstable();
    bindings.dedup();
    if bindings.len() != count || bindings.last().is_some_and(|&b| b as usize >= count) {
        return Err("the layout's bindings are not 0..n, once each".into());
    }
    if l.entry.is_empty() || l.entry.contains('\0') {
        return Err("the layout's entry point name is not one".into());
    }
    Ok(Emitted {
        words,
        slots,
        // Code with checks is never stored (the backend lowers it in every process).
        report: None,
        sites: Vec::new(),
        // Nor is code with `print` or `assert`.
        debug: None,
        debug_sites: Vec::new(),
        push_bytes: l.push_bytes,
        dynamic_shared_elem: l.dynamic_shared_elem.filter(|&e| e > 0),
        capabilities: l.capabilities,
        entry: l.entry,
        subgroup_size: l.subgroup_size,
        wave_width: l.wave_width,
        wave_mode: match l.wave_mode {
            Mode::Native => WaveMode::Native,
            Mode::Virtual { slots } => WaveMode::Virtual { slots },
            Mode::Narrow => WaveMode::Narrow,
        },
        uses_wave_verbs: l.uses_wave_verbs,
        loop_status: l.loop_status,
    })
}

/// The emitter's identity in cache keys: a hash of its sources, so that SPIR-V an older
/// emitter made is never served after a change to it.
pub fn compiler_id() -> String {
    static SOURCES: [&str; 12] = [
        include_str!("../../codegen/spirv/mod.rs"),
        include_str!("../../codegen/spirv/block.rs"),
        include_str!("../../codegen/spirv/decl.rs"),
        include_str!("../../codegen/spirv/expr.rs"),
        include_str!("../../codegen/spirv/loop_limit.rs"),
        include_str!("../../codegen/spirv/math.rs"),
        include_str!("../../codegen/spirv/matrix.rs"),
        include_str!("../../codegen/spirv/memory.rs"),
        include_str!("../../codegen/spirv/wave.rs"),
        include_str!("../../codegen/spirv/wave_narrow.rs"),
        include_str!("../../codegen/spirv/wave_virtual.rs"),
        include_str!("../../codegen/mathconst.rs"),
    ];
    let parts: Vec<&[u8]> = SOURCES.iter().map(|s| s.as_bytes()).collect();
    let h = crate::backend::cache::hash_hex(&parts);
    format!("spirv-{}-{}", env!("CARGO_PKG_VERSION"), &h[..12])
}

/// A module as one cache payload: the layout's length (`u32` little-endian), the layout,
/// the SPIR-V.
pub fn pack(e: &Emitted) -> Vec<u8> {
    let layout = layout(e);
    let mut out = Vec::with_capacity(4 + layout.len() + e.words.len() * 4);
    out.extend_from_slice(&(layout.len() as u32).to_le_bytes());
    out.extend_from_slice(layout.as_bytes());
    out.extend_from_slice(&code_bytes(e));
    out
}

/// [`pack`]'s payload back (then [`restore`]d), `None` where it is not one.
pub fn unpack(payload: &[u8]) -> Option<(&[u8], &str)> {
    let n = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let layout = std::str::from_utf8(payload.get(4..4usize.checked_add(n)?)?).ok()?;
    Some((&payload[4 + n..], layout))
}
