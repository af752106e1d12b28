"""Parsed ResourceSlices, devices and the allocated state the allocator works on.

Slices arrive as resource.k8s.io/v1 JSON; the store parses each once (``SliceIndex``) so
that neither a pod's allocator nor the per-node search touches JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from podium.kube.quantity import QuantityError, parse_quantity

__all__ = [
    "AllocatedState",
    "AllocationError",
    "Capacity",
    "Device",
    "DeviceID",
    "Holds",
    "SharedDeviceID",
    "Slice",
    "SliceIndex",
    "allocated_state",
    "allocation_holds",
    "apply_taint_rules",
    "parse_or_error",
    "parse_slice",
    "parse_slices",
    "quantity",
]


class AllocationError(Exception):
    """Fatal input problem (CEL compile/runtime error, invalid data).

    It aborts the scheduling attempt, as Go's error return does.
    """


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class SharedDeviceID(NamedTuple):
    """One share of a device that allows multiple allocations (``shareID`` of a result)."""

    driver: str
    pool: str
    device: str
    share_id: str

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass
class AllocatedState:
    """schedulerapi.AllocatedState: what allocated and in-flight claims already hold."""

    devices: set[DeviceID] = field(default_factory=set)
    shared_device_ids: set[SharedDeviceID] = field(default_factory=set)
    aggregated_capacity: dict[DeviceID, dict[str, Decimal]] = field(default_factory=dict)

    def shared_devices(self) -> set[DeviceID]:
        return {s.device_id for s in self.shared_device_ids}


def quantity(raw: object, what: str) -> Decimal:
    try:
        return parse_quantity(raw)
    except QuantityError as exc:
        raise AllocationError(f"{what}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Holds:
    """What one AllocationResult adds to the AllocatedState, in result order.

    ``error``: the text of its first unparsable consumed capacity; ``allocated_state``
    raises it when it gets there.
    """

    devices: tuple[DeviceID, ...] = ()
    shares: tuple[SharedDeviceID, ...] = ()
    consumed: tuple[tuple[DeviceID, tuple[tuple[str, Decimal], ...]], ...] = ()
    error: str = ""


def allocation_holds(allocation: Mapping[str, Any] | None) -> Holds:
    """As the scheduler's foreachAllocatedDevice with consumable capacity on: admin-access
    results hold nothing, a result with a ``shareID`` is one share (its consumed capacity
    adds up per device), every other result holds its device exclusively."""
    devices: list[DeviceID] = []
    shares: list[SharedDeviceID] = []
    consumed_all: list[tuple[DeviceID, tuple[tuple[str, Decimal], ...]]] = []
    for result in ((allocation or {}).get("devices") or {}).get("results") or []:
        if result.get("adminAccess"):
            continue
        device_id = DeviceID(
            str(result.get("driver", "")),
            str(result.get("pool", "")),
            str(result.get("device", "")),
        )
        share_id = result.get("shareID")
        if share_id is None:
            devices.append(device_id)
            continue
        shares.append(SharedDeviceID(*device_id, str(share_id)))
        consumed = result.get("consumedCapacity")
        if consumed is None:
            continue
        amounts: list[tuple[str, Decimal]] = []
        for name, value in consumed.items():
            try:
                amounts.append((name, quantity(value, f"consumedCapacity {name} of {device_id}")))
            except AllocationError as exc:
                return Holds(error=str(exc))
        consumed_all.append((device_id, tuple(amounts)))
    return Holds(tuple(devices), tuple(shares), tuple(consumed_all))


def allocated_state(
    allocations: Iterable[Mapping[str, Any]],
    holds: Callable[[Mapping[str, Any]], Holds] = allocation_holds,
) -> AllocatedState:
    """From AllocationResult JSON dicts (status.allocation of allocated claims, plus in-flight).

    ``holds`` may answer from a cache: what each allocation holds only changes with it.
    AllocationError for the first consumed capacity (in order) that does not parse.
    """
    state = AllocatedState()
    for allocation in allocations:
        held = holds(allocation)
        if held.error:
            raise AllocationError(held.error)
        state.devices.update(held.devices)
        state.shared_device_ids.update(held.shares)
        for device_id, consumed in held.consumed:
            total = state.aggregated_capacity.setdefault(device_id, {})
            for name, amount in consumed:
                total[name] = total.get(name, Decimal(0)) + amount
    return state


@dataclass(frozen=True, slots=True)
class ValidRange:
    min: Decimal | None
    max: Decimal | None
    step: Decimal | None
    step_text: str
    min_text: str = ""


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    default: Decimal | None
    default_text: str
    valid_values: tuple[Decimal, ...] | None
    valid_range: ValidRange | None
    valid_texts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Capacity:
    value: Decimal
    text: str
    policy: RequestPolicy | None


@dataclass(slots=True, eq=False)
class Device:
    """One device of a slice, with what the search needs pre-parsed."""

    name: str
    raw: Mapping[str, Any]
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: dict[str, Capacity]
    consumes_counters: tuple[tuple[str, dict[str, Decimal]], ...]
    uses_compatibility_groups: bool
    taints: tuple[Mapping[str, Any], ...]
    binding_conditions: tuple[str, ...] | None
    binding_failure_conditions: tuple[str, ...] | None
    binds_to_node: bool
    node_name: str | None
    all_nodes: bool
    node_selector: Mapping[str, Any] | None
    allow_multiple_allocations: bool | None


@dataclass(slots=True, eq=False)
class Slice:
    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str | None
    all_nodes: bool
    node_selector: Mapping[str, Any] | None
    per_device_node_selection: bool | None
    shared_counters: tuple[tuple[str, dict[str, Decimal]], ...]
    devices: list[Device]

    @property
    def uses_compatibility_groups(self) -> bool:
        return any(d.uses_compatibility_groups for d in self.devices)


def _counters(raw: Any, what: str) -> dict[str, Decimal]:
    return {
        str(name): quantity((c or {}).get("value", "0"), f"{what} counter {name}")
        for name, c in (raw or {}).items()
    }


def _policy(raw: Mapping[str, Any] | None, what: str) -> RequestPolicy | None:
    if raw is None:
        return None
    default_raw = raw.get("default")
    valid_values = raw.get("validValues")
    valid_range = raw.get("validRange")
    range_ = None
    if valid_range is not None:
        step = valid_range.get("step")
        range_ = ValidRange(
            min=None if valid_range.get("min") is None else quantity(valid_range["min"], what),
            max=None if valid_range.get("max") is None else quantity(valid_range["max"], what),
            step=None if step is None else quantity(step, what),
            step_text="" if step is None else str(step),
            min_text=str(valid_range.get("min") or ""),
        )
    return RequestPolicy(
        default=None if default_raw is None else quantity(default_raw, what),
        default_text="" if default_raw is None else str(default_raw),
        valid_values=None
        if valid_values is None
        else tuple(quantity(v, what) for v in valid_values),
        valid_range=range_,
        valid_texts=tuple(str(v) for v in valid_values or ()),
    )


def _device(raw: Mapping[str, Any], slice_name: str) -> Device:
    name = str(raw.get("name", ""))
    what = f"slice {slice_name} device {name}"
    capacity: dict[str, Capacity] = {}
    for cap_name, cap in (raw.get("capacity") or {}).items():
        cap = cap or {}
        text = str(cap.get("value", "0"))
        capacity[str(cap_name)] = Capacity(
            value=quantity(text, f"{what} capacity {cap_name}"),
            text=text,
            policy=_policy(cap.get("requestPolicy"), f"{what} capacity {cap_name}"),
        )
    consumes = tuple(
        (str(c.get("counterSet", "")), _counters(c.get("counters"), what))
        for c in raw.get("consumesCounters") or []
    )
    binding = raw.get("bindingConditions")
    failure = raw.get("bindingFailureConditions")
    allow_multiple = raw.get("allowMultipleAllocations")
    return Device(
        name=name,
        raw=raw,
        attributes=raw.get("attributes") or {},
        capacity=capacity,
        consumes_counters=consumes,
        uses_compatibility_groups=any(
            c.get("compatibilityGroups") for c in raw.get("consumesCounters") or []
        ),
        taints=tuple(raw.get("taints") or ()),
        binding_conditions=None if binding is None else tuple(binding),
        binding_failure_conditions=None if failure is None else tuple(failure),
        binds_to_node=bool(raw.get("bindsToNode") or False),
        node_name=raw.get("nodeName"),
        all_nodes=bool(raw.get("allNodes") or False),
        node_selector=raw.get("nodeSelector"),
        allow_multiple_allocations=None if allow_multiple is None else bool(allow_multiple),
    )


def parse_slice(raw: Mapping[str, Any]) -> Slice:
    """One ResourceSlice JSON; AllocationError for unparsable quantities."""
    name = str((raw.get("metadata") or {}).get("name", ""))
    spec = raw.get("spec") or {}
    pool = spec.get("pool") or {}
    per_device = spec.get("perDeviceNodeSelection")
    return Slice(
        name=name,
        driver=str(spec.get("driver", "")),
        pool=str(pool.get("name", "")),
        generation=int(pool.get("generation") or 0),
        resource_slice_count=int(pool.get("resourceSliceCount") or 0),
        node_name=spec.get("nodeName"),
        all_nodes=bool(spec.get("allNodes") or False),
        node_selector=spec.get("nodeSelector"),
        per_device_node_selection=None if per_device is None else bool(per_device),
        shared_counters=tuple(
            (str(cs.get("name", "")), _counters(cs.get("counters"), f"slice {name}"))
            for cs in spec.get("sharedCounters") or []
        ),
        devices=[_device(d, name) for d in spec.get("devices") or []],
    )


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """Parsed slices in name order, by node name and without one (shared).

    ``error``: the text of the first slice (in order) that did not parse; the allocator
    raises it when built, as parsing there would.
    """

    all: tuple[Slice, ...] = ()
    on_node: Mapping[str, tuple[Slice, ...]] = field(default_factory=dict)
    shared: tuple[Slice, ...] = ()
    error: str = ""
    reads_labels: bool = False
    """Some slice or device has a node selector: only then do node labels matter."""

    @classmethod
    def build(cls, parsed: Iterable[Slice | AllocationError]) -> SliceIndex:
        on_node: dict[str, list[Slice]] = {}
        shared: list[Slice] = []
        ordered: list[Slice] = []
        for s in parsed:
            if isinstance(s, AllocationError):
                return cls(error=str(s))
            ordered.append(s)
            if s.node_name:
                on_node.setdefault(s.node_name, []).append(s)
            else:
                shared.append(s)
        reads_labels = any(
            s.node_selector is not None or any(d.node_selector is not None for d in s.devices)
            for s in ordered
        )
        return cls(
            tuple(ordered),
            {k: tuple(v) for k, v in on_node.items()},
            tuple(shared),
            reads_labels=reads_labels,
        )


def parse_or_error(raw: Mapping[str, Any]) -> Slice | AllocationError:
    """``parse_slice``, with its error as the value, so a store can keep either."""
    try:
        return parse_slice(raw)
    except AllocationError as exc:
        return exc


def parse_slices(
    slices: Iterable[Mapping[str, Any]], taint_rules: Sequence[Mapping[str, Any]] = ()
) -> SliceIndex:
    """A SliceIndex straight from ResourceSlice JSON (DeviceTaintRule JSON applied first)."""
    return SliceIndex.build(
        parse_or_error(apply_taint_rules(s, taint_rules) if taint_rules else s) for s in slices
    )


def apply_taint_rules(
    raw: Mapping[str, Any], taint_rules: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any]:
    """Add the taints of matching DeviceTaintRules to a slice's devices (tracker applyPatches).

    A rule without ``spec.deviceSelector`` matches nothing; ``driver``, ``pool`` and
    ``device`` that are set must all equal the device's. The slice is copied only when a
    rule applies.
    """
    spec = raw.get("spec") or {}
    patched: list[dict[str, Any]] | None = None
    for rule in taint_rules:
        rule_spec = rule.get("spec") or {}
        selector = rule_spec.get("deviceSelector")
        if selector is None:
            continue
        if selector.get("driver") is not None and selector["driver"] != spec.get("driver"):
            continue
        if selector.get("pool") is not None and selector["pool"] != (spec.get("pool") or {}).get(
            "name"
        ):
            continue
        for index, device in enumerate(spec.get("devices") or []):
            if selector.get("device") is not None and selector["device"] != device.get("name"):
                continue
            if patched is None:
                patched = [dict(d) for d in spec.get("devices") or []]
            patched[index]["taints"] = [
                *(patched[index].get("taints") or []),
                rule_spec.get("taint"),
            ]
    if patched is None:
        return raw
    return {**raw, "spec": {**spec, "devices": patched}}
