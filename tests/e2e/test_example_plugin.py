"""The out-of-tree example plugin (examples/configmap-gate), installed as a user would,
enabled by a SchedulerPolicy on the real API server, and deciding there: a pod waits at
Permit until the ConfigMap ``podium-gate`` says go, then binds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_policy import GROUP, PLURAL, VERSION, _create_policy, crd  # noqa: F401
from tests.e2e.test_scheduling import create_pods, pods_in

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

EXAMPLE = Path(__file__).parents[2] / "examples" / "configmap-gate"


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip installs the example (its entry point included) into a folder of its own."""
    target = tmp_path_factory.mktemp("example-plugin")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        check=True,
    )
    assert any(target.glob("podium_configmap_gate-*.dist-info/entry_points.txt"))
    return target


def _logged(proc: Any, event: str, **fields: Any) -> bool:
    for line in proc.log_lines():
        if f'"{event}"' not in line:
            continue
        record = json.loads(line)
        if all(record.get(k) == v for k, v in fields.items()):
            return True
    return False


async def test_the_example_permit_plugin_holds_a_pod_until_its_configmap_says_go(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    crd: None,  # noqa: F811
    installed_example: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sched = policy = f"{namespace}-gate"[:63]
    await node_factory([make_node(f"{namespace}-n0", labels={"suite": namespace})])
    monkeypatch.setenv("PYTHONPATH", str(installed_example))
    proc = await podium()
    assert _logged(proc, "plugins_loaded", plugins=["example.com/ConfigMapGate"])
    spec = {
        "schedulerName": sched,
        "extensions": [{"name": "example.com/ConfigMapGate"}],
    }
    await _create_policy(api_client, policy, spec)
    try:
        await wait_for(
            lambda: _logged(proc, "policy_applied", policy=policy), timeout=20, message="policy"
        )
        held = make_pod("held", scheduler_name=sched, node_selector={"suite": namespace})
        await create_pods(api_client, namespace, [held])
        await wait_for(
            lambda: _logged(proc, "waiting_on_permit", pod="held"),
            timeout=30,
            message="the pod waiting at Permit",
        )
        (pod,) = await pods_in(api_client, namespace)
        assert not pod["spec"].get("nodeName"), "bound while the gate was shut"

        gate = {"metadata": {"name": "podium-gate"}, "data": {"go": "true"}}
        await client.CoreV1Api(api_client).create_namespaced_config_map(namespace, gate)

        async def bound() -> str | None:
            (pod,) = await pods_in(api_client, namespace)
            node: str | None = pod["spec"].get("nodeName")
            return node

        assert await wait_for(bound, timeout=30, message="bound once the gate opened")
    finally:
        await client.CustomObjectsApi(api_client).delete_cluster_custom_object(
            GROUP, VERSION, PLURAL, policy
        )
