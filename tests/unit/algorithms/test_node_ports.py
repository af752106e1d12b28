"""NodePorts: HostPortInfo.CheckConflict semantics (protocol, hostIP, 0.0.0.0)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from podium.algorithms.node_ports import REASON, NodePorts, conflicts
from podium.framework.plugin import ClusterEvent, Cycle
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

from .conftest import explain, node, on, pod, run_filter, snapshot, unresolvable


def port(
    number: int, protocol: str | None = None, ip: str | None = None, container: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": container or number, "hostPort": number}
    if protocol is not None:
        out["protocol"] = protocol
    if ip is not None:
        out["hostIP"] = ip
    return out


# (ports used on the node, ports the pod wants, conflict)
CASES = [
    pytest.param([], [port(80)], False, id="free-node"),
    pytest.param([port(80)], [], False, id="pod-without-host-ports"),
    pytest.param([port(80)], [port(80)], True, id="same-port-default-tcp-any-ip"),
    pytest.param([port(80)], [port(81)], False, id="different-port"),
    pytest.param([port(80, "TCP")], [port(80, "UDP")], False, id="different-protocol"),
    pytest.param([port(53, "UDP")], [port(53, "UDP")], True, id="same-udp"),
    pytest.param([port(80, "SCTP")], [port(80)], False, id="sctp-vs-tcp"),
    pytest.param([port(80, ip="10.0.0.1")], [port(80, ip="10.0.0.2")], False, id="different-ips"),
    pytest.param([port(80, ip="10.0.0.1")], [port(80, ip="10.0.0.1")], True, id="same-ip"),
    pytest.param(
        [port(80, ip="10.0.0.1")], [port(80)], True, id="wildcard-wanted-vs-specific-used"
    ),
    pytest.param(
        [port(80)], [port(80, ip="10.0.0.1")], True, id="specific-wanted-vs-wildcard-used"
    ),
    pytest.param([port(80, ip="0.0.0.0")], [port(80, ip="")], True, id="empty-ip-is-wildcard"),
    pytest.param(
        [port(80, "UDP", "10.0.0.1")],
        [port(80, "TCP", "10.0.0.1")],
        False,
        id="same-ip-other-protocol",
    ),
    pytest.param([port(80), port(443)], [port(8080), port(443)], True, id="any-of-several"),
    pytest.param(
        [{"containerPort": 80}], [{"containerPort": 80}], False, id="container-ports-only"
    ),
    pytest.param(
        [{"containerPort": 80, "hostPort": 0}], [port(80)], False, id="host-port-zero-is-none"
    ),
]


@pytest.mark.parametrize(("used", "wanted", "conflict"), CASES)
def test_conflicts(
    used: list[dict[str, Any]], wanted: list[dict[str, Any]], conflict: bool
) -> None:
    snap = snapshot([node("n1"), node("n2")], [on("n1", pod("old", ports=used))])
    got = run_filter(NodePorts(), snap, pod("new", ports=wanted))
    assert got == {"n1": REASON if conflict else "", "n2": ""}


SIDECARS = [
    pytest.param(
        pod("old", sidecar_ports=[port(9000)]),
        pod("new", ports=[port(9000)]),
        REASON,
        id="used-by-sidecar",
    ),
    pytest.param(
        pod("old", ports=[port(9000)]),
        pod("new", sidecar_ports=[port(9000)]),
        REASON,
        id="wanted-by-sidecar",
    ),
]


@pytest.mark.parametrize(("existing", "incoming", "expected"), SIDECARS)
def test_sidecar_ports_count(
    existing: dict[str, Any], incoming: dict[str, Any], expected: str
) -> None:
    snap = snapshot([node("n1")], [on("n1", existing)])
    assert run_filter(NodePorts(), snap, incoming) == {"n1": expected}


def test_plain_init_container_ports_do_not_count() -> None:
    old = pod("old")
    old["spec"]["initContainers"] = [{"name": "init", "image": "x", "ports": [port(9000)]}]
    snap = snapshot([node("n1")], [on("n1", old)])
    assert run_filter(NodePorts(), snap, pod("new", ports=[port(9000)])) == {"n1": ""}


def test_port_freed_when_pod_leaves() -> None:
    from podium.kube.objects import parse_node, parse_pod
    from podium.state.cache import Cache
    from podium.state.snapshot import Snapshot

    cache = Cache()
    cache.add_node(parse_node(node("n1")))
    old = parse_pod(on("n1", pod("old", ports=[port(80)])))
    cache.add_pod(old)
    snap = Snapshot()
    snap.update(cache)
    assert run_filter(NodePorts(), snap, pod("new", ports=[port(80)])) == {"n1": REASON}
    cache.remove_pod(old.uid)
    snap.update(cache)
    assert run_filter(NodePorts(), snap, pod("new", ports=[port(80)])) == {"n1": ""}


def test_rejection_is_resolvable_and_explained() -> None:
    snap = snapshot([node("n1")], [on("n1", pod("old", ports=[port(8080, ip="10.0.0.5")]))])
    incoming = pod("new", ports=[port(8080)])
    assert unresolvable(NodePorts(), snap, incoming) == set()
    assert (
        explain(NodePorts(), snap, incoming, "n1")
        == "host port TCP/0.0.0.0:8080 in use (bound to 10.0.0.5)"
    )


def test_metadata() -> None:
    assert NodePorts.description
    assert NodePorts.events == ClusterEvent.NODE_ADD | ClusterEvent.ASSIGNED_POD_DELETE


PORTS = [
    port(80),
    port(80, ip="10.0.0.1"),
    port(80, ip="10.0.0.2"),
    port(80, "UDP"),
    port(443),
    port(443, ip="0.0.0.0"),
    port(53, "UDP", "10.0.0.1"),
]


def _brute_force(snap: Snapshot, wanted: PodInfo) -> list[bool]:
    return [
        bool(conflicts(wanted.host_ports, [p for p, n in snap.ports[row].items() if n > 0]))
        for row in range(len(snap))
    ]


@pytest.mark.parametrize("seed", range(6))
def test_the_kept_port_index_answers_as_each_nodes_ports_do(seed: int) -> None:
    """One snapshot through binds, removals, nodes joining and leaving, and what-if
    edits: after every step the filter agrees with checking each node's ports."""
    rng = random.Random(seed)
    cache = Cache()
    names = [f"n{i}" for i in range(8)]
    for name in names:
        cache.add_node(parse_node(node(name)))
    snap = Snapshot()
    plugin = NodePorts()
    bound: list[PodInfo] = []
    for step in range(120):
        choice = rng.random()
        if choice < 0.45 or not bound:
            body = on(rng.choice(names), pod(f"p{step}", ports=rng.sample(PORTS, 2)))
            bound.append(parse_pod(body))
            cache.add_pod(bound[-1])
        elif choice < 0.7:
            cache.remove_pod(bound.pop(rng.randrange(len(bound))).uid)
        elif choice < 0.8:
            name = f"x{step}"
            names.append(name)
            cache.add_node(parse_node(node(name)))
        elif choice < 0.85 and len(names) > 2:
            gone = names.pop(rng.randrange(len(names)))
            cache.remove_node(gone)
            bound = [p for p in bound if cache.pods.get(p.uid) is not None]
        snap.update(cache)
        wanted = parse_pod(pod("new", ports=rng.sample(PORTS, rng.randint(1, 2))))
        backup = None
        if choice >= 0.85 and len(snap):  # a what-if edit, as preemption makes
            row = rng.randrange(len(snap))
            extra = parse_pod(on(snap.names[row], pod(f"e{step}", ports=[rng.choice(PORTS)])))
            backup = (row, snap.edit_row(row, add=[extra]))
        cycle = Cycle(wanted, snap)
        rejected = plugin.filter(cycle, snap.all_nodes())
        got = rejected[0].mask.tolist() if rejected else [False] * len(snap)
        assert got == _brute_force(snap, wanted), f"step {step}"
        if backup is not None:
            snap.restore_row(*backup)
