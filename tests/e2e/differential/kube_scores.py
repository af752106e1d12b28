"""kube-scheduler's own view of a decision, read from its -v=10 log.

A differential test may compare the chosen node only where the best node is
unique, and that uniqueness must come from kube-scheduler's scores, not
Podium's. For every scheduling cycle of a pod kube-scheduler logs "Attempting
to schedule pod"; when more than one node is feasible, prioritizeNodes then
logs one "Calculated node's final score for pod" line per feasible node (at
-v=10); after the bind comes "Successfully bound pod to node" with the number
of feasible nodes. A single feasible node is never scored: it is unique by
itself. The cycle's lines are all written before its decision reaches the
API server, so they are complete once the harness has seen that decision.

The same log shows when kube-scheduler's informers delivered a node or a
bound pod (add, update, delete events), so a harness can wait for those
instead of sleeping, and when a cycle scheduled a pod group. The file is read
incrementally: a long run costs one pass over it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from podium.devcluster.objects import wait_for

ATTEMPT = "Attempting to schedule pod"
MEMBER_ATTEMPT = "Attempting to schedule a pod belonging to a pod group"  # -v=4
SCORE = "Calculated node's final score for pod"
BOUND = "Successfully bound pod to node"
HINT = "OpportunisticBatch provided node hint"
NODE_ADDED = "Add event for node"
NODE_DELETED = "Delete event for node"
POD_ADDED = "Add event for scheduled pod"
POD_UPDATED = "Update event for scheduled pod"
POD_DELETED = "Delete event for scheduled pod"
GROUP_SCHEDULED = "Successfully scheduled a pod group"
SCHEDULE_ERROR = "Error scheduling pod; retrying"  # handleSchedulingFailure, with err=
GROUP_CYCLE = "Running a pod group scheduling algorithm"  # -v=5
# -v=5, addPodGroupMember: the queue took a pod in whose PodGroup it has not observed yet.
MEMBER_INCOMPLETE = (
    "Pod with pod group added to incompletePodGroupPods, waiting for one or more parent pod "
    "group objects to be observed"
)
# -v=5: the queue took a pod of a pod group in, after its PreEnqueue ran where the group is
# known (addPodGroupMember, addToPodGroupIfExists): one of these per member.
# -v=5, addPodGroupMember: the pod's group was popped (a group cycle is running without it).
MEMBER_PENDING = "Pod added to pending pod group pods, waiting for its root group to be requeued"
MEMBER_QUEUED = (
    MEMBER_INCOMPLETE,
    "Pod was added to root group as the first member pod",
    "Pod added to existing root group info",
    MEMBER_PENDING,
)
_EVENTS = (
    NODE_ADDED,
    NODE_DELETED,
    POD_ADDED,
    POD_UPDATED,
    POD_DELETED,
    GROUP_SCHEDULED,
    GROUP_CYCLE,
    *MEMBER_QUEUED,
)
_LINE = re.compile(
    '"(?P<msg>'
    + "|".join(
        re.escape(m)
        for m in (MEMBER_ATTEMPT, ATTEMPT, SCORE, BOUND, HINT, SCHEDULE_ERROR, *_EVENTS)
    )
    + ')"(?P<rest>.*)'
)
_CLOCK = re.compile(r"[IWEF]\d{4} (\d\d):(\d\d):(\d\d\.\d+) ")
_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


@dataclass
class Scoring:
    """One scheduling cycle of one pod, as kube-scheduler logged it."""

    start: int  # offset of the cycle's first line in the log
    scores: dict[str, int] = field(default_factory=dict)
    bound: str = ""  # from the bind line, which may come after the decision is seen
    feasible: int = 0
    hinted: bool = False  # opportunistic batching reused an earlier pod's scores
    time: float = 0.0  # seconds since midnight of the cycle's first line (klog's header)

    def tied(self) -> bool:
        """Whether more than one node holds the top score: kube-scheduler's pick among
        them is random (the heap's layout over its Filter goroutines' finds)."""
        top = max(self.scores.values(), default=None)
        return sum(1 for score in self.scores.values() if score == top) > 1

    def unique_best(self, node: str) -> str:
        """``node`` if kube-scheduler's scores make it the single best, else ''.

        ``node`` is where this cycle put the pod. Unscored, it was the only
        feasible node, unique by itself, unless a batching hint skipped the
        search (a nominated pod's cycle does too and is not marked: pass only
        pods that were never nominated). Scored, it must hold the top score,
        alone for a unique best. A log that contradicts this is not what this
        reader expects: it says so.
        """
        if self.hinted:
            return ""
        if self.bound and self.bound != node:
            raise ValueError(f"kube-scheduler logged a bind to {self.bound}, not {node}")
        if self.feasible > 1 and self.feasible != len(self.scores):
            raise ValueError(f"{len(self.scores)} scores logged for {self.feasible} feasible nodes")
        if not self.scores:
            return node
        top = max(self.scores.values())
        best = [name for name, score in self.scores.items() if score == top]
        if node not in best:
            raise ValueError(f"{node} was chosen, but {best} hold the top score {top}")
        return node if len(best) == 1 else ""


class KubeLog:
    """Scheduling cycles and informer events parsed from one kube-scheduler log file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._consumed = 0  # file offset of the first byte of _partial
        self._partial = b""
        self._cycles: dict[str, list[Scoring]] = {}
        self._events: dict[tuple[str, str], int] = {}  # (message, object) -> last offset
        self._group_cycles: dict[str, list[int]] = {}  # pod group -> each cycle's offset
        self._errors: dict[str, list[tuple[int, str]]] = {}  # pod -> (offset, err)

    def _read(self) -> None:
        with self.path.open("rb") as log:
            log.seek(self._consumed + len(self._partial))
            data = self._partial + log.read()
        offset = self._consumed
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            self._parse(raw.decode(errors="replace"), offset)
            offset += len(raw) + 1
        self._consumed = offset

    def _parse(self, line: str, offset: int) -> None:
        match = _LINE.search(line)
        if match is None:
            return
        msg = match["msg"]
        pairs = {k: v.strip('"') for k, v in _PAIR.findall(match["rest"])}
        if msg in _EVENTS:
            subject = pairs.get("pod") or pairs.get("node") or pairs.get("podGroup", "")
            self._events[(msg, subject)] = offset
            if msg == GROUP_CYCLE:
                self._group_cycles.setdefault(subject, []).append(offset)
            return
        if msg == SCHEDULE_ERROR:
            self._errors.setdefault(pairs.get("pod", ""), []).append((offset, pairs.get("err", "")))
            return
        cycles = self._cycles.setdefault(pairs["pod"], [])
        if msg in (ATTEMPT, MEMBER_ATTEMPT):
            clock = _CLOCK.match(line)  # klog's header: "I1206 01:44:24.156865 ..."
            when = 0.0
            if clock:
                when = int(clock[1]) * 3600 + int(clock[2]) * 60 + float(clock[3])
            cycles.append(Scoring(start=offset, time=when))
        elif not cycles:
            return
        elif msg == HINT:
            cycles[-1].hinted = True
        elif msg == BOUND:
            cycles[-1].bound = pairs["node"]
            cycles[-1].feasible = int(pairs["feasibleNodes"])
        else:
            cycles[-1].scores[pairs["node"]] = int(pairs["score"])

    def mark(self) -> int:
        """The log's current end: events and cycles after it are new."""
        self._read()
        return self._consumed + len(self._partial)

    async def wait_events(
        self,
        events: Iterable[tuple[str, str]],
        after: int,
        timeout: float = 15.0,  # noqa: ASYNC109 - the error names what never came
    ) -> None:
        """Wait until kube-scheduler has logged each (message, object) event since ``after``.

        Objects are node names and namespace/name for pods. The event is
        logged as the informer hands it to the scheduler's cache, so this is
        the point from which its next cycle sees the change.
        """
        wanted = list(events)

        def missing() -> list[tuple[str, str]]:
            self._read()
            return [event for event in wanted if self._events.get(event, -1) < after]

        try:
            await wait_for(lambda: not missing(), timeout=timeout, interval=0.02)
        except TimeoutError:
            raise TimeoutError(f"kube-scheduler never logged {missing()}") from None

    def offset(self, message: str, subject: str) -> int:
        """Where kube-scheduler last logged the (message, object) event; -1 if never."""
        self._read()
        return self._events.get((message, subject), -1)

    def logged(self, message: str, subject: str, after: int) -> bool:
        """Whether kube-scheduler logged the (message, object) event since ``after``."""
        self._read()
        return self._events.get((message, subject), -1) >= after

    def cycles(self, namespace: str, name: str, after: int) -> list[Scoring]:
        """Every scheduling cycle of the pod begun since ``after``, a pod group's
        member cycles included (podGroupPodSchedulingAlgorithm logs its own start)."""
        self._read()
        return [c for c in self._cycles.get(f"{namespace}/{name}", []) if c.start >= after]

    def left_out(self, namespace: str, names: Iterable[str], after: int) -> list[str]:
        """The pods, of ``names``, that kube-scheduler's queue set aside since ``after``
        because their group was popped without them (MEMBER_PENDING)."""
        return [n for n in names if self.logged(MEMBER_PENDING, f"{namespace}/{n}", after)]

    def errors(self, namespace: str, name: str, after: int) -> list[str]:
        """The errors kube-scheduler logged for the pod's failed attempts since ``after``."""
        self._read()
        return [err for at, err in self._errors.get(f"{namespace}/{name}", []) if at >= after]

    def member_orders(
        self, namespace: str, group: str, members: Iterable[str], after: int
    ) -> list[list[str]]:
        """For each cycle of the pod group begun since ``after``, the members it attempted,
        in its order.

        schedulePodGroupAlgorithm walks its queued members sorted by
        PodGroupMemberPodsOrderingFunc: priority, then attempts, then the time each
        was queued, which is the order its event handlers moved them (out of
        PreEnqueue's wait, or back after a failed cycle), not their creation order. It
        stops at the first member after which minCount can no longer be met, so later
        members are missing from that cycle's list.
        """
        self._read()
        starts = [o for o in self._group_cycles.get(f"{namespace}/{group}", []) if o >= after]
        names = list(members)
        orders = []
        for i, began in enumerate(starts):
            ends = starts[i + 1] if i + 1 < len(starts) else None
            attempted = sorted(
                (cycle.start, name)
                for name in names
                for cycle in self._cycles.get(f"{namespace}/{name}", [])
                if cycle.start > began and (ends is None or cycle.start < ends)
            )
            orders.append([name for _, name in attempted])
        return orders

    def cycle(self, namespace: str, name: str, after: int, before: int) -> Scoring:
        """The pod's last scheduling cycle begun between two marks.

        Take ``before`` once the decision is seen: the cycle that made it had
        logged its start and its scores by then, and no later one had begun.
        """
        self._read()
        key = f"{namespace}/{name}"
        cycles = [c for c in self._cycles.get(key, []) if after <= c.start < before]
        if not cycles:
            raise ValueError(f"kube-scheduler logged no scheduling cycle of {key}")
        return cycles[-1]
