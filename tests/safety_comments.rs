//! Every `unsafe { ... }` block in `src/` says why it is sound: a `// SAFETY:` comment on its
//! line or on the lines of its statement just above it (issue 15: eight blocks in the Vulkan
//! and HIP backends had none). A textual check, so it needs no toolchain lint and covers the
//! backends a build leaves out.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `unsafe {` blocks of `text` with no `SAFETY:` comment, as line numbers (1-based).
fn undocumented(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if !code.contains("unsafe {") || code.contains("\"") {
            continue;
        }
        if line.contains("SAFETY") {
            continue;
        }
        // Back over the statement this block is part of (lines that do not end one) and
        // the comments above it.
        let mut ok = false;
        let mut j = i;
        while j > 0 && i - j < 16 {
            j -= 1;
            let t = lines[j].trim();
            if t.contains("SAFETY") {
                ok = true;
                break;
            }
            if t.starts_with("//") || t.starts_with("#[") || t.is_empty() {
                continue;
            }
            if t.ends_with(';') || t.ends_with('{') || t.ends_with('}') {
                break;
            }
        }
        if !ok {
            out.push(i + 1);
        }
    }
    out
}

#[test]
fn the_check_sees_a_missing_comment() {
    assert_eq!(
        undocumented("let x = 1;\nlet y = unsafe { f() };\n"),
        vec![2]
    );
    assert!(undocumented("// SAFETY: f is sound.\nlet y = unsafe { f() };\n").is_empty());
    assert!(undocumented("let y =\n    // SAFETY: ok.\n    unsafe { f() };\n").is_empty());
    assert!(undocumented("// SAFETY: ok.\nlet y = g(\n    unsafe { f() },\n);\n").is_empty());
}

#[test]
fn every_unsafe_block_has_a_safety_comment() {
    let mut files = Vec::new();
    rust_files(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path(),
        &mut files,
    );
    files.sort();
    assert!(!files.is_empty());
    let mut missing = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in undocumented(&text) {
            missing.push(format!("{}:{line}", f.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "unsafe blocks without a `// SAFETY:` comment:\n{}",
        missing.join("\n")
    );
}
