"""OnlineConfig's record (online_config.json, summary.json's 'config'): one flat dict, the
exploration settings beside the run's, as earlier runs wrote it, read back by resumes and
actors; the belief temperature None while unset (then the offline run's, else 1)."""
import json

import ccvl_tf  # noqa: F401

from ccvl_tf.experiments.online import config as online_config

EXPLORATION_KEYS = ["upper_alpha", "upper_objective", "upper_regularizer", "beta",
                    "explore_delta", "explore_epsilon", "num_grid_deltas", "belief_temperature"]


def test_the_record_is_flat_and_reads_back():
  cfg = online_config.OnlineConfig(game="gridworld", seed=2, exploration_values={"beta": 0.3})
  rec = cfg.record()
  assert list(rec)[:len(EXPLORATION_KEYS)] == EXPLORATION_KEYS
  assert "exploration_values" not in rec
  assert (rec["beta"], rec["belief_temperature"], rec["upper_alpha"], rec["seed"]) == (
      0.3, None, None, 2)
  back = online_config.OnlineConfig.from_record(json.loads(json.dumps(rec)))
  assert back.record() == rec
  assert back.bounds() == cfg.bounds() and back.bounds().belief_temperature == 1.0


def test_a_set_belief_temperature_is_kept():
  cfg = online_config.OnlineConfig(exploration_values={"belief_temperature": 0.25})
  rec = cfg.record()
  assert rec["belief_temperature"] == 0.25
  assert online_config.OnlineConfig.from_record(rec).bounds().belief_temperature == 0.25
