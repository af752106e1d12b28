"""NodePorts: HostPortInfo.CheckConflict semantics (protocol, hostIP, 0.0.0.0)."""

from __future__ import annotations

from typing import Any

import pytest

from podium.algorithms.node_ports import REASON, NodePorts
from podium.framework.plugin import ClusterEvent

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
