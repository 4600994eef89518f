"""The behaviour policy's score of a MinAtar subset (ccvl_tf/data/minatar_behaviour.py): the
slot -> env step mapping and the score on a hand-made dataset whose expected values are worked
out by hand below, the checks that refuse a dataset the mapping does not describe, and a small
dataset built as binaries/make_minatar_datasets.py builds one, scored against a plain loop
(tools/minatar_behaviour_check.py, which runs the same check on the real data by hand)."""
import json
import os

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import frame_store
from ccvl_tf.data import minatar_behaviour as mb
from ccvl_tf.data import minatar_datasets as md
from ccvl_tf.data import replay_writer
from tools import minatar_behaviour_check as check_tool
from tools import minatar_behaviour_table as table_tool

# The hand-made run: capacity C = 5, N = 13 steps, K = ceil(14 / 5) = 3 checkpoints.
# Complete episodes: lengths 3, 4, 2, 2 -> steps 0-2, 3-6, 7-8, 9-10 (terminal flags at steps
# 2, 6, 8, 10), raw returns 1, 5, 0, 2; steps 11-12 are the cut-off last episode.
CAPACITY, STEPS = 5, 13
LENGTHS, RETURNS = [3, 4, 2, 2], [1.0, 5.0, 0.0, 2.0]
TERMINAL_STEPS = {2, 6, 8, 10}


def _build(root, lengths=LENGTHS):
  """Writes the hand-made run as binaries/make_minatar_datasets.py lays one out (replay_logs,
  summary.json, COMPLETE) with subsets "1%" / "5%" declared as the first 4 / 2 slots of every
  checkpoint, literally (the names the method table's rows use)."""
  rdir = md.replay_dir(str(root), "Breakout", 0)
  w = replay_writer.DopamineReplayWriter(
      rdir, replay_capacity=CAPACITY, stack_size=1, observation_shape=(2, 2, 1),
      metadata=dict(subsets={"1%": [4, None, "prefix"], "5%": [2, None, "prefix"],
                             "all": [None, None]}))
  for t in range(STEPS):
    w.add(np.full((2, 2, 1), t, np.uint8), 0, 0.0, t in TERMINAL_STEPS)
  assert w.close() == [0, 1, 2]
  run = md.run_dir(str(root), "Breakout", 0)
  with open(os.path.join(run, md.SUMMARY_FILENAME), "w") as f:
    json.dump(dict(settings=dict(steps=STEPS), checkpoint_capacity=CAPACITY,
                   train_episode_returns=RETURNS, train_episode_lengths=lengths), f)
  open(os.path.join(run, md.COMPLETE_FILENAME), "w").close()


def test_slot_steps_follow_the_writer():
  # Checkpoint 0 is logged at add count 4: slots 0-3 hold steps 0-3, slot 4 is unwritten.
  # Checkpoint 1 at add count 9: steps 5-8 in slots 0-3, step 4 still in slot 4.
  # Checkpoint 2 is the final buffer, logged at close after 13 adds: steps 10-12 in slots
  # 0-2, and slots 3-4 still hold steps 8 and 9 of the previous round.
  assert mb.slot_steps(CAPACITY, STEPS, 0).tolist() == [0, 1, 2, 3, -1]
  assert mb.slot_steps(CAPACITY, STEPS, 1).tolist() == [5, 6, 7, 8, 4]
  assert mb.slot_steps(CAPACITY, STEPS, 2).tolist() == [10, 11, 12, 8, 9]
  with pytest.raises(ValueError, match="no checkpoint 3"):
    mb.slot_steps(CAPACITY, STEPS, 3)


def test_episode_of_steps():
  assert mb.episode_of_steps(LENGTHS, np.arange(13)).tolist() == [
      0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, -1, -1]


def test_behaviour_score_of_hand_made_subsets(tmp_path):
  _build(tmp_path)
  # "1%" (4 slots): a transition needs its next slot inside the prefix and not next to the
  # cursor, so slots 0-2 of checkpoints 0 and 1 (steps 0, 1, 2 and 5, 6, 7) and slots 0-1 of
  # the final buffer (steps 10, 11; its newest slot 2, step 12, has no next state yet): 8
  # transitions.
  # Episodes per checkpoint: {0} (return 1), {1, 2} (5, 0), {3} (2; step 11 is cut off).
  # score = mean(1, (5 + 0) / 2, 2) = 11/6; over the checkpoints' means 1, 2.5, 2 the sample
  # variance is ((5/6)^2 + (2/3)^2 + (1/6)^2) / 2 = 7/12, so se = sqrt(7/12 / 3) = sqrt(7)/6.
  # Pooled episodes: mean(1, 5, 0, 2) = 2.0; per transition (3*1 + 2*5 + 1*0 + 1*2) / 7 = 15/7.
  s = mb.behaviour_score(str(tmp_path), "Breakout", "1%")
  assert (s.checkpoints, s.episodes, s.transitions, s.cut_off) == (3, 4, 8, 1)
  assert s.score == pytest.approx(11 / 6)
  assert s.score_se == pytest.approx(np.sqrt(7) / 6)
  assert s.episode_mean == pytest.approx(2.0)
  assert s.transition_weighted == pytest.approx(15 / 7)
  # "5%" (2 slots): slot 0 of each checkpoint = steps 0, 5, 10 = episodes 0, 1, 3 (returns 1, 5, 2):
  # every reading is 8/3; deviations -5/3, 7/3, -2/3 give variance 13/3, se = sqrt(13)/3.
  s = mb.behaviour_score(str(tmp_path), "Breakout", "5%")
  assert (s.checkpoints, s.episodes, s.transitions, s.cut_off) == (3, 3, 3, 0)
  for v in (s.score, s.episode_mean, s.transition_weighted):
    assert v == pytest.approx(8 / 3)
  assert s.score_se == pytest.approx(np.sqrt(13) / 3)
  # "all": every loaded transition's flag is checked against the episode ends.
  assert mb.behaviour_score(str(tmp_path), "Breakout", "all").episodes == 4


def test_a_summary_that_does_not_match_the_flags_is_refused(tmp_path):
  _build(tmp_path, lengths=[3, 4, 2, 3])      # episode 3 "ends" at step 11, the flag is at 10
  with pytest.raises(ValueError, match=r"checkpoint 2: its terminal flags do not match"):
    mb.behaviour_score(str(tmp_path), "Breakout", "1%")
  with pytest.raises(FileNotFoundError, match="no finished dataset"):
    mb.behaviour_score(str(tmp_path), "Freeway", "1%")
  with pytest.raises(ValueError, match="none of the 2 steps"):
    mb.score_of_windows([np.array([11]), np.array([12])], RETURNS, LENGTHS)


def test_the_table_tool_on_the_hand_made_run(tmp_path):
  _build(tmp_path)
  rows = [dict(method=m, dataset=d, game="Breakout", seed=seed, score=score)
          for m, d, scores in [("BC", "1%", [1.0, 2.0, 3.0]), ("BC", "5%", [3.0, 3.0, 3.0]),
                               ("CQL", "1%", [0.0, 0.0, 0.0]), ("CQL", "5%", [2.0, 2.0, 2.0])]
          for seed, score in enumerate(scores)] + [
              dict(method="BC", dataset="1%", game="Asterix", seed=0, score=1.0)]
  behaviour = table_tool.behaviour_scores(str(tmp_path), ["Asterix", "Breakout"], ["1%", "5%"],
                                         0)
  assert sorted(behaviour) == [("Breakout", "1%"), ("Breakout", "5%")]  # no Asterix data
  text = table_tool.render(rows, behaviour, ["BC", "CQL"], ["1%", "5%"], "hand-made")
  # BC "1%": mean 2.0 against 11/6 (ratio 12/11 = 1.09), seeds 2.0 and 3.0 reach it; "5%":
  # 3.0 against 8/3 (ratio 1.125, printed 1.12 or 1.13 by float rounding). CQL reaches neither.
  assert "| BC | 1% | Breakout | 1.00 / 2.00 / 3.00 | **2.00** | 1.83 | 1.09 | 2 of 3 |" in text
  assert "| CQL | 5% | Breakout | 2.00 / 2.00 / 2.00 | 2.00 | 2.67 | 0.75 | 0 of 3 |" in text
  # Pooled episodes: 2.0 and 8/3, both reached by BC; per transition: 15/7 (not reached by
  # BC's 2.0) and 8/3.
  assert "| BC | 2 of 2 | 5 of 6 | 2 of 2 | 1 of 2 |" in text
  assert "| CQL | 0 of 2 | 0 of 6 | 0 of 2 | 0 of 2 |" in text
  assert "| Breakout | 1% | 1.83 +- 0.44 | 2.00 | 2.14 | 3 | 4 | 8 | 1 |" in text
  assert "Left out (no finished dataset in hand-made): Asterix" in text
  # The behaviour scores' rows read back exactly.
  path = str(tmp_path / "behaviour.csv")
  table_tool.write_behaviour_csv(path, behaviour)
  assert table_tool.read_behaviour_csv(path) == behaviour


@pytest.mark.slow
def test_a_built_dataset_matches_a_plain_loop(tmp_path):
  """The dataset builder's DQN run and writer, 1,000 Breakout steps in 4 checkpoints: C =
  ceil(1001 / 4) = 251 slots each, "1%" = max(2, round(2.51)) = 3 and "5%" = round(12.55) = 13
  leading slots of each checkpoint, so 4 x 2 and 4 x 12 transitions (the last slot of a prefix
  is only a next state). Each subset's behaviour score equals the plain loop's, and loads the
  transitions the frame store loads; "all" checks every loaded transition's terminal flag
  against the summary's episode ends (a ValueError otherwise)."""
  data = str(tmp_path)
  md.build_game(data, "Breakout", num_steps=1000, seed=0, num_checkpoints=4, eval_episodes=1,
                random_episodes=1, log=lambda m: None, progress_every=10**6)
  with open(os.path.join(md.run_dir(data, "Breakout", 0), md.SUMMARY_FILENAME)) as f:
    summary = json.load(f)
  assert summary["checkpoint_capacity"] == 251
  assert (summary["subsets"]["1%"][0], summary["subsets"]["5%"][0]) == (3, 13)
  for subset, transitions in (("1%", 8), ("5%", 48), ("all", None)):
    got = mb.behaviour_score(data, "Breakout", subset)
    store = frame_store.FrameStore.from_replay(md.replay_dir(data, "Breakout", 0), subset)
    assert got.transitions == store.num_transitions
    if transitions is not None:
      assert check_tool.differences(data, "Breakout", subset) == []
      assert got.transitions == transitions and got.checkpoints == 4
