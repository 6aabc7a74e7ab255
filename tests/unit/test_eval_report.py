"""The HTML report: parses, carries the numbers and the charts, loads nothing from the network."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from kbctl.errors import UsageError
from kbctl.evals.report import render_html
from kbctl.evals.screenshot import find_chromium, png_size, screenshot_html
from tests.fixtures.eval.fake_run import fake_report

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "source", "wbr", "area", "base", "embed"}


class _Collect(HTMLParser):
    """Checks that tags nest properly and collects tags, attributes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def report():
    return fake_report(120)


def _parse(html: str) -> _Collect:
    p = _Collect()
    p.feed(html)
    p.close()
    assert p.stack == [], f"unclosed tags: {p.stack}"
    return p


def test_html_parses_and_holds_the_numbers(report):
    html = render_html(report)
    p = _parse(html)
    text = " ".join(p.text)
    for m in report.modes:
        for key in ("ndcg@10", "recall@10", "recall@100", "p@10", "mrr@10", "map"):
            assert f"{m.metrics[key]:.3f}" in text, (m.mode, key)
        assert f"{m.metrics['latency_ms_p95']:.1f}" in text
    assert "Per-query nDCG@10: hybrid vs lexical" in text


def test_charts_are_inline_svg(report):
    html = render_html(report)
    p = _parse(html)
    assert p.tags.count("svg") == 3  # quality bars, recall curve, per-query differences
    assert p.tags.count("polyline") == len(report.modes)  # one recall curve per mode
    n = report.modes[0].num_queries
    assert p.tags.count("rect") >= n  # a bar per query in the differences chart
    assert re.search(r"<title>q\d{3}: [+-]\d\.\d{3}</title>", html)


def test_no_network_references(report):
    html = render_html(report)
    p = _parse(html)
    for name, value in p.attrs:
        if name in ("src", "href", "xlink:href", "action"):
            assert not value.startswith(("http:", "https:", "//")), (name, value)
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html and "@import" not in html and "url(" not in html


def test_compare_modes_and_single_mode(report):
    html = render_html(report, compare_modes=("dense", "hybrid"))
    assert "hybrid vs dense" in html
    with pytest.raises(UsageError):
        render_html(report, compare_modes=("dense", "nope"))
    single = replace(report, modes=report.modes[:1])
    html = render_html(single)
    _parse(html)
    assert "Per-query" not in html


def test_text_from_data_is_escaped(report):
    evil = replace(
        report, dataset="<script>x</script>", modes=tuple(replace(m, mode=f"<b>{m.mode}") for m in report.modes)
    )
    html = render_html(evil)
    assert "<script>" not in html and "<b>lexical" not in html
    _parse(html)


@pytest.mark.skipif(find_chromium() is None, reason="needs Chromium or Chrome on PATH (apt-get install chromium)")
def test_screenshot(report, tmp_path):
    html = tmp_path / "report.html"
    html.write_text(render_html(report), encoding="utf-8")
    png = screenshot_html(html, tmp_path / "report.png", width=1000, height=900, chromium=find_chromium())
    assert png_size(png) == (1000, 900)
    assert png.stat().st_size > 30_000  # a blank page compresses to a few kB
