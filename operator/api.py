"""Podium's public API: the pieces a policy author or an embedding program needs.

``podium`` itself is a namespace package with no ``__init__``: its source
folder is named ``operator/``, and a regular package there would shadow the
standard library's ``operator`` module whenever Python runs from the
repository root (``python -m`` puts the working directory first on
``sys.path``). Everything outside this module is internal and may change.
"""

from __future__ import annotations

from importlib.metadata import version

__version__ = version("podium")

from podium.framework.cycle import Diagnosis, Placement, Scheduler
from podium.framework.extension import (
    ALLOW,
    SKIP,
    Handle,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
    Status,
)
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    PreFilterResult,
    Rejection,
    ScorePlugin,
)
from podium.framework.profile import Profile
from podium.kube.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.policy import PolicyError, build_profile, default_profile
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

__all__ = [
    "ALLOW",
    "SKIP",
    "Cache",
    "ClusterEvent",
    "Cycle",
    "Diagnosis",
    "FilterPlugin",
    "Handle",
    "NodeInfo",
    "PermitPlugin",
    "Placement",
    "PodInfo",
    "PolicyError",
    "PostBindPlugin",
    "PreBindPlugin",
    "PreFilterResult",
    "Profile",
    "Rejection",
    "ReservePlugin",
    "Scheduler",
    "ScorePlugin",
    "Snapshot",
    "Status",
    "__version__",
    "build_profile",
    "default_profile",
    "parse_node",
    "parse_pod",
]
