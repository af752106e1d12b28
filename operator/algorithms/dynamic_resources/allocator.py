"""The structured-parameters device allocator of kube-scheduler v1.37.2.

A port of ``k8s.io/dynamic-resource-allocation/structured/internal/incubating``: with the
default feature gates of v1.37 (AdminAccess, PrioritizedList, PartitionableDevices,
DeviceTaints, DeviceBindingConditions + ResourceClaimDeviceStatus, ConsumableCapacity on;
FractionalCapacityRange, ListTypeAttributes, DerivedAttributes, DeviceCompatibilityGroups,
OptionalNodeOperations off) ``structured.NewAllocator`` picks that variant, because the
"stable" one does not support ConsumableCapacity or DeviceBindingAndStatus.

The search is Go's: claims in order, requests in order, for each required device the
candidates in pool order (driver, pool name; pools with binding conditions last), slice
name order, device order within the slice; depth first with backtracking; the first
complete solution wins. ``firstAvailable`` sub-requests are tried in order.

DeviceTaintRules: pass them as ``taint_rules`` (DeviceTaintRule JSON); their taints are
appended to the matching devices before allocation, as the scheduler's slice tracker does.

Outcomes: a list of AllocationResult dicts; None when the claims do not fit on the node
(``last_reason`` is "invalid resource pools were encountered" when Go reports that as the
node's unschedulable reason, else ""); AllocationError for what Go returns as a plain
error (CEL errors, unknown class, "All" over an incomplete or invalid pool, more than 32
devices per claim, a constraint that an "All" request cannot meet). The caller is expected
to check classes first, as the plugin does (a missing class is unschedulable there).
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from podium.algorithms.dynamic_resources.capacity import (
    CapacityError,
    Consumed,
    consumed_from_request,
    format_quantity,
    request_fits,
)
from podium.algorithms.dynamic_resources.cel import CelError, device_matches
from podium.algorithms.dynamic_resources.pools import NodeView, Pool, gather_pools, node_matches
from podium.state.devices import (
    AllocatedState,
    AllocationError,
    Device,
    DeviceID,
    SharedDeviceID,
    Slice,
    SliceIndex,
    allocated_state,
    parse_slices,
    quantity,
)

__all__ = [
    "AllocatedState",
    "AllocationError",
    "AllocationTimeout",
    "Allocator",
    "DeviceID",
    "SharedDeviceID",
    "allocated_state",
]

# resourceapi.AllocationResultsMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32
EXACT_COUNT, ALL = "ExactCount", "All"
INVALID_POOLS = "invalid resource pools were encountered"

# Features of the default v1.37 gates that the incubating allocator checks at runtime.
ADMIN_ACCESS = True
DEVICE_TAINTS = True
DEVICE_BINDING_AND_STATUS = True
PARTITIONABLE_DEVICES = True
CONSUMABLE_CAPACITY = True


class AllocationTimeout(Exception):
    """The search ran past its deadline (Go's "filter operation aborted" once the Filter's
    context, limited by DRASchedulerFilterTimeout, is done)."""


class _Stop(Exception):
    """errAllocationResultMaxSizeExceeded: no solution fits the 32-result limit from here."""


@dataclass(frozen=True, slots=True)
class _Request:
    """requestAccessor: a request's ``exactly`` part or one ``firstAvailable`` sub-request."""

    name: str
    class_name: str
    mode: str
    count: int
    admin_access: bool | None
    selectors: tuple[Mapping[str, Any], ...]
    tolerations: tuple[Mapping[str, Any], ...]
    capacity: dict[str, Consumed] | None
    derived_attributes: bool


def _request(raw: Mapping[str, Any], sub: bool, what: str) -> _Request:
    capacity_raw = (raw.get("capacity") or {}).get("requests")
    capacity = None
    if raw.get("capacity") is not None:
        capacity = {
            str(k): Consumed(quantity(v, f"{what} capacity {k}"), str(v))
            for k, v in (capacity_raw or {}).items()
        }
    mode = str(raw.get("allocationMode") or EXACT_COUNT)
    count = raw.get("count")
    return _Request(
        name=str(raw.get("name", "")),
        class_name=str(raw.get("deviceClassName") or ""),
        mode=mode,
        count=int(count) if count is not None else (1 if mode == EXACT_COUNT else 0),
        admin_access=None if sub or raw.get("adminAccess") is None else bool(raw["adminAccess"]),
        selectors=tuple(raw.get("selectors") or ()),
        tolerations=tuple(raw.get("tolerations") or ()),
        capacity=capacity,
        derived_attributes=bool(raw.get("derivedAttributes")),
    )


@dataclass(frozen=True, slots=True)
class _Candidate:
    """deviceWithID."""

    id: DeviceID
    device: Device
    slice: Slice
    pool: Pool


@dataclass(slots=True)
class _RequestData:
    request: _Request
    parent: str | None
    class_: Mapping[str, Any] | None = None
    num_devices: int = 0
    selected_sub: int = 0
    all_devices: list[_Candidate] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return (
            f"{self.parent}/{self.request.name}" if self.parent is not None else self.request.name
        )


@dataclass(slots=True)
class _Result:
    """internalDeviceResult."""

    request: str
    parent: str | None
    id: DeviceID
    device: Device
    slice: Slice
    share_id: str | None
    consumed: dict[str, Consumed] | None
    admin_access: bool | None

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.request}" if self.parent is not None else self.request


def _attribute(device: Device, device_id: DeviceID, name: str) -> tuple[str, Any] | None:
    """lookupAttribute as a (type, value) pair; ('', None) for an unknown value type."""
    attr = device.attributes.get(name)
    if attr is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != device_id.driver:
            return None
        attr = device.attributes.get(ident)
        if attr is None:
            return None
    for kind in ("string", "int", "bool", "version"):
        if kind in attr and attr[kind] is not None:
            return (kind, attr[kind])
    return ("", None)


class _Constraint:
    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def applies(self, request: str, sub: str | None) -> bool:
        if not self.requests:
            return True
        if sub is None:
            return request in self.requests
        return request in self.requests or f"{request}/{sub}" in self.requests

    def add(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> bool:
        raise NotImplementedError

    def remove(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> None:
        raise NotImplementedError


class _MatchAttribute(_Constraint):
    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.count = 0

    def add(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> bool:
        if not self.applies(request, sub):
            return True
        value = _attribute(device, device_id, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        if value[0] == "" or self.value != value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> None:
        if self.applies(request, sub):
            self.count -= 1


class _DistinctAttribute(_Constraint):
    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[tuple[str, Any]] = []

    def add(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> bool:
        if not self.applies(request, sub):
            return True
        value = _attribute(device, device_id, self.attribute)
        if value is None:
            return False
        for seen in self.values:
            if value[0] == "" or seen == value:
                return False
        self.values.append(value)
        return True

    def remove(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> None:
        if self.applies(request, sub):
            self.values.pop()


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """resourceclaim.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def _taint_prevents(device: Device, request: _Request) -> bool:
    for taint in device.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            tolerates(t, taint) for t in request.tolerations
        ):
            return True
    return False


def _add_requirements(source: Iterable[Mapping[str, Any]], target: list[Mapping[str, Any]]) -> None:
    for req in source:
        values = set(req.get("values") or ())
        if not any(
            have.get("key") == req.get("key")
            and have.get("operator") == req.get("operator")
            and set(have.get("values") or ()) == values
            for have in target
        ):
            target.append(req)


class Allocator:
    """Allocates the claims of one pod on one node at a time; reusable across nodes."""

    def __init__(
        self,
        allocated: AllocatedState,
        classes: Mapping[str, Mapping[str, Any]],
        slices: SliceIndex | Sequence[Mapping[str, Any]],
        taint_rules: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """``slices``: parsed (the store's), or ResourceSlice JSON to parse here with
        ``taint_rules`` applied. AllocationError for a slice that does not parse."""
        index = slices if isinstance(slices, SliceIndex) else parse_slices(slices, taint_rules)
        if index.error:
            raise AllocationError(index.error)
        self._allocated = allocated
        self._shared_allocated = allocated.shared_devices()
        self._classes = classes
        self._all_slices = index.all
        self._on_node = index.on_node
        self._shared = index.shared
        # Available counters per pool, computed on first use (never changes for this state).
        self._available_counters: dict[
            tuple[tuple[str, str], tuple[int, ...], tuple[int, ...]], dict[str, dict[str, Decimal]]
        ] = {}
        self.last_reason = ""
        """Why the last ``allocate`` returned None when Go reports it (invalid pools)."""
        self.allocate_one_calls = 0
        """Search steps over all ``allocate`` calls (Go's NumAllocateOneInvocations)."""

    def allocate(
        self,
        node: Mapping[str, Any],
        claims: Sequence[Mapping[str, Any]],
        deadline: float | None = None,
    ) -> list[dict[str, Any]] | None:
        """One AllocationResult JSON dict per claim, in claim order, or None.

        Each dict has devices.results[], devices.config[] and nodeSelector as Go fills them,
        without allocationTimestamp. None when the claims cannot all be allocated on this
        node (including incomplete pools; ``last_reason`` then says whether invalid pools
        were seen). Raises AllocationError for fatal problems. ``node`` is Node JSON
        (metadata.name, metadata.labels). ``deadline`` (``time.monotonic``): past it,
        the search stops with AllocationTimeout, as Go's allocateOne does once its
        context is done.
        """
        meta = node.get("metadata") or {}
        view = NodeView(str(meta.get("name", "")), meta.get("labels") or {})
        self.last_reason = ""
        run = _Run(self, view, claims, deadline)
        return run.allocate()

    # -- shared helpers used by _Run --------------------------------------------------------
    def is_allocated(self, device_id: DeviceID) -> bool:
        """internal.IsDeviceAllocated."""
        return (
            device_id in self._allocated.devices
            or device_id in self._shared_allocated
            or device_id in self._allocated.aggregated_capacity
        )

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        # Keyed by the slices the pool was gathered from, not its name alone: two nodes
        # can see one pool at different generations, with different counter budgets, and
        # a result computed here is kept for other pods by the store's outcome cache.
        key = (
            pool.pool_id,
            tuple(id(s) for s in pool.slices_targeting_node),
            tuple(id(s) for s in pool.slices_not_targeting_node),
        )
        cached = self._available_counters.get(key)
        if cached is not None:
            return cached
        available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        for group in (pool.slices_targeting_node, pool.slices_not_targeting_node):
            for s in group:
                for device in s.devices:
                    if not self.is_allocated(DeviceID(s.driver, s.pool, device.name)):
                        continue
                    for set_name, counters in device.consumes_counters:
                        target = available.get(set_name)
                        if target is None:
                            continue
                        for name, value in counters.items():
                            if name in target:
                                target[name] -= value
        self._available_counters[key] = available
        return available


class _Run:
    """One Allocate call (Go's ``allocator``): the search state for one node and one pod."""

    def __init__(
        self,
        owner: Allocator,
        node: NodeView,
        claims: Sequence[Mapping[str, Any]],
        deadline: float | None = None,
    ) -> None:
        self.owner = owner
        self.deadline = deadline
        self.node = node
        self.claims = claims
        self.pools: list[Pool] = []
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[_Constraint]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Decimal]] = {}
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, Decimal]]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]

    # -- setup ----------------------------------------------------------------------------
    def allocate(self) -> list[dict[str, Any]] | None:
        owner = self.owner
        slices = owner._on_node.get(self.node.name, ()) + owner._shared
        try:
            self.pools = gather_pools(slices, self.node, owner._all_slices)
        except AllocationError as exc:
            raise AllocationError(f"gather pool information: {exc}") from None
        try:
            for claim_index, claim in enumerate(self.claims):
                self._prepare_claim(claim_index, claim)
            done = self._allocate_one(0, 0, 0, 0, False, (0, 0, 0))
        except _Stop:
            done = False
        except CelError as exc:
            raise AllocationError(str(exc)) from None
        if not done:
            if any(p.is_invalid for p in self.pools):
                owner.last_reason = INVALID_POOLS
            return None
        return [self._result(i, claim) for i, claim in enumerate(self.claims)]

    def _claim_name(self, claim: Mapping[str, Any]) -> str:
        meta = claim.get("metadata") or {}
        namespace = meta.get("namespace")
        return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))

    def _prepare_claim(self, claim_index: int, claim: Mapping[str, Any]) -> None:
        name = self._claim_name(claim)
        devices = (claim.get("spec") or {}).get("devices") or {}
        min_devices = 0
        for request_index, raw in enumerate(devices.get("requests") or []):
            first = raw.get("firstAvailable") or []
            if first:
                per_request = None
                for sub_index, sub in enumerate(first):
                    data = self._validate(
                        _request(sub, True, f"claim {name}, subrequest {sub.get('name')}"),
                        str(raw.get("name", "")),
                        claim_index,
                        (claim_index, request_index, sub_index),
                    )
                    self.request_data[(claim_index, request_index, sub_index)] = data
                    per_request = (
                        data.num_devices
                        if per_request is None
                        else min(per_request, data.num_devices)
                    )
                needed = per_request or 0
            else:
                exactly = raw.get("exactly")
                if exactly is None:
                    raise AllocationError(
                        f"claim {name}, request {raw.get('name')}: missing device class name "
                        "(unsupported request type?)"
                    )
                request = _request(
                    {**exactly, "name": raw.get("name", "")},
                    False,
                    f"claim {name}, request {raw.get('name')}",
                )
                data = self._validate(request, None, claim_index, (claim_index, request_index, 0))
                self.request_data[(claim_index, request_index, 0)] = data
                needed = data.num_devices
            if needed > ALLOCATION_RESULTS_MAX_SIZE - min_devices:
                raise AllocationError(
                    f"claim {name}, request {raw.get('name')}: adding {needed} devices exceeds the "
                    f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_devices} already "
                    "accounted for"
                )
            min_devices += needed
        constraints: list[_Constraint] = []
        for i, raw_constraint in enumerate(devices.get("constraints") or []):
            requests = raw_constraint.get("requests") or []
            if raw_constraint.get("matchAttribute") is not None:
                constraints.append(_MatchAttribute(requests, str(raw_constraint["matchAttribute"])))
            elif raw_constraint.get("distinctAttribute") is not None:
                constraints.append(
                    _DistinctAttribute(requests, str(raw_constraint["distinctAttribute"]))
                )
            else:
                raise AllocationError(
                    f"claim {name}, constraint #{i}: empty constraint "
                    "(unsupported constraint type?)"
                )
        self.constraints.append(constraints)

    def _validate(
        self, request: _Request, parent: str | None, claim_index: int, key: tuple[int, int, int]
    ) -> _RequestData:
        name = self._claim_name(self.claims[claim_index])
        data = _RequestData(request, parent)
        if request.derived_attributes:
            raise AllocationError(
                f"claim {name}, request {request.name}: cannot handle request with derived "
                "attributes, the feature is disabled"
            )
        for i, selector in enumerate(request.selectors):
            if selector.get("cel") is None:
                raise AllocationError(
                    f"claim {name}, request {request.name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)"
                )
        if not ADMIN_ACCESS and request.admin_access is not None:
            raise AllocationError(
                f"claim {name}, request {request.name}: admin access is requested, but the "
                "feature is disabled"
            )
        if not request.class_name:
            raise AllocationError(
                f"claim {name}, request {request.name}: missing device class name "
                "(unsupported request type?)"
            )
        class_ = self.owner._classes.get(request.class_name)
        if class_ is None:
            raise AllocationError(
                f"claim {name}, request {request.name}: could not retrieve device class "
                f"{request.class_name}: deviceclass.resource.k8s.io "
                f'"{request.class_name}" not found'
            )
        data.class_ = class_
        for i, selector in enumerate((class_.get("spec") or {}).get("selectors") or []):
            if selector.get("cel") is None:
                raise AllocationError(
                    f"class {request.class_name}: selector #{i}: CEL expression empty "
                    "(unsupported selector type?)"
                )
        if request.mode == EXACT_COUNT:
            data.num_devices = request.count
        elif request.mode == ALL:
            for pool in self.pools:
                if pool.is_incomplete:
                    raise AllocationError(
                        f"claim {name}, request {request.name}: asks for all devices, but "
                        f"resource pool {pool} is currently being updated"
                    )
                if pool.is_invalid:
                    raise AllocationError(
                        f"claim {name}, request {request.name}: asks for all devices, but "
                        f"resource pool {pool} is currently invalid"
                    )
                for s in pool.slices_targeting_node:
                    for device in s.devices:
                        if not self._selectable(key, data, s, device):
                            continue
                        if CONSUMABLE_CAPACITY:
                            try:
                                fits = request_fits({}, request.capacity, device.capacity, {})
                            except CapacityError as exc:
                                raise AllocationError(
                                    f"claim {name}, request {request.name}: checking capacity "
                                    f"for device {device.name}: {exc}"
                                ) from None
                            if not fits:
                                continue
                        data.all_devices.append(
                            _Candidate(DeviceID(s.driver, s.pool, device.name), device, s, pool)
                        )
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(
                f"claim {name}, request {request.name}: unsupported count mode {request.mode}"
            )
        return data

    # -- matching ---------------------------------------------------------------------------
    def _selectable(
        self, key: tuple[int, int, int], data: _RequestData, s: Slice, device: Device
    ) -> bool:
        """isSelectable: class selectors, request selectors, per-device node selection."""
        if not DEVICE_BINDING_AND_STATUS and device.binding_conditions:
            return False
        device_id = DeviceID(s.driver, s.pool, device.name)
        match_key = (device_id, *key)
        cached = self.matches.get(match_key)
        if cached is not None:
            return cached
        result = self._selectors_match(key[0], data, s, device, device_id)
        if result and s.per_device_node_selection:
            result = node_matches(
                self.node, device.node_name, device.all_nodes, device.node_selector
            )
        self.matches[match_key] = result
        return result

    def _selectors_match(
        self, claim_index: int, data: _RequestData, s: Slice, device: Device, device_id: DeviceID
    ) -> bool:
        groups: list[tuple[str | None, Sequence[Mapping[str, Any]]]] = []
        if data.class_ is not None:
            class_name = str(
                (data.class_.get("metadata") or {}).get("name", data.request.class_name)
            )
            groups.append((class_name, (data.class_.get("spec") or {}).get("selectors") or []))
        groups.append((None, data.request.selectors))
        for owner_class, selectors in groups:
            for i, selector in enumerate(selectors):
                expression = str((selector.get("cel") or {}).get("expression", ""))
                where = (
                    f"class {owner_class}"
                    if owner_class is not None
                    else f"claim {self._claim_name(self.claims[claim_index])}"
                )
                try:
                    if not device_matches(expression, s.driver, device.raw):
                        return False
                except CelError as exc:
                    text = str(exc)
                    if text.startswith("CEL compile error"):
                        raise CelError(f"{where}: selector #{i}: {text}") from None
                    raise CelError(
                        f"{where}: selector #{i} on device {device_id}: {text}"
                    ) from None
        return True

    # -- search -----------------------------------------------------------------------------
    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.owner._allocated.devices or bool(self.allocating.get(device_id))

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        return (
            device_id in self.owner._allocated.aggregated_capacity
            or device_id in self.owner._shared_allocated
            or device_id in self.allocating_capacity
        )

    def _request_fits(self, request: _Request, device_id: DeviceID, device: Device) -> bool:
        current = self.owner._allocated.aggregated_capacity.get(device_id, {})
        allocating = self.allocating_capacity.get(device_id, {})
        return request_fits(current, request.capacity, device.capacity, allocating)

    def _allocate_one(
        self,
        claim_index: int,
        request_index: int,
        sub_index: int,
        device_index: int,
        allocate_sub: bool,
        start: tuple[int, int, int],
    ) -> bool:
        self.owner.allocate_one_calls += 1
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise AllocationTimeout("filter operation aborted: context deadline exceeded")
        if claim_index >= len(self.claims):
            return True
        claim = self.claims[claim_index]
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        if request_index >= len(requests):
            try:
                return self._allocate_one(claim_index + 1, 0, 0, 0, False, (0, 0, 0))
            except _Stop:
                return False

        key = (claim_index, request_index, sub_index)
        data = self.request_data[key]

        if not allocate_sub and data.parent is not None:
            all_exceeded = True
            sub = 0
            while True:
                sub_key = (claim_index, request_index, sub)
                if sub_key not in self.request_data:
                    if all_exceeded:
                        raise _Stop
                    return False
                try:
                    success = self._allocate_one(
                        claim_index, request_index, sub, device_index, True, (0, 0, 0)
                    )
                except _Stop:
                    sub += 1
                    continue
                all_exceeded = False
                if success:
                    data.selected_sub = sub
                    return True
                sub += 1

        request = data.request
        do_all = request.mode == ALL
        if do_all and not data.all_devices:
            return False
        if device_index >= data.num_devices:
            return self._allocate_one(claim_index, request_index + 1, 0, 0, False, (0, 0, 0))

        remaining = data.num_devices - device_index
        available = ALLOCATION_RESULTS_MAX_SIZE - len(self.results[claim_index])
        if remaining > available:
            raise _Stop

        if do_all:
            candidate = data.all_devices[device_index]
            undo = self._allocate_device(key, candidate, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(
                    claim_index, request_index, sub_index, device_index + 1, allocate_sub, (0, 0, 0)
                )
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done

        admin = bool(request.admin_access)
        for pool_index in range(start[0], len(self.pools)):
            pool = self.pools[pool_index]
            if pool.is_incomplete or pool.is_invalid:
                continue
            slice_start = start[1] if pool_index == start[0] else 0
            for slice_index in range(slice_start, len(pool.slices_targeting_node)):
                s = pool.slices_targeting_node[slice_index]
                device_start = start[2] if pool_index == start[0] and slice_index == start[1] else 0
                for dev_index in range(device_start, len(s.devices)):
                    device = s.devices[dev_index]
                    device_id = DeviceID(pool.driver, pool.pool, device.name)
                    if admin and claim_index in self.allocating.get(device_id, ()):
                        continue
                    if not admin and self._in_use(device_id):
                        continue
                    if not self._selectable(key, data, s, device):
                        continue
                    if CONSUMABLE_CAPACITY:
                        try:
                            fits = self._request_fits(request, device_id, device)
                        except CapacityError as exc:
                            raise AllocationError(
                                f"claim {self._claim_name(claim)}, request {request.name}: "
                                f"checking capacity for device {device_id}: {exc}"
                            ) from None
                        if not fits:
                            continue
                    undo = self._allocate_device(
                        key, _Candidate(device_id, device, s, pool), must=False
                    )
                    if undo is None:
                        continue
                    try:
                        done = self._allocate_one(
                            claim_index,
                            request_index,
                            sub_index,
                            device_index + 1,
                            allocate_sub,
                            (pool_index, slice_index, dev_index + 1),
                        )
                    except BaseException:
                        undo()
                        raise
                    if done:
                        return True
                    undo()
        return False

    def _allocate_device(
        self, key: tuple[int, int, int], candidate: _Candidate, must: bool
    ) -> Callable[[], None] | None:
        """allocateDevice: reserve one device for a request; the undo function, or None."""
        claim_index = key[0]
        data = self.request_data[key]
        request = data.request
        device, device_id = candidate.device, candidate.id
        admin = bool(request.admin_access)
        allow_multiple = CONSUMABLE_CAPACITY and bool(device.allow_multiple_allocations)
        if not allow_multiple and admin and claim_index in self.allocating.get(device_id, ()):
            return None
        if not admin and self._in_use(device_id):
            return None
        if not PARTITIONABLE_DEVICES and device.consumes_counters:
            return None
        skip_counters = allow_multiple and self._capacity_in_use(device_id)
        counters_reserved = False
        if not skip_counters and device.consumes_counters:
            if not self._reserve_counters(candidate):
                return None
            counters_reserved = True

        if data.parent is None:
            base, sub = request.name, None
        else:
            base, sub = data.parent, request.name

        constraints = self.constraints[claim_index]
        added = 0

        def rollback(
            marked: bool, capacity: dict[str, Consumed] | None, existed: bool, result: bool
        ) -> None:
            if result:
                self.results[claim_index].pop()
            if capacity is not None:
                self._remove_capacity(device_id, capacity)
                if existed and device_id not in self.allocating_capacity:
                    self.allocating_capacity[device_id] = {}
            if marked:
                self.allocating[device_id].discard(claim_index)
            for c in reversed(constraints[:added]):
                c.remove(base, sub, device, device_id)
            if counters_reserved:
                self._release_counters(candidate)

        if DEVICE_TAINTS and _taint_prevents(device, request):
            rollback(False, None, False, False)
            return None

        for c in constraints:
            if not c.add(base, sub, device, device_id):
                rollback(False, None, False, False)
                if must:
                    raise AllocationError(
                        f"claim {self._claim_name(self.claims[claim_index])}, request "
                        f"{request.name}: cannot add device {device_id} because a claim "
                        "constraint would not be satisfied"
                    )
                return None
            added += 1

        marked = False
        if not allow_multiple:
            self.allocating.setdefault(device_id, set()).add(claim_index)
            marked = True

        consumed: dict[str, Consumed] = {}
        share_id: str | None = None
        inserted: dict[str, Consumed] | None = None
        existed = False
        if CONSUMABLE_CAPACITY:
            try:
                fits = self._request_fits(request, device_id, device)
            except CapacityError as exc:
                rollback(marked, None, False, False)
                raise AllocationError(
                    f"claim {self._claim_name(self.claims[claim_index])}, request {request.name}: "
                    f"rechecking capacity for device {device_id}: {exc}"
                ) from None
            if not fits:
                rollback(marked, None, False, False)
                return None
            if allow_multiple:
                consumed = consumed_from_request(request.capacity, device.capacity)
                share_id = str(uuid.uuid4())
                existed = device_id in self.allocating_capacity
                self._insert_capacity(device_id, consumed)
                inserted = consumed

        self.results[claim_index].append(
            _Result(
                request=request.name,
                parent=data.parent,
                id=device_id,
                device=device,
                slice=candidate.slice,
                share_id=share_id,
                consumed=consumed or None,
                admin_access=True if admin else None,
            )
        )
        return lambda: rollback(marked, inserted, existed, True)

    def _insert_capacity(self, device_id: DeviceID, consumed: Mapping[str, Consumed]) -> None:
        target = self.allocating_capacity.setdefault(device_id, {})
        for name, value in consumed.items():
            target[name] = target.get(name, Decimal(0)) + value.value

    def _remove_capacity(self, device_id: DeviceID, consumed: Mapping[str, Consumed]) -> None:
        target = self.allocating_capacity.get(device_id)
        if target is None:
            return
        for name, value in consumed.items():
            if name in target:
                target[name] -= value.value
        if all(v == 0 for v in target.values()):
            del self.allocating_capacity[device_id]

    def _reserve_counters(self, candidate: _Candidate) -> bool:
        """checkAvailableCounters: add the device's consumption; undo it and False on overflow."""
        pool = candidate.pool
        available = self.owner.available_counters(pool)
        consumed = self.consumed_counters.setdefault(pool.pool_id, {})
        for set_name, counters in candidate.device.consumes_counters:
            target = consumed.setdefault(set_name, {})
            for name, value in counters.items():
                target[name] = target.get(name, Decimal(0)) + value
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, value in counters.items():
                if value < used.get(name, Decimal(0)):
                    self._release_counters(candidate)
                    return False
        return True

    def _release_counters(self, candidate: _Candidate) -> None:
        consumed = self.consumed_counters.get(candidate.pool.pool_id, {})
        for set_name, counters in candidate.device.consumes_counters:
            target = consumed.setdefault(set_name, {})
            for name, value in counters.items():
                target[name] = target.get(name, Decimal(0)) - value

    # -- results ----------------------------------------------------------------------------
    def _result(self, claim_index: int, claim: Mapping[str, Any]) -> dict[str, Any]:
        devices_spec = (claim.get("spec") or {}).get("devices") or {}
        requests = devices_spec.get("requests") or []
        results: list[dict[str, Any]] = []
        for r in self.results[claim_index]:
            entry: dict[str, Any] = {
                "request": r.full_name,
                "driver": r.id.driver,
                "pool": r.id.pool,
                "device": r.id.device,
            }
            if r.admin_access is not None:
                entry["adminAccess"] = r.admin_access
            tolerations = self._lookup(claim_index, claim, r).tolerations
            if tolerations:
                entry["tolerations"] = copy.deepcopy(list(tolerations))
            if DEVICE_BINDING_AND_STATUS:
                if r.device.binding_conditions:
                    entry["bindingConditions"] = list(r.device.binding_conditions)
                if r.device.binding_failure_conditions:
                    entry["bindingFailureConditions"] = list(r.device.binding_failure_conditions)
            if r.share_id is not None:
                entry["shareID"] = r.share_id
            if r.consumed:
                entry["consumedCapacity"] = {
                    name: format_quantity(c.value, c.text) for name, c in r.consumed.items()
                }
            results.append(entry)

        config: list[dict[str, Any]] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        for request_index in range(len(requests)):
            data = self.request_data[(claim_index, request_index, 0)]
            if data.parent is not None:
                data = self.request_data[(claim_index, request_index, data.selected_sub)]
            class_ = data.class_
            if class_ is None:
                continue
            class_name = str((class_.get("metadata") or {}).get("name", data.request.class_name))
            if class_name in class_ranges:
                begin, end = class_ranges[class_name]
                for i in range(begin, end):
                    config[i]["requests"].append(data.full_name)
                continue
            begin = len(config)
            for item in (class_.get("spec") or {}).get("config") or []:
                config.append(
                    {"source": "FromClass", "requests": [data.full_name], **_device_config(item)}
                )
            class_ranges[class_name] = (begin, len(config))

        def selected_name(request_index: int, raw: Mapping[str, Any]) -> str | None:
            data = self.request_data[(claim_index, request_index, 0)]
            if data.parent is None:
                return None
            sub = (raw.get("firstAvailable") or [])[data.selected_sub]
            return f"{raw.get('name')}/{sub.get('name')}"

        for item in devices_spec.get("config") or []:
            wanted = item.get("requests") or []
            if not wanted:
                config.append({"source": "FromClaim", **_device_config(item)})
                continue
            for request_index, raw in enumerate(requests):
                if raw.get("name") in wanted or selected_name(request_index, raw) in wanted:
                    config.append(
                        {"source": "FromClaim", "requests": list(wanted), **_device_config(item)}
                    )
                    break

        for entry in config:
            wanted = entry.get("requests")
            if not wanted:
                continue
            if all(
                raw.get("name") in wanted or selected_name(i, raw) in wanted
                for i, raw in enumerate(requests)
            ):
                del entry["requests"]

        allocation: dict[str, Any] = {"devices": {"results": results}}
        if config:
            allocation["devices"]["config"] = config
        selector = self._node_selector(self.results[claim_index], claim)
        if selector is not None:
            allocation["nodeSelector"] = selector
        return allocation

    def _lookup(self, claim_index: int, claim: Mapping[str, Any], r: _Result) -> _Request:
        """lookupRequest: the request or sub-request a result was allocated for."""
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        name = r.parent if r.parent is not None else r.request
        for request_index, raw in enumerate(requests):
            if raw.get("name") != name:
                continue
            if r.parent is None:
                return self.request_data[(claim_index, request_index, 0)].request
            for sub_index, sub in enumerate(raw.get("firstAvailable") or []):
                if sub.get("name") == r.request:
                    return self.request_data[(claim_index, request_index, sub_index)].request
        raise AllocationError(f"internal error: request {r.full_name} not found")

    def _node_selector(
        self, results: Sequence[_Result], claim: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        fields: list[Mapping[str, Any]] = []
        expressions: list[Mapping[str, Any]] = []
        for r in results:
            if r.slice.per_device_node_selection:
                node_name, selector = r.device.node_name, r.device.node_selector
            else:
                node_name, selector = r.slice.node_name, r.slice.node_selector
            if node_name is not None or r.device.binds_to_node:
                return {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": [self.node.name],
                                }
                            ]
                        }
                    ]
                }
            if selector is not None:
                terms = selector.get("nodeSelectorTerms") or []
                if len(terms) == 1:
                    _add_requirements(terms[0].get("matchFields") or [], fields)
                    _add_requirements(terms[0].get("matchExpressions") or [], expressions)
                elif len(terms) > 1:
                    raise AllocationError(
                        "create NodeSelector for claim "
                        f"{(claim.get('metadata') or {}).get('name', '')}: "
                        f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms"
                    )
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = copy.deepcopy(expressions)
        if fields:
            term["matchFields"] = copy.deepcopy(fields)
        return {"nodeSelectorTerms": [term]}


def _device_config(item: Mapping[str, Any]) -> dict[str, Any]:
    """The inline DeviceConfiguration of a class or claim config entry (``opaque``), copied."""
    return copy.deepcopy({k: v for k, v in item.items() if k not in ("requests", "source")})
