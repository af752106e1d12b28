"""A third-party score plugin found through the podium.plugins entry-point group."""

from __future__ import annotations

import random
import sys
import textwrap
from pathlib import Path

import pytest

from podium.algorithms import SCORES, load_entry_points
from podium.framework.cycle import Scheduler
from podium.kube.objects import parse_node, parse_pod
from podium.policy import PolicyError, build_profile
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

PLUGIN = """
import numpy as np

from podium.api import ScorePlugin


class PreferLabel(ScorePlugin):
    name = "example.com/PreferLabel"
    description = "Prefers nodes whose label named by 'key' is 'true'."

    def score(self, cycle, nodes):
        values, present = cycle.snapshot.label_column(self.args.get("key", "fast-disk"))
        return np.where(present[nodes] & (values[nodes] == "true"), 100, 0).astype(np.int64)
"""


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_plugins").mkdir()
    (tmp_path / "my_plugins" / "__init__.py").write_text("")
    (tmp_path / "my_plugins" / "prefer_label.py").write_text(textwrap.dedent(PLUGIN))
    dist = tmp_path / "my_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[podium.plugins]\nprefer-label = my_plugins.prefer_label:PreferLabel\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    SCORES.pop("example.com/PreferLabel", None)
    sys.modules.pop("my_plugins.prefer_label", None)
    sys.modules.pop("my_plugins", None)


def test_entry_point_plugin_is_loaded_and_used_by_a_policy(installed_plugin: None) -> None:
    spec = {
        "filters": [{"name": "NodeResourcesFit"}],
        "scores": [
            {"name": "NodeResourcesFit", "weight": 1},
            {"name": "example.com/PreferLabel", "weight": 5},
        ],
        "pluginArgs": {"example.com/PreferLabel": {"key": "fast-disk"}},
    }
    with pytest.raises(PolicyError, match=r"example\.com/PreferLabel"):
        build_profile(spec)
    assert "example.com/PreferLabel" in load_entry_points()
    cache = Cache()
    cache.add_node(parse_node(node("plain")))
    cache.add_node(parse_node(node("fast", labels={"fast-disk": "true"})))
    snap = Snapshot()
    snap.update(cache)
    placement = Scheduler(random.Random(0)).schedule(
        build_profile(spec), snap, parse_pod(pod("p", cpu="100m"))
    )
    assert placement.node == "fast"
