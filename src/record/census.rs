//! The census (contract §7): every kernel a program registered on a backend (each concrete
//! kernel of every module loaded there, [`Device::registered_kernels`](crate::Device::registered_kernels))
//! must have been value-checked in the run — a record that replayed and agreed, or a file test
//! that compared its output — or be excused by name against a plan item in a committed table.
//! A kernel that merely ran is not covered.
//!
//! A table (`tests/census/<backend>.txt`) has one excused kernel per line, `KERNEL -- PLAN
//! ITEM`; `#` starts a comment. An excuse for a kernel that was value-checked, or that was
//! never registered, is stale and fails the census too, so the table stays the record of what
//! each backend has proven.

use super::{codes, RecordError};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// Kernels registered per backend name.
static REGISTERED: Mutex<BTreeMap<String, BTreeSet<String>>> = Mutex::new(BTreeMap::new());
/// Kernels value-checked per backend name.
static CHECKED: Mutex<BTreeMap<String, BTreeSet<String>>> = Mutex::new(BTreeMap::new());

/// Registers `kernels` as loaded on `backend`.
pub fn register<'a>(backend: &str, kernels: impl IntoIterator<Item = &'a str>) {
    let mut reg = REGISTERED.lock();
    let set = reg.entry(backend.to_string()).or_default();
    for k in kernels {
        if !set.contains(k) {
            set.insert(k.to_string());
        }
    }
}

/// Notes that `kernel`'s output on `backend` was compared with a reference and agreed.
pub fn note_checked(backend: &str, kernel: &str) {
    CHECKED
        .lock()
        .entry(backend.to_string())
        .or_default()
        .insert(kernel.to_string());
}

/// The kernels registered on `backend` so far, sorted.
pub fn registered(backend: &str) -> Vec<String> {
    REGISTERED
        .lock()
        .get(backend)
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default()
}

/// The kernels value-checked on `backend` so far, sorted.
pub fn checked(backend: &str) -> Vec<String> {
    CHECKED
        .lock()
        .get(backend)
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default()
}

/// Excused kernels: name, plan item, line.
pub type Table = BTreeMap<String, (String, usize)>;

/// Parses a census table (`path` names it in errors).
pub fn parse_table(path: &Path, text: &str) -> Result<Table, RecordError> {
    let mut out = Table::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let bad = |message: &str| RecordError::CensusTable {
            path: path.to_path_buf(),
            line,
            message: message.to_string(),
        };
        let (kernel, item) = body
            .split_once("--")
            .ok_or_else(|| bad("expected `KERNEL -- PLAN ITEM`"))?;
        let (kernel, item) = (kernel.trim(), item.trim());
        if kernel.is_empty() || kernel.contains(char::is_whitespace) {
            return Err(bad("expected one kernel name before `--`"));
        }
        if item.is_empty() {
            return Err(bad("an excuse needs a plan item after `--`"));
        }
        if out
            .insert(kernel.to_string(), (item.to_string(), line))
            .is_some()
        {
            return Err(bad("the kernel is excused twice"));
        }
    }
    Ok(out)
}

/// Reads a census table; a missing file is an empty table.
pub fn read_table(path: &Path) -> Result<Table, RecordError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_table(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Table::new()),
        Err(e) => Err(RecordError::CensusTable {
            path: path.to_path_buf(),
            line: 0,
            message: e.to_string(),
        }),
    }
}

/// The census of one backend.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// The backend's name.
    pub backend: String,
    /// How many kernels were registered (loaded) on it.
    pub registered: usize,
    /// Registered kernels whose results were value-checked.
    pub covered: Vec<String>,
    /// Kernels the census table excuses.
    pub excused: Vec<String>,
    /// Registered, not value-checked, not excused.
    pub uncovered: Vec<String>,
    /// Excused but value-checked or never registered (with the table's line).
    pub stale: Vec<(String, usize)>,
}

impl Census {
    /// Whether the census passes: nothing uncovered, no stale excuse.
    pub fn ok(&self) -> bool {
        self.uncovered.is_empty() && self.stale.is_empty()
    }

    /// The table that would make this census pass: every uncovered kernel excused with
    /// `item`, stale lines gone (`xpu census --write-table`).
    pub fn table_text(&self, table: &Table, item: &str) -> String {
        let mut lines: BTreeMap<&str, String> = BTreeMap::new();
        for k in &self.excused {
            if let Some((it, _)) = table.get(k) {
                lines.insert(k, it.clone());
            }
        }
        for k in &self.uncovered {
            lines.insert(k, item.to_string());
        }
        let mut out = format!(
            "# The census of the {} backend: kernels registered by the test suite that no\n\
             # file test or replayed record value-checks, each excused against a plan item.\n",
            self.backend
        );
        for (k, it) in lines {
            out.push_str(&format!("{k} -- {it}\n"));
        }
        out
    }
}

/// Takes the census of `backend` against `table`, from what this process registered and
/// checked.
pub fn take(backend: &str, table: &Table) -> Census {
    let registered = registered(backend);
    let checked: BTreeSet<String> = checked(backend).into_iter().collect();
    let mut c = Census {
        backend: backend.to_string(),
        registered: registered.len(),
        ..Census::default()
    };
    for k in &registered {
        if checked.contains(k) {
            c.covered.push(k.clone());
        } else if table.contains_key(k) {
            c.excused.push(k.clone());
        } else {
            c.uncovered.push(k.clone());
        }
    }
    for (k, (_, line)) in table {
        if checked.contains(k) || !registered.contains(k) {
            c.stale.push((k.clone(), *line));
        }
    }
    c
}

impl fmt::Display for Census {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for k in &self.uncovered {
            writeln!(
                f,
                "UNCOVERED[{}] {} {k}: registered, never value-checked, not excused",
                codes::UNCOVERED,
                self.backend
            )?;
        }
        for (k, line) in &self.stale {
            writeln!(
                f,
                "STALE[{}] {} {k}: excused at line {line}, but it was value-checked or never registered; remove the line",
                codes::STALE_EXCUSE,
                self.backend
            )?;
        }
        write!(
            f,
            "census {}: {} registered, {} value-checked, {} excused, {} uncovered, {} stale excuses",
            self.backend,
            self.registered,
            self.covered.len(),
            self.excused.len(),
            self.uncovered.len(),
            self.stale.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_parse_and_the_census_names_what_is_missing() {
        let p = Path::new("t.txt");
        let table = parse_table(p, "# c\nb -- plan 4\nz -- plan 5\n").unwrap();
        assert_eq!(
            parse_table(p, "b\n").unwrap_err().code(),
            codes::CENSUS_TABLE
        );
        assert_eq!(
            parse_table(p, "b --\n").unwrap_err().code(),
            codes::CENSUS_TABLE
        );
        register("census-unit", ["a", "b", "c"]);
        note_checked("census-unit", "a");
        let c = take("census-unit", &table);
        assert_eq!(c.covered, ["a"]);
        assert_eq!(c.excused, ["b"]);
        assert_eq!(c.uncovered, ["c"]);
        assert_eq!(c.stale, [("z".to_string(), 3)]);
        assert!(!c.ok());
    }
}
