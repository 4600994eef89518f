"""Online fine-tuning's evaluation helpers, by hand: Monte-Carlo returns-to-go, the actors'
throughput counters, the replay table's completed calls on a real Reverb server."""
import json
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.data import reverb_replay
from ccvl_tf.experiments.online import actor as online_actor
from ccvl_tf.experiments.online import scores_and_bounds as online_eval


def test_discounted_returns_to_go_by_hand():
  # rewards [1, 0, 2], gamma 0.5: G_2 = 2, G_1 = 0 + 0.5 * 2 = 1, G_0 = 1 + 0.5 * 1 = 1.5.
  np.testing.assert_allclose(online_eval.discounted_returns_to_go([1.0, 0.0, 2.0], 0.5),
                             [1.5, 1.0, 2.0])
  assert online_eval.discounted_returns_to_go([], 0.9).shape == (0,)


def test_actor_stats_are_summed_over_actors(tmp_path):
  """Two actors: 1000 steps in 10 s (4 s inserting) and 600 steps in 6 s (3 s): 1600 steps,
  100 + 100 = 200 env steps/s, 7 of 16 actor-seconds inserting (0.4375). A third actor with
  no file yet is skipped."""
  root = str(tmp_path)
  online_actor.write_stats(online_actor.stats_path(root, 0), 1000, 10.0, 4.0)
  online_actor.write_stats(online_actor.stats_path(root, 1), 600, 6.0, 3.0)
  st = online_actor.read_stats(root, 3)
  assert st["env_steps"] == 1600 and st["actor_seconds"] == 16.0
  assert st["actor_env_steps_per_s"] == pytest.approx(200.0)
  assert st["insert_share"] == pytest.approx(7.0 / 16.0)
  assert json.load(open(os.path.join(root, "actors", "actor_0_stats.json")))["env_steps"] == 1000


def test_rate_limiter_stats_count_completed_inserts_and_samples():
  """A real server, a table with a SampleToInsertRatio limiter: 6 items inserted, 2 sampled."""
  import reverb  # pylint: disable=g-import-not-at-top
  table = reverb.Table(reverb_replay.REPLAY_TABLE, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                       100, reverb.rate_limiters.SampleToInsertRatio(1.0, 2, 10.0))
  srv, address = reverb_replay.start_server([table])
  try:
    client = reverb.Client(address)
    for i in range(6):
      client.insert(np.array([i], np.int32), {reverb_replay.REPLAY_TABLE: 1.0})
    assert len(list(client.sample(reverb_replay.REPLAY_TABLE, num_samples=2))) == 2
    stats = reverb_replay.rate_limiter_stats(client.server_info()[reverb_replay.REPLAY_TABLE])
    assert stats == {"inserts": 6.0, "samples": 2.0}
  finally:
    srv.stop()


def test_online_alpha_is_validated_and_passed_by_the_measurement(tmp_path):
  """--alpha of the fine-tune: >= 0; finetune_minatar passes it to every run when set."""
  from ccvl_tf.experiments.online import finetune_suite  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import config as online_config  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="--alpha must be >= 0"):
    online_config.OnlineConfig(offline_dir=str(tmp_path), root_dir=str(tmp_path / "r"),
                        alpha=-1.0).validate()
  cfg = finetune_suite.FinetuneSuiteConfig(compare_dir="c", data_dir="d", output_dir="o")
  assert not any(a.startswith("--alpha") for a in finetune_suite.finetune_args(
      cfg, "ccvl", "Breakout", 0, "off"))
  cfg = finetune_suite.FinetuneSuiteConfig(compare_dir="c", data_dir="d", output_dir="o",
                                           alpha=0.01)
  assert "--alpha=0.01" in finetune_suite.finetune_args(cfg, "ccvl", "Breakout", 0, "off")
