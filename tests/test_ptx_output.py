"""`irscope ptx` output at scale: JSON written at C speed, text that streams, files in parallel."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from conftest import SAMPLES

from irscope.commands import ptx as command
from irscope.errors import UsageError
from irscope.parsers import ptx

PTX_SAMPLES = sorted((SAMPLES / "ptx").glob("*.ptx"))


def options(**given) -> argparse.Namespace:
    defaults = dict(kernel=None, by="opcode", top=25, collapsed=False, loops=False, json=False)
    return argparse.Namespace(**{**defaults, **given})


def many_kernels(count: int) -> str:
    """A module of ``count`` kernels, each with a loop and a guarded branch out of it."""
    kernel = """
.visible .entry k{i}(
	.param .u64 .ptr .global .align 1 k{i}_param_0
)
{{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<2>;

	ld.param.u64 	%rd1, [k{i}_param_0];
	mov.u32 	%r1, 0;
$L__BB{i}_1:
	add.s32 	%r1, %r1, 1;
	setp.lt.s32 	%p1, %r1, 64;
	@%p1 bra 	$L__BB{i}_1;
	st.global.b32 	[%rd1], %r1;
	ret;

}}
"""
    return ".version 8.4\n.target sm_90a\n.address_size 64\n" + "".join(
        kernel.format(i=i) for i in range(count))


@pytest.mark.parametrize("level", [0, 1, 3])
def test_json_text_is_what_json_dumps_indents(level):
    documents = [ptx.parse(path.read_text()).to_json() for path in PTX_SAMPLES]
    odd = {"empty": {}, "none": [], "nested": [[], [{}], [1, [2, {"a": None}]]], "x": 1.5,
           "flags": [True, False], "numbers": {1: "one", "2": [3]}, "text": "é\x7f\x1b\"",
           "tuple": (1, ("a",)), "other": object}
    for value in [documents, odd, [], {}, "plain", 3, None]:
        expected = json.dumps(value, indent=2, default=str).replace("\n", "\n" + "  " * level)
        assert command.json_text(value, level) == expected


class ScanCounting(str):
    """PTX text that counts the characters its searches and counts pass over."""

    scanned = 0

    def _span(self, start, end) -> tuple[int, int]:
        start = 0 if start is None else start if start >= 0 else max(0, len(self) + start)
        end = len(self) if end is None else end if end >= 0 else max(0, len(self) + end)
        return start, min(end, len(self))

    def find(self, sub, start=None, end=None):
        start, end = self._span(start, end)
        found = super().find(sub, start, end)
        ScanCounting.scanned += (end if found < 0 else found) - start
        return found

    def rfind(self, sub, start=None, end=None):
        start, end = self._span(start, end)
        found = super().rfind(sub, start, end)
        ScanCounting.scanned += end - (start if found < 0 else found)
        return found

    def count(self, sub, start=None, end=None):
        start, end = self._span(start, end)
        ScanCounting.scanned += max(0, end - start)
        return super().count(sub, start, end)

    def splitlines(self, keepends=False):
        ScanCounting.scanned += len(self)
        return super().splitlines(keepends)


def test_text_output_passes_over_the_module_a_bounded_number_of_times():
    """Per-kernel work on the whole file (a listing cut out of a fresh split of the module,
    say) grows with the square of the kernels; reading once costs a few passes in all."""
    text = ScanCounting(many_kernels(400))
    ScanCounting.scanned = 0
    notes: list[str] = []
    pieces = list(command.render_text("k.ptx", text, options(collapsed=True, loops=True),
                                      notes.append))
    assert len(pieces) == 401 and not notes  # a piece per kernel, then the totals
    assert "k399  (kernel, lines" in pieces[-2] and "add.s32" in pieces[-2]
    assert "400 kernel(s), 0 function(s), 2,800 instructions" in pieces[-1]
    assert ScanCounting.scanned < 20 * len(text)  # 9 passes; a listing cut from a re-split: 400


def test_kernel_choice_while_kernels_stream_past():
    text = many_kernels(12)
    one = list(command.render_text("k.ptx", text, options(kernel="k11"), print))
    assert len(one) == 2 and "\nk11  (kernel" in one[0]
    with pytest.raises(UsageError, match=r"no single kernel matches '1' \(kernels: k0, k1, "):
        list(command.render_text("k.ptx", text, options(kernel="1"), print))  # k1, k10, k11


def test_files_in_worker_processes_come_back_in_order(tmp_path):
    """Several files parsed in worker processes (forced for small files) print what one
    process prints, in order, a failing file's error in its place. A fresh interpreter:
    the workers are forked, and a test process may hold threads (JAX's) a fork must not copy."""
    broken = tmp_path / "empty.ptx"
    broken.write_text("")
    paths = [str(p) for p in PTX_SAMPLES[:2]] + [str(broken)] + [str(p) for p in PTX_SAMPLES[2:]]
    script = ("import sys; from irscope.commands import ptx; ptx.POOL_MIN_BYTES = int(sys.argv[1]);"
              "ptx._cores = lambda: 2; from irscope.cli import main; raise SystemExit(main(sys.argv[2:]))")
    for args in (["--json", "--loops"], ["--loops", "--collapsed"]):
        pooled, serial = (subprocess.run([sys.executable, "-c", script, floor, "ptx", *paths, *args],
                                         capture_output=True, text=True, timeout=120)
                          for floor in ("0", str(1 << 40)))
        assert (pooled.returncode, pooled.stdout, pooled.stderr) == (
            serial.returncode, serial.stdout, serial.stderr)
        assert pooled.returncode == 1 and f"{broken}: file is empty" in pooled.stderr
        assert pooled.stdout.index("hand_loop") < pooled.stdout.index("rotated_loop")
