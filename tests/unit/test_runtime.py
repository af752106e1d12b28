"""kopf settings Podium runs with."""

from __future__ import annotations

from itertools import islice

from podium.runtime.wiring import _RetryForever


def test_kopf_request_backoffs_never_run_out_and_restart_per_request() -> None:
    backoffs = _RetryForever()
    first = list(islice(backoffs, 12))
    assert first == [1, 1, 2, 3, 5, 8, 13, 21, 30.0, 30.0, 30.0, 30.0]
    assert list(islice(backoffs, 3)) == [1, 1, 2]  # each request starts its own sequence
