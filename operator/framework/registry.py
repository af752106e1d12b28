"""Filters and scores, registered by name so a SchedulerPolicy can pick them.

Built-in plugins (``podium.algorithms``) register themselves on import;
third-party plugins are loaded from the ``podium.plugins`` entry-point group,
each entry pointing at a FilterPlugin or ScorePlugin subclass (a class that is
both registers in both tables), or at a plugin of the points after Score
(``framework/extension``), which registers in EXTENSIONS. A filter or score that also
implements those points (VolumeBinding, DynamicResources) runs them when enabled as a
filter, and is no extension of its own.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TypeVar

import structlog

from podium.framework.extension import PermitPlugin, PostBindPlugin, PreBindPlugin, ReservePlugin
from podium.framework.plugin import FilterPlugin, Plugin, ScorePlugin

__all__ = ["EXTENSIONS", "FILTERS", "SCORES", "load_entry_points", "register"]

FILTERS: dict[str, type[FilterPlugin]] = {}
SCORES: dict[str, type[ScorePlugin]] = {}
EXTENSIONS: dict[str, type[Plugin]] = {}
_POINTS = (ReservePlugin, PermitPlugin, PreBindPlugin, PostBindPlugin)

P = TypeVar("P", bound=type[Plugin])


log = structlog.get_logger("podium.framework.registry")


def register(cls: P) -> P:
    """Class decorator: add a plugin to the filter, score and extension tables it fits."""
    if issubclass(cls, FilterPlugin):
        FILTERS[cls.name] = cls
    if issubclass(cls, ScorePlugin):
        SCORES[cls.name] = cls
    if issubclass(cls, _POINTS) and not issubclass(cls, (FilterPlugin, ScorePlugin)):
        EXTENSIONS[cls.name] = cls
    return cls


def load_entry_points() -> list[str]:
    """Import third-party plugins; a broken one is logged and skipped, never fatal."""
    loaded: list[str] = []
    for entry in entry_points(group="podium.plugins"):
        try:
            cls = entry.load()
        except Exception as exc:  # a plugin's import error must not stop the scheduler
            log.error("plugin_load_failed", plugin=entry.name, error=str(exc))
            continue
        if not (isinstance(cls, type) and issubclass(cls, (FilterPlugin, ScorePlugin, *_POINTS))):
            log.error("plugin_not_a_plugin", plugin=entry.name, value=repr(cls))
            continue
        register(cls)
        loaded.append(cls.name)
    return loaded
