"""`podium explain POD`: where would this pod go, and why not elsewhere?

Reads the live cluster (LIST nodes and pods, GET the pod, LIST SchedulerPolicies
when the CRD is installed) and never writes. It builds a fresh snapshot and runs
the real ``schedule(..., record=True)`` with percentageOfNodesToScore forced to
100, so every node is judged, then reports per node: the verdict, the rejecting
plugin with its own concrete sentence (``FilterPlugin.explain``), and for
feasible nodes each score plugin's normalised score, weight and the total.

For a pod that fits nowhere it adds kube-scheduler's message and, where one
plugin alone blocks it, a suggestion that has been checked by running the
algorithm again on a modified copy of the pod (a toleration added, smaller
requests). The preemption note is an estimate: nodes where evicting every
lower-priority pod would make room, re-checked against all filters.
"""

from podium.tools.explain.cluster import ClusterState, explain_cluster, explain_state, fetch_state
from podium.tools.explain.command import run_explain
from podium.tools.explain.engine import explain_pod
from podium.tools.explain.model import ExplainError, Explanation, NodeRow
from podium.tools.explain.output import format_table

__all__ = [
    "ClusterState",
    "ExplainError",
    "Explanation",
    "NodeRow",
    "explain_cluster",
    "explain_pod",
    "explain_state",
    "fetch_state",
    "format_table",
    "run_explain",
]
