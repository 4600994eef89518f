"""README's table "The paper's claims here" states no figure of its own: every measured figure
in a row (a number with a decimal point: a score, a CI bound, a probability, a coverage) is one
that the results pages the row links to state, and those pages' tables are recomputed from
their committed rows by tests/test_results_tables.py and the page tests. A changed result is
then changed on its page first, and a stale copy on the front page fails here."""
import os
import re

import markdown_docs as md

README = os.path.join(md.ROOT, "README.md")
CLAIMS = ["Lemma 1", "Theorem 1", "Theorem 2", "Fig. 1 left", "Fig. 1 right", "Fig. 2",
          "Table 2's ordering", "CCVL over Fixed-CCVL", "Table 6"]
FIGURE = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.]*\d)")
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def _words(path):
  return " ".join(open(path, encoding="utf-8").read().split())


def claims_rows():
  return md.table_after(README, "## The paper's claims here")


def test_one_row_per_claim_each_linking_a_results_page():
  rows = claims_rows()
  assert rows[0] == ["claim (paper)", "measured here (scale)", "verdict", "page"]
  assert [next(c for c in CLAIMS if r[0].startswith(c)) for r in rows[1:]] == CLAIMS
  for row in rows[1:]:
    pages = LINK.findall(row[3])
    assert pages and all(p.startswith("docs/results/") for p in pages), row[0]


def test_every_figure_of_the_claims_table_is_stated_on_its_linked_page():
  missing = []
  for row in claims_rows()[1:]:
    texts = [_words(os.path.join(md.ROOT, p)) for p in LINK.findall(row[3])]
    for figure in FIGURE.findall(row[1]):
      # the figure as a token of the page: not a piece of a longer number
      token = re.compile(r"(?<![\d.])" + re.escape(figure) + r"(?![\d])")
      if not any(token.search(t) for t in texts):
        missing.append(f"{row[0][:30]}: {figure}")
  assert not missing, "figures the linked results pages do not state: " + "; ".join(missing)


def test_the_figure_reader_finds_decimals_and_leaves_integers(tmp_path):
  assert FIGURE.findall("0.825-0.992 against 49.5, +48.0 [-17.4, +164.7]; 3 seeds, 20,000 "
                        "steps, Fig. 1") == ["0.825", "0.992", "49.5", "+48.0", "-17.4",
                                             "+164.7"]
