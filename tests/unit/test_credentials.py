"""Tokens that rotate: a token file read again as client-go does, and exec plugins.

The exec plugins here are tiny scripts written by the tests; each run hands
out the next token and records that it ran.
"""

from __future__ import annotations

import json
import stat
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.kube.credentials import CredentialError, ExecToken, FileToken, load_credentials


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- token files -------------------------------------------------------------------------------


async def test_token_file_is_read_again_after_fifty_seconds(tmp_path: Path) -> None:
    path, clock = tmp_path / "token", Clock()
    path.write_text("A\n")
    source = FileToken(path, clock=clock)
    assert await source.token() == "A"
    path.write_text("B")
    # (seconds since the first read, token handed out): a minute less 10 s of leeway.
    for elapsed, expected in [(1, "A"), (49.9, "A"), (50, "B"), (99.9, "B")]:
        clock.now = 1000.0 + elapsed
        assert await source.token() == expected, elapsed
    assert source.fetches == 2


async def test_token_file_is_read_again_at_once_after_a_401(tmp_path: Path) -> None:
    path, clock = tmp_path / "token", Clock()
    path.write_text("A")
    source = FileToken(path, clock=clock)
    await source.token()
    clock.now += 1
    path.write_text("B")
    source.reset(older_than=clock.now - 5)  # a request that started before the read: kept
    assert await source.token() == "A"
    source.reset(older_than=clock.now)  # a request that started after it: read again
    assert await source.token() == "B"


@pytest.mark.parametrize("content", [None, "", "  \n"], ids=["missing", "empty", "blank"])
async def test_unreadable_token_file_keeps_the_last_token_or_fails(
    tmp_path: Path, content: str | None
) -> None:
    path, clock = tmp_path / "token", Clock()
    path.write_text("A")
    source = FileToken(path, clock=clock)
    assert await source.token() == "A"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    clock.now += 60
    assert await source.token() == "A"  # client-go: "Unable to rotate token", keeps the last
    with pytest.raises(CredentialError):
        await FileToken(path).token()


# -- exec plugins ------------------------------------------------------------------------------


def plugin(
    tmp_path: Path, status: str, api_version: str = "client.authentication.k8s.io/v1"
) -> Path:
    """A plugin printing ExecCredential {status}; ``{n}`` is its run number, ``{info}``
    the KUBERNETES_EXEC_INFO it was given. Each run appends a line to runs.log."""
    script = tmp_path / "plugin.py"
    script.write_text(
        f"""#!{sys.executable}
import json, os, pathlib, sys
log = pathlib.Path({str(tmp_path / "runs.log")!r})
n = len(log.read_text().splitlines()) + 1 if log.exists() else 1
log.write_text((log.read_text() if log.exists() else "") + os.environ.get("TEAM", "") + "\\n")
info = os.environ["KUBERNETES_EXEC_INFO"]
status = {status!r}.replace("{{n}}", str(n)).replace("{{info}}", json.loads(info)["kind"])
print(json.dumps({{"apiVersion": {api_version!r}, "kind": "ExecCredential",
                  "status": json.loads(status)}}))
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def runs(tmp_path: Path) -> list[str]:
    log = tmp_path / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


def spec(script: Path, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script), **extra}


async def test_exec_plugin_runs_again_only_when_its_token_expires(tmp_path: Path) -> None:
    wall = datetime(2026, 1, 1, tzinfo=UTC)
    expires = (wall + timedelta(minutes=15)).strftime("%Y-%m-%dT%H:%M:%SZ")
    script = plugin(tmp_path, json.dumps({"token": "t{n}", "expirationTimestamp": expires}))
    clock = Clock()
    source = ExecToken(spec(script), clock=clock, wall=lambda: wall.timestamp())
    assert await source.token() == "t1"
    assert source.expires_at == wall + timedelta(minutes=15)
    clock.now += 15 * 60 - 1
    assert await source.token() == "t1"
    clock.now += 1
    assert await source.token() == "t2"
    assert len(runs(tmp_path)) == 2


async def test_exec_plugin_without_expiry_runs_again_only_after_a_401(tmp_path: Path) -> None:
    script = plugin(tmp_path, json.dumps({"token": "t{n}"}))
    clock = Clock()
    source = ExecToken(spec(script, env=[{"name": "TEAM", "value": "blue"}]), clock=clock)
    assert await source.token() == "t1"
    clock.now += 86400
    assert await source.token() == "t1"
    assert source.expires_at is None
    source.reset(older_than=clock.now)
    assert await source.token() == "t2"
    assert runs(tmp_path) == ["blue", "blue"]  # the kubeconfig's env reaches the plugin


async def test_exec_plugin_is_given_its_exec_info(tmp_path: Path) -> None:
    script = plugin(tmp_path, json.dumps({"token": "{info}"}))
    assert await ExecToken(spec(script)).token() == "ExecCredential"


@pytest.mark.parametrize(
    ("status", "api_version", "error"),
    [
        ("{}", "client.authentication.k8s.io/v1", "no status.token"),
        ('{"token": "x"}', "client.authentication.k8s.io/v1beta1", "not client.authentication"),
        ('{"token": "x", "expirationTimestamp": "soon"}', None, "bad expirationTimestamp"),
        ('{"clientCertificateData": "c", "clientKeyData": "k"}', None, "no status.token"),
    ],
    ids=["no-token", "wrong-version", "bad-expiry", "certificate"],
)
async def test_exec_plugin_bad_answers_are_credential_errors(
    tmp_path: Path, status: str, api_version: str | None, error: str
) -> None:
    script = plugin(tmp_path, status, api_version or "client.authentication.k8s.io/v1")
    with pytest.raises(CredentialError, match=error):
        await ExecToken(spec(script)).token()


async def test_failing_exec_plugin_fails_the_request_instead_of_reusing_its_token(
    tmp_path: Path,
) -> None:
    script = plugin(tmp_path, json.dumps({"token": "t{n}"}))
    clock = Clock()
    source = ExecToken(spec(script), clock=clock)
    assert await source.token() == "t1"
    script.write_text("#!/bin/sh\necho 'denied by policy' >&2\nexit 3\n")
    source.reset(older_than=clock.now)
    with pytest.raises(CredentialError, match="exited 3: denied by policy"):
        await source.token()
    with pytest.raises(CredentialError, match="No such file"):
        await ExecToken(spec(tmp_path / "absent")).token()


# -- kubeconfigs -------------------------------------------------------------------------------


def kubeconfig(tmp_path: Path, user: dict[str, Any]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def test_kubeconfig_token_file_relative_to_the_kubeconfig_rotates(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("A")
    creds = await load_credentials(str(kubeconfig(tmp_path, {"tokenFile": "token"})))
    assert isinstance(creds.tokens, FileToken)
    assert creds.tokens.path == tmp_path / "token"
    assert creds.token == "A"
    (tmp_path / "token").write_text("B")
    creds.tokens.reset(older_than=float("inf"))
    assert await creds.current_token() == "B"


async def test_kubeconfig_exec_plugin_starts_from_the_loaders_run(tmp_path: Path) -> None:
    script = plugin(tmp_path, json.dumps({"token": "t{n}"}))
    creds = await load_credentials(str(kubeconfig(tmp_path, {"exec": spec(script)})))
    assert isinstance(creds.tokens, ExecToken)
    assert (creds.token, await creds.current_token()) == ("t1", "t1")
    assert len(runs(tmp_path)) == 1  # not run a second time at start


async def test_kubeconfig_literal_token_has_no_rotating_source(tmp_path: Path) -> None:
    creds = await load_credentials(str(kubeconfig(tmp_path, {"token": "fixed"})))
    assert creds.tokens is None
    assert await creds.current_token() == "fixed"
