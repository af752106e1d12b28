"""Resource pools visible from one node (GatherPools of the allocator kube-scheduler uses).

A pool is the set of slices of one driver and pool name at its newest generation. It is
incomplete while fewer slices than ``resourceSliceCount`` exist and invalid when device
names repeat or counters do not resolve; the search skips both, and "All" requests fail
on them. Pools are ordered by driver and pool name, pools with binding conditions last;
slices by name; devices in slice order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from podium.kube.labels import IN, NAME_FIELD, NodeTerm, parse_node_term
from podium.state.devices import AllocationError, Slice

__all__ = ["NodeView", "Pool", "gather_pools", "node_matches"]

# Features of kube-scheduler v1.37 that change pool gathering (default gates).
PARTITIONABLE_DEVICES = True
COMPATIBILITY_GROUPS = False


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    pool: str
    is_incomplete: bool = False
    is_invalid: bool = False
    invalid_reason: str = ""
    slices_targeting_node: list[Slice] = field(default_factory=list)
    slices_not_targeting_node: list[Slice] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Decimal]] = field(default_factory=dict)

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.driver, self.pool)

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


_SELECTOR_CACHE: dict[int, tuple[Mapping[str, Any], tuple[NodeTerm, ...]]] = {}


def _parse_selector(selector: Mapping[str, Any]) -> tuple[NodeTerm, ...]:
    """nodeaffinity.NewNodeSelector: a term that does not parse is an error, empty terms drop."""
    cached = _SELECTOR_CACHE.get(id(selector))
    if cached is not None and cached[0] is selector:
        return cached[1]
    terms: list[NodeTerm] = []
    for raw in selector.get("nodeSelectorTerms") or []:
        term = parse_node_term(raw)
        if term is None:
            continue
        if term.error:
            raise AllocationError(f"failed to parse node selector: {term.error}")
        terms.append(term)
    parsed = tuple(terms)
    if len(_SELECTOR_CACHE) > 4096:
        _SELECTOR_CACHE.clear()
    _SELECTOR_CACHE[id(selector)] = (selector, parsed)
    return parsed


def _term_matches(term: NodeTerm, node: NodeView) -> bool:
    if term.labels is not None and not all(r.matches(node.labels) for r in term.labels):
        return False
    for key, op, value in term.fields or ():
        actual = node.name if key == NAME_FIELD else ""
        if (actual == value) != (op == IN):
            return False
    return True


def node_matches(
    node: NodeView, node_name: str | None, all_nodes: bool, selector: Mapping[str, Any] | None
) -> bool:
    """NodeMatches: a node name, all nodes, or a node selector (terms ORed)."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return any(_term_matches(t, node) for t in _parse_selector(selector))
    return False


def _add_slice(pools: dict[tuple[str, str], list[Slice]], s: Slice) -> None:
    key = (s.driver, s.pool)
    current = pools.get(key)
    if current is None or s.generation > current[0].generation:
        pools[key] = [s]
    elif s.generation == current[0].generation:
        current.append(s)


def _counter_sets(slices: Sequence[Slice]) -> dict[str, dict[str, Decimal]]:
    sets: dict[str, dict[str, Decimal]] = {}
    for s in slices:
        for name, counters in s.shared_counters:
            if name in sets:
                raise ValueError(f"duplicate counter set name {name}")
            sets[name] = counters
    return sets


def _validate_consumption(
    sets: Mapping[str, Mapping[str, Decimal]], slices: Sequence[Slice]
) -> None:
    for s in slices:
        for device in s.devices:
            for set_name, counters in device.consumes_counters:
                if set_name not in sets:
                    raise ValueError(f"counter set {set_name} not found")
                for counter in counters:
                    if counter not in sets[set_name]:
                        raise ValueError(f"counter {counter} not found in counter set {set_name}")


def _build_pool(
    pool_id: tuple[str, str], slices: list[Slice], all_slices_for_pool: Sequence[Slice]
) -> Pool:
    slices.sort(key=lambda s: s.name)
    device_slices: list[Slice] = []
    counter_slices: list[Slice] = []
    not_targeting: list[Slice] = []
    for s in slices:
        (counter_slices if PARTITIONABLE_DEVICES and s.shared_counters else device_slices).append(s)
    if len(slices) < len(all_slices_for_pool):
        names = {s.name for s in slices}
        for s in all_slices_for_pool:
            if s.name in names:
                continue
            (
                counter_slices if PARTITIONABLE_DEVICES and s.shared_counters else not_targeting
            ).append(s)
    seen: set[str] = set()
    for s in device_slices:
        for device in s.devices:
            if device.name in seen:
                return Pool(
                    *pool_id, is_invalid=True, invalid_reason=f"duplicate device name {device.name}"
                )
            seen.add(device.name)
    try:
        counter_sets = _counter_sets(counter_slices)
        _validate_consumption(counter_sets, device_slices)
        _validate_consumption(counter_sets, not_targeting)
    except ValueError as exc:
        return Pool(*pool_id, is_invalid=True, invalid_reason=str(exc))
    return Pool(
        *pool_id,
        slices_targeting_node=device_slices,
        slices_not_targeting_node=not_targeting,
        counter_sets=counter_sets,
    )


def _has_binding_conditions(pool: Pool) -> bool:
    return any(
        d.binding_conditions is not None for s in pool.slices_targeting_node for d in s.devices
    )


def gather_pools(
    slices_for_node: Sequence[Slice], node: NodeView, all_slices: Sequence[Slice]
) -> list[Pool]:
    """The pools with at least one slice (or per-device node selection) matching the node."""
    by_pool: dict[tuple[str, str], list[Slice]] = {}
    for s in slices_for_node:
        if not COMPATIBILITY_GROUPS and s.uses_compatibility_groups:
            continue
        if s.node_name or s.all_nodes or s.node_selector is not None:
            relevant = node_matches(node, s.node_name, s.all_nodes, s.node_selector)
        elif s.per_device_node_selection:
            relevant = any(
                node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices
            )
        else:
            continue
        if relevant:
            _add_slice(by_pool, s)

    result: list[Pool] = []
    with_binding: list[Pool] = []
    for pool_id, pool_slices in by_pool.items():
        first = pool_slices[0]
        if len(pool_slices) == first.resource_slice_count:
            pool = _build_pool(pool_id, pool_slices, ())
        else:
            obsolete = False
            all_for_pool: list[Slice] = []
            for s in all_slices:
                if (s.driver, s.pool) != pool_id:
                    continue
                if s.generation == first.generation:
                    all_for_pool.append(s)
                elif s.generation > first.generation:
                    obsolete = True
                    break
            if obsolete:
                continue
            if not COMPATIBILITY_GROUPS:
                all_for_pool = [s for s in all_for_pool if not s.uses_compatibility_groups]
            if len(all_for_pool) != first.resource_slice_count:
                result.append(Pool(*pool_id, is_incomplete=True))
                continue
            pool = _build_pool(pool_id, pool_slices, all_for_pool)
        (with_binding if _has_binding_conditions(pool) else result).append(pool)
    result.sort(key=lambda p: p.pool_id)
    with_binding.sort(key=lambda p: p.pool_id)
    return result + with_binding
