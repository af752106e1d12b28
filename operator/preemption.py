"""DefaultPreemption's PostFilter verdict for a pod that fits nowhere.

This module answers the question kube-scheduler's PostFilter answers in its
message: could evicting lower-priority pods help? Nodes rejected as
unresolvable never can; of the others, kube-scheduler dry-runs a bounded
number of candidates starting at a random offset, and a node without any
lower-priority pod has no victims. Victim selection and eviction are not
implemented yet: nodes that do hold lower-priority pods get no explicit
status, so they are counted with the absent nodes as "not helpful", which
differs from kube-scheduler whenever it would preempt.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from podium.algorithm import UNSCHEDULABLE, Diagnosis
from podium.objects import PodInfo
from podium.profile import Profile
from podium.snapshot import Snapshot

__all__ = ["NOT_HELPFUL", "NO_VICTIMS", "candidate_count", "post_filter"]

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."


def candidate_count(profile: Profile, potential: int) -> int:
    """GetOffsetAndNumCandidates: a share of the nodes, at least the absolute minimum."""
    n = potential * profile.min_candidate_nodes_percentage // 100
    n = max(n, profile.min_candidate_nodes_absolute)
    return min(n, potential)


def post_filter(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    diagnosis: Diagnosis,
    rng: random.Random | None = None,
) -> str:
    """The "preemption: ..." suffix of the FailedScheduling message."""
    if pod.preemption_policy == "Never":
        return "preemption: " + NEVER
    total = diagnosis.num_all_nodes
    potential = np.flatnonzero(diagnosis.status == UNSCHEDULABLE)
    reasons: Counter[str] = Counter()
    if potential.size:
        count = candidate_count(profile, int(potential.size))
        offset = (rng or random).randrange(potential.size)
        chosen = potential[(offset + np.arange(count)) % potential.size]
        for i in chosen:
            if not any(p.priority < pod.priority for p in snapshot.pods[int(i)].values()):
                reasons[NO_VICTIMS] += 1
    explicit = sum(reasons.values())
    if total > explicit:
        reasons[NOT_HELPFUL] += total - explicit
    histogram = sorted(f"{n} {reason}" for reason, n in reasons.items())
    return f"preemption: 0/{total} nodes are available: " + ", ".join(histogram) + "."
