"""The navigator: units grouped by framework, each expanding into its stages in order.

Units hidden by default (JAX's eager ops, see irscope.units) are left out and counted beside
their framework; with ``show_all`` they are shown, folded under a node of their group.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Tree

from irscope.store import Stage
from irscope.tui.bindings import bindings
from irscope.units import group_of, shown_units
from irscope.locations import is_ir
from irscope.run_tree import RAW, Badges, FrameworkGroup, UnitRow, filter_groups, stage_title


class StageTree(Tree):
    """Tree whose unit nodes add their stage leaves only when first expanded."""

    def __init__(self) -> None:
        super().__init__("run", id="stage-tree")
        self.show_root = False
        self.guide_depth = 2
        self.badges: dict[int, Badges] = {}
        self._unit_nodes: dict[int, object] = {}

    def fill(self, groups: Sequence[FrameworkGroup], hidden: dict[str, int] | None = None) -> None:
        """One node per framework holding its units; units of a group (eager ops) are folded
        under a node of that group. ``hidden``: units left out, per framework."""
        self.clear()
        self._unit_nodes.clear()
        for group in groups:
            label = Text.assemble((group.framework, "bold"), f" ({len(group.rows)})")
            if (hidden or {}).get(group.framework):
                label.append(f"  +{hidden[group.framework]} hidden", style="dim")
            fw_node = self.root.add(label, data=group.framework, expand=True)
            folded: dict[str, list[UnitRow]] = {}
            for row in group.rows:
                if group_of(row.unit):
                    folded.setdefault(group_of(row.unit), []).append(row)
                else:
                    self._add_unit(fw_node, row)
            for name, rows in folded.items():
                group_node = fw_node.add(Text(f"{name} ({len(rows)})", style="dim"), data=name)
                for row in rows:
                    self._add_unit(group_node, row)

    def _add_unit(self, parent, row: UnitRow) -> None:
        node = parent.add(self.unit_label(row), data=row, allow_expand=bool(row.stages))
        self._unit_nodes[row.unit.id] = node

    def unit_label(self, row: UnitRow) -> Text:
        badge = self.badges.get(row.unit.id)
        label = Text(row.unit.name)
        if badge and badge.text():
            label.append(f"  {badge.text()}", style="dim")
        return label

    def set_badges(self, badges: dict[int, Badges]) -> None:
        self.badges = badges
        for unit_id, node in self._unit_nodes.items():
            node.set_label(self.unit_label(node.data))

    def expand_unit(self, node) -> None:
        row = node.data
        if isinstance(row, UnitRow) and not node.children:
            raw = [s for s in row.stages if s.kind == RAW]
            for stage in row.stages:
                if stage.kind != RAW:
                    node.add_leaf(stage_title(stage), data=stage)
            if raw:  # dozens of log records would bury the IR stages
                records = node.add(Text(f"raw records ({len(raw)})", style="dim"), data=RAW)
                for stage in raw:
                    records.add_leaf(stage.name, data=stage)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        self.expand_unit(event.node)

    def node_for_stage(self, stage: Stage):
        unit_node = self._unit_nodes.get(stage.unit_id)
        if unit_node is None:
            return None
        self.expand_unit(unit_node)
        unit_node.expand()
        parent = unit_node.parent
        while parent is not None:  # its framework, and its group within it
            parent.expand()
            parent = parent.parent
        for node in unit_node.children:
            if node.data == RAW and stage.kind == RAW:
                node.expand()
                return next((n for n in node.children if n.data.id == stage.id), None)
            if isinstance(node.data, Stage) and node.data.id == stage.id:
                return node
        return None


class Navigator(Vertical):
    """Filter box above the stage tree; posts StageChosen when a stage is highlighted."""

    BINDINGS = bindings("navigator")
    MIN_WIDTH, MAX_WIDTH = 20, 120

    class StageChosen(Message):
        def __init__(self, stage: Stage) -> None:
            super().__init__()
            self.stage = stage

    class StageSelected(Message):
        """Enter on a stage: the reader wants to read it (focus moves to the viewer)."""

    show_all = False

    def __init__(self, id: str | None = None, show_all: bool | None = None) -> None:
        super().__init__(id=id)
        if show_all is not None:
            self.show_all = show_all
        self.groups: list[FrameworkGroup] = []  # the units shown, by framework
        self.hidden: dict[str, int] = {}  # units hidden by default, per framework
        self.filter = Input(placeholder="filter units…", id="filter")
        self.stage_tree = StageTree()
        self._quiet: set[int] = set()  # stages selected by the app: their highlight is no choice

    def compose(self) -> ComposeResult:
        yield self.filter
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
        self.stage_tree.fill(self.groups, self.hidden)

    def first_stage(self) -> Stage | None:
        """The stage to open first: the first IR of the first unit that has one, the user's
        units before grouped ones (eager ops)."""
        rows = sorted((row for g in self.groups for row in g.rows),
                      key=lambda row: group_of(row.unit) is not None)
        stages = [s for row in rows for s in row.stages]
        return next((s for s in stages if is_ir(s) and s.kind != "python_source"),
                    stages[0] if stages else None)

    def select_stage(self, stage: Stage, quiet: bool = False) -> None:
        """Move the tree's cursor to ``stage``, which is then chosen; ``quiet``: the app opened
        it already (at a line, with marks) and the late highlight must not reopen it plain."""
        node = self.stage_tree.node_for_stage(stage)
        if node is not None:  # the node has a line only once the tree has re-rendered
            if quiet and self.stage_tree.cursor_node is not node:
                self._quiet.add(stage.id)
            self.stage_tree.call_after_refresh(self.stage_tree.move_cursor, node, animate=False)

    @on(Input.Changed, "#filter")
    def _filter(self, event: Input.Changed) -> None:
        self.stage_tree.fill(filter_groups(self.groups, event.value), self.hidden)

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
        if isinstance(event.node.data, Stage):
            self.post_message(self.StageSelected())

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        if isinstance(event.node.data, Stage) and event.node.data.id in self._quiet:
            self._quiet.discard(event.node.data.id)
            return
        if isinstance(event.node.data, Stage):
            self.post_message(self.StageChosen(event.node.data))
