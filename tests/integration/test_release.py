"""The release a user installs: the wheel and sdist, the krew plugin, the SBOM.

`python -m build` runs on a copy of the checkout's files (tracked, or untracked and
not ignored: what a clean clone holds), so nothing is written into the repository.
It builds the sdist and then the wheel from the unpacked sdist, so a file missing
from the sdist is missing from the wheel too. The wheel goes, with the krew shim
(deploy/krew/kubectl-podium), into the krew archive; the shim, run through a
symlink as krew installs it, makes a fresh `python -m venv` and pip-installs the
wheel there (dependencies from PyPI). The commands are then run from that venv,
outside the checkout. No control plane is needed; the module takes about 25 s on
2 cores, most of it pip downloading and installing the dependencies into the venv.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from podium.devcluster.image import write_sbom

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION: str = PYPROJECT["project"]["version"]
KREW = REPO / "deploy" / "krew"
URL_PLACEHOLDER = "${PODIUM_KREW_ARCHIVE_URL}"
SHA_PLACEHOLDER = "${PODIUM_KREW_ARCHIVE_SHA256}"


def _run(argv: list[str | Path], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def _clean_env(cache: Path) -> dict[str, str]:
    """The environment of a user who has never seen this checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    dev_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != dev_bin)
    env["XDG_CACHE_HOME"] = str(cache)
    return env


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source_files() -> list[str]:
    out = _run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO)
    return [name for name in out.split("\0") if name and (REPO / name).is_file()]


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    src = tmp_path_factory.mktemp("src")
    for name in _source_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, src])
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    assert wheel.name == f"podium-{VERSION}-py3-none-any.whl"
    assert sdist.name == f"podium-{VERSION}.tar.gz"
    return Dist(wheel, sdist)


def _package_files() -> set[str]:
    """What the package is made of, relative to operator/: every module and py.typed.

    Nothing at run time reads a data file of the package (the CRD and the
    decision-record schema live in charts/ and docs/; only podium.devcluster, which
    runs from a checkout, reads charts/ and hack/), so there is nothing else to ship.
    """
    return {
        name.removeprefix("operator/")
        for name in _source_files()
        if name.startswith("operator/") and (name.endswith(".py") or name.endswith("py.typed"))
    }


def test_sdist_and_wheel_hold_the_package(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as tar:
        sdist = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    expected = _package_files()
    assert {f"operator/{name}" for name in expected} <= sdist
    assert {"pyproject.toml", "README.md", "PKG-INFO"} <= sdist
    with zipfile.ZipFile(dist.wheel) as whl:
        in_wheel = {n.removeprefix("podium/") for n in whl.namelist() if n.startswith("podium/")}
        entry_points = whl.read(f"podium-{VERSION}.dist-info/entry_points.txt").decode()
    assert in_wheel == expected
    assert "podium = podium.cli:main" in entry_points
    assert "kubectl-podium = podium.cli:kubectl_main" in entry_points


@pytest.fixture(scope="module")
def krew_archive(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive the krew manifest points to: the shim and the wheel, at its top."""
    archive = tmp_path_factory.mktemp("krew-asset") / f"podium-krew-{VERSION}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(KREW / "kubectl-podium", arcname="kubectl-podium")
        tar.add(dist.wheel, arcname=dist.wheel.name)
    return archive


@pytest.fixture(scope="module")
def user_venv(krew_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Install as krew does (unpack, symlink the bin), then let the shim make its venv.

    The first `kubectl podium` creates the venv with `python3 -m venv` and
    pip-installs the wheel into it; that venv is what the tests below run.
    """
    home = tmp_path_factory.mktemp("user")
    store, bin_dir, cache = home / "store", home / "bin", home / "cache"
    store.mkdir()
    bin_dir.mkdir()
    with tarfile.open(krew_archive) as tar:
        tar.extractall(store, filter="data")
    (bin_dir / "kubectl-podium").symlink_to(store / "kubectl-podium")
    out = _run([bin_dir / "kubectl-podium", "explain", "--help"], env=_clean_env(cache))
    assert "POD" in out
    (venv,) = (cache / "podium" / "krew").iterdir()
    assert venv.name == f"podium-{VERSION}-py3-none-any"
    return venv


def test_installed_commands_run_outside_the_checkout(user_venv: Path, tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    bin_dir = user_venv / "bin"
    where = _run(
        [bin_dir / "python", "-c", "import podium; print(*podium.__path__)"], env, tmp_path
    )
    assert Path(where.strip()).is_relative_to(user_venv)

    assert _run([bin_dir / "podium", "--version"], env, tmp_path).strip() == f"podium {VERSION}"

    out = _run([bin_dir / "podium", "simulate", "--nodes", "20", "--pods", "50"], env, tmp_path)
    assert "Placed 50, unschedulable 0, skipped 0, evicted 0." in out
    placements = re.findall(r"^default/pod-\d\d\s+(node-\d\d)\s+\d+", out, re.MULTILINE)
    assert len(placements) == 50
    assert len(set(placements)) > 1  # spread over the nodes, not all on one

    out = _run([bin_dir / "kubectl-podium", "explain", "--help"], env, tmp_path)
    assert out.startswith("usage:") and "POD" in out


def test_sbom_lists_the_installed_dependencies(user_venv: Path, tmp_path: Path) -> None:
    """The image's SBOM writer, on the user's venv: valid CycloneDX 1.6 naming every
    runtime dependency of Podium with its installed version."""
    (site,) = (user_venv / "lib").glob("python3.*/site-packages")
    sbom = tmp_path / "sbom.cdx.json"
    write_sbom(site, sbom)
    text = sbom.read_text()
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    assert error is None, error
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX"
    assert (doc["metadata"]["component"]["name"], doc["metadata"]["component"]["version"]) == (
        "podium",
        VERSION,
    )
    components = {_normalise(c["name"]): c for c in doc["components"]}
    (root,) = (d for d in doc["dependencies"] if d["ref"] == "root-component")
    for requirement in PYPROJECT["project"]["dependencies"]:
        name = _normalise(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0])
        assert name in components, name
        assert components[name]["purl"].startswith(f"pkg:pypi/{name}@")
        assert components[name]["bom-ref"] in root["dependsOn"]
    # Only what is in that site-packages: nothing from the venv that runs the tests.
    assert "pytest" not in components and "mypy" not in components


def _krew_manifest() -> dict[str, Any]:
    doc = yaml.safe_load((KREW / "podium.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_krew_manifest_placeholders() -> None:
    """The release process fills in exactly these two placeholders, once per platform."""
    text = (KREW / "podium.yaml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert set(re.findall(r"\$\{[^}]*\}", body)) == {URL_PLACEHOLDER, SHA_PLACEHOLDER}
    for platform in _krew_manifest()["spec"]["platforms"]:
        assert (platform["uri"], platform["sha256"]) == (URL_PLACEHOLDER, SHA_PLACEHOLDER)


def test_krew_manifest_is_valid_once_filled_in(krew_archive: Path, tmp_path: Path) -> None:
    """krew's own rules (internal/index/validation in sigs.k8s.io/krew, and its strict
    decoding of index.Plugin), applied to the manifest filled in with the archive
    built here; then the archive is unpacked as krew would and the bin checked."""
    text = (KREW / "podium.yaml").read_text()
    sha = hashlib.sha256(krew_archive.read_bytes()).hexdigest()
    filled = yaml.safe_load(
        text.replace(URL_PLACEHOLDER, krew_archive.as_uri()).replace(SHA_PLACEHOLDER, sha)
    )
    assert set(filled) == {"apiVersion", "kind", "metadata", "spec"}
    assert filled["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert filled["kind"] == "Plugin"
    name = filled["metadata"]["name"]
    assert name == "podium" and re.fullmatch(r"[\w-]+", name)
    spec = filled["spec"]
    assert set(spec) <= {
        "version",
        "homepage",
        "shortDescription",
        "description",
        "caveats",
        "platforms",
    }
    assert spec["version"] == f"v{VERSION}"
    assert spec["shortDescription"] and not re.search(r"[\r\n]", spec["shortDescription"])
    assert spec["platforms"]
    with tarfile.open(krew_archive) as tar:
        archived = tar.getnames()
    for platform in spec["platforms"]:
        assert set(platform) <= {"selector", "uri", "sha256", "files", "bin"}
        assert platform["uri"] and re.fullmatch(r"[a-f0-9]{64}", platform["sha256"])
        assert platform["bin"] == "kubectl-podium"
        selector = platform["selector"]
        keys = set(selector.get("matchLabels", {})) | {
            e["key"] for e in selector.get("matchExpressions", [])
        }
        assert keys and keys <= {"os", "arch"}
        files = platform["files"]
        assert files and all(op["from"] and op["to"] for op in files)
        kept = {n for n in archived if any(fnmatch(n, op["from"]) for op in files)}
        assert kept == {"kubectl-podium", f"podium-{VERSION}-py3-none-any.whl"}
        assert platform["bin"] in kept
