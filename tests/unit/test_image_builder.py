"""The image built without Docker (devcluster.image) and the Dockerfile describe one image.

The Dockerfile is parsed here (its final stage), and compared with what the builder
writes into the image config: user, entrypoint, command, working directory,
environment, and the installed version (the project's, from its wheel). The OCI
layout writer is checked on a small image: digests, sizes and the name annotation
that `ctr images import` reads.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.devcluster.image import EXTRAS, image_config, project_version
from podium.devcluster.oci import ImageLayout, file_layer, write_image_layout

REPO = Path(__file__).resolve().parents[2]


def _final_stage(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile's last stage, continuations joined."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stage: list[tuple[str, str]] = []
    for line in logical:
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            stage = []
        stage.append((instruction.upper(), args.strip()))
    return stage


def _dockerfile() -> dict[str, Any]:
    stage = _final_stage(REPO / "Dockerfile")
    env: dict[str, str] = {}
    found: dict[str, Any] = {"env": env, "run": []}
    for instruction, args in stage:
        if instruction == "ENV":
            env.update(dict(item.split("=", 1) for item in shlex.split(args)))
        elif instruction in ("ENTRYPOINT", "CMD"):
            found[instruction.lower()] = json.loads(args)
        elif instruction in ("USER", "WORKDIR"):
            found[instruction.lower()] = args
        elif instruction == "RUN":
            found["run"].append(args)
    return found


def test_dockerfile_and_builder_agree() -> None:
    docker = _dockerfile()
    version = project_version()
    built = image_config(version)
    assert (built.user, list(built.entrypoint), list(built.cmd), built.workdir) == (
        docker["user"],
        docker["entrypoint"],
        docker["cmd"],
        docker["workdir"],
    )
    built_env = dict(item.split("=", 1) for item in built.env)
    for key, value in docker["env"].items():
        if not key.startswith("PIP_"):  # pip's settings matter only while building
            assert built_env.get(key) == value, key
    # Both install the project's own wheel, so both report the pyproject version, and
    # the same extras.
    install = f"pip install --no-index --find-links /wheels 'podium{EXTRAS}'"
    assert any(install in r for r in docker["run"])
    assert f"pip wheel --wheel-dir /wheels '.{EXTRAS}'" in (REPO / "Dockerfile").read_text()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    chart = yaml.safe_load((REPO / "charts/podium/Chart.yaml").read_text())
    assert version == pyproject["project"]["version"] == chart["appVersion"]
    assert built.name == f"docker.io/library/podium:{version}"
    assert built.labels["org.opencontainers.image.version"] == version


@pytest.mark.parametrize(
    ("name", "tag"),
    [("podium.local/pause:1", "1"), ("docker.io/library/podium:0.1.0", "0.1.0")],
)
def test_oci_layout_is_consistent(tmp_path: Path, name: str, tag: str) -> None:
    payload = tmp_path / "hello"
    payload.write_bytes(b"#!/bin/true\n")
    dest = tmp_path / "image.tar"
    write_image_layout(
        dest,
        ImageLayout(
            name=name, layers=[file_layer({"bin/hello": payload})], entrypoint=["/bin/hello"]
        ),
    )
    with tarfile.open(dest) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for blob_name, data in files.items():
        if blob_name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == blob_name.rsplit("/", 1)[1]
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"] == {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
    }
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    assert entry["size"] == len(files[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    (layer,) = manifest["layers"]
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]
    assert config["config"]["Entrypoint"] == ["/bin/hello"]
    layer_bytes = files[f"blobs/sha256/{layer['digest'].split(':')[1]}"]
    assert layer["size"] == len(layer_bytes)
    with tarfile.open(fileobj=io.BytesIO(layer_bytes)) as inner:
        (member,) = inner.getmembers()
        assert (member.name, member.uid, member.mode) == ("bin/hello", 0, 0o755)


def test_every_package_goes_into_the_wheel() -> None:
    """The image installs Podium from its wheel: a package missing from pyproject's
    list is missing from the image, and the pods crash at import."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    source = REPO / "operator"
    found = {"podium"} | {
        ".".join(("podium", *init.parent.relative_to(source).parts))
        for init in source.rglob("__init__.py")
    }
    assert listed == found
