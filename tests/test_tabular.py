"""The one table type (``uwbench.tabular``): the number format, the file-name form of a title, and a table
written as Markdown (aligned and compact), plain text, CSV rows and LaTeX."""
from __future__ import annotations

import math

from uwbench.tabular import (Table, fmt, latex_escape, slug, to_compact_markdown, to_csv_rows, to_latex, to_markdown,
                             to_text)


def test_fmt_fixed_decimals_a_sign_when_asked_never_minus_zero_and_nothing_for_a_missing_value():
    assert fmt(3.14159) == "3.1" and fmt(3.14159, 3) == "3.142" and fmt(2) == "2.0"
    assert fmt(-0.04) == "0.0" and fmt(-0.04, sign=True) == "0.0"  # rounds to zero: no '-0.0', no '+'
    assert fmt(1.26, sign=True) == "+1.3" and fmt(-1.26, sign=True) == "-1.3"
    assert fmt(None) == "" and fmt(math.nan) == "" and fmt("0.5") == ""  # text is not a number


def test_slug_is_lower_case_with_runs_of_other_characters_as_one_dash():
    assert slug("Table 1: Copy (T=50)") == "table-1-copy-t-50"
    assert slug("  DNC+UW  ") == "dnc-uw"
    assert slug("±") == "x"  # nothing left: still a name


def table() -> Table:
    return Table(title="Copy 50%", columns=["model", "accuracy", "note"],
                 rows=[["DNC", "99.7", "a|b"], ["DNC+UW", "not run", "two\nlines"], ["NTM", "−1.5", "x"]],
                 csv_columns=["model", "accuracy"], csv_rows=[["DNC", 0.997], ["DNC+UW", None], ["NTM", -0.015]])


def test_markdown_right_aligns_number_columns_and_escapes_cells():
    assert to_markdown(table()) == (
        "| model  | accuracy | note      |\n"
        "| :----- | -------: | :-------- |\n"
        "| DNC    |     99.7 | a\\|b      |\n"
        "| DNC+UW |  not run | two lines |\n"
        "| NTM    |     −1.5 | x         |\n")


def test_compact_markdown_text_and_csv_rows():
    t = table()
    assert to_compact_markdown(t, "lrc") == ["| model | accuracy | note |", "|---|---:|:-:|",
                                              "| DNC | 99.7 | a|b |", "| DNC+UW | not run | two\nlines |",
                                              "| NTM | −1.5 | x |"]
    assert to_text(t, "{0:<7}{1:>9}")[:2] == ["model   accuracy", "DNC         99.7"]
    assert to_csv_rows(t) == (["model", "accuracy"], [["DNC", 0.997], ["DNC+UW", None], ["NTM", -0.015]])
    plain = Table(title="t", columns=["a"], rows=[["1"]])
    assert to_csv_rows(plain) == (["a"], [["1"]])  # no numeric form: the text


def test_latex_escapes_specials_and_symbols_and_writes_group_headers():
    assert latex_escape("50% & $x_1$ ± 2 − 1 × 3 {#}") == (
        r"50\% \& \$x\_1\$ $\pm$ 2 $-$ 1 $\times$ 3 \{\#\}")
    grouped = Table(title="Table 1 (T=50)", columns=["task", "ours", "paper", "ours", "paper"],
                    rows=[["copy", "99.7 ± 0.2", "100", "—", "98"]], groups=[("", 1), ("DNC", 2), ("DNC+UW", 2)])
    assert to_latex(grouped) == "\n".join([
        "% Table 1 (T=50)",
        r"\begin{tabular}{lrrrr}",
        r"\toprule",
        r" & \multicolumn{2}{c}{DNC} & \multicolumn{2}{c}{DNC+UW} \\",
        r"\cmidrule(lr){2-3} \cmidrule(lr){4-5}",
        r"task & ours & paper & ours & paper \\",
        r"\midrule",
        r"copy & 99.7 $\pm$ 0.2 & 100 & --- & 98 \\",
        r"\bottomrule",
        r"\end{tabular}"]) + "\n"
    flat = to_latex(Table(title="t", columns=["a_b", "c"], rows=[["1", "2"]]))
    assert flat.splitlines()[1:4] == [r"\begin{tabular}{lr}", r"\toprule", r"a\_b & c \\"]
