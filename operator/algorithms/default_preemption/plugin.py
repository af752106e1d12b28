"""DefaultPreemption: the PostFilter plugin that preempts for a pod, or a PodGroup, that
fits nowhere.

kube-scheduler's ``defaultpreemption.DefaultPreemption`` (plugins/defaultpreemption/
default_preemption.go): its PostFilter counts the attempt, runs the Evaluator and
answers Success with the chosen node as the pod's nomination, or Unschedulable with
the "preemption: ..." reasons. The Evaluator is ``podium.framework.preemption`` (pure,
shared with the offline tools through ``evaluate`` here); the Executor is
``executor.py``, started beside the scheduler through the handle once the lower-priority
nominations on the node are cleared from memory (Go's prepareCandidateAsync). Its
PodGroupPostFilter is the same for a PodGroup (Go's PodGroupEvaluator, decided by
``podium.framework.podgroup_preemption``), its members nominated where the group fits.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from podium.algorithms.default_preemption.executor import actuate, actuate_group
from podium.framework.binding import post_filter_plugins
from podium.framework.extension import (
    FailedCycle,
    FailedGroup,
    Handle,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PostFilterPlugin,
    PostFilterResult,
    Status,
)
from podium.framework.podgroup_preemption import GroupPreemption, preempt_group
from podium.framework.preemption import PreemptionResult, evaluate

if TYPE_CHECKING:
    from podium.framework.cycle import Diagnosis, Nominated
    from podium.framework.profile import Profile
    from podium.kube.objects import PodInfo
    from podium.kube.pdb import Pdb
    from podium.state.podgroups import PodGroup
    from podium.state.snapshot import Snapshot

__all__ = [
    "NAME",
    "DefaultPreemption",
    "offline_group_preemption",
    "offline_message",
    "offline_preemption",
]

NAME = "DefaultPreemption"

log = structlog.get_logger("podium.algorithms.default_preemption")


class DefaultPreemption(PostFilterPlugin, PodGroupPostFilterPlugin):
    """PostFilter: preempt lower-priority pods so that the pod fits on one node;
    PodGroupPostFilter: so that a PodGroup's members fit together.

    Its arguments (minCandidateNodesPercentage, minCandidateNodesAbsolute) are checked
    by ``policy.preemption_args`` and kept on the profile, where the dry run reads them.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args  # read into the profile by the policy

    def evaluate(
        self,
        pod: PodInfo,
        failed: FailedCycle,
        snapshot: Snapshot,
        rng: random.Random,
        pdbs: Iterable[Pdb] = (),
        nominated: Nominated | None = None,
        groups: Mapping[str, PodGroup] | None = None,
    ) -> PreemptionResult:
        """Evaluator.Preempt without actuation: the candidate, the nomination and the
        "preemption: ..." message. The live PostFilter and the offline tools both call
        this; ``groups`` (GenericWorkload on) makes whole ``disruptionMode: All``
        PodGroups victims."""
        return evaluate(
            failed.profile,
            snapshot,
            pod,
            failed.diagnosis,
            rng,
            pdbs,
            nominated,
            failed.nominated_node,
            groups,
        )

    def post_filter(self, handle: Handle, pod: PodInfo, failed: FailedCycle) -> PostFilterResult:
        """PostFilter: decide, then clear the lower-priority nominations on the chosen
        node and start the evictions (prepareCandidateAsync)."""
        result = self._decide(handle, pod, failed)
        candidate = result.candidate
        if candidate is not None:
            handle.metrics.preemption_victims.observe(len(candidate.victims))
            nominator = handle.nominator
            lower = nominator.lower_priority_on(candidate.node, pod.priority)
            for other in lower:
                nominator.remove(other.uid)
            evicting = actuate(
                handle.client,
                pod,
                candidate,
                failed.profile.scheduler_name,
                handle.instance,
                list(handle.pdbs),
                lower,
            )
            handle.preempting("pod", [pod.uid], evicting)
        return _answer(result)

    def post_filter_dry_run(
        self, handle: Handle, pod: PodInfo, failed: FailedCycle
    ) -> PostFilterResult:
        """A dry-run profile's PostFilter: the same decision and counts, no write."""
        return _answer(self._decide(handle, pod, failed))

    def _decide(self, handle: Handle, pod: PodInfo, failed: FailedCycle) -> PreemptionResult:
        """The attempt counted first (Go's deferred PreemptionAttempts.Inc counts one that
        fails too), then the evaluation, timed under the preemptor type "pod"."""
        handle.metrics.preemption_attempts.inc()
        started = time.perf_counter()
        result = self.evaluate(
            pod,
            failed,
            handle.snapshot,
            handle.rng,
            handle.pdbs,
            handle.nominator.by_node,
            handle.pod_groups,
        )
        status = "Unschedulable" if result.candidate is None else "Success"
        seconds = time.perf_counter() - started
        handle.metrics.preemption_evaluation.labels("pod", status).observe(seconds)
        return result

    def evaluate_group(
        self, failed: FailedGroup, groups: Mapping[str, PodGroup], pdbs: Iterable[Pdb] = ()
    ) -> GroupPreemption:
        """PodGroupEvaluator.Preempt without actuation, on ``failed.board`` (left as it
        was): the victims, the members' nominations and the "pod group preemption: ..."
        message. The live PodGroupPostFilter and explain both call this."""
        return preempt_group(
            failed.board,
            failed.profile,
            failed.group,
            failed.entries,
            failed.scheduled,
            groups,
            pdbs,
        )

    def pod_group_post_filter(
        self, handle: Handle, failed: FailedGroup
    ) -> PodGroupPostFilterResult:
        """PodGroupPostFilter: decide on the board, count the attempt under its code
        (scheduler_workload_preemption_attempts_total), start the evictions."""
        group = failed.group
        pdbs = list(handle.pdbs)
        try:
            result = self.evaluate_group(failed, handle.pod_groups or {}, pdbs)
        except Exception:
            handle.metrics.workload_preemption_attempts.labels("Error").inc()
            raise
        code = "Success" if result.success else "Unschedulable"
        if result.unresolvable:
            code = "UnschedulableAndUnresolvable"
        if result.error:
            code = "Error"
        handle.metrics.workload_preemption_attempts.labels(code).inc()
        if result.victims:
            log.info(
                "pod_group_preemption",
                pod_group=group.key,
                victims=[v.key for v in result.victims],
                nominated=result.nominations,
                pdb_violations=result.num_pdb_violations,
            )
            name = failed.profile.scheduler_name
            evicting = actuate_group(
                handle.client, group, result.victims, name, handle.instance, pdbs
            )
            handle.preempting("podgroup", [e.pod.uid for e in failed.entries], evicting)
        if result.success:
            return PodGroupPostFilterResult(Status("Success", result.message), result.nominations)
        return PodGroupPostFilterResult(
            Status("Error" if result.error else "Unschedulable", result.message)
        )


def _answer(result: PreemptionResult) -> PostFilterResult:
    """Success with a candidate (it stops the PostFilter plugins after it), else
    Unschedulable; either way the message and the nomination the evaluation gave."""
    if result.candidate is None:
        return PostFilterResult(Status("Unschedulable", result.message), result.nominating)
    return PostFilterResult(Status("Success", result.message), result.nominating)


def offline_message(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    diagnosis: Diagnosis,
    rng: random.Random,
) -> str:
    """The "preemption: ..." text the offline tools (explain, policy tests) add to a pod's
    message: the profile's DefaultPreemption, when its PostFilter list has it, evaluated
    on the tools' snapshot with no budgets, nominations or writes; "" otherwise."""
    result = offline_preemption(profile, snapshot, pod, diagnosis, rng)
    return "" if result is None else result.message


def offline_preemption(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    diagnosis: Diagnosis,
    rng: random.Random,
    pdbs: Iterable[Pdb] = (),
    groups: Mapping[str, PodGroup] | None = None,
) -> PreemptionResult | None:
    """What the profile's DefaultPreemption would decide for a pod that fits nowhere, with
    no nominations and no write (``podium simulate`` evicts the victims itself); None when
    the profile does not preempt."""
    for plugin in post_filter_plugins(profile):
        if isinstance(plugin, DefaultPreemption):
            failed = FailedCycle(profile, diagnosis)
            return plugin.evaluate(pod, failed, snapshot, rng, pdbs, None, groups)
    return None


def offline_group_preemption(
    failed: FailedGroup, groups: Mapping[str, PodGroup], pdbs: Iterable[Pdb] = ()
) -> GroupPreemption | None:
    """What the profile's DefaultPreemption would decide for a failed PodGroup, for
    explain: its ``evaluate_group``, no write; None when the profile does not preempt."""
    for plugin in post_filter_plugins(failed.profile):
        if isinstance(plugin, DefaultPreemption):
            return plugin.evaluate_group(failed, groups, pdbs)
    return None
