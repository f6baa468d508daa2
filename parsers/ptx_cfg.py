"""PTX control flow: a kernel body cut into basic blocks, natural loops with nesting, a graph."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import NamedTuple

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
# What a branch may jump to: "bra.uni \t$L__BB0_4;" -> "$L__BB0_4", and each label of a
# `.branchtargets` list (the table of a `brx.idx`); "bra" in a comment only adds a label
TARGET_RE = re.compile(r"bra(?:(?:\.uni)?[ \t]+([$\w]+)[ \t]*;|nchtargets[ \t]+([^;]*);)")
# A block-ending statement: "bra.uni \t$L__BB0_4;" -> "bra.uni", "$L__BB0_4"
ENDER_RE = re.compile(r"([a-z][a-z0-9_.]*+)[ \t]*+([$\w]*+)")


class Body(NamedTuple):
    """A kernel body cut into blocks: what ``split_blocks`` finds."""

    blocks: list[PtxBlock]
    edges: list[tuple]  # successor indices per block
    decls: list[str]  # the declaration lines
    last_line: int  # the line of the body's end
    histogram: Counter  # opcode counts over all blocks
    jumps_back: bool  # whether a branch goes up the text or to itself: a loop is possible


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
        return by_count(by_category(self.histogram))

    def to_json(self) -> dict:
        """Every field, and the categories."""
        return {"head": self.head, "depth": self.depth, "first_line": self.first_line,
                "last_line": self.last_line, "blocks": list(self.blocks),
                "instructions": self.instructions, "histogram": dict(self.histogram),
                "categories": self.categories}


def split_blocks(text: str, start: int, end: int, first_line: int) -> Body:
    """Cut the kernel body ``text[start:end]`` into basic blocks.

    ``first_line`` is the line of ``start``. A block starts at a label a branch may jump to
    or after a branch or return, and ends before the next one; labels that follow each other
    name the same block. A label no branch names (the `$L__tmp` labels debug info places
    between instructions) starts no block and names none. One ITEM_RE pass lists the
    body's statements; Python then runs once per mark (label, block end, declaration),
    never per instruction, and finds each mark's line by searching for its text on from
    the previous mark.
    """
    items = ITEM_RE.findall(text, start, end)
    targets = set()
    for label, listed in TARGET_RE.findall(text, start, end):
        targets.update([label + ":"] if label else [t.strip() + ":" for t in listed.split(",")])
    find, count = text.find, text.count
    built: list[tuple] = []  # closed blocks: (name, first_line, last_line, ops, end, labelled)
    aliases: dict[str, str] = {}
    decls: list[str] = []
    # The open block; an unnamed one (after a block end) is named when it closes
    name, first, last, ops, labelled = "entry", first_line, first_line, [], True
    last_label, unnamed, line, pos, previous = "entry", 0, first_line, start, -1
    for i in compress(range(len(items)), map(str.endswith, items, repeat((":", ";")))):
        mark = items[i]
        if mark[0] == "{" and mark[-1] == ";":  # an inline-asm line ending in `;;`: a statement
            continue
        if mark[0] == ".":
            decls.append(mark)
            ops += items[previous + 1:i]
            previous = i
            continue
        if mark[-1] == ":" and mark not in targets:  # no jump lands here: read on
            ops += items[previous + 1:i]
            previous = i
            continue
        found = find(mark, pos, end)
        while text[found - 1] not in " \t\n":  # inside a longer word: not the mark itself
            found = find(mark, found + 1, end)
        newlines = count("\n", pos, found)  # the piece before the mark, and the mark's own
        if newlines > 1:
            ops += items[previous + 1:i]
            line += newlines - 1
            last = line
        line += 1
        pos, previous = found + len(mark), i
        if mark[-1] == ":":
            if ops:
                built.append((name or f"{last_label}+{unnamed}", first, last, ops, None,
                              labelled))
                name, first, last, ops, labelled = mark[:-1], line, line, [], True
            elif labelled and name != "entry":
                aliases[mark[:-1]] = name
            else:
                name, first, last, labelled = mark[:-1], line, line, True
            last_label, unnamed = name, 0
        else:
            opcode, target = ENDER_RE.match(mark).groups()
            guarded = find("@", text.rfind("\n", 0, found), found) >= 0
            if "\n" in mark:  # operands over several lines
                line += mark.count("\n")
            ops.append(opcode)
            built.append((name or f"{last_label}+{unnamed}", first, line, ops,
                          (guarded, opcode, target), labelled))
            unnamed += 1
            name, first, last, ops, labelled = None, line + 1, line + 1, [], False
    newlines = count("\n", pos, end)
    if newlines:
        ops += items[previous + 1:]
        last = line + newlines
    if ops or labelled:
        built.append((name or f"{last_label}+{unnamed}", first, last, ops, None, labelled))
    if items and max(items) >= "{":  # an inline-asm line: "{" sorts after every opcode
        decls.extend(op for op in items if op[0] == "{")
        built = [(*block[:3], list(chain.from_iterable(
            brace_statements(op) if op[0] == "{" else (op,) for op in block[3])), *block[4:])
            for block in built]
    blocks, edges, jumps_back = _finish(built, aliases)
    histogram = Counter(chain.from_iterable([block[3] for block in built]))
    return Body(blocks, edges, decls, line + newlines, histogram, jumps_back)


def _finish(kept: list[tuple],
            aliases: dict[str, str]) -> tuple[list[PtxBlock], list[tuple], bool]:
    """Blocks with successors resolved (branch targets through aliases, and fall-through),
    the control-flow graph as successor index tuples, and whether a branch goes back."""
    names, firsts, lasts, ops, ends, _ = zip(*kept)
    index = dict(zip(names, range(len(names))))
    last = len(kept) - 1
    edges, successors, jumps_back = [], [], False
    for i, end in enumerate(ends):
        if end is None:
            if i == last:
                edges.append(())
                successors.append(())
            else:
                edges.append((i + 1,))
                successors.append((names[i + 1],))
            continue
        guarded, opcode, target = end
        head = index.get(aliases.get(target, target))
        if head is None:
            succ, succ_names = (), ()
        else:
            succ, succ_names = (head,), (names[head],)
            jumps_back = jumps_back or head <= i
        if (guarded or opcode[:3] == "brx") and i != last and head != i + 1:
            succ += (i + 1,)
            succ_names += (names[i + 1],)
        edges.append(succ)
        successors.append(succ_names)
    # PtxBlock's own __new__ is Python code: tuple's, mapped in C, for thousands of blocks
    blocks = list(map(tuple.__new__, repeat(PtxBlock),
                      zip(names, firsts, lasts, map(tuple, ops), successors)))
    return blocks, edges, jumps_back


def find_loops(blocks: list[PtxBlock], edges: list[tuple] | None = None) -> tuple[PtxLoop, ...]:
    """Natural loops: one per head of a back edge u -> h, an edge whose head dominates its source.

    A loop's body is h and every block that reaches u without passing h; loops sharing a head
    are one loop, and a loop's depth is how many loop bodies hold its head (1 = outermost).
    The back edge may jump either way in the text: a rotated loop whose test sits above its
    body returns to the body by a forward jump. Only blocks reachable from the entry count.
    ``edges`` (successor indices per block) is computed from the blocks when not given.
    A cycle needs an edge that does not go down the text: without one there is no loop
    (``split_blocks`` tells, as ``jumps_back``).
    """
    if edges is None:
        index = {b.name: i for i, b in enumerate(blocks)}
        edges = [tuple(index[s] for s in b.successors) for b in blocks]
        if not any([head <= latch for latch, heads in enumerate(edges) for head in heads]):
            return ()
    candidates, preds = _walk(edges)
    if not candidates:
        return ()
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


def _walk(edges: list[tuple]) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """A depth-first walk from the entry: the edges (latch, head) into a block on the walk's
    path, and each block's predecessors among the blocks it reaches.

    A block's dominators all lie on that path, so every back edge is among these; an edge
    among them is a back edge unless its loop can also be entered elsewhere (irreducible).
    """
    state = [0] * len(edges)  # 0: not reached, 1: on the walk's path, 2: done
    state[0] = 1
    preds: list[list[int]] = [[] for _ in edges]
    retreating = []
    stack = [(0, iter(edges[0]))]
    while stack:
        node, successors = stack[-1]
        for child in successors:
            preds[child].append(node)
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
    return retreating, preds


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

