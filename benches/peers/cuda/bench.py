#!/usr/bin/env python3
"""Peers for `xpu bench cuda`, measured in the same run on the same GPU.

Usage (on the GPU machine, from the repository root):
    python3 benches/peers/cuda/bench.py [--xpu ./xpu] [--elems N] [--gemm N]

Runs `xpu bench cuda --json`, then the same kernels compiled by nvcc (kernels.cu, loaded with
CuPy), a device-to-device copy, and torch.matmul in fp32 with TF32 off, and prints a table of
xpu / peer ratios. Timings are CUDA-event medians of 20 rounds after a warm-up.
"""
import argparse, json, os, subprocess, sys, tempfile

def median_ms(fn, reps=20):
    import cupy as cp
    fn(); cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); fn(); b.record(); b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    times.sort()
    return times[len(times) // 2]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xpu", default="./xpu")
    ap.add_argument("--elems", type=int, default=256 << 20)
    ap.add_argument("--gemm", type=int, default=4096)
    args = ap.parse_args()

    out = subprocess.run([args.xpu, "bench", "cuda", "--json", "--elems", str(args.elems),
                          "--gemm", str(args.gemm)], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout, out.stderr, file=sys.stderr)
        sys.exit(1)
    ours = json.loads(out.stdout)

    import cupy as cp
    here = os.path.dirname(os.path.abspath(__file__))
    cc = cp.cuda.Device().compute_capability
    tmp = tempfile.mkdtemp()
    cubin = os.path.join(tmp, "kernels.cubin")
    subprocess.check_call(["nvcc", "-O3", f"-arch=sm_{cc}", "-cubin", "-o", cubin,
                           os.path.join(here, "kernels.cu")])
    mod = cp.RawModule(path=cubin)
    saxpy, triad, sgemm = (mod.get_function(k) for k in ("saxpy", "triad", "sgemm"))
    # xpu never contracts a * b + c into an fma (docs/semantics.md); nvcc does by default, so
    # the like-for-like peer is nvcc -fmad=false, printed beside the default build.
    cubin_nofma = os.path.join(tmp, "kernels_nofma.cubin")
    subprocess.check_call(["nvcc", "-O3", "-fmad=false", f"-arch=sm_{cc}", "-cubin", "-o",
                           cubin_nofma, os.path.join(here, "kernels.cu")])
    mod_nofma = cp.RawModule(path=cubin_nofma)
    sgemm_nofma = mod_nofma.get_function("sgemm")
    # fma() written out in the kernel text (built -fmad=false, so fused only where written).
    sgemm_fma = mod_nofma.get_function("sgemm_fma")

    n = args.elems
    x = cp.ones(n, dtype=cp.float32); y = cp.ones(n, dtype=cp.float32); z = cp.ones(n, dtype=cp.float32)
    grid = ((n + 255) // 256,)
    peer = {}
    ms = median_ms(lambda: y.data.copy_from_device(x.data, n * 4))
    peer["memcpy DtoD (GB/s)"] = 2 * n * 4 / ms / 1e6
    ms = median_ms(lambda: saxpy(grid, (256,), (y, x, cp.float32(2.0), cp.uint32(n))))
    peer["saxpy (GB/s)"] = 3 * n * 4 / ms / 1e6
    ms = median_ms(lambda: triad(grid, (256,), (y, x, z, cp.float32(3.0), cp.uint32(n))))
    peer["triad (GB/s)"] = 3 * n * 4 / ms / 1e6
    del x, y, z

    g = args.gemm - args.gemm % 64
    a = (cp.arange(g * g, dtype=cp.float32) * 7 % 5 - 2).reshape(g, g)
    c = cp.empty_like(a)
    ms = median_ms(lambda: sgemm((g // 64, g // 64), (16, 16), (c, a, a, cp.uint32(g))))
    key = f"sgemm {g}^3 (TFLOP/s)"
    peer[key] = 2 * g ** 3 / ms / 1e9
    ms = median_ms(lambda: sgemm_nofma((g // 64, g // 64), (16, 16), (c, a, a, cp.uint32(g))))
    nofma_tflops = 2 * g ** 3 / ms / 1e9
    ms = median_ms(lambda: sgemm_fma((g // 64, g // 64), (16, 16), (c, a, a, cp.uint32(g))))
    fma_tflops = 2 * g ** 3 / ms / 1e9
    torch_tflops = None
    try:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        ta = torch.as_tensor(a, device="cuda")
        ms = median_ms(lambda: torch.matmul(ta, ta))
        torch_tflops = 2 * g ** 3 / ms / 1e9
    except Exception as e:  # torch absent: the nvcc column still stands
        print(f"torch.matmul skipped: {e}", file=sys.stderr)

    print(f"device: {ours.get('device')}")
    print(f"{'measure':<34} {'xpu':>10} {'nvcc/copy':>10} {'ratio':>7}")
    for k, v in peer.items():
        if k in ours:
            print(f"{k:<34} {ours[k]:>10.3f} {v:>10.3f} {ours[k] / v:>7.3f}")
    for k in ("saxpy (GB/s)", "triad (GB/s)"):
        print(f"{k + ' vs DtoD':<34} {ours[k]:>10.3f} {peer['memcpy DtoD (GB/s)']:>10.3f} "
              f"{ours[k] / peer['memcpy DtoD (GB/s)']:>7.3f}")
    print(f"{key + ' vs nvcc -fmad=false':<34} {ours[key]:>10.3f} {nofma_tflops:>10.3f} "
          f"{ours[key] / nofma_tflops:>7.3f}")
    print(f"{'sgemm fma() written vs nvcc default':<34} {fma_tflops:>10.3f} {peer[key]:>10.3f} "
          f"{fma_tflops / peer[key]:>7.3f}")
    if torch_tflops:
        print(f"{key + ' vs torch fp32':<34} {ours[key]:>10.3f} {torch_tflops:>10.3f} "
              f"{ours[key] / torch_tflops:>7.3f}")
    lk = "launch, xpu (us)"; bk = "launch, bare cuLaunchKernel (us)"
    if lk in ours and bk in ours:
        print(f"{'host launch cost (us)':<34} {ours[lk]:>10.3f} {ours[bk]:>10.3f} {ours[lk] / ours[bk]:>7.3f}")

if __name__ == "__main__":
    main()
