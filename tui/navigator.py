"""The navigator: units grouped by framework, each expanding into its stages in order."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Tree

from irscope.store import Stage
from irscope.views import (RAW, Badges, FrameworkGroup, UnitRow, filter_groups, is_ir,
                           stage_title)


class StageTree(Tree):
    """Tree whose unit nodes add their stage leaves only when first expanded."""

    def __init__(self) -> None:
        super().__init__("run", id="stage-tree")
        self.show_root = False
        self.guide_depth = 2
        self.badges: dict[int, Badges] = {}
        self._unit_nodes: dict[int, object] = {}

    def fill(self, groups: Sequence[FrameworkGroup]) -> None:
        self.clear()
        self._unit_nodes.clear()
        for group in groups:
            fw_node = self.root.add(Text.assemble((group.framework, "bold"),
                                                  f" ({len(group.rows)})"),
                                    data=group.framework, expand=True)
            for row in group.rows:
                node = fw_node.add(self.unit_label(row), data=row, allow_expand=bool(row.stages))
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
        if unit_node.parent:
            unit_node.parent.expand()
        for node in unit_node.children:
            if node.data == RAW and stage.kind == RAW:
                node.expand()
                return next((n for n in node.children if n.data.id == stage.id), None)
            if isinstance(node.data, Stage) and node.data.id == stage.id:
                return node
        return None


class Navigator(Vertical):
    """Filter box above the stage tree; posts StageChosen when a stage is highlighted."""

    class StageChosen(Message):
        def __init__(self, stage: Stage) -> None:
            super().__init__()
            self.stage = stage

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: list[FrameworkGroup] = []
        self.filter = Input(placeholder="filter units…", id="filter")
        self.stage_tree = StageTree()

    def compose(self) -> ComposeResult:
        yield self.filter
        yield self.stage_tree

    def set_groups(self, groups: list[FrameworkGroup]) -> None:
        self.groups = groups
        self.stage_tree.fill(groups)

    def first_stage(self) -> Stage | None:
        """The stage to open first: the first IR of the first unit that has one."""
        stages = [s for g in self.groups for row in g.rows for s in row.stages]
        return next((s for s in stages if is_ir(s) and s.kind != "python_source"),
                    stages[0] if stages else None)

    def select_stage(self, stage: Stage) -> None:
        node = self.stage_tree.node_for_stage(stage)
        if node is not None:  # the node has a line only once the tree has re-rendered
            self.stage_tree.call_after_refresh(self.stage_tree.move_cursor, node, animate=False)

    @on(Input.Changed, "#filter")
    def _filter(self, event: Input.Changed) -> None:
        self.stage_tree.fill(filter_groups(self.groups, event.value))

    @on(Input.Submitted, "#filter")
    def _to_tree(self) -> None:
        self.stage_tree.focus()

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        if isinstance(event.node.data, Stage):
            self.post_message(self.StageChosen(event.node.data))
