"""``tables.tex``: the report's tables as booktabs LaTeX, ready to ``\\input``.

Every cell is escaped (``& % $ # _ { } ~ ^ \\``); BFCL's ``->`` becomes an
arrow and the few non-ASCII symbols the tables use become LaTeX commands, so
the file compiles with pdflatex. Needs ``booktabs`` and ``graphicx`` (wide
tables are scaled to the line width).
"""

from __future__ import annotations

from promptgrid.display import escape_controls

from ._model import ReportData
from ._tables import (
    Table,
    accuracy_table,
    baseline_tables,
    category_table,
    cost_table,
    effects_tables,
    endpoint_table,
    failure_tables,
    format_tax_table,
    language_match_table,
    language_summary_table,
    mode_failure_tables,
    parse_share_table,
    pass_k_table,
    results_table,
    sensitivity_table,
    translation_tables,
    unsupported_table,
)

__all__ = ["latex_escape", "latex_tables"]

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "–": "--",
    "α": r"$\alpha$",
    "·": r"$\cdot$",
    "±": r"$\pm$",
}


def latex_escape(text: str) -> str:
    """Escape text for LaTeX (``->`` becomes a right arrow); a control character becomes its visible escape
    first (``\\x1b``, whose backslash is then escaped), so none reaches the file raw."""
    parts = escape_controls(text).split("->")
    return r"$\rightarrow$".join("".join(_SPECIAL.get(ch, ch) for ch in part) for part in parts)


def _tabular(t: Table) -> str:
    spec = "".join("r" if n else "l" for n in t.numeric)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\small",
        rf"\caption{{{latex_escape(t.title)}}}",
        rf"\label{{tab:promptgrid-{t.key}}}",
    ]
    wide = len(t.headers) > 6
    if wide:
        lines.append(r"\resizebox{\linewidth}{!}{%")
    lines += [
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in t.headers) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in t.rows]
    lines += [r"\bottomrule", r"\end{tabular}" + ("}" if wide else "")]
    if t.note:
        lines += [r"\par\smallskip", rf"{{\footnotesize {latex_escape(t.note)}\par}}"]
    lines.append(r"\end{table}")
    return "\n".join(lines)


def latex_tables(data: ReportData) -> str:
    tables = [accuracy_table(data), sensitivity_table(data)]
    if data.category_cells:
        tables.append(category_table(data))
    tables += effects_tables(data)
    if data.format_tax:
        tables.append(format_tax_table(data))
    if data.parse_shares:
        tables.append(parse_share_table(data))
    if data.unsupported:
        tables.append(unsupported_table(data))
    tables += baseline_tables(data)
    if data.language_summaries:
        tables.append(language_summary_table(data))
    tables += translation_tables(data)
    if data.language_match:
        tables.append(language_match_table(data))
    if data.pass_k:
        tables.append(pass_k_table(data))
    tables += failure_tables(data) + mode_failure_tables(data)
    endpoints = endpoint_table(data)
    tables += [cost_table(data), *([endpoints] if endpoints is not None else []), results_table(data)]
    head = [
        "% promptgrid format-sensitivity tables (generated; do not edit).",
        "% Requires \\usepackage{booktabs} and \\usepackage{graphicx}.",
        "",
    ]
    return "\n".join(head) + "\n\n".join(_tabular(t) for t in tables) + "\n"
