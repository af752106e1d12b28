"""`podium policy test`: fixtures pass, wrong expectations and broken fixtures fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.cli import main
from podium.tools.policytest import run_directory

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples" / "policy-tests"

WRONG = """
name: expects the wrong node
nodes: [{name: a, cpu: "1"}, {name: b, cpu: "8"}]
place:
  - pod: {name: p, cpu: "2"}
    expect: {node: a}
"""
BROKEN = """
name: a pod shorthand with a typo
nodes: [{name: a}]
place:
  - pod: {name: p, cpuu: "2"}
    expect: {node: a}
"""
POLICY = """
apiVersion: podium.dev/v1alpha1
kind: SchedulerPolicy
metadata: {name: pack}
spec:
  scores: [{name: NodeResourcesFit, weight: 1}]
  pluginArgs: {nodeResourcesFit: {strategy: MostAllocated}}
"""
PACKING = """
name: MostAllocated packs onto the busy node
policy: pack.yaml
nodes: [{name: busy}, {name: idle}]
pods: [{name: x, cpu: "3", node: busy}]
place:
  - pod: {name: p, cpu: "100m"}
    expect: {node: busy}
"""


def test_documented_examples_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "test", str(EXAMPLES)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 passed, 0 failed"


@pytest.mark.parametrize(
    ("files", "ok", "failure"),
    [
        ({"t.yaml": WRONG}, False, "place[0] p: expected node 'a', got b"),
        (
            {"t.yaml": BROKEN},
            False,
            "invalid fixture: pod shorthand needs a name; unknown keys: ['cpuu']",
        ),
        ({"t.yaml": PACKING, "pack.yaml": POLICY}, True, None),
        ({"t.yaml": "name: [unclosed"}, False, "invalid YAML"),
    ],
    ids=["wrong-expectation", "broken-fixture", "policy-per-file", "bad-yaml"],
)
def test_fixtures(tmp_path: Path, files: dict[str, str], ok: bool, failure: str | None) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    results = [r for r in run_directory(str(tmp_path)) if r.source.endswith("t.yaml")]
    assert len(results) == 1
    assert results[0].ok is ok
    if failure is not None:
        assert any(f.startswith(failure) for f in results[0].failures), results[0].failures


def test_empty_directory_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "test", str(tmp_path)]) == 1
    assert "no *.yaml fixture files" in capsys.readouterr().err
