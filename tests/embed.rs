//! What an embedder touches (issue 22): the REPL driven through a pipe, `--json` on `check`,
//! `run`, `build`, `bench` and `devices` parsed back against docs/json.md (and docs/gates.md), shell completions, the interpreter's
//! options from `Device`/`Launch`, run-time error sites, and the builder's spans and
//! sequential `if`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn xpu() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xpu"));
    c.env("CAJETA_XPU_POISON", "1");
    c
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xpu-embed-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `xpu repl` with `script` on stdin: (exit code, stdout, stderr).
fn repl(backend: &str, script: &str) -> (i32, String, String) {
    let mut child = xpu()
        .args(["repl", "--backend", backend])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn repl_through_a_pipe_defines_launches_redefines_survives_an_error_and_saves() {
    let dir = scratch("repl");
    let saved = dir.join("session.xk");
    let script = format!(
        r#"
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32) {{
    let i: u32 = global_id.x;
    y[i] = a * x[i] + y[i];
}}
buf x: f32 = iota(8)
buf y: f32 = fill(8, 1.0)
saxpy<<<1, 8>>>(y, x, 2.0)
print y[0..8] as 2 x 4
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32) {{
    y[global_id.x] = a * x[global_id.x] + nowhere;
}}
saxpy<<<1, 8>>>(y, q, 1.0)
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32) {{
    let i: u32 = global_id.x;
    y[i] = a * x[i] - y[i];
}}
saxpy<<<1, 8>>>(y, x, 1.0)
print y
run saxpy {{
    grid = [1];
    block = [8];
    arg y = fill(8, 1.0);
    arg x = iota(8);
    arg a = 3.0;
    expect y = iota(8, -1, 3);
}}
:save {}
"#,
        saved.display()
    );
    let (code, out, err) = repl("interp", &script);
    // Define, launch, print with a shape.
    assert!(out.contains("defined saxpy"), "{out}");
    assert!(out.contains("ran saxpy on interp; wrote y"), "{out}");
    assert!(
        out.contains("y[0..8]: f32, shape [2, 4] (of 8)")
            && out.contains("[ 1.0,  3.0,  5.0,  7.0]")
            && out.contains("[ 9.0, 11.0, 13.0, 15.0]"),
        "{out}"
    );
    // The broken redefinition is refused with the source line and a caret, and the session
    // goes on with the old one; so does a launch naming no buffer.
    assert!(
        err.contains("2:43: error[XPU-P004]: unknown name `nowhere`"),
        "{err}"
    );
    assert!(err.contains("+ nowhere;\n"), "{err}");
    let caret_line = err
        .lines()
        .skip_while(|l| !l.contains("+ nowhere;"))
        .nth(1)
        .unwrap();
    assert_eq!(caret_line.find('^'), Some(4 + 42), "{err}");
    assert!(
        err.contains("error[XPU-Q004]: no buffer named `q`"),
        "{err}"
    );
    // The redefinition that verifies replaces it: y = 1 * x - y.
    assert!(out.contains("redefined saxpy"), "{out}");
    assert!(
        out.contains("[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]"),
        "{out}"
    );
    assert!(out.contains("PASS  saxpy  interp"), "{out}");
    assert!(out.contains(&format!("to {}", saved.display())), "{out}");
    // An entry failed, so a script's status says so.
    assert_eq!(code, 1, "{out}\n{err}");

    // The saved session is a kernel file `xpu run` passes, on the interpreter and the CPU.
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(text.contains("y[i] = a * x[i] - y[i];"), "{text}");
    assert!(
        !text.contains("a * x[i] + y[i]"),
        "the old definition is gone: {text}"
    );
    for backend in ["interp", "cpu"] {
        let run = xpu()
            .args(["run", "--backend", backend])
            .arg(&saved)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{backend}:\n{stdout}\n{text}");
        assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    }
}

#[test]
fn repl_shows_code_and_points_at_undefined_behaviour() {
    let script = r#"
kernel oob(y: buf<f32, rw>) {
    y[global_id.x + 8] = 1.0;
}
buf y: f32 = fill(8, 0.0)
oob<<<1, 8>>>(y)
:ir oob
:asm oob clif
:asm oob spirv
:asm oob
:asm oob amdgpu
:asm oob ptx
:manifest oob
:nope
:quit
print y
"#;
    let (code, out, err) = repl("interp", script);
    assert_eq!(code, 1);
    assert!(err.contains("error[XPU-REF02]"), "{err}");
    assert!(err.contains("--> `oob`, line 2"), "{err}");
    assert!(
        err.contains("    y[global_id.x + 8] = 1.0;\n        ^"),
        "{err}"
    );
    assert!(out.contains("kernel oob(y: buf<f32, rw>) {"), "{out}");
    assert!(
        out.contains("function u0:0(i64) -> i32"),
        "Cranelift IR: {out}"
    );
    assert!(out.contains("OpEntryPoint GLCompute"), "SPIR-V: {out}");
    // On the interpreter `:asm K` shows what it runs: the kernel's IR (a second copy of it).
    assert_eq!(
        out.matches("kernel oob(y: buf<f32, rw>) {").count(),
        2,
        "`:ir` and `:asm` on interp: {out}"
    );
    // AMDGPU assembly and PTX, each when the build has its LLVM target, else a coded refusal.
    if cfg!(feature = "hip") {
        assert!(
            out.contains("; gfx90a wave64") && out.contains(".amdgcn_target"),
            "AMDGPU: {out}"
        );
    } else {
        assert!(
            err.contains("error[XPU-Q010]: AMDGPU assembly needs a build with the `hip` feature"),
            "{err}"
        );
    }
    if cfg!(feature = "cuda") {
        assert!(out.contains(".visible .entry oob"), "PTX: {out}");
    } else {
        assert!(
            err.contains("error[XPU-Q010]: PTX needs a build with the `cuda` feature"),
            "{err}"
        );
    }
    assert!(out.contains("manifest oob on interp:"), "{out}");
    assert!(err.contains("error[XPU-Q001]"), "{err}");
    // `:quit` ends the script: what follows is not evaluated.
    assert!(!out.contains("y: f32, shape [8]"), "{out}");
}

#[test]
fn repl_input_ending_inside_a_definition_is_an_error() {
    let (code, _, err) = repl("interp", "kernel k(a: buf<u32, rw>) {\n a[0] = 1;\n");
    assert_eq!(code, 1);
    assert!(err.contains("error[XPU-Q012]"), "{err}");
}

#[test]
fn check_json_lists_each_diagnostic_with_its_fields() {
    let dir = scratch("check");
    let bad = dir.join("bad.xk");
    std::fs::write(&bad, "kernel k(a: buf<u32, rw>) {\n    a[0] = nope;\n}\n").unwrap();
    let good = dir.join("good.xk");
    std::fs::write(&good, "kernel k(a: buf<u32, rw>) {\n    a[0] = 1;\n}\n").unwrap();
    let out = xpu()
        .args(["check", "--json"])
        .arg(&bad)
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["files"], 2);
    let diags = doc["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{doc}");
    let d = &diags[0];
    assert_eq!(d["file"], bad.display().to_string());
    assert_eq!(d["line"], 2);
    assert_eq!(d["column"], 12);
    assert_eq!(d["code"], "XPU-P004");
    assert!(d["message"].as_str().unwrap().contains("nope"));
    assert_eq!(doc["io_errors"].as_array().unwrap().len(), 0);

    let missing = xpu()
        .args(["check", "--json"])
        .arg(dir.join("absent.xk"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(doc["io_errors"].as_array().unwrap().len(), 1);
}

#[test]
fn run_json_prints_one_object_per_case_and_the_totals() {
    let dir = scratch("run");
    let file = dir.join("cases.xk");
    std::fs::write(
        &file,
        "kernel k(a: buf<u32, rw>) {\n    a[global_id.x] = 3;\n}\n\
         run k {\n    grid = [1];\n    block = [2];\n    arg a = fill(2, 0);\n    expect a = fill(2, 3);\n}\n\
         run k {\n    grid = [1];\n    block = [2];\n    arg a = fill(2, 0);\n    expect a = fill(2, 4);\n}\n",
    )
    .unwrap();
    let out = xpu()
        .args(["run", "--json", "--backend", "interp"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (case, (outcome, line)) in lines.iter().zip([("pass", 4), ("fail", 10)]) {
        assert_eq!(case["type"], "case");
        assert_eq!(case["file"], file.display().to_string());
        assert_eq!(case["line"], line);
        assert_eq!(case["kernel"], "k");
        assert_eq!(case["backend"], "interp");
        assert_eq!(case["outcome"], outcome);
    }
    assert!(lines[0]["detail"].is_null());
    assert!(lines[1]["detail"].as_str().unwrap().contains("expected 4"));
    let t = &lines[2];
    assert_eq!(t["type"], "totals");
    assert_eq!(
        (t["passed"].clone(), t["failed"].clone()),
        (1.into(), 1.into())
    );
    assert_eq!(
        (t["skipped"].clone(), t["total"].clone()),
        (0.into(), 2.into())
    );

    let bad = xpu()
        .args(["run", "--json", "--backend", "nonesuch"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let e: serde_json::Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(e["type"], "error");
}

#[test]
fn bench_json_on_vulkan_has_the_documented_fields() {
    let out = xpu()
        .args([
            "bench", "vulkan", "--json", "--elems", "4096", "--block", "64", "--reps", "2",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(doc["backend"], "vulkan");
    if doc.get("error").is_some() {
        // No Vulkan device here: still JSON, and the documented exit status.
        assert_eq!(out.status.code(), Some(2));
        return;
    }
    assert!(out.status.success());
    assert!(doc["device"].is_string());
    assert_eq!(doc["elems"], 4096);
    let rows = doc["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        for key in [
            "name",
            "bytes",
            "vulkan_ms",
            "vulkan_host_ms",
            "vulkan_cold_ms",
            "copy_ms",
            "cuda_ms",
            "timed_on_device",
            "gbps",
        ] {
            assert!(r.get(key).is_some(), "{key} missing from {r}");
        }
    }
}

#[test]
fn completions_cover_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = xpu().args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for command in ["repl", "check", "completions"] {
            assert!(text.contains(command), "{shell}: {command}");
        }
    }
    let bad = xpu().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

mod interp_options {
    use xpu::hal::launch::{InterpLaunch, LaunchError};
    use xpu::interp::{Options, UbKind};
    use xpu::{Backend, Device, Launch};

    const RACY: &str = "kernel flag(out: buf<u32, rw>) {\n    out[0] = 7;\n}\n";

    fn launch(device: &Device, src: &str, launch: Launch) -> Result<Vec<u32>, LaunchError> {
        let module = xpu::ir::parse(src).unwrap().verify().unwrap();
        let program = device.load(module).unwrap();
        let kernel = program.kernel("flag").unwrap();
        let mut out = device.upload(&[0u32]).unwrap();
        let stream = xpu::KernelStream::current(device);
        kernel.launch(&stream, launch, &mut xpu::args![&mut out])?;
        stream.sync().unwrap();
        Ok(out.download().unwrap())
    }

    #[test]
    fn a_benign_race_is_value_tested_through_launch_or_device() {
        let interp = Device::open(Backend::Interp).unwrap();
        let geometry = Launch::grid([2]).block([32]);
        let e = launch(&interp, RACY, geometry).unwrap_err();
        // The error names its kind as an enum and where it happened.
        assert_eq!(e.ub_kind(), Some(UbKind::DataRace));
        let site = e.site().expect("a site");
        assert_eq!(
            (site.kernel.as_str(), site.span.line, site.span.col),
            ("flag", 2, 5)
        );
        assert!(site.item.is_some());

        let allowed = geometry.interp(InterpLaunch {
            allow_races: true,
            shuffle_seed: Some(3),
            ..InterpLaunch::default()
        });
        assert_eq!(launch(&interp, RACY, allowed).unwrap(), vec![7]);

        let named = Device::interp_with(Options {
            allow_races: vec!["out".into()],
            ..Options::default()
        });
        assert_eq!(launch(&named, RACY, geometry).unwrap(), vec![7]);
        let other = Device::interp_with(Options {
            allow_races: vec!["elsewhere".into()],
            ..Options::default()
        });
        assert!(launch(&other, RACY, geometry).is_err());

        // The step budget is counted at loop back-edges and calls.
        const SPIN: &str = "kernel flag(out: buf<u32, rw>) {\n    let acc: u32 = 0;\n    for k: u32 in 0..1000 {\n        acc += k;\n    }\n    out[0] = acc;\n}\n";
        let budget = Launch::grid([1]).block([1]).interp(InterpLaunch {
            max_steps: Some(100),
            ..InterpLaunch::default()
        });
        let e = launch(&interp, SPIN, budget).unwrap_err();
        assert_eq!(e.code(), "XPU-L015", "{e}");
        let enough = Launch::grid([1]).block([1]).interp(InterpLaunch {
            max_steps: Some(1 << 20),
            ..InterpLaunch::default()
        });
        assert_eq!(launch(&interp, SPIN, enough).unwrap(), vec![499500]);
    }
}

mod builder {
    use xpu::ir::builder::ModuleBuilder;
    use xpu::ir::{Access, Dim, Scalar, Span, StmtKind, Type};

    #[test]
    fn spans_hold_until_changed_and_ifs_build_in_sequence() {
        let mut mb = ModuleBuilder::new();
        mb.kernel("k", |f| {
            let out = f.buffer("out", Scalar::U32, Access::ReadWrite);
            f.at_span(Span::new(3, 5));
            let gid = f.global_id(Dim::X);
            let i = f.let_("i", Type::U32, gid);
            let iv = f.get(i);
            let two = f.u32(2);
            let even = f.rem(iv, two);
            let zero = f.u32(0);
            let cond = f.eq(even, zero);
            let t = f.begin_if(cond);
            f.with_span(Span::new(4, 9), |f| {
                let iv = f.get(i);
                let one = f.u32(1);
                f.store(out, iv, one);
            });
            assert_eq!(f.current_span(), Span::new(3, 5));
            let t = f.else_(t);
            f.at_span(Span::new(6, 9));
            let iv = f.get(i);
            // An ill-typed store: the verifier's diagnostic carries the span in force.
            let bad = f.f32(1.0);
            f.store(out, iv, bad);
            f.end_if(t);
        });
        let module = mb.finish();
        let k = module.functions.iter().next().unwrap().1;
        let StmtKind::If {
            then_block,
            else_block,
            ..
        } = &k.body[1].kind
        else {
            panic!("the second statement is the if: {:?}", k.body);
        };
        assert_eq!(k.body[1].span, Span::new(3, 5));
        assert_eq!((then_block.len(), else_block.len()), (1, 1));
        assert_eq!(then_block[0].span, Span::new(4, 9));
        let diags = module.verify().unwrap_err();
        assert!(
            diags.0.iter().all(|d| d.span.line == 6),
            "every problem is located: {diags}"
        );
    }

    #[test]
    fn an_if_left_open_ends_at_finish_and_inner_ifs_end_with_outer() {
        let mut mb = ModuleBuilder::new();
        mb.kernel("k", |f| {
            let out = f.buffer("out", Scalar::U32, Access::ReadWrite);
            let c = f.bool_(true);
            let outer = f.begin_if(c);
            let c = f.bool_(false);
            let _inner = f.begin_if(c);
            let z = f.u32(0);
            let o = f.u32(1);
            f.store(out, z, o);
            f.end_if(outer);
            let c = f.bool_(true);
            let _open = f.begin_if(c);
            let z = f.u32(0);
            let o = f.u32(2);
            f.store(out, z, o);
        });
        let module = mb.finish();
        let text = xpu::ir::text::print(&module);
        assert!(module.verify().is_ok(), "{text}");
        assert!(
            text.contains("if true {\n        if false {\n            out[0u] = 1u;")
                || text.contains("if true {\n        if false {\n            out[0] = 1;"),
            "{text}"
        );
        assert!(text.matches("if ").count() == 3, "{text}");
    }
}

/// The text of `doc` (a file under docs/) from the heading line starting `heading` to the next
/// heading of the same or a higher level.
fn doc_section(doc: &str, heading: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(doc);
    let text = std::fs::read_to_string(&path).unwrap();
    let level = heading.chars().take_while(|&c| c == '#').count();
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("{doc} has no `{heading}` section"));
    let mut out = vec![first];
    for l in lines {
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if hashes > 0 && hashes <= level && l[hashes..].starts_with(' ') {
            break;
        }
        out.push(l);
    }
    out.join("\n")
}

/// Every word (letters, digits, `_`, `-`) inside backticks in `text` (`{a, b}` inside one
/// pair gives `a` and `b`).
fn backticked(text: &str) -> std::collections::BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|inside| {
            inside
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The names in the first column of the section's tables (backticked), less the header row.
fn table_fields(section: &str) -> std::collections::BTreeSet<String> {
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| backticked(l.split('|').nth(1).unwrap_or("")))
        .collect()
}

fn keys(v: &serde_json::Value) -> std::collections::BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

#[test]
fn devices_json_has_the_documented_fields_for_every_device() {
    let section = doc_section("json.md", "## `xpu devices --json`");
    let documented = table_fields(&section);
    let named = backticked(&section);
    let out = xpu().args(["devices", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let devices = doc.as_array().unwrap();
    let backends: Vec<&str> = devices
        .iter()
        .map(|d| d["backend"].as_str().unwrap())
        .collect();
    assert!(
        backends.contains(&"interp"),
        "the interpreter is always present: {backends:?}"
    );
    for d in devices {
        // The table lists exactly the fields printed.
        assert_eq!(keys(d), documented, "{d}");
        assert!(named.contains(d["backend"].as_str().unwrap()), "{d}");
        assert!(d["device_key"].as_str().is_some_and(|k| !k.is_empty()));
        for (feature, support) in d["supports"].as_object().unwrap() {
            assert!(named.contains(feature), "undocumented feature {feature}");
            assert!(
                support.is_null()
                    || ["native", "emulated", "no"].contains(&support.as_str().unwrap()),
                "{feature}: {support}"
            );
        }
        for dims in ["max_block_dims", "max_grid_dims"] {
            let v = &d[dims];
            assert!(
                v.is_null() || v.as_array().is_some_and(|a| a.len() == 3),
                "{dims}: {v}"
            );
        }
        let c = &d["calibration"];
        if !c.is_null() {
            for k in keys(c) {
                assert!(named.contains(&k), "undocumented calibration field {k}");
            }
        }
    }
}

#[test]
fn build_json_prints_only_documented_fields() {
    let section = doc_section("gates.md", "## `--json`");
    let named = backticked(&section);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = xpu()
        .args(["build", "--backends", "cpu,vulkan", "--json"])
        .arg(root.join("tests/filetests/gates/escapes.xk"))
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        out.status.code(),
        Some(if doc["failed"] == true { 1 } else { 0 }),
        "{doc}"
    );
    assert_eq!(
        keys(&doc),
        ["failed", "kernels", "lines", "summary"]
            .map(String::from)
            .into()
    );
    let kernels = doc["kernels"].as_array().unwrap();
    assert!(!kernels.is_empty(), "{doc}");
    let mut seen = std::collections::BTreeSet::new();
    for k in kernels {
        seen.extend(keys(k));
        seen.extend(keys(&k["manifest"]));
        assert!(named.contains(k["backend"].as_str().unwrap()), "{k}");
        assert!(named.contains(k["format"].as_str().unwrap()), "{k}");
    }
    for l in doc["lines"].as_array().unwrap() {
        seen.extend(keys(l));
        assert!(named.contains(l["level"].as_str().unwrap()), "{l}");
    }
    let undocumented: Vec<&String> = seen.iter().filter(|k| !named.contains(*k)).collect();
    assert!(
        undocumented.is_empty(),
        "fields docs/gates.md does not name: {undocumented:?}"
    );
}
