"""DefaultPreemption: kube-scheduler's PostFilter plugin (``plugin.py``) and its
Executor, the API writes that carry a preemption out (``executor.py``)."""

from __future__ import annotations

from podium.algorithms.default_preemption.plugin import (
    NAME,
    DefaultPreemption,
    offline_group_preemption,
    offline_message,
    offline_preemption,
)

__all__ = [
    "NAME",
    "DefaultPreemption",
    "offline_group_preemption",
    "offline_message",
    "offline_preemption",
]
