#!/usr/bin/env python3
"""Lists the `crate::` / `super::` imports of src/ that point up the layer order.

The layers, bottom to top: ir, interp, codegen, hal, bundle, backend, record, runtime, gate, tune, filetest/bench/fuzz/repl, cli,
and the crate root (lib.rs, main.rs); config.rs and deadline.rs sit at the bottom, leaves
that every layer may read.
A file's layer is the first folder under src/. `python3 scripts/layers.py` prints every upward
edge as `from -> to (line)` and a summary; `--old` maps the pre-redesign tree (src/jit,
src/devices, runtime files at src/) onto the same layers, for a before/after comparison.
"""
import os, re, sys

ORDER = ["config", "ir", "interp", "codegen", "hal", "bundle", "backend", "record", "runtime", "gate", "tune", "filetest", "bench", "cli", "root"]
RANK = {n: i for i, n in enumerate(ORDER)}
RANK["bench"] = RANK["filetest"]  # siblings
# The fuzzing kit and the REPL session sit beside the runner they drive.
RANK["fuzz"] = RANK["repl"] = RANK["filetest"]
# The process-wide leaves every layer may read: the settings and the deadline watchdog.
RANK["deadline"] = RANK["config"]
RANK["profile"] = RANK["config"]  # the profiler's sink: a leaf every layer may push to

OLD = [  # (path prefix, layer) for the tree before the redesign; first match wins
    ("src/jit/pool.rs", "backend"), ("src/jit/", "codegen"),
    ("src/devices/llvm/", "codegen"), ("src/devices/f64math/", "codegen"),
    ("src/devices/mathconst.rs", "codegen"), ("src/devices/vulkan/spirv.rs", "codegen"),
    ("src/devices/vulkan/math.rs", "codegen"), ("src/devices/vulkan/bench.rs", "bench"),
    ("src/devices/bench_data.rs", "bench"), ("src/devices/coarse.rs", "runtime"),
    ("src/devices/mod.rs", "runtime"), ("src/devices/", "backend"),
    ("src/launch.rs", "hal"), ("src/facts.rs", "hal"), ("src/manifest.rs", "hal"),
    ("src/buffer.rs", "runtime"), ("src/stream.rs", "runtime"), ("src/timer.rs", "runtime"),
]

def layer(path, old):
    if old:
        for prefix, name in OLD:
            if path.startswith(prefix):
                return name
    rel = path[len("src/"):]
    if "/" not in rel:
        stem = rel[:-3]
        return stem if stem in RANK else "root"
    return rel.split("/")[0]

def module_file(parts):
    """The file that defines module path `parts` (a list under src/), or None."""
    for n in range(len(parts), 0, -1):
        base = os.path.join("src", *parts[:n])
        for cand in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.isfile(cand):
                return cand
    return None

def module_of(path):
    rel = path[len("src/"):-3].split("/")
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel

PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")

def main():
    old = "--old" in sys.argv
    files = [os.path.join(d, f) for d, _, fs in os.walk("src") for f in fs if f.endswith(".rs")]
    up = []
    for f in sorted(files):
        mine = module_of(f)
        for ln, line in enumerate(open(f), 1):
            code = line.split("//")[0]
            for m in PATH.finditer(code):
                segs = m.group(2).split("::")[1:]
                if m.group(1) == "crate":
                    parts = segs
                else:
                    base = mine[:-1]
                    while segs and segs[0] == "super":
                        segs = segs[1:]
                        base = base[:-1]
                    parts = base + segs
                target = module_file(parts)
                if target is None or target == f:
                    continue
                a, b = layer(f, old), layer(target, old)
                if a in RANK and b in RANK and RANK[b] > RANK[a]:
                    up.append((f, target, ln))
    seen = set()
    for f, t, ln in up:
        if (f, t) in seen:
            continue
        seen.add((f, t))
        print(f"{f} -> {t} ({ln})")
    print(f"{len(seen)} upward file edges ({'old' if old else 'current'} layout)")

main()
