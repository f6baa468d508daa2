"""The bytes and FLOPs of a launch where the compiler's records say them, never guessed.

Two sources: a matrix product that Inductor's ``call()`` hands to an extern kernel
(``extern_kernels.mm/addmm/bmm/baddbmm``), whose FLOPs (2·M·N·K per product) and least memory
traffic (each operand read once, the result written once) follow from the shapes the output
code gives its buffers and arguments; and a Triton kernel whose ``inductor_meta`` carries
Inductor's own estimates (``kernel_num_gb``, ``kernel_flop``: written when Inductor is asked
to benchmark its kernels). Anything else has no known work, and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

# buf10 = empty_strided_cuda((256, 384), (384, 1), torch.float32)
ALLOC_RE = re.compile(r"^\s*(\w+) = empty_strided\w*\(\(([\d, ]*)\),\s*\([\d, ]*\),\s*"
                      r"(?:device=[^,]+,\s*)?(?:dtype=)?torch\.(\w+)")
# assert_size_stride(primals_1, (4, 64), (64, 1))
ASSERT_RE = re.compile(r"^\s*assert_size_stride\((\w+), \(([\d, ]*)\)")
# buf26 = buf25; del buf25  # reuse
# buf7 = reinterpret_tensor(buf3, (64, 128), (128, 1), 0); del buf3  # reuse
REUSE_RE = re.compile(r"^\s*(\w+) = (\w+|reinterpret_tensor\(.*?\)); del \w+\s+# reuse")
# extern_kernels.addmm(primals_6, reinterpret_tensor(buf9, (256, 128), (128, 1), 0),
#                      primals_7, alpha=1, beta=1, out=buf10)     (one line in the code)
EXTERN_RE = re.compile(r"^\s*extern_kernels\.(mm|addmm|bmm|baddbmm)\((.*)\)\s*$")
# reinterpret_tensor(buf9, (256, 128), (128, 1), 0)
REINTERPRET_RE = re.compile(r"^reinterpret_tensor\((\w+), \(([\d, ]*)\)")
# 'kernel_num_gb': 0.000262144      'kernel_flop': 1048576
META_RE = re.compile(r"'kernel_(num_gb|flop)':\s*([0-9.eE+-]+)")
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8,
               "double": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1,
               "int32": 4, "int64": 8}
OPERANDS = {"mm": 2, "bmm": 2, "addmm": 3, "baddbmm": 3}  # positional tensors before out=


@dataclass(frozen=True)
class Work:
    """What one launch does: bytes moved and FLOPs, each None where unknown; ``dtype`` of its
    result where known (it picks the compute peak); ``source`` says where the figures come from."""

    bytes: float | None = None
    flops: float | None = None
    dtype: str | None = None
    source: str = ""


def extern_work(code: str) -> dict[int, Work]:
    """Output-code line (1-based, as ``parsers.inductor`` numbers launches) -> the work of the
    matrix product its extern call runs, for every call whose shapes the code states."""
    shapes: dict[str, tuple[tuple[int, ...], str | None]] = {}
    found: dict[int, Work] = {}
    for number, line in enumerate(code.splitlines(), 1):
        if "empty_strided" in line:
            match = ALLOC_RE.match(line)
            if match:
                shapes[match.group(1)] = (_dims(match.group(2)), match.group(3))
            continue
        if "# reuse" in line:
            match = REUSE_RE.match(line)
            if match:
                shape, dtype = _operand(match.group(2), shapes)
                if shape is not None:
                    shapes[match.group(1)] = (shape, dtype)
            continue
        if "assert_size_stride" in line:
            match = ASSERT_RE.match(line)
            if match:
                shapes.setdefault(match.group(1), (_dims(match.group(2)), None))
            continue
        if "extern_kernels." in line:
            match = EXTERN_RE.match(line)
            work = _product(match.group(1), match.group(2), shapes) if match else None
            if work is not None:
                found[number] = work
    return found


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.replace(" ", "").split(",") if part)


def _arguments(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _operand(argument: str, shapes: dict) -> tuple[tuple[int, ...] | None, str | None]:
    """An operand's shape and the dtype of the buffer it views, where the code states them."""
    match = REINTERPRET_RE.match(argument)
    if match:
        return _dims(match.group(2)), shapes.get(match.group(1), (None, None))[1]
    return shapes.get(argument, (None, None))


def _product(op: str, text: str, shapes: dict) -> Work | None:
    arguments = _arguments(text)
    out = next((a[4:].strip() for a in arguments if a.startswith("out=")), None)
    positional = [a for a in arguments if "=" not in a.split("(")[0]]
    if out is None or len(positional) < OPERANDS[op]:
        return None
    operands = [_operand(a, shapes) for a in positional[:OPERANDS[op]]]
    tensors = [shape for shape, _ in operands]
    if any(t is None for t in tensors):
        return None
    bias = tensors[0] if op in ("addmm", "baddbmm") else None
    left, right = tensors[-2], tensors[-1]
    if len(left) != len(right) or len(left) not in (2, 3) or left[-1] != right[-2]:
        return None
    batch = left[0] if len(left) == 3 else 1
    m, k, n = left[-2], left[-1], right[-1]
    result, dtype = shapes.get(out, (None, None))
    if result is not None and tuple(result[-2:]) != (m, n):
        return None
    dtype = dtype or next((d for _, d in operands[-2:] if d), None)
    size = DTYPE_BYTES.get(dtype or "")
    elements = batch * (m * k + k * n + m * n) + (prod(bias) if bias else 0)
    return Work(elements * size if size else None, 2.0 * batch * m * n * k, dtype,
                f"{op} {'x'.join(map(str, left))} @ {'x'.join(map(str, right))}")


def inductor_estimates(kernel_source: str) -> Work | None:
    """Inductor's own estimates of a Triton kernel's bytes and FLOPs, where its
    ``inductor_meta`` carries them."""
    found = dict(META_RE.findall(kernel_source))
    if not found:
        return None
    try:
        gigabytes = float(found["num_gb"]) if "num_gb" in found else None
        flops = float(found["flop"]) if "flop" in found else None
    except ValueError:
        return None
    return Work(gigabytes * 1e9 if gigabytes is not None else None, flops, None,
                "Inductor's estimate (inductor_meta)")
