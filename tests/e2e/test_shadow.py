"""Shadow mode on the real API server: a DryRun policy with shadowOf beside the live one."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import pod_events, wait_for
from podium.framework.decision import read_records
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_policy import (
    GROUP,
    PLURAL,
    VERSION,
    _condition,
    _policy,
    crd,  # noqa: F401  (fixture)
)
from tests.e2e.test_scheduling import create_pods, pods_in

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "decision-record.schema.json").read_text()
)
ZONE = "topology.kubernetes.io/zone"
PODS = 12


def _object(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulerPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.usefixtures("crd")
async def test_shadow_decides_for_every_live_pod_and_never_binds(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    objects = client.CustomObjectsApi(api_client)
    live, shadow = f"{namespace}-live"[:63], f"{namespace}-shadow"[:63]
    selector = {"suite": namespace}
    await node_factory(
        make_node(f"{namespace}-n{i}", labels={**selector, ZONE: f"z{i % 2}"}) for i in range(4)
    )
    policies = {
        live: {"schedulerName": live, "decisionRecords": {"topNodes": 2}},
        shadow: {
            "schedulerName": shadow,
            "mode": "DryRun",
            "shadowOf": live,
            "scores": [{"name": "NodeResourcesFit"}],
            "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
        },
    }
    proc = await podium()
    try:
        for name, spec in policies.items():
            await objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, _object(name, spec))

        async def accepted() -> bool:
            for name in policies:
                policy = await _policy(api_client, name)
                if _condition(policy, "Accepted").get("status") != "True":
                    return False
            return True

        await wait_for(accepted, timeout=20, message="both policies accepted")
        pods = [
            make_pod(f"p{i}", cpu="300m", scheduler_name=live, node_selector=selector)
            for i in range(PODS)
        ]
        await create_pods(api_client, namespace, pods)

        async def bound() -> list[dict[str, Any]] | None:
            items = await pods_in(api_client, namespace)
            return items if all(p["spec"].get("nodeName") for p in items) else None

        final = await wait_for(bound, timeout=60, message="live pods bound")
        uids = {p["metadata"]["uid"]: p for p in final}

        def shadowed() -> list[dict[str, Any]] | None:
            records = [r for r in read_records(proc.log_lines()) if r["uid"] in uids]
            seen = {r["uid"] for r in records if r["shadow"]}
            return records if seen == set(uids) else None

        records = await wait_for(shadowed, timeout=30, message="a shadow record for every pod")
    finally:
        for name in policies:
            await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)

    validator = Draft202012Validator(SCHEMA)
    assert [e.message for r in records for e in validator.iter_errors(r)] == []

    live_records = [r for r in records if not r["shadow"]]
    scheduled = Counter(r["uid"] for r in live_records if r["result"] == "scheduled")
    assert scheduled == Counter(dict.fromkeys(uids, 1))
    assert {r["uid"]: r["node"] for r in live_records if r["result"] == "scheduled"} == {
        uid: p["spec"]["nodeName"] for uid, p in uids.items()
    }
    assert {r["scheduler_name"] for r in live_records} == {live}
    for body in final:
        assert (
            len(await pod_events(api_client, namespace, body["metadata"]["name"], "Scheduled")) == 1
        )

    shadow_records = [r for r in records if r["shadow"]]
    assert {(r["scheduler_name"], r["shadow_of"]) for r in shadow_records} == {(shadow, live)}
    assert {r["result"] for r in shadow_records} <= {"dry_run", "unschedulable"}
    events = await client.CoreV1Api(api_client).list_namespaced_event(namespace)
    assert [e for e in events.items if e.reporting_component == shadow] == []

    # shadow-report's figure equals the log's own: live bound node vs the same attempt's shadow.
    by_attempt = {(r["uid"], r["attempt"]): r["node"] for r in shadow_records}
    agreed = sum(
        1
        for r in live_records
        if r["result"] == "scheduled" and by_attempt[(r["uid"], r["attempt"])] == r["node"]
    )
    report_cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "podium",
        "shadow-report",
        str(proc.log),
        "--live",
        live,
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
    )
    stdout, _ = await report_cli.communicate()
    assert report_cli.returncode == 0
    [report] = json.loads(stdout)
    assert (report["pods"], report["agreed"]) == (PODS, agreed)
    assert report["agreement"] == round(agreed / PODS, 4)
