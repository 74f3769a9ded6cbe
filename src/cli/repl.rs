//! `xpu repl [--backend NAME]`: the interactive session of [`crate::repl`] (docs/repl.md).
//!
//! On a terminal, lines are read with `rustyline` (editing, history for the session) behind
//! an `xpu> ` prompt (`...> ` inside a definition). From a pipe or file the input is read as
//! a script: no prompt, each entry evaluated in turn. Errors print on stderr and the session
//! goes on. Exit status: 0 when every entry succeeded, 1 when any failed (a script's
//! failures are visible to its caller), 2 on a usage error (an unknown or absent backend).

use crate::repl::{Flow, Session};
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ReplArgs {
    /// The backend launches go to: `interp`, `cpu`, `cuda`, `hip`, `vulkan`, `all`, or `best`.
    #[arg(long, default_value = "best")]
    pub backend: String,
}

pub fn repl(args: &ReplArgs) -> ExitCode {
    let devices = match crate::filetest::runner::select_devices(&args.backend) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("xpu repl: {e}");
            return ExitCode::from(2);
        }
    };
    let mut session = match Session::new(devices) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xpu repl: {e}");
            return ExitCode::from(2);
        }
    };
    let ok = if std::io::stdin().is_terminal() {
        interactive(&mut session)
    } else {
        scripted(&mut session)
    };
    ExitCode::from(if ok { 0 } else { 1 })
}

/// Reads a script from stdin: no prompt.
fn scripted(session: &mut Session) -> bool {
    let stdin = std::io::stdin();
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let mut ok = true;
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            eprintln!("xpu repl: the input is not UTF-8 text");
            return false;
        };
        match session.feed(&line, &mut out, &mut err) {
            Flow::Quit => return ok,
            Flow::Continue { ok: entry } => ok &= entry,
        }
        let _ = out.flush();
    }
    session.finish(&mut err) && ok
}

/// A terminal session with line editing and history.
fn interactive(session: &mut Session) -> bool {
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("xpu repl: no line editor ({e}); reading plain lines");
            return scripted(session);
        }
    };
    println!(
        "xpu repl on {} (`:help` for help, `:quit` or Ctrl-D to leave)",
        session
            .devices()
            .iter()
            .map(|d| d.backend().name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let mut ok = true;
    loop {
        let prompt = if session.pending() { "...> " } else { "xpu> " };
        match editor.readline(prompt) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                }
                match session.feed(&line, &mut out, &mut err) {
                    Flow::Quit => return ok,
                    Flow::Continue { ok: entry } => ok &= entry,
                }
                let _ = out.flush();
            }
            // Ctrl-C drops a pending entry, as a shell does.
            Err(rustyline::error::ReadlineError::Interrupted) => {
                session.finish(&mut std::io::sink());
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("xpu repl: {e}");
                return false;
            }
        }
    }
    session.finish(&mut err) && ok
}
