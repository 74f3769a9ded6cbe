//! The reconciliation (contract §6): families in the text format, the feasibility filter
//! against hand-made facts, the order of the measured choice, the autotune store (build ids,
//! the memo without a writable directory, `claim_once` across threads and processes, corrupt
//! and foreign files), the registry and capability questions, and `xpu tune` end to end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use xpu::hal::facts::{DeviceFacts, Feature, Support};
use xpu::tune::choice::{set_shape_override, ShapeChoice, ShapeProbe, Source};
use xpu::tune::filter::{Problem, Rule, ShapeCandidate, ShapeFamily, ShapeFilter};
use xpu::tune::{AutotuneStore, KernelFacts};
use xpu::{Backend, Device, LaunchError};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "xpu-tune-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cand(kernel: &str, threads: u32) -> ShapeCandidate {
    ShapeCandidate {
        kernel: kernel.into(),
        tile_m: 64,
        tile_n: 64,
        threads,
        k_block: 16,
        max_splits: 1,
        dynamic_shared_bytes: 0,
    }
}

fn family(name: &str, members: &[(&str, u32)]) -> ShapeFamily {
    ShapeFamily {
        name: name.into(),
        candidates: members.iter().map(|(k, t)| cand(k, *t)).collect(),
    }
}

fn problem() -> Problem {
    Problem::parse("1024x512x256").unwrap()
}

fn facts(regs: Option<u32>, shared: Option<u64>) -> KernelFacts {
    KernelFacts {
        registers_per_thread: regs,
        shared_bytes: shared,
        ..KernelFacts::default()
    }
}

mod filter {
    use super::*;

    /// One device limit at a time prunes the candidate that breaks it, with its need and the
    /// limit; the same candidate survives on a device that does not report that limit.
    #[test]
    fn every_rule_prunes_with_need_and_limit() {
        let unknown = DeviceFacts::unknown(Backend::Cuda);
        let cases: Vec<(Rule, DeviceFacts, u32, KernelFacts, u64, u64)> = vec![
            (
                Rule::DeviceCode,
                unknown.clone(),
                256,
                KernelFacts {
                    has_code: Some(false),
                    ..facts(None, None)
                },
                1,
                0,
            ),
            (
                Rule::ThreadsPerBlock,
                DeviceFacts {
                    max_threads_per_block: Some(512),
                    ..unknown.clone()
                },
                1024,
                facts(None, None),
                1024,
                512,
            ),
            (
                Rule::KernelBlockLimit,
                unknown.clone(),
                512,
                KernelFacts {
                    max_block_threads: Some(256),
                    ..facts(None, None)
                },
                512,
                256,
            ),
            (
                Rule::RegistersPerBlock,
                DeviceFacts {
                    registers_per_block: Some(65536),
                    ..unknown.clone()
                },
                1024,
                facts(Some(128), None),
                131072,
                65536,
            ),
            (
                Rule::RegistersPerMultiprocessor,
                DeviceFacts {
                    registers_per_multiprocessor: Some(32768),
                    ..unknown.clone()
                },
                512,
                facts(Some(96), None),
                49152,
                32768,
            ),
            (
                Rule::SharedPerBlock,
                DeviceFacts {
                    shared_bytes_per_block: Some(48 << 10),
                    ..unknown.clone()
                },
                256,
                facts(None, Some(64 << 10)),
                64 << 10,
                48 << 10,
            ),
            (
                Rule::SharedPerBlockOptIn,
                DeviceFacts {
                    shared_bytes_per_block: Some(48 << 10),
                    shared_bytes_per_block_optin: Some(99 << 10),
                    ..unknown.clone()
                },
                256,
                facts(None, Some(128 << 10)),
                128 << 10,
                99 << 10,
            ),
            (
                Rule::SharedPerMultiprocessor,
                DeviceFacts {
                    shared_bytes_per_multiprocessor: Some(100 << 10),
                    ..unknown.clone()
                },
                256,
                facts(None, Some(120 << 10)),
                120 << 10,
                100 << 10,
            ),
            (
                Rule::ThreadsPerMultiprocessor,
                DeviceFacts {
                    max_threads_per_multiprocessor: Some(768),
                    ..unknown.clone()
                },
                1024,
                facts(None, None),
                1024,
                768,
            ),
            (
                Rule::BlocksPerMultiprocessor,
                DeviceFacts {
                    max_blocks_per_multiprocessor: Some(0),
                    ..unknown.clone()
                },
                256,
                facts(None, None),
                1,
                0,
            ),
        ];
        for (rule, device, threads, kf, need, limit) in cases {
            let fam = family("rules", &[("k", threads)]);
            let f = ShapeFilter::new(&fam, problem(), &device, std::slice::from_ref(&kf));
            let pruned = f.verdicts[0]
                .pruned_by()
                .unwrap_or_else(|| panic!("{rule:?} pruned nothing: {:?}", f.verdicts[0].checks));
            assert_eq!(pruned.rule, rule);
            assert_eq!(pruned.need, Some(need), "{rule:?}");
            assert_eq!(pruned.limit, Some(limit), "{rule:?}");
            assert!(f.survivors().is_empty());
            // The device that reports none of it keeps the candidate.
            let kept = ShapeFilter::new(
                &fam,
                problem(),
                &unknown,
                &[KernelFacts {
                    max_block_threads: None,
                    has_code: None,
                    ..kf
                }],
            );
            assert!(
                kept.verdicts[0].survives(),
                "{rule:?}: {:?}",
                kept.verdicts[0].checks
            );
        }
    }

    #[test]
    fn absent_facts_prune_nothing_and_opt_in_is_named() {
        let device = DeviceFacts {
            max_threads_per_block: Some(1024),
            shared_bytes_per_block: Some(48 << 10),
            shared_bytes_per_block_optin: Some(227 << 10),
            registers_per_multiprocessor: Some(65536),
            ..DeviceFacts::unknown(Backend::Cuda)
        };
        let fam = family("absent", &[("small", 256), ("big", 256)]);
        // No register count (the CPU reports none): the register rules pass, shown absent.
        let f = ShapeFilter::new(
            &fam,
            problem(),
            &device,
            &[facts(None, Some(4096)), facts(None, Some(100 << 10))],
        );
        assert_eq!(f.survivors().len(), 2);
        let regs = f.verdicts[0]
            .checks
            .iter()
            .find(|c| c.rule == Rule::RegistersPerMultiprocessor)
            .unwrap();
        assert_eq!((regs.need, regs.passed), (None, true));
        assert!(regs.to_string().contains("needs absent"), "{regs}");
        assert!(!f.verdicts[0].needs_opt_in);
        assert!(f.verdicts[1].needs_opt_in);
        assert!(f.verdicts[1].to_string().contains("opt-in"));
    }

    #[test]
    fn an_empty_survivor_set_is_a_refusal_naming_everything() {
        let device = DeviceFacts {
            max_threads_per_block: Some(256),
            shared_bytes_per_block: Some(32 << 10),
            ..DeviceFacts::unknown(Backend::Vulkan)
        };
        let fam = family("tiny_device", &[("wide", 1024), ("fat", 128)]);
        let f = ShapeFilter::new(
            &fam,
            problem(),
            &device,
            &[facts(None, Some(1024)), facts(None, Some(64 << 10))],
        );
        let e = f.refusal();
        assert_eq!(e.code(), "XPU-L025");
        assert!(e.refused_by_device());
        assert!(matches!(e, LaunchError::NoShapeFits { .. }));
        let text = e.to_string();
        for needle in [
            "family tiny_device",
            "1024x512x256",
            "wide pruned by threads per block: needs 1024, limit 256",
            "fat pruned by shared per block: needs 65536, limit 32768",
        ] {
            assert!(text.contains(needle), "{needle} not in {text}");
        }
        // The choice refuses the same way.
        let store = AutotuneStore::with_key(None, "test-refusal");
        let mut probe = FakeProbe::new(&[]);
        let r = ShapeChoice::choose(&store, &f, &mut probe);
        assert_eq!(r.source, Source::Refused);
        assert_eq!(r.refusal.unwrap().code(), "XPU-L025");
    }
}

/// A probe answering fixed times per kernel (with a small per-round jitter) and a fixed
/// foreign load.
struct FakeProbe {
    times: Vec<(String, u64)>,
    calls: usize,
    load: Option<u32>,
}

impl FakeProbe {
    fn new(times: &[(&str, u64)]) -> FakeProbe {
        FakeProbe {
            times: times.iter().map(|(k, t)| (k.to_string(), *t)).collect(),
            calls: 0,
            load: Some(0),
        }
    }
}

impl ShapeProbe for FakeProbe {
    fn time(&mut self, c: &ShapeCandidate) -> Result<u64, LaunchError> {
        self.calls += 1;
        let base = self
            .times
            .iter()
            .find(|(k, _)| *k == c.kernel)
            .map(|(_, t)| *t)
            .ok_or_else(|| LaunchError::Device {
                kernel: c.kernel.clone(),
                message: "this probe has no time for it".into(),
            })?;
        // One outlier round per kernel must not move a median.
        Ok(if self.calls % 7 == 0 { base * 10 } else { base })
    }
    fn foreign_load_percent(&mut self) -> Option<u32> {
        self.load
    }
}

mod choice {
    use super::*;

    fn three(name: &str) -> ShapeFilter {
        let fam = family(name, &[("a", 128), ("b", 256), ("c", 512)]);
        let device = DeviceFacts {
            uuid: Some("u1".into()),
            driver_version: Some("1.0".into()),
            ..DeviceFacts::unknown(Backend::Cpu)
        };
        ShapeFilter::new(&fam, problem(), &device, &[])
    }

    #[test]
    fn timing_then_cache_then_override() {
        let dir = temp_dir("choice");
        let f = three("order");
        let store = AutotuneStore::with_key(Some(&dir), "cpu-test");
        let mut probe = FakeProbe::new(&[("a", 3000), ("b", 1000), ("c", 1100)]);
        let r = ShapeChoice::choose(&store, &f, &mut probe);
        assert_eq!((r.kernel.as_deref(), r.source), (Some("b"), Source::Timing));
        assert_eq!(probe.calls, 15, "five interleaved rounds of three");
        assert_eq!(r.margin_per_mille, Some(100));
        assert!(!r.tie && r.stored);
        // A second store on the same folder (another process) hits, with the margin.
        let again = AutotuneStore::with_key(Some(&dir), "cpu-test");
        let mut none = FakeProbe::new(&[]);
        let r = ShapeChoice::choose(&again, &f, &mut none);
        assert_eq!((r.kernel.as_deref(), r.source), (Some("b"), Source::Cache));
        assert_eq!(r.margin_per_mille, Some(100));
        assert_eq!(none.calls, 0);
        // An override wins over the store.
        set_shape_override("order", Some("c"));
        let r = ShapeChoice::choose(&again, &f, &mut none);
        assert_eq!(
            (r.kernel.as_deref(), r.source),
            (Some("c"), Source::Override)
        );
        set_shape_override("order", Some("nope"));
        let r = ShapeChoice::choose(&again, &f, &mut none);
        assert!(r.refusal.unwrap().to_string().contains("XPU-S006"));
        set_shape_override("order", None);
        // Another build (a changed survivor's code) discards the stored choice and times.
        let mut changed = f.clone();
        changed.verdicts[0].facts.code_hash = Some(7);
        let mut probe = FakeProbe::new(&[("a", 1000), ("b", 1010), ("c", 5000)]);
        let r = ShapeChoice::choose(&again, &changed, &mut probe);
        assert_eq!(r.source, Source::Timing);
        assert!(r.tie, "a 10 per mille margin is a tie");
        assert!(r.notes.iter().any(|n| n.code == "XPU-T02"), "{:?}", r.notes);
    }

    #[test]
    fn one_survivor_is_taken_and_a_loaded_device_is_not_remembered() {
        let fam = family("single", &[("only", 128), ("huge", 4096)]);
        let device = DeviceFacts {
            max_threads_per_block: Some(1024),
            ..DeviceFacts::unknown(Backend::Cpu)
        };
        let f = ShapeFilter::new(&fam, problem(), &device, &[]);
        let store = AutotuneStore::with_key(None, "cpu-single");
        let mut probe = FakeProbe::new(&[]);
        let r = ShapeChoice::choose(&store, &f, &mut probe);
        assert_eq!(
            (r.kernel.as_deref(), r.source),
            (Some("only"), Source::Single)
        );
        assert_eq!(probe.calls, 0);

        let f = three("loaded");
        let dir = temp_dir("loaded");
        let store = AutotuneStore::with_key(Some(&dir), "cpu-loaded");
        let mut probe = FakeProbe::new(&[("a", 10), ("b", 20), ("c", 30)]);
        probe.load = Some(40);
        let r = ShapeChoice::choose(&store, &f, &mut probe);
        assert_eq!(r.kernel.as_deref(), Some("a"));
        assert!(!r.stored);
        assert!(r.notes.iter().any(|n| n.message.contains("40%")));
        assert_eq!(store.recall(&ShapeChoice::store_name(&f)), None);
    }

    #[test]
    fn failed_probes_are_left_out() {
        let f = three("failing");
        let store = AutotuneStore::with_key(None, "cpu-failing");
        let mut probe = FakeProbe::new(&[("b", 50), ("c", 40)]);
        let r = ShapeChoice::choose(&store, &f, &mut probe);
        assert_eq!(r.kernel.as_deref(), Some("c"));
        assert!(r.notes.iter().any(|n| n.code == "XPU-S007"));
        let mut nothing = FakeProbe::new(&[]);
        let r = ShapeChoice::choose(
            &AutotuneStore::with_key(None, "cpu-f2"),
            &three("none_timed"),
            &mut nothing,
        );
        assert!(r.refusal.unwrap().to_string().contains("XPU-S008"));
    }
}

mod store {
    use super::*;

    #[test]
    fn build_ids_discard_and_report() {
        let dir = temp_dir("build");
        let s = AutotuneStore::with_key(Some(&dir), "cpu-build");
        s.remember_for("x", "build1", "v1");
        assert_eq!(s.recall_for("x", "build1").as_deref(), Some("v1"));
        let other = AutotuneStore::with_key(Some(&dir), "cpu-build");
        assert_eq!(other.recall_for("x", "build2"), None);
        let reports = other.take_reports();
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].code, "XPU-T02");
        // Discarded from the file too.
        let third = AutotuneStore::with_key(Some(&dir), "cpu-build");
        assert_eq!(third.recall("x"), None);
        // Underperforming values are reported and dropped.
        third.remember("y", "fast");
        third.report_underperforming("y", "3 TB/s", "1 TB/s");
        assert_eq!(third.recall("y"), None);
        assert_eq!(third.take_reports()[0].code, "XPU-T01");
        third.remember("z", "1");
        third.invalidate("z");
        assert_eq!(
            AutotuneStore::with_key(Some(&dir), "cpu-build").recall("z"),
            None
        );
    }

    #[test]
    fn the_memo_serves_without_a_writable_directory() {
        let dir = temp_dir("ro");
        // A file where the folder would go: nothing can be created under it.
        let blocker = dir.join("blocker");
        std::fs::write(&blocker, b"not a folder").unwrap();
        let s = AutotuneStore::with_key(Some(&blocker), "cpu-ro");
        assert!(!s.persists());
        s.remember("k", "v");
        assert_eq!(s.recall("k").as_deref(), Some("v"));
        assert!(s.take_reports().iter().any(|r| r.code == "XPU-T03"));
        // A device that reports nothing shares nothing, even with a writable folder.
        let unknown = AutotuneStore::open(Some(&dir), &DeviceFacts::unknown(Backend::Vulkan));
        assert_eq!(unknown.device_key(), "vulkan-unknown");
        assert!(!unknown.persists());
        unknown.remember("k", "v");
        assert_eq!(unknown.recall("k").as_deref(), Some("v"));
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "only the blocker"
        );
    }

    #[test]
    fn corrupt_and_foreign_files_are_reported_and_ignored() {
        let dir = temp_dir("corrupt");
        let s = AutotuneStore::with_key(Some(&dir), "cpu-c");
        s.remember("name", "good");
        let folder = s.folder().unwrap().to_path_buf();
        let file = folder.join("name");
        for (bytes, code) in [
            (b"garbage".to_vec(), "XPU-T04"),
            (vec![0xff, 0xfe, 0x00], "XPU-T04"),
            (
                b"xpu-autotune 1\nkey cpu-c\nname name\n".to_vec(),
                "XPU-T04",
            ),
            (
                b"xpu-autotune 1\nkey cuda-other\nname name\nbuild -\nvalue evil\n".to_vec(),
                "XPU-T05",
            ),
            (
                b"xpu-autotune 1\nkey cpu-c\nname other\nbuild -\nvalue evil\n".to_vec(),
                "XPU-T05",
            ),
        ] {
            std::fs::write(&file, &bytes).unwrap();
            let fresh = AutotuneStore::with_key(Some(&dir), "cpu-c");
            assert_eq!(fresh.recall("name"), None, "{code}");
            let reports = fresh.take_reports();
            assert_eq!(reports.len(), 1);
            assert_eq!(reports[0].code, code, "{}", reports[0].message);
            // The next remember replaces it.
            fresh.remember("name", "again");
            assert_eq!(
                AutotuneStore::with_key(Some(&dir), "cpu-c")
                    .recall("name")
                    .as_deref(),
                Some("again")
            );
        }
        // A newline cannot forge a field.
        s.remember("name", "a\nvalue b");
        assert_eq!(
            AutotuneStore::with_key(Some(&dir), "cpu-c")
                .recall("name")
                .as_deref(),
            Some("a value b")
        );
        assert_eq!(xpu::tune::store::reset(&dir).unwrap(), 1);
        assert_eq!(
            AutotuneStore::with_key(Some(&dir), "cpu-c").recall("name"),
            None
        );
    }

    #[test]
    fn claim_once_across_eight_threads() {
        for dir in [Some(temp_dir("threads")), None] {
            let store = Arc::new(AutotuneStore::with_key(dir.as_deref(), "cpu-threads"));
            let probes = Arc::new(AtomicUsize::new(0));
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let store = store.clone();
                    let probes = probes.clone();
                    std::thread::spawn(move || {
                        store.claim_once("probe", Some("b1"), || {
                            probes.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            "answer".to_string()
                        })
                    })
                })
                .collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), "answer");
            }
            assert_eq!(probes.load(Ordering::SeqCst), 1, "{dir:?}");
        }
    }

    /// The child half of `claim_once_across_two_processes`: run only from there.
    #[test]
    #[ignore]
    fn claim_once_child() {
        let Some(dir) = std::env::var_os("XPU_TUNE_CHILD_DIR") else {
            return;
        };
        let dir = PathBuf::from(dir);
        let store = AutotuneStore::with_key(Some(&dir), "cpu-procs");
        let v = store.claim_once("probe", None, || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("probes"))
                .unwrap();
            writeln!(f, "{}", std::process::id()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(400));
            "from-a-process".to_string()
        });
        assert_eq!(v, "from-a-process");
    }

    #[test]
    fn claim_once_across_two_processes() {
        let dir = temp_dir("procs");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "store::claim_once_child",
                        "--ignored",
                        "--test-threads=1",
                    ])
                    .env("XPU_TUNE_CHILD_DIR", &dir)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let probes = std::fs::read_to_string(dir.join("probes")).unwrap();
        assert_eq!(probes.lines().count(), 1, "{probes}");
    }
}

mod text {
    use super::*;

    const FAMILY: &str = "
@occupancy(max_threads = T)
kernel K<T, S>(c: buf<f32, rw>) requires T >= 32 instantiate <64, 1>, <128, 2> {
    shared s: [f32; T * S];
    let i: u32 = local_id.x;
    s[i] = 1.0;
    c[i] = s[i];
}
family fam = K(tile_m = T, tile_n = T * 2, threads = T, k_block = S * 8, max_splits = 1 + S);
";

    #[test]
    fn families_parse_print_and_evaluate() {
        let m = xpu::ir::parse(FAMILY).unwrap();
        let printed = xpu::ir::print(&m);
        assert!(printed.contains(
            "family fam = K(tile_m = T, tile_n = T * 2, threads = T, k_block = S * 8, max_splits = 1 + S);"
        ), "{printed}");
        assert_eq!(xpu::ir::print(&xpu::ir::parse(&printed).unwrap()), printed);
        let v = m.verify().unwrap();
        let fam = ShapeFamily::from_module(&v, "fam").unwrap();
        assert_eq!(fam.candidates.len(), 2);
        let c = &fam.candidates[1];
        assert_eq!(c.kernel, "K<128,2>");
        assert_eq!(
            (c.tile_m, c.tile_n, c.threads, c.k_block, c.max_splits),
            (128, 256, 128, 16, 3)
        );
        assert!(ShapeFamily::from_module(&v, "other").is_none());
    }

    #[test]
    fn malformed_families_are_coded() {
        let cases = [
            ("family f = Nope(tile_m = 1, tile_n = 1, threads = 1, k_block = 1, max_splits = 1);", "XPU-S001"),
            ("family f = K(tile_m = T, tile_n = T, threads = T, k_block = 1);", "XPU-S003"),
            ("family f = K(tile_m = T - 64, tile_n = T, threads = T, k_block = 1, max_splits = 1);", "XPU-S004"),
            ("family f = K(tile_m = T / (S - 1), tile_n = T, threads = T, k_block = 1, max_splits = 1);", "XPU-S004"),
            ("family f = K(tile_m = T, tile_m = T, tile_n = T, threads = T, k_block = 1, max_splits = 1);", "XPU-S002"),
            ("family fam = K(tile_m = T, tile_n = T, threads = T, k_block = 1, max_splits = 1);", "XPU-S005"),
        ];
        for (line, code) in cases {
            let src = format!("{FAMILY}\n{line}\n");
            let e = xpu::ir::parse(&src).unwrap().verify().unwrap_err();
            assert!(
                e.0.iter().any(|d| d.code == code),
                "{line}: {}",
                e.render("t")
            );
        }
        let e = xpu::ir::parse(&format!("{FAMILY}\nfamily g = K(size = 1);\n")).unwrap_err();
        assert!(
            e.0.iter().any(|d| d.code == "XPU-S002"),
            "{}",
            e.render("t")
        );
        let e = xpu::ir::parse(&format!("{FAMILY}\nfamily g = K(tile_m = Q, tile_n = 1, threads = 1, k_block = 1, max_splits = 1);\n")).unwrap_err();
        assert!(!e.0.is_empty());
    }

    #[test]
    fn the_example_family_checks() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let src = std::fs::read_to_string(root.join("examples/gemm_family.xk")).unwrap();
        let v = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let fam = ShapeFamily::from_module(&v, "gemm").unwrap();
        assert!(fam.candidates.len() >= 5);
        let cpu = Device::open(Backend::Cpu).unwrap();
        let program = cpu.load(v).unwrap();
        let f = ShapeFilter::for_program(&fam, Problem::parse("256x256x128").unwrap(), &program);
        let shared: Vec<u64> = f
            .verdicts
            .iter()
            .map(|v| v.facts.shared_bytes.unwrap())
            .collect();
        assert!(shared.iter().any(|&s| s > 48 << 10), "{shared:?}");
        let threads: std::collections::HashSet<u32> =
            fam.candidates.iter().map(|c| c.threads).collect();
        assert!(threads.len() >= 3, "{threads:?}");
        // The host holds every member.
        assert_eq!(f.survivors().len(), fam.candidates.len());
        // A device with CUDA's defaults and no opt-in prunes the 64 KB member only.
        let small = DeviceFacts {
            shared_bytes_per_block: Some(48 << 10),
            max_threads_per_block: Some(1024),
            ..DeviceFacts::unknown(Backend::Vulkan)
        };
        let kf: Vec<KernelFacts> = f.verdicts.iter().map(|v| v.facts.clone()).collect();
        let g = ShapeFilter::new(&fam, f.problem, &small, &kf);
        assert_eq!(g.survivors().len(), fam.candidates.len() - 1);
    }
}

mod device {
    use super::*;

    #[test]
    fn registry_and_capabilities() {
        let cpu = Device::open(Backend::Cpu).unwrap();
        assert_eq!(cpu.supports(Feature::F64), Support::Native);
        assert_eq!(cpu.supports(Feature::CooperativeMatrix), Support::Emulated);
        assert_eq!(cpu.supports(Feature::SharedOptIn), Support::No);
        assert!(!cpu.kernel_available("registry_probe"));
        let m = xpu::ir::parse("kernel registry_probe(x: buf<u32, rw>) { x[global_id.x] = 1; }")
            .unwrap()
            .verify()
            .unwrap();
        let program = cpu.load(m).unwrap();
        assert!(cpu.kernel_available("registry_probe"));
        assert!(!cpu.kernel_available("absent_kernel"));
        drop(program);
        assert!(
            !cpu.kernel_available("registry_probe"),
            "a dropped program leaves the registry"
        );
        let f = cpu.facts();
        assert!(f.multiprocessors.is_some_and(|n| n > 0));
        assert!(f.to_string().contains("features"));
    }
}

mod routes {
    use super::*;
    use xpu::tune::routes::RouteTable;

    #[test]
    fn bind_answers_with_the_gate_that_refused() {
        let table = RouteTable::parse(
            "row f32 prefill route_big when m>=64\n\
             row f32 prefill route_missing\n\
             row f32 prefill route_optin needs shared_opt_in\n\
             row f32 prefill route_small\n",
        )
        .unwrap();
        let cpu = Device::open(Backend::Cpu).unwrap();
        let m = xpu::ir::parse(
            "kernel route_big(x: buf<u32, rw>) { x[0] = 1; }\n\
             kernel route_optin(x: buf<u32, rw>) { x[0] = 2; }\n\
             kernel route_small(x: buf<u32, rw>) { x[0] = 3; }",
        )
        .unwrap()
        .verify()
        .unwrap();
        let _program = cpu.load(m).unwrap();
        let big = Problem::parse("128x8x8").unwrap();
        assert_eq!(
            table.bind("f32", "prefill", big, &cpu).unwrap().kernel,
            "route_big"
        );
        let small = Problem::parse("8x8x8").unwrap();
        assert_eq!(
            table.bind("f32", "prefill", small, &cpu).unwrap().kernel,
            "route_small"
        );
        let table = RouteTable {
            rows: table.rows[..3].to_vec(),
            ..table
        };
        let e = table.bind("f32", "prefill", small, &cpu).unwrap_err();
        let gates: Vec<&str> = e.refused.iter().map(|(_, g)| g.gate.as_str()).collect();
        assert_eq!(gates, ["m>=64", "registry", "supports shared_opt_in"]);
        assert!(e.to_string().contains("XPU-S013"), "{e}");
        let e = table.bind("f16", "prefill", small, &cpu).unwrap_err();
        assert!(e.refused.is_empty() && e.to_string().contains("no row serves format f16"));
    }

    #[test]
    fn the_example_table_audits() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let t =
            RouteTable::parse(&std::fs::read_to_string(root.join("gemm.routes")).unwrap()).unwrap();
        let src = std::fs::read_to_string(root.join("gemm_family.xk")).unwrap();
        let v = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let found: Vec<String> = t.audit(Some(&v)).iter().map(|f| f.to_string()).collect();
        assert!(found
            .iter()
            .any(|f| f.contains("format bf16 lacks a row for regime prefill")));
        assert!(!found.iter().any(|f| f.contains("XPU-S016")), "{found:?}");
    }
}

mod cli {
    use super::*;

    fn xpu(args: &[&str]) -> (bool, String) {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// `xpu tune` on the CPU: verdicts, a choice, and a second process that hits the store;
    /// a corrupt store file is reported and the family tuned again.
    #[test]
    fn tune_twice_hits_the_store_and_survives_corruption() {
        let dir = temp_dir("cli");
        let d = dir.to_str().unwrap();
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gemm_family.xk");
        let args = [
            "tune",
            file,
            "--family",
            "gemm",
            "--problem",
            "128x128x64",
            "--store",
            d,
            "--backend",
            "cpu",
            "--foreign-load-limit",
            "101",
        ];
        let (ok, first) = xpu(&args);
        assert!(ok, "{first}");
        assert!(first.contains("from timing"), "{first}");
        assert!(first.contains("Gemm<128,128,64,8,8> kept"), "{first}");
        let (ok, second) = xpu(&args);
        assert!(ok, "{second}");
        assert!(second.contains("from cache"), "{second}");
        // Corrupt every file of the store: the next run reports them and times again.
        for device in std::fs::read_dir(&dir).unwrap() {
            for f in std::fs::read_dir(device.unwrap().path()).unwrap() {
                std::fs::write(f.unwrap().path(), b"\x00corrupt").unwrap();
            }
        }
        let (ok, third) = xpu(&args);
        assert!(ok, "{third}");
        assert!(
            third.contains("XPU-T04") && third.contains("from timing"),
            "{third}"
        );
        let (ok, json) = xpu(&["devices", "--json"]);
        assert!(ok && json.contains("\"device_key\""), "{json}");
        let (ok, reset) = xpu(&["tune", "--reset", d]);
        assert!(ok && reset.contains("removed"), "{reset}");
    }
}
