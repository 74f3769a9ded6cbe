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


def R(name, n, lo, hi, seed, ty):
    """`arg name = random(n, lo, hi, seed S)` and the values it gives (a numpy array)."""
    if ty in ("f16", "f32", "f64"):
        text = f"random({n}, {fmt_value(lo, 'f64')}, {fmt_value(hi, 'f64')}, seed {seed})"
    else:
        text = f"random({n}, {int(lo)}, {int(hi)}, seed {seed})"
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
