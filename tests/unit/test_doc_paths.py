"""Every repository path the docs name exists: a moved or renamed file must take its docs along.

A backticked path that starts with a folder of the repository, or with a layer of the
package (``scheduling/binder.py`` means ``operator/scheduling/binder.py``), is checked.
Go files are kube-scheduler's (the module cache), not the repository's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
REPO_FOLDERS = {"operator", "tests", "docs", "charts", "bench", "hack", "examples", ".ci"}
LAYERS = {p.name for p in (ROOT / "operator").iterdir() if p.is_dir() and p.name != "__pycache__"}
PATH = re.compile(r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.*-]+)+/?)`")


def _named_paths(doc: Path) -> list[str]:
    found = []
    for match in PATH.finditer(doc.read_text()):
        path = match.group(1).rstrip("/")
        head = path.split("/", 1)[0]
        if path.endswith(".go") or "*" in path:
            continue
        if head in REPO_FOLDERS or head in LAYERS:
            found.append(path)
    return found


def _exists(path: str) -> bool:
    return any(
        (base / path).exists() or (base / f"{path}.py").exists()
        for base in (ROOT, ROOT / "operator")
    )


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_paths_in_docs_exist(doc: Path) -> None:
    missing = [p for p in _named_paths(doc) if not _exists(p)]
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def test_the_check_sees_paths() -> None:
    assert "scheduling/first_listing.py" in _named_paths(ROOT / "docs" / "architecture.md")
