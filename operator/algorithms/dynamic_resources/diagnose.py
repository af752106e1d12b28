"""Why a pod's ResourceClaims cannot be allocated on one node, request by request.

The plugin's own message stays kube-scheduler's (``cannot allocate all claims``); this
module answers the user's question behind it for ``podium explain``. It counts, per
request, the devices of the node's pools that pass the class and request selectors and
how many of those are already held by allocated or in-flight claims. When every request
has enough free devices on its own, it re-runs the allocator on each claim alone, then
without each of its constraints, to name the constraint or the joint count that fails.
Nothing here feeds back into scheduling.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.algorithms.dynamic_resources.allocator import ALL, Allocator, tolerates
from podium.algorithms.dynamic_resources.cel import CelError, device_matches
from podium.algorithms.dynamic_resources.pools import NodeView, gather_pools, node_matches
from podium.state.devices import (
    AllocationError,
    Device,
    DeviceID,
    Slice,
    allocated_state,
    parse_slice,
)

__all__ = ["ClaimDiagnoser", "RequestProblem"]

NO_MATCH, TAKEN, CONSTRAINT, TOGETHER, ERROR = (
    "no-match",
    "taken",
    "constraint",
    "together",
    "error",
)


@dataclass(frozen=True, slots=True)
class RequestProblem:
    """One request (or, for a constraint or joint count, one claim) that cannot be met."""

    claim: str  # namespace/name
    request: str  # "gpu", "gpu/big" for a firstAvailable subrequest, "" for the whole claim
    kind: str  # NO_MATCH, TAKEN, CONSTRAINT, TOGETHER or ERROR
    class_name: str = ""
    wanted: int | None = None  # None: allocationMode All
    node_devices: int = 0  # devices of the node's usable pools
    class_matching: int = 0  # devices passing the class selectors alone
    matching: int = 0  # devices passing the class and request selectors
    taken: int = 0  # of ``matching``, held by allocated or in-flight claims
    tainted: int = 0  # of the free ``matching``, with a taint the request does not tolerate
    holders: tuple[str, ...] = ()  # the claims holding the taken devices
    constraints: tuple[str, ...] = ()  # e.g. 'matchAttribute "d.example.com/numa"'
    error: str = ""

    def sentence(self) -> str:
        """One line for people, e.g. 'claim ns/c request gpu: 2 wanted, 4 devices match...'."""
        head = f"claim {self.claim}" + (f" request {self.request}" if self.request else "")
        if self.kind == ERROR:
            return f"{head}: {self.error}"
        if self.kind == CONSTRAINT:
            return f"{head}: enough devices are free, but {' and '.join(self.constraints)} fails"
        if self.kind == TOGETHER:
            return f"{head}: each request has free devices, but not all of them together"
        wanted = "all" if self.wanted is None else str(self.wanted)
        if self.matching == 0:
            if self.node_devices == 0:
                return f"{head}: {wanted} wanted, the node has no devices"
            if self.class_matching == 0:
                return (
                    f"{head}: {wanted} wanted, 0 devices match the class "
                    f'"{self.class_name}" selectors'
                )
            return (
                f"{head}: {wanted} wanted, 0 of the {self.class_matching} devices of class "
                f'"{self.class_name}" match the request selectors'
            )
        text = f"{head}: {wanted} wanted, {self.matching} devices match the selectors"
        text += f", {self.taken} taken"
        if self.tainted:
            text += f", {self.tainted} tainted"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "request": self.request or None,
            "kind": self.kind,
            "deviceClass": self.class_name or None,
            "wanted": "All" if self.wanted is None else self.wanted,
            "nodeDevices": self.node_devices,
            "classMatching": self.class_matching,
            "matching": self.matching,
            "taken": self.taken,
            "tainted": self.tainted,
            "takenBy": list(self.holders),
            "constraints": list(self.constraints),
            "error": self.error or None,
            "message": self.sentence(),
        }


@dataclass(slots=True)
class _Count:
    class_matching: int = 0
    matching: int = 0
    taken: int = 0
    tainted: int = 0
    holders: set[str] = field(default_factory=set)


def _claim_name(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _untolerated(device: Device, tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """A NoSchedule or NoExecute taint that no toleration of the request covers."""
    for taint in device.taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return True
    return False


def _constraint_label(raw: Mapping[str, Any]) -> str:
    for kind in ("matchAttribute", "distinctAttribute"):
        if raw.get(kind) is not None:
            return f'{kind} "{raw[kind]}"'
    return "an empty constraint"


class ClaimDiagnoser:
    """Built once per pod from the DRA objects; ``node`` diagnoses one node at a time."""

    def __init__(
        self,
        classes: Mapping[str, Mapping[str, Any]],
        slices: Sequence[Mapping[str, Any]],
        allocations: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """``slices`` with DeviceTaintRules applied; ``allocations``: claim key -> the
        AllocationResult of every allocated or in-flight claim."""
        self._classes = classes
        self._slices = [parse_slice(s) for s in slices]
        self._state = allocated_state(allocations.values())
        self._allocator = Allocator(self._state, classes, slices)
        self._holders: dict[DeviceID, str] = {}
        for key, allocation in allocations.items():
            for result in (allocation.get("devices") or {}).get("results") or []:
                if result.get("adminAccess") or result.get("shareID") is not None:
                    continue
                device_id = DeviceID(
                    str(result.get("driver", "")),
                    str(result.get("pool", "")),
                    str(result.get("device", "")),
                )
                self._holders[device_id] = key

    def node(
        self, node: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]
    ) -> list[RequestProblem]:
        """The unmet requests of the unallocated ``claims`` on ``node`` (Node JSON)."""
        meta = node.get("metadata") or {}
        view = NodeView(str(meta.get("name", "")), meta.get("labels") or {})
        on_node = [s for s in self._slices if s.node_name in (None, "", view.name)]
        try:
            pools = gather_pools(on_node, view, self._slices)
        except AllocationError as exc:
            return [RequestProblem(_claim_name(c), "", ERROR, error=str(exc)) for c in claims[:1]]
        candidates = [
            (s, d)
            for p in pools
            if not (p.is_incomplete or p.is_invalid)
            for s in p.slices_targeting_node
            for d in s.devices
            if not s.per_device_node_selection
            or node_matches(view, d.node_name, d.all_nodes, d.node_selector)
        ]
        problems: list[RequestProblem] = []
        for claim in claims:
            problems += self._claim(claim, candidates)
        if problems:
            return problems
        for claim in claims:
            problems += self._claim_alone(node, claim)
        if problems or not claims:
            return problems
        together = self._fits(node, claims)
        if together is True:
            return []
        if isinstance(together, str):
            return [RequestProblem(_claim_name(claims[0]), "", ERROR, error=together)]
        return [RequestProblem(_claim_name(claims[0]), "", TOGETHER)]

    def _claim(
        self, claim: Mapping[str, Any], candidates: Sequence[tuple[Slice, Device]]
    ) -> list[RequestProblem]:
        """Each request of ``claim`` that lacks free matching devices on its own."""
        name = _claim_name(claim)
        out: list[RequestProblem] = []
        for raw in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            base = str(raw.get("name", ""))
            first = raw.get("firstAvailable") or []
            if first:
                subs = [(f"{base}/{s.get('name', '')}", s) for s in first]
            else:
                subs = [(base, raw.get("exactly") or {})]
            found = [self._request(name, label, spec, candidates) for label, spec in subs]
            if all(p is not None for p in found):
                out += [p for p in found if p is not None]
        return out

    def _request(
        self,
        claim: str,
        label: str,
        spec: Mapping[str, Any],
        candidates: Sequence[tuple[Slice, Device]],
    ) -> RequestProblem | None:
        """The problem with one request on its own, or None when it has enough devices."""
        class_name = str(spec.get("deviceClassName") or "")
        class_ = self._classes.get(class_name) or {}
        class_selectors = (class_.get("spec") or {}).get("selectors") or []
        selectors = spec.get("selectors") or []
        mode = str(spec.get("allocationMode") or "ExactCount")
        raw_count = spec.get("count")
        wanted = None if mode == ALL else 1 if raw_count is None else int(raw_count)
        admin = bool(spec.get("adminAccess"))
        count = _Count()
        try:
            for s, device in candidates:
                if not self._passes(class_selectors, s, device):
                    continue
                count.class_matching += 1
                if not self._passes(selectors, s, device):
                    continue
                count.matching += 1
                device_id = DeviceID(s.driver, s.pool, device.name)
                if not admin and device_id in self._state.devices:
                    count.taken += 1
                    count.holders.add(self._holders.get(device_id, "?"))
                elif _untolerated(device, spec.get("tolerations") or []):
                    count.tainted += 1
        except CelError as exc:
            return RequestProblem(claim, label, ERROR, class_name, wanted, error=str(exc))
        free = count.matching - count.taken - count.tainted
        needed = count.matching if wanted is None else wanted
        if count.matching and free >= needed:
            return None
        return RequestProblem(
            claim,
            label,
            NO_MATCH if count.matching == 0 else TAKEN,
            class_name,
            wanted,
            len(candidates),
            count.class_matching,
            count.matching,
            count.taken,
            count.tainted,
            tuple(sorted(count.holders)),
        )

    @staticmethod
    def _passes(selectors: Sequence[Mapping[str, Any]], s: Slice, device: Device) -> bool:
        for selector in selectors:
            expression = str((selector.get("cel") or {}).get("expression", ""))
            if not device_matches(expression, s.driver, device.raw):
                return False
        return True

    def _claim_alone(
        self, node: Mapping[str, Any], claim: Mapping[str, Any]
    ) -> list[RequestProblem]:
        """A claim whose requests each fit: which constraint, if any, stops it alone."""
        name = _claim_name(claim)
        fits = self._fits(node, claim)
        if isinstance(fits, str):
            return [RequestProblem(name, "", ERROR, error=fits)]
        if fits:
            return []
        raw_constraints = ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []
        if not raw_constraints:
            return [RequestProblem(name, "", TOGETHER)]
        blamed = []
        for i, raw in enumerate(raw_constraints):
            without = copy.deepcopy(dict(claim))
            del without["spec"]["devices"]["constraints"][i]
            if self._fits(node, without) is True:
                blamed.append(_constraint_label(raw))
        if not blamed:
            without = copy.deepcopy(dict(claim))
            without["spec"]["devices"]["constraints"] = []
            if self._fits(node, without) is not True:
                return [RequestProblem(name, "", TOGETHER)]
            blamed = [_constraint_label(raw) for raw in raw_constraints]
        return [RequestProblem(name, "", CONSTRAINT, constraints=tuple(blamed))]

    def _fits(
        self, node: Mapping[str, Any], claims: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> bool | str:
        """Whether the allocator places ``claims`` (one claim or several), or its error."""
        group = [claims] if isinstance(claims, Mapping) else list(claims)
        try:
            return self._allocator.allocate(node, group) is not None
        except AllocationError as exc:
            return str(exc)
