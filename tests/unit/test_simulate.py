"""`podium simulate` (and the pure half of `podium explain`) on clusters held in memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.cli import main
from podium.kube.objects import parse_node, parse_pod
from podium.policy import default_profile
from podium.state.snapshot import build_snapshot
from podium.tools.explain import ClusterState, explain_pod, explain_state, format_table
from podium.tools.generate import generate_cluster
from podium.tools.inputs import load_objects
from podium.tools.simulation import simulate, split_pods
from tests.unit.builders import node, pod

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _kinded(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, **body}


def _write(
    tmp_path: Path, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], fmt: str
) -> Path:
    items = [_kinded("Node", n) for n in nodes] + [_kinded("Pod", p) for p in pods]
    if fmt == "list-json":
        path = tmp_path / "snapshot.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    elif fmt == "list-yaml":
        path = tmp_path / "snapshot.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    else:
        path = tmp_path / "snapshot.yaml"
        path.write_text(yaml.safe_dump_all(items))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *argv, "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


# name, nodes, pods, format, expected placements {pod: node}, expected unschedulable {pod: reason}
CASES: list[
    tuple[str, list[dict[str, Any]], list[dict[str, Any]], str, dict[str, str], dict[str, str]]
] = [
    (
        "only the big node has room",
        [node("big", cpu="8"), node("small", cpu="1")],
        [pod("web", cpu="2")],
        "list-json",
        {"default/web": "big"},
        {},
    ),
    (
        "an untolerated taint keeps the pod off",
        [node("gpu", cpu="8", taints=[TAINT]), node("plain", cpu="2")],
        [pod("web", cpu="1")],
        "multi-doc",
        {"default/web": "plain"},
        {},
    ),
    (
        "a toleration lets it on, and LeastAllocated prefers the emptier node",
        [node("gpu", cpu="8", taints=[TAINT]), node("plain", cpu="2")],
        [pod("web", cpu="1", tolerations=[{**TAINT, "operator": "Equal"}])],
        "list-yaml",
        {"default/web": "gpu"},
        {},
    ),
    (
        "too big for every node",
        [node("a", cpu="2"), node("b", cpu="2")],
        [pod("huge", cpu="3")],
        "list-json",
        {},
        {
            "default/huge": "0/2 nodes are available: 2 Insufficient cpu. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        },
    ),
    (
        "later pods see earlier placements",
        [node("only", cpu="2")],
        [pod(f"p{i}", cpu="1", created=f"2026-01-01T00:00:0{i}Z") for i in range(3)],
        "multi-doc",
        {"default/p0": "only", "default/p1": "only"},
        {
            "default/p2": "0/1 nodes are available: 1 Insufficient cpu. "
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        },
    ),
    (
        "higher priority goes first even when created later",
        [node("only", cpu="1")],
        [
            pod("early", cpu="1", created="2026-01-01T00:00:00Z"),
            pod("urgent", cpu="1", priority=100, created="2026-01-01T00:01:00Z"),
        ],
        "list-json",
        {"default/urgent": "only"},
        {
            "default/early": "0/1 nodes are available: 1 Insufficient cpu. "
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        },
    ),
    (
        "bound pods in the snapshot take their space",
        [node("a", cpu="4"), node("b", cpu="4")],
        [pod("running", cpu="3", node_name="a"), pod("new", cpu="2")],
        "list-yaml",
        {"default/new": "b"},
        {},
    ),
    (
        "cordoned and untainted-but-full nodes",
        [node("cordoned", cpu="8", unschedulable=True), node("full", cpu="1", pods=1)],
        [pod("running", cpu="100m", node_name="full"), pod("new", cpu="100m")],
        "multi-doc",
        {},
        {
            "default/new": "0/2 nodes are available: 1 Too many pods, 1 node(s) were "
            "unschedulable. preemption: 0/2 nodes are available: 1 No preemption victims "
            "found for incoming pod, 1 Preemption is not helpful for scheduling."
        },
    ),
]


@pytest.mark.parametrize(
    ("nodes", "pods", "fmt", "placed", "failed"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_snapshot_file_placements(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    fmt: str,
    placed: dict[str, str],
    failed: dict[str, str],
) -> None:
    path = _write(tmp_path, nodes, pods, fmt)
    result = _json(capsys, "simulate", "--snapshot", str(path))
    assert {p["pod"]: p["node"] for p in result["placements"]} == placed
    assert {f["pod"]: f["message"] for f in result["unschedulable"]} == failed
    assert result["metrics"]["pods_placed"] == len(placed)
    code, out, _ = _run(capsys, "simulate", "--snapshot", str(path))
    assert code == 0
    for pod_key, node_name in placed.items():
        assert any(pod_key in line and node_name in line for line in out.splitlines())
    for pod_key in failed:
        assert pod_key in out


def test_place_file_replaces_pending_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = _write(tmp_path, [node("a", cpu="2")], [pod("pending", cpu="1")], "list-json")
    place = tmp_path / "place.yaml"
    place.write_text(yaml.safe_dump_all([_kinded("Pod", pod(f"x{i}", cpu="1")) for i in range(2)]))
    result = _json(capsys, "simulate", "--snapshot", str(snapshot), "--place", str(place))
    assert sorted(p["pod"] for p in result["placements"]) == ["default/x0", "default/x1"]


def _policy(tmp_path: Path, name: str, strategy: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "podium.dev/v1alpha1",
                "kind": "SchedulerPolicy",
                "metadata": {"name": name},
                "spec": {
                    "schedulerName": "podium",
                    "scores": [{"name": "NodeResourcesFit", "weight": 1}],
                    "pluginArgs": {"nodeResourcesFit": {"strategy": strategy}},
                },
            }
        )
    )
    return path


def test_compare_shows_both_policies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = _policy(tmp_path, "pack", "MostAllocated")
    spread = _policy(tmp_path, "spread", "LeastAllocated")
    args = ("simulate", "--nodes", "12", "--pods", "60", "--compare", str(pack), str(spread))
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    header = out.splitlines()[0]
    assert "pack" in header and "spread" in header
    assert "nodes used" in out and "pods per zone, stddev" in out
    result = _json(capsys, *args)
    pack_m, spread_m = (r["metrics"] for r in result["compare"])
    assert [r["policy"] for r in result["compare"]] == ["pack", "spread"]
    assert pack_m["nodes_used"] < spread_m["nodes_used"]
    assert pack_m["pods_per_node_stddev"] > spread_m["pods_per_node_stddev"]
    assert pack_m["pods_placed"] == spread_m["pods_placed"] == 60


def test_policy_file_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = _policy(tmp_path, "pack", "MostAllocated")
    result = _json(capsys, "simulate", "--nodes", "5", "--pods", "10", "--policy", str(pack))
    assert result["policy"] == "pack"
    assert result["metrics"]["nodes_used"] == 1


@pytest.mark.parametrize("suffix", ["png", "html"])
def test_report_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    pytest.importorskip("matplotlib")
    report = tmp_path / f"report.{suffix}"
    code, _, err = _run(capsys, "simulate", "--nodes", "8", "--pods", "40", "--report", str(report))
    assert code == 0, err
    data = report.read_bytes()
    assert len(data) > 1000
    if suffix == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        text = data.decode()
        assert "data:image/png;base64," in text
        assert all(f"node-{i}" in text for i in range(8))


def test_report_without_matplotlib_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = tmp_path / "r.html"
    code, _, err = _run(capsys, "simulate", "--nodes", "2", "--pods", "2", "--report", str(report))
    assert code == 1
    assert "needs matplotlib" in err
    assert not report.exists()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--nodes", "2", "--snapshot", "x.yaml"], 2, "not both"),
        (["--pods", "2"], 2, "give --snapshot FILE or --nodes N"),
        (["--snapshot", "/nonexistent/snapshot.yaml"], 1, "cannot read"),
        (["--nodes", "2", "--report", "out.txt"], 1, ".html or .png"),
    ],
)
def test_bad_input(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    got, _, err = _run(capsys, "simulate", *argv)
    assert got == code
    assert message in err


def test_invalid_policy_is_a_runtime_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: SchedulerPolicy\nmetadata: {name: bad}\nspec: {filters: [{name: Nope}]}\n"
    )
    code, _, err = _run(capsys, "simulate", "--nodes", "2", "--policy", str(bad))
    assert code == 1
    assert "unknown filter plugin(s): Nope" in err


def test_generated_200_nodes_1000_pods_places_all(capsys: pytest.CaptureFixture[str]) -> None:
    result = _json(capsys, "simulate", "--nodes", "200", "--pods", "1000", "--seed", "7")
    metrics = result["metrics"]
    assert metrics["nodes"] == 200
    assert metrics["pods_placed"] == 1000
    assert metrics["pods_unschedulable"] == 0
    assert metrics["zones"] == 3
    assert len(result["placements"]) == 1000
    assert all(row["cpu"] <= 1.0 and row["memory"] <= 1.0 for row in result["nodeUtilisation"])


def test_simulation_is_deterministic_for_a_seed() -> None:
    objects = generate_cluster(30, 120, seed=3)
    from podium.kube.objects import parse_node

    nodes = [parse_node(b) for b in objects.nodes]

    def run() -> list[tuple[str, str]]:
        bound, pending = split_pods(objects.pods)
        return [
            (p.pod, p.node) for p in simulate(default_profile(), nodes, bound, pending).placements
        ]

    assert run() == run()


def test_list_wrappers_and_kindless_items(tmp_path: Path) -> None:
    node_list = {"kind": "NodeList", "items": [node("a")]}
    pod_list = {"kind": "PodList", "items": [pod("p")]}
    path = tmp_path / "lists.yaml"
    path.write_text(yaml.safe_dump_all([node_list, pod_list, None]))
    objects = load_objects([str(path)])
    assert [n["metadata"]["name"] for n in objects.nodes] == ["a"]
    assert [p["metadata"]["name"] for p in objects.pods] == ["p"]


# -- explain's pure half: the same snapshots, judged node by node -------------------------
def _explain(
    nodes: list[dict[str, Any]], bound: list[dict[str, Any]], target: dict[str, Any]
) -> Any:
    cache, snapshot = build_snapshot([parse_node(n) for n in nodes], [parse_pod(p) for p in bound])
    return explain_pod(default_profile(), snapshot, parse_pod(target), cache)


def test_explain_rows_and_winner() -> None:
    exp = _explain(
        [node("big", cpu="8"), node("small", cpu="1"), node("gpu", cpu="8", taints=[TAINT])],
        [pod("existing", cpu="4", node_name="big")],
        pod("web", cpu="2"),
    )
    rows = {r.node: r for r in exp.rows}
    assert rows["big"].verdict == "feasible" and rows["big"].total is not None
    assert set(rows["big"].scores) >= {"TaintToleration", "NodeResourcesFit"}
    assert rows["small"].plugin == "NodeResourcesFit"
    assert rows["small"].detail == "needs 2 cpu, 1 free"
    assert rows["gpu"].plugin == "TaintToleration" and rows["gpu"].unresolvable
    assert rows["gpu"].detail == "taint dedicated=gpu:NoSchedule not tolerated"
    assert exp.winner == "big" and exp.ties == ["big"]
    assert "only feasible node" in exp.why
    assert "forced to 100" in format_table(exp)


def test_explain_taint_only_suggests_a_toleration() -> None:
    exp = _explain([node(f"n{i}", taints=[TAINT]) for i in range(3)], [], pod("web", cpu="1"))
    assert not exp.winner
    assert exp.message == (
        "0/3 nodes are available: 3 node(s) had untolerated taint(s). preemption: 0/3 nodes "
        "are available: 3 Preemption is not helpful for scheduling."
    )
    assert exp.suggestions == ["add toleration dedicated=gpu:NoSchedule: 3 node(s) would fit"]


def test_explain_resources_only_suggests_smaller_requests_and_estimates_preemption() -> None:
    exp = _explain(
        [node("a", cpu="4"), node("b", cpu="2")],
        [pod("low", cpu="3", node_name="a", priority=0)],
        pod("big", cpu="2500m", priority=10),
    )
    assert exp.suggestions == [
        "1 node(s) would fit if the pod asked for ≤ 2 cpu (it asks for 2500m)",
        "2 node(s) would fit if the pod asked for ≤ 1 cpu (it asks for 2500m)",
    ]
    assert exp.preemption is not None and exp.preemption["estimate"] is True
    assert exp.preemption["nodes"] == [{"node": "a", "victims": 1, "checked": True}]
    structured = exp.to_dict()
    assert structured["decision"]["node"] is None
    assert structured["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")


def test_explain_top_keeps_counts() -> None:
    exp = _explain(
        [node(f"ok{i}") for i in range(4)] + [node(f"t{i}", taints=[TAINT]) for i in range(3)],
        [],
        pod("web", cpu="1"),
    )
    structured = exp.to_dict(top=2)
    assert structured["nodes"] == {"total": 7, "feasible": 4, "rejected": 3, "shown": 2}
    assert [r["verdict"] for r in structured["rows"]] == ["feasible", "feasible"]
    assert structured["rejectedReasons"] == {"node(s) had untolerated taint(s)": 3}
    assert len(structured["decision"]["ties"]) == 4


def test_snapshot_storage_objects_are_used_and_pvs_taken_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two pods with WaitForFirstConsumer claims, one local PV: the second finds none left."""
    local = {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["b"]}
                    ]
                }
            ]
        }
    }
    storage = [
        {
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "nodeAffinity": local,
            },
            "status": {"phase": "Available"},
        },
    ] + [
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"c{i}"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        for i in (1, 2)
    ]
    pods = [
        pod(
            f"p{i}",
            created=f"2026-01-01T00:00:0{i}Z",
            volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": f"c{i}"}}],
        )
        for i in (1, 2)
    ]
    path = _write(
        tmp_path,
        [
            node("a", labels={"kubernetes.io/hostname": "a"}),
            node("b", labels={"kubernetes.io/hostname": "b"}),
        ],
        pods,
        "multi-doc",
    )
    path.write_text(path.read_text() + "---\n" + yaml.safe_dump_all(storage))
    result = _json(capsys, "simulate", "--snapshot", str(path))
    assert {p["pod"]: p["node"] for p in result["placements"]} == {"default/p1": "b"}
    assert {f["pod"]: f["message"] for f in result["unschedulable"]} == {
        "default/p2": "0/2 nodes are available: 2 node(s) didn't find available persistent volumes "
        "to bind. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    }


@pytest.mark.parametrize(
    ("services", "expected"),
    [
        pytest.param([], {"a", "b"}, id="no-service-resources-decide"),
        pytest.param([{"app": "web"}], {"c"}, id="service-spreads-to-c"),
    ],
)
def test_snapshot_services_drive_default_spreading(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    services: list[dict[str, str]],
    expected: set[str],
) -> None:
    """Web pods on a and b, a bigger one on c: only a Service selecting app=web picks c."""
    web = {"app": "web"}
    nodes = [node(n, labels={"kubernetes.io/hostname": n}) for n in "abc"]
    pods = [
        pod("w1", cpu="500m", memory="512Mi", node_name="a", labels=web),
        pod("w2", cpu="500m", memory="512Mi", node_name="b", labels=web),
        pod("other", cpu="1", memory="512Mi", node_name="c", labels={"app": "other"}),
        pod("new", cpu="500m", memory="512Mi", labels=web),
    ]
    path = _write(tmp_path, nodes, pods, "multi-doc")
    items = [
        {"metadata": {"name": f"s{i}", "namespace": "default"}, "spec": {"selector": s}}
        for i, s in enumerate(services)
    ]
    path.write_text(
        path.read_text() + "---\n" + yaml.safe_dump({"kind": "ServiceList", "items": items})
    )
    result = _json(capsys, "simulate", "--snapshot", str(path))
    assert {p["node"] for p in result["placements"]} <= expected
    assert [p["pod"] for p in result["placements"]] == ["default/new"]


def test_explain_reads_services_for_default_spreading() -> None:
    web = {"app": "web"}
    service = {"kind": "Service", "metadata": {"name": "web", "namespace": "default"}}
    state = ClusterState(
        pod=pod("new", cpu="500m", memory="512Mi", labels=web),
        nodes=[node(n, labels={"kubernetes.io/hostname": n}) for n in "abc"],
        pods=[
            pod("w1", cpu="500m", memory="512Mi", node_name="a", labels=web),
            pod("w2", cpu="500m", memory="512Mi", node_name="b", labels=web),
            pod("other", cpu="1", memory="512Mi", node_name="c", labels={"app": "other"}),
        ],
        policies=None,
    )
    assert explain_state(state).winner in {"a", "b"}
    state.selectors = [{**service, "spec": {"selector": web}}]
    exp = explain_state(state)
    assert (exp.winner, exp.ties) == ("c", ["c"])
    rows = {r.node: r for r in exp.rows}
    spread = {n: rows[n].scores["PodTopologySpread"] for n in "abc"}
    assert spread["c"] > spread["a"] == spread["b"]
