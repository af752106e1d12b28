"""The chart's tracing values: schema-checked, and rendered by the real helm into the
`podium run` flags that `podium run` itself accepts at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from podium import cli, tracing
from podium.devcluster import Binaries
from tests.prometheus.chart import one, render
from tests.unit.test_chart_static import chart_values, deep_merge, values_schema


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({}, None),
        ({"tracing": {"endpoint": "http://otel-collector.monitoring:4318"}}, None),
        ({"tracing": {"endpoint": "https://c:4318/v1/traces", "sampling": 0.1}}, None),
        ({"tracing": {"endpoint": "otel-collector:4318"}}, "does not match"),
        ({"tracing": {"endpoint": "http://c:4318/?a=b"}}, "does not match"),
        ({"tracing": {"sampling": 1.5}}, "maximum"),
        ({"tracing": {"sampling": -0.1}}, "minimum"),
        ({"tracing": {"ratio": 0.5}}, "Additional properties"),
    ],
    ids=["defaults", "endpoint", "https-path", "no-scheme", "query", "above-1", "negative", "typo"],
)
def test_tracing_values_schema(override: dict[str, Any], expected: str | None) -> None:
    values = deep_merge(chart_values(), override)
    messages = [e.message for e in jsonschema.Draft7Validator(values_schema()).iter_errors(values)]
    if expected is None:
        assert messages == []
    else:
        assert any(expected in m for m in messages), messages


def _run_args(binaries: Binaries, home: Path, *sets: str) -> list[str]:
    deployment = one(render(binaries.helm, home, "podium-system", *sets), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"]]


def test_tracing_is_off_by_default(binaries: Binaries, tmp_path: Path) -> None:
    assert chart_values()["tracing"] == {"endpoint": "", "sampling": 1}
    assert not [a for a in _run_args(binaries, tmp_path) if a.startswith("--tracing")]


def test_an_endpoint_passes_both_flags(binaries: Binaries, tmp_path: Path) -> None:
    url = "http://otel-collector.monitoring:4318"
    # --set makes a fraction a string, which the schema refuses; 0 stays a number.
    args = _run_args(binaries, tmp_path, f"tracing.endpoint={url}", "tracing.sampling=0")
    at = args.index("--tracing-endpoint")
    assert args[at : at + 4] == ["--tracing-endpoint", url, "--tracing-sampling", "0"]
    parsed = cli.build_parser().parse_args(args)
    assert tracing.parse_endpoint(parsed.tracing_endpoint) == f"{url}/v1/traces"
    assert tracing.parse_sampling(parsed.tracing_sampling) == 0.0
