//! The ABI facts that device code alone does not carry (entry symbol, static shared bytes,
//! the dynamic shared element, each parameter's base alignment, the checks' report and sites),
//! as comment lines at the top of cached or bundled code: PTX carries them in front of its
//! text (CUDA), a bundled AMDGPU code object beside it as the entry's launch metadata (HIP).

use crate::codegen::checks::CheckSite;
use crate::codegen::llvm::{KernelAbi, ParamAbi};

/// The ABI facts the PTX alone does not carry, as a comment line at the top of cached PTX:
/// `// xpu-abi <symbol> <static shared> <dynamic elem or -> <base align per param,...>`,
/// then, for code with checks, `// xpu-report` and one `// xpu-site <line> <what>` per site,
/// and for code with `print` or `assert`, `// xpu-debug` and one `// xpu-debug-site <site>` per
/// site ([`crate::ir::debug::DebugSite::to_line`]).
pub fn abi_header(abi: &KernelAbi) -> String {
    let mut checks = String::new();
    if abi.report {
        checks.push_str("// xpu-report\n");
    }
    for site in &abi.sites {
        checks.push_str(&format!(
            "// xpu-site {} {}\n",
            site.line,
            site.what.replace('\n', " ")
        ));
    }
    if abi.debug {
        checks.push_str("// xpu-debug\n");
    }
    for site in &abi.debug_sites {
        checks.push_str(&format!("// xpu-debug-site {}\n", site.to_line()));
    }
    format!("{}{checks}", abi_line(abi))
}

fn abi_line(abi: &KernelAbi) -> String {
    let aligns: Vec<String> = abi
        .params
        .iter()
        .map(|p| match p {
            ParamAbi::Buffer { base_align, .. } => base_align.to_string(),
            ParamAbi::Value { .. } => "-".into(),
        })
        .collect();
    format!(
        "// xpu-abi {} {} {} {}\n",
        abi.symbol,
        abi.static_shared_bytes,
        abi.dynamic_shared_elem
            .map_or("-".into(), |e| e.to_string()),
        if aligns.is_empty() {
            "none".into()
        } else {
            aligns.join(",")
        }
    )
}

/// The header back ([`abi_header`]); the parameter types come from the IR at launch. `None`
/// when the text does not start with an `xpu-abi` line.
pub fn abi_from_header(ptx: &str) -> Option<KernelAbi> {
    let line = ptx.lines().next()?.strip_prefix("// xpu-abi ")?;
    let mut it = line.split_whitespace();
    let symbol = it.next()?.to_string();
    let static_shared_bytes = it.next()?.parse().ok()?;
    let dynamic_shared_elem = match it.next()? {
        "-" => None,
        v => Some(v.parse().ok()?),
    };
    let params = match it.next()? {
        "none" => Vec::new(),
        list => list
            .split(',')
            .map(|a| match a {
                "-" => ParamAbi::Value {
                    ty: crate::ir::Type::U32,
                    size: 0,
                    align: 0,
                },
                n => ParamAbi::Buffer {
                    elem: crate::ir::ElemType::scalar(crate::ir::Scalar::U8),
                    writable: true,
                    base_align: n.parse().unwrap_or(16),
                },
            })
            .collect(),
    };
    let mut report = false;
    let mut sites = Vec::new();
    let mut debug = false;
    let mut debug_sites = Vec::new();
    for l in ptx.lines().skip(1) {
        if l == "// xpu-report" {
            report = true;
        } else if l == "// xpu-debug" {
            debug = true;
        } else if let Some(rest) = l.strip_prefix("// xpu-debug-site ") {
            debug_sites.push(crate::ir::debug::DebugSite::from_line(rest)?);
        } else if let Some(rest) = l.strip_prefix("// xpu-site ") {
            let (line, what) = rest.split_once(' ').unwrap_or((rest, ""));
            sites.push(CheckSite {
                line: line.parse().ok()?,
                what: what.to_string(),
            });
        } else {
            break;
        }
    }
    Some(KernelAbi {
        name: symbol.clone(),
        symbol,
        params,
        static_shared_bytes,
        dynamic_shared_elem,
        wave_width: 32,
        bounds: Default::default(),
        declared_wave: None,
        report,
        sites,
        debug,
        debug_sites,
    })
}
