"""`podium simulate --replay LOG --snapshot FILE --policy other.yaml`.

Re-runs the live decisions recorded in a log against another policy. Records
name each pod and the node it got, but hold neither the pods' specs nor the
nodes, so the cluster comes from a snapshot (``kubectl get nodes,pods -A -o
yaml``, best taken right after the recorded run). The recorded pods are found
in it by uid (else namespace/name) and unbound; every other bound pod stays
where it is as background. The recorded pods are then placed one by one, in
the order their decisions were logged, each assumed where the *replayed*
policy put it, so later pods see the replay's own history. The output is how
often the replayed policy chose the recorded node (or, for a recorded
unschedulable pod, also found none).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from podium.framework.cycle import Scheduler
from podium.framework.decision import read_records
from podium.framework.profile import Profile
from podium.kube.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.state.snapshot import build_snapshot
from podium.tools.inputs import InputError, load_objects, load_policy
from podium.tools.shadowreport import final_decisions

__all__ = ["NEEDS_SNAPSHOT", "ReplayResult", "Replayed", "recorded_order", "replay", "run_replay"]

NEEDS_SNAPSHOT = (
    "--replay needs --snapshot FILE: decision records name the pods and the nodes they got, "
    "but hold neither the pods' specs nor the nodes. Give the cluster the decisions were made "
    "in, e.g. `kubectl get nodes,pods -A -o yaml > snapshot.yaml` right after the recorded run."
)


@dataclass(slots=True)
class Replayed:
    pod: str
    recorded: str | None
    replayed: str | None
    agreed: bool


@dataclass(slots=True)
class ReplayResult:
    policy: str
    recorded_policy: str
    pods: list[Replayed]
    missing: list[str]

    @property
    def agreed(self) -> int:
        return sum(1 for p in self.pods if p.agreed)

    @property
    def agreement(self) -> float:
        return round(self.agreed / len(self.pods), 4) if self.pods else 0.0


def recorded_order(
    records: Sequence[Mapping[str, Any]], scheduler_name: str | None = None
) -> list[Mapping[str, Any]]:
    """The live profile's final decision per pod, in the order those were logged."""
    live = [r for r in records if not r["shadow"]]
    if scheduler_name is None:
        names = sorted({str(r["scheduler_name"]) for r in live})
        if len(names) > 1:
            raise InputError(
                f"the log holds decisions of {', '.join(names)}; choose one with --scheduler-name"
            )
        scheduler_name = names[0] if names else ""
    final = final_decisions(live, scheduler_name, shadow=False)
    position = {id(r): i for i, r in enumerate(live)}
    return sorted(final.values(), key=lambda r: position[id(r)])


def replay(
    profile: Profile,
    nodes: Sequence[NodeInfo],
    pods: Iterable[PodInfo],
    recorded: Sequence[Mapping[str, Any]],
    seed: int = 0,
) -> ReplayResult:
    by_uid: dict[str, PodInfo] = {}
    by_key: dict[str, PodInfo] = {}
    for pod in pods:
        by_uid[pod.uid] = pod
        by_key[pod.key] = pod
    targets: list[tuple[Mapping[str, Any], PodInfo]] = []
    missing: list[str] = []
    for record in recorded:
        key = f"{record['namespace']}/{record['pod']}"
        found = by_uid.get(str(record["uid"])) or by_key.get(key)
        if found is None:
            missing.append(key)
        else:
            targets.append((record, found))
    replaying = {pod.uid for _, pod in targets}
    background = [p for p in by_uid.values() if p.uid not in replaying]
    cache, snapshot = build_snapshot(nodes, background)
    state = Scheduler(random.Random(seed))
    out: list[Replayed] = []
    for record, pod in targets:
        pod.node_name = ""
        snapshot.update(cache)
        placement = state.schedule(profile, snapshot, pod)
        node = placement.node or None
        if node:
            cache.assume_pod(pod, node)
        out.append(Replayed(pod.key, record["node"], node, node == record["node"]))
    policies = sorted({str(r["policy"]) for r, _ in targets})
    return ReplayResult(profile.policy or "<built-in>", ", ".join(policies), out, missing)


def format_replay(result: ReplayResult, limit: int = 50) -> str:
    lines = [
        f"replayed {len(result.pods)} recorded decisions (policy {result.recorded_policy}) "
        f"with policy {result.policy}",
        f"agreement: {result.agreed}/{len(result.pods)} ({result.agreement * 100:.1f}%)",
    ]
    if result.missing:
        lines.append(f"not in the snapshot, skipped: {len(result.missing)}")
    differing = [p for p in result.pods if not p.agreed]
    if differing:
        lines += ["", f"DIFFERENT DECISIONS ({len(differing)})"]
        for item in differing[:limit]:
            lines.append(
                f"{item.pod}: recorded {item.recorded or '-'}, replayed {item.replayed or '-'}"
            )
        if len(differing) > limit:
            lines.append(f"... and {len(differing) - limit} more (-o json)")
    return "\n".join(lines)


def run_replay(args: argparse.Namespace) -> int:
    if not args.snapshot:
        print(f"podium simulate: {NEEDS_SNAPSHOT}", file=sys.stderr)
        return 2
    if args.disable_preemption:
        print(
            "podium simulate: --replay never preempts; drop --disable-preemption", file=sys.stderr
        )
        return 2
    try:
        text = Path(args.replay).read_text(errors="replace")
    except OSError as exc:
        print(f"podium simulate: cannot read {args.replay}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        recorded = recorded_order(read_records(text.splitlines()), args.scheduler_name)
        if not recorded:
            raise InputError(f"{args.replay} has no live decision records")
        objects = load_objects(args.snapshot)
        if not objects.nodes:
            raise InputError("the snapshot has no Node objects")
        result = replay(
            load_policy(args.policy),
            [parse_node(body) for body in objects.nodes],
            [p for p in (parse_pod(body) for body in objects.pods) if not p.terminal],
            recorded,
            seed=args.seed,
        )
    except InputError as exc:
        print(f"podium simulate: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        payload = {
            **asdict(result),
            "agreed": result.agreed,
            "agreement": result.agreement,
        }
        print(json.dumps(payload, indent=2))
    else:
        print(format_replay(result))
    return 0
