"""The chart's kubeApi values: schema-checked and passed to `podium run` only when set."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from podium.cli import build_parser
from tests.unit.test_chart_static import chart_values, deep_merge, template_text, values_schema


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({}, None),
        ({"kubeApi": {"qps": 50, "burst": 100}}, None),
        ({"kubeApi": {"qps": 2.5}}, None),
        ({"kubeApi": {"qps": -1}}, "minimum"),
        ({"kubeApi": {"burst": 1.5}}, "is not of type 'integer'"),
        ({"kubeApi": {"qpss": 5}}, "Additional properties"),
    ],
    ids=["defaults", "set", "fraction", "negative", "fractional-burst", "typo"],
)
def test_kube_api_values_schema(override: dict[str, Any], expected: str | None) -> None:
    values = deep_merge(chart_values(), override)
    messages = [e.message for e in jsonschema.Draft7Validator(values_schema()).iter_errors(values)]
    if expected is None:
        assert messages == []
    else:
        assert any(expected in m for m in messages), messages


def test_kube_api_defaults_keep_the_client_unlimited() -> None:
    assert chart_values()["kubeApi"] == {"qps": 0, "burst": 0}
    args = build_parser().parse_args(["run"])
    assert (args.kube_api_qps, args.kube_api_burst) == (0.0, 0)


def test_deployment_passes_kube_api_flags_only_when_set() -> None:
    text = template_text("deployment.yaml")
    for flag, value in (("qps", "--kube-api-qps"), ("burst", "--kube-api-burst")):
        fragment = (
            f"{{{{- if .Values.kubeApi.{flag} }}}}\n"
            f"            - {value}\n"
            f"            - {{{{ .Values.kubeApi.{flag} | quote }}}}\n"
            "            {{- end }}"
        )
        assert fragment in text, fragment
        # The flag the template passes is one `podium run` accepts.
        assert build_parser().parse_args(["run", value, "5"])


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "x"])
def test_kube_api_qps_flag_refuses_bad_numbers(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["run", "--kube-api-qps", bad])
    assert exit_.value.code == 2
    assert "expected a number >= 0" in capsys.readouterr().err
