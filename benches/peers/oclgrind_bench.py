#!/usr/bin/env python3
"""Peer benchmarks on Oclgrind, the OpenCL device simulator, via oclgrind-kernel.

For each kernel it writes a .sim file into a temporary folder, checks one run's
output against numpy (a kernel whose result is wrong, or that Oclgrind reports
errors for, is reported on stderr, never on stdout), counts the instructions
executed, and times runs with Oclgrind's default checks and with
--data-races --uninitialized added. Prints one JSON object per kernel and mode
on stdout. See README.md.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERNELS = ("saxpy", "reduce", "sgemm")
GROUP = 256  # work-items per group for the 1-D kernels
TILE = 16  # sgemm runs 16x16 groups
MODES = {"default": [], "races+uninit": ["--data-races", "--uninitialized"]}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help="comma-separated subset of: " + ",".join(KERNELS))
    p.add_argument("--reps", type=int, default=3, help="timed repetitions (default 3)")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="Oclgrind worker threads, --num-threads (default: all cores)")
    p.add_argument("--saxpy-n", type=int, default=1 << 20,
                   help="saxpy elements, a multiple of 256 from 768 to 2^24 (default 1M)")
    p.add_argument("--reduce-n", type=int, default=1 << 18,
                   help="reduce elements, a multiple of 256 from 768 to 2^24 (default 256K)")
    p.add_argument("--sgemm-n", type=int, default=128,
                   help="sgemm matrix order, a multiple of 16 from 32 (default 128)")
    args = p.parse_args()
    args.kernels = args.kernels.split(",")
    unknown = set(args.kernels) - set(KERNELS)
    if unknown:
        p.error("unknown kernels: " + ",".join(sorted(unknown)))
    # Inputs come from .sim ranges, exact in float32 only up to 2^24; the
    # rates need more than the two work-groups that --quick runs.
    for name in ("saxpy_n", "reduce_n"):
        n = getattr(args, name)
        if n % GROUP or not 2 * GROUP < n <= 1 << 24:
            p.error(f"--{name.replace('_', '-')} must be a multiple of {GROUP}"
                    f" from {3 * GROUP} to 2^24")
    if args.sgemm_n % TILE or args.sgemm_n < 2 * TILE:
        p.error(f"--sgemm-n must be a multiple of {TILE} from {2 * TILE}")
    return args


class CheckFailed(Exception):
    pass


class Sim:
    """One kernel's simulation: its .sim text (with or without dumping the
    output buffer), the expected output, and the record's size fields."""

    def __init__(self, name, ndrange, wgsize, args, expected, fields):
        self.name = name
        self.ndrange = ndrange
        self.wgsize = wgsize
        self.args = args  # (header, data) per kernel argument; one is marked "dump"
        self.expected = expected
        self.fields = fields
        self.work_items = int(np.prod(ndrange))
        self.groups = self.work_items // int(np.prod(wgsize))

    def text(self, dump):
        lines = [f"{self.name}.cl", self.name,
                 " ".join(map(str, self.ndrange)), " ".join(map(str, self.wgsize))]
        for header, data in self.args:
            if not dump:
                header = header.replace(" dump", "")
            lines.append(f"<{header}>")
            if data is not None:
                lines.append(data)
        return "\n".join(lines) + "\n"


def floats(values):
    return "\n".join(f"{v:.9g}" for v in values.ravel())


def saxpy(n):
    a = 2.0
    x = np.arange(n, dtype=np.float32)
    expected = np.float32(a) * x + np.float32(1.0)
    return Sim("saxpy", (n, 1, 1), (GROUP, 1, 1), [
        ("size=4 uint", str(n)),
        ("size=4 float", str(a)),
        (f"size={4 * n} float range=0:1:{n - 1}", None),
        (f"size={4 * n} float fill=1 dump", None),
    ], expected, {"n": n})


def reduce(n):
    groups = n // GROUP
    expected = np.arange(n, dtype=np.float64).reshape(groups, GROUP).sum(axis=1)
    return Sim("reduce", (n, 1, 1), (GROUP, 1, 1), [
        ("size=4 uint", str(n)),
        (f"size={4 * n} float range=0:1:{n - 1}", None),
        (f"size={4 * groups} float fill=0 dump", None),
    ], expected, {"n": n})


def sgemm(n):
    rng = np.random.default_rng(1)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).ravel()
    return Sim("sgemm", (n, n, 1), (TILE, TILE, 1), [
        ("size=4 uint", str(n)),
        (f"size={4 * n * n} float", floats(a)),
        (f"size={4 * n * n} float", floats(b)),
        (f"size={4 * n * n} float fill=0 dump", None),
    ], expected, {"n": n})


class Runner:
    def __init__(self, workdir, threads):
        self.workdir = workdir
        self.threads = threads

    def run(self, sim_file, options):
        """Runs oclgrind-kernel; returns (wall seconds, stdout)."""
        cmd = ["oclgrind-kernel", "--num-threads", str(self.threads), *options, sim_file]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=self.workdir, capture_output=True, text=True)
        wall = time.perf_counter() - start
        # Oclgrind reports what its checks find on stderr and still exits 0.
        if proc.returncode or proc.stderr.strip():
            report = "\n".join(proc.stderr.strip().splitlines()[:12])
            raise CheckFailed(f"{' '.join(cmd)} exited {proc.returncode}:\n{report}\n...")
        return wall, proc.stdout

    def median(self, sim_file, options, reps):
        return statistics.median(self.run(sim_file, options)[0] for _ in range(reps))


def check_dump(sim, stdout):
    """Compares the dumped output buffer with the expected values (Oclgrind
    prints 6 significant digits)."""
    got = np.array([float(v) for v in re.findall(r"^\s+\w+\[\d+\] = (\S+)$", stdout, re.M)])
    if got.shape != sim.expected.shape or not np.allclose(got, sim.expected, rtol=1e-5):
        raise CheckFailed(f"{sim.name}: output differs from numpy")


def instruction_count(stdout):
    """Total of the --inst-counts histogram: LLVM IR instructions executed."""
    return sum(int(c) for c in re.findall(r"^\s+(\d+) - ", stdout, re.M))


def bench(runner, sim, reps, threads):
    for dump in (True, False):
        (runner.workdir / f"{sim.name}{'_check' if dump else ''}.sim").write_text(sim.text(dump))
    # The checked run has every check on, so that nothing is timed before
    # Oclgrind has found the kernel clean.
    _, stdout = runner.run(f"{sim.name}_check.sim", ["--inst-counts", *MODES["races+uninit"]])
    check_dump(sim, stdout)
    instructions = instruction_count(stdout)

    # --quick runs only the first and last work-groups: its time is start-up,
    # program build and argument set-up, which the rates leave out.
    simulated = (sim.groups - 2) / sim.groups
    for mode, options in MODES.items():
        startup_s = runner.median(f"{sim.name}.sim", [*options, "--quick"], reps)
        median_s = runner.median(f"{sim.name}.sim", options, reps)
        net_s = median_s - startup_s
        yield {"peer": "oclgrind", "kernel": sim.name, **sim.fields, "checks": mode,
               "median_s": median_s, "startup_s": startup_s,
               "work_items": sim.work_items, "instructions": instructions,
               "work_items_per_s": sim.work_items * simulated / net_s,
               "insts_per_s": instructions * simulated / net_s,
               "reps": reps, "threads": threads}


def main():
    args = parse_args()
    if not shutil.which("oclgrind-kernel"):
        sys.exit("oclgrind_bench: oclgrind-kernel not found (apt-get install oclgrind)")
    sims = {"saxpy": lambda: saxpy(args.saxpy_n), "reduce": lambda: reduce(args.reduce_n),
            "sgemm": lambda: sgemm(args.sgemm_n)}
    failed = False
    with tempfile.TemporaryDirectory(prefix="oclgrind_bench_") as tmp:
        workdir = Path(tmp)
        runner = Runner(workdir, args.threads)
        for name in args.kernels:
            shutil.copy(HERE / f"{name}.cl", workdir)
            try:
                for record in bench(runner, sims[name](), args.reps, args.threads):
                    print(json.dumps(record), flush=True)
            except CheckFailed as err:
                print(f"oclgrind_bench: {err}; not reported", file=sys.stderr)
                failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
