"""`podium explain` and `podium simulate` against the real API server, checked against Podium.

explain must predict the node live Podium then binds, simulate on an exported
snapshot must reproduce live Podium's placements where the decision is unique,
and neither may write to the cluster.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod, wait_for
from podium.kube.manifests import make_node, make_pod
from podium.tools.explain import explain_cluster
from tests.e2e.test_policy import GROUP, PLURAL, VERSION, crd  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


async def _cli(*argv: str) -> tuple[int, str, str]:
    """`python -m podium ARGV` as a subprocess, without blocking the event loop."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "podium",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _writes_by_podium(plane: ControlPlane) -> list[dict[str, Any]]:
    """Audited write requests whose User-Agent is Podium's REST client."""
    return [e for e in plane.audit_events() if str(e.get("userAgent", "")).startswith("podium")]


async def _node_of(api: ApiClient, namespace: str, name: str) -> str:
    raw = await client.CoreV1Api(api).read_namespaced_pod(name, namespace, _preload_content=False)
    return str((await raw.json())["spec"].get("nodeName") or "")


async def test_explain_predicts_the_node_podium_binds(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
) -> None:
    sched = f"{namespace}-explain"[:63]
    suite = {"suite": namespace}
    big, medium, small, gpu = (f"{namespace}-{n}" for n in ("big", "medium", "small", "gpu"))
    await node_factory(
        [
            make_node(big, cpu="8", memory="16Gi", labels=suite),
            make_node(medium, cpu="4", memory="16Gi", labels=suite),
            make_node(small, cpu="1", memory="16Gi", labels=suite),
            make_node(gpu, cpu="8", memory="16Gi", labels=suite, taints=[TAINT]),
        ]
    )
    # No scheduler serves this name yet, so the pod stays Pending while explain runs.
    await create_pod(
        api_client,
        namespace,
        make_pod("web", cpu="2", memory="1Gi", scheduler_name=sched, node_selector=suite),
    )
    kubeconfig = str(control_plane.kubeconfig)
    writes_before = len(_writes_by_podium(control_plane))

    exp = await explain_cluster(namespace, "web", kubeconfig=kubeconfig)
    rows = {r.node: r for r in exp.rows}
    assert {big, medium, small, gpu} <= set(rows)
    assert rows[big].verdict == rows[medium].verdict == "feasible"
    assert rows[small].plugin == "NodeResourcesFit"
    assert rows[small].detail == "needs 2 cpu, 1 free"
    assert rows[gpu].plugin == "TaintToleration"
    assert rows[gpu].detail == "taint dedicated=gpu:NoSchedule not tolerated"
    others = set(rows) - {big, medium, small, gpu}
    assert all(rows[n].plugin == "NodeAffinity" for n in others)
    assert rows[big].total is not None and rows[medium].total is not None
    assert rows[big].total > rows[medium].total
    assert rows[big].scores["NodeResourcesFit"] > rows[medium].scores["NodeResourcesFit"]
    assert exp.winner == big and exp.ties == [big]
    assert f"ahead of {medium}" in exp.why
    assert "<built-in> default profile" in exp.profile

    code, out, err = await _cli(
        "explain", "-n", namespace, "web", "--kubeconfig", kubeconfig, "-o", "json"
    )
    assert code == 0, err
    structured = json.loads(out)
    assert structured["decision"]["node"] == big
    assert structured["decision"]["ties"] == [big]
    assert structured["percentageOfNodesToScore"]["used"] == 100
    by_node = {r["node"]: r for r in structured["rows"]}
    assert by_node[small]["reasons"] == ["Insufficient cpu"]
    assert by_node[big]["scores"]["TaintToleration"]["weight"] == 3

    # The same code as a kubectl plugin: `kubectl podium explain` runs `kubectl-podium explain`.
    plugin = Path(sys.executable).parent / "kubectl-podium"
    if plugin.exists():
        done = await asyncio.to_thread(
            subprocess.run,
            [str(plugin), "explain", f"{namespace}/web", "--kubeconfig", kubeconfig, "-o", "yaml"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert yaml.safe_load(done.stdout)["decision"]["node"] == big

    assert len(_writes_by_podium(control_plane)) == writes_before, "explain wrote to the API"
    assert await _node_of(api_client, namespace, "web") == ""

    await podium("--scheduler-name", sched)

    async def bound() -> str:
        return await _node_of(api_client, namespace, "web")

    assert await wait_for(bound, timeout=30, message="web bound") == big


async def test_explain_unschedulable_pod_suggests_a_toleration(
    api_client: ApiClient, control_plane: ControlPlane, namespace: str, node_factory: Any
) -> None:
    suite = {"suite": namespace}
    await node_factory(
        make_node(f"{namespace}-t{i}", labels=suite, taints=[TAINT]) for i in range(2)
    )
    await create_pod(
        api_client,
        namespace,
        make_pod("gpu-job", cpu="1", scheduler_name=f"{namespace}-none"[:63], node_selector=suite),
    )
    kubeconfig = str(control_plane.kubeconfig)
    code, out, err = await _cli(
        "explain", "-n", namespace, "gpu-job", "--kubeconfig", kubeconfig, "--top", "3"
    )
    assert code == 0, err
    assert "DECISION: unschedulable: 0/" in out
    assert "2 node(s) had untolerated taint(s)" in out
    exp = await explain_cluster(namespace, "gpu-job", kubeconfig=kubeconfig)
    assert not exp.winner
    # Other nodes fail NodeAffinity, so the taint alone is not the only blocker cluster-wide.
    blockers = set(exp.rejected_by_plugin)
    assert "TaintToleration" in blockers
    if blockers == {"TaintToleration"}:
        assert exp.suggestions == ["add toleration dedicated=gpu:NoSchedule: 2 node(s) would fit"]

    code, _, err = await _cli("explain", "-n", namespace, "missing", "--kubeconfig", kubeconfig)
    assert code == 1
    assert f"pod {namespace}/missing not found" in err


@pytest.mark.usefixtures("crd")
async def test_explain_uses_the_schedulerpolicy_serving_the_pod(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    tmp_path: Path,
) -> None:
    sched = f"{namespace}-packer"[:63]
    name = f"{namespace}-packer"[:63]
    suite = {"suite": namespace}
    emptier, fuller = f"{namespace}-emptier", f"{namespace}-fuller"
    await node_factory(
        [
            make_node(emptier, cpu="8", memory="16Gi", labels=suite),
            make_node(fuller, cpu="4", memory="16Gi", labels=suite),
        ]
    )
    await create_pod(
        api_client,
        namespace,
        make_pod("job", cpu="1", memory="1Gi", scheduler_name=sched, node_selector=suite),
    )
    spec = {
        "schedulerName": sched,
        "scores": [{"name": "NodeResourcesFit", "weight": 1}],
        "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
    }
    policy = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulerPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }
    objects = client.CustomObjectsApi(api_client)
    await objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, policy)
    kubeconfig = str(control_plane.kubeconfig)
    try:
        exp = await explain_cluster(namespace, "job", kubeconfig=kubeconfig)
        assert exp.profile == f"SchedulerPolicy {name}"
        assert [n for n, _ in exp.score_plugins] == ["NodeResourcesFit"]
        assert exp.winner == fuller  # MostAllocated packs onto the fuller node

        # --policy judges with a file instead: the default profile spreads.
        spread = tmp_path / "spread.yaml"
        spread.write_text(
            yaml.safe_dump(
                {**policy, "metadata": {"name": "spread"}, "spec": {"schedulerName": sched}}
            )
        )
        exp = await explain_cluster(
            namespace, "job", kubeconfig=kubeconfig, policy_file=str(spread)
        )
        assert exp.profile == f"spread from {spread} (--policy)"
        assert exp.winner == emptier
    finally:
        await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


async def _export(api: ApiClient, namespace: str) -> dict[str, Any]:
    """`kubectl get nodes,pods -A -o json` restricted to this test's pending pods."""
    core = client.CoreV1Api(api)
    nodes = (await (await core.list_node(_preload_content=False)).json())["items"]
    pods = (await (await core.list_pod_for_all_namespaces(_preload_content=False)).json())["items"]
    keep = [p for p in pods if p["spec"].get("nodeName") or p["metadata"]["namespace"] == namespace]
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    items += [{"apiVersion": "v1", "kind": "Pod", **p} for p in keep]
    return {"apiVersion": "v1", "kind": "List", "items": items}


async def test_simulate_on_exported_snapshot_matches_live_podium(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    tmp_path: Path,
) -> None:
    sched = f"{namespace}-sim"[:63]
    suite = {"suite": namespace}
    await node_factory(
        [
            make_node(f"{namespace}-a", cpu="8", memory="16Gi", labels=suite),
            make_node(f"{namespace}-b", cpu="4", memory="16Gi", labels=suite),
            make_node(f"{namespace}-c", cpu="2", memory="16Gi", labels=suite),
        ]
    )
    # Distinct priorities fix the queue order; each size leaves few or one choices.
    sizes = [("p1", "6", 40), ("p2", "3", 30), ("p3", "1500m", 20), ("p4", "500m", 10)]
    for name, cpu, priority in sizes:
        body = make_pod(
            name,
            cpu=cpu,
            memory="1Gi",
            scheduler_name=sched,
            node_selector=suite,
            priority=priority,
        )
        await create_pod(api_client, namespace, body)
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(await _export(api_client, namespace)))
    report = tmp_path / "report.html"

    code, out, err = await _cli(
        "simulate", "--snapshot", str(snapshot), "-o", "json", "--report", str(report)
    )
    assert code == 0, err
    simulated = json.loads(out)
    assert simulated["unschedulable"] == []
    predicted = {p["pod"]: p["node"] for p in simulated["placements"] if not p["tied"]}
    assert len(predicted) >= 3, simulated["placements"]
    assert predicted[f"{namespace}/p1"] == f"{namespace}-a"  # only a has 6 cpu
    assert predicted[f"{namespace}/p2"] == f"{namespace}-b"  # then only b has 3 free
    assert report.stat().st_size > 1000

    await podium("--scheduler-name", sched)

    async def live() -> dict[str, str] | None:
        placed = {
            f"{namespace}/{name}": await _node_of(api_client, namespace, name)
            for name, _, _ in sizes
        }
        return placed if all(placed.values()) else None

    placed = await wait_for(live, timeout=30, message="all four bound")
    assert {pod: placed[pod] for pod in predicted} == predicted


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


async def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    pytest.importorskip("matplotlib")
    report = tmp_path / "report.html"
    code, _, err = await _cli("simulate", "--nodes", "6", "--pods", "30", "--report", str(report))
    assert code == 0, err
    done = await asyncio.to_thread(
        subprocess.run,
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "<img" in dom and "data:image/png;base64," in dom
    assert all(f"node-{i}" in dom for i in range(6))
    assert "pods_placed" in dom
