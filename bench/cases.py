"""Benchmark cases: the YAML files in bench/workloads/, parsed strictly and scaled.

Each file describes one case the way scheduler_perf does (a node template, the
pod templates for the init and measured phases, optional churn, and one or more
sized workloads), so the same shapes can be compared with upstream numbers. Each
workload belongs to one or more presets: "default" sizes fit the whole set on a
two-core machine, "upstream" holds scheduler_perf's own 5,000-node sizes. The
loader rejects unknown keys: a misspelt `topologySpreadConstraint` would
otherwise silently turn a constrained case into SchedulingBasic.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from podium.kube.manifests import make_node, make_pod

__all__ = [
    "BENCH_LABEL",
    "DEFAULT_PRESET",
    "PRESETS",
    "ROLE_LABEL",
    "RUN_LABEL",
    "WORKLOADS_DIR",
    "Case",
    "CaseError",
    "Churn",
    "DynamicResources",
    "ExtendedResource",
    "Gang",
    "NodeTemplate",
    "PodTemplate",
    "Workload",
    "load_cases",
    "select",
]

WORKLOADS_DIR = Path(__file__).with_name("workloads")

BENCH_LABEL = "podium.bench/managed"
"""On every object the benchmark creates, so cleanup can find leftovers of any run."""
RUN_LABEL = "podium.bench/run"
ROLE_LABEL = "podium.bench/role"

DEFAULT_PRESET = "default"
PRESETS = (DEFAULT_PRESET, "upstream", "batching")
"""default: the everyday sizes; upstream: scheduler_perf's performance-labelled sizes."""

Expectation = Literal["bound", "unschedulable"]
ChurnMode = Literal["create", "recreate"]
ExtendedSource = Literal["devicePlugin", "deviceClass"]


class CaseError(ValueError):
    """A workload file is malformed; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    """scheduler_perf's node-default.yaml, with the zone label spread round-robin."""

    cpu: str = "4"
    memory: str = "32Gi"
    pods: int = 110
    zones: tuple[str, ...] = ("zone-a", "zone-b", "zone-c")
    labels: Mapping[str, str] = field(default_factory=dict)

    def manifest(
        self, name: str, index: int, run_id: str, extended: Mapping[str, int] | None = None
    ) -> dict[str, Any]:
        """extended adds extended resources to capacity and allocatable (a device plugin's)."""
        labels = {**self.labels, BENCH_LABEL: "true", RUN_LABEL: run_id}
        if self.zones:
            labels["topology.kubernetes.io/zone"] = self.zones[index % len(self.zones)]
        return make_node(
            name,
            cpu=self.cpu,
            memory=self.memory,
            pods=self.pods,
            labels=labels,
            extended=extended,
        )


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """A pause pod (scheduler_perf's pod-default.yaml: 100m / 500Mi) plus extra spec fields.

    expect says what a correct scheduler does with such a pod: bind it, or leave it
    Pending with PodScheduled=False/Unschedulable (a pod that fits no node).
    """

    name: str
    cpu: str | None = "100m"
    memory: str | None = "500Mi"
    priority: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)
    expect: Expectation = "bound"
    host_port: int | None = None
    """A port the pause container asks of its node (scheduler_perf's pod-hostport-80)."""

    def manifest(
        self,
        name: str,
        scheduler_name: str,
        run_id: str,
        role: str,
        extended: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """extended adds extended-resource requests (and the equal limits the API wants)."""
        labels = {**self.labels, BENCH_LABEL: "true", RUN_LABEL: run_id, ROLE_LABEL: role}
        pod = make_pod(
            name,
            cpu=self.cpu,
            memory=self.memory,
            scheduler_name=scheduler_name,
            labels=labels,
            priority=self.priority,
            extended=extended,
        )
        if self.host_port is not None:
            port = {"containerPort": self.host_port, "hostPort": self.host_port}
            pod["spec"]["containers"][0]["ports"] = [port]
        pod["spec"].update(copy.deepcopy(dict(self.spec)))
        return pod


@dataclass(frozen=True, slots=True)
class Churn:
    """Objects created every interval while the measured pods are scheduled.

    mode "create" keeps adding them (scheduler_perf's Unschedulable case);
    "recreate" deletes the previous interval's objects first (SchedulingWithMixedChurn).
    """

    mode: ChurnMode
    interval: float
    nodes: int = 0
    pods: tuple[str, ...] = ()
    services: int = 0


_DRA_DRIVER = "test-driver.cdi.k8s.io"
"""scheduler_perf's driver name."""


@dataclass(frozen=True, slots=True)
class DynamicResources:
    """scheduler_perf's SchedulingWithResourceClaimTemplate: every measured pod claims one device.

    Each node gets one ResourceSlice (its own pool) with devices_per_node devices of one
    driver, a DeviceClass selects the driver, and the measured pods' claim comes from a
    ResourceClaimTemplate in the run's namespace.
    """

    devices_per_node: int
    driver: str = _DRA_DRIVER

    def device_class(self, name: str, run_id: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name, "labels": _run_labels(run_id)},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]},
        }

    def resource_slice(self, node: str, run_id: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-slice", "labels": _run_labels(run_id)},
            "spec": {
                "driver": self.driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"device-{i}", "attributes": {"type": {"string": "gpu"}}}
                    for i in range(self.devices_per_node)
                ],
            },
        }

    def claim_template(self, name: str, class_name: str, run_id: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "labels": _run_labels(run_id)},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "req-0", "exactly": {"deviceClassName": class_name}}]
                    }
                }
            },
        }


@dataclass(frozen=True, slots=True)
class ExtendedResource:
    """scheduler_perf's extended-resource cases: measured pod i asks for one `{name}-{k}`.

    source "devicePlugin" follows misc/SchedulingWithExtendedResource: node i lists
    `{name}-{i}: 1` in its capacity, as a device plugin would, and pod i asks for
    `{name}-{i}`, which exactly one node has. source "deviceClass" follows
    dra/extendedresource's ExtendedResource with explicit classes: no node lists the
    resource; `classes` DeviceClasses select the case's DRA driver, class k with
    `extendedResourceName: {name}-{k}`, and pod i asks for `{name}-{i mod classes}`, which
    the scheduler serves from the devices in the case's ResourceSlices through a claim of
    its own (kube-scheduler's DRAExtendedResource).
    """

    name: str
    source: ExtendedSource
    classes: int = 0

    def resource(self, index: int) -> str:
        """The resource measured pod (or node) index asks for (or lists)."""
        k = index if self.source == "devicePlugin" else index % self.classes
        return f"{self.name}-{k}"

    def node_capacity(self, index: int) -> dict[str, int]:
        """What node index lists: one unit of its own resource under a device plugin."""
        return {self.resource(index): 1} if self.source == "devicePlugin" else {}

    def device_classes(self, driver: str, run_id: str) -> list[dict[str, Any]]:
        """The classes backing the resource: deviceclass-extended-resource.yaml, explicit."""
        if self.source != "deviceClass":
            return []
        return [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": f"{run_id}-class-{k}", "labels": _run_labels(run_id)},
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                    "extendedResourceName": f"{self.name}-{k}",
                },
            }
            for k in range(self.classes)
        ]


def with_claim_template(pod: dict[str, Any], template_name: str) -> dict[str, Any]:
    """The pod asks for one claim from template_name, used by its container."""
    pod["spec"]["resourceClaims"] = [
        {"name": "resource", "resourceClaimTemplateName": template_name}
    ]
    pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "resource"}]
    return pod


@dataclass(frozen=True, slots=True)
class Gang:
    """The measured pods come in PodGroups of size members with the gang policy (minCount size).

    A last group left short by scaling gets minCount equal to its member count.
    """

    size: int

    def group_of(self, index: int) -> str:
        return f"gang-{index // self.size:05d}"

    def pod_groups(self, pods: int, run_id: str) -> list[dict[str, Any]]:
        groups = []
        for first in range(0, pods, self.size):
            members = min(self.size, pods - first)
            groups.append(
                {
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": self.group_of(first), "labels": _run_labels(run_id)},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": members}}},
                }
            )
        return groups


def _run_labels(run_id: str) -> dict[str, str]:
    return {BENCH_LABEL: "true", RUN_LABEL: run_id}


@dataclass(frozen=True, slots=True)
class Workload:
    """One size of a case: node count, the pods created in each phase, and its presets."""

    name: str
    nodes: int
    init_pods: int
    measure_pods: int
    presets: tuple[str, ...] = (DEFAULT_PRESET,)
    batching: bool | None = None
    """None: each scheduler's default profile. True or False: the profile upstream's
    batching benchmarks use (PodTopologySpread ``defaultingType: List`` with no default
    constraints, so that pods can be signed), with opportunistic batching on or off."""

    def scaled(self, scale: float) -> Workload:
        """Counts multiplied by scale; at least one node and one measured pod remain."""
        return dataclasses.replace(
            self,
            nodes=max(1, round(self.nodes * scale)),
            init_pods=round(self.init_pods * scale),
            measure_pods=max(1, round(self.measure_pods * scale)),
        )


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    description: str
    node: NodeTemplate
    templates: Mapping[str, PodTemplate]
    init_template: str
    measure_template: str
    workloads: tuple[Workload, ...]
    churn: Churn | None = None
    sweep: bool = False
    """Report the workloads as a throughput-versus-node-count series as well."""
    dra: DynamicResources | None = None
    """The measured pods each claim a device (see DynamicResources)."""
    gang: Gang | None = None
    """The measured pods come in gangs; needs the Workload API (see Gang)."""
    extended: ExtendedResource | None = None
    """The measured pods each ask for an extended resource (see ExtendedResource)."""
    backlog: bool = False
    """The measured pods all exist before the scheduler starts: the drain after a failover
    or an outage, or a Job controller's burst. The clock runs from the scheduler's start
    to the last bind, and its CPU counts from its start."""

    @property
    def claim_template(self) -> bool:
        """The measured pods claim a device through a template (DRA without extended resources)."""
        return self.dra is not None and self.extended is None

    @property
    def init(self) -> PodTemplate:
        return self.templates[self.init_template]

    @property
    def measure(self) -> PodTemplate:
        return self.templates[self.measure_template]


# -- parsing -----------------------------------------------------------------------------

_CASE_KEYS = {
    "name", "description", "node", "podTemplates", "initPods", "measurePods", "churn",
    "workloads", "sweep", "dynamicResources", "gang", "backlog", "extendedResource",
}  # fmt: skip
_NODE_KEYS = {"cpu", "memory", "pods", "zones", "labels"}
_TEMPLATE_KEYS = {"cpu", "memory", "priority", "labels", "spec", "expect", "hostPort"}
_CHURN_KEYS = {"mode", "intervalSeconds", "nodes", "pods", "services"}
_WORKLOAD_KEYS = {"name", "nodes", "initPods", "measurePods", "presets", "batching"}
_DRA_KEYS = {"devicesPerNode", "driver"}
_GANG_KEYS = {"size"}
_EXTENDED_KEYS = {"name", "source", "classes"}


def _mapping(
    value: Any, where: str, allowed: set[str], required: Sequence[str] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CaseError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise CaseError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {sorted(allowed)}")
    missing = [key for key in required if key not in value]
    if missing:
        raise CaseError(f"{where}: missing key(s) {', '.join(missing)}")
    return value


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CaseError(f"{where}: expected a non-negative integer, got {value!r}")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise CaseError(f"{where}: expected a mapping of strings")
    return {key: str(item) for key, item in value.items()}


def _presets(value: Any, where: str) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(item in PRESETS for item in value)
        or len(set(value)) != len(value)
    ):
        raise CaseError(f"{where}: expected a non-empty list of distinct {'/'.join(PRESETS)}")
    return tuple(value)


def _template(name: str, raw: Any, where: str) -> PodTemplate:
    body = _mapping(raw or {}, where, _TEMPLATE_KEYS)
    expect = body.get("expect", "bound")
    if expect not in ("bound", "unschedulable"):
        raise CaseError(f"{where}.expect: must be bound or unschedulable, got {expect!r}")
    spec = body.get("spec", {})
    if not isinstance(spec, dict):
        raise CaseError(f"{where}.spec: expected a mapping of Pod spec fields")
    priority = body.get("priority")
    if priority is not None and not isinstance(priority, int):
        raise CaseError(f"{where}.priority: expected an integer")
    host_port = body.get("hostPort")
    if host_port is not None and (
        isinstance(host_port, bool) or not isinstance(host_port, int) or not 0 < host_port < 65536
    ):
        raise CaseError(f"{where}.hostPort: expected a port number, 1 to 65535")
    return PodTemplate(
        name=name,
        cpu=None if body.get("cpu", "100m") is None else str(body.get("cpu", "100m")),
        memory=None if body.get("memory", "500Mi") is None else str(body.get("memory", "500Mi")),
        priority=priority,
        labels=_strings(body.get("labels", {}), f"{where}.labels"),
        spec=spec,
        expect=expect,
        host_port=host_port,
    )


def _churn(raw: Any, where: str, templates: Mapping[str, PodTemplate]) -> Churn:
    body = _mapping(raw, where, _CHURN_KEYS, ("mode", "intervalSeconds"))
    mode = body["mode"]
    if mode not in ("create", "recreate"):
        raise CaseError(f"{where}.mode: must be create or recreate, got {mode!r}")
    interval = body["intervalSeconds"]
    if not isinstance(interval, int | float) or interval <= 0:
        raise CaseError(f"{where}.intervalSeconds: expected a positive number")
    pods = body.get("pods", [])
    if not isinstance(pods, list) or not all(p in templates for p in pods):
        raise CaseError(f"{where}.pods: expected a list of podTemplates names")
    return Churn(
        mode=mode,
        interval=float(interval),
        nodes=_count(body.get("nodes", 0), f"{where}.nodes"),
        pods=tuple(pods),
        services=_count(body.get("services", 0), f"{where}.services"),
    )


def _positive(value: Any, where: str) -> int:
    if _count(value, where) == 0:
        raise CaseError(f"{where}: expected a positive integer, got 0")
    return int(value)


def _dra(raw: Any, where: str) -> DynamicResources:
    body = _mapping(raw, where, _DRA_KEYS, ("devicesPerNode",))
    return DynamicResources(
        devices_per_node=_positive(body["devicesPerNode"], f"{where}.devicesPerNode"),
        driver=str(body.get("driver", _DRA_DRIVER)),
    )


def _gang(raw: Any, where: str) -> Gang:
    body = _mapping(raw, where, _GANG_KEYS, ("size",))
    return Gang(size=_positive(body["size"], f"{where}.size"))


def _extended(
    raw: Any, where: str, dra: DynamicResources | None, workloads: Sequence[Workload]
) -> ExtendedResource:
    body = _mapping(raw, where, _EXTENDED_KEYS, ("name", "source"))
    name, source = body["name"], body["source"]
    if not isinstance(name, str) or "/" not in name:
        raise CaseError(f"{where}.name: expected an extended resource name such as example.com/gpu")
    if source == "devicePlugin":
        if "classes" in body:
            raise CaseError(f"{where}.classes: only a deviceClass source has classes")
        if dra is not None:
            raise CaseError(f"{where}: a devicePlugin source takes no dynamicResources")
        short = [w.name for w in workloads if w.measure_pods > w.nodes]
        if short:
            # Pod i fits node i only: a pod past the last node would fit none.
            raise CaseError(
                f"{where}: devicePlugin needs measurePods <= nodes ({', '.join(short)})"
            )
        return ExtendedResource(name=name, source=source)
    if source == "deviceClass":
        if dra is None:
            raise CaseError(f"{where}: a deviceClass source needs dynamicResources (the devices)")
        classes = _positive(body.get("classes", 0), f"{where}.classes")
        return ExtendedResource(name=name, source=source, classes=classes)
    raise CaseError(f"{where}.source: must be devicePlugin or deviceClass, got {source!r}")


def parse_case(raw: Any, source: Path) -> Case:
    where = source.name
    body = _mapping(raw, where, _CASE_KEYS, ("name", "description", "workloads"))
    node_raw = _mapping(body.get("node", {}), f"{where}.node", _NODE_KEYS)
    default = NodeTemplate()
    zones = node_raw.get("zones", list(default.zones))
    if not isinstance(zones, list):
        raise CaseError(f"{where}.node.zones: expected a list")
    node = NodeTemplate(
        cpu=str(node_raw.get("cpu", default.cpu)),
        memory=str(node_raw.get("memory", default.memory)),
        pods=_count(node_raw.get("pods", default.pods), f"{where}.node.pods"),
        zones=tuple(str(z) for z in zones),
        labels=_strings(node_raw.get("labels", {}), f"{where}.node.labels"),
    )
    raw_templates = body.get("podTemplates", {})
    if not isinstance(raw_templates, dict):
        raise CaseError(f"{where}.podTemplates: expected a mapping")
    templates = {"default": PodTemplate("default")}
    for name, spec in raw_templates.items():
        templates[str(name)] = _template(str(name), spec, f"{where}.podTemplates.{name}")
    init_template = str(body.get("initPods", "default"))
    measure_template = str(body.get("measurePods", "default"))
    for key, name in (("initPods", init_template), ("measurePods", measure_template)):
        if name not in templates:
            raise CaseError(f"{where}.{key}: no pod template named {name!r}")
    churn = _churn(body["churn"], f"{where}.churn", templates) if body.get("churn") else None
    if not isinstance(body["workloads"], list) or not body["workloads"]:
        raise CaseError(f"{where}.workloads: expected a non-empty list")
    workloads = []
    for i, item in enumerate(body["workloads"]):
        w = _mapping(item, f"{where}.workloads[{i}]", _WORKLOAD_KEYS, ("name", "nodes"))
        batching = w.get("batching")
        if batching is not None and not isinstance(batching, bool):
            raise CaseError(f"{where}.workloads[{i}].batching: expected true or false")
        workloads.append(
            Workload(
                name=str(w["name"]),
                nodes=_count(w["nodes"], f"{where}.workloads[{i}].nodes"),
                init_pods=_count(w.get("initPods", 0), f"{where}.workloads[{i}].initPods"),
                measure_pods=_count(w.get("measurePods", 0), f"{where}.workloads[{i}].measurePods"),
                presets=_presets(
                    w.get("presets", [DEFAULT_PRESET]), f"{where}.workloads[{i}].presets"
                ),
                batching=batching,
            )
        )
    backlog = body.get("backlog", False)
    if not isinstance(backlog, bool):
        raise CaseError(f"{where}.backlog: expected true or false")
    if backlog and churn is not None:
        raise CaseError(f"{where}: a backlog case has no churn (nothing runs before the start)")
    if backlog and any(w.init_pods for w in workloads):
        raise CaseError(
            f"{where}: a backlog case has no initPods (its scheduler starts with the backlog)"
        )
    dra = (
        _dra(body["dynamicResources"], f"{where}.dynamicResources")
        if "dynamicResources" in body
        else None
    )
    extended = (
        _extended(body["extendedResource"], f"{where}.extendedResource", dra, workloads)
        if "extendedResource" in body
        else None
    )
    return Case(
        name=str(body["name"]),
        description=" ".join(str(body["description"]).split()),
        node=node,
        templates=templates,
        init_template=init_template,
        measure_template=measure_template,
        workloads=tuple(workloads),
        churn=churn,
        sweep=bool(body.get("sweep", False)),
        dra=dra,
        extended=extended,
        gang=_gang(body["gang"], f"{where}.gang") if "gang" in body else None,
        backlog=backlog,
    )


def load_cases(directory: Path = WORKLOADS_DIR) -> dict[str, Case]:
    """Every case in directory, by name, in file-name order (the default run order)."""
    cases: dict[str, Case] = {}
    for path in sorted(directory.glob("*.yaml")):
        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise CaseError(f"{path.name}: not valid YAML: {exc}") from exc
        case = parse_case(raw, path)
        if case.name in cases:
            raise CaseError(f"{path.name}: case {case.name!r} is also defined elsewhere")
        cases[case.name] = case
    return cases


def select(
    cases: Mapping[str, Case], names: Sequence[str], preset: str = DEFAULT_PRESET
) -> list[tuple[Case, list[Workload]]]:
    """Resolve `Case` or `Case/Workload` names; raise CaseError naming what exists.

    No names means every case's workloads in preset; a bare `Case` means its
    workloads in preset; `Case/Workload` names one workload whatever its presets,
    which is how a workload outside the default run is picked on its own.
    """
    if preset not in PRESETS:
        raise CaseError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    chosen: list[tuple[Case, list[Workload]]] = []
    for item in names or list(cases):
        case_name, _, workload_name = item.partition("/")
        case = cases.get(case_name)
        if case is None:
            raise CaseError(f"unknown case {case_name!r}; known: {', '.join(cases)}")
        if not workload_name:
            in_preset = [w for w in case.workloads if preset in w.presets]
            if in_preset:
                chosen.append((case, in_preset))
            elif names:
                raise CaseError(f"case {case_name} has no workload in the {preset} preset")
            continue
        matches = [w for w in case.workloads if w.name == workload_name]
        if not matches:
            known = ", ".join(w.name for w in case.workloads)
            raise CaseError(f"case {case_name} has no workload {workload_name!r}; known: {known}")
        chosen.append((case, matches))
    return chosen
