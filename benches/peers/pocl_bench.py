#!/usr/bin/env python3
"""Peer benchmarks on PoCL's CPU device through pyopencl.

Runs the OpenCL C kernels beside this file, checks each result against numpy
(a kernel whose result is wrong is reported on stderr, never on stdout), and
prints one JSON object per kernel on stdout. See README.md.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

HERE = Path(__file__).resolve().parent
KERNELS = ("saxpy", "triad", "reduce", "wave_reduce", "sgemm", "mandelbrot")
GROUP = 256  # work-items per group for the 1-D kernels
TILE = 16  # the 2-D kernels run 16x16 groups


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help="comma-separated subset of: " + ",".join(KERNELS))
    p.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    p.add_argument("--threads", type=int,
                   help="PoCL worker threads (sets POCL_MAX_PTHREAD_COUNT; default: all cores)")
    p.add_argument("--stream-n", type=int, default=64 << 20,
                   help="floats per array for saxpy and triad (default 64M)")
    p.add_argument("--reduce-n", type=int, default=64 << 20,
                   help="floats summed by reduce and wave_reduce (default 64M)")
    p.add_argument("--sgemm-n", type=int, default=1024,
                   help="matrix order for sgemm, a multiple of 16 (default 1024)")
    p.add_argument("--mandelbrot", default="2048x2048", metavar="WxH",
                   help="mandelbrot image size (default 2048x2048)")
    p.add_argument("--max-iter", type=int, default=256,
                   help="mandelbrot iteration limit (default 256)")
    args = p.parse_args()
    args.kernels = args.kernels.split(",")
    unknown = set(args.kernels) - set(KERNELS)
    if unknown:
        p.error("unknown kernels: " + ",".join(sorted(unknown)))
    if args.sgemm_n % TILE:
        p.error(f"--sgemm-n must be a multiple of {TILE}")
    args.width, args.height = (int(v) for v in args.mandelbrot.split("x"))
    return args


def load_pyopencl(threads):
    """Import pyopencl with PoCL configured; PoCL reads its environment when
    the platform is loaded, so this must run before the import."""
    if threads:
        os.environ["POCL_MAX_PTHREAD_COUNT"] = str(threads)
    # Time real builds: no PoCL kernel cache, no pyopencl binary cache.
    os.environ["POCL_KERNEL_CACHE"] = "0"
    os.environ["PYOPENCL_NO_CACHE"] = "1"
    import pyopencl
    return pyopencl


def round_up(n, m):
    return (n + m - 1) // m * m


class CheckFailed(Exception):
    pass


class Case(NamedTuple):
    """One kernel's launch, ready to time."""
    args: tuple  # kernel arguments; holding them keeps the buffers alive
    global_size: tuple
    local_size: tuple
    check: Callable[[], None]  # raises CheckFailed unless the first launch was right
    fields: dict  # the record's size fields
    rate: tuple  # (record key, work per launch in its unit: GB, GFLOP or Mpixel)


def expect_close(name, got, want, rtol):
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=0):
        bad = np.flatnonzero(~np.isclose(got, want, rtol=rtol, atol=0))
        raise CheckFailed(f"{name}: {bad.size} of {want.size} values differ from numpy "
                          f"(first at {bad[0]}: got {got.flat[bad[0]]}, want {want.flat[bad[0]]})")


class Bench:
    def __init__(self, cl, args):
        self.cl = cl
        self.args = args
        platform = next((p for p in cl.get_platforms()
                         if p.name == "Portable Computing Language"), None)
        if platform is None:
            sys.exit("pocl_bench: no PoCL platform (apt-get install pocl-opencl-icd)")
        self.device = platform.get_devices(device_type=cl.device_type.CPU)[0]
        self.ctx = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.ctx)
        # PoCL's first build in a process also pays its compiler's start-up;
        # pay it here so that every kernel's build_s is comparable.
        cl.Program(self.ctx, "__kernel void warm_up(void) {}").build()
        self.rng = np.random.default_rng(1)

    def buffer(self, host, flags):
        mf = self.cl.mem_flags
        return self.cl.Buffer(self.ctx, flags | mf.COPY_HOST_PTR, hostbuf=host)

    def input(self, host):
        return self.buffer(host, self.cl.mem_flags.READ_ONLY)

    def output(self, nbytes):
        return self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, nbytes)

    def read(self, buf, dtype, count):
        host = np.empty(count, dtype)
        self.cl.enqueue_copy(self.queue, host, buf)
        return host

    def timed(self, kernel, global_size, local_size):
        start = time.perf_counter()
        self.cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        self.queue.finish()
        return time.perf_counter() - start

    def run(self, name):
        """Build, verify and time one kernel; returns its JSON record."""
        source = (HERE / f"{name}.cl").read_text()
        start = time.perf_counter()
        program = self.cl.Program(self.ctx, source).build()
        build_s = time.perf_counter() - start

        kernel = self.cl.Kernel(program, name)
        case = getattr(self, name)()
        kernel.set_args(*case.args)
        # The first launch also pays PoCL's per-work-group-size code generation.
        first_run_s = self.timed(kernel, case.global_size, case.local_size)
        case.check()
        times = [self.timed(kernel, case.global_size, case.local_size)
                 for _ in range(self.args.reps)]
        median_s = statistics.median(times)
        key, work = case.rate
        return {"peer": "pocl", "kernel": name, **case.fields, "median_s": median_s,
                key: work / median_s, "build_s": build_s, "first_run_s": first_run_s,
                "reps": self.args.reps, "threads": self.device.max_compute_units}

    # One method per kernel, returning its Case.

    def saxpy(self):
        n = self.args.stream_n
        x = self.rng.random(n, dtype=np.float32)
        y = self.rng.random(n, dtype=np.float32)
        a = np.float32(2.5)
        y_buf = self.buffer(y, self.cl.mem_flags.READ_WRITE)

        def check():
            expect_close("saxpy", self.read(y_buf, np.float32, n), a * x + y, rtol=1e-6)

        return Case((np.uint32(n), a, self.input(x), y_buf), (round_up(n, GROUP),), (GROUP,),
                    check, {"n": n}, ("gbps", 12 * n / 1e9))

    def triad(self):
        n = self.args.stream_n
        b = self.rng.random(n, dtype=np.float32)
        c = self.rng.random(n, dtype=np.float32)
        s = np.float32(3.0)
        a_buf = self.output(4 * n)

        def check():
            expect_close("triad", self.read(a_buf, np.float32, n), b + s * c, rtol=1e-6)

        return Case((np.uint32(n), s, a_buf, self.input(b), self.input(c)),
                    (round_up(n, GROUP),), (GROUP,), check, {"n": n}, ("gbps", 12 * n / 1e9))

    def reduce(self, name="reduce"):
        n = self.args.reduce_n
        groups = round_up(n, GROUP) // GROUP
        x = self.rng.random(n, dtype=np.float32)
        partial_buf = self.output(4 * groups)

        def check():
            padded = np.zeros(groups * GROUP)
            padded[:n] = x
            expect_close(name, self.read(partial_buf, np.float32, groups),
                         padded.reshape(groups, GROUP).sum(axis=1), rtol=1e-5)

        return Case((np.uint32(n), self.input(x), partial_buf), (groups * GROUP,), (GROUP,),
                    check, {"n": n}, ("gbps", 4 * n / 1e9))

    def wave_reduce(self):
        case = self.reduce("wave_reduce")
        # Which path wave_reduce.cl compiled (built as OpenCL C 1.2, so only
        # the extension counts).
        case.fields["subgroups"] = "cl_khr_subgroups" in self.device.extensions
        return case

    def sgemm(self):
        n = self.args.sgemm_n
        a = self.rng.random((n, n), dtype=np.float32)
        b = self.rng.random((n, n), dtype=np.float32)
        c_buf = self.output(4 * n * n)

        def check():
            want = a.astype(np.float64) @ b.astype(np.float64)
            expect_close("sgemm", self.read(c_buf, np.float32, n * n).reshape(n, n), want,
                         rtol=1e-4)

        return Case((np.uint32(n), self.input(a), self.input(b), c_buf), (n, n), (TILE, TILE),
                    check, {"n": n}, ("gflops", 2 * n**3 / 1e9))

    def mandelbrot(self):
        w, h, max_iter = self.args.width, self.args.height, self.args.max_iter
        x0, y0 = np.float32(-2.0), np.float32(-1.5)
        dx, dy = np.float32(3.0 / w), np.float32(3.0 / h)
        out_buf = self.output(4 * w * h)

        def check():
            got = self.read(out_buf, np.uint32, w * h)
            want = mandelbrot_reference(w, h, x0, y0, dx, dy, max_iter)
            # OpenCL C lets the compiler fuse multiply-adds (PoCL does), and near
            # the set's boundary a one-ulp difference changes the escape count:
            # about 0.1-0.3% of pixels differ from numpy's unfused float32.
            differ = np.count_nonzero(got != want)
            if differ > 0.01 * w * h:
                raise CheckFailed(f"mandelbrot: {differ} of {w * h} pixels differ from numpy")

        return Case((np.uint32(w), np.uint32(h), x0, y0, dx, dy, np.uint32(max_iter), out_buf),
                    (round_up(w, TILE), round_up(h, TILE)), (TILE, TILE), check,
                    {"width": w, "height": h, "max_iter": max_iter}, ("mpixels", w * h / 1e6))


def mandelbrot_reference(w, h, x0, y0, dx, dy, max_iter):
    """Escape counts in float32, iterating only the pixels not yet escaped."""
    cr = np.tile(x0 + np.arange(w, dtype=np.float32) * dx, h)
    ci = np.repeat(y0 + np.arange(h, dtype=np.float32) * dy, w)
    counts = np.full(w * h, max_iter, np.uint32)
    live = np.arange(w * h)
    zr = np.zeros(w * h, np.float32)
    zi = np.zeros(w * h, np.float32)
    for it in range(max_iter):
        escaped = zr * zr + zi * zi > np.float32(4.0)
        counts[live[escaped]] = it
        keep = ~escaped
        live, zr, zi, cr, ci = live[keep], zr[keep], zi[keep], cr[keep], ci[keep]
        zr, zi = zr * zr - zi * zi + cr, np.float32(2.0) * zr * zi + ci
    return counts


def main():
    args = parse_args()
    bench = Bench(load_pyopencl(args.threads), args)
    failed = False
    for name in args.kernels:
        try:
            print(json.dumps(bench.run(name)), flush=True)
        except CheckFailed as err:
            print(f"pocl_bench: {err}; not reported", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
