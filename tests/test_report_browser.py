"""The HTML reports in a real headless Chromium: the page as rendered, not the file.

Skipped where ``chromium`` is not installed (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.browser import (
    CHROMIUM,
    chromium,
    parse,
)
from support.report_pages import PWNED, make_report
from support.requirements import module_needs

from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.report.html import html_document
from pytest_modelsweep.report.plots import matplotlib_available

pytest_plugins = ("pytester",)

module_requirement = module_needs(
    CHROMIUM is not None,
    "chromium is not installed (apt-get install -y chromium): these tests open the "
    "report in a real headless browser",
)


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
