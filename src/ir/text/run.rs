//! What a test file's `run` block says (docs/text-format.md, "Run blocks"): which kernel to
//! launch, its grid and block, the value of each argument, and what must hold afterwards.
//!
//! The text module parses and prints these (`xpu::ir::parse_file`, `xpu::ir::print_file`);
//! the runner gives them meaning. Values are kept exactly as written: integers as `i128`,
//! floats as `f64`. They carry no type: the runner types each against the kernel's parameter
//! (a float written for an `f16` buffer is rounded to `f16` there).

use crate::ir::Span;

/// One `run NAME { ... }` block.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    /// The kernel's name, or a template instance's (`QkTile<64,64,32,32,128>`, no spaces).
    pub kernel: String,
    /// Workgroups per launch, `x, y, z` (missing dimensions are 1).
    pub grid: [u32; 3],
    /// Work-items per workgroup, `x, y, z` (missing dimensions are 1).
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes (`shared = N;`, default 0).
    pub shared_bytes: u32,
    /// The interpreter's wave width (`wave = N;`), `None` for its default.
    pub wave: Option<u32>,
    /// The float tolerance, in units in the last place, of every expectation (default 0).
    pub ulps: u32,
    /// How long the launch may run (`deadline = SECONDS;`), `None` for the runner's default
    /// (`xpu run --deadline`). A launch past it is refused with `XPU-L018`.
    pub deadline: Option<std::time::Duration>,
    /// `allow_races;`: the interpreter reports no data race in this launch (a benign-race
    /// kernel can then be value-tested); other backends detect none anyway.
    pub allow_races: bool,
    /// `shuffle = SEED;`: the interpreter runs workgroups and work-items in an order shuffled
    /// by the seed; `None` runs them in order.
    pub shuffle_seed: Option<u64>,
    /// `max_steps = N;`: the interpreter's step budget (work-item steps over the launch).
    pub max_steps: Option<u64>,
    /// `arg NAME = INIT;`, in source order.
    pub args: Vec<RunArg>,
    /// `expect ...;`, in source order.
    pub expects: Vec<Expect>,
    /// Where `run` is written.
    pub span: Span,
}

/// `arg NAME = INIT;`: the value of one kernel parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct RunArg {
    /// The parameter's name.
    pub name: String,
    /// Its value.
    pub init: ArgInit,
    /// Where the line is written.
    pub span: Span,
}

/// A number as written in a run block: untyped until the runner knows the parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// An integer literal (`7`, `-1`, `0xff`); covers `i64::MIN ..= u64::MAX`.
    Int(i128),
    /// A float literal (`2.0`, `-1.5e3`, `inf`, `nan`).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
}

/// The value of a parameter before the launch, or of a buffer expected after it.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgInit {
    /// A scalar parameter's value.
    Scalar(Value),
    /// `[v0, v1, ...]`: a buffer's flat scalars (a vector buffer takes lanes in order).
    List(Vec<Value>),
    /// `fill(len, value)`: `len` elements, each `value` (every lane of a vector element).
    Fill {
        /// Element count.
        len: u32,
        /// The value of every element.
        value: Value,
    },
    /// `iota(len)` or `iota(len, start, step)`: element `i` is `start + i * step` (default
    /// start 0, step 1, written as integers).
    Iota {
        /// Element count.
        len: u32,
        /// Element 0's value.
        start: Value,
        /// The difference between neighbours.
        step: Value,
    },
    /// `random(len, lo, hi, seed S)`: uniform values in `[lo, hi]` from the seeded generator.
    Random {
        /// Element count.
        len: u32,
        /// The lowest value.
        lo: Value,
        /// The highest value.
        hi: Value,
        /// The generator's seed (the same seed gives the same values).
        seed: u64,
    },
    /// `uninit(len)`: a fresh buffer of `len` elements, poisoned (reading one is undefined
    /// behaviour the interpreter reports). Arguments only, never expectations.
    Uninit {
        /// Element count.
        len: u32,
    },
}

impl ArgInit {
    /// The element count of a buffer initialiser (`None` for a scalar). For a list this is
    /// its scalar count; the runner divides by the lane count of a vector buffer.
    pub fn count(&self) -> Option<usize> {
        match self {
            ArgInit::Scalar(_) => None,
            ArgInit::List(v) => Some(v.len()),
            ArgInit::Fill { len, .. }
            | ArgInit::Iota { len, .. }
            | ArgInit::Random { len, .. }
            | ArgInit::Uninit { len } => Some(*len as usize),
        }
    }
}

/// One `expect` line.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// `expect NAME = VALUE;`: the buffer parameter holds `value` after the launch (any
    /// [`ArgInit`] form but `Uninit`; `Scalar` is not a buffer and the runner refuses it).
    Buffer {
        /// The buffer parameter's name.
        name: String,
        /// The expected contents.
        value: ArgInit,
        /// Where the line is written.
        span: Span,
    },
    /// `expect NAME = interp;`: the buffer agrees with the reference interpreter's result
    /// (within `ulps` for floats).
    Interp {
        /// The buffer parameter's name.
        name: String,
        /// Where the line is written.
        span: Span,
    },
    /// `expect ub KIND;`: the interpreter reports undefined behaviour of that kind
    /// (`XPU-REF02`).
    Ub {
        /// The UB kind's name (`out_of_bounds`, `data_race`, ...).
        kind: String,
        /// Where the line is written.
        span: Span,
    },
    /// `expect refused CODE;`: the launch or the verification is refused with that code.
    /// `expect refused CODE on NAME, ...;` says so of the named backends only (a hostile
    /// input one backend holds and another refuses); on the others the block's remaining
    /// expectations apply. Several refusals for one backend: any of the codes.
    Refused {
        /// The expected error code (`XPU-L003`, ...).
        code: String,
        /// The backends it applies to; empty for every backend.
        backends: Vec<String>,
        /// Where the line is written.
        span: Span,
    },
}

impl Expect {
    /// Whether this is a refusal that applies on the backend named `backend`.
    pub fn refusal_on(&self, backend: &str) -> Option<&str> {
        match self {
            Expect::Refused { code, backends, .. }
                if backends.is_empty() || backends.iter().any(|b| b == backend) =>
            {
                Some(code)
            }
            _ => None,
        }
    }

    /// Where the expectation is written.
    pub fn span(&self) -> Span {
        match self {
            Expect::Buffer { span, .. }
            | Expect::Interp { span, .. }
            | Expect::Ub { span, .. }
            | Expect::Refused { span, .. } => *span,
        }
    }
}
