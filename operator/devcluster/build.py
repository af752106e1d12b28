"""Build the control-plane binaries from the pinned Go modules under hack/.

There are no release binaries, containers or KIND here: kube-apiserver,
kube-scheduler and etcd come from hack/controlplane, KWOK from hack/kwok and helm
from hack/helm, each through the Go module proxy. A cold build takes many
minutes, so results are cached per version *and* per go.mod/go.sum content, and
each build is assembled in a temporary directory that is renamed into place
only when complete, so a killed build never leaves a half-filled cache.

Why one module of this size: it is the whole cached, resumable build of every
Go binary the tests and the benchmark run, with its progress output.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .process import die_with_parent

HACK_DIR = Path(__file__).resolve().parents[2] / "hack"
_PROGRESS_EVERY_S = 15.0
_MIN_GO = (1, 26)

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class BuildError(RuntimeError):
    """The binaries could not be built; the message says why and what to do."""


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of everything the local control plane runs."""

    kube_apiserver: Path
    kube_scheduler: Path
    etcd: Path
    kwok: Path
    kwok_stages: Path
    helm: Path
    pause: Path
    kubelet: Path
    kube_controller_manager: Path


@dataclass(frozen=True)
class _Recipe:
    """One wrapper module under hack/ and the binaries built from it."""

    name: str
    module: str
    pin: str | None
    packages: Mapping[str, str]
    ldflags: Callable[[str, str], list[str]]
    post_build: Callable[[Path, Path, Mapping[str, str]], None] | None = None
    test: bool = False
    """`go test -c` of the module's own package (its one entry in packages), not `go build`."""

    @property
    def module_dir(self) -> Path:
        return HACK_DIR / self.module


def _required_version(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE)
    if match is None:
        raise BuildError(f"go.mod does not require {module}")
    return match.group(1)


def _k8s_ldflags(go_mod: str, version: str) -> list[str]:
    major, minor = version.lstrip("v").split(".")[:2]
    return [
        f"-X k8s.io/component-base/version.gitVersion={version}",
        f"-X k8s.io/component-base/version.gitMajor={major}",
        f"-X k8s.io/component-base/version.gitMinor={minor}",
        "-X k8s.io/component-base/version.gitTreeState=clean",
        f"-X k8s.io/client-go/pkg/version.gitVersion={version}",
    ]


def _helm_ldflags(go_mod: str, version: str) -> list[str]:
    # Helm reports the Kubernetes version it was compiled against (client-go v0.X -> 1.X).
    client_go = _required_version(go_mod, "k8s.io/client-go").lstrip("v").split(".")
    k8s_major, k8s_minor = str(int(client_go[0]) + 1), client_go[1]
    flags = [
        f"-X helm.sh/helm/v3/internal/version.version={version}",
        "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
    ]
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        flags += [
            f"-X helm.sh/helm/v3/{pkg}.k8sVersionMajor={k8s_major}",
            f"-X helm.sh/helm/v3/{pkg}.k8sVersionMinor={k8s_minor}",
        ]
    return flags


def _no_ldflags(go_mod: str, version: str) -> list[str]:
    return []


# KWOK v0.8 ships no built-in stages; these upstream ones make nodes Ready and pods Running.
_KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def _copy_kwok_stages(module_dir: Path, out_dir: Path, env: Mapping[str, str]) -> None:
    """Write the KWOK stage definitions from the module cache into the build output."""
    src = Path(_run_go(["list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"], module_dir, env))
    docs = [(src / rel).read_text().strip() for rel in _KWOK_STAGES]
    (out_dir / "stages.yaml").write_text("\n---\n".join(docs) + "\n")


_RECIPES = (
    _Recipe(
        name="k8s",
        module="controlplane",
        pin="k8s.io/kubernetes",
        packages={
            "k8s.io/kubernetes/cmd/kube-apiserver": "kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-scheduler": "kube-scheduler",
            "go.etcd.io/etcd/server/v3": "etcd",
        },
        ldflags=_k8s_ldflags,
    ),
    # A real node for tests: built from the same pinned module, cached on its own so the
    # control plane above does not wait for (or rebuild with) the much larger kubelet.
    _Recipe(
        name="node",
        module="controlplane",
        pin="k8s.io/kubernetes",
        packages={
            "k8s.io/kubernetes/cmd/kubelet": "kubelet",
            "k8s.io/kubernetes/cmd/kube-controller-manager": "kube-controller-manager",
        },
        ldflags=_k8s_ldflags,
    ),
    _Recipe(
        name="kwok",
        module="kwok",
        pin="sigs.k8s.io/kwok",
        packages={"sigs.k8s.io/kwok/cmd/kwok": "kwok"},
        ldflags=_no_ldflags,
        post_build=_copy_kwok_stages,
    ),
    _Recipe(
        name="pause",
        module="pause",
        pin=None,
        packages={"podium.dev/hack/pause": "pause"},
        ldflags=_no_ldflags,
    ),
    _Recipe(
        name="helm",
        module="helm",
        pin="helm.sh/helm/v3",
        packages={"helm.sh/helm/v3/cmd/helm": "helm"},
        ldflags=_helm_ldflags,
    ),
)

# Kubernetes' scheduling e2e suite: a test binary, built only by what runs it (make
# conformance and its pytest), so the demo and a plain `build` never wait for it.
_E2E_SUITE = _Recipe(
    name="e2e",
    module="e2e",
    pin="k8s.io/kubernetes",
    packages={"podium.dev/hack/e2e": "e2e.test"},
    ldflags=_k8s_ldflags,
    test=True,
)


def cache_root() -> Path:
    return Path(os.environ.get("PODIUM_CACHE") or Path.home() / ".cache" / "podium")


def _go_default_name(package: str) -> str:
    """The file name `go build -o dir/` gives a package: its last element, skipping /vN."""
    parts = package.split("/")
    return parts[-2] if re.fullmatch(r"v\d+", parts[-1]) else parts[-1]


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(CGO_ENABLED="0", GOWORK="off")
    return env


def _check_go(env: Mapping[str, str]) -> None:
    go = shutil.which("go", path=env.get("PATH"))
    if go is None:
        raise BuildError(
            "go not found on PATH: install Go >= 1.26 (https://go.dev/dl/) and put its bin/ "
            "on PATH; it builds kube-apiserver, kube-scheduler, etcd, kubelet, "
            "kube-controller-manager, kwok and helm."
        )
    version = _run_go(["env", "GOVERSION"], HACK_DIR, env)
    match = re.match(r"go(\d+)\.(\d+)", version)
    toolchain = env.get("GOTOOLCHAIN", "")
    if match and (int(match[1]), int(match[2])) < _MIN_GO and toolchain.startswith("local"):
        raise BuildError(
            f"{go} is {version} but Go >= 1.26 is needed; install a newer Go, or unset "
            "GOTOOLCHAIN=local so go can fetch the toolchain that go.mod asks for."
        )


def _run_go(args: list[str], cwd: Path, env: Mapping[str, str]) -> str:
    proc = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        command = " ".join(["go", *args])
        raise BuildError(
            f"`{command}` failed in {cwd} (exit {proc.returncode}):\n{proc.stderr.strip()}"
        )
    return proc.stdout.strip()


def _is_package_line(line: str) -> bool:
    return bool(line) and not line.startswith(("#", "go:")) and " " not in line


def _go_build(
    recipe: _Recipe, out_dir: Path, ldflags: list[str], env: Mapping[str, str], log: Log
) -> None:
    """Build one recipe's binaries into out_dir; `go build -v` reports progress."""
    packages = list(recipe.packages)
    log(f"[{recipe.name}] resolving modules and packages (downloads through GOPROXY) ...")
    test_flag = ["-test"] if recipe.test else []
    try:
        deps = _run_go(
            ["list", "-deps", *test_flag, "-f", "{{.ImportPath}}", *packages],
            recipe.module_dir,
            env,
        )
        if recipe.test:
            # `go test -c` prints no progress, so `go build -v` compiles what the test imports
            # first (into GOCACHE, same flags); `go test -c` then compiles one file and links.
            imports = _run_go(
                ["list", "-f", '{{join .TestImports "\\n"}}', *packages], recipe.module_dir, env
            ).split()
    except BuildError as exc:
        raise BuildError(
            f"{exc}\nCould not resolve the Go modules of {recipe.module_dir}. If the errors "
            "above mention downloading, check that the Go module proxy (go env GOPROXY) is "
            "reachable."
        ) from None
    total = len(deps.splitlines())
    flags = ["-trimpath", "-ldflags", " ".join(["-s", "-w", *ldflags])]
    started = time.monotonic()
    if recipe.test:
        _go_stream(recipe, ["go", "build", "-v", *flags, *imports], env, log, started, total)
        (name,) = recipe.packages.values()
        log(f"[{recipe.name}] linking {name} (go test -c) ...")
        _run_go(
            ["test", "-c", *flags, "-o", str(out_dir / name), *packages], recipe.module_dir, env
        )
        log(f"[{recipe.name}] {name} built in {_fmt(time.monotonic() - started)}")
    else:
        argv = ["go", "build", "-v", *flags, "-o", f"{out_dir}{os.sep}", *packages]
        _go_stream(recipe, argv, env, log, started, total)


def _go_stream(
    recipe: _Recipe, argv: list[str], env: Mapping[str, str], log: Log, started: float, total: int
) -> None:
    """Run one `go build -v`, reporting progress every 15 s and go's errors on failure."""
    # A killed Python must not leave go building into a directory nobody will rename.
    proc = subprocess.Popen(
        argv,
        cwd=recipe.module_dir,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        preexec_fn=die_with_parent(os.getpid()),
    )
    assert proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump(stream: Iterator[str]) -> None:
        for raw in stream:
            lines.put(raw.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, args=(proc.stderr,), daemon=True).start()
    compiled, last, problems = 0, "", deque[str](maxlen=200)
    next_report = started + _PROGRESS_EVERY_S
    try:
        while (line := _next_line(lines)) is not None:
            if _is_package_line(line):
                compiled, last = compiled + 1, line
            elif line:
                problems.append(line)
            now = time.monotonic()
            if now >= next_report:
                log(
                    f"[{recipe.name}] {compiled} of at most {total} packages compiled, "
                    f"{_fmt(now - started)} elapsed (last: {last or '-'})"
                )
                next_report = now + _PROGRESS_EVERY_S
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if code != 0:
        raise BuildError(
            f"[{recipe.name}] go build failed (exit {code}) in {recipe.module_dir}:\n"
            + "\n".join(problems)
        )
    log(
        f"[{recipe.name}] go build done in {_fmt(time.monotonic() - started)} "
        f"({compiled} packages compiled, the rest came from GOCACHE)"
    )


def _next_line(lines: queue.Queue[str | None]) -> str | None:
    """The next line of go's stderr, "" after a quiet second (linking), None at EOF."""
    try:
        return lines.get(timeout=1.0)
    except queue.Empty:
        return ""


def _fmt(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


@contextlib.contextmanager
def _locked(path: Path, log: Log) -> Iterator[None]:
    """Serialise builds of one cache key across processes (make and pytest, say)."""
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build holding {path} ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cache_key(recipe: _Recipe) -> tuple[str, str, list[str]]:
    try:
        go_mod = (recipe.module_dir / "go.mod").read_text()
        go_sum = (recipe.module_dir / "go.sum").read_text()
    except FileNotFoundError as exc:
        raise BuildError(
            f"{exc.filename} is missing; build from a Podium checkout, which has hack/*/go.mod"
        ) from None
    # A module of this repository (no pin) is versioned by its content alone.
    version = "v0" if recipe.pin is None else _required_version(go_mod, recipe.pin)
    ldflags = recipe.ldflags(go_mod, version)
    digest = hashlib.sha256()
    sources = sorted(recipe.module_dir.glob("*.go"))
    parts = (go_mod, go_sum, *ldflags, repr(sorted(recipe.packages.items())))
    for part in (*parts, *(source.read_text() for source in sources)):
        digest.update(part.encode())
    return f"{recipe.name}-{version}-{digest.hexdigest()[:10]}", version, ldflags


def _ensure(recipe: _Recipe, log: Log) -> Path:
    """Return the cache directory of one recipe, building it first if needed."""
    key, version, ldflags = _cache_key(recipe)
    root = cache_root()
    final = root / key
    names = list(recipe.packages.values())

    def complete() -> bool:
        return all((final / "bin" / name).is_file() for name in names)

    if complete():
        log(f"[{recipe.name}] reusing cached {version} binaries in {final}")
        return final
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{key}.lock", log):
        if complete():
            log(f"[{recipe.name}] another process built {final}")
            return final
        # Only a hand-edited cache is incomplete; rebuild it from scratch.
        shutil.rmtree(final, ignore_errors=True)
        env = _go_env()
        _check_go(env)
        for stale in root.glob(f".{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = root / f".{key}.tmp-{os.getpid()}"
        bin_dir = tmp / "bin"
        bin_dir.mkdir(parents=True)
        try:
            log(f"[{recipe.name}] building {version} ({', '.join(names)}) into {final}")
            _go_build(recipe, bin_dir, ldflags, env, log)
            for package, name in recipe.packages.items():
                built = bin_dir / _go_default_name(package)
                if not recipe.test and built.name != name:
                    built.rename(bin_dir / name)
            if recipe.post_build is not None:
                recipe.post_build(recipe.module_dir, tmp, env)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def ensure_binaries(log: Log = _stderr) -> Binaries:
    """Return the control-plane binaries, building any that are not cached yet."""
    dirs = {recipe.name: _ensure(recipe, log) for recipe in _RECIPES}
    return Binaries(
        kube_apiserver=dirs["k8s"] / "bin" / "kube-apiserver",
        kube_scheduler=dirs["k8s"] / "bin" / "kube-scheduler",
        etcd=dirs["k8s"] / "bin" / "etcd",
        kwok=dirs["kwok"] / "bin" / "kwok",
        kwok_stages=dirs["kwok"] / "stages.yaml",
        helm=dirs["helm"] / "bin" / "helm",
        pause=dirs["pause"] / "bin" / "pause",
        kubelet=dirs["node"] / "bin" / "kubelet",
        kube_controller_manager=dirs["node"] / "bin" / "kube-controller-manager",
    )


def ensure_e2e_suite(log: Log = _stderr) -> Path:
    """Return Kubernetes' scheduling e2e suite binary (hack/e2e), building it if needed."""
    return _ensure(_E2E_SUITE, log) / "bin" / "e2e.test"
