"""The ``podium`` command line.

Exit codes: 0 success, 1 runtime failure, 2 bad usage (argparse), 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import version
from types import ModuleType
from typing import TypeVar, cast

__all__ = ["block_unused_imports", "main", "number_type"]

N = TypeVar("N", int, float)


def number_type(
    parse: Callable[[str], N], ok: Callable[[N], bool], what: str
) -> Callable[[str], N]:
    """An argparse ``type``: ``parse`` the text, and refuse it unless ``ok``, naming ``what``."""

    def convert(value: str) -> N:
        try:
            number = parse(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from exc
        if not ok(number):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}")
        return number

    return convert


_positive = number_type(int, lambda n: n >= 1, "a positive integer")
_port = number_type(int, lambda n: 0 <= n <= 65535, "a port number (0..65535)")
_non_negative = number_type(float, lambda n: 0 <= n < math.inf, "a number >= 0")
_count = number_type(int, lambda n: n >= 0, "an integer >= 0")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="podium", description="A Kubernetes pod scheduler.")
    parser.add_argument("--version", action="version", version=f"podium {version('podium')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the scheduler against a cluster")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    run.add_argument("--context", help="kubeconfig context")
    run.add_argument("--scheduler-name", default="podium", help="built-in profile's schedulerName")
    run.add_argument("--metrics-port", type=_port, default=0, help="/metrics, /healthz, /readyz")
    run.add_argument("--metrics-host", default="0.0.0.0", help="address for the metrics endpoint")
    run.add_argument(
        "--watch-timeout",
        type=_positive,
        default=300,
        help="seconds before a watch is re-established",
    )
    run.add_argument("--max-binds-in-flight", type=_positive, default=256)
    run.add_argument(
        "--event-loop",
        choices=("asyncio", "uvloop"),
        default=os.environ.get("PODIUM_EVENT_LOOP", "asyncio"),
        help="event loop: the stdlib's or uvloop, with its socket fix (docs/architecture.md); "
        "default $PODIUM_EVENT_LOOP, else asyncio",
    )
    run.add_argument(
        "--kube-api-qps",
        type=_non_negative,
        default=0.0,
        help="client-side requests per second to the API server, in each of three budgets "
        "(Bindings; pod status and Events; the rest); 0 (default): no limit",
    )
    run.add_argument(
        "--kube-api-burst",
        type=_count,
        default=0,
        help="requests a budget may send at once above --kube-api-qps (default: twice the QPS)",
    )
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="hold a Lease before binding (for several replicas)",
    )
    run.add_argument("--lease-name", default="podium", help="name of the Lease")
    run.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the Lease (default: $POD_NAMESPACE or default)",
    )
    run.add_argument("--lease-duration", type=_positive, default=15, help="seconds")
    run.add_argument("--renew-deadline", type=_positive, default=10, help="seconds")
    run.add_argument("--retry-period", type=_positive, default=2, help="seconds")
    run.add_argument(
        "--disable-preemption",
        action="store_true",
        help="never consider evicting pods, in any profile (for RBAC without pods delete)",
    )
    run.add_argument(
        "--tracing-endpoint",
        metavar="URL",
        help="send OpenTelemetry traces of scheduling attempts to this OTLP/HTTP receiver, "
        "such as http://otel-collector:4318 (docs/tracing.md; needs podium[tracing]); "
        "default: no tracing",
    )
    run.add_argument(
        "--tracing-sampling",
        metavar="RATIO",
        help="share of scheduling attempts traced, from 0 to 1 (parent-based ratio "
        "sampler; default 1 with --tracing-endpoint)",
    )
    run.add_argument("--log-format", choices=("json", "console"), default="json")
    run.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO")

    sub.add_parser("plugins", help="list the filter and score plugins")
    policy = sub.add_parser("policy", help="work with SchedulerPolicy files")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    policy_test = policy_sub.add_parser(
        "test", help="run fixture files (cluster, pods, expected placements) against a policy"
    )
    policy_test.add_argument("directory", metavar="DIR", help="folder of *.yaml fixtures")
    policy_test.add_argument("--policy", metavar="FILE", help="default: kube-scheduler's profile")

    explain = sub.add_parser(
        "explain", help="why a pod would go (or not go) to each node; read-only"
    )
    explain.add_argument("pod", metavar="POD", help="pod name (or namespace/name)")
    explain.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")
    explain.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)"
    )
    explain.add_argument("--context", help="kubeconfig context")
    explain.add_argument(
        "--top",
        type=_positive,
        metavar="N",
        help="only the N best feasible nodes, and rejected counts per reason",
    )
    explain.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    explain.add_argument(
        "--policy",
        metavar="FILE",
        help="a SchedulerPolicy YAML to judge with instead of the cluster's",
    )

    simulate = sub.add_parser("simulate", help="run the scheduler over an in-memory cluster")
    simulate.add_argument(
        "--snapshot",
        action="append",
        metavar="FILE",
        help="nodes and pods (kubectl get nodes,pods -A -o yaml; YAML or JSON)",
    )
    simulate.add_argument("--nodes", type=_positive, help="generate this many nodes")
    simulate.add_argument("--pods", type=_positive, help="generate this many pending pods")
    simulate.add_argument("--seed", type=int, default=0, help="generator and tie-break seed")
    simulate.add_argument("--policy", metavar="FILE", help="SchedulerPolicy YAML (default profile)")
    simulate.add_argument(
        "--place",
        action="append",
        metavar="FILE",
        help="pods to place (default: the snapshot's pending pods)",
    )
    simulate.add_argument(
        "--compare", nargs=2, metavar=("A", "B"), help="two SchedulerPolicy files side by side"
    )
    simulate.add_argument("--report", metavar="FILE", help="write FILE.html or FILE.png")
    simulate.add_argument(
        "--replay",
        metavar="LOG",
        help="re-run the live decisions recorded in a Podium log with --policy and report "
        "agreement; needs --snapshot (the records hold no nodes or pod specs)",
    )
    simulate.add_argument(
        "--scheduler-name", help="with --replay: whose decisions, when the log holds several"
    )
    simulate.add_argument(
        "--disable-preemption",
        action="store_true",
        help="evict nothing, as podium run --disable-preemption (not with --replay, "
        "which never preempts)",
    )
    simulate.add_argument("-o", "--output", choices=("table", "json"), default="table")

    shadow = sub.add_parser(
        "shadow-report",
        help="compare a shadow (DryRun, shadowOf) policy's decisions with the live ones in a log",
        description="Reads decision records from a Podium JSON log and, per pod decided by "
        "both the live and the shadow profile, reports agreement (same node, or both none), "
        "unschedulable counts, packing and per-zone spread.",
    )
    shadow.add_argument("log", metavar="LOG", help="Podium's JSON log file, or - for stdin")
    shadow.add_argument("--live", metavar="NAME", help="only the shadows of this schedulerName")
    shadow.add_argument("-o", "--output", choices=("table", "json"), default="table")
    return parser


def block_unused_imports(log_format: str = "json") -> None:
    """Make imports that ``podium run`` never uses fail, so they cost no memory.

    A None entry in sys.modules is Python's way to make an import raise ImportError.
    kopf imports kubernetes_asyncio's generated client (about 36 MiB RSS) only to recognise
    its model objects in isinstance checks, and uses dummies on ImportError; Podium never
    hands kopf such objects and reads credentials itself. structlog imports rich (about
    3 MiB, with pygments) where it is installed, to pretty-print tracebacks in console
    logs; JSON logs never use it. Modules already imported are left alone.
    """
    modules = cast("dict[str, ModuleType | None]", sys.modules)
    modules.setdefault("kubernetes_asyncio", None)
    if log_format == "json":
        modules.setdefault("rich", None)


def _run(args: argparse.Namespace) -> int:
    block_unused_imports(args.log_format)
    from podium.kube.credentials import ConfigError
    from podium.kube.leader import LeaseSettings
    from podium.runtime.eventloop import loop_factory, small_tls_buffers
    from podium.runtime.gctune import tune_gc
    from podium.runtime.logs import configure_logging
    from podium.runtime.wiring import RunOptions, run_operator

    if args.leader_elect and not args.retry_period < args.renew_deadline < args.lease_duration:
        print("podium: need --retry-period < --renew-deadline < --lease-duration", file=sys.stderr)
        return 2
    problem = _start_tracing(args.tracing_endpoint, args.tracing_sampling)
    if problem:
        print(f"podium: {problem}", file=sys.stderr)
        return 2
    configure_logging(args.log_format, args.log_level)
    lease = (
        LeaseSettings(
            namespace=args.lease_namespace,
            name=args.lease_name,
            lease_duration=float(args.lease_duration),
            renew_deadline=float(args.renew_deadline),
            retry_period=float(args.retry_period),
        )
        if args.leader_elect
        else None
    )
    options = RunOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        scheduler_name=args.scheduler_name,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        watch_timeout=float(args.watch_timeout),
        max_binds_in_flight=args.max_binds_in_flight,
        leader_election=lease,
        preemption=not args.disable_preemption,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
    )

    tune_gc()
    small_tls_buffers()

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await run_operator(options, stop)

    try:
        with asyncio.Runner(loop_factory=loop_factory(args.event_loop)) as runner:
            return runner.run(main())
    except ConfigError as exc:
        print(f"podium: cannot load cluster credentials: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"podium: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.tracing_endpoint is not None:
            from podium import tracing

            tracing.shutdown()  # sends the spans still batched


def _start_tracing(endpoint: str | None, sampling: str | None) -> str:
    """Turn tracing on when ``--tracing-endpoint`` is given; what is wrong, else ''."""
    if endpoint is None:
        return "--tracing-sampling needs --tracing-endpoint" if sampling is not None else ""
    from podium import tracing

    try:
        url = tracing.parse_endpoint(endpoint)
        ratio = tracing.parse_sampling("1" if sampling is None else sampling)
        tracing.configure(ratio, url)
    except tracing.TracingError as exc:
        return str(exc)
    return ""


def _plugins() -> int:
    from podium.algorithms import EXTENSIONS, FILTERS, SCORES, load_entry_points
    from podium.framework.profile import DEFAULT_FILTERS, DEFAULT_SCORES

    load_entry_points()
    weights = dict(DEFAULT_SCORES)
    print(f"{'PLUGIN':34} {'FILTER':7} {'SCORE':6} {'WEIGHT':7} DESCRIPTION")
    for name in sorted(set(FILTERS) | set(SCORES)):
        cls = FILTERS.get(name) or SCORES[name]
        is_filter = "yes" if name in FILTERS else "-"
        is_score = "yes" if name in SCORES else "-"
        default = name in DEFAULT_FILTERS or name in weights
        weight = str(weights.get(name, "-")) if name in SCORES else "-"
        marker = "" if default else " (optional)"
        print(f"{name:34} {is_filter:7} {is_score:6} {weight:7} {cls.description}{marker}")
    if EXTENSIONS:
        print("\nEXTENSIONS (spec.extensions: Reserve, Permit, PreBind, PostBind)")
        for name in sorted(EXTENSIONS):
            print(f"{name:34} {EXTENSIONS[name].description}")
    return 0


def _policy_test(args: argparse.Namespace) -> int:
    from podium.tools.inputs import InputError
    from podium.tools.policytest import report, run_directory

    try:
        results = run_directory(args.directory, args.policy)
    except InputError as exc:
        print(f"podium: {exc}", file=sys.stderr)
        return 1
    print(report(results))
    return 0 if all(r.ok for r in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "plugins":
            return _plugins()
        if args.command == "explain":
            from podium.tools.explain import run_explain

            return run_explain(args)
        if args.command == "simulate" and args.replay:
            from podium.tools.replay import run_replay

            return run_replay(args)
        if args.command == "simulate":
            from podium.tools.simulate import run_simulate

            return run_simulate(args)
        if args.command == "shadow-report":
            from podium.tools.shadowreport import run_shadow_report

            return run_shadow_report(args)
        if args.command == "policy":
            return _policy_test(args)
    except KeyboardInterrupt:
        return 130
    return 2


def kubectl_main() -> int:
    """``kubectl podium explain ...``: kubectl runs ``kubectl-podium explain ...``."""
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
