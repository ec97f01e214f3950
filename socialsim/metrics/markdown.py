"""Markdown tables for the reports: one writer, so every table shows numbers the same way and a
cell holding a model's text (a norm, an action, an agent's name) cannot break its table: a ``|``
is escaped and a line break becomes a space."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

# What a model's text may hold that a terminal or an editor would act on rather than show: control
# characters (escape sequences, bell, NUL) and the marks that reverse the direction of text.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` without control characters and direction overrides (line breaks and tabs kept):
    a report shows what the model said, not what a hostile reply would make a terminal do."""
    return _UNPRINTABLE.sub("", text)


def one_line(text: Any) -> str:
    """``text`` on one line, its runs of whitespace (line breaks too) as single spaces."""
    return " ".join(str(text).split())


def cell(value: Any, digits: int | None = 3) -> str:
    """One cell: floats to ``digits`` decimals (as written when None), blank when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and digits is not None:
        return f"{value:.{digits}f}"
    return one_line(value).replace("|", "\\|")


def markdown_table(frame: pd.DataFrame, digits: int | None = 3, empty: str = "") -> str:
    """``frame`` as a Markdown table with its columns as the header; ``empty`` when it has no row."""
    if frame.empty and empty:
        return empty
    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v, digits) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
