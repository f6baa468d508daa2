"""PTX control flow: a kernel body cut into basic blocks, natural loops with nesting, a graph."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import NamedTuple

from .base import sorted_histogram
from .ptx_ops import brace_statements, by_category, by_count

# One line of a kernel body, read at its start, after any guard, as one string: the opcode of
# a statement, or a mark, which ends in `:` or `;`: a label, a block-ending statement or a
# declaration (whole). The rest of a statement, up to `;`, is consumed as OPCODE_RE does.
#   "\n\tfma.rn.f32 \t%f1, %f2, %f3, %f1;" -> "fma.rn.f32"
#   "\n$L__BB0_2:"                         -> "$L__BB0_2:"
#   "\n\t@%p1 bra.uni \t$L__BB0_4;"        -> "bra.uni \t$L__BB0_4;"
#   "\n\t.reg .b32 \t%r<12>;"              -> ".reg .b32 \t%r<12>;"
ITEM_RE = re.compile(
    r"\n[ \t]*+(?:@\S++[ \t]++)?+("
    r"(?:bra|brx|ret|exit|trap)(?:\.[A-Za-z0-9_.:]++)?+(?=[\s;])[^;]*+;"
    r"|[a-z][A-Za-z0-9_.:]*+(?<!:)(?![ \t]*+[:=])|\{[^\n]*(?=;)"
    r"|[$\w]++:(?!:)"
    r"|(?:\.(?:extern|visible|weak)[ \t]++)*+\.(?:reg|shared|local|global|const)(?=[ \t.])[^;]*+;)"
    r"(?:(?<=[:;])|[^;]*+;)")
# A block-ending statement: "bra.uni \t$L__BB0_4;" -> "bra.uni", "$L__BB0_4"
ENDER_RE = re.compile(r"([a-z][a-z0-9_.]*+)[ \t]*+([$\w]*+)")


class PtxBlock(NamedTuple):
    """A basic block: its label (or a made-up name), first line, opcodes and successor names.

    A named tuple rather than a dataclass: large kernels have thousands of blocks.
    """

    name: str
    first_line: int
    last_line: int
    ops: tuple[str, ...]
    successors: tuple[str, ...]

    @property
    def instructions(self) -> int:
        return len(self.ops)


@dataclass(frozen=True)
class PtxLoop:
    """A natural loop found from a back edge: head block, nesting depth (1 = outermost), contents."""

    head: str
    depth: int
    first_line: int
    last_line: int
    blocks: tuple[str, ...]
    instructions: int
    histogram: dict[str, int]

    @property
    def categories(self) -> dict[str, int]:
        """The loop's histogram folded to categories (tensor core, global memory, ...)."""
        return sorted_histogram(by_category(self.histogram))

    def to_json(self) -> dict:
        """Every field, and the categories."""
        return {"head": self.head, "depth": self.depth, "first_line": self.first_line,
                "last_line": self.last_line, "blocks": list(self.blocks),
                "instructions": self.instructions, "histogram": dict(self.histogram),
                "categories": self.categories}


def split_blocks(text: str, start: int, end: int,
                 first_line: int) -> tuple[list[PtxBlock], list[tuple], list[str]]:
    """Cut the kernel body ``text[start:end]`` into basic blocks: (blocks, successor indices
    per block, the body's declaration lines).

    ``first_line`` is the line of ``start``. A block starts at a label or after a branch or
    return and ends before the next one; labels that follow each other name the same block.
    One ITEM_RE pass lists the body's statements; Python then runs once per mark (label,
    block end, declaration), never per instruction, and finds each mark's line by searching
    for its text on from the previous mark.
    """
    items = ITEM_RE.findall(text, start, end)
    # Each block while building: [name, first_line, last_line, ops, end, labelled]
    current = ["entry", first_line, first_line, [], None, True]
    blocks = [current]
    aliases: dict[str, str] = {}
    decls: list[str] = []
    last_label, unnamed, line, pos, previous = "entry", 0, first_line, start, -1
    find, count = text.find, text.count
    is_mark = map(str.endswith, items, repeat((":", ";")))
    for i in compress(range(len(items)), is_mark):
        mark = items[i]
        kind = mark[-1] if mark[-1] == ":" else mark[0]
        if kind == ".":
            decls.append(mark)
            current[3].extend(items[previous + 1:i])
            previous = i
            continue
        found = find(mark, pos, end)
        while text[found - 1] not in " \t\n":  # inside a longer word: not the mark itself
            found = find(mark, found + 1, end)
        newlines = count("\n", pos, found)  # the piece before the mark, and the mark's own
        if newlines > 1:
            current[3].extend(items[previous + 1:i])
            line += newlines - 1
            current[2] = line
        line += 1
        pos, previous = found + len(mark), i
        if kind == ":":
            label = mark[:-1]
            if current[3] or current[4]:
                current = [label, line, line, [], None, True]
                blocks.append(current)
            elif current[5] and current[0] != "entry":
                aliases[label] = current[0]
            else:
                current[0], current[1], current[2], current[5] = label, line, line, True
            last_label, unnamed = current[0], 0
        else:
            target = ENDER_RE.match(mark).groups()
            guarded = find("@", text.rfind("\n", 0, found), found) >= 0
            end_info = (guarded, *target)
            current[3].append(end_info[1])
            current[4] = end_info
            if "\n" in mark:  # operands over several lines
                line += mark.count("\n")
            current[2] = line
            unnamed += 1
            current = [f"{last_label}+{unnamed}", line + 1, line + 1, [], None, False]
            blocks.append(current)
    newlines = count("\n", pos, end)
    if newlines:
        current[3].extend(items[previous + 1:])
        current[2] = line + newlines
    kept = [b for b in blocks if b[3] or b[5]]
    if items and max(items) >= "{":  # an inline-asm line: "{" sorts after every opcode
        decls.extend(op for op in items if op[0] == "{")
        for block in kept:
            block[3] = list(chain.from_iterable(
                brace_statements(op) if op[0] == "{" else (op,) for op in block[3]))
    blocks, edges = _finish(kept, aliases)
    return blocks, edges, decls


def _finish(kept: list[list], aliases: dict[str, str]) -> tuple[list[PtxBlock], list[tuple]]:
    """Blocks with successors resolved (branch targets through aliases, and fall-through),
    and the control-flow graph as successor index tuples."""
    names = [b[0] for b in kept]
    index = {name: i for i, name in enumerate(names)}
    last = len(kept) - 1
    new_block = tuple.__new__  # PtxBlock's own __new__ is Python code: thousands of blocks
    out, edges = [], []
    for i, (name, first, last_line, ops, end, _) in enumerate(kept):
        if end is None:
            succ = () if i == last else (i + 1,)
        else:
            guarded, opcode, target = end
            head = index.get(aliases.get(target, target))
            succ = () if head is None else (head,)
            if (guarded or opcode[:3] == "brx") and i != last and head != i + 1:
                succ += (i + 1,)
        edges.append(succ)
        succ_names = () if not succ else (names[succ[0]],) if len(succ) == 1 else (
            names[succ[0]], names[succ[1]])
        out.append(new_block(PtxBlock, (name, first, last_line, tuple(ops), succ_names)))
    return out, edges


def find_loops(blocks: list[PtxBlock], edges: list[tuple] | None = None) -> tuple[PtxLoop, ...]:
    """Natural loops: one per head of a back edge u -> h, an edge whose head dominates its source.

    A loop's body is h and every block that reaches u without passing h; loops sharing a head
    are one loop, and a loop's depth is how many loop bodies hold its head (1 = outermost).
    The back edge may jump either way in the text: a rotated loop whose test sits above its
    body returns to the body by a forward jump. Only blocks reachable from the entry count.
    ``edges`` (successor indices per block) is computed from the blocks when not given.
    """
    if edges is None:
        index = {b.name: i for i, b in enumerate(blocks)}
        edges = [tuple(index[s] for s in b.successors) for b in blocks]
    # A cycle needs an edge that does not go down the text: without one there is no loop.
    if not any([head <= latch for latch, heads in enumerate(edges) for head in heads]):
        return ()
    candidates, reached = _retreating_edges(edges)
    if not candidates:
        return ()
    preds: list[list[int]] = [[] for _ in blocks]
    for i, heads in enumerate(edges):
        if reached[i]:
            for head in heads:
                preds[head].append(i)
    bodies: dict[int, set[int]] = {}
    for latch, head in candidates:
        body = _body(head, latch, preds)
        if body is not None:
            bodies.setdefault(head, set()).update(body)
    depth = dict.fromkeys(bodies, 0)  # how many loop bodies hold each head
    for body in bodies.values():
        for inner in depth.keys() & body:
            depth[inner] += 1
    loops = []
    for head, body in sorted(bodies.items()):
        members = [blocks[i] for i in sorted(body)]  # in text order: first and last lines
        histogram = Counter(chain.from_iterable([m.ops for m in members]))
        loops.append(PtxLoop(blocks[head].name, depth[head], members[0].first_line,
                             members[-1].last_line, tuple([m.name for m in members]),
                             sum(histogram.values()), by_count(histogram)))
    return tuple(loops)


def _retreating_edges(edges: list[tuple]) -> tuple[list[tuple[int, int]], list[int]]:
    """Edges (latch, head) into a block on the path of a depth-first walk from the entry, and
    per block whether the walk reached it (0: unreachable).

    A block's dominators all lie on that path, so every back edge is among these; an edge
    among them is a back edge unless its loop can also be entered elsewhere (irreducible).
    """
    state = [0] * len(edges)  # 0: not reached, 1: on the walk's path, 2: done
    state[0] = 1
    retreating = []
    stack = [(0, iter(edges[0]))]
    while stack:
        node, successors = stack[-1]
        for child in successors:
            seen = state[child]
            if not seen:
                state[child] = 1
                stack.append((child, iter(edges[child])))
                break
            if seen == 1:
                retreating.append((node, child))
        else:
            stack.pop()
            state[node] = 2
    return retreating, state


def _body(head: int, latch: int, preds: list[list[int]]) -> set[int] | None:
    """The head and the blocks reaching ``latch`` without passing it; None when the walk meets
    the entry block (block 0) first: then the head does not dominate the latch.
    """
    body, stack = {head}, [latch]
    while stack:
        n = stack.pop()
        if n in body:
            continue
        if n == 0:
            return None
        body.add(n)
        stack.extend(preds[n])
    return body


def cfg(kernel):
    """The kernel's blocks as a networkx DiGraph; nodes carry first_line, instructions, loop depth."""
    import networkx as nx

    graph = nx.DiGraph(name=kernel.name)
    depth = {}
    for loop in kernel.loops:
        for name in loop.blocks:
            depth[name] = max(depth.get(name, 0), loop.depth)
    for block in kernel.blocks:
        graph.add_node(block.name, first_line=block.first_line, last_line=block.last_line,
                       instructions=block.instructions, loop_depth=depth.get(block.name, 0))
    for block in kernel.blocks:
        for succ in block.successors:
            graph.add_edge(block.name, succ)
    return graph

