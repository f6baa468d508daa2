"""`irscope ptx` and `irscope sass` as a user runs them: JSON fields, tables, bad files."""

from __future__ import annotations

import json
import re

import pytest
from conftest import SAMPLES

HAND_LOOP = SAMPLES / "ptx" / "hand_loop.ptx"
CUBIN = SAMPLES / "ptx" / "add_kernel.sm90.cubin"


def test_ptx_json_has_per_kernel_and_module_totals(cli):
    done = cli("ptx", HAND_LOOP, "--json", "--loops")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (kernel,) = data["kernels"]
    assert kernel["name"] == "hand_loop" and kernel["instructions"] == 26
    assert kernel["histogram"]["fma.rn.f32"] == 4 and sum(kernel["histogram"].values()) == 26
    assert data["totals"]["instructions"] == 26 and data["totals"]["kernels"] == 1
    assert [loop["head"] for loop in kernel["loops"]] == ["$L__outer", "$L__inner"]


def test_ptx_table_by_category_with_collapsed_listing(cli):
    done = cli("ptx", HAND_LOOP, "--by", "category", "--collapsed", "--kernel", "hand")
    assert done.returncode == 0, done.stderr
    assert "hand_loop" in done.stdout and "fp32" in done.stdout
    assert "fma.rn.f32 ×4" in done.stdout and "$L__inner:" in done.stdout
    assert "\x1b[" not in done.stdout  # NO_COLOR is set by the fixture


def test_ptx_collapsed_json_expands_to_the_source_lines(cli):
    data = json.loads(cli("ptx", HAND_LOOP, "--json", "--collapsed").stdout)
    listing = data["kernels"][0]["collapsed"]
    assert listing[0]["first_line"] == 12 and listing[-1]["last_line"] == 69
    assert any(item["text"].strip() == "fma.rn.f32 ×4" and item["count"] == 4 for item in listing)


def test_ptx_truncated_file_warns_and_reports_what_it_read(cli):
    done = cli("ptx", SAMPLES / "ptx" / "truncated_entry.ptx", "--json")
    assert done.returncode == 0
    assert "truncated" in done.stderr and "cut_kernel" in done.stderr
    assert [k["instructions"] for k in json.loads(done.stdout)["kernels"]] == [4, 3]


@pytest.mark.parametrize("content, words", [(b"", "empty"), (b"\x7fELF\x02\x01\x00" * 50, "binary")])
def test_ptx_bad_file_is_one_error_line(cli, tmp_path, content, words):
    path = tmp_path / "bad.ptx"
    path.write_bytes(content)
    done = cli("ptx", path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and words in done.stderr


def test_ptx_unknown_kernel_is_a_usage_error(cli):
    done = cli("ptx", HAND_LOOP, "--kernel", "nope")
    assert done.returncode == 2 and "nope" in done.stderr


def test_sass_cubin_card_then_histogram(cli):
    done = cli("sass", CUBIN)
    if done.returncode == 1 and "no nvdisasm" in done.stderr:
        pytest.skip("no NVIDIA tools")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("registers") < out.index("occupancy") < out.index("count")
    assert "limited by" in out and "sm_90" in out


def test_sass_cubin_json(cli):
    done = cli("sass", CUBIN, "--json")
    if done.returncode == 1:
        pytest.skip("no NVIDIA tools")
    data = json.loads(done.stdout)
    (kernel,) = data["kernels"]
    assert kernel["name"] == "add_kernel" and kernel["instructions"] > 0
    assert sum(kernel["histogram"].values()) == kernel["instructions"]
    assert kernel["resources"]["registers"] > 0
    assert kernel["occupancy"]["threads_per_block"] == 128 and 0 < kernel["occupancy"]["ratio"] <= 1
    assert data["totals"]["instructions"] == kernel["instructions"] and data["arch"] == 90


def test_sass_without_tools_says_so_once_and_fails(cli, tmp_path):
    done = cli("sass", CUBIN, env={"IRSCOPE_CUDA_BIN": str(tmp_path)})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("no nvdisasm or cuobjdump found") == 1


def test_sass_text_listing_is_read_directly(cli, tmp_path):
    listing = tmp_path / "k.sass"
    listing.write_text("\tcode for sm_80\n\t\tFunction : k\n"
                       "        /*0000*/                   MOV R1, c[0x0][0x28] ;\n"
                       "        /*0010*/              @!P0 FFMA R2, R3, R4, R5 ;\n"
                       "        /*0020*/                   EXIT ;\n")
    data = json.loads(cli("sass", listing, "--json").stdout)
    assert data["kernels"][0]["histogram"] == {"EXIT": 1, "FFMA": 1, "MOV": 1}
    assert data["kernels"][0]["occupancy"] is None


def test_a_cut_histogram_says_what_it_left_out(cli, tmp_path):
    """sass and ptx show --top rows, then how many more and the instructions they count:
    the rows shown and the rest add up to the kernel's instructions."""
    listing = tmp_path / "k.sass"
    listing.write_text("\tcode for sm_80\n\t\tFunction : k\n" + "".join(
        f"        /*{i:04x}*/                   {op} ;\n"
        for i, op in enumerate(["MOV R1, R2"] * 3 + ["FFMA R2, R3, R4, R5"] * 2 + ["EXIT"])))
    sass = cli("sass", listing, "--by", "opcode", "--top", "2").stdout
    assert "6 instructions" in sass and "+1 more (1 instructions); --top 0 shows all" in sass
    assert "EXIT" not in sass and "EXIT" in cli("sass", listing, "--top", "0").stdout
    ptx = cli("ptx", HAND_LOOP, "--top", "3").stdout
    shown = [int(line.split("│")[1]) for line in ptx.splitlines() if line.count("│") == 2]
    left = re.search(r"\+(\d+) more \((\d+) instructions\); --top 0 shows all", ptx)
    total = int(re.search(r"(\d+) instructions\n*$", ptx).group(1))
    assert len(shown) == 3 and left and sum(shown) + int(left.group(2)) == total
