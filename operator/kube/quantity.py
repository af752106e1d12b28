"""Kubernetes resource quantities as exact integers.

The scheduler compares quantities the way the API machinery does: CPU in
millicores and everything else in whole units, both rounded up, so that a
request of ``0.5m`` still needs one millicore on the node.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

__all__ = ["QuantityError", "parse_quantity", "to_int", "to_milli"]

# Values are clamped below int64 so that sums in numpy columns never overflow.
MAX_VALUE = 2**62

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


class QuantityError(ValueError):
    """A quantity string that the API server would not have produced."""


def parse_quantity(value: object) -> Decimal:
    """Parse a quantity given as a string or a number; reject NaN, Infinity and garbage."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"invalid quantity {value!r}")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}")
    text = value.strip()
    match = _PATTERN.match(text)
    if match is None or len(text) > 64:
        raise QuantityError(f"invalid quantity {value!r}")
    try:
        number = Decimal(match["num"])
        if match["exp"]:
            number = number.scaleb(int(match["exp"][1:]))
    except (InvalidOperation, ValueError) as exc:
        raise QuantityError(f"invalid quantity {value!r}") from exc
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _ceil(number: Decimal) -> int:
    if number >= MAX_VALUE:
        return MAX_VALUE
    if number <= -MAX_VALUE:
        return -MAX_VALUE
    return int(number.to_integral_value(rounding=ROUND_CEILING))


def to_milli(value: object) -> int:
    """Millicores (or milli-units), rounded up like ``Quantity.MilliValue``."""
    return _ceil(parse_quantity(value) * 1000)


def to_int(value: object) -> int:
    """Whole units, rounded up like ``Quantity.Value``."""
    return _ceil(parse_quantity(value))
