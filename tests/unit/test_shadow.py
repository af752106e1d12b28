"""Shadow policies, `podium shadow-report` and `podium simulate --replay`, without a cluster."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from podium.cli import main
from podium.devcluster.objects import wait_for
from podium.framework.cycle import Scheduler
from podium.framework.decision import EVENT, build_record
from podium.kube.objects import parse_node, parse_pod
from podium.policy import PolicyError, build_profile
from podium.scheduling.shadow import ShadowJob, ShadowRunner, shadows_by_target
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from podium.tools.generate import generate_cluster
from podium.tools.replay import NEEDS_SNAPSHOT
from tests.unit.builders import node, pod
from tests.unit.test_decision import render, validate

MOST = {
    "scores": [{"name": "NodeResourcesFit"}],
    "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
}
SHADOW = {"mode": "DryRun", "schedulerName": "shadow", "shadowOf": "podium", **MOST}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, (True, 3, ""), id="defaults"),
        pytest.param({"decisionRecords": {"enabled": False}}, (False, 3, ""), id="off"),
        pytest.param({"decisionRecords": {"topNodes": 0}}, (True, 0, ""), id="no-top"),
        pytest.param(SHADOW, (True, 3, "podium"), id="shadow"),
        pytest.param({"shadowOf": "live"}, "only allowed with spec.mode DryRun", id="active"),
        pytest.param({"mode": "DryRun", "shadowOf": "podium"}, "another", id="itself"),
        pytest.param({"decisionRecords": {"topNodes": 21}}, "0..20", id="top-too-big"),
        pytest.param({"decisionRecords": []}, "must be an object", id="records-list"),
    ],
)
def test_policy_fields(spec: dict[str, Any], expected: tuple[bool, int, str] | str) -> None:
    if isinstance(expected, str):
        with pytest.raises(PolicyError, match=expected):
            build_profile(spec)
        return
    profile = build_profile(spec)
    assert (profile.record_decisions, profile.record_top_nodes, profile.shadow_of) == expected


def test_shadows_by_target_only_dry_run_profiles() -> None:
    live = build_profile({})
    shadow = build_profile(SHADOW)
    plain = build_profile({"mode": "DryRun", "schedulerName": "trial"})
    assert shadows_by_target([live, shadow, plain]) == {"podium": [shadow]}


def test_shadow_decides_without_the_pods_own_placement() -> None:
    """The live pod sits on 'big'; the shadow judges it as if it were not there yet."""
    cache = Cache()
    for body in (node("big", cpu="8"), node("small", cpu="4")):
        cache.add_node(parse_node(body))
    target = parse_pod(pod("p", cpu="3"))
    cache.assume_pod(target, "big")
    snapshot = Snapshot()
    runner = ShadowRunner(rng=random.Random(0))
    with structlog.testing.capture_logs() as logs:
        runner.decide(ShadowJob(target, 1, [build_profile(SHADOW)]), cache, snapshot, {})
    [entry] = logs
    fields = {k: v for k, v in entry.items() if k not in ("event", "log_level")}
    shadowed = validate(render(fields))
    # Without the pod, MostAllocated prefers small (3 of 4 cpu) to big (3 of 8).
    assert (shadowed["node"], shadowed["shadow"], shadowed["shadow_of"]) == (
        "small",
        True,
        "podium",
    )
    assert snapshot.pod_count[snapshot.index["big"]] == 1  # the edited row is restored


def test_submit_drops_the_oldest_past_the_limit() -> None:
    runner = ShadowRunner(limit=2)
    runner.profiles = {"podium": [build_profile(SHADOW)]}
    for name in ("a", "b", "c"):
        runner.submit(parse_pod(pod(name)), 1, "podium")
    runner.submit(parse_pod(pod("other")), 1, "unshadowed")
    assert ([j.pod.name for j in runner.jobs], runner.dropped) == (["b", "c"], 1)


# -- shadow-report -----------------------------------------------------------------------
def record(
    name: str,
    node_name: str | None,
    *,
    shadow: bool = False,
    attempt: int = 1,
    zone: str | None = None,
    result: str = "",
) -> dict[str, Any]:
    return {
        "event": EVENT,
        "schema": "podium.dev/decision-record/v1",
        "shadow": shadow,
        "shadow_of": "podium" if shadow else None,
        "policy": "pack" if shadow else "live",
        "generation": 1,
        "scheduler_name": "shadow" if shadow else "podium",
        "pod": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "attempt": attempt,
        "nodes": {"total": 3, "evaluated": 3, "feasible": 3 if node_name else 0},
        "rejections": {"by_reason": {}, "by_plugin": {}},
        "weights": {"NodeResourcesFit": 1},
        "top_nodes": [],
        "nominated": False,
        "node": node_name,
        "zone": zone if node_name else None,
        "result": result
        or (("dry_run" if shadow else "scheduled") if node_name else "unschedulable"),
        "message": "",
        "duration_ms": 1.0 if shadow else 2.0,
    }


# Five live pods; the shadow agrees on a and b, differs on c, d and e (e: it finds no node),
# and never saw f. d was unschedulable on its first live attempt, bound on the second.
LOG = [
    record("a", "n1", zone="z1"),
    record("a", "n1", shadow=True, zone="z1"),
    record("b", "n2", zone="z2"),
    record("b", "n2", shadow=True, zone="z2"),
    record("c", "n3", zone="z3"),
    record("c", "n1", shadow=True, zone="z1"),
    record("d", None),
    record("d", None, shadow=True),
    record("d", "n2", attempt=2, zone="z2"),
    record("d", "n1", shadow=True, attempt=2, zone="z1"),
    record("e", "n3", zone="z3"),
    record("e", None, shadow=True),
    record("f", "n1", zone="z1"),
]


def write_log(tmp_path: Path) -> Path:
    lines = ['{"event": "cache_primed", "level": "info"}', "not json at all"]
    for item in LOG:
        validate(json.dumps(item))
        lines.append(json.dumps(item))
    path = tmp_path / "podium.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_shadow_report_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shadow-report", str(write_log(tmp_path)), "-o", "json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert {k: report[k] for k in ("pods", "agreed", "agreement", "live_only", "shadow_only")} == {
        "pods": 5,
        "agreed": 2,
        "agreement": 0.4,
        "live_only": 1,
        "shadow_only": 0,
    }
    assert report["live"] == {
        "scheduler_name": "podium",
        "policy": "live",
        "placed": 5,
        "unschedulable": 0,
        "nodes_used": 3,
        "pods_per_node_stddev": 0.471,
        "pods_per_zone": {"z1": 1, "z2": 2, "z3": 2},
        "pods_per_zone_stddev": 0.471,
        "mean_decision_ms": 2.0,
    }
    assert report["shadow"] == {
        "scheduler_name": "shadow",
        "policy": "pack",
        "placed": 4,
        "unschedulable": 1,
        "nodes_used": 2,
        "pods_per_node_stddev": 1.0,
        "pods_per_zone": {"z1": 3, "z2": 1},
        "pods_per_zone_stddev": 1.0,
        "mean_decision_ms": 1.0,
    }
    assert [(d["pod"], d["live"], d["shadow"]) for d in report["differences"]] == [
        ("default/c", "n3", "n1"),
        ("default/d", "n2", "n1"),
        ("default/e", "n3", None),
    ]


def test_shadow_report_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shadow-report", str(write_log(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "agreement: 2/5 (40.0%); decided by live only 1, by shadow only 0" in out
    assert "default/e: live n3, shadow -" in out


def test_shadow_report_without_shadow_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "live.log"
    path.write_text(json.dumps(record("a", "n1")) + "\n")
    assert main(["shadow-report", str(path)]) == 1
    assert "no shadow decision records" in capsys.readouterr().err


# -- replay ------------------------------------------------------------------------------
def recorded_run(tmp_path: Path) -> tuple[Path, Path]:
    """A recorded live run over a generated cluster: its log, and the snapshot taken after."""
    cluster = generate_cluster(6, 30, seed=3)
    profile = build_profile({}, policy="live")
    cache = Cache()
    for body in cluster.nodes:
        cache.add_node(parse_node(body))
    snapshot = Snapshot()
    state = Scheduler(random.Random(0))
    lines = []
    for body in cluster.pods:
        target = parse_pod(body)
        snapshot.update(cache)
        placement = state.schedule(profile, snapshot, target, record=True)
        lines.append(
            render(build_record(profile, snapshot, target, 1, placement, top=3, result="scheduled"))
        )
        cache.assume_pod(target, placement.node)
        body["spec"]["nodeName"] = placement.node
    log = tmp_path / "live.log"
    log.write_text("\n".join(lines) + "\n")
    snap = tmp_path / "snapshot.yaml"
    snap.write_text(yaml.safe_dump_all(cluster.nodes + cluster.pods))
    return log, snap


@pytest.mark.parametrize(
    ("policy", "agreed"),
    [
        pytest.param(None, 30, id="same-policy-agrees-fully"),
        pytest.param(MOST, 6, id="most-allocated-packs-elsewhere"),
    ],
)
def test_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: dict[str, Any] | None, agreed: int
) -> None:
    log, snap = recorded_run(tmp_path)
    argv = ["simulate", "--replay", str(log), "--snapshot", str(snap), "-o", "json"]
    if policy is not None:
        path = tmp_path / "other.yaml"
        path.write_text(
            yaml.safe_dump(
                {"kind": "SchedulerPolicy", "metadata": {"name": "other"}, "spec": policy}
            )
        )
        argv += ["--policy", str(path)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (len(result["pods"]), result["agreed"], result["missing"]) == (30, agreed, [])


def test_replay_needs_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, _ = recorded_run(tmp_path)
    assert main(["simulate", "--replay", str(log)]) == 2
    assert NEEDS_SNAPSHOT in capsys.readouterr().err


@pytest.mark.asyncio
async def test_run_waits_for_a_quiet_live_profile() -> None:
    """No shadow decision while busy() is true, nor until it has been false for a while.

    The runner reads a clock the test moves: each phase waits until the runner has
    looked at busy() again, so a slow runner cannot pass by not having looked yet.
    """
    now = 100.0
    runner = ShadowRunner(quiet=0.3, clock=lambda: now)
    runner.profiles = {"podium": [build_profile(SHADOW)]}
    decided: list[str] = []
    busy, looks = True, 0

    def is_busy() -> bool:
        nonlocal looks
        looks += 1
        return busy

    async def looked_again() -> None:
        seen = looks
        await wait_for(lambda: looks >= seen + 2, 5, 0.005, "the runner to look again")

    task = asyncio.create_task(runner.run(is_busy, lambda job: decided.append(job.pod.name)))
    runner.submit(parse_pod(pod("a")), 1, "podium")
    await looked_again()
    now += 10.0  # busy for long: still nothing
    await looked_again()
    seen_while_busy = list(decided)
    busy = False
    await looked_again()
    now += 0.2  # quiet, but not for 0.3 s yet
    await looked_again()
    seen_before_quiet = list(decided)
    now += 0.2
    await wait_for(lambda: decided, 5, 0.005, "the shadow decision")
    task.cancel()
    assert (seen_while_busy, seen_before_quiet, decided) == ([], [], ["a"])
