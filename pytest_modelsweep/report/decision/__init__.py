"""The decision page: one row per candidate with the figures that decide which model to serve.

A cell shows a figure only when the measurement behind it succeeded; otherwise a word with
a note (``[n]``) to a line saying why. The answer and the Pareto points come from concluded
cells only. Layout and wording: docs/decision-page.md. Pure.

Read in this order: :mod:`.page` (what a page holds), :mod:`.reading` (what the run holds
for it), :mod:`.cells`, :mod:`.answer`, :mod:`.build` (the page of a run), :mod:`.layout`
(how the reports draw its table).
"""

from .build import decision_page
from .page import DecisionPage

__all__ = ["DecisionPage", "decision_page"]
