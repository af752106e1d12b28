"""DRA objects the DynamicResources plugin reads, and the allocations in flight.

kube-scheduler reads DeviceClasses, ResourceSlices (with DeviceTaintRules
applied by the slice tracker) and ResourceClaims (through an assume cache),
and keeps the allocations it has chosen but not yet written ("in flight"),
so that no device is handed out twice while binds are out. ``DraStore`` is
the same for Podium: watch events and LISTs go in through ``apply``; the
allocator gets the objects as JSON, the way it reads them from the API.

A claim write's answer goes in through ``apply`` too (the assume cache):
the resourceVersion check keeps a late watch event from going back in time.

The store also keeps what every pod's allocation would otherwise rebuild: the parsed
slices (``slice_index``, re-parsed only for slices that changed), the AllocatedState
(``allocated_state``), and per claim signature the allocator's outcome on each node
(``outcomes``). That last cache is emptied for one node when its node-local
pools change (their slices, or devices allocated or freed in them) and for every node
when anything global changes (classes, taint rules, slices of shared pools, devices of
shared pools).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from podium.kube.kinds import Kind, object_kinds, paths
from podium.state.devices import (
    AllocatedState,
    AllocationError,
    DeviceID,
    Holds,
    SharedDeviceID,
    Slice,
    SliceIndex,
    allocated_state,
    allocation_holds,
    parse_or_error,
)

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo

__all__ = [
    "FINALIZER",
    "KINDS",
    "OBJECT_KINDS",
    "RESOURCES",
    "CachedAllocation",
    "Claim",
    "DraStore",
    "DraUpdate",
    "claim_names",
]

# The kinds this store holds; KINDS (plural -> LIST path) and OBJECT_KINDS derive from it.
RESOURCES: tuple[Kind, ...] = tuple(
    Kind("resource.k8s.io", "v1", plural, kind, namespaced)
    for plural, kind, namespaced in (
        ("deviceclasses", "DeviceClass", False),
        ("resourceslices", "ResourceSlice", False),
        ("resourceclaims", "ResourceClaim", True),
        ("resourceclaimtemplates", "ResourceClaimTemplate", True),
        ("devicetaintrules", "DeviceTaintRule", False),
    )
)
KINDS = paths(RESOURCES)
OBJECT_KINDS = object_kinds(RESOURCES)
NAMESPACED = frozenset(k.plural for k in RESOURCES if k.namespaced)
FINALIZER = "resource.kubernetes.io/delete-protection"


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _newer_or_equal(new: str, old: str) -> bool:
    """A write's answer can race its watch event: never go back in time."""
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True


@dataclass(slots=True)
class Claim:
    """A ResourceClaim: what PreFilter and PreBind read, plus the JSON for the allocator."""

    namespace: str
    name: str
    uid: str
    # status.allocation (AllocationResult JSON), None while unallocated.
    allocation: Mapping[str, Any] | None
    # status.reservedFor consumer uids, in order.
    reserved_for: tuple[str, ...]
    # The uid of the controlling owner (a pod for claims made from a template).
    controller: str
    finalizers: tuple[str, ...]
    deleting: bool
    resource_version: str
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def status(self) -> Mapping[str, Any]:
        return _dict(self.raw.get("status"))

    def requests(self) -> list[Mapping[str, Any]]:
        return [
            _dict(r)
            for r in _list(_dict(_dict(self.raw.get("spec")).get("devices")).get("requests"))
        ]


def parse_claim(body: Mapping[str, Any]) -> Claim:
    meta = _dict(body.get("metadata"))
    status = _dict(body.get("status"))
    allocation = status.get("allocation")
    controller = next(
        (
            str(_dict(o).get("uid") or "")
            for o in _list(meta.get("ownerReferences"))
            if _dict(o).get("controller") is True
        ),
        "",
    )
    return Claim(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        allocation=allocation if isinstance(allocation, Mapping) else None,
        reserved_for=tuple(
            str(_dict(r).get("uid") or "") for r in _list(status.get("reservedFor"))
        ),
        controller=controller,
        finalizers=tuple(str(f) for f in _list(meta.get("finalizers"))),
        deleting=bool(meta.get("deletionTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=body,
    )


def claim_names(pod: PodInfo) -> list[str]:
    """The claim names a pod refers to (directly, or generated from a template so far)."""
    return [
        c.claim_name or c.generated or ""
        for c in pod.resource_claims
        if c.claim_name or c.generated
    ]


@dataclass(frozen=True, slots=True)
class DraUpdate:
    """What one watch event changed, as the plugin's events see it.

    ``devices``: a ResourceSlice or DeviceTaintRule added or changed (DeviceTaintRules
    reach kube-scheduler as slice updates); ``classes``: a DeviceClass added or changed;
    ``freed``: an allocated claim was deallocated or deleted (any pod may fit now);
    ``changed``: the key of a claim created or whose status changed (its pods may fit).
    """

    devices: bool = False
    classes: bool = False
    freed: bool = False
    changed: str = ""


@dataclass(frozen=True, slots=True)
class CachedAllocation:
    """The allocator's outcome on one node: its AllocationResults (None: no fit) and
    ``last_reason``, for the node's labels then (they matter only while some slice or
    device has a node selector; a slice change that could matter forgets the outcome).
    Shared between pods: never to be modified."""

    labels: Mapping[str, str]
    result: list[dict[str, Any]] | None
    reason: str


# Distinct claim signatures remembered before the cache starts afresh.
_SIGNATURES = 64

PoolID = tuple[str, str]


def _slice_pool(body: Mapping[str, Any]) -> tuple[PoolID, str]:
    """A slice's (driver, pool) as the parsed Slice names them, and its nodeName or ''."""
    spec = _dict(body.get("spec"))
    pool = _dict(spec.get("pool"))
    node = spec.get("nodeName")
    return (str(spec.get("driver", "")), str(pool.get("name", ""))), str(node) if node else ""


def _pools_of(allocation: Mapping[str, Any] | None) -> set[PoolID]:
    """The (driver, pool) of every device an AllocationResult names."""
    devices = _dict(_dict(allocation).get("devices"))
    return {
        (str(_dict(r).get("driver", "")), str(_dict(r).get("pool", "")))
        for r in _list(devices.get("results"))
    }


@dataclass(slots=True)
class _InFlight:
    claim: Claim
    pods: set[str]


class DraStore:
    """The five kinds by name (namespaced ones by namespace/name), plus in-flight allocations."""

    def __init__(self) -> None:
        self.classes: dict[str, Mapping[str, Any]] = {}
        self.slices: dict[str, Mapping[str, Any]] = {}
        self.claims: dict[str, Claim] = {}
        self.templates: dict[str, Mapping[str, Any]] = {}
        self.taint_rules: dict[str, Mapping[str, Any]] = {}
        # Claim uid -> the claim as Reserve allocated it, until PreBind wrote it or it failed.
        self.in_flight: dict[str, _InFlight] = {}
        # Pending pods by the claim keys they name, so a claim event wakes only its pods.
        self.users: dict[str, set[str]] = {}
        self._user_keys: dict[str, tuple[str, ...]] = {}
        self.version = 0
        # Slices or taint rules changed: for the parsed slices, and for their JSON.
        self._slices_version = 0
        self._json_version = 0
        self._slices_cache: tuple[int, list[Mapping[str, Any]]] = (-1, [])
        self._allocations_cache: tuple[int, list[Mapping[str, Any]]] = (-1, [])
        self._state_cache: tuple[int, AllocatedState] | None = None
        # Each entry of ``allocations`` (a stored claim by key, or one in flight by uid),
        # with what it holds (None: it did not parse), and the devices and shares they
        # hold by reference count; ``_irregular`` counts entries with consumed capacity
        # or an error, for which ``allocated_state`` takes the long way.
        self._held: dict[tuple[str, str], tuple[Mapping[str, Any], Holds | None]] = {}
        self._device_refs: dict[DeviceID, int] = {}
        self._share_refs: dict[SharedDeviceID, int] = {}
        self._irregular = 0
        self._uid_keys: dict[str, set[str]] = {}
        # Slice name -> (its JSON, taint rules version, JSON with taints, parsed or error).
        self._parsed: dict[
            str, tuple[Mapping[str, Any], int, Mapping[str, Any], Slice | AllocationError]
        ] = {}
        self._index_cache: tuple[int, SliceIndex] | None = None
        self._rules_version = 0
        # (driver, pool) -> slice name -> nodeName ('' for none): which pools are node-local.
        self._pools: dict[PoolID, dict[str, str]] = {}
        # Claim signature -> node name -> the allocator's outcome there.
        self._outcomes: dict[tuple[str, ...], dict[str, CachedAllocation]] = {}

    # -- updates -------------------------------------------------------------------
    def apply(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> DraUpdate:
        """One watch event, LIST item or write answer; says what it may make schedulable."""
        meta = _dict(body.get("metadata"))
        name = str(meta.get("name") or "")
        if not name or kind not in KINDS:
            return DraUpdate()
        key = f"{meta.get('namespace') or ''}/{name}" if kind in NAMESPACED else name
        if kind == "resourceclaims":
            return self._apply_claim(key, event_type, body)
        table = self._table(kind)
        old = table.get(key)
        if event_type == "DELETED":
            if table.pop(key, None) is None:
                return DraUpdate()
            self._changed(kind, key, old, None)
            # Go registers no delete event for slices or classes: nothing can fit more.
            return DraUpdate(devices=kind == "devicetaintrules")
        version = str(meta.get("resourceVersion") or "")
        if old is not None:
            old_version = str(_dict(old.get("metadata")).get("resourceVersion") or "")
            if not _newer_or_equal(version, old_version) or old == body:
                return DraUpdate()
        table[key] = body
        self._changed(kind, key, old, body)
        return DraUpdate(
            devices=kind in ("resourceslices", "devicetaintrules"),
            classes=kind == "deviceclasses",
        )

    def _apply_claim(self, key: str, event_type: str | None, body: Mapping[str, Any]) -> DraUpdate:
        old = self.claims.get(key)
        if event_type == "DELETED":
            if self.claims.pop(key, None) is None:
                return DraUpdate()
            self.version += 1
            self._claim_moved(key, old, None)
            # Deleting an allocated claim frees its devices for any pod.
            freed = old is not None and old.allocation is not None
            return DraUpdate(freed=freed)
        new = parse_claim(body)
        if old is not None:
            if not _newer_or_equal(new.resource_version, old.resource_version):
                return DraUpdate()
            if old.raw == body:
                return DraUpdate()
        self.claims[key] = new
        self.version += 1
        self._claim_moved(key, old, new)
        if old is not None and old.allocation is not None and new.allocation is None:
            return DraUpdate(freed=True, changed=key)
        if old is None or old.status != new.status or old.deleting != new.deleting:
            return DraUpdate(changed=key)
        return DraUpdate()

    def load(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """DRA objects with a ``kind`` (other kinds are ignored), as if listed."""
        for doc in docs:
            kind = OBJECT_KINDS.get(str(doc.get("kind") or ""))
            if kind is not None:
                self.apply(kind, None, doc)

    def _table(self, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            "deviceclasses": self.classes,
            "resourceslices": self.slices,
            "resourceclaims": self.claims,
            "resourceclaimtemplates": self.templates,
            "devicetaintrules": self.taint_rules,
        }
        return tables[kind]

    def _changed(
        self, kind: str, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        self.version += 1
        if kind in ("resourceslices", "devicetaintrules"):
            self._json_version += 1
        if kind == "resourceslices":
            if not self._same_spec(key, old, new):
                self._slices_version += 1
                self._slice_changed(key, old, new)
        elif kind == "devicetaintrules":
            self._slices_version += 1
            self._rules_version += 1
            self._forget_outcomes(None)
        elif kind == "deviceclasses":
            self._forget_outcomes(None)

    def _same_spec(
        self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> bool:
        """A parsed slice whose update left its spec alone (all the allocator reads, with
        its name) takes the new JSON as is: nothing to parse, no outcome to forget."""
        entry = self._parsed.get(key)
        if (
            old is None
            or new is None
            or entry is None
            or entry[0] is not old
            or entry[1] != self._rules_version
            or old.get("spec") != new.get("spec")
        ):
            return False
        tainted = new
        if entry[2] is not old:
            rules = [_dict(_dict(r.get("spec"))) for r in self.taint_rules.values()]
            tainted = _with_taints(new, rules)
        self._parsed[key] = (new, entry[1], tainted, entry[3])
        return True

    # -- what invalidates cached outcomes -----------------------------------------------
    def _forget_outcomes(self, node: str | None) -> None:
        """Drop the cached outcomes of one node, or of all (None)."""
        for outcomes in self._outcomes.values():
            if node is None:
                outcomes.clear()  # also for pods that still hold the table
            else:
                outcomes.pop(node, None)
        if node is None:
            self._outcomes.clear()

    def _locality(self, pool: PoolID) -> str | None:
        """The node all of a pool's slices name, or None (shared, or no slices)."""
        members = self._pools.get(pool)
        if not members:
            return None
        nodes = set(members.values())
        if len(nodes) != 1:
            return None
        (node,) = nodes
        return node or None

    def _slice_changed(
        self, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        """A slice of a node-local pool that stays local to the same node touches that
        node only; anything else (shared pools, a pool changing hands) touches all."""
        pools = [_slice_pool(body) for body in (old, new) if body is not None]
        before = {pool: self._locality(pool) for pool, _ in pools}
        if old is not None:
            pool = _slice_pool(old)[0]
            members = self._pools.get(pool, {})
            members.pop(name, None)
            if not members:
                self._pools.pop(pool, None)
        if new is not None:
            pool, node = _slice_pool(new)
            self._pools.setdefault(pool, {})[name] = node
        for pool, node_before in before.items():
            if node_before is not None and node_before == self._locality(pool):
                self._forget_outcomes(node_before)
            else:
                self._forget_outcomes(None)

    def _allocation_changed(
        self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        """Devices taken or freed: their node-local pools' nodes, or all for shared pools."""
        if old is new or old == new:
            return
        for pool in _pools_of(old) | _pools_of(new):
            self._forget_outcomes(self._locality(pool))

    # -- what holds devices -------------------------------------------------------------
    def _claim_moved(self, key: str, old: Claim | None, new: Claim | None) -> None:
        if old is not None and (new is None or new.uid != old.uid):
            keys = self._uid_keys.get(old.uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._uid_keys[old.uid]
        if new is not None:
            self._uid_keys.setdefault(new.uid, set()).add(key)
        self._refresh_claim(key)

    def _refresh_claim(self, key: str) -> None:
        """A stored claim holds its allocation unless the same claim is in flight."""
        claim = self.claims.get(key)
        if claim is None or claim.allocation is None or claim.uid in self.in_flight:
            self._set_held(("claim", key), None)
        else:
            self._set_held(("claim", key), claim.allocation)

    def _refresh_flight(self, uid: str) -> None:
        found = self.in_flight.get(uid)
        self._set_held(("flight", uid), found.claim.allocation or None if found else None)
        for key in sorted(self._uid_keys.get(uid, ())):
            self._refresh_claim(key)

    def _set_held(self, key: tuple[str, str], allocation: Mapping[str, Any] | None) -> None:
        """One entry of ``allocations`` changed: count its devices, forget outcomes."""
        old = self._held.get(key)
        old_allocation = None if old is None else old[0]
        if old_allocation is allocation:
            return
        if old is not None:
            del self._held[key]
            self._count(old[1], -1)
        if allocation is not None:
            holds: Holds | None
            try:
                holds = allocation_holds(allocation)
            except Exception:
                holds = None  # allocated_state raises it again when it gets there
            self._held[key] = (allocation, holds)
            self._count(holds, 1)
        self._allocation_changed(old_allocation, allocation)

    def _count(self, holds: Holds | None, step: int) -> None:
        """Reference counts of held devices and shares; capacity and errors go the long way."""
        if holds is None or holds.error or holds.consumed:
            self._irregular += step
            if holds is None:
                return
        _add_refs(self._device_refs, holds.devices, step)
        _add_refs(self._share_refs, holds.shares, step)

    def cached_versions(self, kind: str) -> dict[str, str]:
        """key -> resourceVersion (cluster-scoped names, namespaced as namespace/name)."""
        if kind == "resourceclaims":
            return {key: c.resource_version for key, c in self.claims.items()}
        return {
            key: str(_dict(obj.get("metadata")).get("resourceVersion") or "")
            for key, obj in self._table(kind).items()
        }

    # -- pods waiting for claims ---------------------------------------------------
    def track(self, pod: PodInfo, pending: bool) -> None:
        """Index a pending pod by the claims it names; a bound or gone pod leaves the index."""
        keys = tuple(f"{pod.namespace}/{n}" for n in claim_names(pod)) if pending else ()
        old = self._user_keys.get(pod.uid, ())
        if keys == old:
            return
        for key in old:
            users = self.users.get(key)
            if users is not None:
                users.discard(pod.uid)
                if not users:
                    del self.users[key]
        if keys:
            self._user_keys[pod.uid] = keys
            for key in keys:
                self.users.setdefault(key, set()).add(pod.uid)
        else:
            self._user_keys.pop(pod.uid, None)

    def untrack(self, uid: str) -> None:
        for key in self._user_keys.pop(uid, ()):
            users = self.users.get(key)
            if users is not None:
                users.discard(uid)
                if not users:
                    del self.users[key]

    # -- reads ------------------------------------------------------------------------
    def claim(self, namespace: str, name: str) -> Claim | None:
        return self.claims.get(f"{namespace}/{name}")

    def pending_allocation(self, uid: str) -> Mapping[str, Any] | None:
        found = self.in_flight.get(uid)
        return found.claim.allocation if found is not None else None

    def allocations(self) -> list[Mapping[str, Any]]:
        """Every allocation that holds devices: written ones, then those in flight."""
        version, cached = self._allocations_cache
        if version == self.version:
            return cached
        out = [
            c.allocation
            for c in self.claims.values()
            if c.allocation is not None and c.uid not in self.in_flight
        ]
        out.extend(f.claim.allocation for f in self.in_flight.values() if f.claim.allocation)
        self._allocations_cache = (self.version, out)
        return out

    def allocated_state(self) -> AllocatedState:
        """The AllocatedState of ``allocations`` (AllocationError: a quantity that does not
        parse, raised again on every call)."""
        if self._state_cache is not None and self._state_cache[0] == self.version:
            return self._state_cache[1]
        if not self._irregular:
            # Nothing but exclusive devices and shares without capacity: the counts say all.
            state = AllocatedState(set(self._device_refs), set(self._share_refs))
        else:
            known = {id(a): h for a, h in self._held.values() if h is not None}

            def holds(allocation: Mapping[str, Any]) -> Holds:
                found = known.get(id(allocation))
                return found if found is not None else allocation_holds(allocation)

            state = allocated_state(self.allocations(), holds)
        self._state_cache = (self.version, state)
        return state

    def allocator_slices(self) -> list[Mapping[str, Any]]:
        """ResourceSlices by name, with DeviceTaintRules applied (the slice tracker's view)."""
        self._parse_slices()
        if self._slices_cache[0] != self._json_version:
            self._slices_cache = (self._json_version, [e[2] for e in self._parsed.values()])
        return self._slices_cache[1]

    def slice_index(self) -> SliceIndex:
        """``allocator_slices`` parsed, for the allocator."""
        self._parse_slices()
        assert self._index_cache is not None
        return self._index_cache[1]

    def _parse_slices(self) -> None:
        """Bring the parsed slices up to date, parsing only slices that changed."""
        if self._index_cache is not None and self._index_cache[0] == self._slices_version:
            return
        rules: list[Mapping[str, Any]] | None = None
        parsed: dict[
            str, tuple[Mapping[str, Any], int, Mapping[str, Any], Slice | AllocationError]
        ] = {}
        for name in sorted(self.slices):
            body = self.slices[name]
            entry = self._parsed.get(name)
            if entry is None or entry[0] is not body or entry[1] != self._rules_version:
                if rules is None:
                    rules = [_dict(_dict(r.get("spec"))) for r in self.taint_rules.values()]
                tainted = _with_taints(body, rules)
                entry = (body, self._rules_version, tainted, parse_or_error(tainted))
            parsed[name] = entry
        self._parsed = parsed
        self._index_cache = (self._slices_version, SliceIndex.build(e[3] for e in parsed.values()))

    # -- per-node outcomes --------------------------------------------------------------
    def outcomes(self, signature: tuple[str, ...]) -> dict[str, CachedAllocation]:
        """Node name -> the allocator's outcome for claims of this signature, valid while
        the store's version is the one it was filled at. The caller adds outcomes it
        computed from the store as it is."""
        found = self._outcomes.get(signature)
        if found is None:
            if len(self._outcomes) >= _SIGNATURES:
                self._forget_outcomes(None)
            found = self._outcomes[signature] = {}
        return found

    # -- in-flight allocations ---------------------------------------------------------
    def assume(self, claim: Claim, allocation: Mapping[str, Any], pod_uid: str) -> None:
        """Reserve (SignalClaimPendingAllocation): the devices are taken from now on."""
        raw = copy.deepcopy(dict(claim.raw))
        meta = raw.setdefault("metadata", {})
        if FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FINALIZER]
        raw["status"] = {**_dict(raw.get("status")), "allocation": allocation}
        found = self.in_flight.get(claim.uid)
        if found is None:
            self.in_flight[claim.uid] = _InFlight(parse_claim(raw), {pod_uid})
            self._refresh_flight(claim.uid)
        else:
            found.pods.add(pod_uid)
        self.version += 1

    def release(self, claim_uid: str, pod_uid: str) -> bool:
        """MaybeRemoveClaimPendingAllocation: True once the last pod sharing it let go."""
        found = self.in_flight.get(claim_uid)
        if found is None:
            return False
        found.pods.discard(pod_uid)
        if found.pods:
            return False
        del self.in_flight[claim_uid]
        self.version += 1
        self._refresh_flight(claim_uid)
        return True


def _add_refs(table: dict[Any, int], items: Iterable[Any], step: int) -> None:
    for item in items:
        count = table.get(item, 0) + step
        if count:
            table[item] = count
        else:
            del table[item]


def _with_taints(slice_: Mapping[str, Any], rules: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """applyPatches: each matching rule's taint appended to the device's own taints."""
    spec = _dict(slice_.get("spec"))
    driver = spec.get("driver")
    pool = _dict(spec.get("pool")).get("name")
    patched: dict[str, Any] | None = None
    for rule in rules:
        selector = rule.get("deviceSelector")
        if not isinstance(selector, Mapping):
            continue
        if selector.get("driver") is not None and selector["driver"] != driver:
            continue
        if selector.get("pool") is not None and selector["pool"] != pool:
            continue
        for index, device in enumerate(_list(spec.get("devices"))):
            device = _dict(device)
            if selector.get("device") is not None and selector["device"] != device.get("name"):
                continue
            if patched is None:
                patched = copy.deepcopy(dict(slice_))
            target = patched["spec"]["devices"][index]
            target["taints"] = [*(target.get("taints") or []), dict(_dict(rule.get("taint")))]
    return slice_ if patched is None else patched
