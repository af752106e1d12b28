"""build_profile: every bad SchedulerPolicy spec is a PolicyError, never another exception."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.policy import PolicyError, build_profile

BADSPECS: list[tuple[str, dict[str, Any], str]] = [
    (
        "percentage not an integer",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesPercentage": "ten"}}},
        "minCandidateNodesPercentage must be an integer",
    ),
    (
        "percentage a float",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesPercentage": 2.5}}},
        "minCandidateNodesPercentage must be an integer",
    ),
    (
        "percentage above 100",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesPercentage": 101}}},
        "not in valid range [0, 100]",
    ),
    (
        "absolute negative",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesAbsolute": -1}}},
        "not in valid range [0, inf)",
    ),
    (
        "both zero",
        {
            "pluginArgs": {
                "defaultPreemption": {
                    "minCandidateNodesPercentage": 0,
                    "minCandidateNodesAbsolute": 0,
                }
            }
        },
        "cannot be zero at the same time as minCandidateNodesAbsolute",
    ),
    (
        "absolute a boolean",
        {"pluginArgs": {"defaultPreemption": {"minCandidateNodesAbsolute": True}}},
        "minCandidateNodesAbsolute must be an integer",
    ),
    ("spec not an object", [], "spec must be an object"),  # type: ignore[list-item]
    (
        "plugin name not a string",
        {"scores": [{"name": ["NodeAffinity"]}]},
        "every entry needs a name",
    ),
    ("weight not an integer", {"scores": [{"name": "NodeAffinity", "weight": "2"}]}, "weight"),
    ("mode unknown", {"mode": "Sometimes"}, "spec.mode"),
]


@pytest.mark.parametrize(
    ("spec", "words"), [(s, w) for _, s, w in BADSPECS], ids=[i for i, _, _ in BADSPECS]
)
def test_bad_values_are_policy_errors(spec: Any, words: str) -> None:
    with pytest.raises(PolicyError) as info:
        build_profile(spec)
    assert words in str(info.value)


def test_preemption_arguments_reach_the_profile() -> None:
    profile = build_profile(
        {
            "pluginArgs": {
                "defaultPreemption": {
                    "minCandidateNodesPercentage": 0,
                    "minCandidateNodesAbsolute": 7,
                }
            }
        }
    )
    assert (profile.min_candidate_nodes_percentage, profile.min_candidate_nodes_absolute) == (0, 7)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from(["NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "DryRun"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "schedulerName",
        "mode",
        "shadowOf",
        "filters",
        "scores",
        "pluginArgs",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "unschedulableFlushSeconds",
        "postSuccessEvents",
        "decisionRecords",
        "gangScheduling",
        "topologyAwareWorkloadScheduling",
    ]
)
_ARG_KEYS = st.sampled_from(
    [
        "nodeResourcesFit",
        "balancedAllocation",
        "podTopologySpread",
        "interPodAffinity",
        "nodeAffinity",
        "volumeBinding",
        "dynamicResources",
        "defaultPreemption",
    ]
)
# The argument names the plugins read, so that the fuzz reaches their parsers.
_ARG_NAMES = st.sampled_from(
    [
        "hardPodAffinityWeight",
        "ignorePreferredTermsOfExistingPods",
        "addedAffinity",
        "resources",
        "strategy",
        "shape",
        "ignoredResources",
        "ignoredResourceGroups",
        "defaultingType",
        "defaultConstraints",
        "bindTimeoutSeconds",
        "bindingTimeoutSeconds",
        "filterTimeoutSeconds",
        "minCandidateNodesPercentage",
        "minCandidateNodesAbsolute",
    ]
)
_PLUGIN_ENTRY = st.fixed_dictionaries(
    # A custom name passes admission; Podium rejects it when no entry point provides it.
    {
        "name": st.sampled_from(
            ["NodeAffinity", "NodeResourcesFit", "TaintToleration", "example.com/Gone"]
        )
    },
    optional={"weight": _SCALARS},
)
SPECS = st.dictionaries(_KEYS, _JSON, max_size=5) | st.fixed_dictionaries(
    {},
    optional={
        "pluginArgs": st.dictionaries(
            _ARG_KEYS, st.dictionaries(_ARG_NAMES, _JSON, max_size=4), max_size=3
        ),
        "scores": st.lists(_PLUGIN_ENTRY, max_size=3),
        "filters": st.lists(_PLUGIN_ENTRY, max_size=3),
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_any_spec_builds_or_is_a_policy_error(spec: dict[str, Any]) -> None:
    try:
        profile = build_profile(spec)
    except PolicyError as exc:
        assert str(exc), "a rejection needs a message for the policy's status"
    else:
        assert isinstance(profile.scheduler_name, str) and profile.scheduler_name
