"""binaries/alpha_sweep.py and its report: a tiny gridworld sweep end to end
(every file, BC trained once, alpha reaching the learners, resume), the config's refusals, and
the report's numbers on hand-built result files (IQM / CI plumbing against direct
aggregate_scores calls; flatness and the family table by hand)."""
import csv
import json
import math
import os

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.runtime import config_flags
from ccvl_tf.evaluation import score_stats
from ccvl_tf.experiments.compare import alpha_sweep
from ccvl_tf.experiments.compare import alpha_sweep_report as report
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "alpha_sweep.py")
TINY = ["--suite=gridworld", "--alphas=3,0.1", "--seeds=1", "--datasets=1%", "--num_steps=3",
        "--eval_episodes=1", "--eval_max_steps=5", "--num_grid_deltas=2", "--num_deltas=2",
        "--bootstrap_reps=50", "--batch_size=8"]
PNG = b"\x89PNG\r\n\x1a\n"


def _run(args, cwd, fresh=False):
  """alpha_sweep.py on `args` in its own process (tests/forked_binary.py; `fresh`: a
  subprocess start of its own, as a user's)."""
  return forked_binary.run("alpha_sweep.py", args, cwd=cwd, timeout=900, fresh=fresh)


@pytest.mark.slow
def test_tiny_gridworld_sweep_trains_bc_once_and_resumes(tmp_path):
  out = tmp_path / "sweep"
  r = _run([*TINY, f"--output_dir={out}"], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "3 comparisons (bc, alpha_0.1, alpha_3)" in r.stdout
  # The sweep's shared flags: BC takes no N, so its part runs without it and says so.
  assert "alpha sweep: BC take(s) none of --num_deltas: not applied to this part." in r.stdout
  for name in ("rows.csv", "table.md", "alpha_sweep.png", "sweep_config.json"):
    assert (out / name).exists(), name
  assert (out / "alpha_sweep.png").read_bytes()[:8] == PNG
  # BC is trained once, in the alpha-free part; the alpha parts train CQL and CCVL (which
  # Fixed-CCVL shares) and nothing else.
  assert sorted(os.listdir(out)) == ["alpha_0.1", "alpha_3", "alpha_sweep.png", "bc",
                                     "rows.csv", "sweep_config.json", "table.md"]
  assert os.listdir(out / "bc" / "runs") == ["bc"]
  for a in ("0.1", "3"):
    assert sorted(os.listdir(out / f"alpha_{a}" / "runs")) == ["ccvl", "cql"]
    assert (out / f"alpha_{a}" / "scores.csv").exists()
    assert (out / f"alpha_{a}" / "confidence.md").exists()
    # The part's alpha is the learners' alpha (their training summaries record it).
    for key in ("ccvl", "cql"):
      summary = json.loads((out / f"alpha_{a}" / "runs" / key / "1pct" / "gridworld" /
                            "seed_0" / "summary.json").read_text())
      assert summary["alpha"] == float(a), (a, key)
  assert "alpha" not in json.loads(
      (out / "bc" / "runs" / "bc" / "1pct" / "gridworld" / "seed_0" / "summary.json").read_text())
  rows = list(csv.DictReader(open(out / "rows.csv")))
  assert tuple(rows[0]) == report.ROW_COLUMNS
  assert sorted((x["method"], x["alpha"]) for x in rows) == sorted(
      [("BC", "")] + [(m, a) for m in ("CQL", "CCVL", "Fixed-CCVL") for a in ("0.1", "3")])
  assert all(x["dataset"] == "1%" and x["game"] == "gridworld" and x["seed"] == "0"
             and x["train_steps"] == "3" for x in rows)
  for x in rows:  # CCVL's rows carry the family diagnostics, the others none
    has = [x[k] != "" for k in report.FAMILY_KEYS + ("greedy_mode_share",
                                                     "behaviour_agreement")]
    assert all(has) if x["method"] == "CCVL" else not any(has), x
    if x["method"] == "CCVL":
      assert 0 <= float(x["family_differs_ends"]) <= float(x["family_differs_any"]) <= 1
  table = (out / "table.md").read_text()
  assert "| Method | α = 0.1 | α = 3 | alpha-free |" in table
  assert "| BC (alpha-free) | - | - | 0.0 [" in table
  assert "### Flatness over alpha" in table and "| CQL | 2 | 1 x 1 |" in table
  assert "| 0.1 | 1 |" in table and "| 3 | 1 |" in table  # CCVL's family vs alpha
  config = json.loads((out / "sweep_config.json").read_text())
  assert config["alphas"] == [0.1, 3.0] and config["alpha"] is None
  done = {p: os.path.getmtime(p) for p in out.rglob("results/**/*.json")}
  assert len(done) == 7

  # The same command again: every part is finished, nothing is trained or evaluated.
  r2 = _run([*TINY, f"--output_dir={out}"], tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert r2.stdout.count("already done (skipped), 0 to run") == 3
  assert all(os.path.getmtime(p) == t for p, t in done.items())
  assert list(csv.DictReader(open(out / "rows.csv"))) == rows


@pytest.mark.slow
def test_bad_flags_name_the_flag(tmp_path):
  r = _run(["--suite=gridworld", "--alphas=0.1,0", f"--output_dir={tmp_path}"], tmp_path)
  assert r.returncode != 0 and "--alphas: every alpha must be a finite number > 0" in r.stderr
  # --alpha is not a flag of the sweep (each part sets it); --alphas is.
  names = [f.name for f, _ in config_flags.flag_fields(alpha_sweep.AlphaSweepConfig)]
  assert "alpha" not in names and "alphas" in names and "learning_rate" in names
  with pytest.raises(ValueError, match="--alphas: 'x' is not a number"):
    alpha_sweep.parse_alphas("0.1,x")
  with pytest.raises(ValueError, match=r"--alphas: duplicate values \(1\)"):
    alpha_sweep.parse_alphas("1,1.0")
  with pytest.raises(ValueError, match="--alphas is empty"):
    alpha_sweep.parse_alphas(" , ")
  assert alpha_sweep.parse_alphas("10, 0.03,1") == (0.03, 1.0, 10.0)
  with pytest.raises(ValueError, match="--methods: REM not in the alpha sweep; valid: CQL, "
                                       "CCVL, Fixed-CCVL, BC"):
    alpha_sweep.parse_sweep_methods("CQL,REM")
  with pytest.raises(ValueError, match="give --alphas, not --alpha"):
    alpha_sweep.AlphaSweepConfig(alpha=1.0, output_dir=str(tmp_path)).validate()
  with pytest.raises(ValueError, match="needs --data_dir"):  # CompareConfig's own checks run
    alpha_sweep.AlphaSweepConfig(suite="minatar", output_dir=str(tmp_path)).validate()


def test_parts_pass_every_compare_setting_on(tmp_path):
  cfg = alpha_sweep.AlphaSweepConfig(
      suite="gridworld", output_dir=str(tmp_path), methods=["bc", "fixed_ccvl", "CQL"],
      alphas=[3, 0.03], seeds=4, first_seed=100, learning_rate=1e-3, dr3_coef=0.0,
      num_steps=7, eval_episodes=2, workers=2, ccvl_options={"objective": "bonus"})
  cfg.validate()
  assert alpha_sweep.DEFAULT_ALPHAS == (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
  assert cfg.parts() == [("bc", None, ["BC"]), ("alpha_0.03", 0.03, ["Fixed-CCVL", "CQL"]),
                         ("alpha_3", 3.0, ["Fixed-CCVL", "CQL"])]
  sub = cfg.compare_config("alpha_3", 3.0, ["Fixed-CCVL", "CQL"])
  assert type(sub).__name__ == "CompareConfig"
  assert sub.output_dir == os.path.join(str(tmp_path), "alpha_3") and sub.alpha == 3.0
  assert (sub.seeds, sub.first_seed, sub.learning_rate, sub.dr3_coef, sub.num_steps,
          sub.eval_episodes, sub.workers, sub.ccvl_options) == (
              4, 100, 1e-3, 0.0, 7, 2, 2, {"objective": "bonus"})
  bc = cfg.compare_config("bc", None, ["BC"])
  assert bc.alpha is None and bc.methods == ["BC"]
  only_bc = alpha_sweep.AlphaSweepConfig(output_dir=str(tmp_path), methods=["BC"])
  only_bc.validate()
  assert only_bc.parts() == [("bc", None, ["BC"])]
  assert report.alpha_dir_name(0.03) == "alpha_0.03"
  assert report.alpha_dir_name(10.0) == "alpha_10"


# ------------------------------------------------------------------------------ the report
def _write_result(out, alpha, method, game, seed, score, diagnostics=None):
  part = "bc" if alpha is None else report.alpha_dir_name(alpha)
  path = out / part / "results" / method.lower() / "1pct" / game / f"seed_{seed}.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  row = dict(method=method, dataset="1%", game=game, seed=seed, score=score / 100.0,
             normalized_score=float(score), train_steps=10, train_seconds=1.0,
             eval_seconds=0.1, episode_scores=[score / 100.0], mean_delta=[0.25, 0.75])
  if diagnostics is not None:
    row["diagnostics"] = diagnostics
  path.write_text(json.dumps(row))


CQL = {0.1: [0.0, 10.0, 20.0, 100.0], 1.0: [5.0, 5.0, 5.0, 5.0]}           # 1 game, 4 seeds
CCVL_BASE = np.array([[0.0, 7.0], [10.0, 3.0], [20.0, 50.0], [100.0, -4.0]])  # 4 seeds x 2 games
FIXED = {0.1: 20.0, 1.0: 10.0}                                               # constant per alpha
BC = [1.0, 2.0, 3.0, 4.0]


def _hand_built_sweep(out):
  for alpha, vals in CQL.items():
    for s, v in enumerate(vals):
      _write_result(out, alpha, "CQL", "g1", s, v)
  for alpha, shift in ((0.1, 0.0), (1.0, 10.0)):  # CCVL at alpha 1 = alpha 0.1 + 10, per seed
    for s in range(4):
      for j, game in enumerate(("g1", "g2")):
        diag = {"family_differs_ends": 0.1 * (s % 2), "family_differs_any": 0.2 + 0.2 * (s % 2),
                "family_agreement_lo": 0.5, "family_agreement_hi": 0.25 * alpha,
                "family_greedy_mode_share_lo": 1.0, "family_greedy_mode_share_hi": 0.5,
                "family_cql_gap_lo": 1.0 + s, "family_cql_gap_hi": 2.0,
                "greedy_mode_share": 0.75, "behaviour_agreement": 0.5}
        _write_result(out, alpha, "CCVL", game, s, CCVL_BASE[s, j] + shift, diag)
  for alpha, v in FIXED.items():
    for s in range(4):
      _write_result(out, alpha, "Fixed-CCVL", "g1", s, v)
  for s, v in enumerate(BC):
    _write_result(out, None, "BC", "g1", s, v)


def test_report_numbers_on_hand_built_results(tmp_path):
  out = tmp_path / "sweep"
  _hand_built_sweep(out)
  reps = 200
  paths = report.write_outputs(str(out), "gridworld", reps=reps)
  assert (out / "alpha_sweep.png").read_bytes()[:8] == PNG
  rows = report.read_rows(str(out))
  table = (out / "table.md").read_text()

  # IQM [95% CI] cells: exactly what aggregate_scores gives on the same [seeds, games] matrix.
  def cell(matrix):
    a = score_stats.aggregate_scores(np.asarray(matrix, np.float64), reps=reps, seed=0)["iqm"]
    return f"{a.value:.1f} [{a.ci_low:.1f}, {a.ci_high:.1f}]"
  cql = {a: cell(np.array(v)[:, None]) for a, v in CQL.items()}
  assert f"| CQL | {cql[0.1]} | {cql[1.0]} | - |" in table
  assert f"| CCVL | {cell(CCVL_BASE)} | {cell(CCVL_BASE + 10)} | - |" in table
  assert f"| BC (alpha-free) | - | - | {cell(np.array(BC)[:, None])} |" in table
  # IQM by hand: the mean of the middle half. CQL at 0.1: mean(10, 20) = 15; at 1: 5.
  assert "| CQL | 15.0 [" in table and "| 5.0 [5.0, 5.0] | - |" in table
  assert "| BC (alpha-free) | - | - | 2.5 [" in table  # mean(2, 3)

  # Flatness by hand. CQL: IQMs 15 (alpha 0.1) and 5 (alpha 1): range 10, ratio 5/15.
  f = report.flatness(rows, "CQL", "1%", reps=reps)
  assert f["alphas"] == [0.1, 1.0] and f["iqm"] == pytest.approx([15.0, 5.0])
  assert (f["best_alpha"], f["worst_alpha"]) == (0.1, 1.0)
  assert f["range"] == pytest.approx(10.0) and f["ratio"] == pytest.approx(1 / 3)
  assert f["range_ci"][0] <= f["range"] <= f["range_ci"][1]
  assert (f["num_seeds"], f["num_games"]) == (4, 1)
  # CCVL at alpha 1 is alpha 0.1 + 10 seed by seed: every paired replication shifts the IQM by
  # exactly 10, so the range's CI is [10, 10] (an unpaired bootstrap would not give this).
  # IQM of the 8 values at 0.1 by hand: sorted -4 0 3 7 10 20 50 100, middle four -> 10.
  f = report.flatness(rows, "CCVL", "1%", reps=reps)
  assert f["iqm"] == pytest.approx([10.0, 20.0]) and (f["num_seeds"], f["num_games"]) == (4, 2)
  assert f["range"] == pytest.approx(10.0) and f["ratio"] == pytest.approx(0.5)
  assert f["range_ci"] == pytest.approx((10.0, 10.0))
  assert (f["best_alpha"], f["worst_alpha"]) == (1.0, 0.1)
  # Fixed-CCVL is constant within each alpha: every replication gives range 10, ratio 0.5.
  f = report.flatness(rows, "Fixed-CCVL", "1%", reps=reps)
  assert f["range_ci"] == pytest.approx((10.0, 10.0))
  assert f["ratio_ci"] == pytest.approx((0.5, 0.5))
  assert ("| Fixed-CCVL | 2 | 4 x 1 | 0.1: 20.0 | 1: 10.0 | 10.0 [10.0, 10.0] | "
          "0.50 [0.50, 0.50] |") in table
  assert "| CCVL | 2 | 4 x 2 | 1: 20.0 | 0.1: 10.0 | 10.0 [10.0, 10.0] | 0.50 [" in table
  assert "| CQL | 2 | 4 x 1 | 0.1: 15.0 | 1: 5.0 | 10.0 [" in table and "| 0.33 [" in table
  # A game without runs at every alpha is left out of the flatness (the runs must pair up).
  extra = dict(rows[0], game="g9", seed=0, alpha=0.1, method="CQL", normalized_score=1e6)
  f = report.flatness(rows + [extra], "CQL", "1%", reps=reps)
  assert (f["num_seeds"], f["num_games"]) == (4, 1) and f["iqm"] == pytest.approx([15.0, 5.0])
  # Only one alpha: no flatness.
  assert report.flatness(rows, "CQL", "1%", alphas=[0.1], reps=reps) is None
  # No alpha beats random: the ratio says nothing (n/a), the range still does.
  neg = [dict(r, normalized_score=-abs(r["normalized_score"]) - 1) for r in rows]
  f = report.flatness(neg, "CQL", "1%", reps=reps)
  assert math.isnan(f["ratio"]) and all(math.isnan(x) for x in f["ratio_ci"])

  # CCVL's family vs alpha, mean over its 8 runs per alpha, by hand.
  # differs_ends: 0, 0.1 alternating -> 0.05; differs_any: 0.2, 0.4 -> 0.3; agreement_hi =
  # 0.25 alpha; CQL gap lo = 1 + seed -> 2.5.
  assert ("| 0.1 | 8 | 0.05 | 0.3 | 0.5 | 0.025 | 1 | 0.5 | 2.5 | 2 |") in table
  assert ("| 1 | 8 | 0.05 | 0.3 | 0.5 | 0.25 | 1 | 0.5 | 2.5 | 2 |") in table

  # rows.csv: one row per result file, alpha empty for BC, diagnostics only on CCVL's rows.
  csv_rows = list(csv.DictReader(open(paths["rows"])))
  assert len(csv_rows) == 8 + 16 + 8 + 4
  assert [x["method"] for x in csv_rows[:1]] == ["CQL"] and csv_rows[-1]["method"] == "BC"
  assert {x["alpha"] for x in csv_rows if x["method"] == "BC"} == {""}
  ccvl = [x for x in csv_rows if x["method"] == "CCVL"]
  assert {x["mean_delta"] for x in ccvl} == {"0.5"}  # mean of the episodes' 0.25 and 0.75
  assert {x["family_agreement_hi"] for x in ccvl if x["alpha"] == "1"} == {"0.25"}
  assert all(x["family_differs_any"] == "" and x["mean_delta"] == "" for x in csv_rows
             if x["method"] != "CCVL")

  # Only the alphas asked for: a stale part of another grid is left out.
  _write_result(out, 0.3, "CQL", "g1", 0, 99.0)
  assert {r["alpha"] for r in report.read_rows(str(out))} == {None, 0.1, 0.3, 1.0}
  assert {r["alpha"] for r in report.read_rows(str(out), alphas=[0.1, 1.0])} == {None, 0.1, 1.0}
  with pytest.raises(ValueError, match="no results under"):
    report.write_outputs(str(tmp_path / "empty"), "gridworld", reps=10)
