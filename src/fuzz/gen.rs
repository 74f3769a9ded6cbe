//! The kernel generator of the differential fuzzers: from a seed, a random *valid* kernel
//! `k` (arithmetic on every type, divergent `if`s, loops with labelled `break`/`continue`,
//! early returns, device helpers and a tag set, private arrays, vectors, shared memory with
//! barriers, wave verbs (constant-offset shuffles only where every lane is active), inexact
//! float reductions (CPU corpora only), atomics, scattered stores, random geometry and
//! `@wave`), every generated value folded into an output buffer, and its inputs. The one
//! copy: the project's fuzz tests (`tests/cpu.rs`) and the proptest strategies of
//! `super::strategy` (feature `fuzz`) use it.
//!
//! The kernel's parameters are `out_i: buf<i32, rw>, out_f: buf<f32, rw>, out_l: buf<u64,
//! rw>, cnt: buf<u32, rw>, in_i: buf<i32>, in_f: buf<f32>, n: u32`; [`Case::run_spec`] is the
//! launch with every output compared against the interpreter.

use std::fmt::Write as _;

/// splitmix64, for reproducible programs from one seed (the field is the state).
pub struct Rng(pub u64);
impl Rng {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// One element of `xs` (which must not be empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

const TYPES: [&str; 10] = [
    "i32", "u32", "f32", "i64", "u64", "u8", "i16", "f64", "f16", "bool",
];

struct Gen {
    rng: Rng,
    /// The draws of the constructs of issue 23 items 4, 5 and 8 (memory helpers, structs,
    /// constant buffers, shared layouts): a stream of their own, so that `rng` draws the
    /// same kernel for a seed as before they were added (the known disagreements stay
    /// named by the seeds they were found at).
    extra: Rng,
    out: String,
    /// Variables in scope: name, type, assignable.
    vars: Vec<(String, &'static str, bool)>,
    next: usize,
    indent: usize,
    loop_depth: usize,
    labels: Vec<String>,
    /// Statements still allowed (keeps kernels small).
    budget: i32,
    block: u32,
    helpers: Vec<(String, &'static str, &'static str)>,
    top_level: bool,
    waves: bool,
    /// The widest tile (`width = T`) a wave verb may name: the declared `@wave`, else 64
    /// (a tile above the wave the kernel runs at is that wave).
    tile_max: u32,
    /// Inside a device helper: no kernel locals, buffers or shared memory.
    helper: bool,
    /// Work-items in the launch.
    total: u32,
    /// Every wave full (a declared `@wave` dividing the block) and, at this point, every lane
    /// of the workgroup active (top level, no early return yet): constant-offset shuffles
    /// read active lanes only here (elsewhere they may read an inactive lane, which is UB and
    /// discarded the case).
    full_waves: bool,
    returned: bool,
    /// For the CPU, which computes exactly the interpreter's operations in its order: inexact
    /// float reductions (values whose sum depends on the order) and float values folded into
    /// the output. Not for GPU corpora, compared bit for bit too, whose reduction trees and
    /// transcendentals differ from the interpreter's.
    for_cpu: bool,
    /// A transcendental function was generated: a GPU's device library may differ from the
    /// interpreter's correctly rounded result within the bounds of docs/semantics.md.
    transcendental: bool,
    /// Every work-item of the workgroup reaches this point together (the kernel's top level,
    /// or inside an `if`/`for` whose condition or trip count is the same for all): barriers
    /// may sit here, inside control flow.
    uniform: bool,
    /// The kernel declares `shc`, a shared array that only atomics touch between barriers.
    shared_atomics: bool,
    /// One out-of-bounds access is still to be generated in this kernel (buffer, shared or
    /// private): the interpreter reports it and the backend must refuse the launch.
    oob: bool,
    /// `shc[0]` is counted by `atomic_inc(_, bound)` rather than summed by `atomic_add` in
    /// this kernel (issue 23 item 2): every update of the slot is the same wrapping
    /// increment, so its final value does not depend on their order.
    inc_bound: Option<u32>,
}

impl Gen {
    fn fresh(&mut self, p: &str) -> String {
        self.next += 1;
        format!("{p}{}", self.next)
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn lit(&mut self, ty: &str) -> String {
        let r = &mut self.rng;
        match ty {
            "bool" => if r.chance(50) { "true" } else { "false" }.into(),
            "f32" | "f64" | "f16" => {
                let v = *r.pick(&[
                    "0.0", "-0.0", "1.0", "-2.5", "0.5", "3.0e3", "1.0e-3", "7.0", "-100.25",
                    "inf", "nan",
                ]);
                let suffix = match ty {
                    "f64" => "f64",
                    "f16" => "f16",
                    _ => "",
                };
                format!("{v}{suffix}")
            }
            "u8" => format!("{}u8", r.below(256)),
            "i16" => format!("{}i16", r.below(2000) as i64 - 1000),
            "u32" => format!(
                "{}u32",
                *r.pick(&[0u64, 1, 2, 3, 7, 31, 32, 100, 0xffff_ffff, 0x8000_0000])
            ),
            "u64" => format!(
                "{}u64",
                *r.pick(&[0u64, 1, 5, 64, 0xffff_ffff_ffff, u64::MAX])
            ),
            "i64" => format!(
                "{}i64",
                *r.pick(&[0i64, 1, -1, 17, -12345678901, i64::MAX, i64::MIN + 1])
            ),
            _ => format!(
                "{}i32",
                *r.pick(&[0i64, 1, -1, 2, 5, -7, 100, 2147483647, -2147483647, 65536])
            ),
        }
    }

    fn var_of(&mut self, ty: &str) -> Option<String> {
        let c = self.names_of(ty);
        (!c.is_empty()).then(|| self.rng.pick(&c).clone())
    }

    /// The variables in scope of type `ty`.
    fn names_of(&self, ty: &str) -> Vec<String> {
        self.vars
            .iter()
            .filter(|v| v.1 == ty)
            .map(|v| v.0.clone())
            .collect()
    }

    /// A variable in scope of type `ty` drawn from the extra stream, or `default` (now and
    /// then, and where there is none).
    fn extra_var(&mut self, ty: &str, default: &str) -> String {
        let c = self.names_of(ty);
        if c.is_empty() || self.extra.chance(30) {
            default.to_string()
        } else {
            self.extra.pick(&c).clone()
        }
    }

    fn leaf(&mut self, ty: &str) -> String {
        if self.rng.chance(70) {
            if let Some(v) = self.var_of(ty) {
                return v;
            }
        }
        if ty == "u32" && self.rng.chance(50) {
            let names: &[&str] = if self.helper {
                &["lane_id", "wave_width", "group_id.x", "local_id.x"]
            } else {
                &["gid", "lid", "lane_id", "wave_width", "group_id.x", "n"]
            };
            return self.rng.pick(names).to_string();
        }
        self.lit(ty)
    }

    /// A bit operation (issue #23) on an integer `ty`; amounts are any `u32` (clamped or
    /// taken modulo the width by the semantics).
    fn bit_op(&mut self, ty: &'static str, d: u32) -> String {
        let f = *self.rng.pick(&[
            "popcount",
            "clz",
            "ctz",
            "bit_reverse",
            "rotate_left",
            "rotate_right",
            "mul_hi",
            "bitfield_extract",
            "bitfield_insert",
        ]);
        let x = self.expr(ty, d);
        match f {
            "rotate_left" | "rotate_right" => format!("{f}({x}, {})", self.expr("u32", d)),
            "mul_hi" => format!("{f}({x}, {})", self.expr(ty, d)),
            "bitfield_extract" => {
                let off = self.expr("u32", d);
                format!("{f}({x}, {off}, {})", self.expr("u32", d))
            }
            "bitfield_insert" => {
                let y = self.expr(ty, d);
                let off = self.expr("u32", d);
                format!("{f}({x}, {y}, {off}, {})", self.expr("u32", d))
            }
            _ => format!("{f}({x})"),
        }
    }

    fn expr(&mut self, ty: &'static str, depth: u32) -> String {
        if depth == 0 || self.rng.chance(25) {
            return self.leaf(ty);
        }
        let d = depth - 1;
        let is_int = !matches!(ty, "f32" | "f64" | "f16" | "bool");
        let is_float = matches!(ty, "f32" | "f64" | "f16");
        match self.rng.below(10) {
            0..=2 if is_int => {
                let op = *self
                    .rng
                    .pick(&["+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%"]);
                let a = self.expr(ty, d);
                let b = self.expr(ty, d);
                if op == "/" || op == "%" {
                    // Rarely zero (those cases are discarded as UB).
                    format!("({a} {op} ({b} | {}))", self.lit_one(ty))
                } else {
                    format!("({a} {op} {b})")
                }
            }
            0..=2 if is_float => {
                let op = *self.rng.pick(&["+", "-", "*", "/", "%"]);
                format!("({} {op} {})", self.expr(ty, d), self.expr(ty, d))
            }
            0..=2 => {
                // bool
                match self.rng.below(4) {
                    0 => {
                        let t = *self.rng.pick(&TYPES[..9]);
                        let op = *self.rng.pick(&["==", "!=", "<", "<=", ">", ">="]);
                        format!("({} {op} {})", self.expr(t, d), self.expr(t, d))
                    }
                    1 => format!("({} && {})", self.expr("bool", d), self.expr("bool", d)),
                    2 => format!("({} || {})", self.expr("bool", d), self.expr("bool", d)),
                    _ => format!("!{}", self.expr("bool", d)),
                }
            }
            3 => {
                let from = *self.rng.pick(&TYPES);
                format!("({} as {ty})", self.expr(from, d))
            }
            4 if self.rng.chance(40) => {
                // An `if` expression: only the taken arm runs (its lanes alone meet a wave
                // verb there, so no shuffles in it).
                let c = self.expr("bool", d);
                let top = self.top_level;
                self.top_level = false;
                let a = self.expr(ty, d);
                let b = self.expr(ty, d);
                self.top_level = top;
                format!("(if {c} {{ {a} }} else {{ {b} }})")
            }
            4 => format!(
                "select({}, {}, {})",
                self.expr("bool", d),
                self.expr(ty, d),
                self.expr(ty, d)
            ),
            5 if is_int && self.rng.chance(40) => self.bit_op(ty, d),
            5 if ty != "bool" => {
                let f = if is_float {
                    *self.rng.pick(&[
                        "min", "max", "abs", "floor", "ceil", "round", "trunc", "sqrt", "fma",
                        "clamp", "exp", "sin", "log2", "tanh", "pow", "rsqrt",
                    ])
                } else {
                    *self.rng.pick(&["min", "max", "abs", "clamp"])
                };
                self.transcendental |=
                    matches!(f, "exp" | "sin" | "log2" | "tanh" | "pow" | "rsqrt");
                let n = match f {
                    "min" | "max" | "pow" => 2,
                    "fma" | "clamp" => 3,
                    _ => 1,
                };
                let args: Vec<String> = (0..n).map(|_| self.expr(ty, d)).collect();
                format!("{f}({})", args.join(", "))
            }
            6 if self.waves && ty != "bool" && ty != "f64" => {
                let shuffles = self.full_waves && self.top_level && !self.returned && !self.helper;
                let ops: &[&str] = if shuffles {
                    &[
                        "reduce_sum",
                        "reduce_min",
                        "reduce_max",
                        "inclusive_scan_sum",
                        "exclusive_scan_max",
                        "shuffle_xor",
                        "shuffle_down",
                        "shuffle_up",
                        "rotate",
                    ]
                } else {
                    &[
                        "reduce_sum",
                        "reduce_min",
                        "reduce_max",
                        "inclusive_scan_sum",
                        "exclusive_scan_max",
                    ]
                };
                let mut op = *self.rng.pick(ops);
                if !self.for_cpu && (ty == "f32" || ty == "f16") {
                    // A GPU's float sum over lanes is a tree, not the interpreter's lane
                    // order, and corpora are compared bit for bit: max instead (exact).
                    op = match op {
                        "reduce_sum" => "reduce_max",
                        "inclusive_scan_sum" => "inclusive_scan_max",
                        o => o,
                    };
                }
                let x = if ty == "f32"
                    && self.for_cpu
                    && !self.helper
                    && op.ends_with("sum")
                    && self.rng.chance(50)
                {
                    // Magnitudes mixed across lanes: the sum depends on the order.
                    let e = self.expr(ty, d);
                    format!("({e} + g * select(lane_id % 3u32 == 0u32, 1048576.0, 1.0))")
                } else {
                    self.expr(ty, d)
                };
                // Now and then within tiles (issue 23 item 3).
                let tile = if self.rng.chance(25) {
                    let max = self.tile_max;
                    let widths: Vec<u32> = [1u32, 2, 4, 8, 16, 32, 64]
                        .into_iter()
                        .filter(|&t| t <= max)
                        .collect();
                    format!(", width = {}", self.rng.pick(&widths))
                } else {
                    String::new()
                };
                match op {
                    "shuffle_xor" | "shuffle_down" | "shuffle_up" | "rotate" => {
                        let k = self.rng.below(5);
                        format!("wave_{op}({x}, {k}u32{tile})")
                    }
                    _ => format!("wave_{op}({x}{tile})"),
                }
            }
            6 if self.waves && ty == "bool" => {
                let op = *self.rng.pick(&["any", "all"]);
                format!("wave_{op}({})", self.expr("bool", d))
            }
            7 if self.waves && ty == "u64" => format!("wave_ballot({})", self.expr("bool", d)),
            7 if self.waves && ty == "bool" => "wave_elect()".into(),
            8 if !self.helpers.is_empty() => {
                let (name, a, r) =
                    self.helpers[self.rng.below(self.helpers.len() as u64) as usize].clone();
                let arg = self.expr(a, d);
                let call = format!("{name}({arg})");
                if r == ty {
                    call
                } else {
                    format!("({call} as {ty})")
                }
            }
            9 if ty == "i32" && !self.helper && self.rng.chance(50) => {
                let x = self.expr("i32", d);
                format!("dispatch(tg, {x})")
            }
            9 if ty == "f32" && !self.helper && self.total >= 4 && self.rng.chance(30) => {
                let i = self.expr("u32", d);
                let lane = *self.rng.pick(&["x", "y", "z", "w"]);
                format!("vload<4>(in_f, ({i}) % {}u32).{lane}", self.total - 3)
            }
            9 if ty == "f32" => {
                // Through a vector.
                let a = self.expr("f32", d);
                let b = self.expr("f32", d);
                let lane = *self.rng.pick(&["x", "y", "z", "w"]);
                format!("(vec4<f32>({a}, {b}, 1.5, {a}) * vec4<f32>({b})).{lane}")
            }
            _ => {
                if is_int && self.rng.chance(30) {
                    format!("(-({}))", self.expr(ty, d))
                } else {
                    self.leaf(ty)
                }
            }
        }
    }

    fn lit_one(&mut self, ty: &str) -> String {
        match ty {
            "u8" => "1u8".into(),
            "i16" => "1i16".into(),
            "u32" => "1u32".into(),
            "u64" => "1u64".into(),
            "i64" => "1i64".into(),
            _ => "1i32".into(),
        }
    }

    /// A bounds-test shaped condition, `affine op uniform` (either order, unsigned or
    /// signed), which the CPU backend runs without masks when it holds in a whole wave.
    fn bounds_cond(&mut self) -> String {
        let ids: &[&str] = if self.helper {
            &["lane_id", "local_id.x"]
        } else {
            &["gid", "lid", "lane_id"]
        };
        let id = *self.rng.pick(ids);
        let k = 1 + self.rng.below(3);
        let a = match self.rng.below(3) {
            0 => id.to_string(),
            1 => format!("({id} + {k}u32)"),
            _ => format!("({id} * {k}u32)"),
        };
        let b = match self.rng.below(4) {
            0 if !self.helper => "n".to_string(),
            1 => "wave_width".to_string(),
            2 if !self.helper => "(n - 5u32)".to_string(),
            _ => format!("{}u32", self.rng.below(40)),
        };
        let op = *self.rng.pick(&["<", "<=", ">", ">="]);
        let (a, b) = if self.rng.chance(25) {
            (format!("({a} as i32)"), format!("({b} as i32)"))
        } else {
            (a, b)
        };
        if self.rng.chance(50) {
            format!("({a} {op} {b})")
        } else {
            format!("({b} {op} {a})")
        }
    }

    fn stmts(&mut self, n: usize) {
        let mark = self.vars.len();
        for _ in 0..n {
            if self.budget <= 0 {
                break;
            }
            self.budget -= 1;
            self.stmt();
        }
        self.vars.truncate(mark);
    }

    fn stmt(&mut self) {
        let choice = self.rng.below(20);
        match choice {
            0..=3 => {
                let ty = *self.rng.pick(&TYPES);
                let name = self.fresh("v");
                let e = self.expr(ty, 3);
                self.line(&format!("let {name}: {ty} = {e};"));
                self.fold(&name, ty);
                self.vars.push((name, ty, true));
                if !self.helper && self.extra.chance(20) {
                    self.struct_stmt();
                }
                if !self.helper && self.extra.chance(10) {
                    self.array_stmt();
                }
            }
            4..=6 => {
                let assignable: Vec<(String, &'static str)> = self
                    .vars
                    .iter()
                    .filter(|v| v.2)
                    .map(|v| (v.0.clone(), v.1))
                    .collect();
                if assignable.is_empty() {
                    return;
                }
                let (name, ty) = self.rng.pick(&assignable).clone();
                let e = self.expr(ty, 3);
                if ty != "bool" && ty != "f64" && self.rng.chance(30) {
                    self.line(&format!("{name} += {e};"));
                } else {
                    self.line(&format!("{name} = {e};"));
                }
                self.fold(&name, ty);
            }
            7 if self.rng.chance(25) => {
                // A bare scope.
                self.line("{");
                self.nested(|g| g.stmts(3));
                self.line("}");
            }
            7 | 8 => {
                let c = if self.rng.chance(30) {
                    self.bounds_cond()
                } else {
                    self.expr("bool", 2)
                };
                self.line(&format!("if {c} {{"));
                self.nested(|g| g.stmts(3));
                if self.rng.chance(50) {
                    self.line("} else {");
                    self.nested(|g| g.stmts(3));
                }
                self.line("}");
            }
            9 | 10 if self.loop_depth < 2 => {
                let var = self.fresh("it");
                let bound = match (self.rng.below(3), self.helper) {
                    (0, _) => format!("{}u32", self.rng.below(5)),
                    (1, false) => "(n % 4u32)".to_string(),
                    (_, false) => "(gid % 5u32)".to_string(),
                    (_, true) => "(lane_id % 5u32)".to_string(),
                };
                // The plain form, a signed loop counting down by a step of 1 to 3, or a C
                // `for (v = 4 * bound; v > 0; v >>= 1)`.
                let (header, vty) = match self.rng.below(4) {
                    0 => {
                        let k = 1 + self.rng.below(3);
                        (
                            format!("for {var}: i32 in ({bound} as i32)..-1i32 step -{k}i32"),
                            "i32",
                        )
                    }
                    1 => (
                        format!("for {var}: u32 = {bound} * 4u32; {var} > 0u32; {var} >>= 1u32"),
                        "u32",
                    ),
                    _ => (format!("for {var}: u32 in 0u32..{bound}"), "u32"),
                };
                let label = if self.rng.chance(30) {
                    let l = self.fresh("l");
                    self.line(&format!("'{l}: {header} {{"));
                    Some(l)
                } else {
                    self.line(&format!("{header} {{"));
                    None
                };
                self.loop_depth += 1;
                self.labels.push(label.clone().unwrap_or_default());
                self.vars.push((var, vty, false));
                self.nested(|g| {
                    g.stmts(3);
                    if g.rng.chance(40) {
                        let c = g.expr("bool", 2);
                        let kw = if g.rng.chance(50) {
                            "break"
                        } else {
                            "continue"
                        };
                        let target = g
                            .labels
                            .iter()
                            .filter(|l| !l.is_empty())
                            .cloned()
                            .collect::<Vec<_>>();
                        let lab = if !target.is_empty() && g.rng.chance(40) {
                            format!(" '{}", g.rng.pick(&target))
                        } else {
                            String::new()
                        };
                        g.line(&format!("if {c} {{ {kw}{lab}; }}"));
                        g.stmts(2);
                    }
                });
                self.vars.pop();
                self.labels.pop();
                self.loop_depth -= 1;
                self.line("}");
            }
            11 if self.loop_depth < 2 => {
                // A bounded while loop.
                let w = self.fresh("w");
                self.line(&format!("let {w}: u32 = 0u32;"));
                let c = self.expr("bool", 1);
                self.line(&format!("while {w} < 3u32 && ({c} || {w} < 1u32) {{"));
                self.loop_depth += 1;
                self.labels.push(String::new());
                self.nested(|g| {
                    g.line(&format!("{w} += 1u32;"));
                    g.stmts(2);
                });
                self.labels.pop();
                self.loop_depth -= 1;
                self.line("}");
                self.vars.push((w, "u32", false));
            }
            12 if !self.helper => {
                // Atomics whose final values do not depend on the order: one operator per
                // element (different operators on one element do not commute), every kind
                // (`cnt` starts as [0, 0, MAX, 0, 0, MAX, 0, 0, 0]), now and then with an
                // explicit memory order. Their old values depend on the order: not folded.
                let slot = self.rng.below(7);
                let op = [
                    "atomic_add",
                    "atomic_max",
                    "atomic_min",
                    "atomic_xor",
                    "atomic_sub",
                    "atomic_and",
                    "atomic_or",
                ][slot as usize];
                let v = self.expr("u32", 2);
                let order = if self.rng.chance(25) {
                    format!(
                        ", {}",
                        self.rng
                            .pick(&["relaxed", "acquire", "release", "acq_rel", "seq_cst"])
                    )
                } else {
                    String::new()
                };
                self.line(&format!("{op}(cnt[{slot}u32], {v}{order});"));
            }
            16 if !self.helper => {
                // The compare-exchange retry idiom: an atomic add built from a CAS loop (its
                // final value is order-independent), or an exchange every work-item makes
                // with the same value.
                if self.rng.chance(60) {
                    let v = self.expr("u32", 2);
                    let (old, seen, add) = (self.fresh("old"), self.fresh("seen"), self.fresh("d"));
                    self.line(&format!("let {add}: u32 = {v};"));
                    self.line(&format!("let {old}: u32 = 0u32;"));
                    self.line("loop {");
                    self.indent += 1;
                    self.line(&format!(
                        "let {seen}: u32 = atomic_compare_exchange(cnt[7u32], {old}, {old} + {add});"
                    ));
                    self.line(&format!("if {seen} == {old} {{ break; }}"));
                    self.line(&format!("{old} = {seen};"));
                    self.indent -= 1;
                    self.line("}");
                } else {
                    self.line("atomic_exchange(cnt[8u32], 5u32);");
                }
            }
            17 if self.uniform && !self.returned && !self.helper => {
                // Barriers inside control flow every work-item takes alike: an `if` on a
                // kernel argument or a loop with a uniform trip count, around shared memory
                // (and the shared atomics) across barriers.
                let cond = if self.rng.chance(50) {
                    let k = 2 + self.rng.below(3);
                    let r = self.rng.below(k);
                    format!("if (n % {k}u32) == {r}u32 {{")
                } else {
                    let it = self.fresh("un");
                    let trips = if self.rng.chance(50) {
                        format!("{}u32", 1 + self.rng.below(3))
                    } else {
                        "(n % 3u32)".to_string()
                    };
                    format!("for {it}: u32 in 0u32..{trips} {{")
                };
                self.line(&cond);
                self.labels.push(String::new());
                let is_loop = cond.starts_with("for");
                if is_loop {
                    self.loop_depth += 1;
                }
                self.nested_uniform(|g| {
                    g.stmts(2);
                    g.shared_exchange();
                    g.stmts(1);
                });
                if is_loop {
                    self.loop_depth -= 1;
                }
                self.labels.pop();
                self.line("}");
            }
            18 if self.oob && !self.helper && self.loop_depth == 0 => self.oob_access(),
            14 if self.top_level && !self.returned => {
                // Shared memory across a barrier (top level: uniform control flow).
                self.shared_exchange();
            }
            15 if !self.helper && self.loop_depth == 0 && self.rng.chance(30) => {
                let c = self.expr("bool", 2);
                self.line(&format!("if {c} {{"));
                self.nested(|g| {
                    g.line("out_i[oi] = 77i32;");
                    g.line("out_l[gid] = acc;");
                    g.line("return;");
                });
                self.line("}");
                self.returned = true;
            }
            _ => {}
        }
    }

    /// Folds the value of `name` into the work-item's `acc`, which reaches `out_l`: every
    /// generated value reaches an output (NaNs as one pattern: their payloads may differ;
    /// floats on the CPU only, see `for_cpu`).
    fn fold(&mut self, name: &str, ty: &str) {
        if self.helper {
            // A helper's values reach the kernel through its result.
            return;
        }
        let bits = match ty {
            "f32" | "f16" | "f64" if !self.for_cpu => return,
            "bool" => format!("select({name}, 1u64, 2u64)"),
            "f32" => {
                format!("(select({name} != {name}, 2143289344u32, bitcast<u32>({name})) as u64)")
            }
            "f16" => format!(
                "(select({name} != {name}, 2143289344u32, bitcast<u32>({name} as f32)) as u64)"
            ),
            "f64" => {
                format!("select({name} != {name}, 9221120237041090560u64, bitcast<u64>({name}))")
            }
            _ => format!("({name} as u64)"),
        };
        self.line(&format!("acc = (acc * 1099511628211u64) ^ {bits};"));
    }

    /// A struct built from values in scope and a buffer read through a helper, copied whole,
    /// a field assigned, and every field folded (issue 23 items 4, 5).
    fn struct_stmt(&mut self) {
        let k = self.extra_var("i32", "a");
        let m = self.extra_var("u32", "gid");
        let at = self.extra_var("u32", "lid");
        let bump = self.extra.below(100);
        let s = self.fresh("st");
        self.line(&format!(
            "let {s}: Pt = Pt {{ k: {k} ^ {bump}i32, w: ld_f(in_f, {at} + {bump}u32), m: {m} }};"
        ));
        let t = if self.extra.chance(50) {
            let t = self.fresh("st");
            self.line(&format!("let {t}: Pt = {s};"));
            self.line(&format!("{t}.k = {t}.k + {s}.k;"));
            self.line(&format!("{t}.m = rotate_left({t}.m, {bump}u32);"));
            t
        } else {
            s
        };
        for (f, ty) in [("k", "i32"), ("w", "f32"), ("m", "u32")] {
            self.fold(&format!("{t}.{f}"), ty);
        }
    }

    /// A two-dimensional private array (issue 23 item 7) filled row-major from a value in
    /// scope and read back at indices from others.
    fn array_stmt(&mut self) {
        let (m, x, y) = (
            self.extra_var("u32", "gid"),
            self.extra_var("u32", "lid"),
            self.extra_var("u32", "n"),
        );
        let (rows, cols) = (2 + self.extra.below(3), 2 + self.extra.below(4));
        let (p, r, c) = (self.fresh("pa"), self.fresh("r"), self.fresh("c"));
        self.line(&format!("let {p}: [[u32; {cols}]; {rows}];"));
        self.line(&format!("for {r}: u32 in 0u32..{rows}u32 {{"));
        self.line(&format!("    for {c}: u32 in 0u32..{cols}u32 {{"));
        self.line(&format!(
            "        {p}[{r}][{c}] = ({m} ^ ({r} * {cols}u32 + {c})) * 2654435761u32;"
        ));
        self.line("    }");
        self.line("}");
        self.fold(&format!("{p}[{x} % {rows}u32][{y} % {cols}u32]"), "u32");
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self)) {
        let uniform = self.uniform;
        self.uniform = false;
        self.nested_uniform(f);
        self.uniform = uniform;
    }

    /// A nested scope that every work-item enters alike (see [`Gen::uniform`]).
    fn nested_uniform(&mut self, f: impl FnOnce(&mut Self)) {
        let top = self.top_level;
        self.top_level = false;
        self.indent += 1;
        let mark = self.vars.len();
        f(self);
        self.vars.truncate(mark);
        self.indent -= 1;
        self.top_level = top;
    }

    /// One out-of-bounds access by one work-item: in a buffer, shared or private memory for
    /// the CPU fuzzer, in shared memory for a GPU corpus (the lavapipe crashes of #15).
    fn oob_access(&mut self) {
        self.oob = false;
        let who = self.rng.below(self.total as u64);
        let kind = if self.for_cpu { self.rng.below(3) } else { 1 };
        let at = match kind {
            0 => format!("out_f[{}u32 + n] = 1.0;", self.total),
            1 => {
                let v = self.fresh("v");
                let far = *self.rng.pick(&[0u32, 1, 65536, 1 << 20]);
                format!(
                    "sh[lid + {}u32 + n] = 3i32; let {v}: i32 = sh[lid + {far}u32 + {}u32]; out_i[oi] = {v};",
                    self.block, self.block
                )
            }
            _ => {
                let a = self.fresh("arr");
                let v = self.fresh("v");
                format!(
                    "let {a}: [i32; 4]; {a}[0u32] = 1i32; {a}[1u32] = 2i32; {a}[2u32] = 3i32; {a}[3u32] = 4i32; let {v}: i32 = {a}[4u32 + n]; out_i[oi] = {v};"
                )
            }
        };
        self.line(&format!("if gid == {who}u32 {{ {at} }}"));
    }

    /// Shared memory across barriers (where every work-item gets here, [`Gen::uniform`]):
    /// each writes its element, reads a neighbour's after a barrier; with `shc`, atomics on
    /// shared elements read back after the barrier.
    fn shared_exchange(&mut self) {
        let e = self.expr("i32", 2);
        let v = self.fresh("s");
        let off = self.rng.below(self.block as u64 + 1);
        self.line(&format!("sh[lid] = {e};"));
        let atomic = self.shared_atomics && self.rng.chance(60);
        let slot = self.rng.below(4);
        if atomic {
            let op = ["atomic_add", "atomic_max", "atomic_min", "atomic_xor"][slot as usize];
            let x = self.expr("u32", 2);
            match self.inc_bound {
                Some(b) if slot == 0 => self.line(&format!("atomic_inc(shc[0u32], {b}u32);")),
                _ => self.line(&format!("{op}(shc[{slot}u32], {x});")),
            }
        }
        // A wave-level sync before the group's now and then (issue 23 item 3): every lane
        // of the wave reaches it here.
        if self.extra.chance(20) {
            self.line("wave_barrier();");
        }
        self.line("barrier();");
        self.line(&format!(
            "let {v}: i32 = sh[(lid + {off}u32) % {}u32];",
            self.block
        ));
        self.fold(&v, "i32");
        self.vars.push((v, "i32", true));
        if atomic {
            let c = self.fresh("c");
            if self.extra.chance(40) {
                // Issue 23 item 2.
                self.line(&format!(
                    "let {c}: u32 = atomic_load(shc[{slot}u32], acquire);"
                ));
            } else {
                self.line(&format!("let {c}: u32 = shc[{slot}u32];"));
            }
            self.fold(&c, "u32");
            self.vars.push((c, "u32", true));
        }
        self.line("barrier();");
    }
}

/// The helpers and the struct every generated file declares: a read through a read-only
/// buffer parameter (any index, taken modulo the length), a store through a read-write one.
const HELPERS: &str = "struct Pt { k: i32, w: f32, m: u32 }

device fn ld_f(b: buf<f32>, i: u32) -> f32 {
    return b[i % len(b)];
}

device fn put_l(b: buf<u64, rw>, i: u32, v: u64) {
    b[i] = v;
}

";

/// One generated kernel and the launch it is generated for: kernel `k` of `src`, over `grid`
/// workgroups of `block` x `by` work-items.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The kernel file's text (helpers, a tag set, kernel `k`), without a run block.
    pub src: String,
    /// Workgroups in the grid (x).
    pub grid: u32,
    /// The block's x dimension.
    pub block: u32,
    /// The block's y dimension.
    pub by: u32,
    /// The float tolerance of the run block: 4 when a kernel for every backend calls a
    /// transcendental function (the `pow` bound of docs/semantics.md, the loosest of those
    /// generated), 0 otherwise and always for the CPU, which uses the interpreter's functions.
    pub ulps: u32,
}

/// The kernel of `seed`, for every backend (no inexact float reductions).
pub fn generate(seed: u64) -> Case {
    generate_with(seed, false, false)
}

/// A kernel for the CPU fuzzer: also inexact float reductions (see `Gen::for_cpu`), and now
/// and then an out-of-bounds access.
pub fn generate_for_cpu(seed: u64) -> Case {
    generate_with(seed, true, false)
}

/// A kernel of a GPU corpus with one out-of-bounds shared-memory access.
pub fn generate_out_of_bounds(seed: u64) -> Case {
    generate_with(seed, false, true)
}

/// The kernel of `seed`; `for_cpu` adds what only the CPU computes bit for bit like the
/// interpreter (inexact float reductions, float values folded into the output, now and then
/// an out-of-bounds access); `out_of_bounds` one out-of-bounds shared-memory access.
pub fn generate_with(seed: u64, for_cpu: bool, out_of_bounds: bool) -> Case {
    let mut rng = Rng(seed);
    let block = *rng.pick(&[1u32, 3, 8, 13, 16, 32, 33, 64]);
    let grid = 1 + rng.below(3) as u32;
    // A 2-D block now and then (local ids then vary along x and y within a wave).
    let by = if rng.chance(25) {
        *rng.pick(&[2u32, 3, 4])
    } else {
        1
    };
    let block = if by > 1 { (block % 16).max(1) } else { block };
    let wave_attr = if rng.chance(30) {
        Some(*rng.pick(&[1u32, 2, 4, 8, 16, 32, 64]))
    } else {
        None
    };
    let mut g = Gen {
        rng,
        extra: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03),
        out: String::new(),
        vars: Vec::new(),
        next: 0,
        indent: 0,
        loop_depth: 0,
        labels: Vec::new(),
        budget: 14,
        block,
        helpers: Vec::new(),
        top_level: true,
        waves: true,
        tile_max: wave_attr.unwrap_or(64),
        helper: false,
        total: 0,
        full_waves: false,
        returned: false,
        for_cpu,
        transcendental: false,
        uniform: false,
        shared_atomics: false,
        oob: false,
        inc_bound: None,
    };
    // Device helpers (wave verbs inside see the lanes of the call site's mask).
    let nh = g.rng.below(3);
    for _ in 0..nh {
        let name = g.fresh("h");
        let a = *g.rng.pick(&["i32", "f32", "u32"]);
        let r = *g.rng.pick(&["i32", "f32", "u32"]);
        let _ = writeln!(g.out, "device fn {name}(p: {a}) -> {r} {{");
        g.indent = 1;
        g.vars = vec![("p".into(), a, false)];
        g.waves = true;
        g.helper = true;
        g.top_level = false;
        g.budget = 4;
        let c = g.expr("bool", 2);
        let early = g.expr(r, 2);
        g.line(&format!("if {c} {{ return {early}; }}"));
        g.stmts(3);
        let e = g.expr(r, 3);
        g.line(&format!("return {e};"));
        g.out.push_str("}\n\n");
        g.helpers.push((name, a, r));
    }
    g.out.push_str("tagset Pick = [pa, pb];\n\ndevice fn pa(x: i32) -> i32 {\n    return x * 3i32 + 1i32;\n}\n\ndevice fn pb(x: i32) -> i32 {\n    if x < 0i32 {\n        return -x;\n    }\n    return x ^ 85i32;\n}\n\n");
    // Helpers that take buffers (issue 23 item 4) and a struct (item 5), used by
    // `Gen::struct_stmt` and the final store.
    g.out.push_str(HELPERS);
    g.total = grid * block * by;
    g.block = block * by;
    g.waves = true;
    g.helper = false;
    g.top_level = true;
    g.indent = 1;
    g.budget = 14;
    if let Some(w) = wave_attr {
        let _ = writeln!(g.out, "@wave({w})");
    }
    g.full_waves = wave_attr.is_some_and(|w| (block * by) % w == 0);
    g.uniform = true;
    g.shared_atomics = g.rng.chance(40);
    g.inc_bound = g
        .extra
        .chance(40)
        .then(|| *g.extra.pick(&[0u32, 1, 5, 37, 4_294_967_295]));
    g.oob = out_of_bounds || (for_cpu && g.rng.chance(6));
    // The integer input in constant memory now and then (issue 23 item 8).
    let in_i = if g.extra.chance(30) {
        "buf<i32, const>"
    } else {
        "buf<i32>"
    };
    let _ = writeln!(
        g.out,
        "kernel k(out_i: buf<i32, rw>, out_f: buf<f32, rw>, out_l: buf<u64, rw>, cnt: buf<u32, rw>, in_i: {in_i}, in_f: buf<f32>, n: u32) {{"
    );
    // The exchange array laid out with padding now and then (issue 23 item 8): indexing
    // is unchanged, the placement is the backend's.
    let sh = format!("[i32; {}]", block * by);
    let sh = if g.extra.chance(25) {
        let b = *g.extra.pick(&[1u32, 2, 4, 8]);
        let pad = 1 + g.extra.below(3);
        format!("block_padded<{sh}, {b}, {pad}>")
    } else {
        sh
    };
    let _ = writeln!(g.out, "    shared sh: {sh};");
    if g.shared_atomics {
        // Initialised before anything can return (every work-item reaches the barrier).
        g.out.push_str("    shared shc: [u32; 4];\n    if local_id.x + local_id.y < 1u32 {\n        shc[0u32] = 0u32;\n        shc[1u32] = 0u32;\n        shc[2u32] = 4294967295u32;\n        shc[3u32] = 0u32;\n    }\n    barrier();\n");
    }
    g.out.push_str("    let gid: u32 = global_id.y * (num_groups.x * group_size.x) + global_id.x;\n    let lid: u32 = local_id.y * group_size.x + local_id.x;\n    let a: i32 = in_i[gid];\n    let f: f32 = in_f[gid];\n");
    // A function tag per work-item: dispatch through it goes down each member's lanes.
    g.out.push_str("    let tg: tag<Pick> = Pick::pa;\n    if (gid % 3u32) == 1u32 {\n        tg = Pick::pb;\n    }\n");
    // Every generated value is folded into `acc` (see `Gen::fold`); `g` is an inexact float
    // (not a multiple of a power of two) for order-dependent sums.
    g.out.push_str(
        "    let acc: u64 = 0u64;\n    let g: f32 = (in_i[gid] % 1000i32) as f32 / 7.0;\n",
    );
    // out_i is written through a permutation of the work-items: a scattered (not
    // contiguous) store on the CPU, race-free.
    let total = g.total;
    let oi = match g.rng.below(3) {
        0 => "gid".to_string(),
        1 => format!("({total}u32 - 1u32 - gid)"),
        _ => format!(
            "((gid + {}u32) % {total}u32)",
            1 + g.rng.below(total as u64)
        ),
    };
    let _ = writeln!(g.out, "    let oi: u32 = {oi};");
    g.vars = vec![("a".into(), "i32", true), ("f".into(), "f32", true)];
    g.stmts(10);
    if g.oob {
        g.oob_access();
    }
    let ei = g.expr("i32", 3);
    let ef = g.expr("f32", 3);
    let el = g.expr("u64", 2);
    g.line(&format!("out_i[oi] = {ei};"));
    g.line(&format!("out_f[gid] = {ef};"));
    if g.extra.chance(50) {
        g.line(&format!("put_l(out_l, gid, ({el}) ^ acc);"));
    } else {
        g.line(&format!("out_l[gid] = ({el}) ^ acc;"));
    }
    g.out.push_str("}\n");
    Case {
        ulps: if g.transcendental && !for_cpu { 4 } else { 0 },
        src: g.out,
        grid,
        block,
        by,
    }
}

/// The case's integer and float inputs, one per work-item.
pub fn inputs(case: &Case, seed: u64) -> (Vec<i32>, Vec<f32>) {
    let total = (case.grid * case.block * case.by) as usize;
    let mut rng = Rng(seed ^ 0x5151);
    let in_i: Vec<i32> = (0..total)
        .map(|_| (rng.next() as i32) >> (rng.below(30) as u32))
        .collect();
    let in_f: Vec<f32> = (0..total)
        .map(|_| {
            if rng.chance(10) {
                *rng.pick(&[0.0f32, -0.0, f32::INFINITY, f32::NAN, 1.0e-40])
            } else {
                (rng.below(2001) as f32 - 1000.0) / 8.0
            }
        })
        .collect();
    (in_i, in_f)
}

/// The case as a kernel file whose run block compares every output with the interpreter,
/// so that `xpu run DIR --backend B` fuzzes a backend this test binary cannot reach (a GPU
/// machine has the `xpu` binary, not Rust).
pub fn as_kernel_file(case: &Case, seed: u64) -> String {
    let total = case.grid * case.block * case.by;
    let (in_i, in_f) = inputs(case, seed);
    let floats: Vec<String> = in_f
        .iter()
        .map(|x| match x {
            x if x.is_nan() => "nan".to_string(),
            x if x.is_infinite() => "inf".to_string(),
            x => format!("{x:?}"),
        })
        .collect();
    let ints: Vec<String> = in_i.iter().map(i32::to_string).collect();
    format!(
        "// differential fuzz case, seed {seed}\n{src}\nrun k {{\n    grid = [{g}];\n    block = [{b}, {by}];\n{tol}    \
         arg out_i = fill({total}, -1);\n    arg out_f = fill({total}, -1.0);\n    arg out_l = fill({total}, 1);\n    \
         arg cnt = [0, 0, 4294967295, 0, 0, 4294967295, 0, 0, 0];\n    arg in_i = [{ints}];\n    arg in_f = [{floats}];\n    arg n = {n};\n    \
         expect out_i = interp;\n    expect out_f = interp;\n    expect out_l = interp;\n    expect cnt = interp;\n}}\n",
        src = case.src,
        g = case.grid,
        b = case.block,
        by = case.by,
        ints = ints.join(", "),
        floats = floats.join(", "),
        n = seed % 7,
        tol = match case.ulps {
            0 => String::new(),
            u => format!("    ulps = {u};\n"),
        },
    )
}

impl Case {
    /// The generated launch as a run block: the inputs of `seed` ([`inputs`]) and every
    /// output expected to agree with the interpreter (`expect NAME = interp;`).
    pub fn run_spec(
        &self,
        seed: u64,
    ) -> Result<crate::ir::text::run::RunSpec, crate::ir::Diagnostics> {
        let file = as_kernel_file(self, seed);
        let (_, mut specs) = crate::ir::parse_file(&file)?;
        Ok(specs.remove(0))
    }
}
