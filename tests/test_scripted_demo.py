"""The default dataset's scripted Breakout player and the end-of-run results table."""

import numpy as np
import pytest

from ccvl_tf.envs import atari, scripted
from ccvl_tf.experiments.offline import demo_report


def test_scripted_breakout_player_serves_and_scores():
  """epsilon 0: the RAM tracker must serve (FIRE when no ball) and hit the ball: one episode
  capped at 1,500 agent steps scores points (a random policy averages ~1.5 per whole episode)."""
  env = atari.AtariEnvironment("Breakout", seed=1, max_episode_steps=1500)
  play = scripted.breakout_tracker(env, epsilon=0.0, seed=0)
  ts = env.reset()
  actions = []
  while not ts.is_last():
    actions.append(play(ts))
    ts = env.step(actions[-1])
  assert actions[0] == scripted.FIRE                      # first move: serve
  assert env.episode_raw_return >= 10
  assert set(actions) <= {0, 1, 2, 3} and {2, 3} <= set(actions)  # it moves both ways


def test_scripted_player_refuses_other_games_and_bad_epsilon():
  with pytest.raises(ValueError, match="Breakout"):
    scripted.breakout_tracker(atari.AtariEnvironment("Pong", seed=0))
  with pytest.raises(ValueError, match="epsilon"):
    scripted.breakout_tracker(atari.AtariEnvironment("Breakout", seed=0), epsilon=1.5)


def test_epsilon_mix_takes_random_actions_at_the_given_rate():
  env = atari.AtariEnvironment("Breakout", seed=0)
  env.reset()
  play = scripted.breakout_tracker(env, epsilon=1.0, seed=3)
  acts = [play(None) for _ in range(400)]
  # all random: every action appears, roughly uniformly (400 draws, each ~100 +- 30)
  counts = np.bincount(acts, minlength=4)
  assert counts.min() > 50


def test_score_row_and_table_by_hand(tmp_path):
  row = demo_report.score_row("p", [2.0, 2.0, 2.0])
  assert row["mean"] == 2.0 and row["ci_low"] == 2.0 and row["ci_high"] == 2.0
  row = demo_report.score_row("q", [0.0, 10.0])
  # The bootstrap mean of two values lies between them; with 2,000 resamples both extremes
  # (all-0, all-10) occur, so the 95% percentile interval spans most of [0, 10].
  assert row["mean"] == 5.0 and 0.0 <= row["ci_low"] <= 2.5 and 7.5 <= row["ci_high"] <= 10.0
  text = demo_report.render([row], "Breakout", "note")
  assert "| q | 2 | 5.00 |" in text and text.strip().endswith("note")
  demo_report.plot_rows(str(tmp_path / "r.png"), [row], "Breakout")
  assert (tmp_path / "r.png").stat().st_size > 0
  assert demo_report.plot_learning_curve(str(tmp_path / "c.png"),
                                         {"10": {"mean_raw_score": 1.0},
                                          "20": {"mean_raw_score": 3.0}}, "Breakout")
  assert not demo_report.plot_learning_curve(str(tmp_path / "d.png"), {}, "Breakout")
  with pytest.raises(ValueError, match="no episodes"):
    demo_report.score_row("empty", [])
