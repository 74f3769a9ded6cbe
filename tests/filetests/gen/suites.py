"""Inputs and expected values of the kernels ported from public GPU suites
(tests/filetests/suites/: PolyBench/GPU, Rodinia, the CUDA samples), for expect.py.

Each case is a numpy model of the *original* C/CUDA kernel (not of the port, and never an
interpreter's output): the same arithmetic in the same types and, where the result depends on
it, the same order of operations (a sequential `+=` loop is modelled as a loop over numpy
arrays of all work-items at once, so every element sees one rounding per operation, as the
kernel does). Where the original computes in double (a `2.0` or `0.3` literal in a float
expression) the model does too. Inputs are the original's init formulas where they are cheap,
otherwise the run block's `random` generator (xk.random_buffer reproduces it).

    python3 tests/filetests/gen/expect.py          # rewrite every generated file
    python3 tests/filetests/gen/expect.py --check  # exit 1 if any file is out of date
"""

import math

import numpy as np

from xk import fmt_value, random_buffer

F32 = np.float32
F64 = np.float64

CASES = []

PB = "tests/filetests/suites/polybench/"
RD = "tests/filetests/suites/rodinia/"
CS = "tests/filetests/suites/cuda_samples/"


def case(path, run=0):
    def deco(fn):
        CASES.append((path, run, fn))
        return fn

    return deco


def flat(values):
    return np.asarray(values).reshape(-1).tolist()


def A(name, values, ty):
    """`arg name = [...]` (a buffer)."""
    return ("arg", name, flat(values), ty)


def S(name, value, ty):
    """`arg name = value` (a scalar)."""
    return ("arg", name, fmt_value(value, ty), ty)


def V(name, text):
    """`arg name = text`, verbatim (`fill(...)`, `uninit(...)`, `random(...)`)."""
    return ("arg", name, text, None)


def E(name, values, ty):
    return ("expect", name, flat(values), ty)


def R(name, n, lo, hi, seed, ty, lanes=1):
    """`arg name = random(n / lanes, lo, hi, seed S)` and the n scalars it gives (a numpy
    array); `lanes` is the vector width of the buffer's element (random's length counts
    elements, its values fill scalar slots)."""
    m = n // lanes
    if ty in ("f16", "f32", "f64"):
        text = f"random({m}, {fmt_value(lo, 'f64')}, {fmt_value(hi, 'f64')}, seed {seed})"
    else:
        text = f"random({m}, {int(lo)}, {int(hi)}, seed {seed})"
    dtype = {"f32": F32, "f64": F64, "u32": np.uint32, "i32": np.int32}[ty]
    return ("arg", name, text, None), np.array(random_buffer(n, lo, hi, seed, ty), dtype=dtype)


def f32_div(a, b):
    return F32(F32(a) / F32(b))


# ---------------------------------------------------------------------------------------------
# PolyBench/GPU (PolyBench-ACC CUDA). Init formulas: `((DATA_TYPE) i*j) / NI` is
# (float(i) * j) / NI in f32: the product is exact at these sizes, the quotient rounded once.


def pb_init(rows, cols, num, den):
    """init formula `num(i, j) / den` in f32, where num gives exact small integers."""
    i = np.arange(rows).reshape(-1, 1)
    j = np.arange(cols).reshape(1, -1)
    return (num(i, j).astype(F32) / F32(den)).astype(F32)


def matmul_acc(acc, a, b, alpha=None):
    """acc[i, j] += (alpha *) a[i, k] * b[k, j] for k ascending, one rounding each."""
    acc = acc.copy()
    for k in range(a.shape[1]):
        left = a[:, k] if alpha is None else alpha * a[:, k]
        acc = acc + left[:, None] * b[k, :][None, :]
    return acc


def mm_args(sizes):
    return [S(n, v, "i32") for n, v in sizes]


ALPHA, BETA = F32(32412), F32(2123)


def mm2():
    ni = nj = nk = nl = 20
    a = pb_init(ni, nk, lambda i, j: i * j, ni)
    b = pb_init(nk, nj, lambda i, j: i * (j + 1), nj)
    c = pb_init(nl, nj, lambda i, j: i * (j + 3), nl)  # C is NL x NJ, indexed [k * NL + j]
    d = pb_init(ni, nl, lambda i, j: i * (j + 2), nk)
    tmp = matmul_acc(np.zeros((ni, nj), F32), a, b, ALPHA)
    dd = matmul_acc(d * BETA, tmp, c.reshape(nj, nl))
    return ni, nj, nk, nl, a, b, c, d, tmp, dd


def mm2_scalars():
    return mm_args([("ni", 20), ("nj", 20), ("nk", 20), ("nl", 20)]) + [
        S("alpha", ALPHA, "f32"), S("beta", BETA, "f32")]


@case(PB + "2mm.xk", 0)
def pb_2mm_1():
    ni, nj, nk, nl, a, b, c, d, tmp, dd = mm2()
    return mm2_scalars() + [V("tmp", f"uninit({ni * nj})"), A("a", a, "f32"), A("b", b, "f32"),
                            E("tmp", tmp, "f32")]


@case(PB + "2mm.xk", 1)
def pb_2mm_2():
    ni, nj, nk, nl, a, b, c, d, tmp, dd = mm2()
    return mm2_scalars() + [A("tmp", tmp, "f32"), A("c", c, "f32"), A("d", d, "f32"),
                            E("d", dd, "f32")]


def mm3():
    ni, nj, nk, nl, nm = 18, 20, 22, 24, 26
    a = pb_init(ni, nk, lambda i, j: i * j, ni)
    b = pb_init(nk, nj, lambda i, j: i * (j + 1), nj)
    c = pb_init(nj, nm, lambda i, j: i * (j + 3), nl)
    d = pb_init(nm, nl, lambda i, j: i * (j + 2), nk)
    e = matmul_acc(np.zeros((ni, nj), F32), a, b)
    f = matmul_acc(np.zeros((nj, nl), F32), c, d)
    g = matmul_acc(np.zeros((ni, nl), F32), e, f)
    sizes = mm_args([("ni", ni), ("nj", nj), ("nk", nk), ("nl", nl), ("nm", nm)])
    return sizes, a, b, c, d, e, f, g


@case(PB + "3mm.xk", 0)
def pb_3mm_1():
    sizes, a, b, c, d, e, f, g = mm3()
    return sizes + [A("a", a, "f32"), A("b", b, "f32"), V("e", f"uninit({e.size})"),
                    E("e", e, "f32")]


@case(PB + "3mm.xk", 1)
def pb_3mm_2():
    sizes, a, b, c, d, e, f, g = mm3()
    return sizes + [A("c", c, "f32"), A("d", d, "f32"), V("f", f"uninit({f.size})"),
                    E("f", f, "f32")]


@case(PB + "3mm.xk", 2)
def pb_3mm_3():
    sizes, a, b, c, d, e, f, g = mm3()
    return sizes + [A("e", e, "f32"), A("f", f, "f32"), V("g", f"uninit({g.size})"),
                    E("g", g, "f32")]


def gemm_case(T, ty):
    n = 20
    i = np.arange(n).reshape(-1, 1)
    j = np.arange(n).reshape(1, -1)
    a = ((i * j).astype(T) / T(n)).astype(T)
    b = a.copy()
    c = a.copy()
    alpha, beta = T(32412), T(2123)
    out = matmul_acc(c * beta, a, b, alpha)
    return [S("ni", n, "i32"), S("nj", n, "i32"), S("nk", n, "i32"), S("alpha", alpha, ty),
            S("beta", beta, ty), A("a", a, ty), A("b", b, ty), A("c", c, ty), E("c", out, ty)]


@case(PB + "gemm.xk", 0)
def pb_gemm():
    return gemm_case(F32, "f32")


@case(PB + "gemm.xk", 1)
def pb_gemm_f64():
    return gemm_case(F64, "f64")


def matvec(a, x):
    """acc[i] = sum_j a[i, j] * x[j], j ascending, from 0."""
    acc = np.zeros(a.shape[0], F32)
    for j in range(a.shape[1]):
        acc = acc + a[:, j] * x[j]
    return acc


def atax():
    nx, ny = 50, 44
    x = np.array([F32(i * math.pi) for i in range(ny)], F32)
    a = pb_init(nx, ny, lambda i, j: i * j, nx)
    tmp = matvec(a, x)
    y = matvec(a.T, tmp)
    return nx, ny, x, a, tmp, y


@case(PB + "atax.xk", 0)
def pb_atax_1():
    nx, ny, x, a, tmp, y = atax()
    return [S("nx", nx, "i32"), S("ny", ny, "i32"), A("a", a, "f32"), A("x", x, "f32"),
            V("tmp", f"uninit({nx})"), E("tmp", tmp, "f32")]


@case(PB + "atax.xk", 1)
def pb_atax_2():
    nx, ny, x, a, tmp, y = atax()
    return [S("nx", nx, "i32"), S("ny", ny, "i32"), A("a", a, "f32"), V("y", f"uninit({ny})"),
            A("tmp", tmp, "f32"), E("y", y, "f32")]


def bicg():
    nx, ny = 40, 36
    p = np.array([F32(i * math.pi) for i in range(ny)], F32)
    r = np.array([F32(i * math.pi) for i in range(nx)], F32)
    a = pb_init(nx, ny, lambda i, j: i * j, nx)
    s = np.zeros(ny, F32)
    for i in range(nx):
        s = s + r[i] * a[i, :]
    q = matvec(a, p)
    return nx, ny, p, r, a, s, q


@case(PB + "bicg.xk", 0)
def pb_bicg_1():
    nx, ny, p, r, a, s, q = bicg()
    return [S("nx", nx, "i32"), S("ny", ny, "i32"), A("a", a, "f32"), A("r", r, "f32"),
            V("s", f"uninit({ny})"), E("s", s, "f32")]


@case(PB + "bicg.xk", 1)
def pb_bicg_2():
    nx, ny, p, r, a, s, q = bicg()
    return [S("nx", nx, "i32"), S("ny", ny, "i32"), A("a", a, "f32"), A("p", p, "f32"),
            V("q", f"uninit({nx})"), E("q", q, "f32")]


def gemver():
    n = 40
    alpha, beta = F32(43532), F32(12313)
    i = np.arange(n)
    # `(i+1)/N/2.0`: integer division first, as the original is written.
    u1 = i.astype(F32)
    u2 = (((i + 1) // n) / 2.0).astype(F32)
    v1 = (((i + 1) // n) / 4.0).astype(F32)
    v2 = (((i + 1) // n) / 6.0).astype(F32)
    y = (((i + 1) // n) / 8.0).astype(F32)
    z = (((i + 1) // n) / 9.0).astype(F32)
    x = np.zeros(n, F32)
    w = np.zeros(n, F32)
    a = pb_init(n, n, lambda i, j: i * j, n)
    a1 = a + (u1[:, None] * v1[None, :] + u2[:, None] * v2[None, :])
    x2 = x.copy()
    for j in range(n):
        x2 = x2 + beta * a1[j, :] * y[j]
    x2 = x2 + z
    w2 = w.copy()
    for j in range(n):
        w2 = w2 + alpha * a1[:, j] * x2[j]
    head = [S("n", n, "i32"), S("alpha", alpha, "f32"), S("beta", beta, "f32")]
    return head, locals()


@case(PB + "gemver.xk", 0)
def pb_gemver_1():
    head, v = gemver()
    return head + [A("a", v["a"], "f32"), A("v1", v["v1"], "f32"), A("v2", v["v2"], "f32"),
                   A("u1", v["u1"], "f32"), A("u2", v["u2"], "f32"), E("a", v["a1"], "f32")]


@case(PB + "gemver.xk", 1)
def pb_gemver_2():
    head, v = gemver()
    return head + [A("a", v["a1"], "f32"), A("x", v["x"], "f32"), A("y", v["y"], "f32"),
                   A("z", v["z"], "f32"), E("x", v["x2"], "f32")]


@case(PB + "gemver.xk", 2)
def pb_gemver_3():
    head, v = gemver()
    return head + [A("a", v["a1"], "f32"), A("x", v["x2"], "f32"), A("w", v["w"], "f32"),
                   E("w", v["w2"], "f32")]


@case(PB + "gesummv.xk", 0)
def pb_gesummv():
    n = 40
    alpha, beta = F32(43532), F32(12313)
    x = (np.arange(n).astype(F32) / F32(n)).astype(F32)
    a = pb_init(n, n, lambda i, j: i * j, n)
    b = a.copy()
    tmp = np.zeros(n, F32)
    y = np.zeros(n, F32)
    for j in range(n):
        tmp = tmp + a[:, j] * x[j]
        y = y + b[:, j] * x[j]
    y = alpha * tmp + beta * y
    return [S("n", n, "i32"), S("alpha", alpha, "f32"), S("beta", beta, "f32"),
            A("a", a, "f32"), A("b", b, "f32"), V("tmp", f"fill({n}, 0.0)"), A("x", x, "f32"),
            V("y", f"fill({n}, 0.0)"), E("tmp", tmp, "f32"), E("y", y, "f32")]


def mvt():
    n = 36
    i = np.arange(n)
    x1 = (i.astype(F32) / F32(n)).astype(F32)
    x2 = ((i.astype(F32) + F32(1)) / F32(n)).astype(F32)
    y1 = ((i.astype(F32) + F32(3)) / F32(n)).astype(F32)
    y2 = ((i.astype(F32) + F32(4)) / F32(n)).astype(F32)
    a = pb_init(n, n, lambda i, j: i * j, n)
    o1 = x1.copy()
    o2 = x2.copy()
    for j in range(n):
        o1 = o1 + a[:, j] * y1[j]
        o2 = o2 + a[j, :] * y2[j]
    return n, a, x1, x2, y1, y2, o1, o2


@case(PB + "mvt.xk", 0)
def pb_mvt_1():
    n, a, x1, x2, y1, y2, o1, o2 = mvt()
    return [S("n", n, "i32"), A("a", a, "f32"), A("x1", x1, "f32"), A("y_1", y1, "f32"),
            E("x1", o1, "f32")]


@case(PB + "mvt.xk", 1)
def pb_mvt_2():
    n, a, x1, x2, y1, y2, o1, o2 = mvt()
    return [S("n", n, "i32"), A("a", a, "f32"), A("x2", x2, "f32"), A("y_2", y2, "f32"),
            E("x2", o2, "f32")]


@case(PB + "syrk.xk", 0)
def pb_syrk():
    ni, nj = 36, 28
    a = pb_init(ni, nj, lambda i, j: i * j, ni)
    c = pb_init(ni, ni, lambda i, j: i * j, ni)
    out = matmul_acc(c * BETA, a, a.T, ALPHA)
    return [S("ni", ni, "i32"), S("nj", nj, "i32"), S("alpha", ALPHA, "f32"),
            S("beta", BETA, "f32"), A("a", a, "f32"), A("c", c, "f32"), E("c", out, "f32")]


@case(PB + "syr2k.xk", 0)
def pb_syr2k():
    ni, nj = 36, 28
    a = pb_init(ni, nj, lambda i, j: i * j, ni)
    b = a.copy()
    c = pb_init(ni, ni, lambda i, j: i * j, ni)
    acc = c * BETA
    for k in range(nj):
        acc = acc + (ALPHA * a[:, k][:, None] * b[:, k][None, :]
                     + ALPHA * b[:, k][:, None] * a[:, k][None, :])
    return [S("ni", ni, "i32"), S("nj", nj, "i32"), S("alpha", ALPHA, "f32"),
            S("beta", BETA, "f32"), A("a", a, "f32"), A("b", b, "f32"), A("c", c, "f32"),
            E("c", acc, "f32")]


# correlation / covariance: data[i * M + j], N rows (i) of M columns (j).

FLOAT_N = F32(3214212.01)
EPS = F32(0.005)


def col_sums(data, f=lambda col: col):
    acc = np.zeros(data.shape[1], F32)
    for i in range(data.shape[0]):
        acc = acc + f(data[i, :])
    return acc


def symmat_of(data, strict):
    """symmat[j1][j2] = sum_i data[i][j1] * data[i][j2] (i ascending) for j2 > j1 (strict) or
    j2 >= j1, mirrored; the diagonal is 1.0 when strict, as corr_kernel sets it."""
    n, m = data.shape
    acc = np.zeros((m, m), F32)
    for i in range(n):
        acc = acc + data[i, :][:, None] * data[i, :][None, :]
    out = np.zeros((m, m), F32)
    for j1 in range(m - 1 if strict else m):
        for j2 in range(j1 + 1 if strict else j1, m):
            out[j1, j2] = out[j2, j1] = acc[j1, j2]
        if strict:
            out[j1, j1] = F32(1.0)
    return out


def corr_small():
    m, n = 12, 40
    data = pb_init(n, m, lambda i, j: i * j, m)
    mean = (col_sums(data) / FLOAT_N).astype(F32)
    std = col_sums(data, lambda row: (row - mean) * (row - mean))
    std = np.sqrt((std / FLOAT_N).astype(F32)).astype(F32)
    std = np.where(std <= EPS, F32(1.0), std).astype(F32)
    norm = ((data - mean) / (np.sqrt(FLOAT_N).astype(F32) * std)).astype(F32)
    return m, n, data, mean, std, norm


def mn(m, n):
    return [S("m", m, "i32"), S("n", n, "i32")]


@case(PB + "correlation.xk", 0)
def pb_corr_mean():
    m, n, data, mean, std, norm = corr_small()
    return mn(m, n) + [V("mean", f"uninit({m})"), A("data", data, "f32"), E("mean", mean, "f32")]


@case(PB + "correlation.xk", 1)
def pb_corr_std():
    m, n, data, mean, std, norm = corr_small()
    return mn(m, n) + [A("mean", mean, "f32"), V("std", f"uninit({m})"), A("data", data, "f32"),
                       E("std", std, "f32")]


@case(PB + "correlation.xk", 2)
def pb_corr_reduce():
    m, n, data, mean, std, norm = corr_small()
    return mn(m, n) + [A("mean", mean, "f32"), A("std", std, "f32"), A("data", data, "f32"),
                       E("data", norm, "f32")]


@case(PB + "correlation.xk", 3)
def pb_corr_corr():
    m, n, data, mean, std, norm = corr_small()
    return mn(m, n) + [V("symmat", f"fill({m * m}, 0.0)"), A("data", norm, "f32"),
                       E("symmat", symmat_of(norm, True), "f32")]


@case(PB + "correlation.xk", 4)
def pb_corr_long():
    m, n = 40, 1700
    arg, data = R("data", n * m, -0.05, 0.05, 14, "f32")
    return mn(m, n) + [V("symmat", f"fill({m * m}, 0.0)"), arg,
                       E("symmat", symmat_of(data.reshape(n, m), True), "f32")]


def covar_small():
    m, n = 12, 40
    data = pb_init(n, m, lambda i, j: i * j, m)
    mean = (col_sums(data) / FLOAT_N).astype(F32)
    centred = (data - mean).astype(F32)
    return m, n, data, mean, centred


@case(PB + "covariance.xk", 0)
def pb_cov_mean():
    m, n, data, mean, centred = covar_small()
    return mn(m, n) + [V("mean", f"uninit({m})"), A("data", data, "f32"), E("mean", mean, "f32")]


@case(PB + "covariance.xk", 1)
def pb_cov_reduce():
    m, n, data, mean, centred = covar_small()
    return mn(m, n) + [A("mean", mean, "f32"), A("data", data, "f32"), E("data", centred, "f32")]


@case(PB + "covariance.xk", 2)
def pb_cov_covar():
    m, n, data, mean, centred = covar_small()
    return mn(m, n) + [V("symmat", f"uninit({m * m})"), A("data", centred, "f32"),
                       E("symmat", symmat_of(centred, False), "f32")]


@case(PB + "covariance.xk", 3)
def pb_cov_long():
    m, n = 40, 1700
    arg, data = R("data", n * m, -1.0, 1.0, 15, "f32")
    return mn(m, n) + [V("symmat", f"uninit({m * m})"), arg,
                       E("symmat", symmat_of(data.reshape(n, m), False), "f32")]


# Stencils.

CONV2 = [F32(v) for v in (0.2, 0.5, -0.8, -0.3, 0.6, -0.9, 0.4, 0.7, 0.10)]


@case(PB + "2DConvolution.xk", 0)
def pb_conv2d():
    ni, nj = 34, 40
    arg, a = R("a", ni * nj, 0.0, 1.0, 21, "f32")
    a = a.reshape(ni, nj)
    c11, c21, c31, c12, c22, c32, c13, c23, c33 = CONV2
    b = np.zeros((ni, nj), F32)
    s = (c11 * a[:-2, :-2] + c21 * a[:-2, 1:-1] + c31 * a[:-2, 2:]
         + c12 * a[1:-1, :-2] + c22 * a[1:-1, 1:-1] + c32 * a[1:-1, 2:]
         + c13 * a[2:, :-2] + c23 * a[2:, 1:-1] + c33 * a[2:, 2:])
    b[1:-1, 1:-1] = s
    return [S("ni", ni, "i32"), S("nj", nj, "i32"), arg, V("b", f"fill({ni * nj}, 0.0)"),
            E("b", b, "f32")]


def conv3d(plane):
    ni, nj, nk = 6, 10, 12
    i, j, k = np.meshgrid(np.arange(ni), np.arange(nj), np.arange(nk), indexing="ij")
    a = (i % 12 + 2 * (j % 7) + 3 * (k % 13)).astype(F32)
    b = np.zeros((ni, nj, nk), F32)
    c11, c21, c31, c12, c22, c32, c13, c23, c33 = [F32(v) for v in (2, 5, -8, -3, 6, -9, 4, 7, 10)]
    if 0 < plane < ni - 1:
        x = plane

        def at(di, dj, dk):
            return a[x + di, 1 + dj:nj - 1 + dj, 1 + dk:nk - 1 + dk]

        s = (c11 * at(-1, -1, -1) + c13 * at(1, -1, -1) + c21 * at(-1, -1, -1)
             + c23 * at(1, -1, -1) + c31 * at(-1, -1, -1) + c33 * at(1, -1, -1)
             + c12 * at(0, -1, 0) + c22 * at(0, 0, 0) + c32 * at(0, 1, 0)
             + c11 * at(-1, -1, 1) + c13 * at(1, -1, 1) + c21 * at(-1, 0, 1)
             + c23 * at(1, 0, 1) + c31 * at(-1, 1, 1) + c33 * at(1, 1, 1))
        b[x, 1:nj - 1, 1:nk - 1] = s
    return [S("ni", ni, "i32"), S("nj", nj, "i32"), S("nk", nk, "i32"), A("a", a, "f32"),
            V("b", f"fill({ni * nj * nk}, 0.0)"), S("i", plane, "i32"), E("b", b, "f32")]


@case(PB + "3DConvolution.xk", 0)
def pb_conv3d_1():
    return conv3d(1)


@case(PB + "3DConvolution.xk", 1)
def pb_conv3d_last():
    return conv3d(4)


@case(PB + "3DConvolution.xk", 2)
def pb_conv3d_border():
    return conv3d(0)


def fdtd_states():
    nx, ny, tmax = 12, 20, 4
    fict = np.arange(tmax).astype(F32)
    i = np.arange(nx).reshape(-1, 1)
    j = np.arange(ny).reshape(1, -1)
    ex = ((i * (j + 1)).astype(F32) + F32(1)) / F32(nx)
    ey = (((i - 1) * (j + 2)).astype(F32) + F32(2)) / F32(nx)
    hz = (((i - 9) * (j + 4)).astype(F32) + F32(3)) / F32(nx)
    ex, ey, hz = ex.astype(F32), ey.astype(F32), hz.astype(F32)
    half, c7 = F32(0.5), F32(0.7)
    states = [(ex, ey, hz)]

    def step1(t, ex, ey, hz):
        ey = ey.copy()
        ey[1:, :] = ey[1:, :] - half * (hz[1:, :] - hz[:-1, :])
        ey[0, :] = fict[t]
        return ex, ey, hz

    def step2(ex, ey, hz):
        ex = ex.copy()
        ex[:, 1:] = ex[:, 1:] - half * (hz[:, 1:] - hz[:, :-1])
        return ex, ey, hz

    def step3(ex, ey, hz):
        hz = hz.copy()
        hz[:-1, :-1] = hz[:-1, :-1] - c7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1]
                                             - ey[:-1, :-1])
        return ex, ey, hz

    states.append(step1(0, *states[-1]))
    states.append(step2(*states[-1]))
    states.append(step3(*states[-1]))
    states.append(step1(1, *states[-1]))
    return nx, ny, fict, states


def fdtd_case(run, written, t):
    nx, ny, fict, states = fdtd_states()
    ex, ey, hz = states[run]
    after = dict(zip(("ex", "ey", "hz"), states[run + 1]))
    items = [S("nx", nx, "i32"), S("ny", ny, "i32")]
    if run in (0, 3):
        items.append(A("_fict_", fict, "f32"))
    items += [A("ex", ex, "f32"), A("ey", ey, "f32"), A("hz", hz, "f32"), S("t", t, "i32"),
              E(written, after[written], "f32")]
    return items


@case(PB + "fdtd-2d.xk", 0)
def pb_fdtd_1():
    return fdtd_case(0, "ey", 0)


@case(PB + "fdtd-2d.xk", 1)
def pb_fdtd_2():
    return fdtd_case(1, "ex", 0)


@case(PB + "fdtd-2d.xk", 2)
def pb_fdtd_3():
    return fdtd_case(2, "hz", 0)


@case(PB + "fdtd-2d.xk", 3)
def pb_fdtd_4():
    return fdtd_case(3, "ey", 1)


def jacobi1d():
    n = 300
    i = np.arange(n)
    a = ((F32(4) * i.astype(F32) + F32(10)) / F32(n)).astype(F32)
    b = ((F32(7) * i.astype(F32) + F32(11)) / F32(n)).astype(F32)
    b1 = b.copy()
    b1[2:n - 1] = F32(0.33333) * (a[1:n - 2] + a[2:n - 1] + a[3:n])
    a1 = a.copy()
    a1[2:n - 1] = b1[2:n - 1]
    return n, a, b, b1, a1


@case(PB + "jacobi-1d.xk", 0)
def pb_jacobi1d_1():
    n, a, b, b1, a1 = jacobi1d()
    return [S("n", n, "i32"), A("a", a, "f32"), A("b", b, "f32"), E("b", b1, "f32")]


@case(PB + "jacobi-1d.xk", 1)
def pb_jacobi1d_2():
    n, a, b, b1, a1 = jacobi1d()
    return [S("n", n, "i32"), A("a", a, "f32"), A("b", b1, "f32"), E("a", a1, "f32")]


def jacobi2d():
    n = 24
    a = pb_init(n, n, lambda i, j: i * (j + 2) + 10, n)
    b = pb_init(n, n, lambda i, j: (i - 4) * (j - 1) + 11, n)
    b1 = b.copy()
    b1[1:-1, 1:-1] = F32(0.2) * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                                 + a[:-2, 1:-1])
    a1 = a.copy()
    a1[1:-1, 1:-1] = b1[1:-1, 1:-1]
    return n, a, b, b1, a1


@case(PB + "jacobi-2d.xk", 0)
def pb_jacobi2d_1():
    n, a, b, b1, a1 = jacobi2d()
    return [S("n", n, "i32"), A("a", a, "f32"), A("b", b, "f32"), E("b", b1, "f32")]


@case(PB + "jacobi-2d.xk", 1)
def pb_jacobi2d_2():
    n, a, b, b1, a1 = jacobi2d()
    return [S("n", n, "i32"), A("a", a, "f32"), A("b", b1, "f32"), E("a", a1, "f32")]


# ---------------------------------------------------------------------------------------------
# Rodinia 3.1 (CUDA).


def bfs_graph():
    n = 530
    deg = [1 + d % 4 for d in random_buffer(n, 0, 1 << 30, 31, "i32")]
    start = np.concatenate([[0], np.cumsum(deg)[:-1]]).astype(np.int32)
    edges = np.array(random_buffer(int(sum(deg)), 0, n, 32, "i32"), np.int32)
    nodes = np.stack([start, np.array(deg, np.int32)], axis=1)
    return n, nodes, edges


def bfs_levels():
    """The state before each launch: (mask, updating, visited, cost, over) per launch, in the
    order Kernel, Kernel2, Kernel, Kernel2, ..."""
    n, nodes, edges = bfs_graph()
    mask = np.zeros(n, bool)
    visited = np.zeros(n, bool)
    updating = np.zeros(n, np.uint32)
    cost = np.full(n, -1, np.int32)
    mask[0] = visited[0] = True
    cost[0] = 0
    states = []
    for level in range(5):
        states.append((mask.copy(), updating.copy(), visited.copy(), cost.copy(), 0))
        for tid in np.nonzero(mask)[0]:
            mask[tid] = False
            s, d = nodes[tid]
            for i in range(s, s + d):
                nid = edges[i]
                if not visited[nid]:
                    cost[nid] = cost[tid] + 1
                    updating[nid] = 1
        states.append((mask.copy(), updating.copy(), visited.copy(), cost.copy(), 0))
        over = 0
        for tid in np.nonzero(updating)[0]:
            mask[tid] = True
            visited[tid] = True
            over = 1
            updating[tid] = 0
    states.append((mask.copy(), updating.copy(), visited.copy(), cost.copy(), over))
    return n, nodes, edges, states


def bfs_k1(launch):
    n, nodes, edges, states = bfs_levels()
    mask, updating, visited, cost, _ = states[launch]
    after = states[launch + 1]
    return [A("g_graph_nodes", nodes, "i32"), A("g_graph_edges", edges, "i32"),
            A("g_graph_mask", mask, "bool"), A("g_updating_graph_mask", updating, "u32"),
            A("g_graph_visited", visited, "bool"), A("g_cost", cost, "i32"),
            S("no_of_nodes", n, "i32"), E("g_graph_mask", after[0], "bool"),
            E("g_updating_graph_mask", after[1], "u32"), E("g_cost", after[3], "i32")]


def bfs_k2(launch):
    n, nodes, edges, states = bfs_levels()
    mask, updating, visited, cost, _ = states[launch]
    after = states[launch + 1] if launch + 1 < len(states) else None
    # Kernel2's own effect: the next Kernel's state has g_over reset, so recompute it here.
    over = int(updating.any())
    new_mask = mask | (updating != 0)
    new_visited = visited | (updating != 0)
    assert after is None or (after[0] == new_mask).all()
    return [A("g_graph_mask", mask, "bool"), A("g_updating_graph_mask", updating, "u32"),
            A("g_graph_visited", visited, "bool"), V("g_over", "[0]"), S("no_of_nodes", n, "i32"),
            E("g_graph_mask", new_mask, "bool"),
            E("g_updating_graph_mask", np.zeros(n, np.uint32), "u32"),
            E("g_graph_visited", new_visited, "bool"), E("g_over", [over], "u32")]


@case(RD + "bfs.xk", 0)
def rd_bfs_k1_level4():
    return bfs_k1(8)


@case(RD + "bfs.xk", 1)
def rd_bfs_k2_level4():
    return bfs_k2(9)


def hotspot_params(rows, cols):
    t_chip, chip_height, chip_width = F32(0.0005), F32(0.016), F32(0.016)
    max_pd, precision, spec_heat_si, k_si, factor_chip = 3.0e6, 0.001, 1.75e6, 100, 0.5
    grid_height = F32(chip_height / F32(rows))
    grid_width = F32(chip_width / F32(cols))
    gh, gw, tc = float(grid_height), float(grid_width), float(t_chip)
    cap = F32(factor_chip * spec_heat_si * tc * gw * gh)
    rx = F32(gw / (2.0 * k_si * tc * gh))
    ry = F32(gh / (2.0 * k_si * tc * gw))
    rz = F32(tc / (k_si * gh * gw))
    max_slope = F32(max_pd / (factor_chip * tc * spec_heat_si))
    step = F32(precision / float(max_slope))
    return cap, rx, ry, rz, step


def hotspot_launch(iteration, power, src, dst, cols, rows, border, grid, params):
    """calculate_temp over a grid x grid of 16 x 16 blocks, block by block as the kernel."""
    cap, rx, ry, rz, step = params
    amb = F32(80.0)
    step_div_cap = F32(step / cap)
    rx_1, ry_1, rz_1 = F32(F32(1.0) / rx), F32(F32(1.0) / ry), F32(F32(1.0) / rz)
    out = dst.copy()
    small = 16 - iteration * 2
    ty, tx = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    for by in range(grid):
        for bx in range(grid):
            blk_y, blk_x = small * by - border, small * bx - border
            yidx, xidx = blk_y + ty, blk_x + tx
            inside = (yidx >= 0) & (yidx < rows) & (xidx >= 0) & (xidx < cols)
            t = np.full((16, 16), np.nan, F32)
            pw = np.full((16, 16), np.nan, F32)
            t[inside] = src[yidx[inside], xidx[inside]]
            pw[inside] = power[yidx[inside], xidx[inside]]
            vymin = -blk_y if blk_y < 0 else 0
            vymax = 15 - (blk_y + 15 - rows + 1) if blk_y + 15 > rows - 1 else 15
            vxmin = -blk_x if blk_x < 0 else 0
            vxmax = 15 - (blk_x + 15 - cols + 1) if blk_x + 15 > cols - 1 else 15
            n = np.maximum(ty - 1, vymin)
            s = np.minimum(ty + 1, vymax)
            w = np.maximum(tx - 1, vxmin)
            e = np.minimum(tx + 1, vxmax)
            for i in range(iteration):
                comp = ((tx >= i + 1) & (tx <= 16 - i - 2) & (ty >= i + 1) & (ty <= 16 - i - 2)
                        & (tx >= vxmin) & (tx <= vxmax) & (ty >= vymin) & (ty <= vymax))
                with np.errstate(invalid="ignore"):
                    ns = (t[s, tx] + t[n, tx]).astype(F64) - 2.0 * t.astype(F64)
                    ew = (t[ty, e] + t[ty, w]).astype(F64) - 2.0 * t.astype(F64)
                    total = (pw.astype(F64) + ns * F64(ry_1) + ew * F64(rx_1)
                             + ((amb - t) * rz_1).astype(F64))
                    new = (t.astype(F64) + F64(step_div_cap) * total).astype(F32)
                tt = np.where(comp, new, np.nan).astype(F32)
                if i == iteration - 1:
                    break
                t = np.where(comp, tt, t).astype(F32)
            out[yidx[comp], xidx[comp]] = tt[comp]
    return out


def hotspot():
    rows = cols = 28
    params = hotspot_params(rows, cols)
    targ, temp = R("temp_src", rows * cols, 320.0, 340.0, 41, "f32")
    parg, power = R("power", rows * cols, 0.0, 0.01, 42, "f32")
    temp, power = temp.reshape(rows, cols), power.reshape(rows, cols)
    nan = np.full((rows, cols), np.nan, F32)
    first = hotspot_launch(2, power, temp, nan, cols, rows, 2, 3, params)
    assert not np.isnan(first).any()
    second = hotspot_launch(1, power, first, temp, cols, rows, 2, 3, params)
    cap, rx, ry, rz, step = params
    scalars = [S("grid_cols", cols, "i32"), S("grid_rows", rows, "i32"),
               S("border_cols", 2, "i32"), S("border_rows", 2, "i32"), S("cap", cap, "f32"),
               S("rx", rx, "f32"), S("ry", ry, "f32"), S("rz", rz, "f32"),
               S("step_", step, "f32"), S("time_elapsed", 0.001, "f32")]
    return rows, cols, targ, parg, temp, first, second, scalars


@case(RD + "hotspot.xk", 0)
def rd_hotspot_1():
    rows, cols, targ, parg, temp, first, second, scalars = hotspot()
    return [S("iteration", 2, "i32"), parg, targ, V("temp_dst", f"uninit({rows * cols})"),
            E("temp_dst", first, "f32")] + scalars


@case(RD + "hotspot.xk", 1)
def rd_hotspot_2():
    rows, cols, targ, parg, temp, first, second, scalars = hotspot()
    dst = ("arg", "temp_dst", targ[2], None)
    return [S("iteration", 1, "i32"), parg, A("temp_src", first, "f32"), dst,
            E("temp_dst", second, "f32")] + scalars


def nw_case():
    n = 33
    penalty = 10
    ref = np.array(random_buffer(n * n, -4, 12, 51, "i32"), np.int32).reshape(n, n)
    m = np.zeros((n, n), np.int32)
    m[:, 0] = -np.arange(n) * penalty
    m[0, :] = -np.arange(n) * penalty
    states = [m.copy()]

    def block(by, bx):
        for r in range(16 * by + 1, 16 * by + 17):
            for c in range(16 * bx + 1, 16 * bx + 17):
                m[r, c] = max(m[r - 1, c - 1] + ref[r, c], m[r, c - 1] - penalty,
                              m[r - 1, c] - penalty)

    block(0, 0)
    states.append(m.copy())
    block(1, 0)
    block(0, 1)
    states.append(m.copy())
    block(1, 1)
    states.append(m.copy())
    return n, penalty, ref, states


def nw_run(launch, i):
    n, penalty, ref, states = nw_case()
    return [A("referrence", ref, "i32"), A("matrix_cuda", states[launch], "i32"),
            S("cols", n, "i32"), S("penalty", penalty, "i32"), S("i", i, "i32"),
            S("block_width", 2, "i32"), E("matrix_cuda", states[launch + 1], "i32")]


@case(RD + "nw.xk", 0)
def rd_nw_1():
    return nw_run(0, 1)


@case(RD + "nw.xk", 1)
def rd_nw_2():
    return nw_run(1, 2)


@case(RD + "nw.xk", 2)
def rd_nw_3():
    return nw_run(2, 1)


def pathfinder_launch(iteration, wall, src, dst, cols, start_step, border, grid):
    out = dst.copy()
    small = 256 - iteration * 2
    tx = np.arange(256)
    for bx in range(grid):
        blk_x = small * bx - border
        xidx = blk_x + tx
        vxmin = -blk_x if blk_x < 0 else 0
        vxmax = 255 - (blk_x + 255 - cols + 1) if blk_x + 255 > cols - 1 else 255
        w = np.maximum(tx - 1, vxmin)
        e = np.minimum(tx + 1, vxmax)
        valid = (tx >= vxmin) & (tx <= vxmax)
        prev = np.full(256, -(1 << 40), np.int64)
        inside = (xidx >= 0) & (xidx < cols)
        prev[inside] = src[xidx[inside]]
        for i in range(iteration):
            comp = (tx >= i + 1) & (tx <= 256 - i - 2) & valid
            row = wall[start_step + i]
            res = np.where(comp, np.minimum(np.minimum(prev[w], prev[tx]), prev[e])
                           + np.where(inside, row[np.clip(xidx, 0, cols - 1)], 0), 0)
            if i == iteration - 1:
                break
            prev = np.where(comp, res, prev)
        out[xidx[comp]] = res[comp]
    return out


def pathfinder():
    cols, rows, ph = 600, 11, 4
    arg, data = R("gpu_wall", rows * cols, 0, 10, 61, "i32")
    data = data.reshape(rows, cols).astype(np.int64)
    wall = data[1:]
    results = [data[0].copy(), np.zeros(cols, np.int64)]
    runs = []
    src, dst = 1, 0
    for t in range(0, rows - 1, ph):
        src, dst = dst, src
        it = min(ph, rows - t - 1)
        before = [r.copy() for r in results]
        results[dst] = pathfinder_launch(it, wall, results[src], results[dst], cols, t, ph, 3)
        runs.append((it, t, before[src], before[dst], results[dst].copy()))
    return cols, rows, ph, wall, runs


def pathfinder_run(k):
    cols, rows, ph, wall, runs = pathfinder()
    it, t, src, dst, out = runs[k]
    dst_arg = V("gpu_results", f"uninit({cols})") if k == 0 else A("gpu_results", dst, "i32")
    return [S("iteration", it, "i32"), A("gpu_wall", wall, "i32"), A("gpu_src", src, "i32"),
            dst_arg, S("cols", cols, "i32"), S("rows", rows, "i32"), S("start_step", t, "i32"),
            S("border", ph, "i32"), E("gpu_results", out, "i32")]


@case(RD + "pathfinder.xk", 0)
def rd_pathfinder_1():
    return pathfinder_run(0)


@case(RD + "pathfinder.xk", 1)
def rd_pathfinder_3():
    return pathfinder_run(2)


def backprop():
    n_in, hid = 64, 16
    iarg, inp = R("input_cuda", n_in + 1, 0.0, 1.0, 71, "f32")
    warg, w = R("input_hidden_cuda", (n_in + 1) * (hid + 1), 0.0, 1.0, 72, "f32")
    return n_in, hid, iarg, inp, warg, w.reshape(n_in + 1, hid + 1)


@case(RD + "backprop.xk", 0)
def rd_backprop_forward():
    n_in, hid, iarg, inp, warg, w = backprop()
    out = w.copy()
    partial = np.zeros(n_in // 16 * hid, F32)
    for by in range(n_in // 16):
        rows = slice(16 * by + 1, 16 * by + 17)
        wm = (w[rows, 1:17] * inp[rows][:, None]).astype(F32)
        for i in range(1, 5):
            p = 1 << i
            for ty in range(0, 16, p):
                wm[ty] = wm[ty] + wm[ty + p // 2]
        out[rows, 1:17] = wm
        partial[by * hid:(by + 1) * hid] = wm[0, :]
    return [iarg, V("output_hidden_cuda", f"fill({hid + 1}, 0.0)"), warg,
            V("hidden_partial_sum", f"uninit({n_in // 16 * hid})"), S("in_", n_in, "i32"),
            S("hid", hid, "i32"), E("input_hidden_cuda", out, "f32"),
            E("hidden_partial_sum", partial, "f32")]


@case(RD + "backprop.xk", 1)
def rd_backprop_adjust():
    n_in, hid = 64, 16
    darg, delta = R("delta", hid + 1, -0.5, 0.5, 73, "f32")
    larg, ly = R("ly", n_in + 1, 0.0, 1.0, 74, "f32")
    warg, w = R("w", (n_in + 1) * (hid + 1), 0.0, 1.0, 75, "f32")
    oarg, oldw = R("oldw", (n_in + 1) * (hid + 1), -0.1, 0.1, 76, "f32")
    w, oldw = w.reshape(n_in + 1, hid + 1), oldw.reshape(n_in + 1, hid + 1)
    nw, no = w.copy(), oldw.copy()
    d = delta[1:17].astype(F64)
    rows = slice(1, n_in + 1)
    upd = 0.3 * d[None, :] * ly[rows].astype(F64)[:, None] + 0.3 * oldw[rows, 1:17].astype(F64)
    nw[rows, 1:17] = (w[rows, 1:17].astype(F64) + upd).astype(F32)
    no[rows, 1:17] = upd.astype(F32)
    upd0 = 0.3 * d + 0.3 * oldw[0, 1:17].astype(F64)
    nw[0, 1:17] = (w[0, 1:17].astype(F64) + upd0).astype(F32)
    no[0, 1:17] = upd0.astype(F32)
    return [darg, S("hid", hid, "i32"), larg, S("in_", n_in, "i32"), warg, oarg,
            E("w", nw, "f32"), E("oldw", no, "f32")]


# ---------------------------------------------------------------------------------------------
# CUDA samples (NVIDIA/cuda-samples).


@case(CS + "vectorAdd.xk", 0)
def cs_vector_add():
    n = 2000
    aarg, a = R("a", n, -1.0, 1.0, 81, "f32")
    barg, b = R("b", n, -1.0, 1.0, 82, "f32")
    c = (a + b) + F32(0.0)
    return [aarg, barg, V("c", f"uninit({n})"), S("num_elements", n, "i32"), E("c", c, "f32")]


def matrix_mul():
    w_a, h_a, w_b = 64, 32, 32
    aarg, a = R("a", h_a * w_a, -1.0, 1.0, 91, "f32")
    barg, b = R("b", w_a * w_b, -1.0, 1.0, 92, "f32")
    c = matmul_acc(np.zeros((h_a, w_b), F32), a.reshape(h_a, w_a), b.reshape(w_a, w_b))
    return [V("c", f"uninit({h_a * w_b})"), aarg, barg, S("w_a", w_a, "i32"),
            S("w_b", w_b, "i32"), E("c", c, "f32")]


@case(CS + "matrixMul.xk", 0)
def cs_matrix_mul_16():
    return matrix_mul()


@case(CS + "matrixMul.xk", 1)
def cs_matrix_mul_32():
    return matrix_mul()


def transpose(k):
    width, height = 64, 32
    src = np.arange(width * height).astype(F32).reshape(height, width)
    return [V("odata", f"uninit({width * height})"), V("idata", f"iota({width * height})"),
            S("width", width, "i32"), S("height", height, "i32"), E("odata", src.T, "f32")]


@case(CS + "transpose.xk", 0)
def cs_transpose_coalesced():
    return transpose(0)


@case(CS + "transpose.xk", 1)
def cs_transpose_nbc():
    return transpose(1)


def reduction_input():
    return R("g_idata", 3000, -1.0, 1.0, 101, "f32")


def block_values(x, start, count):
    v = np.zeros(count, F32)
    k = np.arange(count) + start
    inside = k < len(x)
    v[inside] = x[k[inside]]
    return v


def reduce_tree_case(kind):
    arg, x = reduction_input()
    n, bs = len(x), 256
    out = []
    for g in range((n + bs - 1) // bs):
        sd = block_values(x, g * bs, bs)
        if kind == 0:
            s = 1
            while s < bs:
                for tid in range(0, bs, 2 * s):
                    sd[tid] = sd[tid] + sd[tid + s]
                s *= 2
        elif kind == 1:
            s = 1
            while s < bs:
                for tid in range(bs):
                    index = 2 * s * tid
                    if index < bs:
                        sd[index] = sd[index] + sd[index + s]
                s *= 2
        else:
            s = bs // 2
            while s > 0:
                sd[:s] = sd[:s] + sd[s:2 * s]
                s >>= 1
        out.append(sd[0])
    return [arg, V("g_odata", f"uninit({len(out)})"), S("n", n, "u32"), E("g_odata", out, "f32")]


@case(CS + "reduction.xk", 0)
def cs_reduce0():
    return reduce_tree_case(0)


@case(CS + "reduction.xk", 1)
def cs_reduce1():
    return reduce_tree_case(1)


@case(CS + "reduction.xk", 2)
def cs_reduce2():
    return reduce_tree_case(2)


def reduce34(warp):
    arg, x = reduction_input()
    n, bs = len(x), 256
    out = []
    for g in range((n + 2 * bs - 1) // (2 * bs)):
        my = block_values(x, g * 2 * bs, bs)
        second = block_values(x, g * 2 * bs + bs, bs)
        has = (np.arange(bs) + g * 2 * bs + bs) < n
        my = np.where(has, my + second, my).astype(F32)
        sd = my.copy()
        s = bs // 2
        while s > (32 if warp else 0):
            my[:s] = my[:s] + sd[s:2 * s]
            sd[:s] = my[:s]
            s >>= 1
        if warp:
            lane = my[:32] + sd[32:64]
            off = 16
            while off > 0:
                src = np.arange(32) + off
                other = np.where(src < 32, lane[np.minimum(src, 31)], lane)
                lane = (lane + other).astype(F32)
                off //= 2
            out.append(lane[0])
        else:
            out.append(my[0])
    return [arg, V("g_odata", f"uninit({len(out)})"), S("n", n, "u32"), E("g_odata", out, "f32")]


@case(CS + "reduction.xk", 3)
def cs_reduce3():
    return reduce34(False)


@case(CS + "reduction.xk", 4)
def cs_reduce4():
    return reduce34(True)


def exclusive_scan(x, length):
    """Exclusive scan of each `length`-element array of x, modulo 2^32."""
    x = x.astype(np.uint64).reshape(-1, length)
    inc = np.cumsum(x, axis=1) & 0xFFFFFFFF
    return ((inc - x) & 0xFFFFFFFF).astype(np.uint32).reshape(-1)


@case(CS + "scan.xk", 0)
def cs_scan_short():
    n, length = 1024, 16
    arg, x = R("d_src", n, 0, 1 << 31, 111, "u32", lanes=4)
    return [V("d_dst", f"uninit({n // 4})"), arg, S("size", length, "u32"),
            E("d_dst", exclusive_scan(x, length), "u32")]


def scan_large():
    n = 2048
    arg, x = R("d_src", n, 0, 1 << 31, 112, "u32", lanes=4)
    dst = exclusive_scan(x, 1024)
    tops = (dst.astype(np.uint64)[1023::1024] + x.astype(np.uint64)[1023::1024]) & 0xFFFFFFFF
    buf = exclusive_scan(tops, len(tops))
    final = ((dst.reshape(-1, 1024).astype(np.uint64) + buf.astype(np.uint64)[:, None])
             & 0xFFFFFFFF).astype(np.uint32)
    assert (final.reshape(-1) == exclusive_scan(x, n)).all()
    return n, arg, x, dst, buf, final


@case(CS + "scan.xk", 1)
def cs_scan_large_1():
    n, arg, x, dst, buf, final = scan_large()
    return [V("d_dst", f"uninit({n // 4})"), arg, S("size", 1024, "u32"), E("d_dst", dst, "u32")]


@case(CS + "scan.xk", 2)
def cs_scan_large_2():
    n, arg, x, dst, buf, final = scan_large()
    src = ("arg", "d_src", arg[2].replace(f"random({n // 4},", f"random({n},"), None)
    return [V("d_buf", f"uninit({len(buf)})"), A("d_dst", dst, "u32"), src,
            S("n", n // 1024, "u32"), S("array_length", n // 1024, "u32"), E("d_buf", buf, "u32")]


@case(CS + "scan.xk", 3)
def cs_scan_large_3():
    n, arg, x, dst, buf, final = scan_large()
    return [A("d_data", dst, "u32"), A("d_buffer", buf, "u32"), E("d_data", final, "u32")]


def histogram():
    count, groups = 3000, 4
    arg, data = R("d_data", count, 0, 1 << 32, 121, "u32")
    partial = np.zeros((groups, 256), np.uint32)
    stride = 192 * groups
    for g in range(groups):
        for t in range(192):
            for pos in range(g * 192 + t, count, stride):
                w = int(data[pos])
                for sh in (0, 8, 16, 24):
                    partial[g, (w >> sh) & 0xFF] += 1
    assert partial.sum() == 4 * count
    return count, groups, arg, data, partial


@case(CS + "histogram.xk", 0)
def cs_histogram256():
    count, groups, arg, data, partial = histogram()
    return [V("d_partial_histograms", f"uninit({groups * 256})"), arg,
            S("data_count", count, "u32"), E("d_partial_histograms", partial, "u32")]


@case(CS + "histogram.xk", 1)
def cs_histogram_merge():
    count, groups, arg, data, partial = histogram()
    full = np.bincount(np.concatenate([(data.astype(np.uint64) >> s) & 0xFF
                                       for s in (0, 8, 16, 24)]), minlength=256)
    assert (partial.sum(axis=0) == full).all()
    return [V("d_histogram", "uninit(256)"), A("d_partial_histograms", partial, "u32"),
            S("histogram_count", groups, "u32"), E("d_histogram", full, "u32")]


@case(CS + "simpleAtomicIntrinsics.xk", 0)
def cs_simple_atomics():
    length = 64 * 256
    init = [0] * 11
    init[8] = init[10] = 0xFF
    # computeGold (simpleAtomicIntrinsics_cpu.cpp), with [2] and [7] the in-range checks.
    gold = [10 * length, -10 * length, 1, length - 1, 0]
    val = 0
    for _ in range(length):
        val = 0 if val >= 17 else val + 1
    gold.append(val)
    val = 0
    for _ in range(length):
        val = 137 if (val == 0 or val > 137) else val - 1
    gold.append(val)
    gold.append(1)
    val = 0xFF
    for i in range(length):
        val &= 2 * i + 7
    gold.append(val)
    val = 0
    for i in range(length):
        val |= 1 << (i % 32)  # `1 << tid` takes the amount modulo 32 (docs/semantics.md)
    gold.append(val - (1 << 32) if val >= 1 << 31 else val)
    val = 0xFF
    for i in range(length):
        val ^= i
    gold.append(val)
    return [A("g_odata", init, "i32"), V("done", "[0]"), E("g_odata", gold, "i32"),
            E("done", [length], "u32")]


@case(RD + "particlefilter.xk", 0)
def rd_pf_sum():
    n = 1500
    blocks = -(-n // 512)
    arg, partial = R("partial_sums", blocks, 0.0, 100.0, 131, "f64")
    total = F64(0.0)
    for x in range(blocks):
        total = total + partial[x]
    return [arg, S("nparticles", n, "i32"), E("partial_sums", [total] + list(partial[1:]), "f64")]


def i32_wrap(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


@case(RD + "particlefilter.xk", 1)
def rd_pf_normalize():
    n = 400
    warg, w = R("weights", n, 0.0, 1.0, 132, "f64")
    sarg, seed = R("seed", n, 0, 1 << 31, 133, "i32")
    total = F64(0.0)
    for x in range(n):
        total = total + w[x]
    wn = w / total
    cdf = np.cumsum(wn)  # sequential: cdf[x] = weights[x] + cdf[x - 1]
    m = 2147483647
    num = i32_wrap(1103515245 * int(seed[0]) + 12345)
    s0 = int(math.fmod(num, m))  # C's %: truncating, sign of the dividend
    new_seed = seed.copy()
    new_seed[0] = s0
    u0 = F64(1.0) / F64(n) * abs(F64(s0) / F64(m))
    u = u0 + np.arange(n).astype(F64) / F64(n)
    return [warg, S("nparticles", n, "i32"), A("partial_sums", [total], "f64"),
            V("cdf", f"uninit({n})"), V("u", f"uninit({n})"), sarg, E("weights", wn, "f64"),
            E("cdf", cdf, "f64"), E("u", u, "f64"), E("seed", new_seed, "i32")]


# The same kernel with cdfCalc and d_randu as helpers taking buffers (issue 23 item 4).
case("tests/filetests/ports/particlefilter_helpers.xk", 0)(rd_pf_normalize)


def kmeans():
    npoints, nfeatures, nclusters = 700, 5, 4
    arg, feats = R("input", npoints * nfeatures, 0.0, 1.0, 141, "f32")
    feats = feats.reshape(npoints, nfeatures)
    clusters = feats[:nclusters].copy()
    best = np.full(npoints, -1, np.int32)
    min_dist = np.full(npoints, F32(3.40282347e38), F32)
    for i in range(nclusters):
        ans = np.zeros(npoints, F32)
        for j in range(nfeatures):
            diff = feats[:, j] - clusters[i, j]
            ans = ans + diff * diff
        closer = ans < min_dist
        min_dist = np.where(closer, ans, min_dist)
        best = np.where(closer, i, best).astype(np.int32)
    return npoints, nfeatures, nclusters, arg, feats, clusters, best


@case(RD + "kmeans.xk", 0)
def rd_kmeans_invert():
    npoints, nfeatures, nclusters, arg, feats, clusters, best = kmeans()
    return [arg, V("output", f"uninit({npoints * nfeatures})"), S("npoints", npoints, "i32"),
            S("nfeatures", nfeatures, "i32"), E("output", feats.T, "f32")]


@case(RD + "kmeans.xk", 1)
def rd_kmeans_point():
    npoints, nfeatures, nclusters, arg, feats, clusters, best = kmeans()
    return [A("features", feats.T, "f32"), S("nfeatures", nfeatures, "i32"),
            S("npoints", npoints, "i32"), S("nclusters", nclusters, "i32"),
            V("membership", f"fill({npoints}, -1)"), A("c_clusters", clusters, "f32"),
            V("block_clusters", "fill(1, 0.0)"), V("block_deltas", "fill(1, 0)"),
            E("membership", best, "i32")]


def gaussian_states():
    size = 20
    lamda = F32(-0.01)
    coe = np.zeros(2 * size - 1, F32)
    for i in range(size):
        c = F32(10 * math.exp(float(lamda * F32(i))))
        coe[size - 1 + i] = c
        coe[size - 1 - i] = c
    a = np.array([[coe[size - 1 - i + j] for j in range(size)] for i in range(size)], F32)
    b = np.ones(size, F32)
    m = np.zeros((size, size), F32)
    states = []
    for t in range(size - 1):
        states.append(("fan1", t, m.copy(), a.copy(), b.copy()))
        m[t + 1:, t] = a[t + 1:, t] / a[t, t]
        states.append(("fan2", t, m.copy(), a.copy(), b.copy()))
        a[t + 1:, t:] = a[t + 1:, t:] - m[t + 1:, t][:, None] * a[t, t:][None, :]
        b[t + 1:] = b[t + 1:] - m[t + 1:, t] * b[t]
    states.append(("end", size - 1, m.copy(), a.copy(), b.copy()))
    return size, states


def gaussian_run(k):
    size, states = gaussian_states()
    kind, t, m, a, b = states[k]
    _, _, m2, a2, b2 = states[k + 1]
    if kind == "fan1":
        return [A("m_cuda", m, "f32"), A("a_cuda", a, "f32"), S("size", size, "i32"),
                S("t", t, "i32"), E("m_cuda", m2, "f32")]
    return [A("m_cuda", m, "f32"), A("a_cuda", a, "f32"), A("b_cuda", b, "f32"),
            S("size", size, "i32"), S("j1", size - t, "i32"), S("t", t, "i32"),
            E("a_cuda", a2, "f32"), E("b_cuda", b2, "f32")]


@case(RD + "gaussian.xk", 0)
def rd_gaussian_fan1_0():
    return gaussian_run(0)


@case(RD + "gaussian.xk", 1)
def rd_gaussian_fan2_0():
    return gaussian_run(1)


@case(RD + "gaussian.xk", 2)
def rd_gaussian_fan1_5():
    return gaussian_run(10)


@case(RD + "gaussian.xk", 3)
def rd_gaussian_fan2_5():
    return gaussian_run(11)


def vote_pattern(size):
    p = np.zeros(size, np.uint32)
    for i in range(2 * size // 8, 4 * size // 8):
        p[i] = i if i & 1 else 0
    for i in range(2 * size // 4, 3 * size // 4):
        p[i] = 0 if i & 1 else i
    p[3 * size // 4:] = 0xFFFFFFFF
    return p


def per_warp(values, fn):
    v = np.asarray(values).reshape(-1, 32)
    return np.repeat([fn(w) for w in v], 32)


@case(CS + "simpleVoteIntrinsics.xk", 0)
def cs_vote_any():
    p = vote_pattern(128)
    return [A("input", p, "u32"), V("result", "uninit(128)"), S("size", 128, "i32"),
            E("result", per_warp(p != 0, np.any).astype(np.uint32), "u32")]


@case(CS + "simpleVoteIntrinsics.xk", 1)
def cs_vote_all():
    p = vote_pattern(128)
    return [A("input", p, "u32"), V("result", "uninit(128)"), S("size", 128, "i32"),
            E("result", per_warp(p != 0, np.all).astype(np.uint32), "u32")]


@case(CS + "simpleVoteIntrinsics.xk", 2)
def cs_vote_kernel3():
    ws = 32
    tx = np.arange(3 * ws)
    pred = tx >= (ws * 3) // 2
    info = np.zeros((3 * ws, 3), bool)
    info[:, 0] = per_warp(pred, np.any)
    info[:, 1] = pred
    info[:, 2] = per_warp(pred, np.all)
    return [V("info", f"fill({ws * 9}, false)"), S("warp_size", ws, "i32"),
            E("info", list(info.reshape(-1)) + [False] * (ws * 9 - info.size), "bool")]


def shfl_scan():
    n, bs = 2048, 256
    arg, data = R("data", n, 0, 100, 151, "i32")
    blocks = data.reshape(-1, bs).astype(np.int64)
    scanned = np.cumsum(blocks, axis=1)
    partial = scanned[:, -1].copy()
    partial_scanned = np.cumsum(partial)
    final = scanned.copy()
    final[1:] += partial_scanned[:-1, None]
    assert (final.reshape(-1) == np.cumsum(data)).all()
    return n, bs, arg, scanned.reshape(-1), partial, partial_scanned, final.reshape(-1)


@case(CS + "shfl_scan.xk", 0)
def cs_shfl_scan_blocks():
    n, bs, arg, scanned, partial, partial_scanned, final = shfl_scan()
    return [arg, S("width", 32, "i32"), V("partial_sums", f"uninit({n // bs})"),
            S("has_partial_sums", 1, "u32"), E("data", scanned, "i32"),
            E("partial_sums", partial, "i32")]


@case(CS + "shfl_scan.xk", 1)
def cs_shfl_scan_partials():
    n, bs, arg, scanned, partial, partial_scanned, final = shfl_scan()
    return [A("data", partial, "i32"), S("width", 32, "i32"), V("partial_sums", "fill(1, 0)"),
            S("has_partial_sums", 0, "u32"), E("data", partial_scanned, "i32")]


@case(CS + "shfl_scan.xk", 2)
def cs_shfl_scan_uniform_add():
    n, bs, arg, scanned, partial, partial_scanned, final = shfl_scan()
    return [A("data", scanned, "i32"), S("data_offset", bs, "u32"),
            A("partial_sums", partial_scanned, "i32"), S("len", n, "i32"), E("data", final, "i32")]


# PolyBench/GPU solvers and doitgen.


def lu_states():
    n = 24
    arg, a = R("a", n * n, -1.0, 1.0, 171, "f32")
    a = (a.reshape(n, n) + F32(n) * np.eye(n, dtype=F32)).astype(F32)
    states = []
    for k in range(6):
        states.append(a.copy())
        a[k, k + 1:] = a[k, k + 1:] / a[k, k]
        states.append(a.copy())
        a[k + 1:, k + 1:] = a[k + 1:, k + 1:] - a[k + 1:, k][:, None] * a[k, k + 1:][None, :]
    states.append(a.copy())
    return n, states


def lu_run(k, second):
    n, states = lu_states()
    s = 2 * k + (1 if second else 0)
    return [S("n", n, "i32"), A("a", states[s], "f32"), S("k", k, "i32"),
            E("a", states[s + 1], "f32")]


@case(PB + "lu.xk", 0)
def pb_lu1_0():
    return lu_run(0, False)


@case(PB + "lu.xk", 1)
def pb_lu2_0():
    return lu_run(0, True)


@case(PB + "lu.xk", 2)
def pb_lu1_5():
    return lu_run(5, False)


@case(PB + "lu.xk", 3)
def pb_lu2_5():
    return lu_run(5, True)


def gramschmidt_states():
    ni, nj = 16, 12
    arg, a = R("a", ni * nj, -1.0, 1.0, 161, "f32")
    a = a.reshape(ni, nj)
    r = pb_init(nj, nj, lambda i, j: i * (j + 2), nj)
    q = pb_init(ni, nj, lambda i, j: i * (j + 1), nj)
    states = []
    for k in range(4):
        states.append((a.copy(), r.copy(), q.copy()))
        nrm = F32(0.0)
        for i in range(ni):
            nrm = F32(nrm + a[i, k] * a[i, k])
        r[k, k] = np.sqrt(nrm)
        states.append((a.copy(), r.copy(), q.copy()))
        q[:, k] = a[:, k] / r[k, k]
        states.append((a.copy(), r.copy(), q.copy()))
        acc = np.zeros(nj - k - 1, F32)
        for i in range(ni):
            acc = acc + q[i, k] * a[i, k + 1:]
        r[k, k + 1:] = acc
        for i in range(ni):
            a[i, k + 1:] = a[i, k + 1:] - q[i, k] * r[k, k + 1:]
    states.append((a.copy(), r.copy(), q.copy()))
    return ni, nj, states


def gramschmidt_run(k, kernel):
    ni, nj, states = gramschmidt_states()
    s = 3 * k + kernel
    a, r, q = states[s]
    a2, r2, q2 = states[s + 1]
    items = [S("ni", ni, "i32"), S("nj", nj, "i32"), A("a", a, "f32"), A("r", r, "f32"),
             A("q", q, "f32"), S("k", k, "i32")]
    if kernel == 0:
        return items + [E("r", r2, "f32")]
    if kernel == 1:
        return items + [E("q", q2, "f32")]
    return items + [E("a", a2, "f32"), E("r", r2, "f32")]


@case(PB + "gramschmidt.xk", 0)
def pb_gs1_0():
    return gramschmidt_run(0, 0)


@case(PB + "gramschmidt.xk", 1)
def pb_gs2_0():
    return gramschmidt_run(0, 1)


@case(PB + "gramschmidt.xk", 2)
def pb_gs3_0():
    return gramschmidt_run(0, 2)


@case(PB + "gramschmidt.xk", 3)
def pb_gs1_3():
    return gramschmidt_run(3, 0)


@case(PB + "gramschmidt.xk", 4)
def pb_gs2_3():
    return gramschmidt_run(3, 1)


@case(PB + "gramschmidt.xk", 5)
def pb_gs3_3():
    return gramschmidt_run(3, 2)


def doitgen_states():
    nr, nq, np_ = 4, 7, 10
    r_, q_, p_ = np.meshgrid(np.arange(nr), np.arange(nq), np.arange(np_), indexing="ij")
    a = ((r_ * q_ + p_).astype(F32) / F32(np_)).astype(F32)
    c4 = pb_init(np_, np_, lambda i, j: i * j, np_)
    s = np.zeros((nr, nq, np_), F32)
    states = []
    for r in range(3):
        states.append((s.copy(), a.copy()))
        acc = np.zeros((nq, np_), F32)
        for k in range(np_):
            acc = acc + a[r, :, k][:, None] * c4[k, :][None, :]
        s[r] = acc
        states.append((s.copy(), a.copy()))
        a[r] = s[r]
    states.append((s.copy(), a.copy()))
    return nr, nq, np_, c4, states


def doitgen_run(second):
    nr, nq, np_, c4, states = doitgen_states()
    k = 4 + (1 if second else 0)
    s, a = states[k]
    s2, a2 = states[k + 1]
    head = [S("nr", nr, "i32"), S("nq", nq, "i32"), S("np", np_, "i32"), A("sum", s, "f32"),
            A("a", a, "f32"), A("c4", c4, "f32"), S("r", 2, "i32")]
    return head + [E("a", a2, "f32") if second else E("sum", s2, "f32")]


@case(PB + "doitgen.xk", 0)
def pb_doitgen1():
    return doitgen_run(False)


@case(PB + "doitgen.xk", 1)
def pb_doitgen2():
    return doitgen_run(True)


def bitonic_shared(keys, vals, array_length, direction):
    """bitonicSortShared on each 1024-element block: the same comparators in the same order."""
    keys, vals = keys.copy(), vals.copy()
    tx = np.arange(512)
    for b in range(len(keys) // 1024):
        k = keys[b * 1024:(b + 1) * 1024]
        v = vals[b * 1024:(b + 1) * 1024]

        def compare(stride, ddd):
            pos = 2 * tx - (tx & (stride - 1))
            a, c = pos, pos + stride
            swap = (k[a] > k[c]).astype(np.uint32) == ddd
            ka, kc, va, vc = k[a].copy(), k[c].copy(), v[a].copy(), v[c].copy()
            k[a] = np.where(swap, kc, ka)
            k[c] = np.where(swap, ka, kc)
            v[a] = np.where(swap, vc, va)
            v[c] = np.where(swap, va, vc)

        size = 2
        while size < array_length:
            ddd = direction ^ ((tx & (size // 2)) != 0).astype(np.uint32)
            stride = size // 2
            while stride > 0:
                compare(stride, ddd)
                stride >>= 1
            size <<= 1
        stride = array_length // 2
        while stride > 0:
            compare(stride, np.uint32(direction))
            stride >>= 1
    return keys, vals


def bitonic_case(array_length, direction, seed):
    n = 2048 if array_length == 1024 else 1024
    arg, keys = R("d_src_key", n, 0, 1 << 32, seed, "u32")
    vals = np.arange(n, dtype=np.uint32)
    k, v = bitonic_shared(keys, vals, array_length, direction)
    for a in range(0, n, array_length):
        chunk = k[a:a + array_length]
        assert (np.sort(chunk) == (chunk if direction else chunk[::-1])).all()
        assert (keys[v[a:a + array_length]] == chunk).all()
    return [V("d_dst_key", f"uninit({n})"), V("d_dst_val", f"uninit({n})"), arg,
            V("d_src_val", f"iota({n})"), S("array_length", array_length, "u32"),
            S("dir", direction, "u32"), E("d_dst_key", k, "u32"), E("d_dst_val", v, "u32")]


@case(CS + "sortingNetworks.xk", 0)
def cs_bitonic_1024():
    return bitonic_case(1024, 1, 181)


@case(CS + "sortingNetworks.xk", 1)
def cs_bitonic_64():
    return bitonic_case(64, 0, 182)
