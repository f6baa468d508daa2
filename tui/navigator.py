"""The navigator: units grouped by framework, each expanding into its stages in order.

Units hidden by default (JAX's eager ops, see irscope.store.units) are left out and counted beside
their framework; with ``show_all`` they are shown, folded under a node of their group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static, Tree

from irscope.store import Stage
from irscope.tui.bindings import bindings
from irscope.store.units import group_of, shown_units
from irscope.browse.locations import is_ir
from irscope.browse.graph_kernels import GraphKernels
from irscope.read.kernel_origins import CANDIDATE, NO_GRAPH, KernelOrigins
from irscope.browse.tree import (RAW, Badges, FrameworkGroup, UnitRow, short_name, short_names,
                                 stage_title)
from irscope.tui.checks import LINT_STYLES
from irscope.tui.unit_filter import UnitFilter


# what a kernel's label says of where it comes from (read.kernel_origins)
CANDIDATE_TAG, NO_GRAPH_TAG = " not chosen", " no graph"


@dataclass(frozen=True)
class MoreRows:
    """The data of a "… N more units" node: the rows of its parent not yet shown."""

    rows: tuple[UnitRow, ...]


@dataclass(frozen=True)
class RoleGroup:
    """The data of a node holding a compile's stages of one role (forward, backward, a DDP
    bucket) and the kernels that output code launches."""

    unit_id: int
    role: str


@dataclass(frozen=True)
class KernelList:
    """The data of a "kernels" node: an output code's kernels (browse.graph_kernels)."""

    kernels: GraphKernels


@dataclass(frozen=True)
class RawRecords:
    """The data of a unit's folded raw log records, read when first opened."""

    unit_id: int
    count: int


@dataclass(frozen=True)
class Configurations:
    """The data of a folded node holding autotuning's unchosen configurations of a kernel."""

    unit_ids: tuple[int, ...]


class StageTree(Tree):
    """Tree whose unit nodes add their stage leaves only when first expanded, and whose
    framework and group nodes show ``PAGE`` units at a time: a run of 12,000 units fills
    and filters in the time a few hundred take, the rest one enter away."""

    PAGE = 200  # units added under one node at a time

    def __init__(self) -> None:
        super().__init__("run", id="stage-tree")
        self.show_root = False
        self.guide_depth = 2
        self.badges: dict[int, Badges] = {}
        self.lint: dict[int, tuple[int, str]] = {}  # unit id -> (findings, worst severity)
        self.shown_units: list[int] = []  # the units filled in, shown or behind a "more" node
        self._unit_nodes: dict[int, object] = {}
        self.rows: dict[int, UnitRow] = {}  # every unit's row, for the kernels under graphs
        self._short: dict[int, dict[str, str]] = {}  # room -> every name shortened to it
        self.kernels: dict[int, list[GraphKernels]] = {}  # graph unit id -> its kernels
        self.origins: dict[int, str] = {}  # kernel unit id -> read.kernel_origins' origin
        self.kernel_counts: dict[str, KernelOrigins] = {}  # by framework
        self._groups: dict[str, FrameworkGroup] = {}  # the framework groups filled in
        self._hidden: dict[str, int] = {}  # units hidden by default, per framework

    def label_room(self, depth: int, expandable: bool = True) -> int:
        """Columns a label has at ``depth`` (1: a framework) in the tree's width."""
        return max(8, self.size.width - 1 - 2 * (depth - 1) - (2 if expandable else 0))

    def fill(self, groups: Sequence[FrameworkGroup], hidden: dict[str, int] | None = None) -> None:
        """One node per framework holding its units; units of a group (eager ops) are folded
        under a node of that group. ``hidden``: units left out, per framework."""
        self.clear()
        self._unit_nodes.clear()
        self.shown_units = [row.unit.id for group in groups for row in group.rows]
        self._hidden = hidden or {}
        self._groups = {group.framework: group for group in groups}
        for group in groups:
            fw_node = self.root.add(self.framework_label(group), data=group.framework,
                                    expand=True)
            folded: dict[str, list[UnitRow]] = {}
            plain: list[UnitRow] = []
            for row in group.rows:
                if group_of(row.unit):
                    folded.setdefault(group_of(row.unit), []).append(row)
                else:
                    plain.append(row)
            self._add_rows(fw_node, plain)
            for name, rows in folded.items():
                group_node = fw_node.add(Text(f"{name} ({len(rows)})", style="dim"), data=name)
                self._add_rows(group_node, rows)

    def framework_label(self, group: FrameworkGroup) -> Text:
        """A framework's name and units shown, those hidden, and for kernels that are not all
        launched by graphs what they are (``14 by graphs · 22 not chosen · 2 no graph``)."""
        label = Text.assemble((group.framework, "bold"), f" ({len(group.rows)})")
        if self._hidden.get(group.framework):
            label.append(f"  +{self._hidden[group.framework]} hidden", style="dim")
        counts = self.kernel_counts.get(group.framework)
        if counts is not None and counts.brief():
            label.append("  " + counts.brief(), style="dim")
        return label

    def origin_tag(self, unit_id: int) -> str:
        """CANDIDATE_TAG for an autotuning candidate, NO_GRAPH_TAG for a kernel no graph
        launches where graphs launch others of its framework; "" otherwise."""
        origin = self.origins.get(unit_id)
        row = self.rows.get(unit_id)
        counts = self.kernel_counts.get(row.unit.framework) if row is not None else None
        if origin == CANDIDATE:
            return CANDIDATE_TAG
        return NO_GRAPH_TAG if origin == NO_GRAPH and counts and counts.launched else ""

    def set_origins(self, origins: dict[int, str], counts: Sequence[KernelOrigins]) -> None:
        """Each kernel's origin and each framework's counts: frameworks and units relabelled."""
        self.origins, self.kernel_counts = origins, {c.framework: c for c in counts}
        for node in self.root.children:
            if node.data in self._groups:
                node.set_label(self.framework_label(self._groups[node.data]))
        self._relabel()

    def _add_rows(self, parent, rows: Sequence[UnitRow], count: int | None = None) -> None:
        """Add the first ``count`` (default ``PAGE``) of ``rows`` under ``parent``, and a node
        holding the others when some are left."""
        count = max(count or 0, self.PAGE)
        for row in rows[:count]:
            self._add_unit(parent, row)
        if len(rows) > count:
            rest = tuple(rows[count:])
            parent.add_leaf(Text(f"… {len(rest):,} more units: enter shows them",
                                 style="dim italic"), data=MoreRows(rest))

    def show_more(self, node, upto: int = 0) -> None:
        """Replace a "more units" node by the next page of its rows (or by rows up to
        index ``upto`` of them, and a page more)."""
        if isinstance(node.data, MoreRows) and node.parent is not None:
            parent, rows = node.parent, node.data.rows
            node.remove()
            self._add_rows(parent, rows, upto + self.PAGE if upto else None)

    def _reveal(self, unit_id: int):
        """The node of a unit not shown yet, after showing the rows up to it."""
        pending = [self.root]
        while pending:
            node = pending.pop()
            if isinstance(node.data, MoreRows):
                ids = [row.unit.id for row in node.data.rows]
                if unit_id in ids:
                    self.show_more(node, ids.index(unit_id) + 1)
                    return self._unit_nodes.get(unit_id)
            elif not isinstance(node.data, (UnitRow, Stage)):
                pending.extend(node.children)
        return None

    def _add_unit(self, parent, row: UnitRow) -> None:
        row = self.rows.get(row.unit.id, row)  # a "more" node's rows may predate update_rows
        node = parent.add(self.unit_label(row), data=row,
                          allow_expand=bool(row.stages or row.pending))
        self._unit_nodes[row.unit.id] = node

    def update_rows(self, rows: dict[int, UnitRow]) -> None:
        """Every unit's row with its stages read (navigator_groups' second call): the nodes
        filled take theirs, those expanded meanwhile gain their stages; what is shown,
        expanded and under the cursor stays."""
        self.rows = rows
        for unit_id, node in self._unit_nodes.items():
            row = rows.get(unit_id)
            if row is None or node.data is row:
                continue
            node.data = row
            node.allow_expand = bool(row.stages)
            if node.is_expanded:
                self.expand_unit(node)

    def unit_label(self, row: UnitRow, depth: int = 2, suffix: str = "") -> Text:
        """A unit's name, shortened to the tree's width so that names stay told apart (their
        ends kept), its lint flag, ``suffix`` (a kernel's launches) and its badges."""
        badge = self.badges.get(row.unit.id)
        flag = f" ⚑{self.lint[row.unit.id][0]}" if row.unit.id in self.lint else ""
        tag = self.origin_tag(row.unit.id)
        room = self.label_room(depth) - len(flag) - len(suffix) - len(tag)
        label = Text(self.shortened(row.unit.name, room) if self.size.width else row.unit.name)
        if tag:
            label.append(tag, style="dim italic")
        if flag:
            label.append(flag, style=LINT_STYLES.get(self.lint[row.unit.id][1], "dim"))
        if suffix:
            label.append(suffix, style="bold")
        if badge and badge.text():
            label.append(f"  {badge.text()}", style="dim")
        return label

    def kernel_label(self, kernel, names: list[str]) -> Text:
        """A kernel under its graph: its name in the output code (shortened to the width,
        told apart from the graph's other ``names``), how often one call of the graph
        launches it, and per profiled step where that differs."""
        count = f" ×{kernel.launches}" if kernel.launches > 1 else ""
        if kernel.per_step is not None and kernel.per_step != kernel.launches:
            count += f" {kernel.per_step:g}/step"
        room = self.label_room(5) - len(count)
        label = Text(short_names(names, room).get(kernel.name) or short_name(kernel.name, room))
        label.append(count, style="bold")
        return label

    def set_badges(self, badges: dict[int, Badges]) -> None:
        self.badges = badges
        self._relabel()

    def set_lint(self, lint: dict[int, tuple[int, str]]) -> None:
        """Lint's findings per unit id: how many, and the worst severity."""
        self.lint = lint
        self._relabel()

    def shortened(self, name: str, room: int) -> str:
        """``name`` in ``room`` columns, told apart from every other unit's (short_names)."""
        if len(name) <= room:
            return name
        if room not in self._short:
            self._short[room] = short_names([r.unit.name for r in self.rows.values()], room)
        return self._short[room].get(name) or short_name(name, room)

    def _relabel(self) -> None:
        for node in self._unit_nodes.values():
            node.set_label(self.unit_label(node.data))

    def on_resize(self) -> None:
        self._relabel()

    def set_kernels(self, kernels: dict[int, list[GraphKernels]]) -> None:
        """The kernels under each graph: added to the graphs already expanded."""
        self.kernels = kernels
        for node in self._unit_nodes.values():
            if node.children:
                for child in node.children:
                    if isinstance(child.data, RoleGroup):
                        self._add_kernels(child, child.data)
        # lines added above the cursor push it down: kept in view, as if they had been there
        self.call_after_refresh(self._cursor_in_view)

    def _cursor_in_view(self) -> None:
        if self.cursor_node is not None:
            self.scroll_to_node(self.cursor_node, animate=False)

    def put_cursor_on(self, node) -> bool:
        """Move the cursor to ``node`` at the line it has now; False when it is there already
        (then no NodeHighlighted comes). ``move_cursor`` alone takes the line the node had
        when the tree was last built: nodes added or expanded above it since (the badges'
        kernels, a unit opened) make that line another node's."""
        _ = self.last_line  # reading the lines builds them again if nodes changed
        moved = self.cursor_line != node.line
        self.move_cursor(node, animate=False)
        return moved

    def expand_unit(self, node) -> None:
        """A unit's stages: those its compile shares first, then a node per role (forward,
        backward, a DDP bucket) with that output code's stages and kernels, then its
        records; raw log records folded."""
        row = node.data
        if not isinstance(row, UnitRow) or row.pending or any(
                isinstance(c.data, (Stage, RoleGroup, RawRecords)) for c in node.children):
            return  # pending: its stages come with update_rows
        shared = [s for s in row.stages if s.id not in row.roles]
        roles = list(dict.fromkeys(row.roles[s.id] for s in row.stages if s.id in row.roles))
        for stage in (s for s in shared if is_ir(s)):
            node.add_leaf(stage_title(stage), data=stage)
        for role in roles:
            group = node.add(Text(role, style="bold"), data=RoleGroup(row.unit.id, role),
                             expand=True)
            for stage in row.stages:
                if row.roles.get(stage.id) == role:
                    group.add_leaf(stage_title(stage, role, shown=False), data=stage)
            self._add_kernels(group, group.data)
        for stage in (s for s in shared if not is_ir(s)):
            node.add_leaf(stage_title(stage), data=stage)
        if row.raw:  # dozens of log records would bury the IR stages: folded, read on demand
            node.add(Text(f"raw records ({row.raw})", style="dim"),
                     data=RawRecords(row.unit.id, row.raw))

    def add_records(self, unit_id: int, stages: Sequence[Stage]) -> None:
        """A unit's raw log records, read once its records node was opened."""
        node = self._unit_nodes.get(unit_id)
        records = next((c for c in node.children if isinstance(c.data, RawRecords)),
                       None) if node is not None else None
        if records is None:
            return
        held = {c.data.id for c in records.children if isinstance(c.data, Stage)}
        for stage in stages:
            if stage.id not in held:
                records.add_leaf(stage.name, data=stage)

    def _add_kernels(self, group, role: RoleGroup) -> None:
        """Under a role's node: the kernels its output code launches, in launch order."""
        if any(isinstance(child.data, KernelList) for child in group.children):
            return
        found = [k for k in self.kernels.get(role.unit_id, ()) if k.role == role.role]
        for kernels in found:
            launches = sum(k.launches for k in kernels.kernels)
            node = group.add(Text(f"{len(kernels.kernels)} kernels, {launches} launches",
                                  style="italic"), data=KernelList(kernels))
            names = [k.name for k in kernels.kernels]
            for kernel in kernels.kernels:
                row = self.rows.get(kernel.unit_id)
                if row is None:
                    continue
                child = node.add(self.kernel_label(kernel, names), data=row,
                                 allow_expand=bool(row.stages))
                others = [self.rows[i] for i in kernel.others if i in self.rows]
                if others:
                    folded = child.add(Text(f"{len(others)} other configurations",
                                            style="dim"),
                                       data=Configurations(tuple(r.unit.id for r in others)))
                    for other in others:
                        folded.add(self.unit_label(other, 7), data=other,
                                   allow_expand=bool(other.stages))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        if isinstance(event.node.data, RawRecords) and not event.node.children:
            self.post_message(Navigator.RecordsWanted(event.node.data.unit_id))
        self.expand_unit(event.node)

    def node_for_stage(self, stage: Stage):
        unit_node = self._unit_nodes.get(stage.unit_id) or self._reveal(stage.unit_id)
        if unit_node is None:
            return None
        self.expand_unit(unit_node)
        unit_node.expand()
        parent = unit_node.parent
        while parent is not None:  # its framework, and its group within it
            parent.expand()
            parent = parent.parent
        for node in unit_node.children:
            if isinstance(node.data, RawRecords) and stage.kind == RAW:
                found = next((n for n in node.children if n.data.id == stage.id), None)
                node.expand()
                return found or node.add_leaf(stage.name, data=stage)
            if isinstance(node.data, RoleGroup):
                found = next((n for n in node.children if isinstance(n.data, Stage)
                              and n.data.id == stage.id), None)
                if found is not None:
                    node.expand()
                    return found
            if isinstance(node.data, Stage) and node.data.id == stage.id:
                return node
        return None


class Navigator(Vertical):
    """Filter box above the stage tree; posts StageChosen when a stage is highlighted."""

    BINDINGS = bindings("navigator")
    MIN_WIDTH, MAX_WIDTH = 20, 120

    class StageChosen(Message):
        """``stage`` was highlighted; ``selections``: how many stages the app had selected
        then (a highlight still in flight when the app selects another is stale)."""

        def __init__(self, stage: Stage, selections: int) -> None:
            super().__init__()
            self.stage = stage
            self.selections = selections

    class StageSelected(Message):
        """Enter on a stage: the reader wants to read it (focus moves to the viewer)."""

    class RecordsWanted(Message):
        """A unit's raw log records were opened: the app reads them."""

        def __init__(self, unit_id: int) -> None:
            super().__init__()
            self.unit_id = unit_id

    show_all = False

    def __init__(self, id: str | None = None, show_all: bool | None = None) -> None:
        super().__init__(id=id)
        if show_all is not None:
            self.show_all = show_all
        self.groups: list[FrameworkGroup] = []  # the units shown, by framework
        self.applied = ""  # the filter text the tree shows
        self.rank: int | None = None  # the rank whose units are shown, None: every rank
        self.unit_filter = UnitFilter([])
        self.rank_label = Static("", id="rank-filter")
        self.hidden: dict[str, int] = {}  # units hidden by default, per framework
        self.filter = Input(placeholder="filter units…", id="filter")
        self.stage_tree = StageTree()
        # the stage the app moves the cursor to, and whether it opened it already: the tree's
        # highlights on the way (a unit expanded above the cursor shifts its line) are no choice
        self._target: tuple[int, bool] | None = None
        # a stage chosen before its unit's stages were read: chosen once they are
        self._awaited: tuple[Stage, bool] | None = None
        self.selections = 0  # how many times the app selected a stage (select_stage)

    def compose(self) -> ComposeResult:
        yield self.filter
        yield self.rank_label
        yield self.stage_tree

    def set_groups(self, groups: list[FrameworkGroup]) -> None:
        """Show ``groups``, leaving out the units hidden by default unless ``show_all``."""
        rows = [row for group in groups for row in group.rows]
        shown, hidden = shown_units([row.unit for row in rows], self.show_all)
        kept = {unit.id for unit in shown}
        self.hidden = {}
        for unit in hidden:
            self.hidden[unit.framework] = self.hidden.get(unit.framework, 0) + 1
        self.groups = [FrameworkGroup(g.framework, tuple(r for r in g.rows if r.unit.id in kept))
                       for g in groups]
        self.stage_tree.rows = {row.unit.id: row for row in rows}
        self.stage_tree._short.clear()
        self.unit_filter = UnitFilter(self.groups)
        self.rank_label.display = bool(self.unit_filter.ranks)
        self._show_rank()
        self.apply_filter(refill=True)

    def update_groups(self, groups: list[FrameworkGroup]) -> None:
        """The same units as ``set_groups`` showed, now with every unit's stages: the tree
        keeps its nodes, and a filter typed meanwhile is applied again (it matches stage
        kinds too)."""
        rows = {row.unit.id: row for group in groups for row in group.rows}
        self.groups = [FrameworkGroup(g.framework, tuple(rows.get(r.unit.id, r) for r in g.rows))
                       for g in self.groups]
        self.stage_tree.update_rows(rows)
        self.unit_filter = UnitFilter(self.groups)
        self.apply_filter()
        if self._awaited is not None:
            self.select_stage(*self._awaited)

    def first_stage(self) -> Stage | None:
        """The stage to open first: the first IR of the first unit that has one, the user's
        units before grouped ones (eager ops); None while a unit before it is still being
        read (its stages pending)."""
        rows = sorted((row for g in self.groups for row in g.rows),
                      key=lambda row: group_of(row.unit) is not None)
        for row in rows:
            if row.pending:
                return None
            found = next((s for s in row.stages if is_ir(s) and s.kind != "python_source"),
                         None)
            if found is not None:
                return found
        return next((s for row in rows for s in row.stages), None)

    def select_stage(self, stage: Stage, quiet: bool = False) -> None:
        """Move the tree's cursor to ``stage``, which is then chosen; ``quiet``: the app opened
        it already (at a line, with marks) and the late highlight must not reopen it plain."""
        self.selections += 1
        node = self.stage_tree.node_for_stage(stage)
        self._awaited = (stage, quiet) if node is None else None  # update_groups tries again
        if node is not None:  # the node has a line only once the tree has re-rendered
            self._target = (stage.id, quiet)
            self.stage_tree.call_after_refresh(self._move_to, node)

    def _move_to(self, node) -> None:
        """Put the cursor on ``node``, the target of ``select_stage``; on it already, no
        highlight will come: the target is reached now."""
        if self._target is None or self._target[0] != node.data.id:
            return  # a later choice, or a refill that dropped the node, replaced it
        if not self.stage_tree.put_cursor_on(node):
            self._reached(node.data)

    def _reached(self, stage: Stage) -> None:
        target, self._target = self._target, None
        if target is not None and not target[1]:
            self.post_message(self.StageChosen(stage, self.selections))

    @on(Input.Changed, "#filter")
    def _filter(self, event: Input.Changed) -> None:
        """Fill the tree for the filter's text; a change a later keystroke already replaced
        is skipped, so keys typed faster than the tree fills cost one fill, not one each."""
        if event.value == self.filter.value:
            self.apply_filter()

    def apply_filter(self, refill: bool = False) -> None:
        """Fill the tree with the units the filter text and rank keep (unless it shows them
        already and ``refill`` is not asked)."""
        self.applied = self.filter.value
        groups = self.unit_filter.apply(self.applied, self.rank)
        if refill or [row.unit.id for g in groups for row in g.rows] != self.stage_tree.shown_units:
            self._target = None  # its node is gone
            self.stage_tree.fill(groups, self.hidden)

    def cycle_rank(self) -> int | None:
        """Show the units of the next rank (every rank after the last); the rank shown."""
        ranks = self.unit_filter.ranks
        if not ranks:
            return None
        order = (None, *ranks)
        self.rank = order[(order.index(self.rank) + 1) % len(order)]
        self._show_rank()
        self.apply_filter()
        return self.rank

    def _show_rank(self) -> None:
        ranks = self.unit_filter.ranks
        shown = "all ranks" if self.rank is None else f"rank {self.rank}"
        self.rank_label.update(Text.assemble((f" {shown} ", "reverse bold"),
                                             f" of {len(ranks)}  r: next rank", style="dim"))

    @on(Input.Submitted, "#filter")
    def _to_tree(self) -> None:
        self.stage_tree.focus()

    def action_leave_filter(self) -> None:
        self.stage_tree.focus()

    def widen(self, step: int) -> None:
        """Change the navigator's width by ``step`` columns (long unit names)."""
        width = self.outer_size.width or 32
        self.styles.width = min(max(width + step, self.MIN_WIDTH), self.MAX_WIDTH)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected) -> None:
        if isinstance(event.node.data, MoreRows):
            self.stage_tree.show_more(event.node)
        elif isinstance(event.node.data, Stage):
            self.post_message(self.StageSelected())

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        data = event.node.data
        if self._target is not None:
            if isinstance(data, Stage) and data.id == self._target[0]:
                self._reached(data)
            return  # on the way to the target
        if isinstance(data, Stage):
            self.post_message(self.StageChosen(data, self.selections))
