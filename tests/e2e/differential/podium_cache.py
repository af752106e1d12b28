"""What Podium's cache holds, read from its /metrics (``scheduler_cache_size`` and
``podium_cache_objects``, set at each scrape): the families wait on it, not on a settle
period, before Podium decides."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from podium.devcluster.objects import wait_for

# scheduler_cache_size{type="nodes"} 3.0, podium_cache_objects{kind="resourceslices"} 2.0
_SAMPLE = re.compile(r'^(?:scheduler_cache_size\{type|podium_cache_objects\{kind)="(\w+)"\} (\S+)$')


async def counts(podium: Any) -> dict[str, int]:
    """What Podium's cache holds, by kind (nodes, pods, assumed_pods, or a watched kind's
    plural), from one scrape."""
    out = {}
    for line in (await podium.metrics()).splitlines():
        match = _SAMPLE.match(line)
        if match:
            out[match[1]] = int(float(match[2]))
    return out


async def cached(podium: Any, kind: str) -> int:
    """How many ``kind`` Podium's cache holds; -1 if unreported."""
    return (await counts(podium)).get(kind, -1)


async def holds(podium: Any, wanted: Mapping[str, int], timeout: float = 60.0) -> None:  # noqa: ASYNC109
    """Wait until Podium's cache holds exactly the ``wanted`` count of each kind."""

    async def held() -> bool:
        have = await counts(podium)
        return all(have.get(kind) == count for kind, count in wanted.items())

    await wait_for(held, timeout=timeout, interval=0.05, message=f"Podium caches {dict(wanted)}")
