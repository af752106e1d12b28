"""Consumable capacity (DRAConsumableCapacity, on by default in v1.37).

A request may ask for an amount of a device's capacity; the device's request policy rounds
it up (``validRange`` steps, ``validValues``) or fills it from ``default``. A device that
allows multiple allocations is shared until the sum of what its shares consume exceeds the
capacity. DRAFractionalCapacityRange is off by default in v1.37 (its default-on stage needs
--min-compatibility-version 1.37), so range arithmetic works on whole units, rounded up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from podium.state.devices import Capacity, RequestPolicy, ValidRange

__all__ = [
    "CapacityError",
    "Consumed",
    "consumed_from_request",
    "format_quantity",
    "request_fits",
]

_MAX_INT64 = 2**63 - 1


class CapacityError(Exception):
    """A capacity request that cannot be computed (negative, out of int64 range)."""


class Consumed:
    """An amount and the text it came from (whose format its result string keeps)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Decimal, text: str) -> None:
        self.value = value
        self.text = text


def _value(d: Decimal) -> int:
    """resource.Quantity.Value(): rounded up, away from zero."""
    rounding = ROUND_CEILING if d >= 0 else ROUND_FLOOR
    return int(d.to_integral_value(rounding=rounding))


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _go_mod(a: int, b: int) -> int:
    return a - b * _go_div(a, b)


def _round_up_range(requested: Consumed, valid_range: ValidRange) -> Consumed:
    assert valid_range.min is not None
    if requested.value < valid_range.min:
        return Consumed(valid_range.min, valid_range.min_text)
    if valid_range.step is None:
        return requested
    if requested.value > _MAX_INT64:
        raise CapacityError(
            "capacity request cannot be represented in the device's range arithmetic: "
            f"request {requested.text} exceeds MaxInt64"
        )
    req, step, low = _value(requested.value), _value(valid_range.step), _value(valid_range.min)
    added = req - low
    n = _go_div(added, step)
    if _go_mod(added, step) != 0:
        n += 1
    if low >= 0 and n > _go_div(_MAX_INT64 - low, step):
        raise CapacityError(
            "capacity request cannot be represented in the device's range arithmetic: "
            f"rounding request {requested.text} up to the next step passes MaxInt64"
        )
    total = low + step * n
    return Consumed(Decimal(total), format_quantity(Decimal(total), valid_range.step_text))


def _calculate(requested: Consumed | None, cap: Capacity) -> Consumed:
    if requested is None:
        policy = cap.policy
        if policy is not None and policy.default is not None:
            return Consumed(policy.default, policy.default_text)
        return Consumed(cap.value, cap.text)
    if cap.policy is None:
        return requested
    if cap.policy.valid_range is not None and cap.policy.valid_range.min is not None:
        return _round_up_range(requested, cap.policy.valid_range)
    if cap.policy.valid_values is not None:
        for valid, text in zip(cap.policy.valid_values, cap.policy.valid_texts, strict=True):
            if requested.value <= valid:
                return Consumed(valid, text)
    return requested


def _violates(consumed: Consumed, policy: RequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and consumed.value == policy.default:
        return False
    if policy.valid_range is not None:
        r = policy.valid_range
        if r.max is not None and consumed.value > r.max:
            return True
        if r.step is not None:
            low = _value(r.min) if r.min is not None else 0
            return _go_mod(_value(consumed.value) - low, _value(r.step)) != 0
        return False
    if policy.valid_values:
        return all(consumed.value != v for v in policy.valid_values)
    return False


def request_fits(
    current: Mapping[str, Decimal],
    requests: Mapping[str, Consumed] | None,
    capacity: Mapping[str, Capacity],
    allocating: Mapping[str, Decimal],
) -> bool:
    """CmpRequestOverCapacity: the request, rounded by policy, fits next to what is consumed."""
    if requests and any(name not in capacity for name in requests):
        return False
    consumed: dict[str, Consumed] = {}
    for name, cap in capacity.items():
        value = _calculate(requests.get(name) if requests else None, cap)
        if value.value < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        consumed[name] = value
    for name, cap in capacity.items():
        value = consumed[name]
        if _violates(value, cap.policy):
            return False
        total = current.get(name, Decimal(0)) + value.value + allocating.get(name, Decimal(0))
        if total > cap.value:
            return False
    return True


def consumed_from_request(
    requests: Mapping[str, Consumed] | None, capacity: Mapping[str, Capacity]
) -> dict[str, Consumed]:
    """GetConsumedCapacityFromRequest: what one share consumes of every capacity."""
    return {
        name: _calculate(requests.get(name) if requests else None, cap)
        for name, cap in capacity.items()
    }


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (
    ("E", 18),
    ("P", 15),
    ("T", 12),
    ("G", 9),
    ("M", 6),
    ("k", 3),
    ("", 0),
    ("m", -3),
    ("u", -6),
    ("n", -9),
)
_BINARY_SUFFIX = re.compile(r"[KMGTPE]i$")
_EXPONENT = re.compile(r"[eE][+-]?\d+$")


def format_quantity(value: Decimal, like: str) -> str:
    """resource.Quantity.String() for a value whose format is that of ``like`` (its source text)."""
    if (
        _BINARY_SUFFIX.search(like.strip())
        and value == value.to_integral_value()
        and abs(value) >= 1024
    ):
        whole = int(value)
        for suffix, factor in _BINARY:
            if whole % factor == 0:
                return f"{whole // factor}{suffix}"
    exponent_form = bool(_EXPONENT.search(like.strip()))
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    # Round up to nanos, as Quantity does for values it cannot hold exactly.
    nanos = int((magnitude * 10**9).to_integral_value(rounding=ROUND_CEILING))
    exp = -9
    while nanos % 1000 == 0 and exp < 18:
        nanos //= 1000
        exp += 3
    if exponent_form:
        return f"{sign}{nanos}" + (f"e{exp}" if exp else "")
    suffix = next(s for s, e in _DECIMAL if e == exp)
    return f"{sign}{nanos}{suffix}"
