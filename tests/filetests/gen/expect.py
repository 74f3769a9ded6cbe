#!/usr/bin/env python3
"""Computes the inputs and expected values of the generated file tests and writes them into
the run blocks of the `.xk` files (the `arg`/`expect` lines named by each case).

    python3 tests/filetests/gen/expect.py          # rewrite the files
    python3 tests/filetests/gen/expect.py --check  # exit 1 if any file is out of date

Each case is an independent host model of its kernel, written from the kernel's source and
the semantics in docs/text-format.md / docs/semantics.md (wrapping integers, truncating
division, saturating float->int casts, IEEE rounding), never from an interpreter's output.
"""

import math
import os
import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

import numpy as np  # noqa: E402

from xk import (  # noqa: E402
    ROOT,
    f32_from_bits,
    float_to_int,
    int_to_float,
    is_signed,
    random_buffer,
    rewrite,
    rnd,
    shr,
    tdiv,
    trem,
    wrap,
)

CASES = []


def case(path, run=0):
    def deco(fn):
        CASES.append((path, run, fn))
        return fn

    return deco


def A(name, values, ty):
    return ("arg", name, values, ty)


def E(name, values, ty):
    return ("expect", name, values, ty)


F32 = np.float32
F64 = np.float64
F16 = np.float16


# ---------------------------------------------------------------------------------------------
# arith/


@case("tests/filetests/arith/int_i32.xk")
def int_i32():
    a = [7, -7, 7, -7, 2147483647, -2147483648, 123456, 0, -2147483648, 65536, -1, 1000]
    b = [2, 2, -2, -2, 1, 3, -1000, 5, 2, 65536, 1, -7]
    out = []
    for x, y in zip(a, b):
        out += [
            wrap(x + y, "i32"),
            wrap(x - y, "i32"),
            wrap(x * y, "i32"),
            tdiv(x, y),
            trem(x, y),
            x & y,
            x | y,
            x ^ y,
            wrap(-x, "i32"),
            ~x,
        ]
    out += [0] * (120 - len(out))
    return [A("a", a, "i32"), A("b", b, "i32"), E("out", out, "i32")]


@case("tests/filetests/arith/int_u32.xk")
def int_u32():
    a = [7, 0xFFFFFFFF, 0x80000000, 0, 123456789, 4000000000, 1, 0xDEADBEEF, 65535, 3000000000]
    b = [2, 2, 3, 5, 1000, 7, 0xFFFFFFFF, 0x10000, 65537, 2999999999]
    out = []
    for x, y in zip(a, b):
        out += [
            wrap(x + y, "u32"),
            wrap(x - y, "u32"),
            wrap(x * y, "u32"),
            x // y,
            x % y,
            x & y,
            x | y,
            x ^ y,
            wrap(~x, "u32"),
        ]
    return [A("a", a, "u32"), A("b", b, "u32"), E("out", out, "u32")]


@case("tests/filetests/arith/int64.xk", 0)
def int_i64():
    a = [7, -7, 1 << 40, -(1 << 62), (1 << 63) - 1, -(1 << 63), 123456789012345, -5]
    b = [2, 2, 3, -(1 << 20), 1, 7, -1000003, 1 << 33]
    out = []
    for x, y in zip(a, b):
        out += [
            wrap(x + y, "i64"),
            wrap(x - y, "i64"),
            wrap(x * y, "i64"),
            tdiv(x, y),
            trem(x, y),
            (x & y) | (x ^ y),
            wrap(-x, "i64"),
            ~x,
        ]
    return [A("a", a, "i64"), A("b", b, "i64"), E("out", out, "i64")]


@case("tests/filetests/arith/int64.xk", 1)
def int_u64():
    M = (1 << 64) - 1
    a = [7, M, 1 << 63, 1 << 40, 0xDEADBEEFCAFEBABE, 12345678901234567890, 0, 1 << 32]
    b = [2, 2, 3, 1 << 20, 0x100000001, 987654321, 5, (1 << 32) - 1]
    out = []
    for x, y in zip(a, b):
        out += [
            wrap(x + y, "u64"),
            wrap(x - y, "u64"),
            wrap(x * y, "u64"),
            x // y,
            x % y,
            (x & y) ^ (x | 0xFFFF000000000000),
            wrap(~x, "u64"),
        ]
    return [A("a", a, "u64"), A("b", b, "u64"), E("out", out, "u64")]


def small(ty, ops, a, b):
    out = []
    for x, y in zip(a, b):
        for op in ops:
            out.append(wrap(op(x, y), ty))
    return out


@case("tests/filetests/arith/small_ints.xk", 0)
def ops_i8():
    a = [100, -128, 127, -7, 64, -1]
    b = [100, 1, -1, 2, 3, -128]
    ops = [
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        tdiv,
        trem,
        lambda x, y: x ^ y,
        lambda x, y: -x,
        lambda x, y: ~x,
    ]
    return [A("a", a, "i8"), A("b", b, "i8"), E("out", small("i8", ops, a, b), "i8")]


@case("tests/filetests/arith/small_ints.xk", 1)
def ops_u8():
    a = [200, 0, 255, 17, 128, 3]
    b = [100, 1, 255, 4, 2, 7]
    ops = [
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        lambda x, y: x // y,
        lambda x, y: x % y,
        lambda x, y: (x & y) | 0x80,
        lambda x, y: ~x,
    ]
    return [A("a", a, "u8"), A("b", b, "u8"), E("out", small("u8", ops, a, b), "u8")]


@case("tests/filetests/arith/small_ints.xk", 2)
def ops_i16():
    a = [30000, -32768, 300, -301, 32767, -1]
    b = [10000, 1, 300, 7, -2, 32767]
    ops = [
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        tdiv,
        trem,
        lambda x, y: -x,
    ]
    return [A("a", a, "i16"), A("b", b, "i16"), E("out", small("i16", ops, a, b), "i16")]


@case("tests/filetests/arith/small_ints.xk", 3)
def ops_u16():
    a = [60000, 0, 65535, 1000, 256, 12345]
    b = [10000, 1, 65535, 7, 256, 54321]
    ops = [
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        lambda x, y: x // y,
        lambda x, y: x % y,
        lambda x, y: x | y,
    ]
    return [A("a", a, "u16"), A("b", b, "u16"), E("out", small("u16", ops, a, b), "u16")]


@case("tests/filetests/arith/shifts.xk", 0)
def shifts():
    s = [0, 1, 3, 7, 8, 15, 16, 31]
    a32 = [1, -1, -123456, 0x40000000, -2147483648, 0x12345678, -65536, 5]
    au32 = [1, 0xFFFFFFFF, 0x80000000, 0x12345678, 0xF0F0F0F0, 3, 0x10000, 0xFFFF0000]
    a64 = [1, -1, -(1 << 40), 1 << 30, -(1 << 63), 0x0123456789ABCDEF, -3, 7]
    au64 = [1, (1 << 64) - 1, 1 << 63, 0xDEADBEEF, 0xF0F0F0F0F0F0F0F0, 3, 1 << 33, 12345]
    a8 = [1, -1, -128, 0x40, 100, -3, 127, 33]
    au16 = [1, 0xFFFF, 0x8000, 0x1234, 0xF0F0, 3, 0x100, 0xABCD]
    o32, ou32, o64, ou64, o8, ou16 = [], [], [], [], [], []
    for i, k in enumerate(s):
        o32 += [wrap(a32[i] << k, "i32"), shr(a32[i], k, "i32")]
        ou32 += [wrap(au32[i] << k, "u32"), shr(au32[i], k, "u32")]
        k64 = k * 2 + 1
        o64 += [wrap(a64[i] << k64, "i64"), shr(a64[i], k64, "i64")]
        ou64 += [wrap(au64[i] << k64, "u64"), shr(au64[i], k64, "u64")]
        k8 = k // 4
        o8 += [wrap(a8[i] << k8, "i8"), shr(a8[i], k8, "i8")]
        k16 = k // 2
        ou16 += [wrap(au16[i] << k16, "u16"), shr(au16[i], k16, "u16")]
    return [
        A("a32", a32, "i32"),
        A("au32", au32, "u32"),
        A("a64", a64, "i64"),
        A("au64", au64, "u64"),
        A("a8", a8, "i8"),
        A("au16", au16, "u16"),
        A("s", s, "u32"),
        E("o32", o32, "i32"),
        E("ou32", ou32, "u32"),
        E("o64", o64, "i64"),
        E("ou64", ou64, "u64"),
        E("o8", o8, "i8"),
        E("ou16", ou16, "u16"),
    ]


@case("tests/filetests/arith/shift_literals.xk", 0)
def shift_literals():
    a = [1, -1, 0x7FFFFFFF, -8]
    out = []
    for x in a:
        out += [x, shr(x, 31, "i32"), wrap(x << 31, "i32"), shr(wrap(x << 4, "i32"), 2, "i32")]
    return [E("out", out, "i32")]


def float_ops(ty, a, b, extra):
    T = {"f16": F16, "f32": F32, "f64": F64}[ty]
    out = []
    with np.errstate(all="ignore"):
        for x, y in zip(a, b):
            x, y = T(x), T(y)
            out += [x + y, x - y, x * y, x / y, extra(x)]
    return out


@case("tests/filetests/arith/float_f32.xk")
def float_f32():
    a = [1.5, 0.1, 3.0e38, 1.0, -1.0, 1.0e-30, 16777216.0, -0.0, 7.0, 1.0e-38]
    b = [2.25, 0.2, 3.0e38, 0.0, 0.0, 1.0e-20, 1.0, 5.0, 3.0, 1.0e10]
    a = [F32(v) for v in a]
    b = [F32(v) for v in b]
    out = float_ops("f32", a, b, lambda x: -(x * F32(0.5)) + F32(1.0))
    return [A("a", a, "f32"), A("b", b, "f32"), E("out", out, "f32")]


@case("tests/filetests/arith/float_f32.xk", 1)
def float_rem():
    a = [7.5, -7.5, 7.5, 1e10, 0.3, -0.0]
    b = [2.0, 2.0, -2.0, 3.0, 0.1, 1.0]
    a = [F32(v) for v in a]
    b = [F32(v) for v in b]
    # math.fmod is exact; the remainder of two f32 values is an f32 value.
    out = [F32(math.fmod(float(x), float(y))) for x, y in zip(a, b)]
    return [A("a", a, "f32"), A("b", b, "f32"), E("out", out, "f32")]


@case("tests/filetests/arith/float_f64.xk")
def float_f64():
    a = [1.0, 0.1, 1.0e300, 2.0**-1074, 1.0 / 3.0, -2.5, 1.0e16, 123.456]
    b = [2.0**-40, 0.2, 1.0e10, 0.5, 3.0, 0.0, 1.0, -0.001]
    out = float_ops("f64", a, b, lambda x: -x * F64(0.25) - F64(1.0))
    return [A("a", a, "f64"), A("b", b, "f64"), E("out", out, "f64")]


@case("tests/filetests/arith/float_f16.xk")
def float_f16():
    a = [2048.0, 65504.0, 0.1, 1.0, -3.0, 0.000061035156, 100.0, 1.5]
    b = [1.0, 2.0, 0.2, 3.0, 0.0, 0.5, 0.01, -0.25]
    a = [F16(v) for v in a]
    b = [F16(v) for v in b]
    out = float_ops("f16", a, b, lambda x: -x + F16(0.5))
    return [A("a", a, "f16"), A("b", b, "f16"), E("out", out, "f16")]


def cmp_bits(x, y):
    return (
        (x == y) | (x != y) << 1 | (x < y) << 2 | (x <= y) << 3 | (x > y) << 4 | (x >= y) << 5
    )


@case("tests/filetests/arith/compare.xk")
def compare():
    ai = [1, -1, 5, -2147483648, 7, 0]
    bi = [1, 1, -5, 2147483647, 8, 0]
    au = [1, 0xFFFFFFFF, 5, 0x80000000, 7, 0]
    bu = [1, 1, 0x80000005, 0x7FFFFFFF, 8, 0]
    af = [1.0, -0.0, float("nan"), float("-inf"), 2.5, 1.0]
    bf = [1.0, 0.0, 1.0, 3.0, float("nan"), 1.0000001]
    a8 = [1, 255, 5, 128, 7, 0]
    b8 = [1, 1, 200, 127, 8, 0]
    out = []
    for k in range(6):
        out += [
            cmp_bits(ai[k], bi[k]),
            cmp_bits(au[k], bu[k]),
            cmp_bits(F32(af[k]), F32(bf[k])),
            cmp_bits(a8[k], b8[k]),
        ]
    out = [int(v) for v in out]
    return [
        A("ai", ai, "i32"),
        A("bi", bi, "i32"),
        A("au", au, "u32"),
        A("bu", bu, "u32"),
        A("af", af, "f32"),
        A("bf", bf, "f32"),
        A("a8", a8, "u8"),
        A("b8", b8, "u8"),
        E("out", out, "u32"),
    ]


# ---------------------------------------------------------------------------------------------
# casts/

INTS = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]


@case("tests/filetests/casts/float_to_int.xk", 0)
def f32_to_int():
    x = [0.0, 3.7, -3.7, 2.5, -0.5, 1e10, -1e10, float("nan"), float("inf"), float("-inf"),
         255.9, 256.0, -129.0, 65535.5, 2147483520.0, 4294967040.0, -2147483904.0,
         9.3e18, 1.9e19, -32768.9]
    x = [F32(v) for v in x]
    items = [A("x", x, "f32")]
    for ty in INTS:
        items.append(E("o" + ty, [float_to_int(v, ty) for v in x], ty))
    return items


@case("tests/filetests/casts/float_to_int.xk", 1)
def f64_to_int():
    x = [0.0, -1.999, 9.2233720368547748e18, 9.2233720368547758e18, -9.3e18, 1.8446744073709550e19,
         1.9e19, float("nan"), -1.0, 2147483647.9, -2147483648.9, 4294967296.0]
    items = [A("x", x, "f64")]
    for ty in ["i64", "u64", "i32"]:
        items.append(E("o" + ty, [float_to_int(v, ty) for v in x], ty))
    return items


@case("tests/filetests/casts/float_to_int.xk", 2)
def f16_to_int():
    x = [0.0, 1.5, -1.5, 127.9, 128.0, -200.0, 65504.0, float("-inf"), float("nan"), 255.5]
    x = [F16(v) for v in x]
    items = [A("x", x, "f16")]
    for ty in ["i8", "u8", "i32"]:
        items.append(E("o" + ty, [float_to_int(v, ty) for v in x], ty))
    return items


@case("tests/filetests/casts/int_to_int.xk", 0)
def from_i32():
    x = [0, 1, -1, 127, 128, -129, 65535, -2147483648]
    items = [A("x", x, "i32")]
    for ty in ["i8", "u8", "i16", "u16", "u32", "i64", "u64"]:
        items.append(E("o" + ty, [wrap(v, ty) for v in x], ty))
    return items


@case("tests/filetests/casts/int_to_int.xk", 1)
def from_narrow():
    a = [0, 1, -1, 127, -128, -5]
    b = [0, 1, 255, 127, 128, 200]
    c = [0, 1, 65535, 32768, 1000, 40000]
    d = [0, 1, -1, 32767, -32768, -300]
    return [
        A("a", a, "i8"),
        A("b", b, "u8"),
        A("c", c, "u16"),
        A("d", d, "i16"),
        E("oa", a, "i32"),
        E("ob", b, "i32"),
        E("oc", c, "u64"),
        E("od", d, "i64"),
    ]


@case("tests/filetests/casts/int_to_int.xk", 2)
def from_wide():
    a = [0, -1, 1 << 32, (1 << 32) + 5, -(1 << 40) - 3, 0x7FFFFFFFFFFFFFFF]
    b = [0, (1 << 64) - 1, 1 << 63, 0x1FF, 12345678901234567890, 0x100]
    return [
        A("a", a, "i64"),
        A("b", b, "u64"),
        E("oa", [wrap(v, "i32") for v in a], "i32"),
        E("ob", [wrap(v, "u16") for v in a], "u16"),
        E("oc", [wrap(v, "i64") for v in b], "i64"),
        E("od", [wrap(v, "u8") for v in b], "u8"),
    ]


@case("tests/filetests/casts/int_float.xk", 0)
def int_to_float_case():
    a = [0, 1, -1, 16777217, -16777219, 2147483647, -2147483648, 123456789]
    b = [0, 1, 16777217, 16777219, 4294967295, 2147483649, 3000000001, 33554435]
    c = [0, -1, (1 << 53) + 1, -(1 << 53) - 3, (1 << 63) - 1, -(1 << 63), 1 << 62, 9007199254740993]
    d = [0, 1, (1 << 64) - 1, (1 << 63) + (1 << 39), (1 << 40) + 1, (1 << 63) + (1 << 39) + 1,
         0x8000018000000000, 12345]
    e = [0, 1, 2049, 2051, 65504, 65519, 65520, 65535]
    f = [0, 1, -1, 127, -128, 5, -5, 100]
    return [
        A("a", a, "i32"),
        A("b", b, "u32"),
        A("c", c, "i64"),
        A("d", d, "u64"),
        A("e", e, "u16"),
        A("f", f, "i8"),
        E("oa", [int_to_float(v, "f32") for v in a], "f32"),
        E("ob", [int_to_float(v, "f32") for v in b], "f32"),
        E("oc", [int_to_float(v, "f64") for v in c], "f64"),
        E("od", [int_to_float(v, "f32") for v in d], "f32"),
        E("oe", [int_to_float(v, "f16") for v in e], "f16"),
        E("of", [float(v) for v in f], "f64"),
    ]


@case("tests/filetests/casts/int_float.xk", 1)
def float_to_float():
    a = [F32(v) for v in [0.1, -2.5, 3.0e38, 1e-40, 65520.0, 65519.0, 0.333333343, 1e-8]]
    b = [0.1, 1.0 + 2.0**-24, 1.0 + 3 * 2.0**-24, 1e39, -1e-50, 3.4028235677973366e38,
         1.0 / 3.0, 2.0**-149]
    h = [F16(v) for v in [0.1, -2.0, 65504.0, 6e-8, 0.333, float("inf"), -0.0, 1000.0]]
    with np.errstate(all="ignore"):
        return [
            A("a", a, "f32"),
            A("b", b, "f64"),
            A("h", h, "f16"),
            E("oa", [F64(v) for v in a], "f64"),
            E("ob", [F32(v) for v in b], "f32"),
            E("oc", [F16(v) for v in a], "f16"),
            E("od", [F32(v) for v in h], "f32"),
            E("oe", [F64(v) for v in h], "f64"),
        ]


# ---------------------------------------------------------------------------------------------
# control/


@case("tests/filetests/control/loops.xk")
def loops():
    out = []
    for i in range(16):
        count = i
        m, steps = i + 1, 0
        while m != 1:
            m = m // 2 if m % 2 == 0 else 3 * m + 1
            steps += 1
        s = sum(range(0, i * 5, i % 3 + 1))
        odd = sum(j for j in range(i, 30, 2) if j % 3 != 0)
        none = len(range(10, i))
        lim, iters = 4, 0
        for _ in range(0, 4):
            lim += 1
            iters += 1
        out += [count, steps, s, odd, none, iters * 100 + lim]
    return [E("out", out, "u32")]


@case("tests/filetests/control/labelled.xk")
def labelled():
    out = []
    for i in range(8):
        target, found = i + 12, 0
        done = False
        for a in range(1, 10):
            for b in range(1, 10):
                if a * b == target:
                    found = a * 100 + b
                    done = True
                    break
            if done:
                break
        count = 0
        for r in range(6):
            c = 0
            while True:
                if c == 8:
                    break
                if c == r + i % 3:
                    break  # continue 'rows
                count += 1
                c += 1
        n = k = 0
        finished = False
        while not finished:
            k += 1
            broke_inner = False
            while True:
                n += 1
                if n % 5 == 0:
                    break  # continue 'a: skips `n += 100`
                if k > i + 2:
                    finished = True
                    break
                if n % 2 == 0:
                    broke_inner = True
                    break
            if broke_inner:
                n += 100
        out += [found, count, n * 1000 + k]
    return [E("out", out, "u32")]


@case("tests/filetests/control/compound_assign.xk")
def compound():
    x = [0, 1, -50, 12345, -99999, 2147483000]
    out = []
    for v0 in x:
        v = wrap(v0 + 100, "i32")
        v = wrap(v - 3, "i32")
        v = wrap(v * 5, "i32")
        v = tdiv(v, 3)
        v = trem(v, 1000)
        v &= 0x3FF
        v |= 0x1000
        v ^= 0x0F0F
        v = wrap(v << 2, "i32")
        v = shr(v, 1, "i32")
        b = wrap(wrap(v0 + 7, "i32") * 2, "i32")
        b = shr(b, 1, "i32")
        arr0 = wrap(v - 1, "i32")
        arr1 = trem(3 << 4, 7)
        wx, wy = -v, (v + 1) ^ 1
        out += [v, b, wrap(arr0 + arr1, "i32"), wrap(wx + wy * 10, "i32")]
    return [A("x", x, "i32"), E("out", out, "i32")]


# ---------------------------------------------------------------------------------------------
# memory/


@case("tests/filetests/memory/shared_static.xk", 0)
def reverse():
    out = [g // 64 * 64 + 63 - g % 64 for g in range(256)]
    return [E("out", out, "u32")]


@case("tests/filetests/memory/barrier_loop.xk", 0)
def smooth():
    x = [float((k * 37) % 23 - 11) for k in range(64)]
    out = []
    for grp in range(2):
        a = [F32(v) for v in x[grp * 32:(grp + 1) * 32]]
        for _ in range(5):
            a = [(a[(l + 31) % 32] + a[(l + 1) % 32]) * F32(0.5) for l in range(32)]
        out += a
    return [A("x", x, "f32"), E("out", out, "f32")]


@case("tests/filetests/memory/barrier_loop.xk", 1)
def hillis_steele():
    x = [(k * 13) % 10 for k in range(128)]
    out = []
    for grp in range(2):
        acc = 0
        for v in x[grp * 64:(grp + 1) * 64]:
            acc += v
            out.append(acc)
    return [A("x", x, "u32"), E("out", out, "u32")]


# ---------------------------------------------------------------------------------------------
# coords/


def launch(grid, block):
    """Yields (global, local, group) coordinate triples in x-fastest order."""
    grid = list(grid) + [1] * (3 - len(grid))
    block = list(block) + [1] * (3 - len(block))
    for gz in range(grid[2]):
        for gy in range(grid[1]):
            for gx in range(grid[0]):
                for lz in range(block[2]):
                    for ly in range(block[1]):
                        for lx in range(block[0]):
                            loc = (lx, ly, lz)
                            grp = (gx, gy, gz)
                            glob = tuple(grp[d] * block[d] + loc[d] for d in range(3))
                            yield glob, loc, grp, grid, block


@case("tests/filetests/coords/coords_1d.xk")
def coords_1d():
    out = [0] * 96
    for glob, loc, grp, grid, block in launch([3], [4]):
        o = glob[0] * 8
        out[o:o + 8] = [glob[0], loc[0], grp[0], block[0], grid[0], 0, 11, 11]
    return [E("out", out, "u32")]


@case("tests/filetests/coords/coords_2d.xk")
def coords_2d():
    out = [0] * 576
    for glob, loc, grp, grid, block in launch([3, 2], [4, 2]):
        g = glob[1] * (block[0] * grid[0]) + glob[0]
        lin = loc[0] + loc[1] * block[0]
        out[g * 12:g * 12 + 12] = [glob[0], glob[1], loc[0], loc[1], grp[0], grp[1], block[0],
                                   block[1], grid[0], grid[1], 110, lin % 4]
    return [E("out", out, "u32")]


@case("tests/filetests/coords/coords_3d.xk")
def coords_3d():
    out = [0] * 768
    for glob, loc, grp, grid, block in launch([2, 2, 2], [2, 3, 2]):
        sx, sy = block[0] * grid[0], block[1] * grid[1]
        g = (glob[2] * sy + glob[1]) * sx + glob[0]
        lin = loc[0] + loc[1] * block[0] + loc[2] * block[0] * block[1]

        def t(v):
            return v[0] + v[1] * 10 + v[2] * 100

        out[g * 8:g * 8 + 8] = [t(glob), t(loc), t(grp), t(block), t(grid), lin % 4, 4, g]
    return [E("out", out, "u32")]


# ---------------------------------------------------------------------------------------------
# atomics/


@case("tests/filetests/atomics/global_u32.xk")
def atomics_u32():
    x = [(k * 2654435761) % 100000 for k in range(64)]
    acc = [64, sum(x) % (1 << 32), (1000000 - sum(x)) % (1 << 32), min(x), max(x)]
    and_ = 0xFFFFFFFF
    or_ = 0
    xor = 0
    for v in x:
        and_ &= ~(1 << (v % 32)) & 0xFFFFFFFF
        or_ |= 1 << (v % 32)
        xor ^= v
    acc += [and_, or_, xor, 42, sum(x) % (1 << 32)]
    cas = [5 if k % 3 else 6 for k in range(64)]
    cas_new = [100 + k if c == 5 else c for k, c in enumerate(cas)]
    return [
        A("x", x, "u32"),
        A("cas", cas, "u32"),
        A("cas_old", [0] * 64, "u32"),
        E("acc", acc, "u32"),
        E("cas", cas_new, "u32"),
        E("cas_old", cas, "u32"),
    ]


@case("tests/filetests/atomics/global_i32.xk")
def atomics_i32():
    x = [((k * 7919) % 2001) - 1000 for k in range(32)]
    x[5] = -2147483000
    x[9] = 2147483000
    s = wrap(sum(x), "i32")
    and_, or_, xor = -1, 0, 0
    for v in x:
        and_ &= v
        or_ |= v
        xor ^= v
    acc = [s, wrap(-sum(x), "i32"), min(0, min(x)), max(0, max(x)), and_, or_, xor]
    return [
        A("x", x, "i32"),
        E("acc", acc, "i32"),
        E("old", [wrap(2 * v, "i32") for v in x], "i32"),
    ]


@case("tests/filetests/atomics/atomic64.xk", 0)
def atomics_u64():
    M = (1 << 64) - 1
    x = [((k + 1) * 0x9E3779B97F4A7C15) & M for k in range(16)]
    acc = [sum(x) & M, (-sum(x)) & M, min(x), max(x)]
    and_, or_, xor = M, 0, 0
    for v in x:
        and_ &= v | 0xFFFFFFFF
        or_ |= v & 0xFFFFFFFF00000000
        xor ^= v
    acc += [and_, or_, xor, 0x123456789ABCDEF0]
    cas = [1 << 40 if k % 2 == 0 else (1 << 40) + 1 for k in range(16)]
    cas_new = [x[k] if cas[k] == 1 << 40 else cas[k] for k in range(16)]
    return [
        A("x", x, "u64"),
        A("cas", cas, "u64"),
        A("cas_old", [0] * 16, "u64"),
        E("acc", acc, "u64"),
        E("cas", cas_new, "u64"),
        E("cas_old", cas, "u64"),
    ]


@case("tests/filetests/atomics/atomic64.xk", 1)
def atomics_i64():
    x = [(k - 8) * (1 << 35) + k for k in range(16)]
    acc = [wrap(sum(x), "i64"), min(0, min(x)), max(0, max(x)), wrap(-sum(x), "i64")]
    return [A("x", x, "i64"), E("acc", acc, "i64")]


# ---------------------------------------------------------------------------------------------
# wave/


def waves(values, width):
    """Splits a block-ordered list into waves of `width`."""
    return [values[k:k + width] for k in range(0, len(values), width)]


def reduce_case(n, width):
    xu = [((k * 2654435761) >> 7) & 0xFFFFFF | (0xF0000000 if k % 5 else 0) for k in range(n)]
    xi = [((k * 7919) % 201) - 100 for k in range(n)]
    ou, oi, of = [], [], []
    for wu, wi in zip(waves(xu, width), waves(xi, width)):
        s = sum(wu) % (1 << 32)
        a = 0xFFFFFFFF
        o = x = 0
        for v in wu:
            a &= v
            o |= v
            x ^= v
        for _ in wu:
            ou += [s, a, o, x]
        for _ in wi:
            oi += [min(wi), max(wi), sum(wi)]
            of.append(F32(sum(wi)) + F32(max(wi)))
    return [A("xu", xu, "u32"), A("xi", xi, "i32"), E("ou", ou, "u32"), E("oi", oi, "i32"),
            E("of", of, "f32")]


@case("tests/filetests/wave/reduce.xk", 0)
def reduce32():
    return reduce_case(128, 32)


@case("tests/filetests/wave/reduce.xk", 1)
def reduce8():
    return reduce_case(32, 8)


@case("tests/filetests/wave/scan.xk")
def scans():
    n, width = 32, 16
    xu = [(((k * 40503) >> 3) & 0xFFFF) | (0xFFFF0000 if k % 7 else 0x0F0F0000) for k in range(n)]
    xi = [((k * 7919) % 2001) - 1000 for k in range(n)]
    ou, oi, of = [], [], []
    for wu, wi in zip(waves(xu, width), waves(xi, width)):
        s, a, o, x = 0, 0xFFFFFFFF, 0, 0
        mn, mx, fs = 2147483647, -2147483648, F32(0)
        for u, v in zip(wu, wi):
            e = [s, a, o, x, mn, mx, fs]
            s = (s + u) % (1 << 32)
            a &= u
            o |= u
            x ^= u
            mn = min(mn, v)
            mx = max(mx, v)
            fs = fs + F32(v)
            ou += [s, e[0], a, e[1], o, e[2], x, e[3]]
            oi += [mn, e[4], mx, e[5]]
            of += [fs, e[6]]
    return [A("xu", xu, "u32"), A("xi", xi, "i32"), E("ou", ou, "u32"), E("oi", oi, "i32"),
            E("of", of, "f32")]


@case("tests/filetests/wave/shuffle.xk")
def shuffles():
    n, W = 64, 32
    x = [(k * 97 + 13) % 1000 for k in range(n)]
    ou, of, ol = [], [], []
    for g in range(n):
        base = g - g % W
        l = g % W
        w = x[base:base + W]
        up = w[l - 3] if l >= 3 else w[l]
        down = w[l + 5] if l + 5 < W else w[l]
        ou += [w[5], w[(l * 7 + 3) % 32], w[l ^ 1], w[l ^ 18], up, down, w[(l + 3) % W],
               w[(l + 31) % W]]
        fdown = w[l + 1] if l + 1 < W else w[l]
        of += [F32(fdown) * F32(0.5), F32(w[31])]
        ol.append(w[l ^ 31] << 33)
    return [A("x", x, "u32"), E("ou", ou, "u32"), E("of", of, "f32"), E("ol", ol, "i64")]


@case("tests/filetests/wave/vote.xk", 0)
def vote32():
    n, W = 64, 32
    x = [(k * 37 + 5) % 100 for k in range(n)]
    x[40] = 0  # the second wave is not all positive
    ballot, flags, elected = [], [], []
    for g in range(n):
        base = g - g % W
        l = g % W
        w = x[base:base + W]
        ballot.append(sum(1 << k for k, v in enumerate(w) if v > 10))
        flags.append(int(any(v > 90 for v in w)) + 2 * int(all(v > 0 for v in w)))
        elected += [int(l == 0), int(l == 5)]
    return [A("x", x, "u32"), E("ballot", ballot, "u64"), E("flags", flags, "u32"),
            E("elected", elected, "u32")]


@case("tests/filetests/wave/vote.xk", 1)
def vote64():
    mask = sum(1 << l for l in range(64) if l % 3 == 0 or l >= 60)
    return [E("ballot", [mask] * 384, "u64")]


@case("tests/filetests/wave/divergent.xk")
def divergent():
    out, bal = [], []
    odd = [l for l in range(32) if l % 2 == 1]
    even = [l for l in range(32) if l % 2 == 0]
    for g in range(64):
        l = g % 32
        if l % 2 == 1:
            rank = odd.index(l)
            out += [sum(odd), rank + 1, 70 + int(l == odd[0])]
            bal.append(sum(1 << k for k in odd if k > 20))
        else:
            rank = even.index(l)
            out += [len(even), max(even[:rank], default=0), 100]
            bal.append(sum(1 << k for k in even))
    return [E("out", out, "u32"), E("bal", bal, "u64")]


# ---------------------------------------------------------------------------------------------
# math/


def exact_f64(q):
    """The f64 holding the rational `q` exactly (asserted), for one final rounding."""
    from fractions import Fraction

    v = float(q)
    assert Fraction(v) == q, f"{q} is not exact in f64"
    return v


@case("tests/filetests/math/f32_exact.xk")
def f32_exact():
    from fractions import Fraction as Q

    a = [F32(v) for v in [-2.7, -0.3, 0.49999997, 1 + 2.0**-12, 3.0, -1e30, 1e-40, 7.75]]
    b = [F32(v) for v in [1.5, 2.0, 0.25, 1 + 2.0**-12, -3.0, 1e-10, 1e-40, -0.125]]
    c = [F32(v) for v in [0.1, -1.0, 0.0, -1.0, 9.0, 0.0, 0.0, 100.0]]
    out = []
    for x, y, z in zip(a, b, c):
        fused = F32(exact_f64(Q(float(x)) * Q(float(y)) + Q(float(z))))
        out += [fused, x * y + z, min(x, y), max(x, y), abs(x), np.floor(x), np.ceil(x),
                np.rint(x), np.trunc(x), min(max(x, F32(-1.0)), F32(2.5))]
    assert out[30] != out[31]  # fma rounds once: 2^-11 + 2^-24 vs 2^-11
    return [A("a", a, "f32"), A("b", b, "f32"), A("c", c, "f32"), E("out", out, "f32")]


@case("tests/filetests/math/f32_transcendental.xk")
def f32_transcendental():
    pos = [F32(v) for v in [0.001, 0.5, 2.0, 3.0, 10.0, 123.456, 1e6, 1e-20]]
    sgn = [F32(v) for v in [-5.0, -0.5, 0.25, 1.0, 2.0, -3.0, 10.0, 40.0]]
    ex = [F32(v) for v in [0.5, 2.5, -2.0, 0.333, 3.0, -0.75, 1.5, 0.1]]
    out = []
    for p, s, e in zip(pos, sgn, ex):
        p, s, e = float(p), float(s), float(e)
        vals = [math.sqrt(p), 1.0 / math.sqrt(p), math.exp(s), 2.0**s, math.log(p), math.log2(p),
                math.sin(s), math.cos(s), math.tanh(s), p**e]
        out += [F32(v) for v in vals]
    return [A("pos", pos, "f32"), A("sgn", sgn, "f32"), A("ex", ex, "f32"), E("out", out, "f32")]


@case("tests/filetests/math/f64.xk")
def f64_math():
    from fractions import Fraction as Q

    x = [2.0, 0.1, 1e-300, 12345.678, 7.0, 1e300]
    y = [0.5, -1.5, 3.25, -0.1, 20.0, -0.001]
    out = []
    for v, w in zip(x, y):
        out += [math.sqrt(v), 1.0 / math.sqrt(v), math.exp(w), 2.0**w, math.log(v), math.log2(v),
                math.sin(w), math.cos(w), math.tanh(w), v**w, float(Q(v) * Q(w) + 1),
                float(math.floor(w)), float(math.ceil(w)), v + w, abs(w), min(max(w, -1.0), 1.0)]
    return [A("x", x, "f64"), A("y", y, "f64"), E("out", out, "f64")]


def f64_special(f):
    """`f` with C's results for arguments Python's math refuses (domain errors, overflow)."""

    def g(*args):
        try:
            return f(*args)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf
    return g


@case("tests/filetests/math/f64_transcendental.xk")
def f64_transcendental():
    inf, nan = math.inf, math.nan
    x = [-745.5, -744.9, -708.4, -30.25, -1.5, -0.0, 0.0, 1e-300, 0.178, 0.5, 1.0, 3.0, 19.5,
         22.5, 100.0, 709.5, 710.0, 1023.75, -1074.0, -1022.5, inf, -inf, nan, 1000000.3,
         -123456789.5, 134217728.0, 1e15, -3.0e18, 1e22, 1e100, -2.5e200, 1.7976931348623157e308]
    p = [5e-324, 1e-310, 2.2250738585072014e-308, 1e-300, 0.1, 0.5, 0.75, 0.999999999,
         1.0, 1.0000001, 1.4142135623730951, 2.0, 3.0, 10.0, 1024.0, 1e10, 123456.789, 1e100,
         1e300, 1.7976931348623157e308, 0.0, -0.0, -1.0, -inf, inf, nan, 7.25e-200, 0.3,
         8.0, 0.125, 65536.0, 4.5e15]

    def rsqrt(v):
        if v == 0:
            return math.copysign(inf, v)
        return 1.0 / math.sqrt(v) if v == v and v > 0 else (0.0 if v == inf else nan)

    def log(v, base2):
        if v == 0:
            return -inf
        if v != v or v < 0:
            return nan
        return math.log2(v) if base2 else math.log(v)

    out = []
    for v, q in zip(x, p):
        trig = [nan, nan] if math.isinf(v) else [math.sin(v), math.cos(v)]
        out += [f64_special(math.exp)(v), f64_special(lambda t: 2.0**t)(v), *trig,
                math.tanh(v), log(q, False), log(q, True), rsqrt(q)]
    return [A("x", x, "f64"), A("p", p, "f64"), E("out", out, "f64")]


@case("tests/filetests/math/f64_transcendental.xk", run=1)
def f64_pow():
    inf, nan = math.inf, math.nan
    a = [2.0, 2.0, 2.0, 10.0, 0.5, 1.0000001, 0.999999, 7.0, 1e-300, 3.0, 0.0, 2.0, inf, nan,
         1.0, 0.5, 2.0, 1.5, 1e300, 5e-324, 1.1, 0.25, 3.7, 123.456, 2.0, 1.0, 0.9, 6.0, 1e-5,
         0.0, 2.5, 1e10]
    b = [0.5, -1074.0, 1023.5, 308.25, 1e6, 5e9, -7.0e8, 300.0, 1.02, 0.0, -1.0, 3.0, 2.0, 0.0,
         nan, inf, -inf, -3.0, -1.05, 0.5, 7000.0, -510.0, 11.0, 0.333, 1e-20, 1e300, -7001.0,
         -395.0, 61.0, 3.0, -2.0, 30.5]

    def cpow(x, y):
        # Python raises where C returns ±inf (a zero base to a negative power, overflow):
        # the sign is the base's to an odd integer power.
        odd = math.isfinite(y) and y == math.floor(y) and math.fmod(y, 2.0) != 0
        if x == 0 and y < 0:
            return math.copysign(inf, x) if odd else inf
        try:
            return math.pow(x, y)
        except ValueError:
            return nan
        except OverflowError:
            return -inf if x < 0 and odd else inf

    out = []
    for x, y in zip(a, b):
        out += [cpow(x, y), cpow(-x, y)]
    return [A("a", a, "f64"), A("b", b, "f64"), E("out", out, "f64")]


@case("tests/filetests/math/f16.xk")
def f16_math():
    x = [F16(v) for v in [0.625, -1.75, 2.0, 3.3, -0.1, 6.0]]
    out = []
    for v in x:
        f = float(v)
        out += [F16(math.sqrt(abs(f))), F16(math.exp(f)), F16(math.sin(f)), F16(math.floor(f)),
                F16(np.rint(f)), max(v, F16(0.25)), abs(v), F16(exact_f64(f * f - 1.0)),
                min(max(v, F16(-2.0)), F16(2.0))]
    return [A("x", x, "f16"), E("out", out, "f16")]


@case("tests/filetests/math/host_functions.xk", 0)
def f16_more():
    x = [F16(v) for v in [0.625, 2.0, 2.3, -0.4, 3.0, -2.9, 1.1, -0.75]]
    out = []
    for v in x:
        f = float(v)
        p = float(abs(v) + F16(0.5))  # an f16 sum, rounded once
        out += [F16(1.0 / math.sqrt(p)), F16(2.0**f), F16(math.log(p)), F16(math.log2(p)),
                F16(math.cos(f)), F16(math.tanh(f)), F16(math.pow(p, 1.5))]
    return [A("x", x, "f16"), E("out", out, "f16")]


@case("tests/filetests/math/host_functions.xk", 1)
def exact_rest():
    x = [F16(v) for v in [7.5, -7.5, 100.5, -0.0, 0.3, 2049.0, -3.25, 0.1]]
    y = [F16(v) for v in [2.0, 2.0, -3.0, 1.0, 0.1, 3.0, 0.5, -0.03]]
    oh = []
    for v, w in zip(x, y):
        # fmod is exact and its result is representable in the operands' type.
        # np.ceil/np.trunc keep the sign of zero (math.ceil returns an int).
        oh += [F16(math.fmod(float(v), float(w))), np.ceil(v), np.trunc(v), min(v, w)]
    # Small quotients only: Vulkan's f64 `%` is the driver's `FRem`, which lavapipe gets
    # wrong from quotients of about 1e5 on (123.456 % -0.001 gave 0; a known defect,
    # docs/vulkan-backend.md).
    a = [7.5, -7.5, 10.0, 5.0e-324, 0.3, -0.0, 1.0e-300, -1.0e-310]
    b = [2.0, 2.0, -3.0, 1.0e-310, 0.1, 1.0, 3.0, 2.0]
    od = [math.fmod(u, w) for u, w in zip(a, b)]
    return [A("x", x, "f16"), A("y", y, "f16"), A("a", a, "f64"), A("b", b, "f64"),
            E("oh", oh, "f16"), E("od", od, "f64")]


@case("tests/filetests/math/int_math.xk")
def int_math():
    a = [5, -5, 2147483647, -2147483647, 0, -150]
    b = [3, 7, -2147483648, 2147483647, 0, 150]
    u = [5, 0xFFFFFFFF, 0x80000000, 3, 0x7FFFFFFF, 100]
    v = [3, 1, 0x7FFFFFFF, 0x80000001, 0x80000000, 100]
    l = [-(1 << 45), 1 << 45, -3, 7, -(1 << 62), 1 << 62]
    c = [-5, 5, 127, -127, 0, 3]
    oi, ou, ol, ob = [], [], [], []
    for k in range(6):
        oi += [min(a[k], b[k]), max(a[k], b[k]), abs(a[k]), min(max(a[k], -100), 100)]
        ou += [min(u[k], v[k]), max(u[k], v[k]), min(max(u[k], 10), 0x80000000)]
        ol += [abs(l[k]), max(l[k], -(1 << 40)), min(max(l[k], -5), 1 << 50)]
        ob += [abs(c[k]), min(c[k], 3)]
    return [A("a", a, "i32"), A("b", b, "i32"), A("u", u, "u32"), A("v", v, "u32"),
            A("l", l, "i64"), A("c", c, "i8"), E("oi", oi, "i32"), E("ou", ou, "u32"),
            E("ol", ol, "i64"), E("ob", ob, "i8")]


# ---------------------------------------------------------------------------------------------
# matrix/


def small_ints(n, seed, lo=-3, hi=3):
    """A deterministic list of small integers (an LCG; no relation to the run block's random)."""
    out, s = [], seed
    for _ in range(n):
        s = (s * 1103515245 + 12345) % (1 << 31)
        out.append(lo + (s >> 8) % (hi - lo + 1))
    return out


@case("tests/filetests/matrix/mma_f16.xk", 0)
def mma_f16():
    a = np.array(small_ints(16 * 32, 1), dtype=np.float64).reshape(16, 32)
    b = np.array(small_ints(32 * 16, 2), dtype=np.float64).reshape(32, 16)
    c = np.array(small_ints(256, 3, -50, 50), dtype=np.float64).reshape(16, 16)
    dmat = c + a @ b
    d = [-1.0] * 388
    for r in range(16):
        for col in range(16):
            d[4 + 24 * r + col] = dmat[r, col]
    return [A("a", a.flatten().tolist(), "f16"), A("b", b.flatten().tolist(), "f16"),
            A("c", c.flatten().tolist(), "f32"), E("d", d, "f32")]


@case("tests/filetests/matrix/mma_f32.xk", 0)
def mma_f32():
    a = np.array(small_ints(32 * 16, 4, -8, 8), dtype=np.float64).reshape(32, 16) * 0.25
    b = np.array(small_ints(16 * 16, 5, -8, 8), dtype=np.float64).reshape(16, 16) * 0.25
    d = a @ b
    return [A("a", a.flatten().tolist(), "f32"), A("b", b.flatten().tolist(), "f32"),
            E("d", d.flatten().tolist(), "f32")]


# ---------------------------------------------------------------------------------------------
# templates/


def transposed(rows, cols):
    out = [0] * (rows * cols)
    for r in range(rows):
        for c in range(cols):
            out[c * rows + r] = r * cols + c
    return out


@case("tests/filetests/templates/tile.xk", 0)
def tile_16_16():
    return [E("out", transposed(48, 32), "u32")]


@case("tests/filetests/templates/tile.xk", 1)
def tile_8_32():
    return [E("out", transposed(48, 32), "u32")]


@case("tests/filetests/templates/tile.xk", 2)
def tile_32_8():
    return [E("out", transposed(32, 32), "u32")]


# ---------------------------------------------------------------------------------------------
# kernels/


@case("tests/filetests/kernels/saxpy.xk", 1)
def saxpy_random():
    y = random_buffer(50, -1.0, 1.0, 7, "f32")
    x = random_buffer(50, 0.0, 10.0, 8, "f32")
    a = F32(-1.5)
    return [E("y", [a * xv + yv for xv, yv in zip(x, y)], "f32")]


@case("tests/filetests/kernels/reduce_shared.xk")
def reduce_shared():
    x = list(range(2000)) + [0] * 48
    return [E("partial", [sum(x[g * 256:(g + 1) * 256]) for g in range(8)], "u32")]


@case("tests/filetests/kernels/scan.xk", 0)
def block_scan4():
    return block_scan()


@case("tests/filetests/kernels/scan.xk", 1)
def block_scan16():
    return block_scan()


@case("tests/filetests/kernels/scan.xk", 2)
def block_scan32():
    return block_scan()


def block_scan():
    x = [(k * 7 + (k >> 3)) % 13 for k in range(1024)]
    out = []
    for g in range(4):
        out += np.cumsum(x[g * 256:(g + 1) * 256]).tolist()
    return [A("x", x, "u32"), E("out", out, "u32")]


@case("tests/filetests/kernels/matmul_tiled.xk")
def matmul():
    m, n, k = 32, 48, 64
    a = np.array(small_ints(m * k, 11, -4, 4), dtype=np.float64).reshape(m, k)
    b = np.array(small_ints(k * n, 12, -4, 4), dtype=np.float64).reshape(k, n)
    c = a @ b
    return [A("a", a.flatten().tolist(), "f32"), A("b", b.flatten().tolist(), "f32"),
            E("c", c.flatten().tolist(), "f32")]


@case("tests/filetests/kernels/histogram.xk")
def histogram():
    x = [(k * k + 3 * k + 7) % 1000 for k in range(3000)]
    bins = [0] * 64
    for v in x:
        bins[v % 64] += 1
    return [A("x", x, "u32"), E("bins", bins, "u32")]


@case("tests/filetests/kernels/transpose.xk")
def transpose():
    return [E("out", [float(v) for v in transposed(40, 24)], "f32")]


@case("tests/filetests/kernels/stencil.xk")
def laplace():
    w = h = 32
    u = [((x * 17 + y * 31) % 23) - 11 for y in range(h) for x in range(w)]

    def at(x, y):
        return u[y * w + x] if 0 <= x < w and 0 <= y < h else 0

    out = [4 * at(x, y) - at(x, y - 1) - at(x, y + 1) - at(x - 1, y) - at(x + 1, y)
           for y in range(h) for x in range(w)]
    return [A("u", u, "i32"), E("out", out, "i32")]


@case("tests/filetests/kernels/bitonic.xk")
def bitonic():
    data = [(k * 2654435761) % 1000 for k in range(512)]
    out = sorted(data[:256]) + sorted(data[256:])
    return [A("data", data, "u32"), E("data", out, "u32")]


@case("tests/filetests/kernels/mandelbrot.xk")
def mandelbrot():
    width, height, max_iter = 32, 24, 64
    out = []
    for py in range(height):
        for px in range(width):
            cr = F32(-2.0) + F32(3.0) * F32(px) / F32(width)
            ci = F32(-1.25) + F32(2.5) * F32(py) / F32(height)
            zr = zi = F32(0.0)
            it = 0
            while it < max_iter:
                zr2 = zr * zr
                zi2 = zi * zi
                if zr2 + zi2 > F32(4.0):
                    break
                zi = F32(2.0) * zr * zi + ci
                zr = zr2 - zi2 + cr
                it += 1
            out.append(it)
    return [E("out", out, "u32")]


# ---------------------------------------------------------------------------------------------
# linalg/ (PolyBench/GPU shapes; every sum in the kernel's order, each operation rounded to f32)

LINALG = "tests/filetests/linalg/readonly_matvec.xk"


def matvec(a, x, rows, cols, y):
    """y[i] += a[i * cols + j] * x[j] over j, in f32."""
    y = [F32(v) for v in y]
    for i in range(rows):
        for j in range(cols):
            y[i] = F32(y[i] + F32(a[i * cols + j] * x[j]))
    return y


def mv_case(n, seeds, y0=None):
    b = random_buffer(n * n, -1.0, 1.0, seeds[0], "f32")
    x = random_buffer(n, -1.0, 1.0, seeds[1], "f32")
    y = y0 if y0 is not None else [F32(0.0)] * n
    return [E("y", matvec(b, x, n, n, y), "f32")]


@case(LINALG, 0)
def linalg_mv():
    return mv_case(50, (41, 42))


@case(LINALG, 1)
def linalg_mv_rw():
    return mv_case(50, (41, 42))


@case(LINALG, 2)
def linalg_mv_last():
    return mv_case(50, (41, 42))


@case(LINALG, 3)
def linalg_mv_256():
    return mv_case(256, (43, 44), random_buffer(256, -1.0, 1.0, 45, "f32"))


@case(LINALG, 4)
def linalg_atax_1():
    a = random_buffer(60 * 40, -1.0, 1.0, 51, "f32")
    x = random_buffer(40, -1.0, 1.0, 52, "f32")
    return [E("tmp", matvec(a, x, 60, 40, [F32(0.0)] * 60), "f32")]


@case(LINALG, 5)
def linalg_atax_2():
    nx, ny = 60, 40
    a = random_buffer(nx * ny, -1.0, 1.0, 51, "f32")
    tmp = random_buffer(nx, -1.0, 1.0, 53, "f32")
    y = [F32(0.0)] * ny
    for j in range(ny):
        for i in range(nx):
            y[j] = F32(y[j] + F32(a[i * ny + j] * tmp[i]))
    return [E("y", y, "f32")]


@case(LINALG, 6)
def linalg_gesummv():
    n, alpha, beta = 50, F32(1.5), F32(1.25)
    a = random_buffer(n * n, -1.0, 1.0, 61, "f32")
    b = random_buffer(n * n, -1.0, 1.0, 62, "f32")
    x = random_buffer(n, -1.0, 1.0, 63, "f32")
    tmp = matvec(a, x, n, n, [F32(0.0)] * n)
    y = matvec(b, x, n, n, [F32(0.0)] * n)
    y = [F32(F32(alpha * t) + F32(beta * v)) for t, v in zip(tmp, y)]
    return [E("y", y, "f32"), E("tmp", tmp, "f32")]


@case(LINALG, 7)
def linalg_mm2_1():
    ni, nj, nk, alpha = 18, 22, 20, F32(1.5)
    a = random_buffer(ni * nk, -1.0, 1.0, 71, "f32")
    b = random_buffer(nk * nj, -1.0, 1.0, 72, "f32")
    tmp = [F32(0.0)] * (ni * nj)
    for i in range(ni):
        for j in range(nj):
            for k in range(nk):
                tmp[i * nj + j] = F32(tmp[i * nj + j] + F32(F32(alpha * a[i * nk + k]) * b[k * nj + j]))
    return [E("tmp", tmp, "f32")]


@case(LINALG, 8)
def linalg_mm2_2():
    ni, nj, nl, beta = 18, 22, 16, F32(1.25)
    tmp = random_buffer(ni * nj, -1.0, 1.0, 73, "f32")
    c = random_buffer(nj * nl, -1.0, 1.0, 74, "f32")
    d = random_buffer(ni * nl, -1.0, 1.0, 75, "f32")
    for i in range(ni):
        for j in range(nl):
            d[i * nl + j] = F32(d[i * nl + j] * beta)
            for k in range(nj):
                d[i * nl + j] = F32(d[i * nl + j] + F32(tmp[i * nj + k] * c[k * nl + j]))
    return [E("d", d, "f32")]


# ---------------------------------------------------------------------------------------------
# examples/ (only where an expectation is too long to state by formula)


@case("examples/matmul.xk", 0)
def example_matmul():
    return matmul()


# The kernels ported from public suites (tests/filetests/suites/) have their models in suites.py.
from suites import CASES as SUITE_CASES  # noqa: E402
from ops import CASES as OPS_CASES  # noqa: E402

CASES += SUITE_CASES
CASES += OPS_CASES


def main():
    check = "--check" in sys.argv[1:]
    by_file = {}
    for path, run, fn in CASES:
        by_file.setdefault(path, []).append((run, fn))
    stale = []
    for path, runs in by_file.items():
        full = os.path.join(ROOT, path)
        with open(full) as f:
            original = f.read()
        text = original
        for run, fn in runs:
            text = rewrite(text, run, fn(), where=f"{path} ({fn.__name__})")
        if text != original:
            stale.append(path)
            if not check:
                with open(full, "w") as f:
                    f.write(text)
    if check and stale:
        print("out of date:", *stale, sep="\n  ")
        sys.exit(1)
    verb = "checked" if check else f"rewrote {len(stale)}"
    print(f"{len(CASES)} cases in {len(by_file)} files; {verb}")


if __name__ == "__main__":
    main()
