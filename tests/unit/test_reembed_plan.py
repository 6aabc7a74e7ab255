"""``kbctl reembed NS --profile P --plan``'s one line: the time estimate of a small plan."""

from __future__ import annotations

import pytest

from kbctl.cli.reembed import _summary


def _plan(seconds, rate=6.8, texts=2) -> dict:
    return {
        "namespace": "ns",
        "profile": "p",
        "storage": "vector",
        "chunks": texts,
        "texts": texts,
        "reused": 0,
        "to_embed": texts,
        "texts_per_second": rate,
        "seconds": seconds,
    }


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.29, "<1s at 6.8 texts/s"),
        (0.0, "<1s at 6.8 texts/s"),
        (1.4, "~1.4s"),
        (12.6, "~13s"),
        (None, "no model calls"),
    ],
)
def test_the_plan_says_a_sub_second_estimate_as_less_than_a_second(capsys, seconds, said):
    """2 texts at 6.8 texts/s were said as ``~0s``: an estimate under a second reads ``<1s``,
    under ten seconds with one decimal, else in whole seconds."""
    _summary(_plan(seconds), False, True)
    line = capsys.readouterr().out
    assert said in line, line
    assert "~0s" not in line
