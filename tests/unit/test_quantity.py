from __future__ import annotations

import pytest

from podium.kube.quantity import MAX_VALUE, QuantityError, to_int, to_milli


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("1", 1000, 1),
        ("100m", 100, 1),
        ("0.5m", 1, 1),  # rounds up like Quantity.MilliValue
        ("1.5", 1500, 2),
        ("1Ki", 1024000, 1024),
        ("32Gi", 32 * 2**30 * 1000, 32 * 2**30),
        ("1e3", 1000000, 1000),
        ("2k", 2000000, 2000),
        ("1E", MAX_VALUE, 10**18),
        ("1e12", 10**15, 10**12),
        ("1e20", MAX_VALUE, MAX_VALUE),
        (3, 3000, 3),
    ],
)
def test_parses(text: object, milli: int, units: int) -> None:
    assert to_milli(text) == milli
    assert to_int(text) == units


@pytest.mark.parametrize(
    "text", ["", "abc", "NaN", "Infinity", "1.2.3", "1Gb", "--1", None, True, float("nan")]
)
def test_rejects(text: object) -> None:
    with pytest.raises(QuantityError):
        to_int(text)
