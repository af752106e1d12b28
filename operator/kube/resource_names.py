"""Which resource names are which: native, extended, scalar, and settable at pod level.

Ports of v1helper.IsNativeResource / IsExtendedResourceName,
schedutil.IsScalarResourceName and component-helpers'
IsSupportedPodLevelResource, on which NodeResourcesFit and the request model
agree.
"""

from __future__ import annotations

import re

__all__ = [
    "counted_resource",
    "is_extended_resource",
    "is_native_resource",
    "is_scalar_resource",
    "pod_level_resource",
]


_POD_LEVEL = frozenset({"cpu", "memory"})
_HUGEPAGES = "hugepages-"
_BASE = frozenset({"cpu", "memory", "ephemeral-storage"})
# IsQualifiedName on "requests.<name>": an optional DNS-subdomain prefix and a name.
_QUALIFIED = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def is_native_resource(name: str) -> bool:
    """IsNativeResource: unprefixed, or any name containing ``kubernetes.io/``."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a qualified, non-native, non-quota name."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return len(name) <= 253 and bool(_QUALIFIED.match(name))


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: the names a scheduler Resource keeps beside cpu/memory."""
    return (
        is_extended_resource(name)
        or name.startswith(_HUGEPAGES)
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def counted_resource(name: str) -> bool:
    """Resource.SetMaxResource / Add: cpu, memory, ephemeral-storage and scalar names."""
    return name in _BASE or is_scalar_resource(name)


def pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL or name.startswith(_HUGEPAGES)
