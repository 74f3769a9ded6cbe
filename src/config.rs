//! Every environment variable the library reads, read once per process into a typed [`Config`]
//! (like Cranelift's `settings::Flags`): nothing else in the crate calls `std::env::var`.
//!
//! A value that is malformed is kept as a [`BadValue`] naming the variable and the values it
//! takes, and the first operation that needs the setting fails with it (code `XPU-C001`);
//! it is never silently replaced by the default. Unset and empty mean the default.
//!
//! | variable | values | default | read by |
//! | --- | --- | --- | --- |
//! | `CAJETA_XPU_BACKEND` | backend names, comma-separated | selection order | device selection |
//! | `CAJETA_XPU_POISON` | `0`, `1` | `0` | fresh device memory |
//! | `CAJETA_XPU_COARSEN` | `off`, `auto`, `force` | `auto` | GPU launches |
//! | `CAJETA_XPU_CPU_STREAMING` | `off`, `auto`, `force` | `auto` | CPU launches |
//! | `CAJETA_XPU_CPU_WORKERS` | a positive integer | every core | CPU launches |
//! | `CAJETA_XPU_VK_F32_IN_F64` | `0`, `1` | by driver | Vulkan kernels |
//! | `CAJETA_XPU_KERNEL_GATE` | `error`, `warn` | `error` | `xpu build` (its gates) |
//! | `CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S` | seconds, `0` or more | `600` | `xpu build` (CPU compiles) |
//! | `XPU_CPU_WAVE` | a power of two, 1 to 64 | the host's SIMD width | CPU device |
//! | `XPU_JIT_VERIFY`, `XPU_JIT_DUMP`, `XPU_JIT_ASM`, `XPU_JIT_TIME` | `0`, `1` | `0` | CPU compiles |
//! | `XPU_JIT_BIN` | a file | none | CPU compiles |
//! | `XPU_VK_PUSH_DESCRIPTORS` | `0`, `1` | `1` | Vulkan device |
//! | `XPU_VK_PIPELINE_STATS`, `XPU_VK_TRACE` | `0`, `1` | `0` | Vulkan |
//! | `XPU_CACHE_DIR` | a folder, or `off` | `$XDG_CACHE_HOME/xpu`, else `$HOME/.cache/xpu` | device-code cache |
//! | `XPU_CACHE_MAX_MB` | a whole number of MiB | `1024` | device-code cache (least recently used evicted past it) |
//! | `XPU_HIP_LIB` | library names, comma-separated | `libamdhip64.so` | HIP |
//! | `XPU_HIP_ARCH` | a `gfx` name | the device's | HIP |
//! | `XPU_LLD` | a file | `ld.lld-19`, `ld.lld` on `PATH` | AMDGPU code objects |
//! | `XPU_PTXAS` | a file, or `off` | the `nvidia-cuda-nvcc` wheel, `PATH` | PTX footprints |
//! | `CC` | a C compiler | `gcc` | `xpu bench cpu` (its C + OpenMP peers) |
//! | `XPU_SHOW_PTX` | `0`, `1` | `0` | LLVM unit tests |
//! | `CAJETA_XPU_RECORD` | a folder | none | launch records (`record`) |
//! | `CAJETA_XPU_RECORD_BUDGET` | bytes, with `K`/`M`/`G` (binary) | `1G` | launch records |
//! | `CAJETA_XPU_CONFORMANCE` | a folder | none | record, then replay at exit |
//! | `CAJETA_XPU_DEFER` | `0`, `all` | unset: `KernelStream::set_deferred` decides | CUDA streams (`docs/deferred-streams.md`) |
//! | `CAJETA_PROFILER` | `0`, `1` | `0` | the profiler (`profile`) |
//! | `CAJETA_GPU_MATRIX_IMPL` | `software`, `native` | by type and shape | CUDA and HIP kernels (the cooperative-matrix tier, forced) |
//! | `CAJETA_GPU_MATRIX_DIST` | `0`/`off`, `1`/`on` | `1` | CUDA and HIP kernels (software matrix tiles distributed, or replicated) |
//! | `CAJETA_PROFILER_OUT` | a file | `xpu-trace.json` | the profiler's trace |
//! | `XPU_CUPTI` | a file | searched | the profiler's CUPTI library (`backend::cupti`) |

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The code of a malformed environment value.
pub const BAD_VALUE: &str = "XPU-C001";

/// A setting as read: its value, or the malformed value it was given.
pub type Setting<T> = Result<T, BadValue>;

/// A malformed environment value: the variable, what it was set to, and what it takes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("error[{BAD_VALUE}]: {var}={value:?} is not {expected}")]
pub struct BadValue {
    /// The variable's name.
    pub var: &'static str,
    /// The value it was set to.
    pub value: String,
    /// The values it takes, in words.
    pub expected: &'static str,
}

/// A setting that a heuristic decides unless the user overrides it: never, as measured, or
/// always where it applies (`CAJETA_XPU_COARSEN`, `CAJETA_XPU_CPU_STREAMING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Never.
    Off,
    /// Where the heuristic (or measurement) says so; the default.
    Auto,
    /// Always where it applies.
    Force,
}

/// The diagnostics of the CPU JIT (`XPU_JIT_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JitDiagnostics {
    /// Run Cranelift's verifier on every function (always on in debug builds).
    pub verify: bool,
    /// Print the Cranelift IR of every compiled kernel.
    pub dump: bool,
    /// Print the machine code.
    pub asm: bool,
    /// Print compile times.
    pub time: bool,
    /// Write the final machine code to this file.
    pub bin: Option<PathBuf>,
}

/// How `ptxas` is found (`XPU_PTXAS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtxasSetting {
    /// `XPU_PTXAS=off`: never run it.
    Off,
    /// A path given.
    Path(PathBuf),
    /// Look in the `nvidia-cuda-nvcc` wheel, then on `PATH`.
    Search,
}

/// Every environment setting of the library, read once ([`get`]).
#[derive(Clone, Debug)]
pub struct Config {
    /// `CAJETA_XPU_BACKEND`: the backends to select from, in order (`None`: unset or empty).
    pub backend: Setting<Option<String>>,
    /// `CAJETA_XPU_POISON`: fill fresh device memory with 0xFF.
    pub poison: Setting<bool>,
    /// `CAJETA_XPU_CHECKED`: programs are loaded in checked mode (bounds-checked GPU code).
    pub checked: Setting<bool>,
    /// `CAJETA_XPU_UB_TRAPS`: unconfirmed `align` statements are tested (default: on in debug
    /// builds of the library).
    pub ub_traps: Setting<bool>,
    /// `CAJETA_XPU_COARSEN`.
    pub coarsen: Setting<Mode>,
    /// `CAJETA_XPU_CPU_STREAMING`.
    pub cpu_streaming: Setting<Mode>,
    /// `CAJETA_XPU_CPU_WORKERS` (`None`: every core).
    pub cpu_workers: Setting<Option<usize>>,
    /// `CAJETA_XPU_KERNEL_GATE=warn`: the build gates (contract §3.6) warn instead of failing.
    pub kernel_gate_warn: Setting<bool>,
    /// `CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S`: how long `xpu build` waits for one CPU compile
    /// before it abandons it as hung (`[xpu-kernel-hung]`), 600 s by default.
    pub cpu_vectorize_deadline: Setting<std::time::Duration>,
    /// `XPU_CPU_WAVE` (`None`: the host's SIMD width).
    pub cpu_wave: Setting<Option<u32>>,
    /// `XPU_JIT_*`.
    pub jit: Setting<JitDiagnostics>,
    /// `CAJETA_XPU_VK_F32_IN_F64` (`None`: decided by the driver).
    pub vk_f32_in_f64: Setting<Option<bool>>,
    /// `XPU_VK_PUSH_DESCRIPTORS`.
    pub vk_push_descriptors: Setting<bool>,
    /// `XPU_VK_PIPELINE_STATS`.
    pub vk_pipeline_stats: Setting<bool>,
    /// `XPU_VK_TRACE`.
    pub vk_trace: Setting<bool>,
    /// The device-code cache folder (`XPU_CACHE_DIR`, else the XDG cache), `None` when no
    /// home is known.
    pub cache_dir: Option<PathBuf>,
    /// `XPU_CACHE_MAX_MB` in bytes: the disk cache's size cap.
    pub cache_max_bytes: Setting<u64>,
    /// `CC`: the C compiler of the benchmarks' C peers (`None`: `gcc`).
    pub cc: Option<String>,
    /// `XPU_HIP_LIB`.
    pub hip_lib: Setting<Option<String>>,
    /// `XPU_HIP_ARCH`.
    pub hip_arch: Setting<Option<String>>,
    /// `XPU_LLD`.
    pub lld: Option<PathBuf>,
    /// `XPU_PTXAS`.
    pub ptxas: PtxasSetting,
    /// `XPU_SHOW_PTX`.
    pub show_ptx: Setting<bool>,
    /// `PATH`, where tools are looked up.
    pub path: Option<OsString>,
    /// `CAJETA_XPU_RECORD`: the folder launch records are written to.
    pub record: Option<PathBuf>,
    /// `CAJETA_XPU_RECORD_BUDGET`: the bytes the records' compressed buffers may take.
    pub record_budget: Setting<u64>,
    /// `CAJETA_XPU_CONFORMANCE`: record into this folder and replay it when the run ends.
    pub conformance: Option<PathBuf>,
    /// `CAJETA_PROFILER`: capture spans for a trace.
    pub profiler: Setting<bool>,
    /// `CAJETA_XPU_DEFER`: whether streams defer their launches (contract §2.4).
    pub defer: Setting<DeferSetting>,
    /// `CAJETA_GPU_MATRIX_DIST`: the software tier's cooperative-matrix tiles are distributed
    /// over the wave's lanes (default) or, `off`, replicated in every lane (the control).
    pub matrix_dist: Setting<bool>,
    /// `CAJETA_GPU_MATRIX_IMPL`: the cooperative-matrix tier forced for a sweep (contract
    /// §3.1, §3.3); `None` lets the type and shape decide.
    pub matrix_impl: Setting<Option<ForcedTier>>,
    /// `CAJETA_PROFILER_OUT`: where the trace goes.
    pub profiler_out: PathBuf,
    /// `XPU_CUPTI`: the CUPTI library the profiler loads on CUDA (searched when unset).
    pub cupti: Option<PathBuf>,
}

/// The default of `CAJETA_XPU_RECORD_BUDGET`: 1 GiB.
pub const DEFAULT_RECORD_BUDGET: u64 = 1 << 30;

/// The process's settings, read from the environment on first use.
pub fn get() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config::from_lookup(|var| std::env::var_os(var)))
}

impl Config {
    /// The settings `lookup` gives (the environment in [`get`]; a table in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Config {
        let text = |var: &'static str| -> Setting<Option<String>> {
            match lookup(var) {
                None => Ok(None),
                Some(v) => match v.into_string() {
                    Ok(s) if s.trim().is_empty() => Ok(None),
                    Ok(s) => Ok(Some(s.trim().to_string())),
                    Err(v) => Err(BadValue {
                        var,
                        value: v.to_string_lossy().into_owned(),
                        expected: "UTF-8 text",
                    }),
                },
            }
        };
        let path = |var: &'static str| lookup(var).filter(|v| !v.is_empty()).map(PathBuf::from);
        let flag = |var: &'static str, default: bool| -> Setting<bool> {
            parse_flag(var, text(var)?.as_deref(), default)
        };
        let mode = |var: &'static str| -> Setting<Mode> { parse_mode(var, text(var)?.as_deref()) };
        let jit = (|| {
            Ok(JitDiagnostics {
                verify: flag("XPU_JIT_VERIFY", false)?,
                dump: flag("XPU_JIT_DUMP", false)?,
                asm: flag("XPU_JIT_ASM", false)?,
                time: flag("XPU_JIT_TIME", false)?,
                bin: path("XPU_JIT_BIN"),
            })
        })();
        let cache_off = lookup("XPU_CACHE_DIR").is_some_and(|d| d == "off");
        let cache_dir = lookup("XPU_CACHE_DIR")
            .filter(|d| !d.is_empty() && !cache_off)
            .map(PathBuf::from)
            .or_else(|| path("XDG_CACHE_HOME").map(|d| d.join("xpu")))
            .or_else(|| path("HOME").map(|d| d.join(".cache").join("xpu")))
            .filter(|_| !cache_off);
        let ptxas = match lookup("XPU_PTXAS").filter(|v| !v.is_empty()) {
            Some(v) if v == "off" => PtxasSetting::Off,
            Some(v) => PtxasSetting::Path(PathBuf::from(v)),
            None => PtxasSetting::Search,
        };
        Config {
            backend: text("CAJETA_XPU_BACKEND"),
            poison: flag("CAJETA_XPU_POISON", false),
            checked: flag("CAJETA_XPU_CHECKED", false),
            ub_traps: flag("CAJETA_XPU_UB_TRAPS", cfg!(debug_assertions)),
            coarsen: mode("CAJETA_XPU_COARSEN"),
            cpu_streaming: mode("CAJETA_XPU_CPU_STREAMING"),
            cpu_workers: text("CAJETA_XPU_CPU_WORKERS").and_then(|v| {
                v.map(|s| parse_workers("CAJETA_XPU_CPU_WORKERS", &s))
                    .transpose()
            }),
            kernel_gate_warn: text("CAJETA_XPU_KERNEL_GATE").and_then(|v| match v.as_deref() {
                None | Some("error") => Ok(false),
                Some("warn") => Ok(true),
                Some(other) => Err(BadValue {
                    var: "CAJETA_XPU_KERNEL_GATE",
                    value: other.to_string(),
                    expected: "one of error, warn",
                }),
            }),
            cpu_vectorize_deadline: text("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S").and_then(
                |v| match v {
                    None => Ok(std::time::Duration::from_secs(600)),
                    Some(s) => s
                        .parse::<f64>()
                        .ok()
                        .and_then(|x| std::time::Duration::try_from_secs_f64(x).ok())
                        .ok_or(BadValue {
                            var: "CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S",
                            value: s,
                            expected: "a number of seconds, 0 or more",
                        }),
                },
            ),
            cpu_wave: text("XPU_CPU_WAVE")
                .and_then(|v| v.map(|s| parse_wave("XPU_CPU_WAVE", &s)).transpose()),
            jit,
            vk_f32_in_f64: text("CAJETA_XPU_VK_F32_IN_F64").and_then(|v| {
                v.map(|s| parse_flag("CAJETA_XPU_VK_F32_IN_F64", Some(&s), false))
                    .transpose()
            }),
            vk_push_descriptors: flag("XPU_VK_PUSH_DESCRIPTORS", true),
            vk_pipeline_stats: flag("XPU_VK_PIPELINE_STATS", false),
            vk_trace: flag("XPU_VK_TRACE", false),
            cache_dir,
            cc: lookup("CC")
                .and_then(|c| c.into_string().ok())
                .filter(|c| !c.is_empty()),
            cache_max_bytes: text("XPU_CACHE_MAX_MB").and_then(|v| match v {
                None => Ok(1024 << 20),
                Some(s) => s
                    .parse::<u64>()
                    .ok()
                    .and_then(|mb| mb.checked_mul(1 << 20))
                    .ok_or(BadValue {
                        var: "XPU_CACHE_MAX_MB",
                        value: s,
                        expected: "a whole number of MiB",
                    }),
            }),
            hip_lib: text("XPU_HIP_LIB"),
            hip_arch: text("XPU_HIP_ARCH"),
            lld: path("XPU_LLD"),
            ptxas,
            show_ptx: flag("XPU_SHOW_PTX", false),
            path: lookup("PATH"),
            record: path("CAJETA_XPU_RECORD"),
            record_budget: text("CAJETA_XPU_RECORD_BUDGET").and_then(|v| {
                v.map_or(Ok(DEFAULT_RECORD_BUDGET), |s| {
                    parse_bytes("CAJETA_XPU_RECORD_BUDGET", &s)
                })
            }),
            conformance: path("CAJETA_XPU_CONFORMANCE"),
            profiler: flag("CAJETA_PROFILER", false),
            defer: text("CAJETA_XPU_DEFER").and_then(|v| parse_defer(v.as_deref())),
            matrix_dist: flag("CAJETA_GPU_MATRIX_DIST", true),
            matrix_impl: text("CAJETA_GPU_MATRIX_IMPL").and_then(|v| {
                v.map(|s| parse_tier("CAJETA_GPU_MATRIX_IMPL", &s))
                    .transpose()
            }),
            profiler_out: path("CAJETA_PROFILER_OUT").unwrap_or_else(|| "xpu-trace.json".into()),
            cupti: path("XPU_CUPTI"),
        }
    }
}

/// `CAJETA_XPU_DEFER` (contract §2.4, deferred streams).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferSetting {
    /// Unset: each stream defers once `KernelStream::set_deferred(true)` asks.
    ByStream,
    /// `0`: no stream ever defers (`set_deferred(true)` is ignored).
    Never,
    /// `all`: every stream defers from its first launch.
    All,
}

/// `0`, `all`, or unset.
pub fn parse_defer(value: Option<&str>) -> Setting<DeferSetting> {
    match value.map(str::trim) {
        None | Some("") => Ok(DeferSetting::ByStream),
        Some("0") => Ok(DeferSetting::Never),
        Some("all") => Ok(DeferSetting::All),
        Some(other) => Err(BadValue {
            var: "CAJETA_XPU_DEFER",
            value: other.to_string(),
            expected: "one of 0, all",
        }),
    }
}

fn parse_flag(var: &'static str, value: Option<&str>, default: bool) -> Setting<bool> {
    match value {
        None => Ok(default),
        Some("1" | "on" | "true") => Ok(true),
        Some("0" | "off" | "false") => Ok(false),
        Some(other) => Err(BadValue {
            var,
            value: other.to_string(),
            expected: "one of 0, 1",
        }),
    }
}

/// A feature's tier forced by `CAJETA_GPU_<FEATURE>_IMPL` (contract §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForcedTier {
    /// The portable software lowering, even where a native instruction exists.
    Software,
    /// The native instruction; a kernel that has none is refused by name.
    Native,
}

fn parse_tier(var: &'static str, value: &str) -> Setting<ForcedTier> {
    match value {
        "software" => Ok(ForcedTier::Software),
        "native" => Ok(ForcedTier::Native),
        other => Err(BadValue {
            var,
            value: other.to_string(),
            expected: "one of software, native",
        }),
    }
}

/// `off`, `auto` (or unset), `force`; `0` and `1` for off and force.
pub(crate) fn parse_mode(var: &'static str, value: Option<&str>) -> Setting<Mode> {
    match value.map(str::trim) {
        None | Some("" | "auto") => Ok(Mode::Auto),
        Some("off" | "0") => Ok(Mode::Off),
        Some("force" | "1") => Ok(Mode::Force),
        Some(other) => Err(BadValue {
            var,
            value: other.to_string(),
            expected: "one of off, auto, force",
        }),
    }
}

fn parse_workers(var: &'static str, value: &str) -> Setting<usize> {
    value
        .parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or(BadValue {
            var,
            value: value.to_string(),
            expected: "a positive integer",
        })
}

/// A byte count: digits, optionally followed by `K`, `M` or `G` (binary multiples; `KiB`,
/// `MiB`, `GiB` and `B` also read).
pub(crate) fn parse_bytes(var: &'static str, value: &str) -> Setting<u64> {
    let bad = || BadValue {
        var,
        value: value.to_string(),
        expected: "a byte count such as 1048576, 512M or 1G",
    };
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(digits);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KIB" => 10,
        "M" | "MIB" => 20,
        "G" | "GIB" => 30,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

fn parse_wave(var: &'static str, value: &str) -> Setting<u32> {
    value
        .parse::<u32>()
        .ok()
        .filter(|n| n.is_power_of_two() && *n <= 64)
        .ok_or(BadValue {
            var,
            value: value.to_string(),
            expected: "a power of two from 1 to 64",
        })
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Off => "off",
            Mode::Auto => "auto",
            Mode::Force => "force",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Config {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|var| map.get(var).cloned())
    }

    #[test]
    fn defaults_when_unset_or_empty() {
        for c in [
            config(&[]),
            config(&[("CAJETA_XPU_CPU_WORKERS", ""), ("CAJETA_XPU_POISON", " ")]),
        ] {
            assert_eq!(c.poison, Ok(false));
            assert_eq!(c.coarsen, Ok(Mode::Auto));
            assert_eq!(c.cpu_workers, Ok(None));
            assert_eq!(c.cpu_wave, Ok(None));
            assert_eq!(c.vk_push_descriptors, Ok(true));
            assert_eq!(c.ptxas, PtxasSetting::Search);
        }
    }

    #[test]
    fn values_parse() {
        let c = config(&[
            ("CAJETA_XPU_POISON", "1"),
            ("CAJETA_XPU_COARSEN", " force "),
            ("CAJETA_XPU_CPU_STREAMING", "off"),
            ("CAJETA_XPU_CPU_WORKERS", "3"),
            ("XPU_CPU_WAVE", "8"),
            ("CAJETA_XPU_KERNEL_GATE", "warn"),
            ("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S", "2.5"),
            ("XPU_JIT_DUMP", "1"),
            ("XPU_PTXAS", "off"),
            ("XPU_CACHE_DIR", "/c"),
        ]);
        assert_eq!(c.poison, Ok(true));
        assert_eq!(c.coarsen, Ok(Mode::Force));
        assert_eq!(c.cpu_streaming, Ok(Mode::Off));
        assert_eq!(c.cpu_workers, Ok(Some(3)));
        assert_eq!(c.cpu_wave, Ok(Some(8)));
        assert_eq!(c.kernel_gate_warn, Ok(true));
        assert_eq!(
            c.cpu_vectorize_deadline,
            Ok(std::time::Duration::from_millis(2500))
        );
        assert!(c.jit.unwrap().dump);
        assert_eq!(c.ptxas, PtxasSetting::Off);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/c")));
        let c = config(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/x/xpu")));
        let c = config(&[("HOME", "/h")]);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/h/.cache/xpu")));
    }

    #[test]
    fn malformed_values_name_the_variable_and_what_it_takes() {
        let c = config(&[
            ("CAJETA_XPU_POISON", "yes"),
            ("CAJETA_XPU_COARSEN", "sometimes"),
            ("CAJETA_XPU_CPU_WORKERS", "0"),
            ("XPU_CPU_WAVE", "3"),
            ("CAJETA_XPU_KERNEL_GATE", "loud"),
            ("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S", "-1"),
            ("XPU_JIT_ASM", "please"),
        ]);
        let msg = |e: BadValue| e.to_string();
        assert_eq!(
            msg(c.poison.unwrap_err()),
            "error[XPU-C001]: CAJETA_XPU_POISON=\"yes\" is not one of 0, 1"
        );
        assert_eq!(
            msg(c.coarsen.unwrap_err()),
            "error[XPU-C001]: CAJETA_XPU_COARSEN=\"sometimes\" is not one of off, auto, force"
        );
        assert_eq!(
            msg(c.cpu_workers.unwrap_err()),
            "error[XPU-C001]: CAJETA_XPU_CPU_WORKERS=\"0\" is not a positive integer"
        );
        assert!(msg(c.cpu_wave.unwrap_err()).contains("XPU_CPU_WAVE=\"3\" is not a power of two"));
        assert!(c.kernel_gate_warn.is_err());
        assert!(c.cpu_vectorize_deadline.is_err());
        assert!(msg(c.jit.unwrap_err()).contains("XPU_JIT_ASM"));
    }

    #[test]
    fn record_and_profiler_settings_parse() {
        let c = config(&[]);
        assert_eq!(c.record, None);
        assert_eq!(c.record_budget, Ok(DEFAULT_RECORD_BUDGET));
        assert_eq!(c.profiler, Ok(false));
        assert_eq!(c.profiler_out, PathBuf::from("xpu-trace.json"));
        let c = config(&[
            ("CAJETA_XPU_RECORD", "/r"),
            ("CAJETA_XPU_RECORD_BUDGET", "512M"),
            ("CAJETA_PROFILER", "1"),
            ("CAJETA_PROFILER_OUT", "/t.json"),
        ]);
        assert_eq!(c.record, Some(PathBuf::from("/r")));
        assert_eq!(c.record_budget, Ok(512 << 20));
        assert_eq!(c.profiler, Ok(true));
        assert_eq!(c.profiler_out, PathBuf::from("/t.json"));
        assert_eq!(parse_bytes("V", "4096"), Ok(4096));
        assert_eq!(parse_bytes("V", "2KiB"), Ok(2048));
        assert!(parse_bytes("V", "lots").is_err());
        assert!(parse_bytes("V", "99999999999999G").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_is_a_bad_value_not_ignored() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(vec![b'c', 0xff, b'u']);
        let c = Config::from_lookup(|var| (var == "CAJETA_XPU_BACKEND").then(|| bad.clone()));
        let e = c.backend.unwrap_err();
        assert_eq!(e.var, "CAJETA_XPU_BACKEND");
        assert_eq!(e.expected, "UTF-8 text");
    }
}
