"""Garbage-collector settings for the long-running `podium run` process.

CPython's defaults, (700, 10, 10), start a young collection every 700 container
allocations and a full one whenever the long-lived heap has grown by a quarter.
A scheduler's heap grows with its cache, and each full pass walks all of it and
pauses the event loop: on SchedulingBasic 1000 nodes / 3000 pods the defaults
made about 1,200 young and 11 full passes, 3.5 CPU s over the run, at about
0.2 s per full pass. Parsed API objects hold no reference cycles and are freed
by reference counting as before; only the rare cycles (an exception and its
traceback, say) wait longer for a collection. Objects alive at start-up
(modules, classes, kopf's registry) are moved out of the collector's view, and
the young threshold is raised so that collections run about 70 times less often.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 10)


def tune_gc() -> None:
    """Call once, after the imports and before the first watch event."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
