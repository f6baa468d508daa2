"""PTX parser: hand-checked counts, blocks and loops, bad input, corpus agreement, lexer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SAMPLES, corpus_files
from ptx_helpers import reference_opcodes
from pygments.token import Error

from irscope.parsers import ptx, ptx_ops, registry
from irscope.parsers.ptx_ops import split_opcode

PTX_SAMPLES = sorted((SAMPLES / "ptx").glob("*.ptx"))
HAND_LOOP = (SAMPLES / "ptx" / "hand_loop.ptx").read_text()

# Counted by hand from samples/ptx/hand_loop.ptx (26 statements; braces, labels, guards,
# directives, the multi-line call's operand lines and inline-asm .reg lines are not opcodes).
HAND_LOOP_COUNTS = {
    "fma.rn.f32": 4, "mov.u32": 3, "add.s32": 2, "setp.lt.u32": 2, "bar.sync": 1, "bra": 1,
    "bra.uni": 1, "call.uni": 1, "ld.global.nc.v4.f32": 1, "ld.param.b32": 1, "ld.param.u32": 1,
    "ld.param.u64": 1, "mov.b32": 1, "mov.f32": 1, "ret": 1, "setp.ne.u32": 1,
    "st.global.f32": 1, "st.param.b32": 1, "st.shared.f32": 1,
}


def test_summarize_ptx_keeps_the_seed_shape_and_counts_by_hand():
    pairs = ptx.summarize_ptx(HAND_LOOP)
    assert isinstance(pairs, list) and all(isinstance(p, tuple) and len(p) == 2 for p in pairs)
    assert dict(pairs) == HAND_LOOP_COUNTS
    assert [n for _, n in pairs] == sorted((n for _, n in pairs), reverse=True)
    assert not any(op[0] in "{}@$." or op.endswith(":") for op, _ in pairs)


def test_hand_loop_module_kernel_and_declarations():
    module = ptx.parse(HAND_LOOP)
    assert (module.version, module.target, module.address_size) == ("8.0", "sm_80", 64)
    assert module.totals["instructions"] == 26 and module.totals["kernels"] == 1
    assert [(d.space, d.name, d.size_bytes) for d in module.decls] == [("global", "table", 16)]
    (kernel,) = module.kernels
    assert kernel.name == "hand_loop" and kernel.is_entry and kernel.first_line == 12
    assert dict(kernel.histogram) == HAND_LOOP_COUNTS
    assert [(p.name, p.type, p.pointer) for p in kernel.params] == [
        ("hand_loop_param_0", "u64", True), ("hand_loop_param_1", "u32", False)]
    # %p<3>, %r<12>, %f<9>, %rd<4> plus the inline-asm scopes' %q, arg and lo
    assert kernel.registers == {"pred": 4, "b32": 13, "f32": 9, "b64": 4, "b16": 1}
    assert [(d.space, d.name, d.size_bytes, d.align) for d in kernel.decls] == [
        ("shared", "tile", 4096, 16)]
    assert kernel.perf == {"maxntid": (256, 1, 1), "minnctapersm": (2,)}
    assert kernel.threads_per_block == 256
    assert kernel.estimates == {"global_load_bytes": 16, "global_store_bytes": 4,
                                "tensor_core": 0, "fma": 4, "fp32_fma": 4}
    assert kernel.categories["fp32"] == 4 and kernel.categories["control_flow"] == 4
    assert kernel.ops["fma"] == 4 and kernel.ops["ld"] == 4 and kernel.ops["setp"] == 3


def test_hand_loop_blocks_and_nested_loops():
    kernel = ptx.parse(HAND_LOOP).kernels[0]
    blocks = {b.name: b for b in kernel.blocks}
    assert [b.instructions for b in kernel.blocks] == [5, 2, 7, 7, 5]
    assert blocks["$L__inner"].successors == ("$L__inner", "$L__inner+1")
    assert blocks["$L__inner+1"].successors == ("$L__outer", "$L__inner+2")
    assert kernel.blocks[-1].successors == ()
    loops = {loop.head: loop for loop in kernel.loops}
    assert loops["$L__outer"].depth == 1 and loops["$L__inner"].depth == 2
    assert loops["$L__inner"].histogram == {"fma.rn.f32": 4, "add.s32": 1, "bra": 1,
                                            "setp.lt.u32": 1}
    assert loops["$L__outer"].instructions == 16
    graph = ptx.cfg(kernel)
    assert graph.has_edge("$L__inner", "$L__inner") and graph.has_edge("$L__inner+1", "$L__outer")
    assert graph.nodes["$L__inner"]["loop_depth"] == 2 and graph.nodes["entry"]["loop_depth"] == 0


def dominator_loops(kernel) -> dict[str, tuple[int, set[str]]]:
    """Natural loops found with networkx, independently of the parser: head -> (depth, body).

    A back edge is an edge u -> h where h dominates u (networkx's immediate dominators); the
    body is h and every block reaching u without passing h; depth counts the bodies holding h.
    """
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(b.name for b in kernel.blocks)
    graph.add_edges_from((b.name, s) for b in kernel.blocks for s in b.successors)
    entry = kernel.blocks[0].name
    idom = nx.immediate_dominators(graph, entry)
    idom.pop(entry, None)  # networkx < 3.5 maps the entry to itself, later ones leave it out
    reachable = set(idom) | {entry}

    def dominates(head, node):
        while node != head:
            if node == entry:
                return False
            node = idom[node]
        return True

    bodies: dict[str, set[str]] = {}
    for latch, head in graph.edges:
        if latch in reachable and dominates(head, latch):
            without_head = graph.subgraph(reachable - {head})
            body = {head} if latch == head else nx.ancestors(without_head, latch) | {latch, head}
            bodies.setdefault(head, set()).update(body)
    return {head: (sum(head in body for body in bodies.values()), body)
            for head, body in bodies.items()}


ROTATED = (SAMPLES / "ptx" / "rotated_loop.ptx").read_text()


def test_rotated_loop_whose_back_edge_jumps_forward_is_found():
    (kernel,) = ptx.parse(ROTATED).kernels
    blocks = {b.name: b for b in kernel.blocks}
    # the latch $L__BB0_3 sits above the body $L__BB0_4 and jumps down to it
    assert blocks["$L__BB0_3"].successors == ("$L__BB0_4", "$L__BB0_3+1")
    assert blocks["$L__BB0_3"].first_line < blocks["$L__BB0_4"].first_line
    # counted by hand: 29 instructions; the inner loop holds $L__BB0_3 (3) and $L__BB0_4 (6)
    assert kernel.instructions == 29
    assert [(loop.head, loop.depth, loop.blocks, loop.instructions, loop.first_line,
             loop.last_line) for loop in kernel.loops] == [
        ("$L__BB0_1", 1, ("$L__BB0_1", "$L__BB0_1+1", "$L__BB0_3", "$L__BB0_3+1", "$L__BB0_4",
                          "$L__BB0_5"), 17, 29, 49),
        ("$L__BB0_4", 2, ("$L__BB0_3", "$L__BB0_4"), 9, 34, 45)]
    assert kernel.loops[1].histogram["ld.global.f32"] == 1
    assert {loop.head: (loop.depth, set(loop.blocks)) for loop in kernel.loops} == (
        dominator_loops(kernel))
    assert ptx.cfg(kernel).nodes["$L__BB0_3"]["loop_depth"] == 2


def test_nvcc_rotated_loop_in_the_corpus(corpus):
    """nvcc (sm_80) enters a Kokkos range loop by `bra.uni $L__BB39_2`; its latch $L__BB39_4,
    above the body, jumps forward to it."""
    text = (corpus / "ptx" / "ptx90parser_matrix_free_device_matrix_vector_01.1.sm_80.ptx").read_text()
    (kernel,) = [k for k in ptx.parse(text).kernels
                 if any(b.name == "$L__BB39_2" for b in k.blocks)]
    (loop,) = kernel.loops
    # counted by hand: $L__BB39_4 5, $L__BB39_2 5 (past $L__tmp797 and $L__tmp798, labels
    # no branch names) and its fall-through 6
    assert (loop.head, loop.depth, loop.instructions) == ("$L__BB39_2", 1, 16)
    assert loop.blocks == ("$L__BB39_4", "$L__BB39_2", "$L__BB39_2+1")
    ops = {block.name: len(block.ops) for block in kernel.blocks}
    assert [ops[name] for name in loop.blocks] == [5, 5, 6]
    assert (loop.first_line, loop.last_line) == (9744, 9777)


@pytest.mark.parametrize("text, op, space, vector, types, category", [
    ("ld.global.nc.v4.b32", "ld", "global", 4, ("b32",), "global_memory"),
    ("st.shared::cta.v2.f32", "st", "shared::cta", 2, ("f32",), "shared_memory"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
     "cp.async.bulk.tensor", "shared::cluster", 1, (), "async_copy"),
    ("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.mma_async", None, 1,
     ("f32", "f16", "f16"), "tensor_core"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma", None, 1,
     ("f32", "f16", "f16", "f32"), "tensor_core"),
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix", "shared", 1, ("b16",), "tensor_core"),
    ("mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.try_wait", "shared::cta", 1, ("b64",),
     "synchronization"),
    ("fma.rn.bf16x2", "fma", None, 1, ("bf16x2",), "bf16"),
    ("tanh.approx.f32", "tanh", None, 1, ("f32",), "special_function"),
    ("cvt.rn.f16x2.f32", "cvt", None, 1, ("f16x2", "f32"), "conversion"),
    ("shfl.sync.bfly.b32", "shfl", None, 1, ("b32",), "data_movement"),
    ("frobnicate.sync.b32", "frobnicate", None, 1, ("b32",), "other"),
])
def test_split_opcode(text, op, space, vector, types, category):
    opcode = split_opcode(text)
    assert (opcode.op, opcode.state_space, opcode.vector, opcode.types, opcode.category) == (
        op, space, vector, types, category)


def test_truncated_module_keeps_what_it_read():
    module = ptx.parse((SAMPLES / "ptx" / "truncated_entry.ptx").read_text())
    assert [k.name for k in module.kernels] == ["complete_kernel", "cut_kernel"]
    assert [k.truncated for k in module.kernels] == [False, True]
    assert module.kernels[0].instructions == 4 and module.kernels[1].instructions == 3
    assert any("cut_kernel" in d.message and "truncated" in d.message for d in module.diagnostics)


@pytest.mark.parametrize("text, words", [("", "empty"), ("   \n\t\n", "empty"),
                                         ("\x7fELF\x02\x01\x01\x00\x00\x00" * 20, "binary")])
def test_empty_and_binary_input_give_one_error(text, words):
    module = ptx.parse(text)
    assert module.kernels == () and len(module.diagnostics) == 1
    assert module.diagnostics[0].severity == "error" and words in module.diagnostics[0].message


def test_unknown_opcodes_are_counted_under_other():
    module = ptx.parse((SAMPLES / "ptx" / "future_opcodes.ptx").read_text())
    kernel = module.kernels[0]
    assert kernel.histogram["frobnicate.sync.aligned.b32"] == 2
    assert kernel.histogram["tcgen99.quantum.shared::cta.b32"] == 1
    assert kernel.histogram["warpfold.b32"] == 1
    assert kernel.categories["other"] == 4 and kernel.instructions == 6


def test_collapsed_listing_folds_runs_and_expands_back():
    kernel = ptx.parse(HAND_LOOP).kernels[0]
    text = ptx.kernel_text(HAND_LOOP, kernel)
    listing = ptx.collapse(text, kernel.first_line)
    shown = [line.text.strip() for line in listing]
    assert "fma.rn.f32 ×4" in shown and "ld.param.u64 \t%rd1, [hand_loop_param_0];" in shown
    assert "$L__outer:" in shown and "$L__inner:" in shown
    assert "@%p1 bra \t$L__inner;" in shown and "@%p2 bra.uni \t$L__outer;" in shown
    assert len(listing) < len(text.splitlines())
    expanded = [ln for item in listing for ln in ptx.expand(HAND_LOOP, item)]
    assert expanded == text.splitlines()
    assert sum(item.count for item in listing) >= kernel.instructions


def test_json_is_compact_and_has_per_kernel_fields():
    data = ptx.parse(HAND_LOOP).to_json()
    kernel = data["kernels"][0]
    assert kernel["name"] == "hand_loop" and kernel["instructions"] == 26
    assert kernel["histogram"]["fma.rn.f32"] == 4 and kernel["blocks"] == 5
    assert data["totals"]["instructions"] == 26


def test_registry_detects_and_parses_ptx():
    assert registry.detect(HAND_LOOP, "x.ptx") == "ptx"
    assert registry.detect(HAND_LOOP) == "ptx"
    assert registry.parse("ptx", HAND_LOOP).totals["instructions"] == 26


def _real_ptx():
    return [p for p in PTX_SAMPLES if "truncated" not in p.name] + corpus_files("ptx")


@pytest.mark.parametrize("path", _real_ptx(), ids=lambda p: p.name)
def test_counts_agree_with_an_independent_count(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    module = ptx.parse(text)
    fast = dict(ptx.summarize_ptx(text))
    assert fast == dict(reference_opcodes(text))
    assert fast == dict(module.histogram)
    assert sum(k.instructions for k in module.kernels) == module.totals["instructions"]
    assert module.kernels and not [d for d in module.diagnostics if d.severity == "error"]


def test_the_histogram_read_in_small_pieces_counts_every_statement_once(monkeypatch):
    monkeypatch.setattr(ptx_ops, "PIECE", 64)  # a piece ends after nearly every line
    for path in [p for p in PTX_SAMPLES if "truncated" not in p.name]:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert dict(ptx.summarize_ptx(text)) == dict(reference_opcodes(text)), path.name


@pytest.mark.parametrize("path", PTX_SAMPLES + corpus_files("ptx"), ids=lambda p: p.name)
def test_lexer_round_trips_without_error_tokens(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    tokens = list(registry.lexer("ptx").get_tokens_unprocessed(text))
    assert "".join(value for _, _, value in tokens) == text
    assert not [value for _, kind, value in tokens if kind is Error]


@pytest.mark.parametrize("path", _real_ptx(), ids=lambda p: p.name)
def test_blocks_partition_each_kernel_and_labels_sit_on_their_lines(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    for kernel in ptx.parse(text).kernels:
        assert sum(b.instructions for b in kernel.blocks) == kernel.instructions
        firsts = [b.first_line for b in kernel.blocks]
        assert firsts == sorted(firsts) and kernel.first_line <= firsts[0]
        assert all(b.first_line <= b.last_line <= kernel.last_line for b in kernel.blocks)
        names = {b.name for b in kernel.blocks}
        for block in kernel.blocks:
            assert set(block.successors) <= names
            if not block.name.startswith("entry") and "+" not in block.name:
                assert lines[block.first_line - 1].strip().startswith(block.name + ":")
        for loop in kernel.loops:
            assert loop.head in loop.blocks and set(loop.blocks) <= names
            assert loop.instructions == sum(loop.histogram.values())


def test_block_comments_lowercase_labels_and_multi_line_calls():
    text = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
            "\t.reg .b32 %r<4>;\n/* mov.u32 %r9, 9;\n\tbra skipped; */\n"
            "loop:\n\tadd.s32 %r1, %r1, 1; /* inline */\n\tsetp.lt.u32 %p1, %r1, 8;\n"
            "\t@%p1 bra loop;\n\tcall.uni \n\thelper, \n\t(\n\tparam0\n\t);\n\tret;\n}\n")
    module = ptx.parse(text)
    expected = {"add.s32": 1, "setp.lt.u32": 1, "bra": 1, "call.uni": 1, "ret": 1}
    assert dict(ptx.summarize_ptx(text)) == expected == dict(reference_opcodes(text))
    (kernel,) = module.kernels
    assert dict(kernel.histogram) == expected and kernel.registers == {"b32": 4}
    (loop,) = kernel.loops
    assert (loop.head, loop.blocks, loop.first_line, loop.last_line) == ("loop", ("loop",), 9, 12)
    # the entry block holds no instruction, so the label names it
    assert [b.successors for b in kernel.blocks] == [("loop", "loop+1"), ()]


def test_an_inline_asm_line_ending_in_an_empty_statement_is_a_statement():
    text = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
            "\t{ .reg .b16 lo; mov.b32 {lo, %r5}, %r4;; }\n\tret;\n}\n")
    expected = {"mov.b32": 1, "ret": 1}
    assert dict(ptx.summarize_ptx(text)) == expected == dict(reference_opcodes(text))
    (kernel,) = ptx.parse(text).kernels
    assert dict(kernel.histogram) == expected and kernel.registers == {"b16": 1}
    assert [(b.first_line, b.last_line, b.ops) for b in kernel.blocks] == [
        (5, 7, ("mov.b32", "ret"))]


def test_parsing_pauses_the_garbage_collector_and_restores_it():
    import gc

    from irscope.parsers.base import gc_paused

    seen = []

    @gc_paused
    def probe():
        seen.append(gc.isenabled())
        ptx.parse(HAND_LOOP)  # nested pause
        seen.append(gc.isenabled())

    assert gc.isenabled()
    probe()
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        ptx.parse(HAND_LOOP)
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()


def test_locations_follow_loc_lines_and_name_the_users_frame_of_inlined_code():
    text = (".version 8.0\n.target sm_80\n.address_size 64\n"
            '.file 1 "/src/kernel.py"\n'
            '.file 2 "/usr/lib/python3/site-packages/triton/language/standard.py"\n'
            ".visible .entry k()\n{\n"
            "\t.loc 1 10 0\n\tmov.u32 %r1, 0;\n"
            "\t.loc 2 40 7, function_name $L__info_string0, inlined_at 1 12 3\n"
            "\tadd.s32 %r1, %r1, 1;\n$L__BB0_1:\n\t// a comment\n\tret;\n}\n")
    assert ptx.locations(text) == {8: "/src/kernel.py:10", 9: "/src/kernel.py:10",
                                   10: "/src/kernel.py:12", 11: "/src/kernel.py:12",
                                   14: "/src/kernel.py:12"}


@pytest.mark.parametrize("path", _real_ptx(), ids=lambda p: p.name)
def test_loops_are_those_of_the_dominator_tree(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for kernel in ptx.parse(text).kernels:
        found = {loop.head: (loop.depth, set(loop.blocks)) for loop in kernel.loops}
        assert found == dominator_loops(kernel), kernel.name


def test_a_module_of_more_kernels_than_kept_counts_them_all(monkeypatch):
    """A generated module of very many kernels keeps the first ones whole (bounded memory
    for report and lint) and its totals and histogram still count every kernel."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_ptx import many_kernels

    text = many_kernels(12)
    whole = ptx.parse(text)
    monkeypatch.setattr(ptx, "KERNELS_KEPT", 5)
    kept = ptx.parse(text)
    assert len(whole.kernels) == 12 and len(kept.kernels) == 5
    assert kept.totals == whole.totals and kept.histogram == whole.histogram
    assert any("12 kernels and functions" in d.message for d in kept.diagnostics)


# -- basic blocks against the leader rule ------------------------------------------------------
LABEL_LINE_RE = re.compile(r"([$\w]+):$")
INSTRUCTION_RE = re.compile(r"(?:@!?%?\w+\s+)?[a-z]")
ENDS_BLOCK_RE = re.compile(r"(?:@!?%?\w+\s+)?(?:bra|brx|ret|exit|trap)\b")


def leader_blocks(lines: list[str]) -> int:
    """Basic blocks of a kernel body by the textbook rule, read line by line: a block starts
    at the first instruction, at one under a label a `bra` names, and after a branch or
    return; any other label (debug info's `$L__tmp`) starts none."""
    targets = set(re.findall(r"\bbra(?:\.uni)?\s+([$\w]+)\s*;", "\n".join(lines)))
    blocks, starts = 0, True
    for line in lines:
        statement = line.split("//")[0].strip()
        label = LABEL_LINE_RE.match(statement)
        if label:
            starts = starts or label[1] in targets
        elif INSTRUCTION_RE.match(statement):
            blocks += starts
            starts = bool(ENDS_BLOCK_RE.match(statement))
    return blocks


def gpu_sample_ptx() -> list[tuple[str, str]]:
    """The PTX of every kernel the committed H100 runs hold."""
    from irscope.store import Run

    found = []
    for folder in sorted((SAMPLES / "gpu").iterdir()):
        if (folder / "index.sqlite").is_file():
            run = Run.open(folder, read_only=True)
            found += [(f"{folder.name}/{unit.name}", run.read_text(stage))
                      for unit in run.units() for stage in run.stages(unit.id)
                      if stage.kind == "ptx"]
    return found


def test_blocks_follow_the_leader_rule_not_debug_labels():
    """Each kernel of the committed H100 runs has the blocks the leader rule counts, so a
    straight-line Triton kernel is one block whatever its `$L__tmp` labels; a kernel that
    branches has as many as LLVM's IR says where the backend kept its blocks."""
    modules = gpu_sample_ptx()
    assert len(modules) >= 50
    straight = 0
    for name, text in modules:
        lines = text.splitlines()
        for kernel in ptx.parse(text).kernels:
            body = lines[kernel.first_line - 1:kernel.last_line]
            assert len(kernel.blocks) == leader_blocks(body), (name, kernel.name)
            if not any(ENDS_BLOCK_RE.match(line.strip()) and "bra" in line for line in body):
                assert len(kernel.blocks) == 1, (name, kernel.name)
                straight += 1
    assert straight >= 20
    add = ptx.parse((SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text()).kernels[0]
    assert [b.name for b in add.blocks] == ["entry"] and len(add.blocks[0].ops) == 100


@pytest.mark.parametrize("path", corpus_files("ptx"), ids=lambda p: p.name)
def test_corpus_blocks_follow_the_leader_rule(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    for kernel in ptx.parse(text).kernels:
        if not kernel.truncated:
            body = lines[kernel.first_line - 1:kernel.last_line]
            assert len(kernel.blocks) == leader_blocks(body), kernel.name
