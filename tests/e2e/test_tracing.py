"""`podium run --tracing-endpoint` end to end: the spans reach an OTLP/HTTP receiver.

The receiver is the test's own aiohttp endpoint on localhost that decodes each
``ExportTraceServiceRequest`` as an OpenTelemetry Collector would; the pods' nodes
come from the API server, and each pod must have exactly one attempt span that names
that node, with its extension points and binding cycle below it.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from podium.devcluster.objects import create_pod, wait_for
from podium.kube.manifests import make_node, make_pod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

PODS = 3


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@dataclass
class Receiver:
    """An OTLP/HTTP traces endpoint that keeps every span it is sent, and the services."""

    url: str
    spans: list[Span] = field(default_factory=list)
    services: set[str] = field(default_factory=set)

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def children(self, parent: Span) -> list[str]:
        below = [s for s in self.spans if s.parent_span_id == parent.span_id]
        return [s.name for s in sorted(below, key=lambda s: s.start_time_unix_nano)]


def attributes(span: Span) -> dict[str, object]:
    return {a.key: _value(a.value) for a in span.attributes}


@pytest_asyncio.fixture(loop_scope="session")
async def receiver() -> AsyncIterator[Receiver]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    got = Receiver(f"http://127.0.0.1:{port}")

    async def export(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        message = ExportTraceServiceRequest.FromString(await request.read())
        for resource_spans in message.resource_spans:
            for a in resource_spans.resource.attributes:
                if a.key == "service.name":
                    got.services.add(str(_value(a.value)))
            for scope in resource_spans.scope_spans:
                got.spans.extend(scope.spans)
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", export)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield got
    await runner.cleanup()


async def test_each_pod_has_one_attempt_span_with_its_node(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sched = f"{namespace}-s"
    nodes = [f"{namespace}-n{i}" for i in range(PODS)]
    await node_factory([make_node(name) for name in nodes])
    # The SDK's own setting: send each batch after 100 ms rather than 5 s.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    await podium("--scheduler-name", sched, "--tracing-endpoint", receiver.url)
    for i, name in enumerate(nodes):  # each pod may go to one node only
        selector = {"kubernetes.io/hostname": name}
        body = make_pod(f"p{i}", cpu="100m", scheduler_name=sched, node_selector=selector)
        await create_pod(api_client, namespace, body)

    core = client.CoreV1Api(api_client)

    async def bound() -> dict[str, str]:
        pods = (await core.list_namespaced_pod(namespace)).items
        placed = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        return placed if len(placed) == PODS else {}

    placed = await wait_for(bound, timeout=60, message="the pods bound")
    assert placed == {f"p{i}": nodes[i] for i in range(PODS)}

    def traced() -> bool:
        ended = [s for s in receiver.named("schedule_attempt") if attributes(s).get("result")]
        return len(ended) >= PODS and len(receiver.named("binding_cycle")) >= PODS

    await wait_for(traced, timeout=30, message="the attempt spans exported")
    assert receiver.services == {"podium"}
    attempts = {str(attributes(s)["pod"]): s for s in receiver.named("schedule_attempt")}
    assert len(receiver.named("schedule_attempt")) == PODS  # one attempt each
    for name, node in placed.items():
        span = attempts[name]
        got = attributes(span)
        assert got["namespace"] == namespace
        assert got["node"] == node
        assert got["result"] == "scheduled"
        assert got["attempt"] == 1
        assert got["feasible_nodes"] == 1
        assert got["profile"] == sched
        children = receiver.children(span)
        assert children[:2] == ["PreFilter", "Filter"]
        assert {"Reserve", "Permit", "binding_cycle"} <= set(children)
        (binding,) = [
            s for s in receiver.named("binding_cycle") if s.parent_span_id == span.span_id
        ]
        assert attributes(binding)["node"] == node
        assert binding.trace_id == span.trace_id
        assert {"PreBind", "Bind"} <= set(receiver.children(binding))
