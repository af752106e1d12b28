"""`python -m podium.devcluster {build,which,up,demo,conformance}`: binaries, a local cluster,
the demo, Kubernetes' scheduling e2e suite."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .build import Binaries, BuildError, ensure_binaries, ensure_e2e_suite
from .cluster import ControlPlane
from .conformance import PHASES, SCHEDULERS
from .kwok import Kwok
from .process import ComponentError

_NAMES = (
    "kube-apiserver",
    "kube-scheduler",
    "etcd",
    "kubelet",
    "kube-controller-manager",
    "kwok",
    "helm",
    "pause",
)


def _path_of(binaries: Binaries, name: str) -> Path:
    path: Path = getattr(binaries, name.replace("-", "_"))
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m podium.devcluster",
        description="Local Kubernetes control plane built from pinned Go modules.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or reuse) all binaries and print their paths")
    which = sub.add_parser("which", help="print the path of one binary, building it if needed")
    which.add_argument("name", choices=(*_NAMES, "e2e.test"))
    up = sub.add_parser("up", help="run etcd + kube-apiserver until Ctrl-C")
    up.add_argument("--workdir", type=Path, help="keep kubeconfig, PKI and logs here")
    up.add_argument("--perf", action="store_true", help="lift inflight limits, disable APF")
    up.add_argument("--audit", action="store_true", help="write an audit log of writes")
    up.add_argument("--kwok", action="store_true", help="also run KWOK as fake kubelets")
    demo = sub.add_parser("demo", help="start a local control plane and watch Podium bind pods")
    demo.add_argument("--pods", type=int, default=12)
    demo.add_argument("--nodes", type=int, default=3)
    conformance = sub.add_parser(
        "conformance", help="run Kubernetes' [sig-scheduling] e2e suite against one scheduler"
    )
    conformance.add_argument("--scheduler", choices=SCHEDULERS, default="podium")
    conformance.add_argument(
        "--phase", choices=(*PHASES, "all"), default="all", help="which selection to run"
    )
    conformance.add_argument(
        "--report-dir", type=Path, default=Path("conformance-report"), help="JUnit, logs"
    )
    return parser


def _conformance(args: argparse.Namespace) -> int:
    """The chosen phases (both by default), then the table; exit 1 if any spec failed."""
    from .conformance import format_table, run_conformance

    report_dir = args.report_dir.resolve()
    results = asyncio.run(run_conformance(args.scheduler, report_dir, phase=args.phase))
    print(format_table(results))
    print(f"JUnit reports and logs: {args.report_dir}/{{default,feature}}/")
    return 1 if any(res.result == "failed" for res in results) else 0


def _up(args: argparse.Namespace) -> None:
    plane = ControlPlane(workdir=args.workdir, perf=args.perf, audit=args.audit)
    kwok = Kwok(plane) if args.kwok else None
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with plane:
        if kwok is not None:
            kwok.start()
        try:
            print(f"kube-apiserver {plane.server} is ready; kubeconfig: {plane.kubeconfig}")
            print(f"logs: {plane.workdir / 'logs'}")
            print(f"export KUBECONFIG={plane.kubeconfig}")
            print("Ctrl-C to stop.", flush=True)
            while not stop.wait(1.0):
                if not plane.apiserver_running:
                    raise ComponentError("kube-apiserver exited; see its log in the logs dir")
        finally:
            if kwok is not None:
                kwok.stop()
    print("stopped.")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            binaries = ensure_binaries()
            for name in _NAMES:
                print(f"{name}: {_path_of(binaries, name)}")
        elif args.command == "which" and args.name == "e2e.test":
            print(ensure_e2e_suite())
        elif args.command == "which":
            print(_path_of(ensure_binaries(), args.name))
        elif args.command == "demo":
            from .demo import run_demo  # imports the whole scheduler; only the demo needs it

            return run_demo(nodes=args.nodes, pods=args.pods)
        elif args.command == "conformance":
            return _conformance(args)
        else:
            _up(args)
    except (BuildError, ComponentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
