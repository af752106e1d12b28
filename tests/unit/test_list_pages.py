"""list_pages: a LIST read page by page, and started again when its token expires."""

from __future__ import annotations

from typing import Any

import pytest

from podium.kube.client import ApiError, list_pages


class _Pages:
    """Answers GETs from a script: a page (items, continue token) or an HTTP status."""

    def __init__(self, script: list[tuple[list[str], str] | int]) -> None:
        self.script = list(script)
        self.params: list[dict[str, str]] = []

    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> Any:
        self.params.append(dict(params or {}))
        answer = self.script.pop(0)
        if isinstance(answer, int):
            raise ApiError(answer, {"message": "expired"})
        items, token = answer
        version = str(len(self.params))  # each answer's own, to tell which one is kept
        meta = {"continue": token, "resourceVersion": version}
        return {"metadata": meta, "items": [{"name": i} for i in items]}


async def _names(client: _Pages) -> list[list[str]]:
    return [[i["name"] for i in p.items] async for p in list_pages(client, "/x", page=2)]


@pytest.mark.parametrize(
    ("script", "pages", "continues"),
    [
        ([(["a"], "")], [["a"]], [""]),
        ([(["a", "b"], "t1"), (["c"], "")], [["a", "b"], ["c"]], ["", "t1"]),
        # The token expired: the list starts again from the first page.
        (
            [(["a", "b"], "t1"), 410, (["a", "b"], "t2"), (["c"], "")],
            [["a", "b"], ["a", "b"], ["c"]],
            ["", "t1", "", "t2"],
        ),
    ],
    ids=["one page", "two pages", "expired token"],
)
async def test_pages(
    script: list[tuple[list[str], str] | int], pages: list[list[str]], continues: list[str]
) -> None:
    client = _Pages(script)
    assert await _names(client) == pages
    assert [p.get("continue", "") for p in client.params] == continues
    assert {p["limit"] for p in client.params} == {"2"}


async def test_first_page_of_each_start_carries_the_lists_version() -> None:
    client = _Pages([(["a", "b"], "t1"), 410, (["a", "b"], "t2"), (["c"], "")])
    pages = [(p.first, p.version) async for p in list_pages(client, "/x", page=2)]
    assert pages == [(True, "1"), (True, "3"), (False, "4")]


@pytest.mark.parametrize("status", [410, 403, 500])
async def test_first_page_refused_raises(status: int) -> None:
    with pytest.raises(ApiError) as caught:
        await _names(_Pages([status]))
    assert caught.value.status == status
