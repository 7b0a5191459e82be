"""The HTML reports in a real headless Chromium: the page as rendered, not the file.

Skipped where ``chromium`` is not installed (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.requirements import module_needs

from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.report.html import html_document
from pytest_modelsweep.report.plots import matplotlib_available

try:  # tests/ as a package, or as a plain folder on sys.path
    from tests.test_report_html import PWNED, make_report
except ImportError:
    from test_report_html import PWNED, make_report  # type: ignore[no-redef,import-not-found]

pytest_plugins = ("pytester",)

CHROMIUM = shutil.which("chromium")
module_requirement = module_needs(
    CHROMIUM is not None,
    "chromium is not installed (apt-get install -y chromium): these tests open the "
    "report in a real headless browser",
)

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


# Appended to a copy of a report: once pytest-html's own script has laid the page out, the
# title says where the decision page's answer and table are, and how tall the window is.
MEASURE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const box = (selector) => {
    const found = document.querySelector(selector);
    if (!found) return "none";
    const r = found.getBoundingClientRect();
    return Math.round(r.top) + "," + Math.round(r.bottom);
  };
  document.title = "answer " + box("#modelsweep-decision .ms-answer") + " table "
    + box("#modelsweep-decision table") + " window " + window.innerHeight;
}, 100));
</script>"""


def first_screen(
    report: Path, profile: Path, width: int = 1280, height: int = 900
) -> dict[str, list[int]]:
    """Where the decision page's answer and table lie in a ``width`` × ``height`` window, as
    rendered (pixels from the top; ``window``: the window's inner height)."""
    copy = report.with_name("first_screen.html")
    text = report.read_text(encoding="utf-8")
    copy.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    title = parse(chromium(copy, profile, f"--window-size={width},{height}", "--dump-dom")).title
    words = title.split()
    assert words[0::2] == ["answer", "table", "window"], title
    return {
        name: [int(v) for v in value.split(",")] for name, value in zip(words[0::2], words[1::2])
    }


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


def screenshot(page: Path, profile: Path, png: Path) -> None:
    chromium(page, profile, "--hide-scrollbars", "--window-size=1280,3200", f"--screenshot={png}")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000


def test_pytest_html_report_in_chromium(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # render_collapsed=none: passed tests open, so that their extras are on screen
    result, _ = make_report(pytester, "-o", "render_collapsed=none")
    result.assert_outcomes(passed=6, failed=1)
    report = pytester.path / "report.html"
    page = parse(chromium(report, tmp_path / "profile", "--dump-dom"))

    assert page.title == "report.html"  # the response's script did not run
    assert page.result_rows == 7  # pytest-html's own script did
    assert not any("pwned" in script for script in page.scripts)
    assert (PWNED, False) in page.responses  # shown as text, not hidden
    assert page.summary_tables == 3  # verdicts, GSM8K, throughput
    assert "worse" in page.summary_cells and "75.0%" in page.summary_cells
    # the decision page: the candidate's GSM8K verdict and difference, the reference's accuracy
    assert page.decision_answer.startswith(
        "No answer: no candidate matches gemma3-270m on every accuracy verdict (GSM8K): "
        "smollm2-135m worse on GSM8K"
    )
    assert page.decision_rows == [("gemma3-270m", "ms-reference"), ("smollm2-135m", "ms-candidate")]
    assert {"smollm2-135m", "worse"} <= set(page.decision_cells)
    assert any(cell.startswith("75.0% (") for cell in page.decision_cells)  # with its interval
    assert any(cell.startswith("-50.0 pp [") for cell in page.decision_cells)
    # ... in the first screen: the answer whole, the table begun, in a 1280 × 900 window
    where = first_screen(report, tmp_path / "profile")
    assert where["window"][0] <= 900
    assert 0 < where["answer"][0] < where["answer"][1] <= where["window"][0], where
    assert where["answer"][1] <= where["table"][0] < where["window"][0] - 60, where
    if matplotlib_available():
        assert len(page.plot_images) == 4  # forest, accuracy, throughput, latency
        assert all(src.startswith("data:image/svg+xml;base64,") for src in page.plot_images)
    screenshot(report, tmp_path / "profile", pytester.path / "report.png")


def test_standalone_report_in_chromium(tmp_path: Path) -> None:
    model = "<img src=x onerror=\"document.title='img'\">"
    measurements = [
        {
            "model": model,
            "benchmark": "gsm8k",
            "value": 0.5,
            "unit": "accuracy",
            "n": 2,
            "params": {"limit": 2, "subset": True},
            "stats": {"errors": 0},
            "items": [
                ItemRecord(item_id="q0", prompt_hash="p", correct=False, response=PWNED).to_dict(),
                ItemRecord(item_id="q1", prompt_hash="p", correct=True, response="42").to_dict(),
            ],
        }
    ]
    path = tmp_path / "report.html"
    path.write_text(html_document(measurements, {"sweep_name": "embedded"}), encoding="utf-8")
    page = parse(chromium(path, tmp_path / "profile", "--dump-dom"))
    assert page.title == "modelsweep: sweep embedded"
    assert page.scripts == []
    assert [text for text, _ in page.responses] == [PWNED, "42"]
    assert page.summary_tables == 1 and model in page.summary_cells
    if matplotlib_available():
        assert len(page.plot_images) == 1
    screenshot(path, tmp_path / "profile", tmp_path / "report.png")
