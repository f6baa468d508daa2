"""SASS parser: every corpus listing format, res-usage text, counts against the listing's lines."""

from __future__ import annotations

import re

import pytest
from conftest import corpus_files
from pygments.token import Error

from irscope.parsers import registry, sass

# Independent counts: an addressed line whose first word after guards is upper case, and
# a maxas/TuringAs control-notation line.
ADDRESSED = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?/\*[0-9a-f]{4,}\*/\s+\{?\s*(?:@!?U?P\w+\s+)?[A-Z]",
                       re.M | re.I)
CONTROL = re.compile(r"^\s*[0-9a-f-]{2}:[-\w]:[-\w]:[-\w]:[-\w]+\s+(?:@!?P\w+\s+)?[A-Z]", re.M)

RES_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function matmul_kernel:
  REG:255 STACK:16 SHARED:1024 LOCAL:0 CONSTANT[0]:608 CONSTANT[2]:8 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function add_kernel:
  REG:30 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_res_usage_text():
    usage = sass.parse_res_usage(RES_USAGE)
    assert usage["matmul_kernel"]["registers"] == 255
    assert usage["matmul_kernel"]["stack_bytes"] == 16
    assert usage["matmul_kernel"]["shared_bytes"] == 1024
    assert usage["matmul_kernel"]["const_bytes"] == 616
    assert usage["add_kernel"] == {"registers": 30, "stack_bytes": 0, "shared_bytes": 0,
                                   "local_bytes": 0, "const_bytes": 576, "const0_bytes": 576,
                                   "textures": 0, "surfaces": 0, "samplers": 0}


def test_categories_and_spill_bytes():
    assert sass.category("HGMMA.64x128x16.F32") == "tensor_core"
    assert sass.category("UIADD3") == "integer" and sass.category("LDGSTS.E.128") == "async_copy"
    assert sass.category("FUTUREOP.X") == "other"
    assert sass.local_traffic({"STL.64": 2, "STL": 1, "LDL.128": 1}) == {"spill_stores": 20,
                                                                          "spill_loads": 16}


@pytest.mark.parametrize("path", corpus_files("sass"), ids=lambda p: p.name)
def test_corpus_listing_counts_match_its_instruction_lines(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    module = sass.parse(text)
    expected = len(ADDRESSED.findall(text)) or len(CONTROL.findall(text))
    assert module.totals["instructions"] == expected > 0
    assert sum(k.instructions for k in module.kernels) == expected
    assert sum(module.categories.values()) == expected
    assert registry.detect(text, path.name) == "sass" or module.format in ("maxas", "cuasm")


LINE_INFO_LISTINGS = [p for p in corpus_files("sass")
                      if "//## File" in p.read_text(errors="replace")]


@pytest.mark.parametrize("path", LINE_INFO_LISTINGS, ids=lambda p: p.name)
def test_instructions_carry_the_line_info_above_them(path):
    """nvdisasm -g: each instruction is located at the last `//## File` comment before it."""
    text = path.read_text(encoding="utf-8", errors="replace")
    located = sass.parse(text).locations
    last, checked = None, 0
    for number, line in enumerate(text.split("\n"), 1):
        if m := re.search(r'//## File "([^"]*)", line (\d+)$', line):
            last = f"{m[1]}:{m[2]}"
        elif last and ADDRESSED.match(line):
            assert located[number] == last, number
            checked += 1
    assert checked == len(located) - text.count("//## File") > 0


def test_cuobjdump_kernels_are_named_and_arch_read():
    files = [p for p in corpus_files("sass") if p.name == "cuassembler_Mandelbrot.sm_75.sass"]
    if not files:
        pytest.skip("corpus not present")
    module = sass.parse(files[0].read_text())
    text = files[0].read_text()
    assert module.format == "cuobjdump" and module.arch == 75
    assert [k.name for k in module.kernels] == re.findall(r"Function : (\S+)", text)


@pytest.mark.parametrize("text", ["", "\x00\x01\x02ELF" * 10, "no instructions here\n"])
def test_bad_input_never_raises(text):
    module = sass.parse(text)
    assert module.kernels == () and module.diagnostics


@pytest.mark.parametrize("path", corpus_files("sass"), ids=lambda p: p.name)
def test_lexer_round_trips_without_error_tokens(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    tokens = list(registry.lexer("sass").get_tokens_unprocessed(text))
    assert "".join(value for _, _, value in tokens) == text
    assert not [value for _, kind, value in tokens if kind is Error]
