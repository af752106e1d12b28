"""Podium's container image, built without Docker, for the real-node tests.

The Dockerfile describes the image for users with Docker; this builds the same
image here: a Debian minbase root filesystem with python3 (debootstrap, from
Debian's packages via hack/node-tools.sh), Podium with its tracing extra and its
dependencies installed from wheels (`pip wheel .[tracing]`), user 65532:65532,
entrypoint `podium`, command `run`.
The entrypoint is a Python script, so nothing needs a shell at run time.

Two layers: the base root filesystem, cached by debootstrap's version, the suite
and the package list; and Podium's, cached by the wheels' content. A warm run
rebuilds only Podium's wheel.

Beside the image tar goes its SBOM (`<image>.cdx.json`, CycloneDX JSON): every
Python distribution in the image's site-packages, as cyclonedx-py reads them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .build import HACK_DIR, BuildError, cache_root
from .node import NodeTools
from .oci import ImageLayout, dir_layer, write_image_layout, write_layer

REPO_ROOT = HACK_DIR.parent
IMAGE_REPOSITORY = "podium"
USER = "65532:65532"
ENTRYPOINT = ("podium",)
CMD = ("run",)
# The optional features the image carries: tracing (docs/tracing.md), as the Dockerfile's.
EXTRAS = "[tracing]"
ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONUNBUFFERED=1",
    "PYTHONDONTWRITEBYTECODE=1",
)
WORKDIR = "/tmp"
BASE_PACKAGES = ("python3",)
_MIRROR = "http://deb.debian.org/debian"
_ENTRY_SCRIPT = (
    "#!/usr/bin/python3\nimport sys\n\nfrom podium.cli import main\n\nsys.exit(main())\n"
)


class RootfsUnavailable(BuildError):
    """debootstrap could not fetch Debian's packages (no mirror reachable, say)."""


@dataclass(frozen=True)
class BuiltImage:
    """An OCI image-layout tar, the name it is imported under, and its SBOM."""

    tar: Path
    name: str
    version: str
    sbom: Path


def project_version() -> str:
    """The version in pyproject.toml: the wheel's, and so the image tag."""
    import tomllib

    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    version: str = data["project"]["version"]
    return version


def image_config(version: str) -> ImageLayout:
    """The image's name and runtime config (layers left empty); the Dockerfile must agree."""
    return ImageLayout(
        name=f"docker.io/library/{IMAGE_REPOSITORY}:{version}",
        layers=(),
        entrypoint=ENTRYPOINT,
        cmd=CMD,
        user=USER,
        env=ENV,
        workdir=WORKDIR,
        labels={"org.opencontainers.image.version": version},
    )


def _suite() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return "bookworm"


def _run(
    argv: list[str],
    what: str,
    env: dict[str, str] | None = None,
    error: type[BuildError] = BuildError,
) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr)[-3000:]
        raise error(f"{what} failed (exit {proc.returncode}):\n{output}")


def _base_layer(tools: NodeTools) -> tuple[Path, Path]:
    """The cached base layer tar and its unpacked root filesystem (debootstrap minbase)."""
    suite = _suite()
    key_src = f"{tools.versions.get('debootstrap')}|{suite}|{','.join(BASE_PACKAGES)}|minbase"
    key = hashlib.sha256(key_src.encode()).hexdigest()[:10]
    root = cache_root() / f"rootfs-{suite}-{key}"
    layer = root / "base.tar"
    if layer.is_file():
        return layer, root / "rootfs"
    shutil.rmtree(root, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".rootfs-{key}.tmp-", dir=cache_root()))
    try:
        env = dict(os.environ, DEBOOTSTRAP_DIR=str(tools.root / "usr/share/debootstrap"))
        _run(
            [
                str(tools.root / "usr/sbin/debootstrap"),
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                suite,
                str(tmp / "rootfs"),
                _MIRROR,
            ],
            "debootstrap",
            env=env,
            error=RootfsUnavailable,
        )
        # Caches and logs of the build are no part of the image.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "var/log", "debootstrap"):
            path = tmp / "rootfs" / junk
            if path.is_dir():
                for child in path.iterdir():
                    if child.is_file():
                        child.unlink()
        write_layer(tmp / "base.tar", dir_layer(tmp / "rootfs"))
        tmp.rename(root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return layer, root / "rootfs"


def _python_version(rootfs: Path) -> str:
    found = sorted(p.name for p in (rootfs / "usr/bin").glob("python3.*") if p.name[8:].isdigit())
    if not found:
        raise BuildError(f"no python3.X in {rootfs}/usr/bin")
    return found[-1].removeprefix("python")


def _wheels(dest: Path) -> None:
    """Wheels of Podium and its dependencies, built from a clean copy of the sources.

    The copy holds what the Dockerfile copies, so a stale setuptools build/ folder
    in the checkout can never leak old modules into the image.
    """
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(REPO_ROOT / name, src / name)
        shutil.copytree(
            REPO_ROOT / "operator",
            src / "operator",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        _run(
            [
                sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(dest),
                f"{src}{EXTRAS}",
            ],
            "pip wheel .",
        )  # fmt: skip


def write_sbom(site: Path, dest: Path) -> None:
    """Write a CycloneDX JSON SBOM of the distributions installed in ``site``.

    cyclonedx-py reads the path of the interpreter it is given; with ``-S`` and
    PYTHONPATH that path is the standard library and ``site`` alone, so the SBOM
    lists what is in ``site`` and nothing from the environment that builds it.
    The root component is Podium, from pyproject.toml.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(site)
    _run(
        [
            sys.executable, "-m", "cyclonedx_py", "environment", "-S",
            "--pyproject", str(REPO_ROOT / "pyproject.toml"), "--mc-type", "application",
            "--output-reproducible", "--output-format", "JSON", "--output-file", str(dest),
            sys.executable,
        ],
        "cyclonedx-py environment",
        env=env,
    )  # fmt: skip


def _podium_layer(rootfs: Path, wheels: Path, dest: Path, sbom: Path) -> None:
    """Podium's layer: its site-packages, the entry script and the 65532 user; and
    the SBOM of that site-packages."""
    python = _python_version(rootfs)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python != here:
        raise BuildError(
            f"the image has Python {python}; building it needs Python {python}, not {here}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / "layer"
        site = top / f"usr/local/lib/python{python}/dist-packages"
        _run(
            [
                sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
                "--find-links", str(wheels), "--target", str(site), f"podium{EXTRAS}",
            ],
            "pip install podium into the image",
        )  # fmt: skip
        shutil.rmtree(site / "bin", ignore_errors=True)
        write_sbom(site, sbom)
        script = top / "usr/local/bin/podium"
        script.parent.mkdir(parents=True)
        script.write_text(_ENTRY_SCRIPT)
        script.chmod(0o755)
        etc = top / "etc"
        etc.mkdir()
        passwd = (rootfs / "etc/passwd").read_text()
        group = (rootfs / "etc/group").read_text()
        user = "podium:x:65532:65532::/nonexistent:/usr/sbin/nologin\n"
        (etc / "passwd").write_text(passwd + user)
        (etc / "group").write_text(group + "podium:x:65532:\n")

        def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        def add(tar: tarfile.TarFile) -> None:
            for child in sorted(top.iterdir()):
                tar.add(str(child), arcname=child.name, filter=owned_by_root)

        write_layer(dest, add)


def build_podium_image(tools: NodeTools) -> BuiltImage:
    """Build (or reuse) Podium's image; return its OCI layout tar."""
    version = project_version()
    config = image_config(version)
    base, rootfs = _base_layer(tools)
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        _wheels(wheels)
        digest = hashlib.sha256(base.parent.name.encode())
        for wheel in sorted(wheels.iterdir()):
            digest.update(wheel.name.encode())
            digest.update(hashlib.sha256(wheel.read_bytes()).digest())
        stem = f"podium-image-{version}-{digest.hexdigest()[:10]}"
        out = cache_root() / f"{stem}.oci.tar"
        sbom = cache_root() / f"{stem}.cdx.json"
        if out.is_file() and sbom.is_file():
            return BuiltImage(out, config.name, version, sbom)
        for pattern in ("podium-image-*.oci.tar", "podium-image-*.cdx.json"):
            for stale in cache_root().glob(pattern):
                stale.unlink(missing_ok=True)
        layer = Path(tmp) / "podium.tar"
        _podium_layer(rootfs, wheels, layer, sbom)
        write_image_layout(
            out,
            ImageLayout(
                name=config.name,
                layers=(base, layer),
                entrypoint=config.entrypoint,
                cmd=config.cmd,
                user=config.user,
                env=config.env,
                workdir=config.workdir,
                labels=config.labels,
            ),
        )
    return BuiltImage(out, config.name, version, sbom)
