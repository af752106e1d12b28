"""Static checks of the Helm chart, the SchedulerPolicy CRD, the Dockerfile and hack/kind.

No cluster and no helm binary are needed. The CRD's openAPIV3Schema is checked the way
the API server handles a create, as closely as pure Python allows:

1. defaults from the schema are filled in (structural defaulting);
2. the schema, stripped of its x-kubernetes-* keys and with unknown fields refused
   (kubectl's strict field validation), is checked with ``jsonschema``;
3. every ``x-kubernetes-validations`` CEL rule is evaluated with ``cel-python`` when it
   is installed (the test that needs it is skipped otherwise).

The expected outcome of every case is written out in the tables below. The same cases
were cross-checked against the real apiextensions-apiserver validation code (v0.37.2).

Run ``python tests/unit/test_chart_static.py --write-values-schema`` after changing the
CRD spec schema: it regenerates ``defaultPolicy.spec`` in values.schema.json from it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.algorithms import FILTERS, SCORES
from podium.framework.profile import DEFAULT_FILTERS, DEFAULT_SCORES, Profile
from podium.handlers.watched import WATCHED
from podium.policy import build_profile

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "podium"
CRD_FILE = CHART / "crds" / "schedulerpolicies.podium.dev.yaml"
VALUES_FILE = CHART / "values.yaml"
VALUES_SCHEMA_FILE = CHART / "values.schema.json"
TEMPLATES = CHART / "templates"
KIND_SCRIPT = REPO / "hack" / "kind" / "up.sh"

# The built-in plugins, as the CRD's CEL rules must name them.
KNOWN_FILTERS = sorted(FILTERS)
KNOWN_SCORES = sorted(SCORES)


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def load_crd() -> dict[str, Any]:
    crd = load_yaml(CRD_FILE)
    assert isinstance(crd, dict)
    return crd


def crd_version(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def crd_schema(crd: dict[str, Any] | None = None) -> dict[str, Any]:
    schema = crd_version(crd or load_crd())["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def to_json_schema(node: Any) -> Any:
    """Structural schema -> draft-07 JSON schema.

    x-kubernetes-* keys go, ``format`` goes (int32/int64 are not JSON-schema formats),
    and every object with ``properties`` refuses unknown fields, as the API server does
    with strict field validation (kubectl's default) instead of pruning them.
    """
    if isinstance(node, list):
        return [to_json_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "format":
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key == "default":
            out[key] = value
        else:
            out[key] = to_json_schema(value)
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """Structural defaulting: absent properties with a default get it, top-down."""
    if isinstance(value, dict) and schema.get("type") == "object":
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(value[name], sub)
    elif isinstance(value, list) and schema.get("type") == "array" and "items" in schema:
        return [apply_defaults(item, schema["items"]) for item in value]
    return value


def schema_errors(obj: Any, schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(to_json_schema(schema))
    return [
        f"{'.'.join(str(p) for p in err.absolute_path)}: {err.validator}: {err.message}"
        for err in validator.iter_errors(obj)
    ]


def _cel_is_sorted(items: Any) -> Any:
    from celpy import celtypes

    return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))


def iter_rules(schema: dict[str, Any], path: str = "") -> Any:
    """Yield (path, schema node, rule dict) for every x-kubernetes-validations rule."""
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, schema, rule
    for name, sub in schema.get("properties", {}).items():
        yield from iter_rules(sub, f"{path}.{name}")
    if "items" in schema:
        yield from iter_rules(schema["items"], f"{path}[]")


def cel_errors(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Evaluate the CEL rules of ``schema`` (and below) against ``value``."""
    import celpy
    from celpy.adapter import json_to_cel

    errors: list[str] = []
    env = celpy.Environment()
    for rule in schema.get("x-kubernetes-validations", []):
        program = env.program(env.compile(rule["rule"]), functions={"isSorted": _cel_is_sorted})
        result = program.evaluate({"self": json_to_cel(value)})
        if not isinstance(result, celpy.celtypes.BoolType):
            errors.append(f"{path}: rule did not evaluate to a bool: {result!r}")
        elif not bool(result):
            errors.append(f"{path}: {rule.get('message', rule['rule'])}")
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                errors += cel_errors(value[name], sub, f"{path}.{name}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += cel_errors(item, schema["items"], f"{path}[{i}]")
    return errors


def policy_object(spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "podium.dev/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": "test"},
    }
    if spec is not None:
        obj["spec"] = copy.deepcopy(spec)
    return obj


def admit_policy(spec: Any, *, with_cel: bool) -> tuple[dict[str, Any], list[str]]:
    """Default, then validate a SchedulerPolicy like the API server; return (obj, errors)."""
    schema = crd_schema()
    obj = apply_defaults(policy_object(spec), schema)
    errors = schema_errors(obj, schema)
    if with_cel and not errors:
        errors += cel_errors(obj, schema)
    return obj, errors


def derive_policy_spec_values_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The values.schema.json schema of ``defaultPolicy.spec``, derived from the CRD.

    It is the CRD spec schema without schedulerName and mode (which have their own
    values), without defaults, formats and x-kubernetes-* keys, and with unknown keys
    refused at every level. CEL rules are left to the API server.
    """

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(x) for x in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key.startswith("x-kubernetes-") or key in ("format", "default"):
                continue
            if key == "properties":
                out[key] = {name: convert(sub) for name, sub in value.items()}
            else:
                out[key] = convert(value)
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
        return out

    spec = copy.deepcopy(crd_schema(crd)["properties"]["spec"])
    for name in ("schedulerName", "mode"):
        del spec["properties"][name]
    spec["description"] = (
        "Further SchedulerPolicy spec fields; the CRD's own schema and CEL rules apply too."
    )
    derived = convert(spec)
    assert isinstance(derived, dict)
    return derived


def values_schema() -> dict[str, Any]:
    with VALUES_SCHEMA_FILE.open(encoding="utf-8") as f:
        schema = json.load(f)
    assert isinstance(schema, dict)
    return schema


def chart_values() -> dict[str, Any]:
    values = load_yaml(VALUES_FILE)
    assert isinstance(values, dict)
    return values


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's value coalescing: maps merge, everything else (lists too) replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = copy.deepcopy(value)
    return out


def default_policy_spec(values: dict[str, Any]) -> dict[str, Any]:
    """The spec that templates/schedulerpolicy.yaml renders from ``values``."""
    policy = values["defaultPolicy"]
    spec = {"schedulerName": policy["schedulerName"], "mode": policy["mode"]}
    spec.update(copy.deepcopy(policy.get("spec") or {}))
    return spec


def template_text(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def strip_template(text: str) -> Any:
    """Make a simple template parseable YAML: drop control-only lines, stub expressions.

    Both branches of every ``if`` are kept, so this yields the most permissive render.
    """
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"\{\{-?.*?-?\}\}", stripped) and not re.search(r"[:\[]", stripped):
            continue
        if re.fullmatch(r"\{\{-? *(include|toYaml)\b.*\}\}", stripped):
            continue
        lines.append(re.sub(r"\{\{.*?\}\}", "STUB", line))
    return yaml.safe_load("\n".join(lines))


# --------------------------------------------------------------------------------------
# CRD: identity and structure
# --------------------------------------------------------------------------------------


def test_crd_identity() -> None:
    crd = load_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "schedulerpolicies.podium.dev"
    spec = crd["spec"]
    assert spec["group"] == "podium.dev"
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == "SchedulerPolicy"
    assert spec["names"]["plural"] == "schedulerpolicies"
    assert spec["names"]["singular"] == "schedulerpolicy"
    assert spec["names"]["shortNames"] == ["spol"]
    version = crd_version(crd)
    assert version["name"] == "v1alpha1"
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}


def test_crd_printer_columns() -> None:
    columns = {c["name"]: c for c in crd_version(load_crd())["additionalPrinterColumns"]}
    expected = {
        "SchedulerName": (".spec.schedulerName", "string"),
        "Accepted": ('.status.conditions[?(@.type=="Accepted")].status', "string"),
        "Plugins": (".status.enabledPlugins", "integer"),
        "Age": (".metadata.creationTimestamp", "date"),
    }
    for name, (json_path, kind) in expected.items():
        assert columns[name]["jsonPath"] == json_path, name
        assert columns[name]["type"] == kind, name


def _walk(node: dict[str, Any], path: str = "") -> Any:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from _walk(node["items"], f"{path}[]")


def test_crd_schema_is_structural_and_bounded() -> None:
    """Every node has a type, every list a maxItems, every string a maxLength or enum.

    Bounds keep the CEL cost estimate inside the API server's budget.
    """
    problems = []
    for path, node in _walk(crd_schema()):
        if path == ".metadata":
            continue
        kind = node.get("type")
        if kind is None:
            problems.append(f"{path}: no type")
        if kind == "array":
            if "maxItems" not in node:
                problems.append(f"{path}: array without maxItems")
            if "items" not in node:
                problems.append(f"{path}: array without items")
        if kind == "string" and path.startswith((".spec", ".status")):
            bounded = "maxLength" in node or "enum" in node or node.get("format") == "date-time"
            if not bounded:
                problems.append(f"{path}: string without maxLength or enum")
        if kind == "object" and "properties" not in node and path != ".spec.pluginArgs":
            problems.append(f"{path}: object without properties")
    assert problems == []


def test_crd_cel_rules_compile() -> None:
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    rules = list(iter_rules(crd_schema()))
    paths = sorted({path for path, _, _ in rules})
    assert paths == [
        ".spec",
        ".spec.extensions",
        ".spec.extensions[].name",
        ".spec.filters",
        ".spec.filters[].name",
        ".spec.pluginArgs.defaultPreemption",
        ".spec.pluginArgs.nodeResourcesFit",
        ".spec.pluginArgs.nodeResourcesFit.resources",
        ".spec.pluginArgs.nodeResourcesFit.shape",
        ".spec.pluginArgs.podTopologySpread",
        ".spec.pluginArgs.podTopologySpread.defaultConstraints",
        ".spec.schedulerName",
        ".spec.scores",
        ".spec.scores[].name",
    ]
    for path, _, rule in rules:
        env.compile(rule["rule"])
        assert rule.get("message"), f"{path}: every rule needs a message"


# kube-scheduler's defaults (pkg/scheduler/apis/config/v1/defaults.go) as the CRD fills them in.
DEFAULTED_EMPTY_SPEC = {
    "schedulerName": "podium",
    "mode": "Active",
    "percentageOfNodesToScore": 0,
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 10,
    "unschedulableFlushSeconds": 300,
    "postSuccessEvents": True,
}


@pytest.mark.parametrize("spec", [None, {}], ids=["no-spec", "empty-spec"])
def test_crd_defaults_equal_kube_scheduler(spec: Any) -> None:
    obj, errors = admit_policy(spec, with_cel=False)
    assert errors == []
    assert obj["spec"] == DEFAULTED_EMPTY_SPEC


def _effective(profile: Profile) -> dict[str, Any]:
    """What each plugin of a profile derived from its args, and the preemption bounds."""
    plugins = [*profile.filters, *(plugin for plugin, _ in profile.scores)]
    out: dict[str, Any] = {
        p.name: {k: v for k, v in vars(p).items() if k != "args"} for p in plugins
    }
    out["preemption"] = (
        profile.min_candidate_nodes_percentage,
        profile.min_candidate_nodes_absolute,
    )
    return out


def test_crd_plugin_args_defaults_are_podiums_own() -> None:
    """The CRD fills in each pluginArgs block with what Podium assumes when it is absent."""
    blocks = crd_schema()["properties"]["spec"]["properties"]["pluginArgs"]["properties"]
    obj, errors = admit_policy({"pluginArgs": {name: {} for name in blocks}}, with_cel=False)
    assert errors == []
    defaulted = obj["spec"]["pluginArgs"]
    assert sum(1 for args in defaulted.values() if args) >= 4  # nodeResourcesFit, ...
    assert _effective(build_profile({"pluginArgs": defaulted})) == _effective(build_profile({}))


def test_crd_known_plugin_lists() -> None:
    """The CEL rules name exactly the known filter and score plugins."""
    spec = crd_schema()["properties"]["spec"]["properties"]
    for field, known in (("filters", KNOWN_FILTERS), ("scores", KNOWN_SCORES)):
        (rule,) = spec[field]["items"]["properties"]["name"]["x-kubernetes-validations"]
        listed = re.findall(r"'([A-Za-z]+)'", rule["rule"])
        assert sorted(listed) == known, field


def test_crd_describes_the_default_profile() -> None:
    """The filters and scores descriptions spell out profile.py's defaults, in order."""
    spec = crd_schema()["properties"]["spec"]["properties"]
    filters = " ".join(spec["filters"]["description"].split())
    assert ", ".join(DEFAULT_FILTERS) + "." in filters
    scores = " ".join(spec["scores"]["description"].split())
    assert "(" + ", ".join(f"{n} {w}" for n, w in DEFAULT_SCORES) + ")" in scores


# --------------------------------------------------------------------------------------
# CRD: admission of SchedulerPolicy specs (table-driven)
# --------------------------------------------------------------------------------------

# (id, spec, expected): expected is None when the spec is accepted, else a substring of
# an error it must produce. SCHEMA cases fail the OpenAPI schema; CEL cases pass the
# schema and fail a CEL rule.
SCHEMA_CASES: list[tuple[str, Any, str | None]] = [
    ("empty", {}, None),
    (
        "full-valid",
        {
            "schedulerName": "podium.batch-1",
            "mode": "DryRun",
            "filters": [{"name": n} for n in KNOWN_FILTERS] + [{"name": "example.com/GpuFirst"}],
            "scores": [{"name": n, "weight": 100} for n in KNOWN_SCORES],
            "pluginArgs": {
                "nodeResourcesFit": {
                    "strategy": "RequestedToCapacityRatio",
                    "resources": [{"name": "nvidia.com/gpu", "weight": 5}, {"name": "cpu"}],
                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
                },
                "podTopologySpread": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "ScheduleAnyway",
                        }
                    ],
                },
                "interPodAffinity": {"hardPodAffinityWeight": 0},
                "defaultPreemption": {
                    "minCandidateNodesPercentage": 0,
                    "minCandidateNodesAbsolute": 1,
                },
            },
            "percentageOfNodesToScore": 100,
            "podInitialBackoffSeconds": 3600,
            "podMaxBackoffSeconds": 3600,
            "unschedulableFlushSeconds": 1,
            "postSuccessEvents": False,
        },
        None,
    ),
    ("scheduler-name-uppercase", {"schedulerName": "Podium"}, "does not match"),
    ("scheduler-name-too-long", {"schedulerName": "a" * 64}, "is too long"),
    ("scheduler-name-empty", {"schedulerName": ""}, "should be non-empty"),
    ("mode-unknown", {"mode": "Passive"}, "is not one of"),
    ("filters-too-many", {"filters": [{"name": f"x.io/P{i}"} for i in range(33)]}, "too long"),
    ("filter-without-name", {"filters": [{}]}, "'name' is a required property"),
    ("filter-unknown-field", {"filters": [{"name": "NodeName", "weight": 1}]}, "Additional"),
    ("score-weight-zero", {"scores": [{"name": "ImageLocality", "weight": 0}]}, "minimum"),
    ("score-weight-101", {"scores": [{"name": "ImageLocality", "weight": 101}]}, "maximum"),
    ("score-weight-string", {"scores": [{"name": "ImageLocality", "weight": "1"}]}, "type"),
    ("parallelism-is-not-a-setting", {"parallelism": 16}, "Additional"),
    ("percentage-101", {"percentageOfNodesToScore": 101}, "maximum"),
    ("percentage-negative", {"percentageOfNodesToScore": -1}, "minimum"),
    ("initial-backoff-zero", {"podInitialBackoffSeconds": 0}, "minimum"),
    ("max-backoff-3601", {"podMaxBackoffSeconds": 3601}, "maximum"),
    ("flush-zero", {"unschedulableFlushSeconds": 0}, "minimum"),
    ("post-success-events-string", {"postSuccessEvents": "yes"}, "type"),
    ("unknown-spec-field", {"profiles": []}, "Additional"),
    ("strategy-unknown", {"pluginArgs": {"nodeResourcesFit": {"strategy": "Random"}}}, "one of"),
    (
        "resource-weight-zero",
        {"pluginArgs": {"nodeResourcesFit": {"resources": [{"name": "cpu", "weight": 0}]}}},
        "minimum",
    ),
    (
        "resource-name-too-long",
        {"pluginArgs": {"nodeResourcesFit": {"resources": [{"name": "a" * 254}]}}},
        "too long",
    ),
    (
        "resources-too-many",
        {"pluginArgs": {"nodeResourcesFit": {"resources": [{"name": f"r{i}"} for i in range(17)]}}},
        "too long",
    ),
    (
        "shape-score-11",
        {
            "pluginArgs": {
                "nodeResourcesFit": {
                    "strategy": "RequestedToCapacityRatio",
                    "shape": [{"utilization": 0, "score": 11}],
                }
            }
        },
        "maximum",
    ),
    (
        "shape-utilization-101",
        {
            "pluginArgs": {
                "nodeResourcesFit": {
                    "strategy": "RequestedToCapacityRatio",
                    "shape": [{"utilization": 101, "score": 1}],
                }
            }
        },
        "maximum",
    ),
    (
        "defaulting-type-unknown",
        {"pluginArgs": {"podTopologySpread": {"defaultingType": "None"}}},
        "one of",
    ),
    (
        "constraint-max-skew-zero",
        {
            "pluginArgs": {
                "podTopologySpread": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 0, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}
                    ],
                }
            }
        },
        "minimum",
    ),
    (
        "constraint-when-unsatisfiable-unknown",
        {
            "pluginArgs": {
                "podTopologySpread": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "Maybe"}
                    ],
                }
            }
        },
        "one of",
    ),
    (
        "constraints-too-many",
        {
            "pluginArgs": {
                "podTopologySpread": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 1, "topologyKey": f"k{i}", "whenUnsatisfiable": "DoNotSchedule"}
                        for i in range(9)
                    ],
                }
            }
        },
        "too long",
    ),
    (
        "hard-pod-affinity-weight-101",
        {"pluginArgs": {"interPodAffinity": {"hardPodAffinityWeight": 101}}},
        "maximum",
    ),
    (
        "min-candidate-percentage-101",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesPercentage": 101}}},
        "maximum",
    ),
    (
        "min-candidate-absolute-negative",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesAbsolute": -1}}},
        "minimum",
    ),
    ("plugin-args-unknown-plugin", {"pluginArgs": {"imageLocality": {}}}, "Additional"),
    ("decision-records-top-21", {"decisionRecords": {"topNodes": 21}}, "maximum"),
    ("decision-records-top-negative", {"decisionRecords": {"topNodes": -1}}, "minimum"),
    ("decision-records-enabled-string", {"decisionRecords": {"enabled": "yes"}}, "boolean"),
    ("shadow-of-bad-name", {"mode": "DryRun", "shadowOf": "Live_Policy"}, "pattern"),
]

CEL_CASES: list[tuple[str, Any, str | None]] = [
    ("custom-filter", {"filters": [{"name": "example.com/GpuFirst"}]}, None),
    ("custom-score", {"scores": [{"name": "podium.dev/BinPack2", "weight": 7}]}, None),
    ("filters-empty-list", {"filters": []}, None),
    ("score-without-weight", {"scores": [{"name": "NodeAffinity"}]}, None),
    ("filter-unknown", {"filters": [{"name": "GpuFirst"}]}, "unknown filter plugin"),
    ("filter-score-only-name", {"filters": [{"name": "ImageLocality"}]}, "unknown filter plugin"),
    ("filter-bad-custom-prefix", {"filters": [{"name": "Example.com/X"}]}, "unknown filter"),
    ("filter-custom-no-domain", {"filters": [{"name": "/GpuFirst"}]}, "unknown filter plugin"),
    ("filter-custom-two-slashes", {"filters": [{"name": "a/b/C"}]}, "unknown filter plugin"),
    ("score-unknown", {"scores": [{"name": "NodeName", "weight": 1}]}, "unknown score plugin"),
    (
        "filters-duplicate",
        {"filters": [{"name": "NodeName"}, {"name": "NodePorts"}, {"name": "NodeName"}]},
        "filter plugin names must be unique",
    ),
    (
        "scores-duplicate",
        {"scores": [{"name": "ImageLocality", "weight": 1}, {"name": "ImageLocality"}]},
        "score plugin names must be unique",
    ),
    ("default-scheduler-name", {"schedulerName": "default-scheduler"}, "belongs to kube-sch"),
    ("backoff-initial-above-max", {"podInitialBackoffSeconds": 11}, "less than or equal"),
    (
        "backoff-initial-above-explicit-max",
        {"podInitialBackoffSeconds": 30, "podMaxBackoffSeconds": 20},
        "less than or equal",
    ),
    ("backoff-equal", {"podInitialBackoffSeconds": 10, "podMaxBackoffSeconds": 10}, None),
    (
        "rtcr-without-shape",
        {"pluginArgs": {"nodeResourcesFit": {"strategy": "RequestedToCapacityRatio"}}},
        "shape is required",
    ),
    (
        "shape-with-least-allocated",
        {"pluginArgs": {"nodeResourcesFit": {"shape": [{"utilization": 0, "score": 0}]}}},
        "shape is required",
    ),
    (
        "shape-not-increasing",
        {
            "pluginArgs": {
                "nodeResourcesFit": {
                    "strategy": "RequestedToCapacityRatio",
                    "shape": [{"utilization": 50, "score": 5}, {"utilization": 10, "score": 1}],
                }
            }
        },
        "strictly increasing",
    ),
    (
        "shape-duplicate-utilization",
        {
            "pluginArgs": {
                "nodeResourcesFit": {
                    "strategy": "RequestedToCapacityRatio",
                    "shape": [{"utilization": 50, "score": 5}, {"utilization": 50, "score": 1}],
                }
            }
        },
        "strictly increasing",
    ),
    (
        "resources-duplicate",
        {"pluginArgs": {"nodeResourcesFit": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}}},
        "resource names must be unique",
    ),
    (
        "constraints-with-system",
        {
            "pluginArgs": {
                "podTopologySpread": {
                    "defaultConstraints": [
                        {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}
                    ]
                }
            }
        },
        "only be set when defaultingType is List",
    ),
    (
        "list-without-constraints",
        {"pluginArgs": {"podTopologySpread": {"defaultingType": "List"}}},
        None,
    ),
    (
        "constraints-duplicate",
        {
            "pluginArgs": {
                "podTopologySpread": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"},
                        {"maxSkew": 2, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"},
                    ],
                }
            }
        },
        "may appear only once",
    ),
    (
        "constraints-same-key-different-action",
        {
            "pluginArgs": {
                "podTopologySpread": {
                    "defaultingType": "List",
                    "defaultConstraints": [
                        {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"},
                        {"maxSkew": 2, "topologyKey": "k", "whenUnsatisfiable": "ScheduleAnyway"},
                    ],
                }
            }
        },
        None,
    ),
    (
        "preemption-both-zero",
        {
            "pluginArgs": {
                "defaultPreemption": {
                    "minCandidateNodesPercentage": 0,
                    "minCandidateNodesAbsolute": 0,
                }
            }
        },
        "cannot both be zero",
    ),
    ("decision-records-off", {"decisionRecords": {"enabled": False, "topNodes": 0}}, None),
    ("shadow-of-dry-run", {"mode": "DryRun", "schedulerName": "shadow", "shadowOf": "live"}, None),
    ("shadow-of-active", {"mode": "Active", "shadowOf": "live"}, "only allowed with mode DryRun"),
    ("shadow-of-default-mode", {"shadowOf": "live"}, "only allowed with mode DryRun"),
    ("shadow-of-itself", {"mode": "DryRun", "shadowOf": "podium"}, "another schedulerName"),
    (
        "preemption-percentage-zero",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesPercentage": 0}}},
        None,
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [pytest.param(spec, exp, id=name) for name, spec, exp in SCHEMA_CASES],
)
def test_policy_schema(spec: Any, expected: str | None) -> None:
    _, errors = admit_policy(spec, with_cel=False)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(
    ("spec", "expected"),
    [pytest.param(spec, exp, id=name) for name, spec, exp in SCHEMA_CASES + CEL_CASES],
)
def test_policy_schema_and_cel(spec: Any, expected: str | None) -> None:
    pytest.importorskip("celpy")
    _, errors = admit_policy(spec, with_cel=True)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(("spec", "expected"), [pytest.param(s, e, id=n) for n, s, e in CEL_CASES])
def test_cel_cases_pass_the_schema(spec: Any, expected: str | None) -> None:
    """CEL cases must be schema-valid, so that each one tests its rule alone."""
    _, errors = admit_policy(spec, with_cel=False)
    assert errors == []


STATUS_CASES: list[tuple[str, Any, str | None]] = [
    (
        "accepted",
        {
            "observedGeneration": 3,
            "enabledPlugins": 19,
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "True",
                    "reason": "Loaded",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                    "observedGeneration": 3,
                }
            ],
        },
        None,
    ),
    (
        "condition-status-bad",
        {
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "Yes",
                    "reason": "Loaded",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        },
        "is not one of",
    ),
    (
        "condition-without-reason",
        {
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "True",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        },
        "'reason' is a required property",
    ),
    ("enabled-plugins-negative", {"enabledPlugins": -1}, "minimum"),
]


@pytest.mark.parametrize(
    ("status", "expected"), [pytest.param(s, e, id=n) for n, s, e in STATUS_CASES]
)
def test_policy_status(status: Any, expected: str | None) -> None:
    schema = crd_schema()
    obj = apply_defaults(policy_object({}), schema)
    obj["status"] = status
    errors = schema_errors(obj, schema)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


# --------------------------------------------------------------------------------------
# values.yaml and values.schema.json
# --------------------------------------------------------------------------------------


def test_values_schema_is_draft7_and_strict() -> None:
    schema = values_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    # Every object with declared properties refuses unknown keys.
    loose = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "properties" in node and node.get("additionalProperties") is not False:
                loose.append(path)
            for key, sub in node.items():
                walk(sub, f"{path}/{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}/{i}")

    walk(schema, "")
    # The if/then branch only narrows replicaCount; it adds no keys.
    assert [p for p in loose if not p.startswith(("/if", "/then"))] == []


def test_values_yaml_matches_schema() -> None:
    errors = list(jsonschema.Draft7Validator(values_schema()).iter_errors(chart_values()))
    assert [e.message for e in errors] == []


def test_values_schema_covers_every_value() -> None:
    """Every key of values.yaml is declared in the schema (and so typo-checked)."""
    schema = values_schema()
    missing = []

    def walk(values: dict[str, Any], node: dict[str, Any], path: str) -> None:
        for key, value in values.items():
            sub = node.get("properties", {}).get(key)
            if sub is None:
                missing.append(f"{path}.{key}")
            elif isinstance(value, dict) and "properties" in sub:
                walk(value, sub, f"{path}.{key}")

    walk(chart_values(), schema, "")
    assert missing == []


def test_values_schema_policy_spec_in_sync_with_crd() -> None:
    derived = derive_policy_spec_values_schema(load_crd())
    actual = values_schema()["properties"]["defaultPolicy"]["properties"]["spec"]
    assert actual == derived, (
        "values.schema.json defaultPolicy.spec is stale; run "
        "`python tests/unit/test_chart_static.py --write-values-schema`"
    )


def test_values_yaml_has_a_comment_above_every_key() -> None:
    lines = VALUES_FILE.read_text(encoding="utf-8").splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        if not re.match(r"^\s*[A-Za-z][A-Za-z0-9_-]*:", line):
            continue
        previous = lines[i - 1].strip() if i else ""
        if not previous.startswith("#"):
            undocumented.append(f"{i + 1}: {line.strip()}")
    assert undocumented == []


# (id, override merged over values.yaml, expected): None = accepted, else a substring of
# one of the errors.
VALUES_CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("defaults", {}, None),
    (
        "single-replica-no-leader-election",
        {"replicaCount": 1, "leaderElection": {"enabled": False}},
        None,
    ),
    ("dry-run-policy", {"defaultPolicy": {"mode": "DryRun", "schedulerName": "podium-dry"}}, None),
    (
        "policy-spec-fields",
        {
            "defaultPolicy": {
                "spec": {
                    "filters": [{"name": "NodeName"}, {"name": "example.com/GpuFirst"}],
                    "scores": [{"name": "NodeResourcesFit", "weight": 5}],
                    "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
                }
            }
        },
        None,
    ),
    ("no-preemption", {"preemption": {"enabled": False}}, None),
    ("pdb-percentage", {"podDisruptionBudget": {"minAvailable": "50%"}}, None),
    ("resources-numbers", {"resources": {"requests": {"cpu": 0.5, "memory": "1Gi"}}}, None),
    ("typo-top-level", {"replicas": 3}, "Additional properties"),
    ("typo-nested", {"image": {"repo": "x"}}, "Additional properties"),
    ("replicas-zero", {"replicaCount": 0}, "minimum"),
    ("replicas-string", {"replicaCount": "2"}, "is not of type 'integer'"),
    ("replicas-without-leader-election", {"leaderElection": {"enabled": False}}, "maximum"),
    ("pull-policy-bad", {"image": {"pullPolicy": "Sometimes"}}, "is not one of"),
    ("log-format-bad", {"logFormat": "xml"}, "is not one of"),
    ("metrics-port-privileged", {"metrics": {"port": 80}}, "minimum"),
    ("lease-name-bad", {"leaderElection": {"leaseName": "Podium_Lease"}}, "does not match"),
    ("anti-affinity-bad", {"podAntiAffinity": "sometimes"}, "is not one of"),
    ("cpu-quantity-bad", {"resources": {"requests": {"cpu": "1.5.5"}}}, "is not valid under any"),
    ("run-as-root", {"podSecurityContext": {"runAsNonRoot": False}}, "was expected"),
    ("run-as-uid-0", {"podSecurityContext": {"runAsUser": 0}}, "minimum"),
    (
        "seccomp-unconfined",
        {"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
        "one of",
    ),
    (
        "privilege-escalation",
        {"securityContext": {"allowPrivilegeEscalation": True}},
        "was expected",
    ),
    ("privileged", {"securityContext": {"privileged": True}}, "was expected"),
    (
        "capabilities-not-dropped",
        {"securityContext": {"capabilities": {"drop": []}}},
        "valid under",
    ),
    (
        "capability-added",
        {"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}},
        "is not one of",
    ),
    ("policy-mode-bad", {"defaultPolicy": {"mode": "Off"}}, "is not one of"),
    ("policy-default-scheduler", {"defaultPolicy": {"schedulerName": "default-scheduler"}}, "not"),
    ("policy-spec-typo", {"defaultPolicy": {"spec": {"paralelism": 8}}}, "Additional properties"),
    ("policy-spec-mode-inside", {"defaultPolicy": {"spec": {"mode": "DryRun"}}}, "Additional"),
    (
        "policy-spec-weight-bad",
        {"defaultPolicy": {"spec": {"scores": [{"name": "X", "weight": 0}]}}},
        "minimum",
    ),
    (
        "policy-spec-backoff-bad",
        {"defaultPolicy": {"spec": {"podMaxBackoffSeconds": 0}}},
        "minimum",
    ),
    ("service-type-bad", {"metrics": {"service": {"type": "ExternalName"}}}, "is not one of"),
]


@pytest.mark.parametrize(
    ("override", "expected"), [pytest.param(o, e, id=n) for n, o, e in VALUES_CASES]
)
def test_values_schema_cases(override: dict[str, Any], expected: str | None) -> None:
    values = deep_merge(chart_values(), override)
    messages = [e.message for e in jsonschema.Draft7Validator(values_schema()).iter_errors(values)]
    if expected is None:
        assert messages == []
    else:
        assert any(expected in m for m in messages), messages


def ci_values_files() -> list[Path]:
    return sorted((CHART / "ci").glob("*-values.yaml"))


def test_ci_values_files_exist() -> None:
    assert len(ci_values_files()) >= 3


@pytest.mark.parametrize("path", ci_values_files(), ids=lambda p: p.name)
def test_ci_values_files_are_valid(path: Path) -> None:
    """Each ci/*-values.yaml (ct lint's convention) passes the values schema and its
    default policy passes the CRD."""
    values = deep_merge(chart_values(), load_yaml(path) or {})
    messages = [e.message for e in jsonschema.Draft7Validator(values_schema()).iter_errors(values)]
    assert messages == []
    if values["defaultPolicy"]["enabled"]:
        _, errors = admit_policy(default_policy_spec(values), with_cel=False)
        assert errors == []


# --------------------------------------------------------------------------------------
# Templates (static: no helm binary)
# --------------------------------------------------------------------------------------


def test_chart_yaml() -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "podium"
    assert chart["version"] == "0.1.0"
    assert chart["appVersion"] == "0.1.0"


def test_default_policy_template() -> None:
    text = template_text("schedulerpolicy.yaml")
    assert text.startswith("{{- if .Values.defaultPolicy.enabled }}")
    assert text.rstrip().endswith("{{- end }}")
    assert "name: {{ .Values.defaultPolicy.name }}" in text
    assert "schedulerName: {{ .Values.defaultPolicy.schedulerName | quote }}" in text
    assert "mode: {{ .Values.defaultPolicy.mode | quote }}" in text
    assert "{{- with .Values.defaultPolicy.spec }}" in text
    doc = strip_template(text)
    assert doc["apiVersion"] == "podium.dev/v1alpha1"
    assert doc["kind"] == "SchedulerPolicy"
    assert "namespace" not in doc["metadata"], "SchedulerPolicy is cluster-scoped"


def test_default_policy_from_values_is_admitted() -> None:
    values = chart_values()
    assert values["defaultPolicy"]["enabled"] is True
    assert values["defaultPolicy"]["name"] == "podium"
    spec = default_policy_spec(values)
    assert spec == {"schedulerName": "podium", "mode": "Active"}
    obj, errors = admit_policy(spec, with_cel=False)
    assert errors == []
    assert obj["spec"] == DEFAULTED_EMPTY_SPEC


def test_security_context_defaults() -> None:
    values = chart_values()
    assert values["podSecurityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert values["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_deployment_template_security() -> None:
    text = template_text("deployment.yaml")
    # Pod level (8 spaces under spec.template.spec) and container level (12 spaces).
    assert (
        "      securityContext:\n        {{- toYaml .Values.podSecurityContext | nindent 8 }}"
        in text
    )
    assert (
        "          securityContext:\n            {{- toYaml .Values.securityContext | nindent 12 }}"
        in text
    )
    assert "mountPath: /tmp" in text
    assert "emptyDir:" in text
    assert "schedulerName:" not in text, "Podium's own pods use the default scheduler"
    for template in TEMPLATES.glob("*.yaml"):
        body = template.read_text(encoding="utf-8")
        for forbidden in ("hostPath", "hostNetwork", "hostPID", "hostIPC", "hostPort"):
            assert forbidden not in body, f"{template.name}: {forbidden}"


def test_deployment_template_args_and_probes() -> None:
    text = template_text("deployment.yaml")
    for fragment in (
        "- run",
        "- --scheduler-name\n            - {{ .Values.defaultPolicy.schedulerName | quote }}",
        "- --leader-elect",
        "- --lease-name\n            - {{ .Values.leaderElection.leaseName | quote }}",
        "- --lease-namespace\n            - $(POD_NAMESPACE)",
        "- --metrics-port\n            - {{ .Values.metrics.port | quote }}",
        "- --log-format\n            - {{ .Values.logFormat | quote }}",
        "- --disable-preemption",
        "fieldPath: metadata.namespace",
        "path: /healthz\n              port: metrics",
        "path: /readyz\n              port: metrics",
    ):
        assert fragment in text, fragment


def _rules(template: str) -> list[dict[str, Any]]:
    doc = strip_template(template_text(template))
    rules = doc["rules"]
    assert isinstance(rules, list)
    return rules


# Every verb the ClusterRole grants beyond list and watch, and the code that uses it. With
# the list and watch rules derived from what Podium watches, a grant nothing uses, or a
# watch without its grant, fails the test below.
USES: dict[tuple[str, str, str], str] = {
    ("", "pods", "get"): "Binder: re-read a pod whose Binding answer was lost",
    ("", "pods/binding", "create"): "Binder: the Binding",
    ("", "pods/status", "patch"): "PodScheduled=False and nominatedNodeName",
    ("", "pods", "delete"): "preemptor: delete a victim",
    ("", "pods/eviction", "create"): "preemptor: evict a victim under a PDB",
    ("", "events", "create"): "EventRecorder (core/v1 events)",
    ("", "events", "patch"): "EventRecorder: a series' count",
    ("events.k8s.io", "events", "create"): "preemptor: the Preempted event",
    ("events.k8s.io", "events", "patch"): "EventRecorder (events.k8s.io)",
    ("", "persistentvolumeclaims", "get"): "VolumeBinder: re-read after a conflict",
    ("", "persistentvolumes", "get"): "VolumeBinder: re-read after a conflict",
    ("", "persistentvolumeclaims", "patch"): "VolumeBinder: selected-node annotation",
    ("", "persistentvolumeclaims", "update"): "VolumeBinder: claimRef and bind annotations",
    ("", "persistentvolumes", "update"): "VolumeBinder: claimRef",
    ("", "persistentvolumeclaims/status", "update"): "VolumeBinder: phase Bound",
    ("", "persistentvolumes/status", "update"): "VolumeBinder: phase Bound",
    ("resource.k8s.io", "resourceclaims", "get"): "ClaimBinder: re-read after a conflict",
    ("resource.k8s.io", "resourceclaims", "update"): "ClaimBinder: the finalizer",
    ("resource.k8s.io", "resourceclaims", "create"): "extended_binder: the extended claim",
    ("resource.k8s.io", "resourceclaims", "delete"): "extended_binder: Unreserve, PostFilter",
    ("resource.k8s.io", "resourceclaims/status", "update"): "ClaimBinder: allocation",
    ("resource.k8s.io", "resourceclaims/status", "patch"): "ClaimBinder: Unreserve",
    ("resource.k8s.io", "resourceclaims/binding", "update"): "ClaimBinder: allocation (1.37 check)",
    ("resource.k8s.io", "resourceclaims/binding", "patch"): "ClaimBinder: Unreserve (1.37 check)",
    ("scheduling.k8s.io", "podgroups/status", "patch"): "PodGroupInitiallyScheduled",
    ("podium.dev", "schedulerpolicies/status", "patch"): "the policy's conditions",
}
# Watched outside handlers/watched.py: the policies (handlers/policies.py), and the CRDs
# through which kopf discovers the resources it serves.
OTHER_WATCHES = [
    ("podium.dev", "schedulerpolicies"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
]


def test_cluster_role_grants_exactly_what_podium_uses() -> None:
    rules = _rules("clusterrole.yaml")
    granted = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for rule in rules:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert "resourceNames" not in rule
    watched = [(row.kind.group, row.kind.plural) for row in WATCHED] + OTHER_WATCHES
    reads = {(group, plural, verb) for group, plural in watched for verb in ("list", "watch")}
    unused = granted - reads - set(USES)
    assert not unused, f"granted, never used: {sorted(unused)}"
    missing = (reads | set(USES)) - granted
    assert not missing, f"used, never granted: {sorted(missing)}"


def test_pod_delete_only_with_preemption() -> None:
    text = template_text("clusterrole.yaml")
    block = text.split("{{- if .Values.preemption.enabled }}", 1)[1].split("{{- end }}", 1)[0]
    assert '"delete"' in block
    assert '"pods/eviction"' in block
    # Outside the block only the extended-resource claims Podium itself creates are deleted.
    claims = '["get", "list", "watch", "create", "update", "delete"]'
    outside = text.replace(block, "").replace(claims, "")
    assert '"delete"' not in outside


def test_lease_role_is_namespaced_and_name_restricted() -> None:
    doc = strip_template(template_text("role.yaml"))
    assert doc["kind"] == "Role"
    assert doc["metadata"]["namespace"] == "STUB"
    create, named = doc["rules"]
    assert create == {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["create"],
    }
    assert named["verbs"] == ["get", "update", "patch"]
    assert named["resourceNames"] == ["STUB"]
    assert "resourceNames: [{{ .Values.leaderElection.leaseName | quote }}]" in template_text(
        "role.yaml"
    )
    assert chart_values()["leaderElection"]["leaseName"] == "podium"


def test_pdb_only_with_several_replicas() -> None:
    text = template_text("poddisruptionbudget.yaml")
    assert text.startswith(
        "{{- if and .Values.podDisruptionBudget.enabled (gt (int .Values.replicaCount) 1) }}"
    )
    assert chart_values()["podDisruptionBudget"]["minAvailable"] == 1
    assert chart_values()["replicaCount"] == 2


def test_templates_expected_set() -> None:
    names = sorted(p.name for p in TEMPLATES.iterdir())
    assert names == [
        "NOTES.txt",
        "_helpers.tpl",
        "clusterrole.yaml",
        "clusterrolebinding.yaml",
        "deployment.yaml",
        "grafana-dashboard.yaml",
        "poddisruptionbudget.yaml",
        "prometheusrule.yaml",
        "role.yaml",
        "rolebinding.yaml",
        "schedulerpolicy.yaml",
        "service.yaml",
        "serviceaccount.yaml",
        "servicemonitor.yaml",
    ]


# --------------------------------------------------------------------------------------
# Dockerfile and hack/kind
# --------------------------------------------------------------------------------------


def test_dockerfile() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    froms = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    assert froms and all(f.startswith("python:3.11-slim") for f in froms), froms
    assert re.search(r"^USER 65532:65532$", text, flags=re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["podium"\]$', text, flags=re.MULTILINE)
    assert "pip install" in text
    # The last USER wins: the image never ends as root.
    assert re.findall(r"^USER (\S+)", text, flags=re.MULTILINE)[-1] == "65532:65532"


def test_dockerignore_keeps_the_build_inputs() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for needed in ("operator", "pyproject.toml", "README.md"):
        assert needed not in patterns and f"{needed}/" not in patterns
    for excluded in (".git", ".venv"):
        assert excluded in patterns or f"{excluded}/" in patterns


def test_kind_script_syntax() -> None:
    subprocess.run(["bash", "-n", str(KIND_SCRIPT)], check=True)


def _run_kind_script(tmp_path: Path, docker: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["DOCKER"] = docker
    env["KUBECONFIG"] = str(tmp_path / "kubeconfig")
    return subprocess.run(
        ["bash", str(KIND_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kind_script_skips_without_docker(tmp_path: Path) -> None:
    result = _run_kind_script(tmp_path, str(tmp_path / "no-such-docker"))
    assert result.returncode == 0, result.stderr
    assert "Docker not found: skipping" in result.stdout + result.stderr


def test_kind_script_skips_without_docker_daemon(tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    result = _run_kind_script(tmp_path, str(fake))
    assert result.returncode == 0, result.stderr
    assert "Docker not found: skipping" in result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_kind_scripts_pass_shellcheck() -> None:
    scripts = sorted(str(p) for p in (REPO / "hack" / "kind").glob("*.sh"))
    subprocess.run(["shellcheck", "-x", *scripts], check=True, cwd=REPO)


# --------------------------------------------------------------------------------------


def _write_values_schema() -> None:
    schema = values_schema()
    schema["properties"]["defaultPolicy"]["properties"]["spec"] = derive_policy_spec_values_schema(
        load_crd()
    )
    VALUES_SCHEMA_FILE.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-values-schema"]:
        _write_values_schema()
    else:
        sys.exit(f"usage: {sys.argv[0]} --write-values-schema")
