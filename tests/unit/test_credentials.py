"""Tokens that rotate: a token file read again as client-go does, and exec plugins.

The exec plugins here are tiny scripts written by the tests; each run hands
out the next token and records that it ran.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.kube.credentials import (
    ConfigError,
    CredentialError,
    ExecToken,
    FileToken,
    kubeconfig_files,
    load_credentials,
    read_kubeconfig,
)


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


# -- the kubeconfig loader (client-go's rules) ---------------------------------------------------

CA = base64.b64encode(b"ca-pem").decode()
CERT = base64.b64encode(b"cert-pem").decode()
KEY = base64.b64encode(b"key-pem").decode()


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def config(
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in (contexts or {}).items()],
    }
    if current is not None:
        out["current-context"] = current
    return out


A = config(
    {"c": {"server": "https://a:6443"}, "only-a": {"server": "https://only-a"}},
    {"u": {"token": "token-a"}},
    {"x": {"cluster": "c", "user": "u"}, "ya": {"cluster": "only-a", "user": "u"}},
    current="x",
)
B = config(
    {"c": {"server": "https://b:6443"}, "only-b": {"server": "https://only-b"}},
    {"u": {"token": "token-b"}, "ub": {"token": "token-only-b"}},
    {"x": {"cluster": "c", "user": "ub"}, "yb": {"cluster": "only-b", "user": "ub"}},
    current="yb",
)
NO_CURRENT = config({"c": {"server": "https://n"}}, {"u": {}}, {"x": {"cluster": "c"}})


@pytest.mark.parametrize(
    ("files", "context", "server", "token"),
    [
        (["a", "b"], None, "https://a:6443", "token-a"),  # first file's entries and context
        (["b", "a"], None, "https://only-b", "token-only-b"),
        (["a", "b"], "yb", "https://only-b", "token-only-b"),  # names only B has still merge
        (["b", "a"], "x", "https://b:6443", "token-only-b"),  # B's x (and its user) win
        (["none", "b"], "x", "https://a:6443", "token-a"),  # current-context from first setter
        (["missing", "a"], None, "https://a:6443", "token-a"),  # a missing listed file is skipped
        (["a", "a"], None, "https://a:6443", "token-a"),  # a repeated file is read once
    ],
    ids=["a-b", "b-a", "override-b-only", "b-wins-x", "current-from-second", "missing", "dup"],
)
async def test_kubeconfig_list_merges_first_file_wins(
    tmp_path: Path, files: list[str], context: str | None, server: str, token: str
) -> None:
    contents = {"a": A, "b": B, "none": config({"c": {"server": "https://a:6443"}}, {}, {})}
    for name, content in contents.items():
        write(tmp_path / name, content)
    if files[0] == "none":  # the first file sets no context: A's x is taken for "x"
        files = ["none", "a", "b"]
    environ = {"KUBECONFIG": os.pathsep.join(str(tmp_path / f) for f in files) + os.pathsep}
    creds = await load_credentials(None, context, environ=environ, service_account=tmp_path)
    assert (creds.server, creds.token) == (server, token)


async def test_default_kubeconfig_is_home_kube_config(tmp_path: Path) -> None:
    write(tmp_path / ".kube" / "config", A)
    creds = await load_credentials(environ={"HOME": str(tmp_path)}, service_account=tmp_path)
    assert creds.server == "https://a:6443"


def test_explicit_kubeconfig_ignores_the_environment(tmp_path: Path) -> None:
    assert kubeconfig_files("/x", {"KUBECONFIG": "/a:/b"}) == ([Path("/x")], True)
    assert kubeconfig_files(None, {"KUBECONFIG": "/a::/b:/a"}) == ([Path("/a"), Path("/b")], False)
    assert read_kubeconfig([tmp_path / "absent", write(tmp_path / "a", A)]).current_context == "x"


def private(path: str) -> bytes:
    """The content of a file written from ``*-data``, which only this user may read."""
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    return Path(path).read_bytes()


@pytest.mark.parametrize(
    ("cluster", "user", "expected"),
    [
        (
            {"server": "https://s", "certificate-authority": "pki/ca.crt"},
            {"client-certificate": "pki/c.crt", "client-key": "/abs/c.key"},
            {"ca": "DIR/pki/ca.crt", "cert": "DIR/pki/c.crt", "key": "/abs/c.key"},
        ),
        (
            {"server": "https://s", "certificate-authority-data": CA},
            {"client-certificate-data": CERT, "client-key-data": KEY},
            {"ca": b"ca-pem", "cert": b"cert-pem", "key": b"key-pem"},
        ),
        (  # data wins over a file, as in client-go
            {"server": "https://s", "certificate-authority": "x", "certificate-authority-data": CA},
            {"client-certificate-data": CERT, "client-key": "k.pem"},
            {"ca": b"ca-pem", "cert": b"cert-pem", "key": "DIR/k.pem"},
        ),
        (
            {"server": "https://s", "insecure-skip-tls-verify": True},
            {"token": "t"},
            {"ca": None, "cert": None, "key": None, "insecure": True},
        ),
        (  # base64 wrapped over lines, as a YAML block scalar holds it
            {"server": "https://s", "certificate-authority-data": f"{CA[:4]}\n{CA[4:]}\n"},
            {"token": "t"},
            {"ca": b"ca-pem"},
        ),
    ],
    ids=["relative-files", "data", "data-wins", "insecure", "wrapped-base64"],
)
async def test_kubeconfig_tls_files_and_data(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], expected: dict[str, Any]
) -> None:
    directory = tmp_path / "conf"
    path = write(
        directory / "config",
        config({"c": cluster}, {"u": user}, {"x": {"cluster": "c", "user": "u"}}, "x"),
    )
    creds = await load_credentials(str(path))
    got = {"ca": creds.ca_path, "cert": creds.cert_path, "key": creds.key_path}
    for what, want in expected.items():
        if what == "insecure":
            assert creds.insecure is want
        elif isinstance(want, bytes):
            assert private(str(got[what])) == want
        elif isinstance(want, str):
            assert got[what] == want.replace("DIR", str(directory)), what
        else:
            assert got[what] is None, what


async def test_relative_exec_command_is_taken_from_the_kubeconfig_folder(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    script = plugin(tmp_path / "bin", json.dumps({"token": "t{n}"}))
    exec_spec = {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/plugin.py"}
    path = write(
        tmp_path / "config",
        config(
            {"c": {"server": "https://s"}},
            {"u": {"exec": exec_spec}},
            {"x": {"cluster": "c", "user": "u"}},
            "x",
        ),
    )
    creds = await load_credentials(str(path))
    assert isinstance(creds.tokens, ExecToken)
    assert creds.tokens.argv[0] == str(script)
    assert creds.token == "t1"


@pytest.mark.parametrize(
    ("environ", "account", "server", "ca"),
    [
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            True,
            "https://10.0.0.1:443",
            True,
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"},
            True,
            "https://[fd00::1]:6443",
            True,
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            False,
            "https://a:6443",
            False,
        ),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, True, "https://a:6443", False),
    ],
    ids=["ipv4", "ipv6", "no-token-mounted", "no-port"],
)
async def test_in_cluster_config(
    tmp_path: Path, environ: dict[str, str], account: bool, server: str, ca: bool
) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    if account:
        (sa / "token").write_text("sa-token\n")
        (sa / "ca.crt").write_text("pem")
    kube = write(tmp_path / "kubeconfig", A)
    creds = await load_credentials(environ={**environ, "KUBECONFIG": str(kube)}, service_account=sa)
    assert creds.server == server
    assert (creds.ca_path == str(sa / "ca.crt")) is ca
    if ca:
        assert creds.token == "sa-token"
        assert isinstance(creds.tokens, FileToken) and creds.tokens.path == sa / "token"


async def test_explicit_kubeconfig_wins_over_in_cluster(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa")
    environ = {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
    creds = await load_credentials(
        str(write(tmp_path / "k", A)), environ=environ, service_account=tmp_path
    )
    assert creds.server == "https://a:6443"


@pytest.mark.parametrize(
    ("content", "context", "error"),
    [
        (None, None, r"kubeconfig .*absent: no such file"),
        (NO_CURRENT, None, "no current-context and no --context"),
        (A, "nope", "context 'nope' not found"),
        (
            config({}, {"u": {}}, {"x": {"cluster": "gone", "user": "u"}}, "x"),
            None,
            "cluster 'gone' of context 'x' not found",
        ),
        (
            config({"c": {"server": "s"}}, {}, {"x": {"cluster": "c", "user": "who"}}, "x"),
            None,
            "user 'who' of context 'x' not found",
        ),
        (config({"c": {}}, {}, {"x": {"cluster": "c"}}, "x"), None, "the cluster has no server"),
        (
            config(
                {"c": {"server": "https://s"}},
                {"u": {"auth-provider": {"name": "oidc"}}},
                {"x": {"cluster": "c", "user": "u"}},
                "x",
            ),
            None,
            "auth-provider plugins .* not supported",
        ),
        (
            config(
                {"c": {"server": "https://s"}},
                {"u": {"username": "a", "password": "b"}},
                {"x": {"cluster": "c", "user": "u"}},
                "x",
            ),
            None,
            "basic authentication .* not supported",
        ),
        (
            config(
                {"c": {"server": "https://s"}},
                {"u": {"client-certificate": "c"}},
                {"x": {"cluster": "c", "user": "u"}},
                "x",
            ),
            None,
            "needs both certificate and key",
        ),
        (
            config(
                {"c": {"server": "https://s", "certificate-authority-data": "!!"}},
                {},
                {"x": {"cluster": "c"}},
                "x",
            ),
            None,
            "certificate-authority-data is not base64",
        ),
        ("- a list", None, "not a mapping"),
        ("a: [", None, "not YAML"),
        (
            {"clusters": [{"name": "c", "cluster": {}}, {"name": "c", "cluster": {}}]},
            None,
            "duplicate name 'c' in clusters",
        ),
        (
            config(
                {
                    "c": {
                        "server": "https://s",
                        "certificate-authority-data": base64.b64encode(b"ca").decode(),
                        "insecure-skip-tls-verify": True,
                    }
                },
                {},
                {"x": {"cluster": "c"}},
                "x",
            ),
            None,
            "root certificates file with the insecure flag is not allowed",
        ),
        (
            {"users": [{"name": "u", "user": "secret-token"}]},
            None,
            r"malformed users entry$",
        ),
    ],
    ids=[
        "missing-file",
        "no-context",
        "unknown-context",
        "no-cluster",
        "no-user",
        "no-server",
        "auth-provider",
        "basic-auth",
        "cert-without-key",
        "bad-base64",
        "not-mapping",
        "not-yaml",
        "duplicate",
        "ca-and-insecure",
        "malformed-entry-not-quoted",
    ],
)
async def test_kubeconfig_errors_say_what_is_wrong(
    tmp_path: Path, content: dict[str, Any] | str | None, context: str | None, error: str
) -> None:
    path = tmp_path / "absent"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        write(path, content)
    with pytest.raises(ConfigError, match=error):
        await load_credentials(str(path), context)


async def test_no_kubeconfig_and_not_in_cluster(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no kubeconfig found .* not running in a cluster"):
        await load_credentials(environ={"HOME": str(tmp_path)}, service_account=tmp_path)


async def test_anonymous_user_and_a_server_without_scheme(tmp_path: Path) -> None:
    plain = config({"c": {"server": "127.0.0.1:8080/"}}, {}, {"x": {"cluster": "c"}}, "x")
    creds = await load_credentials(str(write(tmp_path / "k", plain)))
    assert (creds.server, creds.token, creds.tokens) == ("http://127.0.0.1:8080", None, None)


@pytest.mark.parametrize("env", [[{"name": "FOO"}], ["FOO=1"]], ids=["no-value", "not-mapping"])
def test_exec_env_entries_need_name_and_value(env: list[Any]) -> None:
    with pytest.raises(CredentialError, match="env entries need a name and a value"):
        ExecToken({"command": "plugin", "env": env})
