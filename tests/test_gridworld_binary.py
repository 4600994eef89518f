"""Smoke run of binaries/gridworld.py with tiny settings; bad flags get clear errors."""
import csv
import json
import os

import pytest
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "gridworld.py")


def _run(args, tmp_path, fresh=False):
  """gridworld.py on `args` in its own process (tests/forked_binary.py; `fresh`: a subprocess
  start of its own, as a user's)."""
  return forked_binary.run("gridworld.py", args, cwd=tmp_path, timeout=300, fresh=fresh)


def _rows(path):
  with open(path) as f:
    return list(csv.DictReader(f))


@pytest.mark.slow
def test_smoke_run_writes_every_output(tmp_path):
  out = tmp_path / "out"
  r = _run([f"--output_dir={out}", "--seeds=2", "--alphas=0.1,1", "--num_deltas=3",
            "--eval_episodes=3", "--coverage_datasets=4", "--adaptation_alpha=0.1",
            "--trajectory_alpha=1", "--readings=logsumexp,max+monotone,bonus", "--family_seeds=1",
            "--family_steps=20", "--theorem2_datasets=3", "--first_seed=5"], tmp_path,
           fresh=True)
  assert r.returncode == 0, r.stderr[-3000:]
  for name in ("alpha_sweep.csv", "delta_adaptation.csv", "coverage.csv", "summary.json",
               "family.csv", "coverage_theorem2.csv", "routes.csv", "oracle.csv", "alpha_sweep.png",
               "delta_adaptation.png", "trajectories.png", "coverage.png",
               "coverage_theorem2.png"):
    assert (out / name).stat().st_size > 0, name
  for name in ("alpha_sweep.png", "delta_adaptation.png", "trajectories.png", "coverage.png",
               "coverage_theorem2.png"):
    assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  sweep = _rows(out / "alpha_sweep.csv")
  assert list(sweep[0].keys()) == ["method", "reading", "alpha", "seed", "normalized_return"]
  # (CQL + CCVL-bonus + 3 readings x (CCVL, Fixed-CCVL)) x 2 alphas x 2 seeds
  assert len(sweep) == 8 * 2 * 2
  assert {r["seed"] for r in sweep} == {"5", "6"}  # --first_seed
  assert {(r["method"], r["reading"]) for r in sweep} == {
      ("CQL", ""), ("CCVL-bonus", ""), ("CCVL", "logsumexp"), ("Fixed-CCVL", "logsumexp"),
      ("CCVL", "max+monotone"), ("Fixed-CCVL", "max+monotone"), ("CCVL", "bonus"),
      ("Fixed-CCVL", "bonus")}
  assert all(-0.01 <= float(r["normalized_return"]) <= 1.5 for r in sweep)
  adapt = _rows(out / "delta_adaptation.csv")
  assert list(adapt[0].keys()) == ["reading", "seed", "episode", "delta"]
  assert len(adapt) == 3 * 2 * 3
  assert all(0 < float(r["delta"]) < 1 for r in adapt)
  cov = _rows(out / "coverage.csv")
  assert {"delta", "coverage", "n_datasets"} <= set(cov[0].keys()) and len(cov) == 2 * 3
  assert all(r["n_datasets"] == "4" and 0 <= float(r["coverage"]) <= 1 for r in cov)
  family = _rows(out / "family.csv")
  assert list(family[0].keys()) == [
      "method", "reading", "default", "alpha", "seed", "visited_states", "v_nondecreasing_share",
      "q_nondecreasing_share", "v_end_ordered_share", "v_max", "greedy_varies_share",
      "v_at_min_delta_share", "policy_agreement_with_exact", "tied_greedy_share"]
  # exact + neural, 3 readings, 2 family alphas (0.1 and 1), 1 seed
  assert len(family) == 2 * 3 * 2
  by = {(f["method"], f["reading"], f["alpha"]): f for f in family}
  # '+monotone' holds Lemma 1 by construction, exactly and in the network (20 steps suffice).
  for method in ("exact", "neural"):
    for alpha in ("0.1", "1.0"):
      assert float(by[(method, "max+monotone", alpha)]["q_nondecreasing_share"]) == 1.0
  assert float(by[("exact", "max+monotone", "1.0")]["v_max"]) <= 1.0
  # The bonus reading: ordered exactly (and in the network, by its monotone head), V <= 1.
  for method in ("exact", "neural"):
    assert float(by[(method, "bonus", "1.0")]["v_nondecreasing_share"]) == 1.0
  assert float(by[("exact", "bonus", "1.0")]["v_max"]) <= 1.0
  assert all(0 <= float(f["greedy_varies_share"]) <= 1 and 0 <= float(f["v_at_min_delta_share"])
             <= 1 for f in family)
  assert all(f["policy_agreement_with_exact"] == "" for f in family if f["method"] == "exact")
  assert all(0 <= float(f["policy_agreement_with_exact"]) <= 1 for f in family
             if f["method"] == "neural")
  thm2 = _rows(out / "coverage_theorem2.csv")
  assert len(thm2) == 3 * 2 * 3 and all(r["n_datasets"] == "3" for r in thm2)
  summary = json.loads((out / "summary.json").read_text())
  assert set(summary["alpha_sweep"]) == {
      "CQL", "CCVL-bonus", "CCVL [logsumexp]", "Fixed-CCVL [logsumexp]",
      "CCVL [max+monotone]", "Fixed-CCVL [max+monotone]", "CCVL [bonus]", "Fixed-CCVL [bonus]"}
  assert "Normalized return at p = 0.15" in r.stdout
  assert "Theorem 1 coverage" in r.stdout and "Theorem 2 coverage" in r.stdout


@pytest.mark.parametrize("flag,match", [
    ("--alphas=-0.5", "alpha must be a finite number >= 0"),
    ("--seeds=0", "--seeds must be an integer >= 1"),
    ("--num_deltas=0", "--num_deltas must be an integer >= 1"),
    ("--alphas=abc", "--alphas must be numbers"),
    ("--readings=softmax", "--readings must be among"),
    ("--first_seed=-1", "--first_seed must be an integer >= 0"),
    ("--layout=nope", "--layout"),
])
def test_bad_flags(flag, match, tmp_path):
  r = _run([f"--output_dir={tmp_path / 'o'}", flag], tmp_path)
  assert r.returncode != 0
  assert match in r.stderr, r.stderr[-2000:]
  assert not (tmp_path / "o" / "alpha_sweep.csv").exists()
