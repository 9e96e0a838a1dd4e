"""YAML from a repository in bounded time and memory (SECURITY.md S16).

PyYAML's SafeLoader executes nothing, but it is not bounded: a 500-byte file of nested aliases
("billion laughs") expands to billions of nodes as soon as anything walks the result, and a
20,000-deep ``[[[[...`` ends in RecursionError inside the composer. ``BoundedLoader`` counts,
while composing, how many nodes the document stands for with every alias expanded, and how deep
it nests; past either limit it stops with a YAMLError that names the limit.
"""

from __future__ import annotations

from typing import Any

import yaml

# Far above any CI workflow or compose file (GitHub's largest workflows have a few thousand
# nodes), far below what hurts.
MAX_NODES = 200_000
MAX_DEPTH = 100


class YAMLLimitError(yaml.YAMLError):
    """The document is deeper or (with aliases expanded) larger than setupbot reads."""


class BoundedLoader(yaml.SafeLoader):
    max_nodes = MAX_NODES
    max_depth = MAX_DEPTH

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._weight: dict[int, int] = {}

    # The scanner looks ahead over every open flow collection ("[[[[..."), which is quadratic:
    # stop it at the depth limit too, before the composer ever sees the nodes.
    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: N803 - PyYAML hook
        if self.flow_level >= self.max_depth:
            raise YAMLLimitError(f"nested deeper than {self.max_depth} levels")
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:  # PyYAML hook: one call per block level
        if len(self.indents) >= self.max_depth:
            raise YAMLLimitError(f"nested deeper than {self.max_depth} levels")
        return super().add_indent(column)

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - PyYAML hook
        self._depth += 1
        if self._depth > self.max_depth:
            raise YAMLLimitError(f"nested deeper than {self.max_depth} levels")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if id(node) not in self._weight:
            weight = 1
            if isinstance(node, yaml.SequenceNode):
                weight += sum(self._weight.get(id(c), 1) for c in node.value)
            elif isinstance(node, yaml.MappingNode):
                weight += sum(self._weight.get(id(k), 1) + self._weight.get(id(v), 1) for k, v in node.value)
            self._weight[id(node)] = weight
            # keep the node alive while its id is a key (ids of freed nodes are reused)
            self._keep = getattr(self, "_keep", [])
            self._keep.append(node)
        if self._weight[id(node)] > self.max_nodes:
            raise YAMLLimitError(f"more than {self.max_nodes} values once its aliases are expanded (an alias bomb?)")
        return node


def safe_load(text: str | bytes, loader: type[BoundedLoader] = BoundedLoader) -> Any:
    """``yaml.safe_load`` with the limits above. Raises yaml.YAMLError (YAMLLimitError past a
    limit)."""
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError as exc:  # a parser path the depth check does not cover
        raise YAMLLimitError("nested too deeply") from exc
