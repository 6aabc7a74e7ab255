"""What an agent gets back from real-world HTML: code blocks, tables and e-mail bodies kept readable."""

from __future__ import annotations

from kbctl.extract import extract
from kbctl.extract.tables import table_header
from kbctl.types import Source

_INTRO = "<p>Some long enough introduction so that the extractor takes this article as the page's main content.</p>"
_OUTRO = "<p>Closing words of the article, long enough to be kept by the extractor along with the rest of it.</p>"


def _page(body: str) -> Source:
    html = f"<html><head><title>T</title></head><body><article><h1>Setup</h1>{_INTRO}{body}{_OUTRO}</article></body></html>"
    return Source(uri="file:///d/page.html", content=html.encode(), media_type="text/html")


def test_a_bare_pre_block_is_one_code_block_and_its_comment_lines_are_not_headings():
    doc = extract(_page("<pre># configure the server\nport = 8080\n\n# limits\n[limits]\nburst = 20\n</pre>"))[0]
    code = [b for b in doc.blocks if "port = 8080" in b.text]
    assert len(code) == 1
    assert "# limits\n[limits]\nburst = 20" in code[0].text
    assert "# configure the server" in code[0].text
    assert {b.heading_path for b in doc.blocks} == {("Setup",)}


def test_an_html_table_without_header_cells_is_a_markdown_table_and_a_pipe_in_a_cell_stays_in_its_cell():
    doc = extract(_page("<table><tr><td>key</td><td>value</td></tr><tr><td>a|b</td><td>x</td></tr></table>"))[0]
    (table,) = [b.text for b in doc.blocks if b.text.startswith("|")]
    assert table_header(table) is not None
    assert table.split("\n")[0] == "| key | value |"
    assert table.split("\n")[-1] == "| a\\|b | x |"


def test_the_cells_of_a_table_in_an_html_only_mail_are_separate_words():
    eml = (
        b"From: a@example.com\nSubject: Hosts\nMIME-Version: 1.0\n"
        b'Content-Type: text/html; charset="utf-8"\n\n'
        b"<html><body><p>State of the hosts:</p><table><tr><th>Host</th><th>State</th></tr>"
        b"<tr><td>db1</td><td>down</td></tr></table></body></html>\n"
    )
    doc = extract(Source(uri="file:///d/m.eml", content=eml, media_type="message/rfc822"))[0]
    words = doc.text.split()
    assert {"Host", "State", "db1", "down"} <= set(words)


def test_the_blank_lines_of_a_code_block_are_kept():
    code = "def drain(host):\n    stop(host)\n\n\ndef promote(host):\n    start(host)\n    \n    return host\n"
    conf = "[server]\nport = 8080\n\n[limits]\nburst = 20\n"
    doc = extract(
        _page(f'<pre><code class="language-python">{code}</code></pre><p>And the settings:</p><pre>{conf}</pre>')
    )[0]
    blocks = [b.text for b in doc.blocks if b.text.startswith("```")]
    assert blocks == [
        "```\ndef drain(host):\n    stop(host)\n\n\ndef promote(host):\n    start(host)\n    \n    return host\n```",
        "```\n[server]\nport = 8080\n\n[limits]\nburst = 20\n```",
    ]
    assert "kbctl" not in doc.text
