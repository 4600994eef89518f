"""Study 2's tooling (tools/peers/vector_peers.py) without the peer environment: d3rlpy's
policies meet the episodes of our counterpart's row in fit's table, the scores are normalized
per task, and the table (per-task means, IQM with its CI, the goals) and the speed summary come
out of fake rows as the protocol says."""
import types

import numpy as np
import pytest

import ccvl_tf
from ccvl_tf.evaluation import rollouts
from ccvl_tf.evaluation import score_stats
from ccvl_tf.experiments.fit import own_data
from ccvl_tf.experiments.fit import settings as fit_settings
from tools.peers import vector_peers
from tools.peers import vector_speed
from tools.peers import vector_table


def _tiny_data():
  obs = np.arange(20, dtype=np.float32).reshape(5, 4)
  return ccvl_tf.Transitions.from_arrays(obs, np.array([0, 1, 0, 1, 0]), np.ones(5),
                                         np.array([0, 0, 0, 0, 1]))


def _fake_policy():
  return types.SimpleNamespace(action=lambda time_step, state: None,
                               get_initial_state=lambda batch_size: ())


def _fake_records(n=1):
  """n EpisodeRecords of a policy without a belief (scores 0, 1, ...; lengths 1, 2, ...)."""
  return [rollouts.EpisodeRecord(run=0, episode=i, return_=float(i), raw_score=float(i),
                                 length=i + 1, deltas=[], map_delta=float("nan"))
          for i in range(n)]


def test_d3rlpy_policies_meet_the_episodes_of_our_counterpart_row(monkeypatch):
  calls = []
  monkeypatch.setattr(own_data, "episodes_in",
                      lambda env, policy, episodes, seed, **kw: calls.append(
                          (env, episodes, seed, kw)) or _fake_records(episodes))
  data = _tiny_data()
  tss, action_spec = own_data.specs(data)
  settings = fit_settings.FitSettings(root_dir="unused", seed=3, eval_episodes=2)
  run = types.SimpleNamespace(settings=settings, method="cql", env="gymnasium:CartPole-v1",
                              data=data, time_step_spec=tss, action_spec=action_spec)
  own_data.results_table(run, {"policy": _fake_policy()}, lambda s: None)
  ours = calls[0]          # fit's table: the method's own policy is row 0, then random

  class FakeServed:
    def __init__(self, *args):
      pass

    def close(self):
      pass

  monkeypatch.setattr(vector_peers, "ServedPolicy", FakeServed)
  calls.clear()
  played = vector_peers.evaluate_peer("py", "model.d3", "CartPole-v1", 4, 3, 2)
  assert calls == [ours]
  assert ours[2] == own_data.table_seed(3, 0) == played["eval_seed"]
  assert ours[3] == {"max_steps": None, "epsilon": 0.0}


def test_a_tables_rows_have_consecutive_seeds(monkeypatch):
  seeds = []
  monkeypatch.setattr(own_data, "episodes_in",
                      lambda env, policy, episodes, seed, **kw: seeds.append(seed)
                      or _fake_records(episodes))
  data = _tiny_data()
  tss, action_spec = own_data.specs(data)
  run = types.SimpleNamespace(
      settings=fit_settings.FitSettings(root_dir="unused", seed=4, eval_episodes=1),
      method="ccvl", env="gymnasium:CartPole-v1", data=data, time_step_spec=tss,
      action_spec=action_spec)
  rows = own_data.results_table(run, {"policy": _fake_policy(), "policy_fixed": _fake_policy()},
                                lambda s: None)
  assert [r["policy"] for r in rows[:3]] == ["CCVL (adaptive)", "Fixed-CCVL", "random"]
  assert seeds == [own_data.table_seed(4, i) for i in range(3)]


def test_normalized_is_zero_at_random_and_100_at_the_reference():
  assert vector_table.normalized(20.3, 20.3, 500.0) == 0.0
  assert vector_table.normalized(500.0, 20.3, 500.0) == 100.0
  assert vector_table.normalized(-300.0, -500.0, -100.0) == 50.0
  with pytest.raises(ValueError):
    vector_table.normalized(1.0, 2.0, 2.0)


def _records(tasks, seeds, means):
  """ours / d3rlpy records with fit-table-like rows; means[(policy, task, seed)] raw."""
  out = []
  for (policy, task, seed), mean in means.items():
    library = "d3rlpy" if policy.startswith("d3rlpy") else "ccvl_tf"
    out.append({"task": task, "library": library, "method": policy, "seed": seed,
                "rows": [{"policy": policy, "eval_seed": 1_000_000 + seed, "episodes": 2,
                          "mean": mean, "ci_low": mean, "ci_high": mean}]})
  return out


def test_the_table_from_fake_rows(tmp_path):
  tasks, seeds = ["A", "B"], [0, 1, 2, 3]
  refs = {"A": {"random": 0.0, "final_greedy": 10.0},
          "B": {"random": -100.0, "final_greedy": 100.0}}
  rng = np.random.default_rng(0)
  means = {}
  for policy in ("BC", "CQL", "d3rlpy DiscreteBC", "d3rlpy DiscreteCQL"):
    for t in tasks:
      for s in seeds:
        lo, hi = refs[t]["random"], refs[t]["final_greedy"]
        base = 0.9 if policy == "BC" else 0.2 if policy == "CQL" else 0.6
        means[(policy, t, s)] = lo + (hi - lo) * (base + 0.05 * rng.standard_normal())
  means[("Fixed-CCVL", "A", 0)] = 5.0   # one cell only: no IQM
  rows = vector_peers.rows_of(_records(tasks, seeds, means), refs)
  assert len(rows) == len(means)
  vector_table.write_rows(str(tmp_path / "rows.csv"), rows)
  assert vector_table.read_rows(str(tmp_path / "rows.csv")) == rows  # the page's rows, exactly
  for r in rows:
    assert r["normalized"] == pytest.approx(
        100 * (means[(r["policy"], r["task"], r["train_seed"])] - refs[r["task"]]["random"])
        / (refs[r["task"]]["final_greedy"] - refs[r["task"]]["random"]))
  aggs = vector_table.aggregates(rows, tasks, seeds)
  matrix = vector_table.score_matrix(rows, "BC", tasks, seeds)
  assert matrix.shape == (4, 2)
  assert aggs["BC"]["iqm"] == score_stats.aggregate_scores(matrix, reps=2000, seed=0)[
      "iqm"].as_dict()
  assert aggs["BC"]["per_task"]["B"] == pytest.approx(matrix[:, 1].mean())
  assert aggs["Fixed-CCVL"]["iqm"] is None
  speed = vector_speed.summarize([
      {"library": lib, "algo": "cql", "threads": 1, "steps_per_s": v, "load_before": 1.0,
       "load_after": 2.0} for lib, v in (("ccvl_tf", 90), ("d3rlpy", 100), ("ccvl_tf", 110),
                                         ("d3rlpy", 50), ("ccvl_tf", 80), ("d3rlpy", 70))])
  assert speed[0]["ours_steps_per_s"] == 90 and speed[0]["d3rlpy_steps_per_s"] == 70
  assert speed[0]["ratio"] == pytest.approx(90 / 70)
  page = vector_table.render(rows, tasks, seeds, "note", speed=speed,
                             speed_table=vector_speed.render(speed))
  goals = [line for line in page.splitlines() if line.startswith("- ")]
  assert "**met**" in goals[0] and goals[0].startswith("- Our BC")
  assert "**missed**" in goals[1] and goals[1].startswith("- Our CQL")
  assert "**met**" in goals[2] and "ratio 1.29" in goals[2]
  line = next(s for s in page.splitlines() if s.startswith("| ccvl_tf Fixed-CCVL |"))
  assert line == "| ccvl_tf Fixed-CCVL | 50.0 | - | - | - | 1 |"


def test_two_rows_for_one_cell_are_refused():
  row = {"policy": "BC", "task": "A", "train_seed": 0, "normalized": 1.0}
  with pytest.raises(ValueError, match="two rows"):
    vector_table.score_matrix([row, dict(row)], "BC", ["A"], [0])


def test_bc_checks_paired_ci_by_hand():
  from tools.peers import bc_check  # pylint: disable=g-import-not-at-top
  assert bc_check.paired_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)  # no spread: every resample 2
  mean, low, high = bc_check.paired_ci([-3.0, 1.0])
  # Resamples of two: means -3, -1, 1 with chances 1/4, 1/2, 1/4: the 2.5% and 97.5% points.
  assert (mean, low, high) == (-1.0, -3.0, 1.0)
  assert bc_check.seed_list("0-3") == [0, 1, 2, 3] and bc_check.seed_list("4,7") == [4, 7]
