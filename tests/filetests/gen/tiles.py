#!/usr/bin/env python3
"""Writes tests/filetests/wave/tiles.xk and tests/filetests/ports/tile_reduce.xk with expected
values from an independent model of CUDA's width forms (`__shfl_sync(mask, v, lane, width)`:
tiles of `width` consecutive lanes; docs/semantics.md, "Tiles"), never from an interpreter.

    python3 tests/filetests/gen/tiles.py
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M32 = (1 << 32) - 1


def fmt(xs, indent="                 "):
    out, line = [], ""
    for x in xs:
        s = f"{x}, "
        if len(line) + len(s) > 88:
            out.append(line.rstrip())
            line = indent
        line += s
    out.append(line.rstrip().rstrip(","))
    return "\n".join(out)


def tile_of(lane, t):
    return lane - lane % t


def shuffle(vals, w, lane, src, t):
    base = (lane // w) * w
    l = lane % w
    return vals[base + tile_of(l, t) + src % t]


def xor(vals, w, lane, m, t):
    base, l = (lane // w) * w, lane % w
    inner = l % t
    x = inner ^ m
    return vals[lane] if x >= t else vals[base + tile_of(l, t) + x]


def up(vals, w, lane, d, t):
    base, l = (lane // w) * w, lane % w
    inner = l % t
    return vals[lane] if d > inner else vals[lane - d]


def down(vals, w, lane, d, t):
    inner = (lane % w) % t
    return vals[lane] if inner + d >= t else vals[lane + d]


def rot(vals, w, lane, d, t):
    base, l = (lane // w) * w, lane % w
    inner = l % t
    return vals[base + tile_of(l, t) + (inner + d) % t]


def tile_lanes(w, lane, t, active):
    base, l = (lane // w) * w, lane % w
    tb = base + tile_of(l, t)
    return [k for k in range(tb, tb + t) if active(k)]


BLOCK = 64


def tiles_kernel(w):
    half = max(w // 2, 1)
    body = f"""@wave({w})
kernel tiles_w{w}(out: buf<u32, rw>, f: buf<f32, rw>, big: buf<u64, rw>) {{
    let g: u32 = global_id.x;
    let v: u32 = g * 7 + 3;
    let o: u32 = g * 16;
    out[o] = wave_shuffle(v, 1, width = 4);
    out[o + 1] = wave_shuffle(v, lane_id + 5, width = {half});
    out[o + 2] = wave_shuffle_xor(v, 1, width = 2);
    out[o + 3] = wave_shuffle_xor(v, {half}, width = {half});
    out[o + 4] = wave_shuffle_up(v, 1, width = 4);
    out[o + 5] = wave_shuffle_down(v, 2, width = {half});
    out[o + 6] = wave_rotate(v, 3, width = 4);
    out[o + 7] = wave_broadcast(v, 1, width = 2);
    out[o + 8] = wave_reduce_sum(v, width = 4);
    out[o + 9] = wave_reduce_max(v % 13, width = {half});
    out[o + 10] = wave_inclusive_scan_sum(v, width = 2);
    out[o + 11] = wave_exclusive_scan_min(v % 11, width = 4);
    out[o + 12] = wave_reduce_sum(v, width = {w});
    out[o + 13] = wave_shuffle_down(vec2<u32>(v, g), 1, width = 4).y;
    if lane_id % 3 != 0 {{
        out[o + 14] = wave_reduce_sum(v, width = 4);
        out[o + 15] = wave_inclusive_scan_sum(1u32, width = {half});
    }}
    f[g] = wave_reduce_sum(g as f32, width = 4) + wave_reduce_min(100.0 - g as f32, width = 2);
    big[g] = wave_exclusive_scan_sum((g as u64) << 33, width = 4);
}}"""
    n = BLOCK
    vals = [g * 7 + 3 for g in range(n)]
    out = [0] * (16 * n)
    fl = [0.0] * n
    big = [0] * n
    for g in range(n):
        o = g * 16
        lane = g % w
        out[o] = shuffle(vals, w, g, 1, min(4, w))
        out[o + 1] = shuffle(vals, w, g, lane + 5, half)
        out[o + 2] = xor(vals, w, g, 1, min(2, w))
        out[o + 3] = xor(vals, w, g, half, half)
        out[o + 4] = up(vals, w, g, 1, min(4, w))
        out[o + 5] = down(vals, w, g, 2, half)
        out[o + 6] = rot(vals, w, g, 3, min(4, w))
        out[o + 7] = shuffle(vals, w, g, 1 % min(2, w), min(2, w))
        everyone = lambda k: True
        out[o + 8] = sum(vals[k] for k in tile_lanes(w, g, min(4, w), everyone)) & M32
        out[o + 9] = max(vals[k] % 13 for k in tile_lanes(w, g, half, everyone))
        out[o + 10] = sum(vals[k] for k in tile_lanes(w, g, min(2, w), everyone) if k <= g) & M32
        before = [vals[k] % 11 for k in tile_lanes(w, g, min(4, w), everyone) if k < g]
        out[o + 11] = min(before) if before else M32
        out[o + 12] = sum(vals[k] for k in tile_lanes(w, g, w, everyone)) & M32
        out[o + 13] = g + 1 if (lane % min(4, w)) + 1 < min(4, w) else g
        if lane % 3 != 0:
            act = lambda k: (k % w) % 3 != 0
            out[o + 14] = sum(vals[k] for k in tile_lanes(w, g, min(4, w), act)) & M32
            out[o + 15] = len([k for k in tile_lanes(w, g, half, act) if k <= g])
        fl[g] = float(sum(tile_lanes(w, g, min(4, w), everyone))) + min(
            100.0 - k for k in tile_lanes(w, g, min(2, w), everyone))
        big[g] = sum(k << 33 for k in tile_lanes(w, g, min(4, w), everyone) if k < g) % (1 << 64)
    run = f"""
run tiles_w{w} {{
    grid = [1];
    block = [{n}];
    wave = {w};
    arg out = fill({16 * n}, 0);
    arg f = fill({n}, 0.0);
    arg big = fill({n}, 0);
    expect out = [{fmt(out)}];
    expect f = [{fmt([f"{x:.1f}" for x in fl])}];
    expect big = [{fmt(big)}];
}}"""
    return body + "\n" + run


def barrier_kernel(w):
    steps = w.bit_length() - 1
    body = f"""@wave({w})
kernel wave_sum_w{w}(out: buf<u32, rw>) {{
    shared s: [u32; {BLOCK}];
    let t: u32 = local_id.x;
    s[t] = t * 3 + 1;
    wave_barrier();
    for k: u32 in 0..{steps} {{
        let half: u32 = {w // 2}u32 >> k;
        if lane_id < half {{
            s[t] = s[t] + s[t + half];
        }}
        wave_barrier();
    }}
    out[t] = s[t - lane_id];
}}"""
    out = []
    for t in range(BLOCK):
        b = t - t % w
        out.append(sum(u * 3 + 1 for u in range(b, b + w)))
    run = f"""
run wave_sum_w{w} {{
    grid = [1];
    block = [{BLOCK}];
    wave = {w};
    arg out = fill({BLOCK}, 0);
    expect out = [{fmt(out)}];
}}"""
    return body + "\n" + run


HEAD = """// Sub-wave tiles (issue 23 item 3): lane exchanges, reductions and scans with `width = T`
// (CUDA's `__shfl_sync(mask, v, lane, width)`), at wave widths 4, 8, 16 and 32, converged and
// divergent, on u32, a vector, f32 and u64; and `wave_barrier()` ordering a shared-memory tree
// reduction among the lanes of each wave (without it the interpreter reports a data race).
// Expected values: tests/filetests/gen/tiles.py, an independent model of the width forms.
"""


def lcg(seed, n):
    x, out = seed, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(x % 1000)
    return out


def port():
    n, block, groups = 1024, 256, 4
    src = lcg(23, n)
    # CUDA samples style: each 16-lane tile folds with __shfl_down_sync(mask, s, off, 16),
    # tile leaders write partials to shared memory, the first tile folds the partials.
    out = []
    for gidx in range(groups):
        xs = src[gidx * block:(gidx + 1) * block]
        parts = []
        for tile in range(block // 16):
            s = xs[tile * 16:(tile + 1) * 16]
            for off in (8, 4, 2, 1):
                s = [s[i] + (s[i + off] if i + off < 16 else s[i]) for i in range(16)]
            parts.append(s[0])
        p = parts
        for off in (8, 4, 2, 1):
            p = [p[i] + (p[i + off] if i + off < 16 else p[i]) for i in range(16)]
        out.append(p[0] & M32)
    return f"""// Port: the CUDA samples' block reduction over 16-lane tiles (cg::tiled_partition<16> /
// `__shfl_down_sync(0xffffffff, sum, offset, 16)`): each tile folds with shuffle_down (a lane
// whose source leaves its tile keeps its own value, as in CUDA), tile leaders store partial
// sums in shared memory, and the first tile folds the sixteen partials. Written without
// workarounds: `width = 16` keeps every exchange inside its tile at any wave of 16 or more.
// Expected values: tests/filetests/gen/tiles.py, a model of the CUDA code, not of this kernel.

@wave(32)
kernel tile_reduce(src: buf<u32>, out: buf<u32, rw>) {{
    shared part: [u32; 16];
    let t: u32 = local_id.x;
    let s: u32 = src[global_id.x];
    s = s + wave_shuffle_down(s, 8, width = 16);
    s = s + wave_shuffle_down(s, 4, width = 16);
    s = s + wave_shuffle_down(s, 2, width = 16);
    s = s + wave_shuffle_down(s, 1, width = 16);
    if t % 16 == 0 {{
        part[t / 16] = s;
    }}
    barrier();
    if t < 16 {{
        let p: u32 = part[t];
        p = p + wave_shuffle_down(p, 8, width = 16);
        p = p + wave_shuffle_down(p, 4, width = 16);
        p = p + wave_shuffle_down(p, 2, width = 16);
        p = p + wave_shuffle_down(p, 1, width = 16);
        if t == 0 {{
            out[group_id.x] = p;
        }}
    }}
}}

run tile_reduce {{
    grid = [{groups}];
    block = [{block}];
    wave = 32;
    arg src = [{fmt(src, "               ")}];
    arg out = fill({groups}, 0);
    expect out = [{fmt(out)}];
}}
"""


def main():
    parts = [HEAD]
    for w in (4, 8, 16, 32):
        parts.append(tiles_kernel(w))
    for w in (4, 8, 16, 32):
        parts.append(barrier_kernel(w))
    with open(os.path.join(ROOT, "wave", "tiles.xk"), "w") as f:
        f.write("\n\n".join(parts) + "\n")
    with open(os.path.join(ROOT, "ports", "tile_reduce.xk"), "w") as f:
        f.write(port())


main()
