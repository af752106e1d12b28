"""API requests per scheduled pod, from the apiserver's own apiserver_request_total.

The counter's `component` label names the server ("apiserver"), not the client,
so it cannot tell the scheduler's requests from the harness's. The benchmark
therefore diffs the counter over the measured phase, subtracts the requests the
harness itself sent in that window (bench.api counts them), and attributes the
rest to the scheduler, which is the only other client. Non-resource requests
(/metrics, /readyz) are dropped. The apiserver's own loopback traffic is set
apart by resource (`internal`): its identity Lease renewals, the IPAddress objects
it allocates for the churn Services, and LimitRanger's lookups. Neither scheduler
touches those resources with leader election off (a Podium run with
--podium-arg=--leader-elect would have its Lease traffic counted there too).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from podium.devcluster import ControlPlane

from .api import request_key

__all__ = ["Attribution", "attribute", "parse_request_totals", "scrape"]

_INTERNAL = frozenset(
    {
        "coordination.k8s.io/leases",
        "networking.k8s.io/ipaddresses",
        "networking.k8s.io/servicecidrs",
        "limitranges",
    }
)
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_request_totals(text: str) -> Counter[str]:
    """`VERB group/resource/subresource` -> count, summed over codes and versions."""
    totals: Counter[str] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        resource = labels.get("resource", "")
        if not resource:
            continue
        key = request_key(
            labels.get("verb", "?"),
            resource,
            labels.get("subresource", ""),
            labels.get("group", ""),
        )
        totals[key] += int(float(match["value"]))
    return totals


async def scrape(control_plane: ControlPlane) -> Counter[str]:
    """The apiserver's request totals now, read as admin from /metrics."""
    status, body = await asyncio.to_thread(control_plane.request, "/metrics")
    if status != 200:
        raise RuntimeError(f"kube-apiserver /metrics answered HTTP {status}")
    return parse_request_totals(body.decode(errors="replace"))


@dataclass(slots=True)
class Attribution:
    """Requests attributed to the scheduler, by key, and keys whose remainder went negative.

    A negative remainder means the harness sent a request the apiserver did not
    count in the window (for example one still in flight at the second scrape);
    it is reported rather than silently clamped away.
    """

    scheduler: dict[str, int] = field(default_factory=dict)
    internal: dict[str, int] = field(default_factory=dict)
    mismatch: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.scheduler.values())


def attribute(
    before: Mapping[str, int],
    after: Mapping[str, int],
    harness_before: Mapping[str, int],
    harness_after: Mapping[str, int],
) -> Attribution:
    """(apiserver after - before) - (harness after - before), per request key."""
    result = Attribution()
    for key in sorted(set(after) | set(before) | set(harness_after)):
        server = after.get(key, 0) - before.get(key, 0)
        harness = harness_after.get(key, 0) - harness_before.get(key, 0)
        remainder = server - harness
        name = key.partition(" ")[2]
        internal = any(name == r or name.startswith(f"{r}/") for r in _INTERNAL)
        if remainder > 0:
            (result.internal if internal else result.scheduler)[key] = remainder
        elif remainder < 0:
            result.mismatch[key] = remainder
    return result
