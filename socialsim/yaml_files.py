"""YAML as the project reads it (scenarios, sweep files, route tables, deployments files): a key
written twice in one mapping is an error, not the silent "last one wins" of PyYAML. A sweep file's
second ``steps:`` or a deployment's second ``api_base:`` is a mistake its author would want named."""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO, Any

import yaml
from yaml.constructor import ConstructorError

# libyaml's parser when present (~10x faster: sweeps load many runs' scenarios); the check is Python's
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A key given twice in one mapping; its problem names the key and both lines."""


class _StrictLoader(_BASE):  # type: ignore[misc, valid-type]
    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Check a mapping's own keys before a merge rewrites its value: a mapping merged into another
        (``<<: *b``) is flattened there first - its value then holds the keys it merged in too - and
        may never be built on its own."""
        if node not in self._written():
            self._written()[node] = [key for key, _ in node.value if key.tag != MERGE_TAG]
            self._check(node)
        super().flatten_mapping(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if node not in self._written():
            self._written()[node] = [key for key, _ in node.value if key.tag != MERGE_TAG]
            self._check(node)
        return super().construct_mapping(node, deep)

    def _written(self) -> dict[yaml.Node, list[yaml.Node]]:
        """Each mapping's keys as written (merge keys aside: their values may be overridden)."""
        if not hasattr(self, "_written_keys"):
            self._written_keys: dict[yaml.Node, list[yaml.Node]] = {}
        return self._written_keys

    def _check(self, node: yaml.MappingNode) -> None:
        seen: dict[Any, yaml.Node] = {}
        for key_node in self._written()[node]:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base constructor says so
                continue
            if first is not key_node:
                # a plain name or number; anything else unquoted (a long text as a key might be a secret)
                shown = key if re.fullmatch(r"[\w. -]{1,40}", str(key)) else "a key"
                raise DuplicateKeyError(
                    "while reading a mapping", node.start_mark,
                    f"duplicate key {shown} (first at line {first.start_mark.line + 1}): a key is given once",
                    key_node.start_mark)


def load_yaml(text: str | bytes | IO[str]) -> Any:
    """``yaml.safe_load`` refusing a key given twice in one mapping (DuplicateKeyError, a YAMLError)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


class NotUtf8Error(ValueError):
    """A file the project reads as text that is not UTF-8 (saved as Latin-1 or UTF-16, say)."""


def read_utf8(path: Path) -> str:
    """A file's text; one that is not UTF-8 is a NotUtf8Error naming the file and the line of its first
    byte that is not (Python's own error is a traceback giving a byte's offset)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        data = path.read_bytes()
        line = data.count(b"\n", 0, exc.start) + 1
        raise NotUtf8Error(f"{path}: not UTF-8 text (line {line} has the byte {data[exc.start]:#04x}); "
                           "save it as UTF-8") from None
