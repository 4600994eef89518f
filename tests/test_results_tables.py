"""The results tables recompute from their committed per-run rows (CSVs under docs/) with the
project's own aggregation code, so a table and its rows cannot drift apart.

Each test reads a committed CSV with the reader of the tool that wrote it, aggregates it with
that tool's code (rliable IQM and stratified bootstrap, seeded, 2,000 resamples, as the reported
tables) and compares cell by cell with the table as the results index (docs/results/README.md)
and the experiment's page print it. The front page (README.md) quotes the results pages: its
main job's table is recomputed here, and every figure of its claims table must be one its
linked results pages state.
The peer comparison's numbers (tools/peers) are checked the same way against its committed
episodes. Tables with no committed rows (the asynchronous fine-tuning rerun's) are not here:
their docs say so.
"""
import csv
import json
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.evaluation import score_stats
from ccvl_tf.evaluation import reporting
from ccvl_tf.experiments.compare import alpha_sweep_report
from ccvl_tf.experiments.compare import report as compare_report
from ccvl_tf.experiments.gridworld import runner as gridworld_runner
import markdown_docs

ROOT = markdown_docs.ROOT
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
RESULTS = os.path.join(DOCS, "results", "README.md")  # the results index
REPS = 2000  # the reported tables' bootstrap resamples

pytestmark = pytest.mark.slow  # ~40 s of CPU in rliable's bootstraps in all


def _doc(*parts):
  return os.path.join(DOCS, *parts)


@pytest.fixture(scope="module")
def method_rows():
  return compare_report.read_scores_csv(_doc("method_table_rows_minatar.csv"))


@pytest.fixture(scope="module")
def method_aggregates(method_rows):
  return compare_report.aggregate(method_rows, reps=REPS)


def _iqm_table(rows_from_doc, aggregates):
  """The Table-2 cells reporting.iqm_table_lines prints for the doc table's datasets and
  methods (its first row is the header)."""
  header, body = rows_from_doc[0], rows_from_doc[1:]
  lines = reporting.iqm_table_lines([r[0] for r in body], header[1:], aggregates)
  return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]


def test_method_table_page_recomputes_from_its_rows(method_rows, method_aggregates):
  page = _doc("results", "method_table.md")
  doc = markdown_docs.table_after(page, "### Result (2026-11-26 22:33-23:47 UTC)")
  assert doc[0][0] == "Data (5 games)"
  assert doc[1:] == _iqm_table([["Data"] + doc[0][1:]] + doc[1:], method_aggregates)
  # Per game: compare's per-game table (normalized mean ± sample std over the seeds), with the
  # page's "dataset, game" rows and "+-".
  per_game = markdown_docs.table_after(page, "#### Per game (normalized, mean +- std")
  expected = []
  for dataset in ("1%", "5%", "Initial 10%"):
    lines = compare_report.per_game_table(method_rows, dataset, "minatar").strip().split("\n")
    assert lines[0].split("|")[2:-1] == [f" {m} " for m in per_game[0][1:]]
    for line in lines[2:]:
      cells = [c.strip().replace("±", "+-") for c in line.strip().strip("|").split("|")]
      expected.append([f"{dataset}, {cells[0]}"] + cells[1:])
  assert sorted(per_game[1:]) == sorted(expected)
  assert len(expected) == 15
  # Adaptive vs fixed delta: the runs, the mean difference and P(CCVL > Fixed-CCVL) (the index
  # quotes the P range), and in the last column the same without Freeway.
  doc = markdown_docs.table_after(page, "Does adapting delta help?")
  every = [[c.strip() for c in line.strip().strip("|").split("|")]
           for line in compare_report.adaptive_vs_fixed_lines(method_rows, reps=REPS)[2:]]
  assert [r[:5] for r in doc[1:]] == every
  without = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in compare_report.adaptive_vs_fixed_lines(
                 [r for r in method_rows if r["game"] != "Freeway"], reps=REPS)[2:]]
  assert [r[5] for r in doc[1:]] == [f"{w[2]}, {w[3]}, {w[4]}" for w in without]


def test_method_table_behaviour_tables_recompute_from_their_rows(method_rows, tmp_path):
  """"Did the learners learn their data?": its three tables are
  tools/minatar_behaviour_table.py's output for the committed per-run rows and the committed
  behaviour scores (the datasets themselves are not needed)."""
  from tools import minatar_behaviour_table as tool  # pylint: disable=g-import-not-at-top
  behaviour = tool.read_behaviour_csv(_doc("method_table_behaviour_minatar.csv"))
  out = tmp_path / "behaviour.md"
  out.write_text(tool.render(method_rows, behaviour, ["BC", "CQL", "Fixed-CCVL", "CCVL"],
                             ["1%", "5%"], "committed rows"))
  page = _doc("results", "method_table.md")
  for doc_marker, tool_marker in [
      ("Behaviour scores ([method_table_behaviour_minatar.csv]",
       "Behaviour policy's score of each subset"),
      ("Learners against their data's behaviour score", "Learners (raw points"),
      ("How many reach it (learner x game x data cells", "Counts:")]:
    assert (markdown_docs.table_after(page, doc_marker)
            == markdown_docs.table_after(str(out), tool_marker)), doc_marker


def test_minatar_budget_tables_recompute_from_their_rows(tmp_path):
  """docs/results/minatar_budget.md: the counts per learner, rate and budget, and each learner's
  cells, are tools/minatar_budget_report.py's output for the committed rows and behaviour scores;
  the choice the page states is the rule's on them, and docs/minatar_budget.md's table command
  runs with it."""
  from tools import minatar_behaviour_table as behaviour_tool  # pylint: disable=g-import-not-at-top
  from tools import minatar_budget_report as tool  # pylint: disable=g-import-not-at-top
  rows = tool.read_rows(_doc("minatar_budget_rows.csv"))
  behaviour = behaviour_tool.read_behaviour_csv(_doc("minatar_budget_behaviour.csv"))
  out = tmp_path / "budget.md"
  out.write_text(tool.render(rows, behaviour))
  page = _doc("results", "minatar_budget.md")
  markers = ["Cells reaching their data's behaviour score"] + [
      f"{learner} at lr {lr}, mean raw score" for learner in ("BC", "CQL")
      for lr in ("0.00025", "0.001")]
  for marker in markers:
    assert (markdown_docs.table_after(page, marker)
            == markdown_docs.table_after(str(out), marker)), marker
  choice = tool.choose(tool.reached(rows, behaviour))
  assert (choice["budget"], choice["bc_lr"], choice["cql_lr"], choice["qualified"],
          choice["one_pct_too_small"]) == (20000, 1e-3, 1e-3, False, False)
  text = open(page).read()
  assert "the budget is **20,000 steps (batch 32) with BC" in " ".join(text.split())
  assert "--num_steps=20000 --learning_rate=1e-3" in open(_doc("minatar_budget.md")).read()


def _sweep_rows(kind):
  return alpha_sweep_report.read_rows_csv(_doc(f"alpha_sweep_rows_{kind}.csv"))


# The results index's alpha-sweep rows: (data, method as printed) -> (rows file, method in it). The
# later readings' rows (the monotone delta head, then the bonus) are sweeps of their own.
SWEEP_TABLE = {
    ("5%", "CQL"): ("5pct", "CQL"), ("5%", "CCVL"): ("5pct", "CCVL"),
    ("5%", "Fixed-CCVL"): ("5pct", "Fixed-CCVL"), ("1%", "CQL"): ("1pct", "CQL"),
    ("1%", "CCVL"): ("1pct", "CCVL"), ("1%", "Fixed-CCVL"): ("1pct", "Fixed-CCVL"),
    ("1%", "CCVL, previous default reading (monotone head)"): ("1pct_monotone", "CCVL"),
    ("1%", "Fixed-CCVL, previous default reading"): ("1pct_monotone", "Fixed-CCVL"),
    ("1%", "CCVL, default reading `bonus`"): ("1pct_bonus", "CCVL"),
    ("1%", "Fixed-CCVL, default reading `bonus`"): ("1pct_bonus", "Fixed-CCVL"),
    ("1% (rebuilt)", "CQL"): ("1pct_algorithm1", "CQL"),
    ("1% (rebuilt)", "CCVL, reading `algorithm1`, monotone head"): ("1pct_algorithm1", "CCVL"),
    ("1% (rebuilt)", "Fixed-CCVL, reading `algorithm1`, monotone head"): ("1pct_algorithm1",
                                                                        "Fixed-CCVL"),
    ("1% (rebuilt)", "CCVL, default (`algorithm1`, cosine-embedding head)"): (
        "1pct_cosine_monotone", "CCVL"),
    ("1% (rebuilt)", "Fixed-CCVL, default (cosine-embedding head)"): (
        "1pct_cosine_monotone", "Fixed-CCVL"),
}


def test_results_index_alpha_sweep_table_recomputes_from_its_rows():
  doc = markdown_docs.table_after(RESULTS, "**The alpha sweep**")
  assert doc[0] == ["Data", "method", "range over alpha [95% CI]", "worst / best"]
  assert [tuple(r[:2]) for r in doc[1:]] == list(SWEEP_TABLE)
  rows = {kind: _sweep_rows(kind) for kind, _ in set(SWEEP_TABLE.values())}
  for data, printed, range_cell, ratio_cell in doc[1:]:
    kind, method = SWEEP_TABLE[(data, printed)]
    f = alpha_sweep_report.flatness(rows[kind], method, data.split(" ")[0], reps=REPS)
    assert range_cell == f"{f['range']:.1f} [{f['range_ci'][0]:.1f}, {f['range_ci'][1]:.1f}]"
    assert ratio_cell == f"{f['ratio']:.2f}"


def test_results_index_alpha_sweep_sentence_without_the_smallest_alpha():
  """The results index's sentence on what the "1%" reading turns on: the point estimates over the alphas
  without 0.03."""
  rows = _sweep_rows("1pct")
  rest = [0.1, 0.3, 1.0, 3.0, 10.0]
  f = {m: alpha_sweep_report.flatness(rows, m, "1%", alphas=rest, reps=1)
       for m in ("CQL", "CCVL")}
  text = open(RESULTS, encoding="utf-8").read()
  expected = (f"without it CCVL's range is {f['CCVL']['range']:.1f} against CQL's "
              f"{f['CQL']['range']:.1f} (worst / best {f['CCVL']['ratio']:.2f} against "
              f"{f['CQL']['ratio']:.2f})")
  assert expected in " ".join(text.split())


def _gridworld_rows(name="gridworld_rows.csv"):
  """gridworld_rows.csv (or another sweep's rows) as the runner's sweep rows (method, reading,
  alpha, seed, return)."""
  with open(_doc(name), newline="") as f:
    return [(r["method"], r["reading"], float(r["alpha"]), int(r["seed"]),
             float(r["normalized_return"])) for r in csv.DictReader(f)]


# The results index's gridworld rows -> the runner's method labels (runner.method_label).
GRIDWORLD_NAMES = {
    "CQL": "CQL",
    "CCVL (adaptive; default reading `bonus`)": "CCVL [bonus]",
    "CCVL (regularized, adaptive; reading `logsumexp+monotone`, the previous default)":
        "CCVL [logsumexp+monotone]",
    "CCVL (regularized, adaptive; reading `logsumexp`, before)": "CCVL [logsumexp]",
    "CCVL-bonus": "CCVL-bonus"}


def test_results_index_gridworld_table_recomputes_from_its_rows():
  rows = _gridworld_rows()
  doc = markdown_docs.table_after(RESULTS,
                                  "**The gridworld of Fig. 1-2 on the layout `long_favoured`**")
  alphas = [float(h.split("=")[1]) for h in doc[0][1:]]
  stats = gridworld_runner.sweep_stats(rows, set(alphas))
  assert len(doc) == 1 + len(GRIDWORLD_NAMES)
  for row in doc[1:]:
    method = GRIDWORLD_NAMES[row[0]]
    assert row[1:] == [f"{stats[method][f'{a:g}']['mean']:.3f}" for a in alphas]
    assert all(stats[method][f"{a:g}"]["n"] == 10 for a in alphas)
  # The page's printed table: every method and alpha, mean +- std over the 10 seeds.
  _assert_printed_sweep(rows, "## The layout long_favoured: what it printed")


def _assert_printed_sweep(rows, section):
  """The gridworld page's printed sweep table in `section`: every method and alpha, mean +-
  std over the seeds of `rows`."""
  page = markdown_docs.table_after(_doc("results", "gridworld.md"),
                                   "Normalized return at p = 0.15 (mean +- std over seeds)",
                                   after=section)
  alphas = [float(h.split("=")[1]) for h in page[0][1:]]
  stats = gridworld_runner.sweep_stats(rows, set(alphas))
  assert len(page) == 1 + len(stats)
  for row in page[1:]:
    assert row[1:] == [f"{stats[row[0]][f'{a:g}']['mean']:.3f} +- "
                       f"{stats[row[0]][f'{a:g}']['std']:.3f}" for a in alphas]


def test_the_full_fig1_printout_recomputes_from_its_rows():
  """The full `make gridworld` on the layout fig1: its printed table from its committed rows
  (10 datasets per method and alpha), and the page's sentence on bonus+logsumexp's Fixed-CCVL
  against CQL at alpha 0.1-0.5."""
  rows = _gridworld_rows("gridworld_fig1_full_alpha_sweep.csv")
  _assert_printed_sweep(rows, "### The full `make gridworld` on fig1")
  stats = gridworld_runner.sweep_stats(rows, {0.1, 0.2, 0.5})
  fixed = [stats["Fixed-CCVL [bonus+logsumexp]"][a]["mean"] for a in ("0.1", "0.2", "0.5")]
  cql = [stats["CQL"][a]["mean"] for a in ("0.1", "0.2", "0.5")]
  assert (f"{min(fixed):.3f}-{max(fixed):.3f}", f"{min(cql):.3f}-{max(cql):.3f}") == (
      "0.920-0.992", "0.747-0.801")
  assert all(stats[m][a]["n"] == 10 for m in stats for a in ("0.1", "0.2", "0.5"))


def test_the_bonus_logsumexp_cis_on_fig1_recompute_from_the_printouts_rows():
  """docs/results/gridworld.md's two tables of the reading bonus+logsumexp on fig1: the means
  with their bootstrap CIs and the paired differences with CQL, from the full printout's
  committed rows (fig1_report.sweep_table, paired_table)."""
  from ccvl_tf.experiments.gridworld import fig1_report
  rows = [r for r in fig1_report.read_rows(_doc("gridworld_fig1_full_alpha_sweep.csv"))
          if r["method"] in ("CQL", "Fixed-CCVL", "CCVL")
          and r["reading"] in ("", "bonus+logsumexp")]
  page = open(_doc("results", "gridworld.md"), encoding="utf-8").read()
  for lines in (fig1_report.sweep_table(rows, [], [], ["bonus+logsumexp"]),
                fig1_report.paired_table(rows, "bonus+logsumexp")):
    assert "```\n" + "\n".join(lines) + "\n```" in page


def test_the_gridworld_reading_choice_recomputes_from_its_development_rows():
  """docs/gridworld_reading.md: its paired tables from the committed development rows
  (datasets 100-109), the rule's verdict (fig1_report.reading_choice) and that the verdict is
  the gridworld's default reading (family.GRIDWORLD_READING)."""
  from ccvl_tf.experiments.gridworld import family
  from ccvl_tf.experiments.gridworld import fig1_report
  rows = fig1_report.read_rows(_doc("gridworld_reading_dev_sweep.csv"))
  assert sorted({int(r["seed"]) for r in rows}) == list(range(100, 110))
  page = open(_doc("gridworld_reading.md"), encoding="utf-8").read()
  for reading in fig1_report.CHOICE_ORDER:
    assert "```\n" + "\n".join(fig1_report.paired_table(rows, reading)) + "\n```" in page
  choice, info = fig1_report.reading_choice(rows)
  assert choice == family.GRIDWORLD_READING == "bonus+logsumexp"
  assert [r for r in fig1_report.CHOICE_ORDER if info[r]["qualifies"]] == ["bonus+logsumexp"]
  assert f"**By the rule, the gridworld's default reading becomes `{choice}`**" in page


def test_the_default_readings_fig1_section_recomputes_from_its_rows():
  """docs/results/gridworld.md's section on the default reading bonus+logsumexp on the
  reported datasets: Fig. 1 left with CIs, the oracle, the belief's reach and Fig. 1 right,
  from the run's committed rows (fig1_report)."""
  from ccvl_tf.experiments.gridworld import fig1_report as f
  rows = {n: f.read_rows(_doc(f"gridworld_fig1_default_{n}.csv"))
          for n in ("alpha_sweep", "oracle", "routes", "delta_adaptation")}
  reading = "bonus+logsumexp"
  page = open(_doc("results", "gridworld.md"), encoding="utf-8").read()
  for lines in (f.sweep_table(rows["alpha_sweep"], rows["oracle"], rows["routes"], [reading]),
                f.oracle_table(rows["oracle"], rows["routes"], [reading])):
    assert "```\n" + "\n".join(lines) + "\n```" in page
  reach = f.belief_reach(rows["oracle"], rows["routes"], reading)
  text = " ".join(page.split())
  assert "; ".join(f"alpha {a:g}: {n}/10, {m:.2f}, {s:.2f}" for a, (n, m, s) in reach.items()
                   if n) in text
  right = f.delta_per_episode(rows["delta_adaptation"], reading)
  assert ", ".join(f"{x:.2f}" for x in right) in text
  neural = f.neural_table(f.read_rows(_doc("gridworld_fig1_neural_default.csv")))
  assert "```\n" + "\n".join(neural) + "\n```" in page


def test_results_index_gridworld_cis_are_the_rows_bootstrap():
  """The CIs the results index quotes beside the gridworld table: the 95% bootstrap CI of the
  mean over the 10 seeds (score_stats.aggregate_scores, as every table's CI)."""
  rows = _gridworld_rows()
  text = " ".join(open(RESULTS, encoding="utf-8").read().split())
  for method, reading, alpha in (("CQL", "", 1.0), ("CCVL", "bonus", 0.1), ("CCVL", "bonus", 1.0),
                                 ("CCVL", "bonus", 2.0), ("CCVL", "logsumexp+monotone", 0.1),
                                 ("CCVL", "logsumexp+monotone", 2.0), ("CCVL", "logsumexp", 1.0),
                                 ("CCVL", "logsumexp", 2.0), ("CCVL-bonus", "", 2.0)):
    v = np.array([s for m, r, a, _, s in rows
                  if m == method and r == reading and a == alpha])[:, None]
    assert v.shape == (10, 1)
    agg = score_stats.aggregate_scores(v, reps=REPS, seed=0)["mean"]
    assert f"{agg.value:.3f} [{agg.ci_low:.3f}, {agg.ci_high:.3f}]" in text, (method, reading,
                                                                               alpha)


PEER_PAGES = ("docs/results/README.md", "docs/ablation.md", "docs/results/demo.md",
              "docs/results/peers.md")


def test_peer_numbers_are_the_peer_scripts_output():
  """docs/peers/ is tools/peers/peers.py's output: its table recomputes from its episodes, and
  the peer scores the docs quote (mean and 95% CI over episodes) are that table's."""
  from tools.peers import peer_table  # pylint: disable=g-import-not-at-top
  episodes = peer_table.read_episodes(_doc("peers", "episodes.csv"))
  rows = {r["policy"]: r for r in peer_table.table_rows(episodes)}
  table = markdown_docs.table_after(_doc("peers", "table.md"), "# Breakout")
  assert table[1:] == [[r["policy"], str(r["episodes"]), f"{r['mean']:.2f}",
                        f"({r['ci_low']:.2f}, {r['ci_high']:.2f})"] for r in rows.values()]
  with open(_doc("peers", "run.json")) as f:
    run = json.load(f)
  assert run["steps"] == 10_000 and run["evaluation"]["episodes"] == 10
  for name in ("d3rlpy DiscreteBC", "d3rlpy DiscreteCQL"):
    r = rows[name]
    assert r["episodes"] == 10
    quoted = f"{r['mean']:.1f} ({r['ci_low']:.1f}-{r['ci_high']:.1f})"
    for page in PEER_PAGES:
      text = " ".join(open(os.path.join(ROOT, page), encoding="utf-8").read().split())
      assert quoted in text, (name, quoted, page)


@pytest.mark.parametrize("page, anchor, rows_of", [
    (RESULTS, "Its seed 0 is what `make demo`", lambda: json.load(open(
        _doc("results", "demo_seeds_results.json")))["0"]),
    (README, "The table of seed 0 of the reported runs", lambda: json.load(open(
        _doc("results", "demo_seeds_results.json")))["0"]),
    (RESULTS, "The run with the earlier default reading", lambda: json.load(open(
        _doc("results", "demo_results_monotone.json"))))])
def test_results_index_demo_tables_recompute_from_their_episode_scores(page, anchor, rows_of):
  """The demo tables of the results index and of README (its main job) from the runs' committed
  per-episode scores: the reported
  five seeds' seed 0 (what `make demo` trains; docs/results/demo_seeds_results.json) and the
  run with the earlier default reading (docs/results/demo_results_monotone.json, the run's
  results.json): each policy's mean and rliable CI recomputed with the demo's `score_row`."""
  from ccvl_tf.experiments.offline import demo_report
  rows = rows_of()
  table = markdown_docs.table_after(page, anchor)
  printed = {r[0]: r for r in table[1:]}
  assert set(printed) == {r["policy"] for r in rows}
  for r in rows:
    again = demo_report.score_row(r["policy"], r["scores"])
    cells = printed[r["policy"]]
    assert cells[1] == str(len(r["scores"]))
    assert cells[2] == f"{again['mean']:.2f}"
    assert cells[3] == f"({again['ci_low']:.2f}, {again['ci_high']:.2f})"


@pytest.mark.parametrize("rows_csv, tables", [
    ("finetuning_rows_minatar_from_table.csv",
     ((RESULTS, "**Online fine-tuning**"),
      (_doc("results", "finetuning.md"), "**The reported table"),
      (_doc("results", "online_minatar_from_table.md"), "## Result"))),
    ("finetuning_rows_minatar.csv",
     ((_doc("results", "finetuning.md"), "**The deterministic schedule (2026-11-27"),
      (_doc("results", "online_minatar_deterministic.md"), "### Result (2026-11-27"))),
])
def test_finetuning_tables_recompute_from_their_rows(rows_csv, tables):
  """Each fine-tuning table on MinAtar (the reported one, from the method table's runs, in the
  results index, the results page and its own page; the earlier deterministic one) from its
  committed per-run rows, read by finetune_report.read_runs_csv and aggregated by the suite's
  own aggregate_lines with the suite's defaults (3 methods x 2 games x 3 seeds, 2,000
  resamples)."""
  from ccvl_tf.experiments.online import finetune_report
  from ccvl_tf.experiments.online import finetune_suite
  cfg = finetune_suite.FinetuneSuiteConfig(compare_dir="-", data_dir="-", output_dir="-")
  assert cfg.bootstrap_reps == REPS and list(cfg.methods) == ["ccvl", "ccvl_lower", "cql"]
  pairs = finetune_report.read_runs_csv(_doc("results", rows_csv))
  assert len(pairs) == 18
  for (method, game, seed), p in pairs.items():
    assert p["gain"] == pytest.approx(p["after"] - p["before"]), (method, game, seed)
  lines = finetune_report.aggregate_lines(cfg, pairs)
  expected = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
  for page, anchor in tables:
    table = markdown_docs.table_after(page, anchor)
    assert table == [expected[0]] + expected[2:], (page, anchor)


# The reported seeds of today's default run and evaluated so far (docs/results/five_seeds.md).
SEEDS_EVALUATED = ["0", "1", "2", "3", "4"]


def _demo_seeds_rows(name, seeds=("0", "1", "2", "3", "4")):
  """The committed per-seed results.json rows of a multi-seed demo (`seeds`); each seed's mean
  and CI recomputed from its episode scores (demo_report.score_row)."""
  from ccvl_tf.experiments.offline import demo_report
  per_seed = json.load(open(_doc("results", name)))
  assert sorted(per_seed) == list(seeds)
  for seed, rows in per_seed.items():
    for r in rows:
      again = demo_report.score_row(r["policy"], r["scores"])
      assert (again["mean"], again["ci_low"], again["ci_high"]) == pytest.approx(
          (r["mean"], r["ci_low"], r["ci_high"])), (seed, r["policy"])
  return per_seed


def test_demo_over_seeds_recomputes_from_its_episode_scores():
  """The demo over five training seeds at the chosen settings (docs/results/demo_seeds.md and
  README's table) from the five runs' committed results.json rows and diagnostics
  (docs/results/demo_seeds_results.json, demo_seeds_diagnostics.json): the over-seeds
  columns, orderings, P(adaptive > fixed) and the family table with demo_seeds' own
  across_seeds and render; placement.REPORTED is the per-seed means of these rows."""
  from ccvl_tf.experiments.offline import demo_seeds
  from ccvl_tf.experiments.offline import placement
  per_seed = _demo_seeds_rows("demo_seeds_results.json", SEEDS_EVALUATED)
  diagnostics = json.load(open(_doc("results", "demo_seeds_diagnostics.json")))
  assert sorted(diagnostics) == sorted(per_seed)
  rows = demo_seeds.across_seeds(per_seed, reps=REPS)
  text = demo_seeds.render(rows, "Breakout", reps=REPS,
                           diagnostics=demo_seeds.family_columns(diagnostics))
  assert open(_doc("results", "demo_seeds.md"), encoding="utf-8").read() == text
  assert placement.REPORTED == {r["policy"]: [float(x["mean"]) for x in r["seed_rows"]]
                                for r in rows}


def test_five_seeds_page_and_results_index_recompute_from_their_episode_scores():
  """The five reported seeds evaluated on the same 30 episodes per policy
  (docs/results/five_seeds.md, the results index's table): every number from the committed per-episode
  scores (docs/results/five_seeds_runs.json) by seeds_headroom.report and summary_table."""
  from ccvl_tf.experiments.offline import seeds_headroom
  runs = json.load(open(_doc("results", "five_seeds_runs.json")))
  assert sorted(runs) == SEEDS_EVALUATED
  assert seeds_headroom.check_same_episodes(runs) == []
  assert all(len(r["policies"][seeds_headroom.ADAPTIVE]) == 30 for r in runs.values())
  page = open(_doc("results", "five_seeds.md"), encoding="utf-8").read()
  assert seeds_headroom.report(runs, reps=REPS) in page
  index = open(RESULTS, encoding="utf-8").read()
  assert seeds_headroom.summary_table(runs, reps=REPS) in index


def test_demo_over_seeds_at_the_earlier_settings_recomputes():
  """The earlier five-seed demo (10,000 steps, reading logsumexp+monotone;
  docs/results/demo_seeds_earlier.md) from its committed rows; its seed 0 is the earlier
  reported demo run (docs/results/demo_results_monotone.json)."""
  from ccvl_tf.experiments.offline import demo_seeds
  per_seed = _demo_seeds_rows("demo_seeds_earlier_results.json")
  assert per_seed["0"] == json.load(open(_doc("results", "demo_results_monotone.json")))
  rows = demo_seeds.across_seeds(per_seed, reps=REPS)
  text = demo_seeds.render(rows, "Breakout", reps=REPS)
  assert open(_doc("results", "demo_seeds_earlier.md"), encoding="utf-8").read() == text


@pytest.mark.parametrize("name", ["demo_seeds_alpha1", "demo_seeds_bonus",
                                  "demo_seeds_monotone"])
def test_demo_over_seeds_at_earlier_settings_recompute_with_their_diagnostics(name):
  """The earlier five-seed demos with the family's diagnostics, each from its committed rows
  and diagnostics (docs/results/<name>.md): at alpha 1 for CQL and CCVL (the preset before
  docs/demo_alpha.md's rule moved both to 3), and in the earlier default reading (Eq. update's
  bonus with n(s), 17,500 steps)."""
  from ccvl_tf.experiments.offline import demo_seeds
  per_seed = _demo_seeds_rows(f"{name}_results.json")
  diagnostics = json.load(open(_doc("results", f"{name}_diagnostics.json")))
  rows = demo_seeds.across_seeds(per_seed, reps=REPS)
  text = demo_seeds.render(rows, "Breakout", reps=REPS,
                           diagnostics=demo_seeds.family_columns(diagnostics))
  assert open(_doc("results", f"{name}.md"), encoding="utf-8").read() == text


def _assert_sweep_row(got, rows, cells, method):
  """One printed row of an alpha-sweep page table on `1%`: the IQM [95% CI] per alpha, then
  the range and worst / best with their CIs, recomputed from the rows."""
  for i, alpha in enumerate((0.03, 0.1, 0.3, 1.0, 3.0, 10.0)):
    a = cells[(method, "1%", alpha)]
    assert got[1 + i] == f"{a.value:.1f} [{a.ci_low:.1f}, {a.ci_high:.1f}]", (method, alpha)
  f = alpha_sweep_report.flatness(rows, method, "1%", reps=REPS)
  assert got[7] == f"{f['range']:.1f} [{f['range_ci'][0]:.1f}, {f['range_ci'][1]:.1f}]"
  assert got[8] == f"{f['ratio']:.2f} [{f['ratio_ci'][0]:.2f}, {f['ratio_ci'][1]:.2f}]"


def test_alpha_sweep_page_algorithm1_table_recomputes_from_its_rows():
  """docs/results/alpha_sweep.md's table of the default reading `algorithm1` on `1%` (rebuilt data, CQL
  trained beside): per method and alpha the normalized IQM [95% CI] and the flatness columns,
  from docs/alpha_sweep_rows_1pct_algorithm1.csv with the sweep report's iqm_cells and
  flatness; the BC line from the same rows."""
  rows = _sweep_rows("1pct_algorithm1")
  assert len(rows) == 3 * 36 + 6  # CQL, CCVL, Fixed-CCVL x 6 alphas x 2 games x 3 seeds; BC
  cells = alpha_sweep_report.iqm_cells(rows, reps=REPS)
  page = _doc("results", "alpha_sweep.md")
  table = markdown_docs.table_after(page, "![alpha sweep, 1%, default reading algorithm1]")
  printed = {r[0]: r for r in table[1:]}
  assert sorted(printed) == ["CCVL", "CQL", "Fixed-CCVL"]
  for method in ("CQL", "CCVL", "Fixed-CCVL"):
    got = printed[method]
    _assert_sweep_row(got, rows, cells, method)
  bc = cells[("BC", "1%", None)]
  assert (f"BC, trained once per game and seed (no alpha): {bc.value:.1f} [{bc.ci_low:.1f}, "
          f"{bc.ci_high:.1f}].") in open(page, encoding="utf-8").read()


def test_alpha_sweep_page_bonus_table_recomputes_from_its_rows():
  """docs/results/alpha_sweep.md's table of the default reading `bonus` on `1%`: per alpha the
  normalized IQM [95% CI] and the flatness columns of CCVL and Fixed-CCVL, from
  docs/alpha_sweep_rows_1pct_bonus.csv with the sweep report's own iqm_cells and flatness."""
  rows = _sweep_rows("1pct_bonus")
  assert len(rows) == 72  # 2 methods x 6 alphas x 2 games x 3 seeds
  cells = alpha_sweep_report.iqm_cells(rows, reps=REPS)
  table = markdown_docs.table_after(_doc("results", "alpha_sweep.md"),
                                    "![alpha sweep, 1%, default reading bonus]")
  printed = {r[0]: r for r in table[1:]}
  for method in ("CCVL", "Fixed-CCVL"):
    got = printed[f"{method} (`bonus`)"]
    _assert_sweep_row(got, rows, cells, method)


def test_alpha_sweep_page_cosine_monotone_rerun_recomputes_from_its_rows():
  """docs/results/alpha_sweep.md's rerun of CCVL and Fixed-CCVL in the cosine-embedding default
  on `1%`: per alpha the IQM [95% CI] and the flatness columns from the rerun's rows, and both
  P-per-alpha tables from those rows merged with the kept CQL and BC rows of the `algorithm1`
  section (tools/alpha_sweep_rerun_report.py's merge and its improvement lines)."""
  from tools import alpha_sweep_rerun_report as rerun  # pylint: disable=g-import-not-at-top
  rows = _sweep_rows("1pct_cosine_monotone")
  assert len(rows) == 72 and {r["method"] for r in rows} == {"CCVL", "Fixed-CCVL"}
  page_text = open(_doc("results", "alpha_sweep.md"), encoding="utf-8").read()
  table = markdown_docs.table_after(_doc("results", "alpha_sweep.md"),
                                    "![alpha sweep, 1%, default cosine_monotone]")
  printed = {r[0]: r for r in table[1:]}
  cells = alpha_sweep_report.iqm_cells(rows, reps=REPS)
  for method in ("CCVL", "Fixed-CCVL"):
    _assert_sweep_row(printed[f"{method} (`cosine_monotone`)"], rows, cells, method)
  merged = rerun.merged_rows(rows, _sweep_rows("1pct_algorithm1"), ["CQL", "BC"])
  section = page_text[page_text.index("![alpha sweep, 1%, default cosine_monotone]"):]
  for line in rerun.improvement_section(merged, reps=REPS):
    if line.startswith("| 0") or line.startswith("| 1") or line.startswith("| 3"):
      assert line in section, line
  with pytest.raises(ValueError, match="CCVL both rerun and kept"):
    rerun.merged_rows(rows, rows, ["CCVL"])


MINATAR_20K_PAGE = _doc("results", "method_table_minatar_20k.md")
MINATAR_20K_ROWS = _doc("method_table_rows_minatar_20k.csv")


def test_minatar_table_at_the_chosen_budget_recomputes_from_its_rows(tmp_path):
  """docs/results/method_table_minatar_20k.md (and the results index's copy of its Table 2):
  every table is tools/minatar_table_report.py's output for the committed per-run rows and the
  committed behaviour scores of the data."""
  from tools import minatar_behaviour_table as behaviour_tool  # pylint: disable=g-import-not-at-top
  from tools import minatar_table_report as tool  # pylint: disable=g-import-not-at-top
  rows = compare_report.read_scores_csv(MINATAR_20K_ROWS)
  assert len(rows) == 7 * 2 * 5 * 3  # methods x data kinds x games x seeds
  behaviour = behaviour_tool.read_behaviour_csv(_doc("minatar_budget_behaviour.csv"))
  out = tmp_path / "table.md"
  out.write_text(tool.render(rows, behaviour, "docs/minatar_budget_behaviour.csv", reps=REPS))
  markers = [tool.IQM_TITLE, tool.SEPARATED_TITLE, tool.VS_FIXED_TITLE, tool.VS_CQL_TITLE,
             "Behaviour policy's score of each subset", "Learners (raw points", "Counts:",
             "Per game, 1%", "Per game, 5%"]
  for marker in markers:
    assert (markdown_docs.table_after(MINATAR_20K_PAGE, marker)
            == markdown_docs.table_after(str(out), marker)), marker
  index = markdown_docs.table_after(RESULTS, "**The method table on MinAtar**")
  assert index == markdown_docs.table_after(str(out), tool.IQM_TITLE)


def test_demo_alpha_table_and_verdicts_recompute_from_their_rows():
  """docs/results/demo_alpha.md's table from docs/results/demo_alpha_rows.csv: each run's score,
  the means over seeds, how many seeds alpha 3 is higher in, and rule 1 of docs/demo_alpha.md
  (mean more than 1.0 point higher and higher in at least 2 of 3 seeds) worked out here."""
  with open(_doc("results", "demo_alpha_rows.csv")) as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 12
  score = {(r["agent"], int(r["alpha"]), int(r["seed"])): r for r in rows}
  table = markdown_docs.table_after(_doc("results", "demo_alpha.md"), "## Result")
  printed = {(cells[0], cells[1]): cells for cells in table[1:]}
  seeds = (101, 102, 103)
  for label, agent, key in (("CQL", "cql", "score"), ("CCVL (adaptive)", "ccvl", "score"),
                            ("Fixed-CCVL (beside, not ruled on)", "ccvl", "fixed_ccvl")):
    values = {a: [float(score[(agent, a, s)][key]) for s in seeds] for a in (1, 3)}
    for a in (1, 3):
      cells = printed[(label, str(a))]
      assert cells[2:5] == [f"{v:.1f}" for v in values[a]], (label, a)
      assert cells[5] == f"{sum(values[a]) / 3:.2f}", (label, a)
    higher = sum(v3 > v1 for v1, v3 in zip(values[1], values[3]))
    assert printed[(label, "3")][6] == f"{higher} of 3"
    if key == "score":
      chosen = (sum(values[3]) - sum(values[1])) / 3 > 1.0 and higher >= 2
      assert printed[(label, "3")][7] == ("alpha 3" if chosen else "alpha 1")


def test_headroom_page_recomputes_from_its_episode_scores():
  """docs/results/headroom.md's table from the committed per-episode scores of every policy
  (docs/results/headroom_runs.json): headroom.analyze recomputes each run's numbers, and
  render_runs prints the page's table."""
  from ccvl_tf.evaluation import headroom
  from ccvl_tf.experiments.offline import headroom_eval
  runs = json.load(open(_doc("results", "headroom_runs.json")))
  again = {}
  for name, run in runs.items():
    h = run["headroom"]
    s = h["sequences"]
    members = [f"delta={d:.4f}" for d in h["grid"]]
    seq = lambda n, s=s, h=h: headroom.as_sequences(h["policies"][n], s)  # noqa: E731
    out = headroom.analyze(h["grid"], np.stack([seq(n) for n in members]), h["fixed_delta"],
                           seq(headroom_eval.ADAPTIVE), {"CQL": seq("CQL")},
                           belief_entropy=h["belief_entropy"])
    for key, value in out.items():
      assert json.loads(json.dumps(value)) == h[key], (name, key)
    again[name] = out
  page = open(_doc("results", "headroom.md")).read()
  assert headroom_eval.render_runs(again) in page


def test_factorial_page_recomputes_from_its_episode_scores():
  """docs/results/factorial.md's tables from the committed per-episode scores
  (docs/results/factorial_runs.json): headroom.analyze recomputes every cell's numbers under the
  rules its policies were exported with and, where the run records it, under the consistency
  rules (rebuilt_consistency: Fixed-CCVL by the same-network Bellman error, T = 2 x its
  minimum); render_runs prints the page's tables."""
  from ccvl_tf.evaluation import headroom
  from ccvl_tf.experiments.offline import headroom_eval
  runs = json.load(open(_doc("results", "factorial_runs.json")))
  exported, consistency = {}, {}
  for name, run in runs.items():
    h = run["headroom"]
    s = h["sequences"]
    seq = lambda v, s=s: headroom.as_sequences(v, s)  # noqa: E731
    grid = np.stack([seq(h["policies"][f"delta={d:.4f}"]) for d in h["grid"]])
    cql = {"CQL": seq(h["policies"]["CQL"])}
    out = headroom.analyze(h["grid"], grid, h["fixed_delta"],
                           seq(h["policies"][headroom_eval.ADAPTIVE]), cql,
                           belief_entropy=h["belief_entropy"])
    for key, value in out.items():
      assert json.loads(json.dumps(value)) == h[key], (name, key)
    exported[name] = out
    if "rebuilt_consistency" in run:
      r = run["rebuilt_consistency"]
      again = headroom.analyze(h["grid"], grid, r["fixed_delta"], seq(r["adaptive_scores"]),
                               cql, belief_entropy=seq(r["belief_entropy"]))
      assert json.loads(json.dumps(again)) == r["analysis"], name
      # the consistency rule's delta is the argmin of its recorded errors
      assert r["fixed_delta"] == h["grid"][int(np.argmin(r["bellman_errors_consistency"]))]
      consistency[name] = again
  page = open(_doc("results", "factorial.md")).read()
  assert headroom_eval.render_runs(exported) in page
  assert headroom_eval.render_runs(consistency) in page


def test_vector_peers_page_recomputes_from_its_rows():
  """docs/results/vector_peers/ is tools/peers/vector_peers.py's output: its table, goals and
  speed table recompute from rows.csv and run.json, and the results page quotes them."""
  from tools.peers import vector_speed, vector_table  # pylint: disable=g-import-not-at-top
  rows = vector_table.read_rows(_doc("results", "vector_peers", "rows.csv"))
  with open(_doc("results", "vector_peers", "run.json")) as f:
    run = json.load(f)
  assert run["seeds"] == [0, 1, 2, 3, 4] and run["settings"]["eval_episodes"] == 20
  summary = run["speed"]["summary"]
  page = vector_table.render(rows, run["tasks"], run["seeds"], speed=summary,
                             speed_table=vector_speed.render(summary))
  table_md = _doc("results", "vector_peers", "table.md")
  assert open(table_md, encoding="utf-8").read().startswith(page)  # then only the note
  quoted = _doc("results", "vector_peers.md")
  for marker in ("| policy | CartPole-v1", "| method | threads"):
    assert markdown_docs.table_after(quoted, marker) == markdown_docs.table_after(
        table_md, marker)


def test_bc_check_recomputes_from_its_per_seed_scores():
  """vector_peers.md's check of BC's gap: the paired bootstrap CI and the verdict recompute from
  bc_check.json's per-seed scores by the rule on the page, and the page quotes them."""
  from tools.peers import bc_check  # pylint: disable=g-import-not-at-top
  with open(_doc("results", "vector_peers", "bc_check.json")) as f:
    s = json.load(f)
  assert s["seeds"] == list(range(10)) and s["task"] == "CartPole-v1" and s["dataset_seed"] == 100
  mean, low, high = bc_check.paired_ci([a - b for a, b in zip(s["ours_normalized"],
                                                              s["d3rlpy_normalized"])])
  assert (mean, low, high) == (s["difference"]["mean"], s["difference"]["ci_low"],
                               s["difference"]["ci_high"])
  assert s["verdict"] == ("systematic" if high < 0 else "not shown")
  text = " ".join(open(_doc("results", "vector_peers.md"), encoding="utf-8").read().split())
  assert f"Ours minus DiscreteBC: {mean:+.1f} [{low:.1f}, {high:.1f}]" in text
  assert f"**Result: {s['verdict']}.**" in text


def _assert_headroom_recomputes(h):
  """headroom.analyze of a headroom.json's per-episode scores gives its recorded numbers."""
  from ccvl_tf.evaluation import headroom
  from ccvl_tf.experiments.offline import headroom_eval
  seq = lambda v, s=h["sequences"]: headroom.as_sequences(v, s)  # noqa: E731
  grid = np.stack([seq(h["policies"][f"delta={d:.4f}"]) for d in h["grid"]])
  out = headroom.analyze(h["grid"], grid, h["fixed_delta"],
                         seq(h["policies"][headroom_eval.ADAPTIVE]), {},
                         belief_entropy=h["belief_entropy"])
  for key, value in out.items():
    assert json.loads(json.dumps(value)) == h[key], key


def test_family_dev_pages_recompute_from_their_records():
  """docs/results/quantized_head.md, belief_prior_breakout.md and matched_learners.md from
  family_dev_runs.json: every run's headroom numbers from its per-episode scores, the
  disagreements from the recorded greedy actions, and each page's tables as
  tools/family_dev_report.py renders them."""
  from ccvl_tf.experiments.offline import headroom_eval
  from tools import family_dev_report as report  # pylint: disable=g-import-not-at-top
  from tools import matched_learners  # pylint: disable=g-import-not-at-top
  data = json.load(open(_doc("results", "family_dev_runs.json")))
  c0 = json.load(open(_doc("results", "factorial_runs.json")))["C0"]
  runs = data["runs"]
  for run in runs.values():
    _assert_headroom_recomputes(run["headroom"])
  matched = data["matched"]
  again = matched_learners.summarize(matched["disagree"]["greedy"])
  assert json.loads(json.dumps(again)) == matched["disagree"]["disagreement"]
  quantized = open(_doc("results", "quantized_head.md")).read()
  assert headroom_eval.render_runs({"C0 (headroom study)": c0["headroom"],
                                    **{n: r["headroom"] for n, r in runs.items()}}) in quantized
  assert report.render_diagnostics(runs, c0) in quantized
  assert report.render_priors(runs) in open(_doc("results", "belief_prior_breakout.md")).read()
  page = open(_doc("results", "matched_learners.md")).read()
  assert report.render_matched(matched, runs["F"]["headroom"],
                               matched_learners.matched_alphas()) in page
  assert f"**Verdict: {report.verdicts(matched)['verdict']}**" in page


def test_wide_span_page_recomputes_from_its_record():
  """docs/results/wide_span.md from family_dev_runs.json's 'wide' record: W's headroom numbers
  from its per-episode scores, its tables as family_dev_report renders them, and the rules'
  numbers the page states."""
  from ccvl_tf.experiments.offline import headroom_eval
  from tools import family_dev_report as report  # pylint: disable=g-import-not-at-top
  data = json.load(open(_doc("results", "family_dev_runs.json")))
  c0 = json.load(open(_doc("results", "factorial_runs.json")))["C0"]
  h = data["wide"]["headroom"]
  _assert_headroom_recomputes(h)
  page = open(_doc("results", "wide_span.md")).read()
  assert headroom_eval.render_runs({"F": data["runs"]["F"]["headroom"], "W": h}) in page
  assert report.render_diagnostics({"F": data["runs"]["F"], "W": data["wide"]}, c0) in page
  rules = report.wide_rules(data)
  assert not rules["rule1"] and not rules["rule2"]
  d, t = rules["differs_any"]["W_minus_F"], rules["top_minus_bottom"]
  assert f"+{100 * d['mean']:.1f}% [+{100 * d['ci_low']:.1f}%, +{100 * d['ci_high']:.1f}%]" in page
  assert f"+{t['mean']:.2f} (+{t['ci_low']:.2f}, +{t['ci_high']:.2f})" in page


def test_family_dev_cost_and_reproduction_statements_recompute_from_the_record():
  """wide_span.md's per-step costs from the benchmark kept in family_dev_runs.json, and
  quantized_head.md's 'Why F is not C0' from the reproduction record: bit-identical networks,
  the same Fixed-CCVL delta, the same episodes for every policy, byte-identical data."""
  from tools import family_dev_report as report  # pylint: disable=g-import-not-at-top
  data = json.load(open(_doc("results", "family_dev_runs.json")))
  page = open(_doc("results", "wide_span.md")).read()
  bench = data["benchmarks"]["idle_2026_12_08"]
  for variant in ("ccvl_default", "ccvl_pairs_at_delta", "ccvl_quantized_head"):
    assert f"- {report.cost_line(bench, variant)}\n" in page
  v = report.reproduction_verdict(data["reproduction"])
  assert v == {"same_weights": True, "same_fixed_delta": True, "same_episodes": True,
               "policies": 9, "episodes_each": 10, "same_data": True, "data_files": 7}
  w = data["reproduction"]["weights"]["online"]
  page = " ".join(open(_doc("results", "quantized_head.md")).read().split())  # lines joined
  assert f"({w['equal']} of {w['compared']} each" in page
  assert f"same score, policy by policy, for all {v['policies']} policies" in page
  assert f"byte-identical to the DEV both runs trained on ({v['data_files']} of 7" in page
  h = data["runs"]["F"]["headroom"]
  c0 = json.load(open(_doc("results", "headroom_runs.json")))["cosine_monotone"]["headroom"]
  assert (f"differ by {c0['fixed_mean'] - h['fixed_mean']:.2f} in Fixed-CCVL and "
          f"{c0['adaptive_mean'] - h['adaptive_mean']:.2f} in the adaptive row") in page


def test_the_demo_rerun_reproduces_reported_seed_0():
  """demo_rerun_2026_12_08.json (make demo on an Intel Xeon with AVX-512 and AMX): its results
  table, per-episode scores included, and every confidence diagnostic equal the reported seed 0's
  (demo_seeds_results.json, demo_seeds_diagnostics.json), as reproducibility.md and the README
  say."""
  rerun = json.load(open(_doc("results", "demo_rerun_2026_12_08.json")))
  assert rerun["results_table"] == json.load(open(_doc("results", "demo_seeds_results.json")))["0"]
  assert rerun["diagnostics"] == json.load(
      open(_doc("results", "demo_seeds_diagnostics.json")))["0"]
  assert "amx_tile" in rerun["machine"]["cpu"]["kernel_flags"]
  assert rerun["machine"]["kernels"]["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE"
  page = open(_doc("results", "reproducibility.md")).read()
  d = rerun["diagnostics"]
  assert (f"family spread\n{d['family_spread']:.4f}, action gap {d['action_gap']:.3f}, v_max "
          f"{d['v_max']:.3f}") in page
