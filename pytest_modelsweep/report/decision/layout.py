"""The decision table's layout, as the Markdown and HTML reports draw it: its columns (an
accuracy column holds every benchmark's group), each cell's lines, the lines under it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .page import ACCURACY_BLOCK, DASH, REFERENCE, Cell, Column, DecisionPage, DecisionRow


def pareto_line(page: DecisionPage) -> str:
    """One line naming the Pareto front, or why there is no plot (both reports show it)."""
    if isinstance(page.pareto, str):
        return f"No Pareto plot: {page.pareto}."
    return (
        f"Pareto front ({page.pareto.y_name} against {page.pareto.x_name}): "
        + ", ".join(page.pareto.front)
        + ("; not plotted: " + "; ".join(page.pareto.left_out) if page.pareto.left_out else "")
        + "."
    )


def unplaced_line(page: DecisionPage) -> str:
    """The failed tests of models without a row, in one line ("" if none)."""
    count = len(page.unplaced)
    return (
        (
            f"Not in the table: {count} failed test{'s' if count != 1 else ''} of models that "
            "recorded nothing: "
            + "; ".join(page.unplaced[:3])
            + (f"; and {count - 3} more" if count > 3 else "")
            + "."
        )
        if count
        else ""
    )


def unmeasured_line(page: DecisionPage) -> str:
    """``Not measured for any model: capacity under the SLO [1]; cost [2].`` ("" if none)."""
    return (
        "Not measured for any model: "
        + "; ".join(
            f"{group} {' '.join(f'[{n}]' for n in notes)}".strip()
            for group, notes in page.unmeasured
        )
        + "."
        if page.unmeasured
        else ""
    )


@dataclass(frozen=True)
class Line:
    """A line of a table cell: ``label`` (the benchmark, where a column holds several
    groups; else "") and the parts on it."""

    label: str
    parts: tuple[tuple[Column, Cell], ...]


@dataclass(frozen=True)
class Block:
    """A column of the table: one group, or several (every accuracy benchmark's), each with
    its parts (the index of the part's cell in a row, its column)."""

    title: str
    groups: tuple[tuple[str, tuple[tuple[int, Column], ...]], ...]

    @property
    def parts(self) -> str:
        """What its lines hold, in a few words: ``verdict · ratio [95% interval]``."""
        return " · ".join(
            (["benchmark"] if self.several else []) + [c.name for _, c in self.groups[0][1]]
        )

    @property
    def several(self) -> bool:
        return len(self.groups) > 1 or self.title == ACCURACY_BLOCK


def table_columns(page: DecisionPage) -> list[Block]:
    """The table's columns, in order: every accuracy group in one, each other group in one."""
    found: dict[str, dict[str, list[tuple[int, Column]]]] = {}
    for i, column in enumerate(page.columns):
        found.setdefault(column.block or column.group, {}).setdefault(column.group, []).append(
            (i, column)
        )
    return [
        Block(title, tuple((group, tuple(parts)) for group, parts in groups.items()))
        for title, groups in found.items()
    ]


def _shown(parts: list[tuple[Column, Cell]], reference: bool) -> tuple[tuple[Column, Cell], ...]:
    """A group's parts as shown: without the reference row's placeholders, and a dash that
    points to the same line as another part shown once, by that part."""
    cells = [(c, cell) for c, cell in parts if not (reference and cell.text == REFERENCE)]
    kept: list[tuple[Column, Cell]] = []
    for column, cell in cells:
        if not (  # a dash repeating another part's note
            cell.text == DASH
            and cell.note is not None
            and (
                any(other.note == cell.note and other.text != DASH for _, other in cells)
                or any(other.note == cell.note for _, other in kept)
            )
        ):
            kept.append((column, cell))
    return tuple(kept)


def cell_lines(block: Block, row: DecisionRow) -> list[Line]:
    """``row``'s cell in ``block``: a line per group (its label, then its parts) in a column
    of several groups, else a line per part."""
    return [
        line
        for group, columns in block.groups
        for parts in [_shown([(c, row.cells[i]) for i, c in columns], row.is_reference)]
        for line in (
            [Line(group.removesuffix(" vs reference"), parts)]
            if block.several
            else [Line("", (part,)) for part in parts]
        )
    ]


def figure_lines(page: DecisionPage) -> list[str]:
    """The figures cells show in their tooltip only: ``qwen3-4b, capacity: at c3: ...``."""
    return [
        f"{row.model}, {column.title}: {cell.tip}"
        for row in page.rows
        for block in table_columns(page)
        for line in cell_lines(block, row)
        for column, cell in line.parts
        if cell.tip
    ]
