"""Plain-text tables for the tools' console output: left-aligned columns, no trailing spaces."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["table"]


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The header line and one line per row, each column as wide as its widest cell."""
    body = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *body]
    ]
