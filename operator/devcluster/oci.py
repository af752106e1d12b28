"""OCI image-layout tars written without Docker, for `ctr images import`.

Layers are uncompressed tars (containerd accepts them, and importing them skips a
decompression); the index carries the `io.containerd.image.name` annotation, which
is the name the kubelet then finds the image by.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Layer = Callable[[tarfile.TarFile], None]
"""Adds one layer's files to an (uncompressed) tar."""

_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class ImageLayout:
    """What goes into one single-platform linux/amd64 image."""

    name: str
    layers: Sequence[Layer | Path]
    entrypoint: Sequence[str]
    cmd: Sequence[str] = ()
    user: str = ""
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    workdir: str = "/"
    labels: Mapping[str, str] = field(default_factory=dict)


def file_layer(files: Mapping[str, Path], mode: int = 0o755) -> Layer:
    """A layer holding the given host files at the given paths, owned by root."""

    def add(tar: tarfile.TarFile) -> None:
        for arcname, path in sorted(files.items()):
            info = tar.gettarinfo(str(path), arcname=arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = mode
            info.mtime = 0
            with path.open("rb") as handle:
                tar.addfile(info, handle)

    return add


def dir_layer(root: Path, skip: Sequence[str] = ("dev", "proc", "sys")) -> Layer:
    """A layer holding a whole directory tree, ownership and modes kept.

    The contents of skip (not the directories themselves) are left out: the runtime
    mounts them.
    """

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        return None if len(parts) > 1 and parts[0] in skip else info

    def add(tar: tarfile.TarFile) -> None:
        for child in sorted(root.iterdir()):
            tar.add(str(child), arcname=child.name, recursive=True, filter=keep)

    return add


def write_layer(dest: Path, layer: Layer) -> str:
    """Write one layer tar to dest; return its digest ("sha256:...")."""
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        layer(tar)
    return _digest_file(dest)


def _digest_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _blob(data: bytes) -> tuple[str, bytes]:
    return f"sha256:{hashlib.sha256(data).hexdigest()}", data


def write_image_layout(dest: Path, image: ImageLayout) -> None:
    """Write image as an OCI image-layout tar at dest.

    A layer given as a Path is an already written layer tar (see write_layer), so a
    cached base layer is not rebuilt.
    """
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        layer_files: list[tuple[str, Path]] = []
        for number, layer in enumerate(image.layers):
            if isinstance(layer, Path):
                layer_files.append((_digest_file(layer), layer))
            else:
                path = Path(tmp) / f"layer-{number}.tar"
                layer_files.append((write_layer(path, layer), path))
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "User": image.user,
                "Entrypoint": list(image.entrypoint),
                "Cmd": list(image.cmd),
                "Env": list(image.env),
                "WorkingDir": image.workdir,
                "Labels": dict(image.labels),
            },
            "rootfs": {"type": "layers", "diff_ids": [digest for digest, _ in layer_files]},
        }
        config_digest, config_bytes = _blob(json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": {"mediaType": _CONFIG, "digest": config_digest, "size": len(config_bytes)},
            "layers": [
                {"mediaType": _LAYER, "digest": digest, "size": path.stat().st_size}
                for digest, path in layer_files
            ],
        }
        manifest_digest, manifest_bytes = _blob(json.dumps(manifest, sort_keys=True).encode())
        tag = image.name.rsplit(":", 1)[1] if ":" in image.name.split("/")[-1] else "latest"
        index_doc: dict[str, object] = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": _MANIFEST,
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": image.name,
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
        partial = dest.with_name(dest.name + ".partial")
        with tarfile.open(partial, "w") as tar:
            _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
            _add_bytes(tar, "index.json", json.dumps(index_doc).encode())
            for digest, data in ((config_digest, config_bytes), (manifest_digest, manifest_bytes)):
                _add_bytes(tar, f"blobs/sha256/{digest.split(':')[1]}", data)
            for digest, path in layer_files:
                tar.add(str(path), arcname=f"blobs/sha256/{digest.split(':')[1]}")
        partial.rename(dest)
