"""The Helm chart with a real helm binary and a real kube-apiserver.

helm is the one podium.devcluster builds from hack/helm. Lint and template need no
cluster; the install tests put the chart (CRD from crds/, RBAC, Deployment, the
default SchedulerPolicy) into the session's control plane and then ask that API
server, not a model of it: it defaults and validates SchedulerPolicies (OpenAPI
schema and CEL), answers SubjectAccessReviews for the chart's ServiceAccount, and
runs Pod Security admission ("restricted") on the Deployment's pod in a dry run.
There is no controller-manager or kubelet, so no scheduler pod runs in the cluster;
instead `podium run` runs here as a subprocess with a token of the chart's
ServiceAccount, which proves the chart's RBAC is enough for the scheduler.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.dynamic import DynamicClient
from kubernetes_asyncio.dynamic.exceptions import ResourceNotFoundError

from podium.devcluster import Binaries, ControlPlane
from podium.devcluster.objects import create_pod, wait_for
from podium.kube.manifests import make_node, make_pod

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "podium"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
GROUP, VERSION, PLURAL = "podium.dev", "v1alpha1", "schedulerpolicies"

Helm = Callable[..., Awaitable[tuple[int, str]]]


def _helm_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))}
    for name in ("CACHE", "CONFIG", "DATA"):
        env[f"HELM_{name}_HOME"] = str(home / name.lower())
    return env


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


@pytest.fixture(scope="module")
def helm(binaries: Binaries, helm_home: Path) -> Helm:
    """`await helm("template", ...)` -> (exit code, stdout + stderr)."""

    async def run(*args: str, limit_s: float = 120) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            str(binaries.helm),
            *args,
            env=_helm_env(helm_home),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), limit_s)
        return proc.returncode or 0, out.decode()

    return run


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


# --------------------------------------------------------------------------------------
# No cluster: lint and template
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda p: p.name if p else "defaults")
async def test_helm_lint_strict(helm: Helm, values: Path | None) -> None:
    args = ["lint", "--strict", str(CHART), "--kube-version", "1.37.0"]
    if values is not None:
        args += ["-f", str(values)]
    code, out = await helm(*args)
    assert code == 0, out
    assert "0 chart(s) failed" in out


async def test_helm_template_defaults(helm: Helm) -> None:
    code, out = await helm("template", "podium", str(CHART), "-n", "podium-system")
    assert code == 0, out
    kinds = sorted(d["kind"] for d in _docs(out))
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "SchedulerPolicy",
        "Service",
        "ServiceAccount",
    ]
    (deployment,) = (d for d in _docs(out) if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "run",
        "--scheduler-name",
        "podium",
        "--leader-elect",
        "--lease-name",
        "podium",
        "--lease-namespace",
        "$(POD_NAMESPACE)",
        "--metrics-port",
        "8080",
        "--log-format",
        "json",
    ]
    assert deployment["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("sets", "expected_kinds_absent", "expected_arg"),
    [
        (
            ["replicaCount=1", "leaderElection.enabled=false"],
            {"Role", "RoleBinding", "PodDisruptionBudget"},
            None,
        ),
        (["preemption.enabled=false"], set(), "--disable-preemption"),
        (["defaultPolicy.enabled=false"], {"SchedulerPolicy"}, None),
        (["rbac.create=false"], {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}, None),
    ],
    ids=["single-replica", "no-preemption", "no-policy", "no-rbac"],
)
async def test_helm_template_toggles(
    helm: Helm, sets: list[str], expected_kinds_absent: set[str], expected_arg: str | None
) -> None:
    args = ["template", "podium", str(CHART)]
    for item in sets:
        args += ["--set", item]
    code, out = await helm(*args)
    assert code == 0, out
    docs = _docs(out)
    assert not ({d["kind"] for d in docs} & expected_kinds_absent)
    (deployment,) = (d for d in docs if d["kind"] == "Deployment")
    args_out = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    if expected_arg is not None:
        assert expected_arg in args_out
    if "preemption.enabled=false" in sets:
        (role,) = (d for d in docs if d["kind"] == "ClusterRole")
        verbs = {
            (res, verb)
            for rule in role["rules"]
            for res in rule["resources"]
            for verb in rule["verbs"]
        }
        assert ("pods", "delete") not in verbs
        assert ("pods/eviction", "create") not in verbs


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (["replicas=3"], "additional properties 'replicas' not allowed"),
        (["leaderElection.enabled=false"], "maximum: got 2, want 1"),
        (["securityContext.privileged=true"], "/securityContext/privileged"),
        (["podSecurityContext.runAsUser=0"], "/podSecurityContext/runAsUser"),
        (["defaultPolicy.mode=Off"], "/defaultPolicy/mode"),
        (["defaultPolicy.spec.podMaxBackoffSeconds=0"], "/defaultPolicy/spec/podMaxBackoffSeconds"),
        (["resources.requests.cpu=1.5.5"], "/resources/requests/cpu"),
    ],
    ids=[
        "typo",
        "replicas-without-election",
        "privileged",
        "root",
        "mode",
        "backoff",
        "quantity",
    ],
)
async def test_helm_rejects_bad_values(helm: Helm, sets: list[str], expected: str) -> None:
    args = ["template", "podium", str(CHART)]
    for item in sets:
        args += ["--set-string" if "cpu" in item else "--set", item]
    code, out = await helm(*args)
    assert code != 0
    assert expected in out, out


# --------------------------------------------------------------------------------------
# Every rendered manifest, dry-run against the real API server
# --------------------------------------------------------------------------------------

# APIs a cluster may lack; the chart renders them only when asked (ci/custom-policy
# enables the ServiceMonitor and the PrometheusRule). The control plane here serves
# none of them.
OPTIONAL_APIS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}


async def _crd_established(api_client: Any) -> None:
    """The chart's CRD, created for real as `helm install` would (kept, as helm keeps
    CRDs), so that the API server can validate SchedulerPolicies in a dry run."""
    ext = client.ApiextensionsV1Api(api_client)
    (crd,) = _docs((CHART / "crds" / f"{PLURAL}.{GROUP}.yaml").read_text())
    try:
        await ext.create_custom_resource_definition(cast(Any, crd))
    except ApiException as exc:
        if exc.status != 409:
            raise

    async def established() -> bool:
        got = await ext.read_custom_resource_definition(crd["metadata"]["name"])
        return any(
            c.type == "Established" and c.status == "True" for c in got.status.conditions or []
        )

    await wait_for(established, timeout=30, message="the CRD to be established")


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
async def test_every_rendered_manifest_passes_a_server_dry_run(
    helm: Helm, api_client: Any, namespace: str, values: Path
) -> None:
    """Each manifest `helm template -f ci/<values>` renders, CRD included, is applied
    server-side with dryRun=All: the API server defaults, validates (schema, CEL) and
    admits it, and persists nothing."""
    code, out = await helm(
        "template", f"dry-{namespace[-5:]}", str(CHART), "-n", namespace, "-f", str(values),
        "--include-crds",
    )  # fmt: skip
    assert code == 0, out
    await _crd_established(api_client)
    dynamic = await DynamicClient(api_client)
    applied: list[str] = []
    unserved: set[tuple[str, str]] = set()
    for doc in _docs(out):
        try:
            resource = await dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        except ResourceNotFoundError:
            unserved.add((doc["apiVersion"], doc["kind"]))
            continue
        answer = await dynamic.server_side_apply(
            resource,
            body=doc,
            namespace=namespace if resource.namespaced else None,
            field_manager="podium-chart-test",
            dry_run="All",
        )
        assert (answer.kind, answer.metadata.name) == (doc["kind"], doc["metadata"]["name"])
        applied.append(doc["kind"])
    assert unserved <= OPTIONAL_APIS
    assert {"CustomResourceDefinition", "Deployment", "ClusterRole"} <= set(applied)
    deployments = await client.AppsV1Api(api_client).list_namespaced_deployment(namespace)
    assert deployments.items == []  # dry runs: nothing was persisted


# --------------------------------------------------------------------------------------
# Installed into the real API server
# --------------------------------------------------------------------------------------


class Release:
    def __init__(self, name: str, namespace: str, manifest: list[dict[str, Any]]) -> None:
        self.name = name
        self.namespace = namespace
        self.manifest = manifest

    def one(self, kind: str) -> dict[str, Any]:
        (doc,) = (d for d in self.manifest if d["kind"] == kind)
        return doc


@pytest_asyncio.fixture(loop_scope="session")
async def release(
    helm: Helm, control_plane: ControlPlane, namespace: str, api_client: Any
) -> AsyncIterator[Release]:
    """The chart installed in a fresh namespace, with names unique to the test."""
    name = f"podium-{namespace[-5:]}"  # the namespace's generated suffix
    policy = f"{name}-policy"
    code, out = await helm(
        "install",
        name,
        str(CHART),
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "-n",
        namespace,
        "--set",
        f"defaultPolicy.name={policy},defaultPolicy.schedulerName={policy}",
        "--set",
        f"leaderElection.leaseName={name}-lease",
        limit_s=180,
    )
    assert code == 0, out
    code, manifest = await helm(
        "get", "manifest", name, "-n", namespace, "--kubeconfig", str(control_plane.kubeconfig)
    )
    assert code == 0, manifest
    yield Release(name, namespace, _docs(manifest))
    code, out = await helm(
        "uninstall", name, "-n", namespace, "--kubeconfig", str(control_plane.kubeconfig)
    )
    assert code == 0, out


async def test_install_creates_crd_and_defaulted_policy(release: Release, api_client: Any) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    crd = await ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions.get("Established") == "True"
    policy_name = release.one("SchedulerPolicy")["metadata"]["name"]
    custom = client.CustomObjectsApi(api_client)
    policy = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, policy_name)
    assert policy["spec"] == {
        "schedulerName": policy_name,
        "mode": "Active",
        "percentageOfNodesToScore": 0,
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 10,
        "unschedulableFlushSeconds": 300,
        "postSuccessEvents": True,
    }


# (id, spec, expected): None = accepted, else a substring of the API server's 422 message.
API_POLICY_CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("custom-plugin", {"filters": [{"name": "NodeName"}, {"name": "example.com/GpuFirst"}]}, None),
    ("unknown-filter", {"filters": [{"name": "GpuFirst"}]}, "unknown filter plugin"),
    (
        "duplicate-filter",
        {"filters": [{"name": "NodeName"}, {"name": "NodeName"}]},
        "must be unique",
    ),
    (
        "duplicate-score",
        {"scores": [{"name": "ImageLocality"}, {"name": "ImageLocality"}]},
        "must be unique",
    ),
    (
        "weight-101",
        {"scores": [{"name": "ImageLocality", "weight": 101}]},
        "less than or equal to 100",
    ),
    ("backoff", {"podInitialBackoffSeconds": 30}, "less than or equal to podMaxBackoffSeconds"),
    ("default-scheduler", {"schedulerName": "default-scheduler"}, "belongs to kube-scheduler"),
    (
        "rtcr-without-shape",
        {"pluginArgs": {"nodeResourcesFit": {"strategy": "RequestedToCapacityRatio"}}},
        "shape is required",
    ),
    ("mode", {"mode": "Passive"}, "Unsupported value"),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [pytest.param(s, e, id=n) for n, s, e in API_POLICY_CASES]
)
async def test_api_server_validates_policies(
    release: Release, api_client: Any, spec: dict[str, Any], expected: str | None
) -> None:
    custom = client.CustomObjectsApi(api_client)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulerPolicy",
        "metadata": {"name": f"{release.name}-probe"},
        "spec": {"schedulerName": f"{release.name}-probe", **spec},
    }
    try:
        await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body, dry_run="All")
    except ApiException as exc:
        assert expected is not None, exc.body
        assert exc.status == 422, exc.body
        assert expected in str(exc.body), exc.body
    else:
        assert expected is None, f"accepted, expected {expected!r}"


# (verb, group, resource, subresource, namespaced, name, allowed) for the chart's
# ServiceAccount, answered by the API server's RBAC authorizer.
ACCESS_CASES: list[tuple[str, str, str, str, bool, str, bool]] = [
    ("watch", "", "pods", "", False, "", True),
    ("create", "", "pods", "binding", True, "", True),
    ("patch", "", "pods", "status", True, "", True),
    ("delete", "", "pods", "", True, "", True),
    ("create", "", "pods", "eviction", True, "", True),
    ("list", "", "nodes", "", False, "", True),
    ("create", "events.k8s.io", "events", "", True, "", True),
    ("update", "", "persistentvolumeclaims", "", True, "", True),
    ("update", "resource.k8s.io", "resourceclaims", "binding", True, "", True),
    ("watch", "storage.k8s.io", "csinodes", "", False, "", True),
    ("watch", "storage.k8s.io", "csistoragecapacities", "", False, "", False),
    ("list", "policy", "poddisruptionbudgets", "", False, "", True),
    ("watch", GROUP, PLURAL, "", False, "", True),
    ("patch", GROUP, PLURAL, "status", False, "", True),
    ("list", "apiextensions.k8s.io", "customresourcedefinitions", "", False, "", True),
    ("watch", "", "services", "", False, "", True),
    ("list", "apps", "replicasets", "", False, "", True),
    ("get", "apps", "statefulsets", "", True, "", False),
    ("create", "coordination.k8s.io", "leases", "", True, "", True),
    ("update", "coordination.k8s.io", "leases", "", True, "LEASE", True),
    ("update", "coordination.k8s.io", "leases", "", True, "someone-else", False),
    ("get", "", "secrets", "", True, "", False),
    ("create", "", "pods", "", True, "", False),
    ("update", "", "nodes", "", False, "", False),
    ("update", GROUP, PLURAL, "", False, "", False),
    ("delete", "apiextensions.k8s.io", "customresourcedefinitions", "", False, "", False),
]


@pytest.mark.parametrize(
    ("verb", "group", "resource", "subresource", "namespaced", "name", "allowed"),
    ACCESS_CASES,
    ids=[
        f"{c[0]}-{c[2]}{'/' + c[3] if c[3] else ''}{'-' + c[5] if c[5] else ''}"
        for c in ACCESS_CASES
    ],
)
async def test_service_account_rbac(
    release: Release,
    api_client: Any,
    verb: str,
    group: str,
    resource: str,
    subresource: str,
    namespaced: bool,
    name: str,
    allowed: bool,
) -> None:
    sa = release.one("ServiceAccount")["metadata"]["name"]
    lease = release.one("Role")["rules"][1]["resourceNames"][0]
    attributes: dict[str, Any] = {"verb": verb, "group": group, "resource": resource}
    if subresource:
        attributes["subresource"] = subresource
    if namespaced:
        attributes["namespace"] = release.namespace
    if name:
        attributes["name"] = lease if name == "LEASE" else name
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{release.namespace}:{sa}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{release.namespace}"],
            "resourceAttributes": attributes,
        },
    }
    answer = await client.AuthorizationV1Api(api_client).create_subject_access_review(
        cast(Any, review)
    )
    assert answer.status.allowed is allowed, attributes


async def test_scheduler_pod_passes_pod_security_restricted(
    release: Release, api_client: Any
) -> None:
    """Pod Security admission, enforcing "restricted", admits the Deployment's pod."""
    core = client.CoreV1Api(api_client)
    labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn")}
    await core.patch_namespace(release.namespace, {"metadata": {"labels": labels}})
    template = copy.deepcopy(release.one("Deployment")["spec"]["template"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "psa-probe"},
        "spec": template["spec"],
    }
    await core.create_namespaced_pod(release.namespace, cast(Any, pod), dry_run="All")
    # And the same pod with privilege escalation allowed is refused.
    pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    with pytest.raises(ApiException) as refused:
        await core.create_namespaced_pod(release.namespace, cast(Any, pod), dry_run="All")
    assert refused.value.status == 403
    assert "allowPrivilegeEscalation" in str(refused.value.body)


def _read(log: Path) -> str:
    return log.read_text(errors="replace")


def _tail(log: Path) -> str:
    return _read(log)[-3000:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _ready(port: int, proc: asyncio.subprocess.Process, log: Path) -> None:
    import aiohttp

    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise AssertionError(f"podium exited {proc.returncode}:\n{_tail(log)}")
            try:
                async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"podium not ready:\n{_tail(log)}")


async def test_podium_schedules_with_only_the_chart_rbac(
    release: Release,
    api_client: Any,
    control_plane: ControlPlane,
    node_factory: Callable[..., Awaitable[list[str]]],
    tmp_path: Path,
) -> None:
    """`podium run` as the chart's ServiceAccount binds a pod and reports policy status,
    and nothing it does is forbidden."""
    namespace = release.namespace
    sa = release.one("ServiceAccount")["metadata"]["name"]
    policy = release.one("SchedulerPolicy")["metadata"]["name"]
    scheduler_name = release.one("SchedulerPolicy")["spec"]["schedulerName"]
    core = client.CoreV1Api(api_client)
    token = await core.create_namespaced_service_account_token(
        sa, namespace, cast(Any, {"spec": {"expirationSeconds": 3600}})
    )
    kubeconfig = tmp_path / "sa-kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority": str(control_plane.ca_cert),
                        },
                    }
                ],
                "users": [{"name": "sa", "user": {"token": token.status.token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    await node_factory([make_node(f"{namespace}-node")])
    port = _free_port()
    log = tmp_path / "podium.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "podium",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--scheduler-name",
            scheduler_name,
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(port),
            "--log-format",
            "json",
            cwd=tmp_path,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        await _ready(port, proc, log)
        await create_pod(
            api_client, namespace, make_pod("rbac-probe", scheduler_name=scheduler_name)
        )

        async def bound() -> str | None:
            pod = await core.read_namespaced_pod("rbac-probe", namespace)
            node: str | None = pod.spec.node_name
            return node

        assert await wait_for(bound, timeout=60, message="rbac-probe to be bound")

        # A pod that fits nowhere: PodScheduled=False (pods/status) and an event.
        await create_pod(
            api_client,
            namespace,
            make_pod("rbac-too-big", cpu="1000", scheduler_name=scheduler_name),
        )

        async def unschedulable() -> bool:
            pod = await core.read_namespaced_pod("rbac-too-big", namespace)
            return any(
                c.type == "PodScheduled" and c.status == "False"
                for c in pod.status.conditions or []
            )

        assert await wait_for(unschedulable, timeout=60, message="PodScheduled=False")

        async def failed_event() -> bool:
            events = await core.list_namespaced_event(namespace)
            return any(e.reason == "FailedScheduling" for e in events.items)

        assert await wait_for(failed_event, timeout=60, message="a FailedScheduling event")

        custom = client.CustomObjectsApi(api_client)

        async def accepted() -> bool:
            obj = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, policy)
            conditions = (obj.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Accepted" and c["status"] == "True" for c in conditions)

        assert await wait_for(accepted, timeout=60, message=f"{policy} to be Accepted")
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
    user = f"system:serviceaccount:{namespace}:{sa}"
    forbidden = [
        (e["verb"], e["objectRef"])
        for e in control_plane.audit_events()
        if e.get("user", {}).get("username") == user
        and e.get("responseStatus", {}).get("code") == 403
    ]
    assert forbidden == []
    assert "forbidden" not in _read(log).lower(), _tail(log)
