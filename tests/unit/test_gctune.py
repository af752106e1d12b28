"""tune_gc: start-up objects leave the collector's view; young collections become rare."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from podium.runtime.gctune import THRESHOLDS, tune_gc


@pytest.fixture
def restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def collections_while_allocating(containers: int) -> int:
    """How many collections start while ``containers`` lists are created and kept."""
    started: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(count)
    try:
        kept = [[] for _ in range(containers)]
    finally:
        gc.callbacks.remove(count)
    assert len(kept) == containers
    return len(started)


@pytest.mark.usefixtures("restore_gc")
def test_young_collections_become_rare() -> None:
    kept = THRESHOLDS[0] // 2  # half the young threshold: no young pass once tuned
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    gc.collect()
    with_defaults = collections_while_allocating(kept)
    tune_gc()
    tuned = collections_while_allocating(kept)
    assert with_defaults >= kept // 700
    assert tuned == 0


@pytest.mark.usefixtures("restore_gc")
def test_start_up_objects_leave_the_collectors_view() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    tune_gc()
    assert gc.get_freeze_count() > 1000  # modules, classes and functions imported so far


@pytest.mark.usefixtures("restore_gc")
def test_cycles_are_still_collected_after_tuning() -> None:
    class Node:
        other: object = None

    tune_gc()
    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 2
