"""Watch handlers: translate events into cache updates and queue pushes.

Only ``kopf.on.event`` handlers are used: they store nothing on the objects (no
annotations, no finalizers, no progress), which change-detection handlers would
do on every user pod. They are ``async`` so that kopf runs them on the event
loop: a plain ``def`` would run in kopf's thread pool and mutate the cache from
another thread while a scheduling cycle reads it. Pods come through a direct
``ListWatch`` (``podium.kube.listwatch``) that calls the same handler on the loop.
"""

from __future__ import annotations

from podium.handlers.policies import register_policies
from podium.handlers.watched import direct_watches, register_watches

__all__ = ["direct_watches", "register_policies", "register_watches"]
