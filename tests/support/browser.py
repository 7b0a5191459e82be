"""Shared by the tests: moved from test_report_browser.py."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = shutil.which("chromium")


VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


def chromium(page: Path, profile: Path, *flags: str) -> str:
    """Run headless Chromium on a file; its stdout (the DOM for --dump-dom)."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *flags,
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Page(HTMLParser):
    """What the tests look for in a dumped DOM (each element's text includes its children's)."""

    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.scripts: list[str] = []
        self.responses: list[tuple[str, bool]] = []  # (text, inside an element of class hidden)
        self.summary_tables = 0
        self.summary_cells: list[str] = []
        self.decision_cells: list[str] = []  # each line of a cell, and each model and flags cell
        self.decision_rows: list[tuple[str, str]] = []  # (model, ms-reference or ms-candidate)
        self.decision_answer = ""
        self.plot_images: list[str] = []
        self.result_rows = 0
        self._stack: list[tuple[str, dict[str, str], list[str]]] = []

    def _inside(
        self, tag: str | None = None, cls: str | None = None, id_: str | None = None
    ) -> bool:
        return any(
            (tag is None or t == tag)
            and (cls is None or cls in a.get("class", "").split())
            and (id_ is None or a.get("id") == id_)
            for t, a, _ in self._stack
        )

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        classes = attributes.get("class", "").split()
        in_summary = self._inside(id_="modelsweep-summary")
        if tag == "table" and in_summary and "ms-table" in classes:
            self.summary_tables += 1
        if tag == "img" and in_summary and self._inside("figure", "ms-plot"):
            self.plot_images.append(attributes.get("src", ""))
        if tag == "tbody" and "results-table-row" in classes and not self._inside("template"):
            self.result_rows += 1
        if tag == "tr" and "data-model" in attributes and self._inside(id_="modelsweep-decision"):
            self.decision_rows.append((attributes["data-model"], attributes.get("class", "")))
        if tag not in VOID:
            self._stack.append((tag, attributes, []))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID or not any(t == tag for t, _, _ in self._stack):
            return
        while True:
            open_tag, attributes, parts = self._stack.pop()
            text = "".join(parts)
            if self._stack:
                self._stack[-1][2].append(text)
            if open_tag == tag:
                break
        classes = attributes.get("class", "").split()
        if tag == "title":
            self.title = text
        elif tag == "script":
            self.scripts.append(text)
        elif tag == "pre" and "ms-response" in classes:
            self.responses.append((text, self._inside(cls="hidden")))
        elif tag == "td" and self._inside(id_="modelsweep-summary"):
            self.summary_cells.append(text)
        elif self._inside(id_="modelsweep-decision") and (
            (tag == "td" and attributes.get("data-column") in ("model", "flags"))
            or (tag == "div" and "ms-part" in classes)
        ):
            self.decision_cells.append(text)
        elif tag == "p" and "ms-answer" in classes:
            self.decision_answer = text

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1][2].append(data)


def parse(dom: str) -> Page:
    page = Page()
    page.feed(dom)
    page.close()
    return page


# Appended to a copy of a report: once laid out, the title says how much width the decision
# table needs (its right edge and the page's right margin), how wide the page scrolls and
# how wide the window is.
MEASURE_WIDTH = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const table = document.querySelector("#modelsweep-decision table");
  const margin = parseFloat(getComputedStyle(document.body).marginRight) || 0;
  document.title = "table " + Math.ceil(table.getBoundingClientRect().right + margin)
    + " page " + document.documentElement.scrollWidth + " window " + window.innerWidth;
}, 100));
</script>"""


def decision_table_width(report: Path, profile: Path, width: int = 1400) -> dict[str, int]:
    """The pixels the decision table needs (``table``: its right edge and the page's right
    margin), the page's scroll width and the window's, as Chromium lays the report out in a
    ``width``-pixel-wide window."""
    copy = report.with_name("table_width.html")
    copy.write_text(
        report.read_text(encoding="utf-8").replace("</body>", MEASURE_WIDTH + "</body>"),
        encoding="utf-8",
    )
    title = parse(
        chromium(copy, profile, "--hide-scrollbars", f"--window-size={width},1800", "--dump-dom")
    ).title
    words = title.split()
    assert words[0::2] == ["table", "page", "window"], title
    return dict(zip(words[0::2], map(int, words[1::2])))
