"""docs/results/exact_gram.md's table recomputes from its committed per-run rows
(docs/results/exact_gram_runs.json: each run's summary.json diagnostics, results table and
phase times)."""
import json
import os

import markdown_docs

PAGE = os.path.join(markdown_docs.ROOT, "docs", "results", "exact_gram.md")
ROWS = os.path.join(markdown_docs.ROOT, "docs", "results", "exact_gram_runs.json")


def _score(row):
  """'mean (low, high)' of a results-table row, the mean recomputed from its episode scores."""
  mean = sum(row["scores"]) / len(row["scores"])
  assert abs(mean - row["mean"]) < 1e-9
  return f"{mean:.1f} ({row['ci_low']:.1f}, {row['ci_high']:.1f})"


def test_the_pages_table_recomputes_from_the_runs_rows():
  runs = json.load(open(ROWS))
  table = markdown_docs.table_after(PAGE, "E's m_0")
  rows = {r[0]: r for r in table[1:]}
  for name, label in (("exact", "E (exact)"), ("default", "R (default)")):
    run, row = runs[name], rows[label]
    d = run["diagnostics"]
    policies = {r["policy"]: r for r in run["results_table"]}
    expected = [label, f"{d['count_auc_random_policy']:.3f}",
                f"{d['count_auc_shuffled_pixels']:.3f}", f"{d['family_differs_any']:.3f}",
                f"{d['lemma1_fraction']:.2f}", f"{d['v_above_value_max_fraction']:.2f}",
                f"{_score(policies['Fixed-CCVL'])}, {run['fixed_delta']}",
                _score(policies["CCVL (adaptive)"]),
                f"{run['phase_seconds']['total']:,.0f} s "
                f"({run['phase_seconds']['training']:,.0f} s)"]
    assert row == expected, (row, expected)
  assert runs["exact"]["flags"] == {"count_gram": "exact", "count_normalization": "none",
                                    "count_gram_states": 10000}
  assert runs["default"]["flags"] == {}
