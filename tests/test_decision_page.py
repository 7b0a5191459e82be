"""The decision page of a real run: the real benches against fake servers, read back.

The input is what the benches write, not hand-made dicts: ``benches/test_accuracy.py``
(GSM8K and BFCL on the shared data, with their verdicts), the c16 settings of
``benches/test_throughput.py`` with their ratio tests, ``benches/test_capacity.py`` under
``--slo``, ``benches/test_screen.py`` (recorded Hub answers) and a user's own evaluation
(``arith``, judged by ``judge_against_reference`` like GSM8K) run in a pytest subprocess for
a reference and two or three candidates, each served by a fake server that answers the
questions it is given answers to. The tests compare every decision-page cell of the Markdown
and HTML files with figures read from the results file.

The runs:

- ``real_run``: accuracy, verdicts, c16 throughput and ratios, screening, the user's own
  evaluation, priced by the sweep's ``[pricing]``: costs at c16;
- ``capacity_run``: GSM8K, its verdicts and capacity under ``--slo`` (sweep ``max_num_seqs`` 4,
  an example price): costs at each capacity, the cost-based Pareto plot;
- ``capacity_only_run``: c16 throughput and capacity only (no accuracy), priced by
  ``--usd-per-hour``, with a capacity of 0 and a search that breaks on a faulty server;
- ``failed_reference_run``: GSM8K with a failed reference item, c16 throughput without a price;
- ``main_job_run``: README's main job's selection (BFCL, its verdicts, throughput and ratios at
  c4 only), priced by the sweep's ``[pricing]``: the page compares at c4.

The capacity servers model a batching server's slots: a server with ``slots`` serves that
many requests at once and queues the rest (as vLLM does beyond ``max_num_seqs``). A request
streams 256 tokens, two to a chunk, a chunk every ~2.3 ms (asyncio's timer rounds the 2 ms
pause up): ~0.3 s. Under ``--slo=ttft=160ms`` a step within the slots meets the SLO (a first
token in a few ms) and one above them misses it (a third or more of its requests wait ~0.3 s
for a slot), so each capacity is the server's slots. The SLO sits half a request's time from
either side: a request within the slots still meets it after a 150-ms stall of the machine
(CI's shared hosts stalled these servers 80 to 130 ms now and then, which an 80-ms SLO over
0.15-s requests did not survive), and a queued one cannot meet it. ``per_token_s_per_inflight``
pacing (tests/test_capacity.py) is not used here: it caps a server's rate at one token per
``base`` seconds, which would make the c16 throughput windows of the same runs take tens of
seconds.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any

import pytest
from support.browser import CHROMIUM, chromium, parse
from support.decision_runs import (
    ARITH_ITEMS,
    BFCL,
    CANDIDATES,
    CAPACITY_SWEEP,
    EXAMPLE_PRICE,
    GSM8K,
    LIMIT,
    REFERENCE,
    RIGHT,
    SAME,
    SLO,
    SWEEP,
    TPU_PRICE,
    UNREACHABLE,
    USD_PER_HOUR,
    WORSE,
    AnsweringServer,
    Run,
    failed_tests,
    replies_of,
    run_benches,
    run_capacity_only,
    run_failed_reference,
    run_real,
    serving,
    slotted,
)
from support.requirements import SHARED_DATA_HINT, module_needs
from support.shared_runs import once_per_session

from pytest_modelsweep.report.plots import matplotlib_available

module_requirement = module_needs(
    GSM8K.is_file() and (BFCL / "BFCL_v4_simple_python.json").is_file(), SHARED_DATA_HINT
)

METRICS = ("gsm8k", "bfcl", "arith")
LABELS = {"gsm8k": "GSM8K", "bfcl": "BFCL", "arith": "arith"}
HOLDS = ("matches", "equivalent", "better")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "decision_run", run_real)


CAPACITY_SLOTS = {REFERENCE: 2, SAME: 3, WORSE: 4}


@pytest.fixture(scope="module")
def capacity_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """GSM8K (30 items), its verdicts and capacity under the SLO, with an example price: the
    reference serves 2 requests at once, the candidate that holds its accuracy 3 and the
    one that does not 4 (the sweep's maximum)."""
    path = tmp_path_factory.mktemp("capacity_run")
    servers = {model: slotted(model, slots) for model, slots in CAPACITY_SLOTS.items()}
    run = serving(
        servers,
        lambda: run_benches(
            path,
            servers,
            "test_accuracy.py",
            "test_capacity.py",
            "-k",
            "gsm8k or capacity",
            f"--slo={SLO}",
            "--contended-cores=64",
            "--contended-steal=1",
            sweep=CAPACITY_SWEEP + EXAMPLE_PRICE,
        ),
    )
    assert failed_tests(run) <= {f"test_accuracy.py::test_verdict[{WORSE}-gsm8k]"}, run.output[
        -4000:
    ]
    return run


@pytest.fixture(scope="module")
def capacity_only_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "capacity_only_run", run_capacity_only)


@pytest.fixture(scope="module")
def failed_reference_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "failed_reference", run_failed_reference)


MAIN_JOB = (
    "-m",
    "bfcl or throughput",
    "-k",
    "bfcl or c4",
    "--repeats=3",
    "--timed-requests=4",
    "--fail-on=none",
)
"""README's main job's selection and sizes (its --limit 30 is :data:`LIMIT`)."""


@pytest.fixture(scope="module")
def main_job_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "main_job_run", run_main_job)


def run_main_job(path: Path) -> Run:
    """README's main job against the fake servers: BFCL (30 items) with its verdicts and
    throughput at c4 only (3 repeats of 4 requests) with its ratios, priced by the sweep's
    ``[pricing]``; one candidate streams 5 times slower than the others."""
    delays = {REFERENCE: 0.0004, SAME: 0.0004, WORSE: 0.002}
    servers = {
        model: AnsweringServer(model, replies_of(model), chunk_delay_s=delay)
        for model, delay in delays.items()
    }
    return serving(
        servers,
        lambda: run_benches(
            path,
            servers,
            "test_accuracy.py",
            "test_throughput.py",
            *MAIN_JOB,
            "--contended-cores=64",
            "--contended-steal=1",
            sweep=SWEEP + TPU_PRICE,
        ),
    )


# --------------------------------------------------------------------------- reading the pages


def _unescape_markdown(cell: str) -> str:
    return html.unescape(re.sub(r"\\(.)", r"\1", cell.strip()).replace("<br>", "\n"))


Lines = list[tuple[str, list[tuple[str, str]]]]
"""A table cell's lines: (the benchmark's label or "", [(part's title, its text)])."""


def _unescape_html(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell))


def html_rows(text: str) -> dict[str, dict[str, Any]]:
    """The HTML decision table: model -> ``model``, ``flags`` (joined by "; ") and each table
    column's cell as its lines (:data:`Lines`), by the column's title."""
    start = text.index('<section class="modelsweep" id="modelsweep-decision">')
    section = text[start : text.index("</section>", start)]
    found: dict[str, dict[str, Any]] = {}
    for model, body in re.findall(
        r'<tr class="ms-(?:reference|candidate)" data-model="([^"]*)">'
        r"(.*?)</tr>",
        section,
        re.DOTALL,
    ):
        row: dict[str, Any] = {"model": html.unescape(model), "blocks": {}}
        for kind, name, inner in re.findall(
            r'<td [^>]*data-(column|group)="([^"]*)"[^>]*>'
            r"(.*?)</td>",
            body,
            re.DOTALL,
        ):
            if kind == "column":
                if name == "flags":
                    row["flags"] = "; ".join(
                        map(_unescape_html, re.findall(r"<div>(.*?)</div>", inner))
                    )
                continue
            pieces = re.split(r'<span class="ms-label">(.*?)</span>', inner)
            labelled = [
                (html.unescape(label), part) for label, part in zip(pieces[1::2], pieces[2::2])
            ] or [("", inner)]
            lines: Lines = []
            for label, part in labelled:
                parts = [
                    (html.unescape(c), html.unescape(t))
                    for c, t in re.findall(
                        r'<div [^>]*data-column="([^"]*)"[^>]*>(.*?)</div>', part, re.DOTALL
                    )
                ]
                lines += [(label, parts)] if label else [("", [p]) for p in parts]
            row["blocks"][html.unescape(name)] = lines
        found[html.unescape(model)] = row
    return found


def _flat(row: dict[str, Any]) -> dict[str, str]:
    """A row as part title -> text, with ``model`` and ``flags``."""
    flat = {"model": row["model"], "flags": row.get("flags", "")}
    for lines in row["blocks"].values():
        for _, parts in lines:
            flat.update(parts)
    return flat


def markdown_decision(
    text: str,
    html_text: str,
) -> tuple[str, dict[str, dict[str, str]], list[str], str]:
    """The Markdown decision page: (answer, model -> part title -> cell, reasons, Pareto
    line). A Markdown cell names no parts: its lines are read by the HTML's (the same
    table columns, lines and parts; a benchmark's line is its label, the verdict's word and
    the difference)."""
    block = text.split("### Decision: which model to serve\n", 1)[1].split("\n### ", 1)[0]
    lines = block.splitlines()
    answer = _unescape_markdown(next(line for line in lines if line.startswith("**")).strip("*"))
    rows = [line for line in lines if line.startswith("| ")]

    def cells(line: str) -> list[str]:
        return [_unescape_markdown(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]]

    titles = [_unescape_html(c.split("\n")[0]) for c in cells(rows[0])]
    shown = html_rows(html_text)
    table = {}
    for line in rows[2:]:
        found = cells(line)
        model = found[0].split("\n")[0]
        html_row = shown[model]
        assert found[0] == model + ("\n(reference)" if "(reference)" in found[0] else "")
        assert titles[1:-1] == list(html_row["blocks"]), titles
        row = {"model": model, "flags": "; ".join(filter(None, found[-1].split("\n")))}
        for cell, cell_lines in zip(found[1:-1], html_row["blocks"].values()):
            md_lines = cell.split("\n") if cell else []
            for label, parts in cell_lines:
                if label:  # one line, and any further lines of its parts' figures
                    count = 1 + sum(shown_text.count("\n") for _, shown_text in parts)
                    said = "\n".join(md_lines[:count])
                    del md_lines[:count]
                    assert said.startswith(label + " "), (said, label)
                    rest = said[len(label) + 1 :]
                    values = [rest] if len(parts) == 1 else rest.split(" ", 1)
                    row.update(zip((title for title, _ in parts), values))
                    continue
                ((title, shown_text),) = parts
                count = shown_text.count("\n") + 1
                row[title] = "\n".join(md_lines[:count])
                del md_lines[:count]
            assert not md_lines, (model, cell)
        table[model] = row
    reasons = [_unescape_markdown(line) for line in lines if re.match(r"\\\[\d+\\\] ", line)]
    pareto = next(
        _unescape_markdown(line)
        for line in lines
        if line.startswith(("Pareto front", "No Pareto plot"))
    )
    return answer, table, reasons, pareto


def html_decision(text: str) -> tuple[str, dict[str, dict[str, str]], list[str], str]:
    """The HTML decision page, read the same way (parts by their ``data-column``)."""
    start = text.index('<section class="modelsweep" id="modelsweep-decision">')
    section = text[start : text.index("</section>", start)]
    answer_match = re.search(r'<p class="ms-answer">(.*?)</p>', section, re.DOTALL)
    assert answer_match is not None
    table = {model: _flat(row) for model, row in html_rows(text).items()}
    reasons = [html.unescape(r) for r in re.findall(r'<li data-note="\d+">(.*?)</li>', section)]
    pareto = next(
        html.unescape(p)
        for p in re.findall(r'<p class="ms-notes">(.*?)</p>', section)
        if html.unescape(p).startswith(("Pareto front", "No Pareto plot"))
    )
    return html.unescape(answer_match.group(1)), table, reasons, pareto


def decision(run: Run, kind: str) -> tuple[str, dict[str, dict[str, str]], list[str], str]:
    return (
        markdown_decision(run.markdown, run.html) if kind == "markdown" else html_decision(run.html)
    )


def decision_text(run: Run, kind: str) -> str:
    """The decision page's text, as a reader sees it (the Markdown's escapes undone)."""
    if kind == "markdown":
        block = run.markdown.split("### Decision: which model to serve\n", 1)[1]
        return _unescape_markdown(block.split("\n### ", 1)[0])
    start = run.html.index('<section class="modelsweep" id="modelsweep-decision">')
    return html.unescape(run.html[start : run.html.index("</section>", start)])


def notes_line(run: Run, kind: str) -> str:
    """The notes under the decision table (what the columns mean), a line each, as one line
    ("; " between them)."""
    text = decision_text(run, kind)
    if kind == "markdown":
        found = [
            block.split("\n")
            for block in re.findall(r"<sub>(.*?)</sub>", text, re.DOTALL)
            if block.startswith(("difference: ", "ratio: ", "SLO: ", "cost: "))
        ]
    else:
        found = [
            re.findall(r"<li>(.*?)</li>", block)
            for block in re.findall(
                r'<ul class="ms-reasons ms-column-notes">(.*?)</ul>', text, re.DOTALL
            )
        ]
    assert len(found) == 1, found
    return "; ".join(found[0])


def html_titles(run: Run, column: str) -> dict[str, str]:
    """The tooltip of a decision-table column's cell in each model's row of the HTML."""
    start = run.html.index('<section class="modelsweep" id="modelsweep-decision">')
    section = run.html[start : run.html.index("</section>", start)]
    found = {}
    for model, body in re.findall(
        r'<tr class="ms-(?:reference|candidate)" data-model="([^"]*)">'
        r"(.*?)</tr>",
        section,
        re.DOTALL,
    ):
        match = re.search(
            rf'<div [^>]*data-column="{re.escape(html.escape(column))}"'
            r'[^>]*title="([^"]*)"',
            body,
        )
        if match:
            found[html.unescape(model)] = html.unescape(match.group(1))
    return found


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"[-+]?\d[\d,]*\.?\d*", text)]


def reason_of(cell: str, reasons: list[str]) -> str:
    """The reason line a cell's ``[n]`` points to."""
    match = re.search(r"\[(\d+)\]$", cell)
    assert match is not None, f"the cell {cell!r} does not say why"
    line = reasons[int(match.group(1)) - 1]
    assert line.startswith(f"[{match.group(1)}] ")
    return line


def verdict_word(cell: str) -> str:
    return cell.strip("*").lower()


KINDS = ["markdown", "html"]


# --------------------------------------------------------------------------- capacity and cost
#
# What each capacity, capacity-ratio, $/1M and relative-cost cell must show, read from the
# results file's measurements by the rules the page states (docs/decision-page.md).

CAPACITY = "capacity"
CAPACITY_RATIO = "capacity vs reference [interval]"
COST = "$/1M output tokens"
RELATIVE_COST = "cost vs reference"


def passed_c16(run: Run, model: str) -> dict[str, Any] | None:
    m = run.measurement(model, "throughput", concurrency=16)
    return m if m is not None and m["outcome"] == "passed" else None


def output_rates_said(run: Run, holding: list[str], concurrency: int) -> str:
    """What the answer says of the holding candidates' output rates at ``concurrency``: each
    ratio whose 95% interval lies within ×/÷1.25 of it as a figure, the others as undecided."""
    decided, undecided = {}, []
    for candidate in holding:
        ratio = run.measurement(candidate, "throughput_ratio", concurrency=concurrency)
        assert ratio is not None
        value, low, high = ratio["value"], *(ratio["stats"]["interval"][k] for k in ("low", "high"))
        if low is not None and high is not None and max(high / value, value / low) <= 1.25:
            decided[candidate] = f"{value:.2f}×"
        else:
            undecided.append(candidate)
    said = ""
    if decided:
        figures = (
            next(iter(decided.values()))
            if len(decided) == 1
            else " and ".join(f"{ratio} ({c})" for c, ratio in decided.items())
        )
        said = f" at {figures} its output rate at c{concurrency}"
    if undecided:
        said += (
            f" ({' and '.join(undecided)}: output rate vs {REFERENCE} not decided, its 95% "
            "interval wider than ×/÷1.25; more repeats, or --interleave --repeats auto, "
            "decide it)"
        )
    return said


def cost_of(run: Run, model: str) -> tuple[str, float | None]:
    """(``at cN``, $/1M) as the page must show the model's cost: at its capacity when its
    search concluded above 0 (none at capacity 0), else at c16 from a passed measurement;
    ("", None) without one."""
    capacity = run.measurement(model, "capacity")
    if capacity is not None and capacity["stats"]["capacity"] is not None:
        value = capacity["stats"]["capacity"]
        return (
            (f"at c{value}", capacity["stats"]["at_capacity"]["usd_per_million_output_tokens"])
            if value
            else ("", None)
        )
    c16 = passed_c16(run, model)
    if c16 is not None:
        return "at c16", (c16["stats"]["cost"] or {}).get("usd_per_million_output_tokens")
    return "", None


def basis(at: str) -> str:
    return "" if not at else "c16" if at == "at c16" else "capacity"


def check_capacity_cell(run: Run, model: str, cell: str, reasons: list[str]) -> None:
    measured = run.measurement(model, "capacity")
    assert measured is not None, model
    stats = measured["stats"]
    capacity = stats["capacity"]
    if capacity is None:  # the search broke off: no figure, the error says why
        assert measured["outcome"] == "failed"
        assert re.fullmatch(r"cannot conclude \[\d+\]", cell), cell
        assert stats["error"][:80] in reason_of(cell, reasons)
        return
    if capacity == 0:
        assert re.fullmatch(r"0 \(misses the SLO at c1\) \[\d+\]", cell), cell
        assert f"{model}'s capacity is 0: {stats['reason']}" in reason_of(cell, reasons)
        return
    if stats["bracket"][1] is None:  # passed at the server's maximum
        match = re.fullmatch(r"≥(\d+) \(server's maximum\)\ngoodput ([\d.,]+) req/s \[\d+\]", cell)
        assert stats["reason"] in reason_of(cell, reasons)
    else:
        match = re.fullmatch(r"(\d+) concurrent\ngoodput ([\d.,]+) req/s", cell)
    assert match is not None, cell
    assert int(match.group(1)) == capacity
    assert float(match.group(2).replace(",", "")) == pytest.approx(
        stats["at_capacity"]["goodput_rps"], rel=0.005, abs=0.0051
    )


def check_capacity_ratio_cells(
    run: Run, candidate: str, row: dict[str, str], reasons: list[str]
) -> None:
    cell, verdict = row.get(CAPACITY_RATIO, ""), row.get("capacity verdict", "")
    ratio = run.measurement(candidate, "capacity_ratio")
    if ratio is not None:
        stats = ratio["stats"]
        assert verdict_word(verdict) == ratio["params"]["verdict"] == stats["verdict"]
        sides = stats["ratio"]
        assert not (sides["candidate"]["first_fail"] is None is sides["reference"]["first_fail"])
        expected = [ratio["value"], sides["low"]]
        if sides["high"] is None:  # the candidate passed at its maximum: open above
            assert cell.endswith(", ∞)"), cell
        else:
            expected.append(sides["high"])
            assert cell.endswith("]") and "interval" not in cell
        assert numbers(cell) == pytest.approx(expected, abs=0.0051), cell
        return
    capacity = run.measurement(candidate, "capacity")
    assert capacity is not None and capacity["stats"]["capacity"] is None, candidate
    # no capacity of the candidate: no ratio, for the same reason, said once by the capacity
    assert CAPACITY_RATIO not in row and "capacity verdict" not in row
    assert row[CAPACITY].startswith("cannot conclude [")


def check_cost_cells(run: Run, model: str, row: dict[str, str], reasons: list[str]) -> None:
    at, usd = cost_of(run, model)
    cell = row[COST]
    if usd is None:
        capacity = run.measurement(model, "capacity")
        if capacity is not None and capacity["stats"]["capacity"] == 0:
            assert re.fullmatch(r"n/a \[\d+\]", cell), cell
            assert (
                "misses the SLO even at concurrency 1 (capacity 0): no cost at its "
                "capacity" in reason_of(cell, reasons)
            )
        else:
            assert re.fullmatch(r"cannot conclude \[\d+\]", cell), cell
        # no cost: no relative cost, for the same reason, said once by the cost
        assert RELATIVE_COST not in row
        return
    first, *interval = cell.split("\n")  # "$0.14 at c16", then "[$0.13, $0.15]"
    assert first.endswith(f" {at}"), cell
    shown = numbers(" ".join([first.removesuffix(f" {at}"), *interval]).replace("$", ""))
    expected = [usd]
    if at == "at c16":  # with its interval over the repeats
        c16 = passed_c16(run, model)
        assert c16 is not None
        expected += c16["stats"]["cost"]["interval"]
    assert shown == pytest.approx(expected, rel=0.006), cell
    if model == REFERENCE:
        assert RELATIVE_COST not in row  # the reference's own cost only
        return
    reference_at, reference_usd = cost_of(run, REFERENCE)
    assert reference_usd is not None and basis(at) == basis(reference_at)
    relative = row[RELATIVE_COST]
    if basis(at) == "c16":  # one price: the inverse of the c16 ratio, with its interval inverted
        ratio = run.measurement(model, "throughput_ratio", concurrency=16, prompt_tokens=None)
        assert ratio is not None
        low, high = ratio["stats"]["interval"]["low"], ratio["stats"]["interval"]["high"]
        assert numbers(relative) == pytest.approx(
            [usd / reference_usd, 1 / high, 1 / low], abs=0.0051
        ), relative
    else:  # each cost from one search window: no interval, and the note says so
        assert re.fullmatch(r"\S+× \(no interval\) \[\d+\]", relative), relative
        assert numbers(relative.split(" (")[0]) == pytest.approx([usd / reference_usd], abs=0.0051)
        assert "comes from one search window" in reason_of(relative, reasons)


def check_capacity_and_cost(run: Run, kind: str) -> None:
    _, table, reasons, _ = decision(run, kind)
    for model, row in table.items():
        check_capacity_cell(run, model, row[CAPACITY], reasons)
        if model == REFERENCE:  # its own capacity only
            assert CAPACITY_RATIO not in row and "capacity verdict" not in row
        else:
            check_capacity_ratio_cells(run, model, row, reasons)
        check_cost_cells(run, model, row, reasons)


def priced(run: Run, usd_per_hour: float) -> None:
    """Every measurement that records a cost used this price, and its figures."""
    found = 0
    for m in run.results["measurements"]:
        stats = m["stats"]
        if m["benchmark"] == "capacity":  # at its capacity, priced
            at = stats["at_capacity"] or {}
            rate, usd, pricing = at.get("output_tokens_per_s"), at, stats["pricing"]
        elif m["benchmark"] == "throughput":
            rate, usd = m["value"], stats["cost"] or {}
            pricing = usd.get("pricing")
        else:
            continue
        if rate is None or pricing is None:
            continue
        assert pricing["usd_per_hour"] == usd_per_hour
        assert usd["usd_per_million_output_tokens"] == pytest.approx(
            usd_per_hour / (rate * 3600) * 1e6
        )
        found += 1
    assert found


# --------------------------------------------------------------------------- the run itself


def test_the_run_recorded_what_the_page_reads(real_run: Run) -> None:
    for candidate in CANDIDATES:
        for metric in METRICS:
            assert real_run.measurement(candidate, f"verdict:{metric}") is not None, metric
        assert real_run.measurement(candidate, "throughput_ratio", concurrency=16) is not None
    for model in (REFERENCE, *CANDIDATES):
        c16 = real_run.measurement(model, "throughput", concurrency=16)
        assert c16 is not None and c16["stats"]["cost"]["interval"] is not None
        assert (real_run.measurement(model, "screen") is None) is (model == WORSE)
        for metric in METRICS:
            measured = real_run.measurement(model, metric)
            assert measured is not None and measured["n"] == (
                ARITH_ITEMS if metric == "arith" else LIMIT
            )
            assert measured["value"] == pytest.approx(len(RIGHT[metric][model]) / measured["n"])
    verdicts = {
        m["model"]: m["stats"]["verdict"]
        for m in real_run.results["measurements"]
        if m["benchmark"] == "verdict:gsm8k"
    }
    assert verdicts == {SAME: "matches", WORSE: "worse"}
    priced(real_run, 1.20)


def ratio_verdict(low: float, high: float | None, tolerance: float = 0.10) -> str:
    """The verdict docs/verdicts.md states for a ratio interval (open above: ``high`` None)."""
    top = math.inf if high is None else high
    if top < 1 - tolerance:
        return "worse"
    if low > 1 + tolerance:
        return "better"
    if low <= 1 <= top:
        return "matches"
    return "equivalent" if 1 - tolerance <= low and top <= 1 + tolerance else "inconclusive"


def test_the_capacity_runs_searched_their_servers_within_their_slots(
    capacity_run: Run,
    capacity_only_run: Run,
) -> None:
    """The designs hold whatever else the machine runs: no capacity above a server's slots
    (a queued request waits a whole request, beyond the SLO), 0 for a first token later
    than the SLO, none from a broken server; each bracket is the search's last pass and
    first miss, each ratio's interval the two brackets'. (Which steps within the slots pass
    is the paced servers' in real time: tests/test_capacity.py.)"""
    designs: list[tuple[Run, dict[str, int | None]]] = [
        (capacity_run, dict(CAPACITY_SLOTS)),
        (capacity_only_run, {REFERENCE: 3, SAME: 4, WORSE: 0, UNREACHABLE: None}),
    ]
    brackets: dict[tuple[int, str], tuple[int, int | None]] = {}
    for index, (run, slots) in enumerate(designs):
        for model, most in slots.items():
            measured = run.measurement(model, "capacity")
            assert measured is not None, model
            assert measured["params"]["slo"] == {"ttft_ms": 160.0}
            assert measured["params"]["max_concurrency"] == 4
            stats = measured["stats"]
            if most is None:
                assert stats["bracket"] is None and stats["capacity"] is None
                continue
            low: int = stats["bracket"][0]
            high: int | None = stats["bracket"][1]
            assert stats["capacity"] == low <= most, (model, stats["steps"])
            assert high == (None if low == 4 else low + 1), (model, stats["steps"])
            if most == 0:
                assert (low, high) == (0, 1)
            brackets[index, model] = (low, high)
    reference_low, reference_high = brackets[0, REFERENCE]
    assert reference_low > 0 and reference_high is not None
    for candidate in CANDIDATES:
        ratio = capacity_run.measurement(candidate, "capacity_ratio")
        assert ratio is not None, candidate
        low, high = brackets[0, candidate]
        expected = [low / reference_high, None if high is None else high / reference_low]
        sides = ratio["stats"]["ratio"]
        assert [sides["low"], sides["high"]] == pytest.approx(expected)
        assert ratio["params"]["verdict"] == ratio_verdict(sides["low"], sides["high"])
    broken = capacity_only_run.measurement(UNREACHABLE, "capacity")
    assert broken is not None and broken["stats"]["error"].startswith(
        "the window at concurrency 1 broke its rules: request 0 produced 12 of 256 tokens"
    )
    assert capacity_only_run.measurement(UNREACHABLE, "capacity_ratio") is None
    priced(capacity_run, 0.10)
    priced(capacity_only_run, USD_PER_HOUR)
    assert not any(
        m["stats"].get("pricing") or m["stats"].get("cost")
        for m in capacity_run.results["measurements"] + capacity_only_run.results["measurements"]
        if m["benchmark"] not in ("capacity", "throughput")
    )


# --------------------------------------------------------------------------- every cell


@pytest.mark.parametrize("kind", KINDS)
def test_each_accuracy_group_shows_its_verdict_difference_and_interval(
    real_run: Run, kind: str
) -> None:
    _, table, _, _ = decision(real_run, kind)
    assert set(table) == {REFERENCE, *CANDIDATES}
    titles = list(table[SAME])
    # the user's own evaluation sits beside GSM8K's and BFCL's, in report order
    assert [t for t in titles if t.endswith(" verdict") and t.split()[0] in LABELS.values()] == [
        "GSM8K verdict",
        "BFCL verdict",
        "arith verdict",
    ]
    for candidate in CANDIDATES:
        for metric in METRICS:
            measured = real_run.measurement(candidate, f"verdict:{metric}")
            assert measured is not None
            stats = measured["stats"]
            label = LABELS[metric]
            assert verdict_word(table[candidate][f"{label} verdict"]) == stats["verdict"]
            shown = numbers(table[candidate][f"{label} difference [95% interval]"])
            interval = stats["interval"]
            expected = [100 * interval[k] for k in ("difference", "low", "high")]
            assert shown == pytest.approx(expected, abs=0.051), (candidate, metric)
    for metric in METRICS:
        reference = real_run.measurement(REFERENCE, metric)
        assert reference is not None
        assert f"{LABELS[metric]} verdict" not in table[REFERENCE]  # its own accuracy only
        accuracy = table[REFERENCE][f"{LABELS[metric]} difference [95% interval]"]
        assert accuracy.startswith(f"{100 * reference['value']:.1f}% (")  # with its interval


def check_throughput_cells(run: Run, kind: str, concurrency: int = 16) -> None:
    _, table, _, _ = decision(run, kind)
    setting = f"c{concurrency}"
    for candidate in (c for c in table if c != REFERENCE):
        ratio = run.measurement(candidate, "throughput_ratio", concurrency=concurrency)
        if ratio is None:  # its throughput failed: checked with the capacity and cost cells
            measured = run.measurement(candidate, "throughput", concurrency=concurrency)
            assert measured is None or measured["outcome"] != "passed"
            # the word that says why, once: no dash beside it
            assert table[candidate][f"{setting} verdict"].startswith("cannot conclude [")
            assert f"{setting} ratio [95% interval]" not in table[candidate]
            continue
        stats = ratio["stats"]
        shown = numbers(table[candidate][f"{setting} ratio [95% interval]"])
        bounds = [stats["interval"]["low"], stats["interval"]["high"]]
        assert shown[:3] == pytest.approx([ratio["value"], *bounds], abs=0.0051)
        assert verdict_word(table[candidate][f"{setting} verdict"]) == stats["verdict"]
    reference = run.measurement(REFERENCE, "throughput", concurrency=concurrency)
    assert reference is not None
    shown = numbers(table[REFERENCE][f"{setting} ratio [95% interval]"])
    assert shown == pytest.approx([reference["value"]], abs=0.051)
    assert f"{setting} verdict" not in table[REFERENCE]


@pytest.mark.parametrize("kind", KINDS)
def test_the_c16_throughput_cells_are_the_ratio_measurements(
    real_run: Run,
    capacity_only_run: Run,
    kind: str,
) -> None:
    check_throughput_cells(real_run, kind)
    check_throughput_cells(capacity_only_run, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_cost_cells_at_c16_are_the_throughput_measurements(real_run: Run, kind: str) -> None:
    """No capacity: each model's $/1M at c16 with its interval, relative to the reference's."""
    _, table, reasons, _ = decision(real_run, kind)
    for model, row in table.items():
        assert cost_of(real_run, model)[0] == "at c16"
        check_cost_cells(real_run, model, row, reasons)


@pytest.mark.parametrize("kind", KINDS)
def test_capacity_and_cost_cells_are_the_capacity_measurements(
    capacity_run: Run,
    kind: str,
) -> None:
    """Each capacity with its goodput (≥ the maximum, noted, where the search reached it), the
    capacity ratio with its search bracket and verdict, $/1M at each capacity and relative to
    the reference's."""
    check_capacity_and_cost(capacity_run, kind)
    _, table, _, _ = decision(capacity_run, kind)
    assert set(table) == {REFERENCE, *CANDIDATES}
    for model in (REFERENCE, *CANDIDATES):
        measured = capacity_run.measurement(model, "capacity")
        assert measured is not None and measured["stats"]["capacity"]
        assert cost_of(capacity_run, model)[0] == f"at c{measured['stats']['capacity']}"
    assert not any(column.startswith("c16") for column in table[SAME])  # none measured


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_without_accuracy_shows_capacity_and_cost_and_says_why_there_is_no_answer(
    capacity_only_run: Run,
    kind: str,
) -> None:
    """Capacity 0 (noted with why), a broken search (cannot conclude, with its error), the
    maximum reached; costs at capacity, none at capacity 0, none from a broken server."""
    run = capacity_only_run
    check_capacity_and_cost(run, kind)
    answer, table, reasons, pareto = decision(run, kind)
    assert set(table) == {REFERENCE, *CANDIDATES, UNREACHABLE}
    assert not any(column.endswith(" verdict") and "GSM8K" in column for column in table[SAME])
    assert table[WORSE][CAPACITY].startswith("0 (misses the SLO at c1) [")
    broken = table[UNREACHABLE][CAPACITY]
    assert broken.startswith("cannot conclude [")
    assert (
        "capacity search did not conclude: the window at concurrency 1 broke its rules"
        in reason_of(broken, reasons)
    )
    assert "cannot conclude (" in table[UNREACHABLE]["flags"]
    assert "capacity under the SLO" in table[UNREACHABLE]["flags"]
    same_at, same_usd = cost_of(run, SAME)
    _, reference_usd = cost_of(run, REFERENCE)
    assert same_usd is not None and reference_usd is not None
    expected = (
        f"No answer: this run has no accuracy verdict against {REFERENCE}, so no "
        "candidate is shown to match it (run an accuracy benchmark: -m gsm8k, -m bfcl "
        "or your own). Not judged on accuracy: highest capacity under the "
        f"SLO: {SAME} (≥4 concurrent requests); cheapest: {SAME} ($"
    )
    assert answer.startswith(expected), answer
    cheapest = answer[len(expected) - 1 :]
    assert cheapest.endswith(
        f" {same_at}, {same_usd / reference_usd:.2f}× the reference's); "
        f"no cost for {WORSE} and {UNREACHABLE}."
    )
    assert numbers(cheapest)[0] == pytest.approx(same_usd, rel=0.006)
    assert pareto == "No Pareto plot: no accuracy verdict to plot against."


@pytest.mark.parametrize("kind", KINDS)
def test_screening_cells_are_the_screen_measurements(real_run: Run, kind: str) -> None:
    _, table, reasons, _ = decision(real_run, kind)
    for model in (REFERENCE, SAME):
        screen = real_run.measurement(model, "screen")
        assert screen is not None
        assert table[model]["licence"] == screen["stats"]["license"]
        headroom = table[model]["memory headroom"]
        assert numbers(headroom) == pytest.approx([screen["stats"]["kv_headroom_gib"]], abs=0.051)
        assert headroom.endswith("(rejected)") is (not screen["stats"]["accepted"])
    # the Hub answers lack this one: its screening failed, and its cells say so
    [failure] = [
        f
        for f in real_run.results["summary"]["failures"]
        if f["test_id"] == f"test_screen.py::test_screen[{WORSE}]"
    ]
    licence = table[WORSE]["licence"]
    assert licence.startswith("not screened [")
    why = reason_of(licence, reasons)
    assert (
        f"{WORSE}'s test_screen failed: {failure['message'].removeprefix('Failed: ')[:60]}" in why
    )
    assert "memory headroom" not in table[WORSE]  # said once, by the licence
    assert "failed tests (test_screen)" in table[WORSE]["flags"]


def check_every_note_is_pointed_to(
    table: dict[str, dict[str, str]], reasons: list[str], pointed: set[str]
) -> None:
    """Every cell with a ``[n]`` points to a line; every other cell is a figure or a word of
    its own; every line is pointed to."""
    for row in table.values():
        for column, cell in row.items():
            if column in ("model", "flags"):
                continue
            if re.search(r"\[\d+\]$", cell):
                pointed.add(reason_of(cell, reasons))
            else:
                assert cell and "—" not in cell and "not " not in cell, (column, cell)
    assert pointed == set(reasons)


@pytest.mark.parametrize("kind", KINDS)
def test_a_group_no_model_was_measured_in_says_why_once(real_run: Run, kind: str) -> None:
    """No capacity, capacity in req/s or cold start in this run: those groups leave the
    table, in one line that points to why; every cell left points to a reason, and every
    reason is pointed to."""
    _, table, reasons, _ = decision(real_run, kind)
    assert not any(
        m["benchmark"] in ("capacity", "capacity_ratio", "rate_capacity", "startup")
        for m in real_run.results["measurements"]
    )
    text = decision_text(real_run, kind)
    line = re.search(
        r"Not measured for any model: capacity under the SLO (\[\d+\]); req/s "
        r"under the SLO (\[\d+\]); cold start (\[\d+\])\.",
        text,
    )
    assert line is not None
    capacity, rate, start = line.groups()
    assert (
        "no capacity measurement in this run (benches/test_capacity.py -m capacity, run "
        "under --slo)"
    ) in reason_of(capacity, reasons)
    assert reason_of(rate, reasons) == (
        f"{rate} no capacity in req/s in this run "
        "(benches/test_open_loop.py -m rate_capacity, run "
        "under --slo)"
    )
    assert reason_of(start, reasons) == (
        f"{start} no cold start in this run (benches/"
        "test_startup.py -m startup; not for attached endpoints)"
    )
    assert not any(column.startswith("capacity") for column in table[SAME])
    assert "cold start" not in table[SAME]
    assert COST in table[SAME] and RELATIVE_COST in table[SAME]
    check_every_note_is_pointed_to(
        table, reasons, {reason_of(n, reasons) for n in (capacity, rate, start)}
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_without_a_price_says_so_once(failed_reference_run: Run, kind: str) -> None:
    """c16 throughput but no price: no cost anywhere, and the one line says how to give one."""
    run = failed_reference_run
    assert run.measurement(REFERENCE, "throughput", concurrency=16) is not None
    assert not any(
        m["stats"].get("pricing")
        or m["stats"].get("cost")
        or (m["stats"].get("at_capacity") or {}).get("usd_per_million_output_tokens") is not None
        for m in run.results["measurements"]
    )
    _, table, reasons, _ = decision(run, kind)
    line = re.search(
        r"Not measured for any model: capacity under the SLO (\[\d+\]); "
        r"req/s under the SLO \[\d+\]; cost (\[\d+\]); cold start \[\d+\]\.",
        decision_text(run, kind),
    )
    assert line is not None
    assert reason_of(line.group(2), reasons) == (
        f"{line.group(2)} no price: give --usd-per-hour or a [pricing] table in the sweep (no "
        "cost is ever assumed)"
    )
    assert not any(column.startswith(("capacity", "$/1M", "cost")) for column in table[SAME])
    assert "c16 ratio [95% interval]" in table[SAME]


@pytest.mark.parametrize("kind", KINDS)
def test_flags_come_from_the_throughput_measurements(real_run: Run, kind: str) -> None:
    _, table, _, _ = decision(real_run, kind)
    for model in (REFERENCE, *CANDIDATES):
        c16 = real_run.measurement(model, "throughput", concurrency=16)
        assert c16 is not None
        flags = table[model]["flags"]
        assert ("unstable (c16)" in flags) is c16["stats"]["unstable"]
        assert ("contended (c16)" in flags) is c16["stats"]["contended"]
        assert "failed items" not in flags and "cannot conclude" not in flags


# --------------------------------------------------------------------------- notes


@pytest.mark.parametrize("kind", KINDS)
def test_the_slo_and_the_price_are_stated_once_under_the_table(
    real_run: Run,
    capacity_run: Run,
    capacity_only_run: Run,
    kind: str,
) -> None:
    tpu = "price $1.2/h (Google Cloud TPU pricing, v5e on-demand, 2026-11-30)"
    example = "price $0.1/h (a price for this test, 2026-11-30), an example price"
    given = f"price ${USD_PER_HOUR:g}/h (--usd-per-hour)"
    slo = f"SLO: {SLO}"
    capacity_note = (
        "capacity: the most concurrent requests (up to the server's maximum) at "
        "which 90% of requests meet it"
    )
    bracket = "with its 90% interval"
    for run, price, capacity in (
        (real_run, tpu, False),
        (capacity_run, example, True),
        (capacity_only_run, given, True),
    ):
        text = decision_text(run, kind)
        notes = notes_line(run, kind)
        assert notes.endswith(price) and text.count(price) == 1
        for said in (slo, capacity_note, bracket):
            assert (said in notes) is capacity and text.count(said) == int(capacity)
        assert "an example price" not in text.replace(example, "")


def test_the_capacity_cell_tells_the_goodput_and_attainment_at_the_capacity(
    capacity_run: Run,
) -> None:
    titles = html_titles(capacity_run, CAPACITY)
    for model in (REFERENCE, *CANDIDATES):
        measured = capacity_run.measurement(model, "capacity")
        assert measured is not None
        stats = measured["stats"]
        [step] = [
            s for s in stats["steps"] if s["value"] == stats["capacity"] and s["outcome"] == "pass"
        ]
        tip = titles[model]
        assert (
            f"at c{stats['capacity']}: {100 * stats['at_capacity']['slo_attainment']:.0f}% of requests met "
            f"the SLO ({step['good']}/{step['requests']}), goodput "
        ) in tip, tip
        shown = stats["bracket"][0] if stats["bracket"][1] else f"≥ {stats['bracket'][0]}"
        assert f"; 95% interval {shown}" in tip and f"(bracket [{stats['bracket'][0]}, " in tip
        # the one noted, a search that reached the maximum, says so first
        assert tip.startswith(f"{model}: meets the SLO at the server's maximum") is (
            stats["bracket"][1] is None
        )


# --------------------------------------------------------------------------- answer and Pareto


@pytest.mark.parametrize("kind", KINDS)
def test_the_answer_names_the_candidates_that_hold_the_references_accuracy(
    real_run: Run,
    kind: str,
) -> None:
    answer, _, _, _ = decision(real_run, kind)
    holding = [
        c
        for c in CANDIDATES
        if all(
            (m := real_run.measurement(c, f"verdict:{metric}")) is not None
            and m["stats"]["verdict"] in HOLDS
            for metric in METRICS
        )
    ]
    assert holding == [SAME]
    prefix = (
        f"{SAME} matches {REFERENCE} on every accuracy verdict (GSM8K, BFCL, arith)"
        f"{output_rates_said(real_run, [SAME], 16)}; not {WORSE} (worse on GSM8K"
    )
    assert answer.startswith(prefix), answer
    # no capacity: the cheapest at c16, and how it compares with the reference's cost
    at, usd = cost_of(real_run, SAME)
    _, reference_usd = cost_of(real_run, REFERENCE)
    assert at == "at c16" and usd is not None and reference_usd is not None
    cheapest = answer.split(f"; cheapest: {SAME} ($", 1)[1]
    assert cheapest.endswith(
        f"/1M output tokens at c16, {usd / reference_usd:.2f}× the reference's)."
    )
    assert numbers(cheapest)[0] == pytest.approx(usd, rel=0.006)
    assert "highest capacity" not in answer


@pytest.mark.parametrize("kind", KINDS)
def test_the_answer_picks_capacity_and_cost_among_the_candidates_that_hold_accuracy(
    capacity_run: Run,
    kind: str,
) -> None:
    """The candidate that fails on accuracy has more slots (a capacity and a cost at least
    as good, the CPU allowing); the answer names the one that holds it."""
    answer, _, _, _ = decision(capacity_run, kind)
    verdicts = {
        c: m["stats"]["verdict"]
        for c in CANDIDATES
        if (m := capacity_run.measurement(c, "verdict:gsm8k")) is not None
    }
    assert verdicts == {SAME: "matches", WORSE: "worse"}
    capacities = {m: capacity_run.measurement(m, "capacity") for m in CANDIDATES}
    assert all(c is not None for c in capacities.values())
    same = capacities[SAME]["stats"]["capacity"]  # type: ignore[index]
    (at, usd), (_, worse_usd), (_, reference_usd) = (
        cost_of(capacity_run, m) for m in (SAME, WORSE, REFERENCE)
    )
    assert usd is not None and worse_usd is not None and reference_usd is not None
    expected = (
        f"{SAME} matches {REFERENCE} on every accuracy verdict (GSM8K); not {WORSE} "
        f"(worse on GSM8K); highest capacity under the SLO: {SAME} ({same} concurrent "
        f"requests); cheapest: {SAME} ($"
    )
    assert answer.startswith(expected), answer
    cheapest = answer[len(expected) - 1 :]
    assert cheapest.endswith(
        f"/1M output tokens {at}, {usd / reference_usd:.2f}× the reference's)."
    )
    assert numbers(cheapest)[0] == pytest.approx(usd, rel=0.006)


def independent_front(points: dict[str, tuple[float, float]]) -> set[str]:
    """The models no other model beats on both axes (higher is better on both)."""
    return {
        name
        for name, (x, y) in points.items()
        if not any(
            ox >= x and oy >= y and (ox > x or oy > y)
            for other, (ox, oy) in points.items()
            if other != name
        )
    }


@pytest.mark.parametrize("kind", KINDS)
def test_the_pareto_front_is_the_undominated_models(real_run: Run, kind: str) -> None:
    _, _, _, line = decision(real_run, kind)
    points = {REFERENCE: (1.0, 0.0)}
    for candidate in CANDIDATES:
        ratio = real_run.measurement(candidate, "throughput_ratio", concurrency=16)
        verdict = real_run.measurement(candidate, "verdict:gsm8k")
        assert ratio is not None and verdict is not None
        points[candidate] = (ratio["value"], verdict["stats"]["interval"]["difference"])
    front = independent_front(points)
    assert WORSE not in front  # slower and less accurate than the reference
    assert line.startswith("Pareto front (GSM8K difference against c16 throughput ratio): ")
    named = line.split("): ", 1)[1].rstrip(".").split(", ")
    assert set(named) == front
    assert named == sorted(front, key=lambda model: points[model][0])


@pytest.mark.parametrize("kind", KINDS)
def test_without_c16_ratios_the_pareto_front_is_against_relative_cost(
    capacity_run: Run,
    kind: str,
) -> None:
    _, _, _, line = decision(capacity_run, kind)
    _, reference_usd = cost_of(capacity_run, REFERENCE)
    assert reference_usd is not None
    cost = {REFERENCE: 1.0}
    points = {REFERENCE: (-1.0, 0.0)}  # less cost is better: the front of −cost
    for candidate in CANDIDATES:
        _, usd = cost_of(capacity_run, candidate)
        verdict = capacity_run.measurement(candidate, "verdict:gsm8k")
        assert usd is not None and verdict is not None
        cost[candidate] = usd / reference_usd
        points[candidate] = (-cost[candidate], verdict["stats"]["interval"]["difference"])
    front = independent_front(points)
    assert REFERENCE not in front  # the candidate that holds its accuracy costs less
    assert line.startswith("Pareto front (GSM8K difference against relative cost): ")
    named = line.split("): ", 1)[1].rstrip(".").split(", ")
    assert set(named) == front
    assert named == sorted(front, key=lambda model: cost[model])


def pareto_svg(run: Run) -> str:
    import base64

    start = run.html.index('<section class="modelsweep" id="modelsweep-decision">')
    section = run.html[start : run.html.index("</section>", start)]
    match = re.search(
        r'<figure class="ms-plot ms-pareto"><img alt="Pareto plot[^"]*" '
        r'src="data:image/svg\+xml;base64,([^"]+)"',
        section,
    )
    assert match is not None
    return base64.b64decode(match.group(1)).decode("utf-8")


@pytest.mark.skipif(not matplotlib_available(), reason="matplotlib is not installed")
@pytest.mark.parametrize("which", ["real_run", "capacity_run"])
def test_the_pareto_plot_marks_the_front_in_the_html(
    request: pytest.FixtureRequest,
    which: str,
) -> None:
    run: Run = request.getfixturevalue(which)
    svg = pareto_svg(run)
    _, _, _, line = html_decision(run.html)
    front = line.split("): ", 1)[1].rstrip(".").split(", ")
    for model in (REFERENCE, *CANDIDATES):
        assert (f"{model} (front)" in svg or f"{model} (reference) (front)" in svg) is (
            model in front
        ), model
    assert ("Pareto front" in svg) is (len(front) > 1)  # the step line, from point to point
    assert "matches the reference on every accuracy verdict" in svg
    against = "throughput" if which == "real_run" else "cost"
    assert f"Accuracy against {against}" in svg


def test_the_page_comes_first_in_both_reports(real_run: Run) -> None:
    assert real_run.markdown.index("### Decision: which model to serve") < real_run.markdown.index(
        "### Verdicts"
    )
    page = real_run.html.index('id="modelsweep-decision"')
    assert page < real_run.html.index('id="modelsweep-summary"')
    assert page < real_run.html.index('<p class="run-count">')  # above pytest-html's counts


# --------------------------------------------------------------------------- a failed item


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_reference_item_stops_the_verdict_cell(
    failed_reference_run: Run, kind: str
) -> None:
    run = failed_reference_run
    assert not any(m["benchmark"].startswith("verdict:") for m in run.results["measurements"])
    reference = run.measurement(REFERENCE, "gsm8k")
    assert reference is not None and reference["outcome"] == "failed"
    failed_items = [i for i in reference["items"] if i["error"]]
    assert len(failed_items) == 1 and len(reference["items"]) == 6
    answer, table, reasons, _ = decision(run, kind)
    for candidate in CANDIDATES:
        cell = table[candidate]["GSM8K verdict"]
        assert cell.startswith("cannot conclude [")
        assert not any(word in cell for word in (*HOLDS, "worse", "inconclusive"))
        why = reason_of(cell, reasons)
        assert f"1 of 6 gsm8k items of the reference {REFERENCE} failed" in why
        assert "HTTP 500" in why
        assert "GSM8K difference [95% interval]" not in table[candidate]  # said once
        assert "cannot conclude (GSM8K vs reference)" in table[candidate]["flags"]
    assert "failed items (gsm8k 1 of 6)" in table[REFERENCE]["flags"]
    assert table[REFERENCE]["GSM8K difference [95% interval]"].startswith("cannot conclude [")
    # the candidate whose server was not there recorded nothing: no row, but named
    assert UNREACHABLE not in table
    unplaced = [f for f in failed_tests(run) if f"[{UNREACHABLE}" in f]
    assert unplaced
    assert (
        re.search(
            rf"Not in the table: {len(unplaced)} failed tests of models that recorded "
            rf"nothing: test_accuracy\.py::test_gsm8k\[{UNREACHABLE}\]: ",
            decision_text(run, kind),
        )
        is not None
    )
    assert answer.startswith(
        f"No answer: no candidate matches {REFERENCE} on every accuracy verdict (GSM8K): "
    )
    for candidate in CANDIDATES:
        said = re.search(rf"{candidate} cannot conclude on GSM8K (\[\d+\])", answer)
        assert said is not None
        assert "items of the reference" in reason_of(said.group(1), reasons)


# --------------------------------------------------------------------------- README's main job


PARETO_SHOWN = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const img = document.querySelector("#modelsweep-decision figure.ms-pareto img");
  document.title = "pareto " + (img ? img.naturalWidth + " " + img.naturalHeight : "none");
}, 100));
</script>"""
"""Appended to a copy of a report: once laid out, the title says how large the browser drew
the decision page's Pareto plot."""


def test_the_main_job_measured_throughput_at_c4_only(main_job_run: Run) -> None:
    """README's main job's selection: BFCL and its verdicts, throughput and ratios at c4."""
    run = main_job_run
    measured = {
        (m["benchmark"], m["params"].get("concurrency"))
        for m in run.results["measurements"]
        if m["benchmark"] in ("throughput", "throughput_ratio")
    }
    assert measured == {("throughput", 4), ("throughput_ratio", 4)}, measured
    assert not any(m["benchmark"] in ("gsm8k", "capacity") for m in run.results["measurements"])
    for candidate in CANDIDATES:
        assert run.measurement(candidate, "verdict:bfcl") is not None
    priced(run, 1.20)


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_measured_at_c4_is_compared_priced_and_plotted_at_c4(
    main_job_run: Run,
    kind: str,
) -> None:
    """The page compares at the highest concurrency both sides were measured at: its answer
    names each candidate's output rate against the reference's at c4, its cells are the c4
    ratios and costs, and the Pareto front is against the c4 ratio."""
    run = main_job_run
    check_throughput_cells(run, kind, concurrency=4)
    answer, table, _, pareto = decision(run, kind)
    ratios = {}
    for candidate in CANDIDATES:
        ratio = run.measurement(candidate, "throughput_ratio", concurrency=4)
        assert ratio is not None
        ratios[candidate] = ratio["value"]
    holding = sorted(
        c
        for c in CANDIDATES
        if (m := run.measurement(c, "verdict:bfcl")) is not None and m["stats"]["verdict"] in HOLDS
    )  # the page's order
    assert holding, answer
    assert f" {REFERENCE} on " in answer, answer
    assert output_rates_said(run, holding, 4) in answer, answer
    assert "no capacity, cost or" not in answer and "c16" not in answer
    assert "cheapest: " in answer and "/1M output tokens at c4" in answer, answer
    for model, row in table.items():
        assert row[COST].split("\n")[0].endswith(" at c4"), (model, row[COST])
    assert pareto.startswith("Pareto front (BFCL difference against c4 throughput ratio): "), pareto
    points = {REFERENCE: (1.0, 0.0)}
    for candidate in CANDIDATES:
        verdict = run.measurement(candidate, "verdict:bfcl")
        assert verdict is not None
        points[candidate] = (ratios[candidate], verdict["stats"]["interval"]["difference"])
    named = pareto.split("): ", 1)[1].rstrip(".").split(", ")
    assert set(named) == independent_front(points)
    assert "ratio: candidate ÷ reference output tokens/s at 4 concurrent requests" in notes_line(
        run, kind
    )


@pytest.mark.skipif(not matplotlib_available(), reason="matplotlib is not installed")
def test_a_run_measured_at_c4_draws_its_pareto_plot_in_a_browser(
    main_job_run: Run,
    tmp_path: Path,
) -> None:
    """The Pareto plot of a run measured at c4 is in the HTML, and a real Chromium draws it
    under the answer that names the c4 output rates."""
    svg = pareto_svg(main_job_run)
    assert "Accuracy against throughput" in svg and "throughput at c4" in svg
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed (apt-get install -y chromium): the rendered "
            "page is not checked"
        )
    copy = tmp_path / "r.html"
    copy.write_text(
        main_job_run.html.replace("</body>", PARETO_SHOWN + "</body>"), encoding="utf-8"
    )
    page = parse(chromium(copy, tmp_path / "profile", "--window-size=1400,2000", "--dump-dom"))
    words = page.title.split()
    assert words[0] == "pareto" and len(words) == 3, page.title
    assert int(words[1]) > 100 and int(words[2]) > 100, page.title
    assert (
        "its output rate at c4" in page.decision_answer
        or f"output rate vs {REFERENCE} not decided" in page.decision_answer
    ), page.decision_answer


def test_a_measurements_details_list_its_benchmarks_own_figures(real_run: Run) -> None:
    """GSM8K's strict and flexible figures stand beside the record's in the details, as in the
    results of schema 2; no unset field (an accuracy run without ``--until-decided``) shows."""
    from pytest_modelsweep.core.measurements import measurements_of
    from pytest_modelsweep.report.html import measurement_html

    found = real_run.measurement(REFERENCE, "gsm8k")
    assert found is not None
    (measurement,) = measurements_of([found])
    details = measurement_html(measurement)
    assert "<dt>strict_match_accuracy</dt>" in details
    assert "<dt>flexible_extract_accuracy</dt>" in details
    assert "<dt>figures</dt>" not in details and "<dt>sequence</dt>" not in details
