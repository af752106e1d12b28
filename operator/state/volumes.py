"""Storage objects the volume plugins read: PVs, PVCs, StorageClasses, CSINodes.

kube-scheduler reads these through informers (PV and PVC through an
"assume cache"). ``VolumeStore`` is the same for Podium: watch events and
LISTs go in through ``apply``, parsed into small records that never raise
on malformed input, and PreBind *assumes* the PV bindings it is about to
write, so that a second pod in flight does not pick the same PV before the
watch reports the write.

Why one module of this size: the typed views of PVs, PVCs, StorageClasses and
CSINodes and the store that assumes bindings change together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from podium.kube.kinds import Kind, object_kinds, paths
from podium.kube.labels import NodeTerm, Selector, parse_label_selector, parse_node_terms
from podium.kube.quantity import QuantityError, to_int

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo

__all__ = [
    "KINDS",
    "OBJECT_KINDS",
    "RESOURCES",
    "CSINode",
    "ClaimRef",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "VolumeStore",
    "claim_class",
    "pod_claims",
]

# The kinds this store holds; KINDS (plural -> LIST path) and OBJECT_KINDS derive from it.
RESOURCES: tuple[Kind, ...] = (
    Kind("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False),
    Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True),
    Kind("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False),
    Kind("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False),
)
KINDS = paths(RESOURCES)
OBJECT_KINDS = object_kinds(RESOURCES)

BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strs(value: object) -> frozenset[str]:
    return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()


def _storage(resources: object) -> int:
    """A storage quantity in bytes; malformed or missing is 0."""
    try:
        return max(to_int(_dict(resources).get("storage", 0)), 0)
    except QuantityError:
        return 0


def _meta(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[str, str]]:
    meta = _dict(body.get("metadata"))
    return meta, {str(k): str(v) for k, v in _dict(meta.get("annotations")).items()}


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(slots=True)
class PersistentVolume:
    name: str
    storage_class: str
    capacity: int
    access_modes: frozenset[str]
    volume_mode: str
    phase: str
    labels: dict[str, str]
    claim_ref: ClaimRef | None = None
    # None: no required node affinity; otherwise the parsed NodeSelectorTerms, ORed.
    node_terms: tuple[NodeTerm, ...] | None = None
    csi_driver: str = ""
    csi_handle: str = ""
    deleting: bool = False
    resource_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def fits(self, labels: Mapping[str, str]) -> bool:
        """volume.CheckNodeAffinity: terms are matched against the node's labels only."""
        if self.node_terms is None:
            return True
        return any(_term_matches_labels(t, labels) for t in self.node_terms)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """IsVolumeBoundToClaim: the claimRef names the claim (and its uid, if set)."""
        ref = self.claim_ref
        return (
            ref is not None
            and ref.namespace == claim.namespace
            and ref.name == claim.name
            and (not ref.uid or ref.uid == claim.uid)
        )


def _term_matches_labels(term: NodeTerm, labels: Mapping[str, str]) -> bool:
    """MatchNodeSelectorTerms on a Node that has labels but no name."""
    if term.error:
        return False
    if term.labels is not None and not all(r.matches(labels) for r in term.labels):
        return False
    for key, op, value in term.fields or ():
        actual = "" if key == "metadata.name" else None
        if (actual == value) != (op == "In"):
            return False
    return True


@dataclass(slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str
    storage_class: str
    volume_name: str
    access_modes: frozenset[str]
    volume_mode: str
    request: int
    phase: str
    selector: Selector | None = None
    selector_error: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    deleting: bool = False
    resource_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        """isPVCFullyBound: a volumeName and the PV controller's bind-completed mark."""
        return bool(self.volume_name) and BIND_COMPLETED in self.annotations


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str
    # AllowedTopologies as NodeSelectorTerms-like requirement sets; empty allows all.
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()
    resource_version: str = ""

    @property
    def wait_for_first_consumer(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    def allows(self, labels: Mapping[str, str]) -> bool:
        """MatchTopologySelectorTerms: any term whose every key has a matching value."""
        if not self.allowed_topologies:
            return True
        return any(
            all(labels.get(key) in values for key, values in term)
            for term in self.allowed_topologies
        )


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    # Driver name -> allocatable.count, for drivers that report one.
    limits: Mapping[str, int] = field(default_factory=dict)
    resource_version: str = ""


def claim_class(annotations: Mapping[str, str], spec: Mapping[str, Any]) -> str:
    """GetPersistentVolume(Claim)Class: the beta annotation wins over the field."""
    if BETA_CLASS_ANNOTATION in annotations:
        return annotations[BETA_CLASS_ANNOTATION]
    value = spec.get("storageClassName")
    return value if isinstance(value, str) else ""


def parse_pv(body: Mapping[str, Any]) -> PersistentVolume:
    meta, annotations = _meta(body)
    spec = _dict(body.get("spec"))
    ref = spec.get("claimRef")
    claim_ref = None
    if isinstance(ref, Mapping):
        claim_ref = ClaimRef(
            str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or "")
        )
    required = _dict(spec.get("nodeAffinity")).get("required")
    node_terms = None
    if required is not None:
        node_terms = parse_node_terms(_dict(required).get("nodeSelectorTerms"))
    csi = _dict(spec.get("csi"))
    return PersistentVolume(
        name=str(meta.get("name") or ""),
        storage_class=claim_class(annotations, spec),
        capacity=_storage(spec.get("capacity")),
        access_modes=_strs(spec.get("accessModes")),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        phase=str(_dict(body.get("status")).get("phase") or ""),
        labels={str(k): str(v) for k, v in _dict(meta.get("labels")).items()},
        claim_ref=claim_ref,
        node_terms=node_terms,
        csi_driver=str(csi.get("driver") or ""),
        csi_handle=str(csi.get("volumeHandle") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=body,
    )


def parse_pvc(body: Mapping[str, Any]) -> PersistentVolumeClaim:
    meta, annotations = _meta(body)
    spec = _dict(body.get("spec"))
    selector: Selector | None = None
    selector_error = ""
    if spec.get("selector") is not None:
        parsed = parse_label_selector(spec.get("selector"))
        if isinstance(parsed, str):
            selector_error = parsed
        else:
            selector = parsed
    return PersistentVolumeClaim(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        storage_class=claim_class(annotations, spec),
        volume_name=str(spec.get("volumeName") or ""),
        access_modes=_strs(spec.get("accessModes")),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        request=_storage(_dict(spec.get("resources")).get("requests")),
        phase=str(_dict(body.get("status")).get("phase") or ""),
        selector=selector,
        selector_error=selector_error,
        annotations=annotations,
        deleting=bool(meta.get("deletionTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=body,
    )


def parse_storage_class(body: Mapping[str, Any]) -> StorageClass:
    meta, _ = _meta(body)
    terms = []
    raw_terms = body.get("allowedTopologies")
    for term in raw_terms if isinstance(raw_terms, list) else []:
        expressions = _dict(term).get("matchLabelExpressions")
        terms.append(
            tuple(
                (str(_dict(e).get("key") or ""), _strs(_dict(e).get("values")))
                for e in (expressions if isinstance(expressions, list) else [])
            )
        )
    return StorageClass(
        name=str(meta.get("name") or ""),
        provisioner=str(body.get("provisioner") or ""),
        binding_mode=str(body.get("volumeBindingMode") or ""),
        allowed_topologies=tuple(terms),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def parse_csinode(body: Mapping[str, Any]) -> CSINode:
    meta, _ = _meta(body)
    limits: dict[str, int] = {}
    drivers = _dict(body.get("spec")).get("drivers")
    for driver in drivers if isinstance(drivers, list) else []:
        driver = _dict(driver)
        count = _dict(driver.get("allocatable")).get("count")
        if isinstance(count, int) and not isinstance(count, bool) and driver.get("name"):
            limits[str(driver["name"])] = count
    return CSINode(
        name=str(meta.get("name") or ""),
        limits=limits,
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def pod_claims(pod: PodInfo) -> list[tuple[str, bool]]:
    """The claim names a pod's volumes use, and whether each is a generic ephemeral one."""
    out: list[tuple[str, bool]] = []
    for volume in pod.volumes:
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            out.append((str(source.get("claimName") or ""), False))
        elif isinstance(volume.get("ephemeral"), Mapping):
            out.append((f"{pod.name}-{volume.get('name') or ''}", True))
    return out


def _newer_or_equal(new: str, old: str) -> bool:
    """Watch events can race a PreBind write's answer: never go back in time."""
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True


class VolumeStore:
    """The storage objects by name (claims by namespace/name), plus assumed PV bindings."""

    def __init__(self) -> None:
        self.pvs: dict[str, PersistentVolume] = {}
        self.pvcs: dict[str, PersistentVolumeClaim] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csinodes: dict[str, CSINode] = {}
        # PV name -> the PV as PreBind is writing it (claimRef set), until written or reverted.
        self.assumed: dict[str, PersistentVolume] = {}
        self.version = 0

    # -- updates -------------------------------------------------------------------
    def apply(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """One watch event or LIST item; True when what the plugins see changed."""
        meta = _dict(body.get("metadata"))
        name = str(meta.get("name") or "")
        if not name or kind not in KINDS:
            return False
        key = f"{meta.get('namespace') or ''}/{name}" if kind == "persistentvolumeclaims" else name
        table: dict[str, Any] = self._table(kind)
        if event_type == "DELETED":
            if kind == "persistentvolumes":
                self.assumed.pop(name, None)
            changed = table.pop(key, None) is not None
        else:
            parsed: Any
            if kind == "persistentvolumes":
                parsed = parse_pv(body)
            elif kind == "persistentvolumeclaims":
                parsed = parse_pvc(body)
            elif kind == "storageclasses":
                parsed = parse_storage_class(body)
            else:
                parsed = parse_csinode(body)
            old = table.get(key)
            if old is not None and not _newer_or_equal(
                parsed.resource_version, old.resource_version
            ):
                return False
            changed = old != parsed
            table[key] = parsed
        if changed:
            self.version += 1
        return changed

    def load(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """Storage objects with a ``kind`` (other kinds are ignored), as if listed."""
        for doc in docs:
            kind = OBJECT_KINDS.get(str(doc.get("kind") or ""))
            if kind is not None:
                self.apply(kind, None, doc)

    def _table(self, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            "persistentvolumes": self.pvs,
            "persistentvolumeclaims": self.pvcs,
            "storageclasses": self.classes,
            "csinodes": self.csinodes,
        }
        return tables[kind]

    def cached_versions(self, kind: str) -> dict[str, str]:
        """key -> resourceVersion (cluster-scoped names, claims as namespace/name)."""
        return {key: obj.resource_version for key, obj in self._table(kind).items()}

    # -- reads ------------------------------------------------------------------------
    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.pvcs.get(f"{namespace}/{name}")

    def pv(self, name: str) -> PersistentVolume | None:
        return self.assumed.get(name) or self.pvs.get(name)

    def pvs_of_class(self, storage_class: str) -> list[PersistentVolume]:
        """pvCache.ListPVs(class), with assumed bindings in place of the informer copies."""
        return [
            self.assumed.get(name, pv)
            for name, pv in self.pvs.items()
            if pv.storage_class == storage_class
        ]

    # -- assumptions ---------------------------------------------------------------
    def assume(self, claim: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolume:
        """AssumePodVolumes for one static binding: the PV now points at the claim."""
        bound = replace(pv, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid))
        self.assumed[pv.name] = bound
        self.version += 1
        return bound

    def forget(self, names: Iterable[str]) -> None:
        """Drop assumptions (written, or reverted after a failure)."""
        for name in names:
            if self.assumed.pop(name, None) is not None:
                self.version += 1
