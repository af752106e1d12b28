"""Kubernetes resource quantities as exact integers.

The scheduler compares quantities the way the API machinery does: CPU in
millicores and everything else in whole units, both rounded up, so that a
request of ``0.5m`` still needs one millicore on the node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from functools import lru_cache

__all__ = [
    "QuantityError",
    "parse_quantity",
    "parse_resource_list",
    "to_int",
    "to_milli",
    "whole",
]

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


def ceil_int(number: Decimal) -> int:
    if number >= MAX_VALUE:
        return MAX_VALUE
    if number <= -MAX_VALUE:
        return -MAX_VALUE
    return int(number.to_integral_value(rounding=ROUND_CEILING))


def to_milli(value: object) -> int:
    """Millicores (or milli-units), rounded up like ``Quantity.MilliValue``."""
    return ceil_int(parse_quantity(value) * 1000)


def to_int(value: object) -> int:
    """Whole units, rounded up like ``Quantity.Value``."""
    return ceil_int(parse_quantity(value))


def whole(resource: str, amount: Decimal) -> int:
    """``amount`` of ``resource`` as the scheduler compares it: MilliValue for cpu, else Value."""
    return ceil_int(amount * 1000) if resource == "cpu" else ceil_int(amount)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Decimal:
    return parse_quantity(text)


def parse_resource_list(
    value: object, where: str, problems: list[str]
) -> dict[str, Decimal] | None:
    """A ResourceList (None when absent, as a nil Go map); exact amounts.

    A malformed or negative quantity is recorded in ``problems`` under
    ``where.name`` and left out (negative counts as 0), never raised.
    Quantity strings repeat across pods, so their parse is cached.
    """
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Decimal] = {}
    for name, quantity in value.items():
        try:
            amount = (
                _parse_text(quantity) if isinstance(quantity, str) else parse_quantity(quantity)
            )
        except QuantityError as exc:
            problems.append(f"{where}{name}: {exc}")
            continue
        if amount < 0:
            problems.append(f"{where}{name}: negative quantity {quantity!r}")
            amount = Decimal(0)
        out[str(name)] = amount
    return out
