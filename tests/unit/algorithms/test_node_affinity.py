"""NodeAffinity: nodeaffinity semantics from component-helpers, PreFilter node names, score."""

from __future__ import annotations

from typing import Any

import pytest

from podium.algorithms.node_affinity import REASON, REASON_CONFLICT, REASON_ENFORCED, NodeAffinity
from podium.kube.labels import Selector, new_requirement, parse_int64, parse_label_selector

from .conftest import PREFILTER_EXCLUDED, cycle, explain, node, pod, run_filter, run_score, snapshot


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if exprs:
        out["matchExpressions"] = list(exprs)
    if fields is not None:
        out["matchFields"] = fields
    return out


# (node labels, term, matches)
EXPRESSIONS = [
    pytest.param({"zone": "a"}, term(expr("zone", "In", "a", "b")), True, id="in-match"),
    pytest.param({"zone": "c"}, term(expr("zone", "In", "a", "b")), False, id="in-other-value"),
    pytest.param({}, term(expr("zone", "In", "a")), False, id="in-label-missing"),
    pytest.param({"zone": "c"}, term(expr("zone", "NotIn", "a")), True, id="notin-other-value"),
    pytest.param({}, term(expr("zone", "NotIn", "a")), True, id="notin-label-missing"),
    pytest.param({"zone": "a"}, term(expr("zone", "NotIn", "a")), False, id="notin-same-value"),
    pytest.param({"gpu": ""}, term(expr("gpu", "Exists")), True, id="exists-empty-value"),
    pytest.param({}, term(expr("gpu", "Exists")), False, id="exists-missing"),
    pytest.param({}, term(expr("gpu", "DoesNotExist")), True, id="doesnotexist-missing"),
    pytest.param({"gpu": "1"}, term(expr("gpu", "DoesNotExist")), False, id="doesnotexist-present"),
    pytest.param({"cores": "8"}, term(expr("cores", "Gt", "4")), True, id="gt-true"),
    pytest.param({"cores": "4"}, term(expr("cores", "Gt", "4")), False, id="gt-equal"),
    pytest.param({"cores": "3"}, term(expr("cores", "Lt", "4")), True, id="lt-true"),
    pytest.param({"cores": "-3"}, term(expr("cores", "Lt", "4")), True, id="lt-negative-label"),
    pytest.param({"cores": "+9"}, term(expr("cores", "Gt", "4")), True, id="gt-plus-sign-label"),
    pytest.param(
        {"cores": "eight"}, term(expr("cores", "Gt", "4")), False, id="gt-non-integer-label"
    ),
    pytest.param(
        {"cores": "8"}, term(expr("cores", "Gt", "four")), False, id="gt-non-integer-value"
    ),
    pytest.param(
        {"cores": "8"}, term(expr("cores", "Gt", "-1")), False, id="gt-negative-value-invalid"
    ),
    pytest.param({"cores": "8"}, term(expr("cores", "Gt", "1", "2")), False, id="gt-two-values"),
    pytest.param({"cores": "8"}, term(expr("cores", "Gt")), False, id="gt-no-value"),
    pytest.param({}, term(expr("cores", "Lt", "4")), False, id="lt-label-missing"),
    pytest.param(
        {"big": "9223372036854775807"},
        term(expr("big", "Gt", "9223372036854775806")),
        True,
        id="gt-int64-max",
    ),
    pytest.param(
        {"big": "9223372036854775808"},
        term(expr("big", "Gt", "1")),
        False,
        id="gt-label-overflows-int64",
    ),
    pytest.param({"zone": "a"}, term(expr("zone", "In")), False, id="in-without-values"),
    pytest.param({"zone": "a"}, term(expr("zone", "Exists", "a")), False, id="exists-with-values"),
    pytest.param({"zone": "a"}, term(expr("zone", "Equals", "a")), False, id="invalid-operator"),
    pytest.param({"zone": "a"}, term(expr("", "Exists")), False, id="exists-with-no-key"),
    pytest.param({"zone": "a"}, term(expr("bad key", "DoesNotExist")), False, id="invalid-key"),
    pytest.param(
        {"zone": "a"}, term(expr("zone", "NotIn", "not valid!")), False, id="invalid-value"
    ),
    pytest.param(
        {"zone": "a", "disk": "ssd"},
        term(expr("zone", "In", "a"), expr("disk", "In", "hdd")),
        False,
        id="expressions-anded",
    ),
    pytest.param(
        {"zone": "a"},
        term(expr("zone", "In", "a"), expr("zone", "Bogus", "x")),
        False,
        id="one-invalid-expression-spoils-term",
    ),
    pytest.param(
        {"zone": "a"},
        term(expr("zone", "In", *[f"v{i}" for i in range(10_000)], "a")),
        True,
        id="ten-thousand-values",
    ),
    pytest.param(
        {"example.com/zone": "a"},
        term(expr("example.com/zone", "In", "a")),
        True,
        id="prefixed-key",
    ),
    pytest.param({"zone": "a"}, term(expr("a/b/c", "Exists")), False, id="key-with-two-slashes"),
]


@pytest.mark.parametrize(("labels", "the_term", "matches"), EXPRESSIONS)
def test_match_expressions(labels: dict[str, str], the_term: dict[str, Any], matches: bool) -> None:
    snap = snapshot([node("n1", labels)])
    got = run_filter(NodeAffinity(), snap, pod("p", affinity=required(the_term)))
    assert got == {"n1": "" if matches else REASON}


# (terms, expected verdict per node a/b/c) with node a zone=x, b zone=y, c no zone
TERMS = [
    pytest.param([], {"a": REASON, "b": REASON, "c": REASON}, id="no-terms-matches-nothing"),
    pytest.param([{}], {"a": REASON, "b": REASON, "c": REASON}, id="only-empty-term"),
    pytest.param(
        [{}, term(expr("zone", "In", "x"))],
        {"a": "", "b": REASON, "c": REASON},
        id="empty-term-dropped",
    ),
    pytest.param(
        [{"matchExpressions": [], "matchFields": []}],
        {"a": REASON, "b": REASON, "c": REASON},
        id="empty-lists-term",
    ),
    pytest.param(
        [term(expr("zone", "In", "x")), term(expr("zone", "In", "y"))],
        {"a": "", "b": "", "c": REASON},
        id="terms-ored",
    ),
    pytest.param(
        [term(expr("zone", "Bogus", "x")), term(expr("zone", "In", "y"))],
        {"a": REASON, "b": "", "c": REASON},
        id="invalid-term-skipped-others-count",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "In", "b")])],
        {"a": PREFILTER_EXCLUDED, "b": "", "c": PREFILTER_EXCLUDED},
        id="match-fields-name-in",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "NotIn", "b")])],
        {"a": "", "b": REASON, "c": ""},
        id="match-fields-name-notin",
    ),
    pytest.param(
        [term(expr("zone", "Exists"), fields=[expr("metadata.name", "NotIn", "a")])],
        {"a": REASON, "b": "", "c": REASON},
        id="fields-and-expressions-anded",
    ),
    pytest.param(
        [term(fields=[expr("metadata.uid", "NotIn", "x")])],
        {"a": "", "b": "", "c": ""},
        id="unknown-field-is-empty-string",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "In", "a", "b")])],
        {"a": REASON, "b": REASON, "c": PREFILTER_EXCLUDED},
        id="field-with-two-values-invalid-but-prefilter-still-restricts",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "Exists")])],
        {"a": REASON, "b": REASON, "c": REASON},
        id="field-bad-operator",
    ),
    pytest.param(
        [
            term(fields=[expr("metadata.name", "In", "a")]),
            term(fields=[expr("metadata.name", "In", "c")]),
        ],
        {"a": "", "b": PREFILTER_EXCLUDED, "c": ""},
        id="prefilter-union-over-terms",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "In", "a")]), term(expr("zone", "In", "y"))],
        {"a": "", "b": "", "c": REASON},
        id="prefilter-term-without-names-keeps-all",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")])],
        {"a": REASON_CONFLICT, "b": REASON_CONFLICT, "c": REASON_CONFLICT},
        id="prefilter-conflict-within-term",
    ),
    pytest.param(
        [term(fields=[expr("metadata.name", "In", "ghost")])],
        {"a": PREFILTER_EXCLUDED, "b": PREFILTER_EXCLUDED, "c": PREFILTER_EXCLUDED},
        id="prefilter-unknown-node",
    ),
]


@pytest.mark.parametrize(("terms", "expected"), TERMS)
def test_node_selector_terms(terms: list[dict[str, Any]], expected: dict[str, str]) -> None:
    snap = snapshot([node("a", {"zone": "x"}), node("b", {"zone": "y"}), node("c")])
    assert run_filter(NodeAffinity(), snap, pod("p", affinity=required(*terms))) == expected


SELECTOR = [
    pytest.param(None, None, {"a": "", "b": "", "c": ""}, id="nothing-to-check"),
    pytest.param({}, None, {"a": "", "b": "", "c": ""}, id="empty-node-selector"),
    pytest.param({"zone": "x"}, None, {"a": "", "b": REASON, "c": REASON}, id="node-selector"),
    pytest.param(
        {"zone": "x", "disk": "ssd"},
        None,
        {"a": REASON, "b": REASON, "c": REASON},
        id="selector-anded",
    ),
    pytest.param(
        {"zone": "x"},
        [term(expr("zone", "In", "y"))],
        {"a": REASON, "b": REASON, "c": REASON},
        id="selector-and-affinity",
    ),
    pytest.param(
        {"zone": "y"},
        [term(expr("zone", "Exists"))],
        {"a": REASON, "b": "", "c": REASON},
        id="both-satisfied",
    ),
    pytest.param(
        {"zone": ""}, None, {"a": REASON, "b": REASON, "c": REASON}, id="selector-empty-value"
    ),
]


@pytest.mark.parametrize(("selector", "terms", "expected"), SELECTOR)
def test_node_selector_and_affinity(
    selector: dict[str, str] | None, terms: list[dict[str, Any]] | None, expected: dict[str, str]
) -> None:
    snap = snapshot([node("a", {"zone": "x"}), node("b", {"zone": "y"}), node("c")])
    affinity = required(*terms) if terms is not None else None
    assert (
        run_filter(NodeAffinity(), snap, pod("p", affinity=affinity, node_selector=selector))
        == expected
    )


def test_filter_is_unresolvable() -> None:
    snap = snapshot([node("a", {"zone": "x"})])
    rejections = NodeAffinity().filter(
        cycle(snap, pod("p", node_selector={"zone": "y"})), snap.all_nodes()
    )
    assert [(r.reason, r.unresolvable) for r in rejections] == [(REASON, True)]


ODD = [
    pytest.param({"nodeAffinity": "nope"}, "", id="node-affinity-not-an-object"),
    pytest.param(
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}},
        "",
        id="required-null",
    ),
    pytest.param(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}
            }
        },
        REASON,
        id="terms-not-a-list",
    ),
    pytest.param(required("not a term"), REASON, id="term-not-an-object"),
    pytest.param(required({"matchExpressions": "x"}), REASON, id="expressions-not-a-list"),
    pytest.param(
        required(term({"key": "zone", "operator": "In", "values": [1]})),
        REASON,
        id="value-not-a-string",
    ),
    pytest.param(required(term({"key": 7, "operator": "Exists"})), REASON, id="key-not-a-string"),
    pytest.param(
        required(term({"key": "zone", "operator": "In", "values": "x"})),
        REASON,
        id="values-not-a-list",
    ),
]


@pytest.mark.parametrize(("affinity", "expected"), ODD)
def test_odd_input_never_raises(affinity: dict[str, Any], expected: str) -> None:
    snap = snapshot([node("a", {"zone": "x"})])
    assert run_filter(NodeAffinity(), snap, pod("p", affinity=affinity)) == {"a": expected}


def preferred(*items: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": t} for w, t in items
            ]
        }
    }


SCORES = [
    pytest.param(preferred(), None, id="empty-preferred-skips"),
    pytest.param({}, None, id="no-affinity-skips"),
    pytest.param(
        preferred((2, term(expr("zone", "In", "x")))),
        ({"a": 2, "b": 0, "c": 0}, {"a": 100, "b": 0, "c": 0}),
        id="one-term",
    ),
    pytest.param(
        preferred((2, term(expr("zone", "In", "x"))), (3, term(expr("zone", "Exists")))),
        ({"a": 5, "b": 3, "c": 0}, {"a": 100, "b": 60, "c": 0}),
        id="weights-add-truncating-normalize",
    ),
    pytest.param(
        preferred((7, term(expr("zone", "In", "x"))), (3, term(expr("disk", "In", "ssd")))),
        ({"a": 7, "b": 0, "c": 3}, {"a": 100, "b": 0, "c": 42}),
        id="normalize-truncates-42.8",
    ),
    pytest.param(
        preferred((0, term(expr("zone", "In", "x"))), (1, term(expr("zone", "In", "y")))),
        ({"a": 0, "b": 1, "c": 0}, {"a": 0, "b": 100, "c": 0}),
        id="weight-zero-ignored",
    ),
    pytest.param(
        preferred((5, term(expr("zone", "Gt", "x"))), (1, term(expr("zone", "In", "y")))),
        ({"a": 0, "b": 1, "c": 0}, {"a": 0, "b": 100, "c": 0}),
        id="invalid-term-ignored",
    ),
    pytest.param(
        preferred((4, {}), (1, term(expr("zone", "In", "y")))),
        ({"a": 0, "b": 1, "c": 0}, {"a": 0, "b": 100, "c": 0}),
        id="empty-preference-ignored",
    ),
    pytest.param(
        preferred((4, term(expr("zone", "In", "nowhere")))),
        ({"a": 0, "b": 0, "c": 0}, {"a": 0, "b": 0, "c": 0}),
        id="nothing-matches-all-zero",
    ),
    pytest.param(
        preferred((4, term(fields=[expr("metadata.name", "In", "c")]))),
        ({"a": 0, "b": 0, "c": 4}, {"a": 0, "b": 0, "c": 100}),
        id="match-fields-in-preference",
    ),
]


@pytest.mark.parametrize(("affinity", "expected"), SCORES)
def test_score(
    affinity: dict[str, Any], expected: tuple[dict[str, int], dict[str, int]] | None
) -> None:
    snap = snapshot(
        [node("a", {"zone": "x"}), node("b", {"zone": "y"}), node("c", {"disk": "ssd"})]
    )
    assert run_score(NodeAffinity(), snap, pod("p", affinity=affinity)) == expected


def test_default_weight_and_events() -> None:
    from podium.framework.plugin import ClusterEvent

    assert NodeAffinity.default_weight == 2
    assert NodeAffinity.events == ClusterEvent.NODE_ADD | ClusterEvent.NODE_LABEL
    assert NodeAffinity.description


ADDED = [
    pytest.param(
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(expr("pool", "In", "web"))]
            }
        },
        {},
        {"a": "", "b": REASON_ENFORCED},
        id="enforced-rejects-first",
    ),
    pytest.param(
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(expr("pool", "In", "web"))]
            }
        },
        {"zone": "y"},
        {"a": REASON, "b": REASON_ENFORCED},
        id="enforced-then-pod",
    ),
]


@pytest.mark.parametrize(("added", "selector", "expected"), ADDED)
def test_added_affinity(
    added: dict[str, Any], selector: dict[str, str], expected: dict[str, str]
) -> None:
    snap = snapshot([node("a", {"pool": "web", "zone": "x"}), node("b", {"zone": "y"})])
    plugin = NodeAffinity({"addedAffinity": added})
    assert run_filter(plugin, snap, pod("p", node_selector=selector)) == expected


def test_added_preferred_terms_score() -> None:
    snap = snapshot([node("a", {"pool": "web"}), node("b")])
    plugin = NodeAffinity(
        {
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": term(expr("pool", "Exists"))}
                ]
            }
        }
    )
    assert run_score(plugin, snap, pod("p")) == ({"a": 10, "b": 0}, {"a": 100, "b": 0})


@pytest.mark.parametrize(
    "added",
    [
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("k", "Gt", "x"))]
                }
            },
            id="bad-required",
        ),
        pytest.param(
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": term(expr("k", "Nope"))}
                ]
            },
            id="bad-preferred",
        ),
        pytest.param("nope", id="not-an-object"),
    ],
)
def test_bad_added_affinity_is_a_config_error(added: Any) -> None:
    with pytest.raises(ValueError):
        NodeAffinity({"addedAffinity": added})


EXPLAIN = [
    pytest.param(
        pod("p", node_selector={"zone": "x"}),
        "b",
        "node label zone=y, nodeSelector wants x",
        id="selector-value",
    ),
    pytest.param(
        pod("p", node_selector={"disk": "ssd"}),
        "b",
        "node has no label disk (nodeSelector wants disk in [ssd])",
        id="selector-missing",
    ),
    pytest.param(
        pod("p", affinity=required(term(expr("zone", "In", "a", "c")))),
        "b",
        "term 0: node label zone=y does not satisfy zone in [a, c]",
        id="affinity-in",
    ),
    pytest.param(
        pod("p", affinity=required(term(expr("cores", "Gt", "x")))),
        "b",
        "term 0: invalid (cores: value 'x' must be an integer for 'Gt', 'Lt')",
        id="affinity-invalid",
    ),
    pytest.param(
        pod("p", affinity=required()),
        "b",
        "required node affinity has no usable terms",
        id="no-terms",
    ),
]


@pytest.mark.parametrize(("incoming", "name", "sentence"), EXPLAIN)
def test_explain(incoming: dict[str, Any], name: str, sentence: str) -> None:
    snap = snapshot([node("a", {"zone": "x"}), node("b", {"zone": "y"})])
    assert explain(NodeAffinity(), snap, incoming, name) == sentence


# -- the shared primitives ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("42", 42, id="plain"),
        pytest.param("+7", 7, id="plus"),
        pytest.param("-7", -7, id="minus"),
        pytest.param("007", 7, id="leading-zeros"),
        pytest.param("1_000", None, id="underscore"),
        pytest.param(" 1", None, id="space"),
        pytest.param("1.5", None, id="float"),
        pytest.param("", None, id="empty"),
        pytest.param("٣", None, id="non-ascii-digit"),
        pytest.param("9223372036854775807", 2**63 - 1, id="max"),
        pytest.param("-9223372036854775808", -(2**63), id="min"),
        pytest.param("9223372036854775808", None, id="overflow"),
    ],
)
def test_parse_int64(text: str, value: int | None) -> None:
    assert parse_int64(text) == value


@pytest.mark.parametrize(
    ("raw", "labels", "matches"),
    [
        pytest.param(None, {}, False, id="nil-selects-nothing"),
        pytest.param({}, {"a": "b"}, True, id="empty-selects-everything"),
        pytest.param({"matchLabels": {"app": "web"}}, {"app": "web"}, True, id="match-labels"),
        pytest.param({"matchLabels": {"app": "web"}}, {}, False, id="match-labels-missing"),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]},
            {},
            True,
            id="notin-missing",
        ),
        pytest.param(
            {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]},
            {"a": "1"},
            False,
            id="labels-and-expressions-anded",
        ),
    ],
)
def test_label_selector(raw: Any, labels: dict[str, str], matches: bool) -> None:
    selector = parse_label_selector(raw)
    assert isinstance(selector, Selector)
    assert selector.matches(labels) is matches


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            id="gt-not-for-pods",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, id="in-empty"
        ),
        pytest.param({"matchLabels": {"a": "not valid"}}, id="bad-value"),
        pytest.param({"matchLabels": {"-a": "x"}}, id="bad-key"),
        pytest.param("app=web", id="not-an-object"),
    ],
)
def test_label_selector_errors(raw: Any) -> None:
    assert isinstance(parse_label_selector(raw), str)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        pytest.param("app", True, id="name"),
        pytest.param("example.com/app", True, id="prefixed"),
        pytest.param("Example.com/app", False, id="uppercase-prefix"),
        pytest.param("/app", False, id="empty-prefix"),
        pytest.param("example.com/", False, id="empty-name"),
        pytest.param("a" * 63, True, id="name-63"),
        pytest.param("a" * 64, False, id="name-64"),
        pytest.param("a_b.c-d", True, id="punctuation-inside"),
        pytest.param("a-", False, id="ends-with-dash"),
        pytest.param("app\n", False, id="trailing-newline"),
    ],
)
def test_label_key_validation(key: str, ok: bool) -> None:
    assert isinstance(new_requirement(key, "Exists", []), str) is not ok
