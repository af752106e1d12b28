"""``podium explain POD`` (and ``kubectl podium explain``): arguments, errors, output."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from podium.kube.credentials import ConfigError
from podium.tools.explain.cluster import explain_cluster
from podium.tools.explain.model import ExplainError
from podium.tools.explain.output import format_table
from podium.tools.inputs import InputError


def _context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context (kubectl's default for -n)."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        token = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        if token.exists():
            return token.read_text().strip() or "default"
    if kubeconfig:
        paths = [kubeconfig]
    elif os.environ.get("KUBECONFIG"):
        paths = [p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
    else:
        paths = [str(Path.home() / ".kube" / "config")]
    current = context
    contexts: dict[str, Any] = {}
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(data, dict):
            continue
        current = current or data.get("current-context")
        for item in data.get("contexts") or []:
            if isinstance(item, dict) and item.get("name") not in contexts:
                contexts[str(item.get("name"))] = item.get("context") or {}
    chosen = contexts.get(str(current)) if current else None
    namespace = chosen.get("namespace") if isinstance(chosen, dict) else None
    return str(namespace or "default")


def _pod_name(raw: str) -> tuple[str | None, str]:
    """``name``, ``pod/name`` or ``namespace/name``."""
    for prefix in ("pod/", "pods/", "po/"):
        if raw.startswith(prefix):
            return None, raw[len(prefix) :]
    if "/" in raw:
        namespace, _, name = raw.partition("/")
        return namespace, name
    return None, raw


def run_explain(args: argparse.Namespace) -> int:
    from_arg, name = _pod_name(args.pod)
    namespace = args.namespace or from_arg or _context_namespace(args.kubeconfig, args.context)
    details = args.top if args.top is not None else None
    try:
        exp = asyncio.run(
            explain_cluster(
                namespace,
                name,
                args.kubeconfig,
                args.context,
                args.policy,
                details_for=0 if details is not None else None,
            )
        )
    except (ExplainError, InputError) as exc:
        print(f"podium explain: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"podium explain: cannot load cluster credentials: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"podium explain: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"podium explain: cannot reach the API server: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if type(exc).__module__.startswith("aiohttp"):
            print(f"podium explain: cannot reach the API server: {exc}", file=sys.stderr)
            return 1
        raise
    if args.output == "json":
        print(json.dumps(exp.to_dict(args.top), indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(exp.to_dict(args.top), sort_keys=False, allow_unicode=True), end="")
    else:
        print(format_table(exp, args.top))
    return 0
