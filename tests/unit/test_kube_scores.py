"""The differential tests' reader of kube-scheduler's -v=10 log (tests/e2e/differential)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.differential.kube_scores import GROUP_SCHEDULED, KubeLog, Scoring

_PREFIX = "I1204 10:29:15.373883   26083 schedule_one.go:117] "


def _attempt(pod: str) -> str:
    return f'"Attempting to schedule pod" pod="{pod}"'


def _score(pod: str, node: str, score: int) -> str:
    return f'"Calculated node\'s final score for pod" pod="{pod}" node="{node}" score={score}'


def _bound(pod: str, node: str, feasible: int) -> str:
    return (
        f'"Successfully bound pod to node" pod="{pod}" node="{node}" '
        f"evaluatedNodes=3 feasibleNodes={feasible}"
    )


def _write(path: Path, *messages: str) -> None:
    with path.open("a") as log:
        log.writelines(_PREFIX + m + "\n" for m in messages)


@pytest.mark.parametrize(
    ("scoring", "node", "best"),
    [
        (Scoring(0, {"a": 300, "b": 250}, "a", 2), "a", "a"),
        (Scoring(0, {"a": 300, "b": 300}, "b", 2), "b", ""),  # tied top: kube picked at random
        (Scoring(0, {}, "a", 1), "a", "a"),  # one feasible node is not scored
        (Scoring(0, {}, "", 0), "a", "a"),  # bind not logged yet (a PreBind that waits)
        (Scoring(0, {}, "a", 1, hinted=True), "a", ""),  # batching skipped the search
    ],
)
def test_unique_best(scoring: Scoring, node: str, best: str) -> None:
    assert scoring.unique_best(node) == best


@pytest.mark.parametrize(
    ("scoring", "node"),
    [
        (Scoring(0, {"a": 300, "b": 250}, "b", 2), "b"),  # bound below the top
        (Scoring(0, {"a": 300, "b": 250}, "", 0), "b"),  # chosen below the top
        (Scoring(0, {"a": 300}, "a", 2), "a"),  # a feasible node without a score
        (Scoring(0, {"a": 300}, "a", 1), "b"),  # the log binds elsewhere
        (Scoring(0, {}, "a", 3), "a"),  # three feasible nodes, none scored
    ],
)
def test_a_contradicting_log_is_an_error(scoring: Scoring, node: str) -> None:
    with pytest.raises(ValueError):
        scoring.unique_best(node)


def test_the_cycle_between_marks_is_the_decision(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.log"
    _write(path, _attempt("ns/p"), _score("ns/p", "a", 10), _score("ns/p", "b", 90))
    log = KubeLog(path)
    asked = log.mark()
    _write(path, "unrelated line", _attempt("ns/p"), _score("ns/p", "a", 80))
    # A partial line is not parsed until its end arrives.
    with path.open("a") as out:
        out.write(_PREFIX + _score("ns/p", "b", 20)[:30])
    seen = log.mark()
    cycle = log.cycle("ns", "p", asked, seen)
    assert cycle.scores == {"a": 80}
    with path.open("a") as out:
        out.write(_score("ns/p", "b", 20)[30:] + "\n" + _PREFIX + _bound("ns/p", "a", 2) + "\n")
    _write(path, _attempt("ns/p"))  # a later cycle is not the decision
    assert log.cycle("ns", "p", asked, seen) is cycle
    assert cycle.scores == {"a": 80, "b": 20}
    assert cycle.unique_best("a") == "a"
    with pytest.raises(ValueError):
        log.cycle("ns", "other", asked, seen)


@pytest.mark.parametrize(
    ("scores", "tied"),
    [({"a": 300, "b": 250}, False), ({"a": 300, "b": 300, "c": 10}, True), ({}, False)],
)
def test_tied(scores: dict[str, int], tied: bool) -> None:
    assert Scoring(0, scores).tied() is tied


def test_a_pod_group_member_cycle_is_a_cycle(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.log"
    log = KubeLog(path)
    _write(path, _attempt("ns/early"))
    start = log.mark()
    member = '"Attempting to schedule a pod belonging to a pod group" podGroup="ns/g" pod="ns/m0"'
    _write(path, member, _score("ns/m0", "a", 50), _score("ns/m0", "b", 50))
    _write(path, '"Attempting to schedule pod group" podGroup="ns/g"', member)
    cycles = log.cycles("ns", "m0", start)
    assert [c.scores for c in cycles] == [{"a": 50, "b": 50}, {}]
    assert cycles[0].tied()
    assert log.cycles("ns", "early", start) == []


async def test_events_count_only_after_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.log"
    _write(path, '"Add event for node" node="n1"')
    log = KubeLog(path)
    mark = log.mark()
    _write(path, '"Update event for scheduled pod" pod="ns/p"')
    await log.wait_events([("Update event for scheduled pod", "ns/p")], after=mark)
    with pytest.raises(TimeoutError, match="n1"):
        await log.wait_events([("Add event for node", "n1")], after=mark, timeout=0.1)


def test_a_scheduled_pod_group_is_found_by_its_key(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.log"
    log = KubeLog(path)
    path.touch()
    mark = log.mark()
    scheduled = '"Successfully scheduled a pod group" podGroupType="podgroup" podGroup="ns/{}" '
    _write(path, scheduled.format("g1") + "scheduledPods=4 unschedulablePods=0")
    assert log.logged(GROUP_SCHEDULED, "ns/g1", mark)
    assert not log.logged(GROUP_SCHEDULED, "ns/g2", mark)
    assert not log.logged(GROUP_SCHEDULED, "ns/g1", log.mark())


def test_member_orders_are_each_group_cycles(tmp_path: Path) -> None:
    """Each cycle's members in the order it attempted them; cycles before the mark are
    left out."""
    path = tmp_path / "kube-scheduler.log"
    path.touch()
    log = KubeLog(path)
    group = '"Running a pod group scheduling algorithm" podGroup="ns/g" unscheduledPodsCount=3'
    member = '"Attempting to schedule a pod belonging to a pod group" podGroup="ns/g" pod="ns/{}"'
    assert log.member_orders("ns", "g", ["m0"], 0) == []
    _write(path, group, member.format("m1"))
    mark = log.mark()
    for order in (("m0", "m1", "m2"), ("m2", "m0")):
        _write(path, group)
        for name in order:
            _write(path, member.format(name))
    members = ["m0", "m1", "m2"]
    assert log.member_orders("ns", "g", members, mark) == [["m0", "m1", "m2"], ["m2", "m0"]]
    assert log.member_orders("ns", "g", members, 0)[0] == ["m1"]


def test_a_failed_attempts_error_is_read_per_pod(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.log"
    path.touch()
    log = KubeLog(path)
    error = (
        '"Error scheduling pod; retrying" err="running PreBind plugin \\"DRA\\": {}" pod="ns/{}"'
    )
    _write(path, error.format("early", "m0"))
    mark = log.mark()
    _write(path, error.format("claim ns/c got allocated elsewhere", "m0"))
    assert log.errors("ns", "m0", 0)[0].endswith("early")
    assert log.errors("ns", "m0", mark) == [
        'running PreBind plugin \\"DRA\\": claim ns/c got allocated elsewhere'
    ]
    assert log.errors("ns", "m1", 0) == []


def test_members_left_out_of_a_popped_group_are_found(tmp_path: Path) -> None:
    """AddPodGroup moved m2 and m0 in, the loop popped the group, then m1 was set aside
    (seed 9 of [gang-topology]); lines before the mark do not count."""
    path = tmp_path / "kube-scheduler.log"
    path.touch()
    log = KubeLog(path)
    pending = (
        '"Pod added to pending pod group pods, waiting for its root group to be requeued" '
        'rootType="podgroup" root="ns/g" pod="ns/{}"'
    )
    _write(path, pending.format("m2"))
    mark = log.mark()
    _write(
        path,
        '"Pod was added to root group as the first member pod" root="ns/g" pod="ns/m2"',
        '"Pod added to existing root group info" root="ns/g" pod="ns/m0" queue="Active"',
        pending.format("m1"),
    )
    assert log.left_out("ns", ["m0", "m1", "m2"], mark) == ["m1"]
    assert log.left_out("ns", ["m0", "m1", "m2"], 0) == ["m1", "m2"]
