"""``podium run`` imports neither kubernetes_asyncio nor (with JSON logs) rich, nor CEL.

Each case runs in a fresh interpreter: blocking an import changes ``sys.modules`` for
the whole process.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

_PROBE = """
import sys
from podium.cli import block_unused_imports
{block}
import kopf, structlog.dev, podium.runtime.wiring
from podium.kube.credentials import load_credentials
print(*(sys.modules.get(name) is not None for name in
        ("kubernetes_asyncio", "kubernetes_asyncio.client", "rich", "celpy", "lark")))
"""


RICH = importlib.util.find_spec("rich") is not None


@pytest.mark.parametrize(
    ("block", "loaded"),
    [
        ("block_unused_imports()", "False False False False False"),
        # structlog.dev imports rich for console logs where it is installed (a dev tool's)
        ("block_unused_imports('console')", f"False False {RICH} False False"),
        ("import kubernetes_asyncio.client; block_unused_imports()", "True True False False False"),
    ],
    ids=["run-json", "run-console", "already-imported"],
)
def test_run_path_imports(block: str, loaded: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(block=block)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == loaded.split()


def test_cel_is_imported_by_the_first_selector() -> None:
    code = (
        "import sys\n"
        "from podium.algorithms.dynamic_resources.cel import device_matches\n"
        "before = 'celpy' in sys.modules\n"
        "ok = device_matches('device.attributes[\"d\"].x == 1', 'd', "
        "{'attributes': {'x': {'int': 1}}})\n"
        "print(before, 'celpy' in sys.modules, ok)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True", "True"]
