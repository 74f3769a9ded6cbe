#!/usr/bin/env python3
"""Which streaming-kernel shape reaches the device copy's bandwidth? (issue #5)

Usage (on the GPU machine): python3 benches/peers/cuda/shapes.py [--elems N]

Compiles shapes.cu with nvcc -O3 for the device, checks every saxpy variant against a
float64 reference on random data (output poisoned first), then times each (CUDA-event median
of 30 rounds after a warm-up, two passes, inputs rotated between two sets so L2 never holds
them) and prints GB/s and the ratio to a device-to-device copy measured in the same run.
Bytes: saxpy 12 per element, copy 8, DtoD 2 x its size.
"""
import argparse, os, subprocess, tempfile
import cupy as cp
import numpy as np


def median_ms(fn, reps=30):
    fn(0); cp.cuda.Device().synchronize()
    ts = []
    for r in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); fn(r); b.record(); b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elems", type=int, default=256 << 20)
    args = ap.parse_args()
    n = args.elems
    here = os.path.dirname(os.path.abspath(__file__))
    cc = "".join(map(str, cp.cuda.Device().compute_capability))
    cubin = os.path.join(tempfile.mkdtemp(), "shapes.cubin")
    subprocess.check_call(["nvcc", "-O3", f"-arch=sm_{cc}", "-cubin", "-o", cubin,
                           os.path.join(here, "shapes.cu")])
    mod = cp.RawModule(path=cubin)
    f = lambda k: mod.get_function(k)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rng = np.random.default_rng(1)
    sets = [(cp.asarray(rng.standard_normal(n, dtype=np.float32)),
             cp.asarray(rng.standard_normal(n, dtype=np.float32))) for _ in range(2)]
    a = np.float32(1.5)
    blocks = lambda b, per=1: ((n // per + b - 1) // b,)
    variants = {
        "saxpy_1 b256": ("saxpy_1", blocks(256), 256, 1),
        "saxpy_1 b128": ("saxpy_1", blocks(128), 128, 1),
        "saxpy_1 b512": ("saxpy_1", blocks(512), 512, 1),
        "saxpy_1 b1024": ("saxpy_1", blocks(1024), 1024, 1),
        "saxpy_cs b256": ("saxpy_cs", blocks(256), 256, 1),
        "saxpy_l2 b256": ("saxpy_l2", blocks(256), 256, 1),
        "saxpy_c2 b256": ("saxpy_c2", blocks(256, 2), 256, 1),
        "saxpy_c4 b256": ("saxpy_c4", blocks(256, 4), 256, 1),
        "saxpy_c8 b256": ("saxpy_c8", blocks(256, 8), 256, 1),
        "saxpy_loop4 b256": ("saxpy_loop4", blocks(256, 4), 256, 1),
        "saxpy_v4 b256": ("saxpy_v4", blocks(256, 4), 256, 4),
        "saxpy_gs 8/SM b256": ("saxpy_gs", (sms * 8,), 256, 1),
        "saxpy_gs 32/SM b256": ("saxpy_gs", (sms * 32,), 256, 1),
    }
    # Correctness first: every variant against float64 on random data, output poisoned.
    x, y0 = sets[0]
    ref = (np.float64(a) * cp.asnumpy(x).astype(np.float64) + cp.asnumpy(y0).astype(np.float64))
    for name, (k, grid, blk, per) in variants.items():
        y = y0.copy()
        cnt = np.uint32(n // per)
        f(k)(grid, (blk,), (y, x, a, cnt))
        cp.cuda.Device().synchronize()
        got = cp.asnumpy(y).astype(np.float64)
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        if not np.isfinite(err) or err > 1e-6:
            raise SystemExit(f"{name}: wrong, relative error {err}")
    print("all variants agree with float64 (rel err < 1e-6)")

    rows = []
    for rnd in range(2):
        dst = cp.empty(n, dtype=cp.float32)
        copy_ms = median_ms(lambda r: dst.data.copy_from_device(sets[r % 2][0].data, n * 4))
        dtod = 2 * n * 4 / copy_ms / 1e6
        rows.append(("memcpy DtoD", dtod, 1.0, rnd))
        for name, (k, grid, blk, per) in variants.items():
            kern = f(k)
            cnt = np.uint32(n // per)
            ms = median_ms(lambda r: kern(grid, (blk,), (sets[r % 2][1], sets[r % 2][0], a, cnt)))
            g = 12 * n / ms / 1e6
            rows.append((name, g, g / dtod, rnd))
        for name, k, blk, per in (("copy_1 b256", "copy_1", 256, 1), ("copy_v4 b256", "copy_v4", 256, 4)):
            kern = f(k)
            ms = median_ms(lambda r: kern(blocks(blk, per), (blk,), (dst, sets[r % 2][0], np.uint32(n // per))))
            g = 8 * n / ms / 1e6
            rows.append((name, g, g / dtod, rnd))
    print(f"{'variant':<22} {'GB/s r1':>9} {'xDtoD r1':>9} {'GB/s r2':>9} {'xDtoD r2':>9}")
    names = list(dict.fromkeys(r[0] for r in rows))
    for nm in names:
        rs = [r for r in rows if r[0] == nm]
        print(f"{nm:<22} " + " ".join(f"{r[1]:>9.1f} {r[2]:>9.3f}" for r in rs))


if __name__ == "__main__":
    main()
