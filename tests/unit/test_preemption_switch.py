"""``podium run --disable-preemption`` binds every profile, the policies' ones included."""

from __future__ import annotations

from typing import cast

import pytest

from podium.policy import build_profile, default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler


@pytest.mark.parametrize(("allowed", "expected"), [(True, True), (False, False)])
def test_the_run_switch_is_a_ceiling_over_every_profile(allowed: bool, expected: bool) -> None:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    scheduler = PodiumScheduler(binder, {"podium": default_profile("podium")}, preemption=allowed)
    scheduler.set_profile(build_profile({"schedulerName": "podium"}, policy="mine"))
    scheduler.set_profile(build_profile({"schedulerName": "batch"}, policy="batch"))
    assert {n: p.preemption for n, p in scheduler.profiles.items()} == {
        "podium": expected,
        "batch": expected,
    }
    assert scheduler.profiles["podium"].policy == "mine"
