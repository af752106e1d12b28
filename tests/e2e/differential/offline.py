"""Podium's offline view of a differential scenario: which node is best, if one is."""

from __future__ import annotations

import random
from typing import Any

from podium.algorithm import Scheduler
from podium.objects import parse_pod
from podium.policy import build_profile
from podium.snapshot import Snapshot


def unique_best(snapshot: Snapshot, incoming: dict[str, Any]) -> str:
    """The single best node for ``incoming`` at 100% of nodes scored, or '' when tied.

    Where the top is tied kube-scheduler picks at random, so only a unique
    best node can be compared with its choice.
    """
    incoming["metadata"].update(namespace="x", uid="uid-incoming")
    placement = Scheduler(random.Random(0)).schedule(
        build_profile({"percentageOfNodesToScore": 100}), snapshot, parse_pod(incoming), record=True
    )
    if not placement.node or placement.totals is None:
        return placement.node
    top = placement.totals.max()
    return placement.node if int((placement.totals == top).sum()) == 1 else ""
