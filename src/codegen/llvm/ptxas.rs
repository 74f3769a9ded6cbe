//! Finding and running NVIDIA's PTX assembler, `ptxas`, and reading its `-v` report into
//! the manifest's footprint (contract §4: "On NVPTX the footprint comes from ptxas -v").
//!
//! `ptxas` needs no GPU, so CI uses it to check that every kernel's PTX assembles and to
//! measure registers, spills, stack and shared memory. It is looked up, in order, at
//! `$XPU_PTXAS`, on `PATH`, in the `nvidia-cuda-nvcc` Python wheel
//! (`site-packages/nvidia/cu13/bin/ptxas`, or `cuda_nvcc/bin` for CUDA 12 wheels, found by
//! asking `python3` where the `nvidia` namespace package lives), and under
//! `/usr/local/cuda/bin`; `XPU_PTXAS=off` disables it. Absent is `None`: callers skip with a
//! message, never fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What `ptxas -v` reported for one entry function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasFunction {
    pub name: String,
    pub arch: Option<String>,
    pub registers: Option<u32>,
    pub stack_frame_bytes: Option<u32>,
    pub spill_store_bytes: Option<u32>,
    pub spill_load_bytes: Option<u32>,
    /// Static shared memory (`smem`); absent from the report means none was declared, which
    /// `ptxas` states by omission, so it is recorded as `Some(0)` once the function is seen.
    pub shared_bytes: Option<u32>,
    pub barriers: Option<u32>,
    pub constant_bytes: Option<u32>,
}

/// One run of `ptxas`.
#[derive(Clone, Debug)]
pub struct PtxasReport {
    pub functions: Vec<PtxasFunction>,
    /// The assembled object (a cubin).
    pub cubin: Vec<u8>,
    /// The full `-v` text.
    pub log: String,
}

impl PtxasReport {
    pub fn function(&self, name: &str) -> Option<&PtxasFunction> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// Why `ptxas` did not assemble.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PtxasError {
    #[error("ptxas is not installed (set XPU_PTXAS or `pip install nvidia-cuda-nvcc`)")]
    NotFound,
    #[error("cannot run ptxas: {0}")]
    Io(String),
    #[error("ptxas rejected the PTX:\n{0}")]
    Rejected(String),
}

/// The `ptxas` binary, searched once per process.
pub fn find() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(search).as_deref()
}

fn is_exe(p: &Path) -> bool {
    p.is_file()
}

fn search() -> Option<PathBuf> {
    // `XPU_PTXAS=off` turns the assembler off (a runtime that wants no child processes).
    let config = crate::config::get();
    match &config.ptxas {
        crate::config::PtxasSetting::Off => return None,
        crate::config::PtxasSetting::Path(p) if is_exe(p) => return Some(p.clone()),
        _ => {}
    }
    if let Some(path) = &config.path {
        for dir in std::env::split_paths(path) {
            let p = dir.join("ptxas");
            if is_exe(&p) {
                return Some(p);
            }
        }
    }
    // The nvidia-cuda-nvcc wheel: `nvidia` is a namespace package (no __file__), so ask
    // for its __path__ entries.
    for py in ["python3", "python"] {
        let out = Command::new(py)
            .args(["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"])
            .output();
        if let Ok(out) = out {
            if out.status.success() {
                for dir in String::from_utf8_lossy(&out.stdout).lines() {
                    for sub in ["cu13/bin/ptxas", "cu12/bin/ptxas", "cuda_nvcc/bin/ptxas"] {
                        let p = Path::new(dir.trim()).join(sub);
                        if is_exe(&p) {
                            return Some(p);
                        }
                    }
                }
                break;
            }
        }
    }
    let p = PathBuf::from("/usr/local/cuda/bin/ptxas");
    is_exe(&p).then_some(p)
}

/// `ptxas --version`'s release line (`Cuda compilation tools, release 13.0, V13.0.88`).
pub fn version() -> Option<String> {
    let exe = find()?;
    let out = Command::new(exe).arg("--version").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find(|l| l.contains("release"))
        .map(|l| l.trim().to_string())
}

/// Assembles `ptx` for `arch` (`sm_90`) with `-v` and parses the report.
pub fn assemble(ptx: &str, arch: &str) -> Result<PtxasReport, PtxasError> {
    let exe = find().ok_or(PtxasError::NotFound)?;
    let dir = scratch_dir().map_err(|e| PtxasError::Io(e.to_string()))?;
    let input = dir.path.join("k.ptx");
    let output = dir.path.join("k.cubin");
    std::fs::write(&input, ptx).map_err(|e| PtxasError::Io(e.to_string()))?;
    let out = Command::new(exe)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .output()
        .map_err(|e| PtxasError::Io(e.to_string()))?;
    let mut log = String::from_utf8_lossy(&out.stdout).into_owned();
    log.push_str(&String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(PtxasError::Rejected(log));
    }
    let cubin = std::fs::read(&output).map_err(|e| PtxasError::Io(e.to_string()))?;
    Ok(PtxasReport {
        functions: parse_verbose(&log),
        cubin,
        log,
    })
}

/// A private working directory removed on drop (ptxas reads and writes files).
struct Scratch {
    path: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn scratch_dir() -> std::io::Result<Scratch> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "xpu-ptxas-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&path)?;
    Ok(Scratch { path })
}

/// The number before `unit` in `text` (`"8 registers"` → 8).
fn number_before(text: &str, unit: &str) -> Option<u32> {
    let i = text.find(unit)?;
    text[..i].split_whitespace().last()?.parse().ok()
}

/// Parses `ptxas -v` output into one record per entry function.
///
/// ```text
/// ptxas info    : Compiling entry function 'saxpy' for 'sm_90'
/// ptxas info    : Function properties for saxpy
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 8 registers, used 0 barriers, 16 bytes smem, 380 bytes cmem[0]
/// ```
pub fn parse_verbose(log: &str) -> Vec<PtxasFunction> {
    let mut out: Vec<PtxasFunction> = Vec::new();
    let mut current: Option<usize> = None;
    for line in log.lines() {
        let l = line.trim();
        if let Some(rest) = l.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            let arch = rest
                .split("for '")
                .nth(1)
                .map(|a| a.trim_end_matches('\'').to_string());
            let idx = match out.iter().position(|f| f.name == name) {
                Some(i) => i,
                None => {
                    out.push(PtxasFunction {
                        name,
                        ..Default::default()
                    });
                    out.len() - 1
                }
            };
            out[idx].arch = arch;
            current = Some(idx);
        } else if let Some(name) = l.split("Function properties for ").nth(1) {
            current = out.iter().position(|f| f.name == name.trim());
        } else if l.contains("bytes stack frame") {
            if let Some(f) = current.and_then(|i| out.get_mut(i)) {
                f.stack_frame_bytes = number_before(l, "bytes stack frame");
                f.spill_store_bytes = number_before(l, "bytes spill stores");
                f.spill_load_bytes = number_before(l, "bytes spill loads");
            }
        } else if l.contains("Used ") && l.contains("registers") {
            if let Some(f) = current.and_then(|i| out.get_mut(i)) {
                f.registers = number_before(l, "registers");
                f.barriers = number_before(l, "barriers");
                f.shared_bytes = Some(number_before(l, "bytes smem").unwrap_or(0));
                f.constant_bytes = number_before(l, "bytes cmem[0]");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_verbose_report() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'\n\
ptxas info    : Function properties for saxpy\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, used 0 barriers, 380 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'tile' for 'sm_90'\n\
ptxas info    : Function properties for tile\n\
    24 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads\n\
ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 372 bytes cmem[0]\n";
        let f = parse_verbose(log);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].name, "saxpy");
        assert_eq!(f[0].arch.as_deref(), Some("sm_90"));
        assert_eq!(f[0].registers, Some(8));
        assert_eq!(f[0].spill_store_bytes, Some(0));
        assert_eq!(f[0].shared_bytes, Some(0));
        assert_eq!(f[1].registers, Some(40));
        assert_eq!(f[1].stack_frame_bytes, Some(24));
        assert_eq!(f[1].spill_store_bytes, Some(12));
        assert_eq!(f[1].spill_load_bytes, Some(8));
        assert_eq!(f[1].shared_bytes, Some(4096));
        assert_eq!(f[1].barriers, Some(1));
    }

    #[test]
    fn absent_facts_stay_absent() {
        let f = parse_verbose("ptxas info    : Compiling entry function 'k' for 'sm_90'\n");
        assert_eq!(f[0].registers, None);
        assert_eq!(f[0].spill_store_bytes, None);
    }
}
