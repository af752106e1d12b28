"""Quantity strings of consumed capacity, as resource.Quantity.String() writes them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from podium.algorithms.dynamic_resources.capacity import format_quantity


@pytest.mark.parametrize(
    ("value", "like", "expected"),
    [
        (Decimal(2**31), "2Gi", "2Gi"),
        (Decimal(1536), "1.5Ki", "1536"),
        (Decimal(1610612736), "1.5Gi", "1536Mi"),
        (Decimal(512), "1Ki", "512"),
        (Decimal("0.5"), "500m", "500m"),
        (Decimal(1500), "1.5k", "1500"),
        (Decimal(2000), "2", "2k"),
        (Decimal(2000), "2e3", "2e3"),
        (Decimal(1), "100m", "1"),
        (Decimal(0), "0", "0"),
        (Decimal("1e-10"), "1n", "1n"),
        (Decimal(10**21), "1000000000000000000000", "1000E"),
        (Decimal(-3), "-3", "-3"),
    ],
)
def test_format_quantity(value: Decimal, like: str, expected: str) -> None:
    assert format_quantity(value, like) == expected
