"""Expected values of the file tests under tests/filetests/ops/ (issue #23): an independent
Python model of the bit operations, atomics and sub-wave tiles as docs/semantics.md defines
them. Imported by expect.py."""

import numpy as np

from xk import random_buffer, wrap

CASES = []

BITS = {"u8": 8, "i8": 8, "u16": 16, "i16": 16, "u32": 32, "i32": 32, "u64": 64, "i64": 64}


def case(path, run=0):
    def deco(fn):
        CASES.append((path, run, fn))
        return fn

    return deco


def A(name, values, ty):
    return ("arg", name, values, ty)


def E(name, values, ty):
    return ("expect", name, values, ty)


def to_bits(v, w):
    return v & ((1 << w) - 1)


def popcount(x, w):
    return bin(to_bits(x, w)).count("1")


def clz(x, w):
    x = to_bits(x, w)
    return w - x.bit_length()


def ctz(x, w):
    x = to_bits(x, w)
    if x == 0:
        return w
    return (x & -x).bit_length() - 1


def bit_reverse(x, w):
    s = format(to_bits(x, w), f"0{w}b")
    return int(s[::-1], 2)


def rotl(x, n, w):
    x = to_bits(x, w)
    n %= w
    return ((x << n) | (x >> (w - n))) & ((1 << w) - 1)


def rotr(x, n, w):
    return rotl(x, (w - n % w) % w, w)


def mul_hi(x, y, ty):
    w = BITS[ty]
    if ty.startswith("i"):
        p = wrap(x, ty) * wrap(y, ty)
    else:
        p = to_bits(x, w) * to_bits(y, w)
    return p >> w


def field(w, off, cnt):
    off = min(off, w)
    return off, min(cnt, w - off)


def extract(x, off, cnt, ty):
    w = BITS[ty]
    off, cnt = field(w, off, cnt)
    if cnt == 0:
        return 0
    v = (to_bits(x, w) >> off) & ((1 << cnt) - 1)
    if ty.startswith("i") and v >> (cnt - 1):
        v -= 1 << cnt
    return v


def insert(base, ins, off, cnt, ty):
    w = BITS[ty]
    off, cnt = field(w, off, cnt)
    m = ((1 << cnt) - 1) << off
    return (to_bits(base, w) & ~m) | ((to_bits(ins, w) << off) & m)


def values(ty):
    """Twelve operands of `ty` with zeros, ones, the extremes and mixed patterns."""
    w = BITS[ty]
    pats = [
        0,
        1,
        (1 << w) - 1,
        1 << (w - 1),
        0x5A5A5A5A5A5A5A5A,
        0x0123456789ABCDEF,
        0xF0F0F0F0F0F0F0F0,
        3,
        (1 << (w - 1)) - 1,
        0x8000000000000001,
        0xDEADBEEFCAFEBABE,
        0x00FF00FF00FF00FF,
    ]
    return [wrap(p, ty) for p in pats]


def bits_case(ty):
    w = BITS[ty]
    a = values(ty)
    b = [wrap(v, ty) for v in reversed(values(ty))]
    b[0] = wrap(-1, ty)
    n = [0, 1, w - 1, w, w + 3, 2, 5, w // 2, 100, 7, 3, 0xFFFFFFFF]
    m = [w, 4, 1, 3, 2, 0, w, w, 5, 200, w - 4, 2]
    out = []
    for x, y, k, c in zip(a, b, n, m):
        r = [
            popcount(x, w),
            clz(x, w),
            ctz(x, w),
            bit_reverse(x, w),
            rotl(x, k, w),
            rotr(x, k, w),
            mul_hi(x, y, ty),
            extract(x, k, c, ty),
            insert(x, y, k, c, ty),
            w + 2 * 3,
        ]
        out += [wrap(v, ty) for v in r]
    return [
        A("a", a, ty),
        A("b", b, ty),
        A("n", n, "u32"),
        A("m", m, "u32"),
        A("out", f"fill({len(out)}, 0)", ty),
        E("out", out, ty),
    ]


for _i, _ty in enumerate(["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64"]):
    case("tests/filetests/ops/bits.xk", _i)(lambda ty=_ty: bits_case(ty))


# ---------------------------------------------------------------------------------------------
# atomics.xk


def inc(old, v, w):
    m = (1 << w) - 1
    old, v = old & m, v & m
    return 0 if old >= v else old + 1


def dec(old, v, w):
    m = (1 << w) - 1
    old, v = old & m, v & m
    return v if old == 0 or old > v else old - 1


def run_counter(start, f, v, n, w):
    """`n` applications of `f` with bound `v`: the final value and the sum of the olds."""
    cur, total = start, 0
    for _ in range(n):
        total += cur & ((1 << w) - 1)
        cur = f(cur, v, w)
    return cur, total


@case("tests/filetests/ops/atomics.xk", 0)
def inc_dec_case():
    n = 16
    c = [0, 0, 10, 0xFFFFFFF0]
    bounds = [(inc, 4), (dec, 3), (dec, 5), (inc, 0xFFFFFFFF)]
    fin, olds = [], []
    for start, (f, v) in zip(c, bounds):
        a, b = run_counter(start, f, v, n, 32)
        fin.append(a)
        olds.append(wrap(b, "u32"))
    t = [7, 8, 3, 0, 12, 5]
    ops = [(inc, 7), (inc, 7), (inc, 7), (dec, 9), (dec, 9), (dec, 9)]
    t_after = [f(x, v, 32) for x, (f, v) in zip(t, ops)]
    return [
        A("c", c, "u32"),
        A("olds", [0, 0, 0, 0], "u32"),
        A("t", t, "u32"),
        A("r", [0] * 6, "u32"),
        E("c", fin, "u32"),
        E("olds", olds, "u32"),
        E("t", t_after, "u32"),
        E("r", t, "u32"),
    ]


def signed(v, w):
    return wrap(v, "i32" if w == 32 else "i64")


@case("tests/filetests/ops/atomics.xk", 1)
def inc_dec_wide_case():
    n = 13
    M = (1 << 64) - 1
    c = [M - 5, 2, 3]
    fin = [
        run_counter(c[0], inc, M, n, 64)[0],
        run_counter(c[1], inc, 6, n, 64)[0],
        run_counter(c[2], dec, 1 << 40, n, 64)[0],
    ]
    s = [-2, 7]
    s_fin = [
        signed(run_counter(s[0], inc, -1, n, 32)[0], 32),
        signed(run_counter(s[1], dec, 2, n, 32)[0], 32),
    ]
    lv = [-3]
    l_fin = [signed(run_counter(lv[0], inc, 5, n, 64)[0], 64)]
    return [
        A("c", c, "u64"),
        A("s", s, "i32"),
        A("l", lv, "i64"),
        E("c", fin, "u64"),
        E("s", s_fin, "i32"),
        E("l", l_fin, "i64"),
    ]


@case("tests/filetests/ops/atomics.xk", 2)
def float_atomics_case():
    x = [float(v) for v in [3, -7, 12.5, 0.5, -1.25, 100, 8, -64, 2, 33, -0.75, 9, 1, -2, 4, 6]]
    a = [0.5, -1.0]
    a_fin = [a[0] + sum(x), a[1] + sum(v * 0.25 for v in x)]
    m = [1000.0, -1000.0, float("nan"), 5.0, 1.0]
    m_fin = [min([m[0]] + x), max([m[1]] + x), 3.0, 5.0, float("-inf")]
    return [
        A("a", a, "f64"),
        A("m", m, "f32"),
        A("x", x, "f32"),
        E("a", a_fin, "f64"),
        E("m", m_fin, "f32"),
    ]


@case("tests/filetests/ops/atomics.xk", 3)
def half_add_case():
    x = [float(v) for v in [1, 2, 3, -4, 0.5, 0.25, 8, -1, 16, 2, 1, 1, -0.5, 4, 32, 7]]
    return [
        A("h", [0.75], "f16"),
        A("x", x, "f32"),
        E("h", [0.75 + sum(x)], "f16"),
    ]


# ---------------------------------------------------------------------------------------------
# ports: popcount_hist.xk, warp_aggregated.xk


@case("tests/filetests/ops/popcount_hist.xk")
def popcount_hist_case():
    x = np.array(random_buffer(1000, 0, 4294967295, 11, "u32"), dtype=np.uint64)
    y = random_buffer(1000, 0, 18446744073709551615, 12, "u64")
    h32 = np.zeros(33, dtype=np.int64)
    h64 = np.zeros(65, dtype=np.int64)
    lz = np.zeros(33, dtype=np.int64)
    for i, (a, b) in enumerate(zip(x.tolist(), y)):
        h32[bin(a).count("1")] += 1
        h64[bin(b).count("1")] += 1
        lz[32 - (a >> (i % 29)).bit_length()] += 1
    return [
        E("h32", h32.tolist(), "u32"),
        E("h64", h64.tolist(), "u32"),
        E("lz", lz.tolist(), "u32"),
    ]


@case("tests/filetests/ops/warp_aggregated.xk")
def warp_aggregated_case():
    x = random_buffer(250, -100, 100, 5, "i32")
    kept = [v for v in x if v > 0]
    n = len(kept)
    return [
        E("count", [n], "u32"),
        E("hit", [1] * n + [0] * (250 - n), "u32"),
    ]


# ---------------------------------------------------------------------------------------------
# bellman_ford.xk, atomic_load_store.xk


def graph():
    """A 12-node graph of 40 edges with integer weights 1..9 (a fixed pseudo-random draw)."""
    nodes = 12
    src = random_buffer(40, 0, nodes, 21, "u32")
    dst = random_buffer(40, 0, nodes, 22, "u32")
    w = [float(v) for v in random_buffer(40, 1, 10, 23, "u32")]
    return nodes, src, dst, w


def shortest(nodes, src, dst, w):
    inf = float("inf")
    d = [0.0] + [inf] * (nodes - 1)
    for _ in range(nodes - 1):
        for u, v, c in zip(src, dst, w):
            d[v] = min(d[v], d[u] + c)
    return d


def f32_bits(x):
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


@case("tests/filetests/ops/bellman_ford.xk", 0)
def relax_cas_case():
    nodes, src, dst, w = graph()
    d = shortest(nodes, src, dst, w)
    start = [0.0] + [float("inf")] * (nodes - 1)
    return [
        A("src", src, "u32"),
        A("dst", dst, "u32"),
        A("w", w, "f32"),
        A("d", [f32_bits(x) for x in start], "u32"),
        E("d", [f32_bits(x) for x in d], "u32"),
    ]


@case("tests/filetests/ops/bellman_ford.xk", 1)
def relax_min_case():
    nodes, src, dst, w = graph()
    d = shortest(nodes, src, dst, w)
    return [
        A("src", src, "u32"),
        A("dst", dst, "u32"),
        A("w", w, "f32"),
        A("d", [0.0] + [float("inf")] * (nodes - 1), "f32"),
        E("d", d, "f32"),
    ]


@case("tests/filetests/ops/atomic_load_store.xk")
def publish_case():
    n = 24
    out, back = [], []
    for i in range(n):
        j = (i + 1) % n
        out.append(j * 7 + 1 + j)
        back.append(j * 0.5 + (-3 * j) + float(np.float32(j + 0.25)))
    return [
        E("a", [(i << 40) | 5 for i in range(n)], "u64"),
        E("b", [i * 0.5 for i in range(n)], "f64"),
        E("c", [-3 * i for i in range(n)], "i32"),
        E("f", [i + 0.25 for i in range(n)], "f32"),
        E("out", out, "u32"),
        E("back", back, "f64"),
    ]
