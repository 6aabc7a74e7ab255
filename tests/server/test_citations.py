"""A citation's location fields come from the chunk's metadata, which holds the document's front
matter too: a front matter ``link: 5`` or ``boxes: [1, 2]`` failed the Citation model, and every
search that found the document answered 400 (invalid arguments) over /v1 and crashed over MCP."""

from __future__ import annotations

import pytest

from kbctl.ids import Ids
from kbctl.server.answers import cite
from kbctl.types import Hit

IDS = Ids(b"k" * 32)


def _cite(hit: Hit) -> dict:
    return cite(hit, IDS)


def _hit(**metadata) -> Hit:
    return Hit(1, 0.5, 7, 9, "docs/a.md", "A", "text", "kb", metadata, "docs/a.md")


@pytest.mark.parametrize(
    "metadata",
    [{"link": 5}, {"boxes": [1, 2]}, {"boxes": "x"}, {"page": "intro"}, {"page": True}, {"page": 0}],
)
def test_a_location_field_of_another_shape_is_left_out(metadata):
    cited = _cite(_hit(**metadata))
    assert cited["resource"] == f"kbctl://kb/{IDS.seal('d', 7)}#{IDS.seal('c', 9)}"
    assert not {"link", "boxes", "page"} & set(cited)


def test_location_fields_of_their_shape_are_kept():
    cited = _cite(_hit(page=3, boxes=[[3, 1.0, 2.0, 3.0, 4.0]], link="https://x.org/a#:~:text=b"))
    assert (cited["page"], cited["boxes"], cited["link"]) == (
        3,
        [[3.0, 1.0, 2.0, 3.0, 4.0]],
        "https://x.org/a#:~:text=b",
    )
