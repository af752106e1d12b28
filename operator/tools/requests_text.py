"""A pod's requests as people read them: quantities to paste into a manifest, with their source."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["describe_requests", "quantity_text"]

_HUGEPAGES = "hugepages-"


def quantity_text(resource: str, amount: int) -> str:
    """A Kubernetes quantity no larger than ``amount``, ready to paste into a manifest."""
    if resource == "cpu":
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith(_HUGEPAGES):
        for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size and (amount % size == 0 or unit != "Gi"):
                return f"{amount // size}{unit}"
    return str(amount)


def describe_requests(requests: Mapping[str, int], sources: Mapping[str, str], qos: str) -> str:
    """The effective requests, each with its source where containers alone did not set it."""
    if not requests:
        return f"nothing ({qos})"
    parts = []
    for resource, amount in sorted(requests.items()):
        source = sources.get(resource, "containers")
        where = "" if source == "containers" else f" ({source})"
        parts.append(f"{resource} {quantity_text(resource, amount)}{where}")
    return ", ".join(parts)
