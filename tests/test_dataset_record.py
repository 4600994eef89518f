"""A replay directory's own record (ccvl_dataset.json) checked against the run's game and
environment before any data is read (ccvl_tf/data/dataset_record.py), on copies of the
real-format testdata (Breakout, 4 actions: ALE ids 0, 1, 3, 4) whose record is edited the way
another collection would have written it."""
import json
import os
import shutil

import pytest

from ccvl_tf.data import dataset_record
from ccvl_tf.data import replay_source
from ccvl_tf.data.replay_files import DatasetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
BREAKOUT = dict(game="Breakout", action_set=[0, 1, 3, 4], observation_shape=(84, 84, 4))


def _check(path, **run):
  """dataset_record.check of the directory `path`, resolved once as open_dataset does."""
  return dataset_record.check(replay_source.replay_source(str(path)), **run)


def _copy(tmp_path, **changes):
  """A copy of the testdata with its record's keys changed (None: the key removed)."""
  d = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, d)
  path = d / "ccvl_dataset.json"
  meta = json.loads(path.read_text())
  for key, value in changes.items():
    if value is None:
      meta.pop(key, None)
    else:
      meta[key] = value
  path.write_text(json.dumps(meta))
  return d


def test_the_testdata_record_agrees_with_breakout_in_any_spelling():
  assert _check(TESTDATA, **BREAKOUT) == []
  assert _check(TESTDATA, **dict(BREAKOUT, game="breakout")) == []


def test_a_dataset_of_another_game_with_as_many_actions_is_refused_naming_both(tmp_path):
  # Atlantis has 4 actions too (ALE ids 0, 1, 11, 12): the action count alone lets it through.
  d = _copy(tmp_path, game="Atlantis", action_set=[0, 1, 11, 12])
  with pytest.raises(DatasetError) as e:
    _check(str(d), **BREAKOUT)
  msg = str(e.value)
  assert msg.startswith(f"{d / 'ccvl_dataset.json'} records a dataset of another game or format")
  assert "the game Atlantis, but this run's game is Breakout" in msg
  assert "the action set (ALE action ids) [0, 1, 11, 12], but Breakout's is [0, 1, 3, 4]" in msg


def test_the_same_game_with_another_action_set_or_frame_format_is_refused(tmp_path):
  d = _copy(tmp_path, action_set=[0, 1, 2, 3])
  with pytest.raises(DatasetError, match=r"action set \(ALE action ids\) \[0, 1, 2, 3\], but "
                                         r"Breakout's is \[0, 1, 3, 4\]"):
    _check(str(d), **BREAKOUT)
  d2 = _copy(tmp_path / "b", stack_size=1, observation_shape=[10, 10, 4])  # MinAtar's format
  with pytest.raises(DatasetError, match=r"frames uint8 10x10x4 stacked 1 to uint8 10x10x4, but "
                                         r"Breakout's observations are uint8 84x84x4"):
    _check(str(d2), **BREAKOUT)
  d3 = _copy(tmp_path / "c", suite="minatar")
  with pytest.raises(DatasetError, match=r"the minatar game Breakout, but this run's game is "
                                         r"Breakout"):
    _check(str(d3), **BREAKOUT)


def test_what_could_not_be_checked_is_said(tmp_path):
  d = _copy(tmp_path, action_set=None)
  assert _check(str(d), **BREAKOUT) == [
      f"{d / 'ccvl_dataset.json'} does not record its action set: not checked against Breakout"]
  bare = tmp_path / "dqn_replay"
  shutil.copytree(TESTDATA, bare)
  os.remove(bare / "ccvl_dataset.json")
  assert _check(str(bare), **BREAKOUT) == [
      f"{bare} has no ccvl_dataset.json (a DQN Replay directory): its game and action set "
      f"cannot be checked against Breakout; checked instead: every action read is below the "
      f"game's action count (4) and the frames stack to uint8 84x84x4"]
  # A missing directory: nothing to say here (the reader refuses it, naming it).
  assert _check(str(tmp_path / "missing"), **BREAKOUT) == []
