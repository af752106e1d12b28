"""Garbage-collector settings for the long-running `podium run` process.

CPython's defaults, (700, 10, 10), start a young collection every 700 container
allocations and a full one whenever the long-lived heap has grown by a quarter.
A scheduler's heap grows with its cache, and each full pass walks all of it and
pauses the event loop: on SchedulingBasic 1000 nodes / 3000 pods the defaults
made about 1,200 young and 11 full passes, 3.5 CPU s over the run, at about
0.2 s per full pass. Podium's parsed API objects hold no reference cycles and
are freed by reference counting as before; the rare cycles (an exception and its
traceback, say) wait longer for a collection. Objects alive at start-up
(modules, classes, kopf's registry) are moved out of the collector's view, and
the older generations are collected about 140 times less often (every 10,000
allocations a young pass, every 100 young passes a middle one).

The youngest generation stays small: it is where the cyclic garbage dies, and
each watch event delivered through kopf leaves some (its ``Body`` and the views
and patches that point back at it keep the event's whole object alive until a
pass). A young pass frees what piled up since the last one, in one callback: at
50,000 allocations a pass during a churn of 13 pods a second freed ~34,000
objects and held the loop 106 ms; at 10,000 the passes hold it about a fifth as
long. The middle generation's count is raised by as much, so the older passes
keep their pace.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 100, 10)


def tune_gc() -> None:
    """Call once, after the imports and before the first watch event."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
