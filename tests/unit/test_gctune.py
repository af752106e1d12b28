"""tune_gc: start-up objects leave the collector's view, and collections run less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from podium.gctune import THRESHOLDS, tune_gc


@pytest.fixture
def restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restore_gc")
def test_tune_gc_freezes_start_up_objects_and_raises_thresholds() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    tune_gc()
    assert gc.get_threshold() == (50_000, 20, 10) == THRESHOLDS
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
