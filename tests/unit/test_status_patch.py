"""status_patch: the PodScheduled condition and the nomination in one write (Go's updatePod)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from podium.kube.client import KubeClient
from podium.kube.objects import PodInfo, parse_pod
from podium.scheduling.binder import Binder, status_patch
from tests.unit.builders import pod

MESSAGE = "0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement"


def pending(nominated: str = "", condition: dict[str, Any] | None = None) -> PodInfo:
    body = pod("p")
    body["metadata"]["resourceVersion"] = "7"
    body["status"] = {"nominatedNodeName": nominated} if nominated else {}
    if condition is not None:
        body["status"]["conditions"] = [{"type": "PodScheduled", **condition}]
    return parse_pod(body)


def test_condition_and_nomination_go_in_one_patch_conditional_on_the_version() -> None:
    patch = status_patch(pending(), "Unschedulable", MESSAGE, "n1")
    assert patch is not None
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["status"]["nominatedNodeName"] == "n1"
    [condition] = patch["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == MESSAGE


@pytest.mark.parametrize(
    ("nominated", "nominating", "written"),
    [
        ("", None, None),  # ModeNoop: the nomination is left alone
        ("n1", None, None),
        ("n1", "n1", None),  # unchanged: not written (nnnNeedsUpdate false)
        ("", "n1", "n1"),
        ("n1", "n2", "n2"),
        ("n1", "", "clear"),  # cleared: JSON null in the merge patch
    ],
)
def test_the_nomination_is_written_only_when_it_changes(
    nominated: str, nominating: str | None, written: str | None
) -> None:
    patch = status_patch(pending(nominated), "Unschedulable", MESSAGE, nominating)
    assert patch is not None  # the condition is new
    status = patch["status"]
    if written is None:
        assert "nominatedNodeName" not in status
    else:
        assert status["nominatedNodeName"] == (None if written == "clear" else written)


def test_an_unchanged_condition_is_left_out_and_nothing_left_is_no_write() -> None:
    same = {"status": "False", "reason": "Unschedulable", "message": MESSAGE}
    assert status_patch(pending("n1", same), "Unschedulable", MESSAGE, "n1") is None
    patch = status_patch(pending("n1", same), "Unschedulable", MESSAGE, "n2")
    assert patch is not None
    assert patch["status"] == {"nominatedNodeName": "n2"}


@pytest.mark.parametrize(
    "change", [{"status": "True"}, {"reason": "SchedulerError"}, {"message": "other"}]
)
def test_a_changed_condition_is_written(change: dict[str, str]) -> None:
    old = {"status": "False", "reason": "Unschedulable", "message": MESSAGE, **change}
    patch = status_patch(pending("", old), "Unschedulable", MESSAGE)
    assert patch is not None
    assert patch["status"]["conditions"][0]["message"] == MESSAGE


class _Patches:
    """Records status patches; answers with the pod at a new resourceVersion, or fails."""

    def __init__(self, fail: bool = False) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.fail = fail
        self.metrics = None

    async def patch(self, path: str, body: Any, kind: str = "") -> Any:
        self.patches.append((path, body))
        if self.fail:
            raise ConnectionError("connection refused")
        return {"metadata": {"resourceVersion": "8"}, "status": body["status"]}


@pytest.mark.parametrize(
    ("nominated", "fail", "written", "after"),
    [
        pytest.param("", False, True, ("n1", "8"), id="written"),
        pytest.param("n2", False, True, ("n1", "8"), id="replaces-a-preemption-nomination"),
        pytest.param("n1", False, False, ("n1", "7"), id="already-there"),
        pytest.param("", True, True, ("", "7"), id="write-lost-binding-goes-on"),
    ],
)
async def test_the_nomination_before_prebind(
    nominated: str, fail: bool, written: bool, after: tuple[str, str]
) -> None:
    """bindingCycle's updatePod: nominatedNodeName only, conditional on the pod's UID."""
    client = _Patches(fail)
    before = pending(nominated)
    now = await Binder(cast(KubeClient, client), "i").nominate(before, "n1")
    assert (now.nominated_node, now.resource_version) == after
    if not written:
        assert client.patches == []
        return
    [(path, body)] = client.patches
    assert path == f"/api/v1/namespaces/{before.namespace}/pods/p/status"
    assert body == {"metadata": {"uid": before.uid}, "status": {"nominatedNodeName": "n1"}}
