"""The gate's rule, on plain ConfigMap bodies (the e2e test in Podium's suite runs the
plugin on a real API server)."""

from __future__ import annotations

from typing import Any

import pytest
from podium_configmap_gate import ConfigMapGate, gate_open


@pytest.mark.parametrize(
    ("configmap", "open_"),
    [
        (None, False),
        ({}, False),
        ({"data": {}}, False),
        ({"data": {"go": "false"}}, False),
        ({"data": {"go": "true"}}, True),
        ({"data": {"go": "True"}}, True),
        ({"data": {"go": "yes"}}, False),
    ],
)
def test_gate_open(configmap: dict[str, Any] | None, open_: bool) -> None:
    assert gate_open(configmap) is open_


def test_arguments_and_defaults() -> None:
    assert (ConfigMapGate().timeout, ConfigMapGate().interval) == (300.0, 0.5)
    plugin = ConfigMapGate({"timeoutSeconds": 20, "intervalSeconds": 2})
    assert (plugin.timeout, plugin.interval) == (20.0, 2.0)
