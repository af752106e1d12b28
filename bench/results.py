"""Every run's numbers, and the JSON they are written as.

Everything is plain data so that results.json can be read by anything (jq, a
notebook, a later comparison) without this package; its `summary` holds the
medians and ranges the tables show.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import stats
from .run_result import RunResult

__all__ = ["BenchResults"]


@dataclass(slots=True)
class BenchResults:
    meta: dict[str, Any] = field(default_factory=dict)
    runs: list[RunResult] = field(default_factory=list)

    def groups(self) -> Iterator[tuple[str, list[RunResult]]]:
        """Runs of the same case and workload (every scheduler and repeat), in run order."""
        seen: dict[str, list[RunResult]] = {}
        for run in self.runs:
            seen.setdefault(run.key, []).append(run)
        yield from seen.items()

    def to_json(self) -> dict[str, Any]:
        runs = []
        for run in self.runs:
            body = dataclasses.asdict(run)
            body["ok"] = run.status == "ok" and run.correctness.ok
            body["correctness"]["summary"] = run.correctness.summary()
            runs.append(body)
        summary = [stats.summarise(group).to_json() for _, group in self.groups()]
        return {"meta": self.meta, "runs": runs, "summary": summary}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2))
        tmp.replace(path)
