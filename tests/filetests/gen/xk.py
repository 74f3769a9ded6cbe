"""Helpers for the expected-value generator: exact host models of the kernel IR's scalar
semantics (wrapping integers, truncating division, saturating float->int casts, IEEE rounding
to f16/f32/f64) and a rewriter that puts generated `arg`/`expect` lines into `.xk` run blocks.

Only the standard library and numpy are used, so `python3 tests/filetests/gen/expect.py`
reproduces every generated value.
"""

import math
import os
import re
import struct

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def is_signed(ty):
    return ty.startswith("i")


def wrap(v, ty):
    """Two's-complement wrap of the integer `v` to `ty`."""
    bits = INT_BITS[ty]
    v &= (1 << bits) - 1
    if is_signed(ty) and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def int_range(ty):
    bits = INT_BITS[ty]
    if is_signed(ty):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def tdiv(a, b):
    """Integer division truncating toward zero (C, Rust, GPUs)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trem(a, b):
    """Remainder with the sign of the dividend: a == tdiv(a, b) * b + trem(a, b)."""
    return a - tdiv(a, b) * b


def shr(a, s, ty):
    """`>>`: arithmetic for signed types, logical for unsigned (a already in range)."""
    return wrap(a >> s, ty) if is_signed(ty) else a >> s


def rnd(x, ty):
    """Rounds the real `x` (a Python float / numpy value) to the float type `ty`."""
    return FLOATS[ty](x)


def float_to_int(x, ty):
    """`as` from a float to an integer type: truncate toward zero, saturate, NaN -> 0."""
    x = float(x)
    if math.isnan(x):
        return 0
    lo, hi = int_range(ty)
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, int(math.trunc(x))))


def int_to_float(v, ty):
    """`as` from an integer to a float: round to nearest, ties to even. Integers up to 2^53
    are exact as f64, so one rounding to the target follows; larger ones are rounded here in
    integer arithmetic so that no double rounding happens."""
    if abs(v) <= 1 << 53:
        with np.errstate(over="ignore"):
            return FLOATS[ty](float(v))
    precision = {"f16": 11, "f32": 24, "f64": 53}[ty]
    sign = -1 if v < 0 else 1
    m = abs(v)
    drop = m.bit_length() - precision
    if drop > 0:
        q, r = divmod(m, 1 << drop)
        half = 1 << (drop - 1)
        if r > half or (r == half and q & 1):
            q += 1
        m = q << drop
    return FLOATS[ty](float(sign * m))


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def f32_from_bits(u):
    return np.float32(struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0])


# ---------------------------------------------------------------------------------------------
# Formatting values as text-format literals.


def fmt_value(v, ty):
    if ty == "bool":
        return "true" if v else "false"
    if ty in INT_BITS:
        return str(int(v))
    x = FLOATS[ty](v)
    if ty == "f16":
        # Print a half through its (exact) f32 value: more digits, but the literal then names
        # the value exactly instead of relying on the parser's rounding to half precision.
        x = np.float32(x)
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    s = None
    if x == 0 or 1e-4 <= abs(float(x)) < 1e16:
        s = np.format_float_positional(x, unique=True, trim="0")
    if s is None or len(s) > 24:
        s = np.format_float_scientific(x, unique=True, trim="0")
        s = s.replace("e+", "e")
    if s.endswith("."):
        s += "0"
    if "." not in s and "e" not in s and "n" not in s:
        s += ".0"
    if s == "-0.0":
        return "-0.0"
    return s


def fmt_list(values, ty, indent, first_len):
    """`[v0, v1, ...]`, wrapped to 100 columns with continuation lines at `indent`."""
    items = [fmt_value(v, ty) for v in values]
    lines = []
    cur = "["
    width = first_len
    for k, it in enumerate(items):
        piece = it + ("," if k + 1 < len(items) else "]")
        if width + len(cur) + len(piece) + 1 > 100 and cur.strip() not in ("", "["):
            lines.append(cur.rstrip())
            cur = " " * indent
            width = 0
        cur += piece + (" " if k + 1 < len(items) else "")
    if not items:
        cur += "]"
    lines.append(cur)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Rewriting run blocks.

RUN_RE = re.compile(r"^run\s+[A-Za-z_][A-Za-z0-9_]*(<[^>]*>)?\s*\{", re.M)


def _run_blocks(text):
    """(start, end) offsets of each run block's body, in order."""
    out = []
    for m in RUN_RE.finditer(text):
        depth = 0
        k = m.end() - 1
        while k < len(text):
            c = text[k]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        out.append((m.end(), k))
    return out


def rewrite(text, run_index, items, where="file"):
    """Replaces (or appends) `kind name = values;` statements in run block `run_index` of the
    file text `text` and returns the new text. `items` is a list of (kind, name,
    value-or-list, scalar type); a str value is written verbatim (e.g. `fill(64, 0)`)."""
    for kind, name, values, ty in items:
        blocks = _run_blocks(text)
        if run_index >= len(blocks):
            raise SystemExit(f"{where}: no run block #{run_index}")
        start, end = blocks[run_index]
        body = text[start:end]
        head = f"    {kind} {name} = "
        if isinstance(values, str):
            rhs = values
        else:
            rhs = fmt_list(values, ty, len(head) + 1, len(head))
        stmt = head + rhs + ";"
        pattern = r"^[ \t]*" + kind + r"\s+" + re.escape(name) + r"\s*=[^;]*;[^\n]*\n?"
        m = re.search(pattern, body, re.M)
        if m:
            body = body[: m.start()] + stmt + "\n" + body[m.end():]
        else:
            if not body.endswith("\n"):
                body += "\n"
            body += stmt + "\n"
        text = text[:start] + body + text[end:]
    return text


# ---------------------------------------------------------------------------------------------
# The run block's `random(len, lo, hi, seed S)` (docs/text-format.md, "The random generator").

M64 = (1 << 64) - 1


def splitmix(seed, k):
    z = (seed + (k + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def random_buffer(n, lo, hi, seed, ty):
    """The scalar slots `random(n, lo, hi, seed)` gives a buffer of scalar type `ty`."""
    out = []
    for k in range(n):
        z = splitmix(seed, k)
        if ty == "bool":
            out.append(bool(z >> 63))
        elif ty in FLOATS:
            u = (z >> 11) * 2.0**-53
            out.append(FLOATS[ty](float(lo) + (float(hi) - float(lo)) * u))
        else:
            out.append(wrap(int(lo) + z % (int(hi) - int(lo)), ty))
    return out
