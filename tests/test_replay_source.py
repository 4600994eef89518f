"""A run's replay directory resolved once (replay_source.ReplaySource): the stages of one load
(the dataset record's check, the frame store and its cache check, the reader, the run's
identity) share one resolution and listing; an entry point given a path or a source gives the
same results and errors, and a stage below one takes a source only. On copies of the
real-format testdata (Breakout, 3 checkpoints), laid out as a DQN Replay run directory
(<game>/<run>/replay_logs) or copied to TensorFlow's in-memory file system (ram://, standing in
for gs://)."""
import collections
import os
import shutil
import uuid

import numpy as np
import pytest
import tensorflow as tf

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dataset_record, dqn_replay, replay_files, replay_plan, replay_source
from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.data.replay_files import DatasetError
from ccvl_tf.experiments.offline import dataset as offline_dataset
from ccvl_tf.experiments.offline.default_dataset import DefaultDataset
from ccvl_tf.experiments.offline.seeds import Seeds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
BREAKOUT = dict(game="Breakout", action_set=[0, 1, 3, 4], observation_shape=(84, 84, 4))


@pytest.fixture
def run_dir(tmp_path):
  """A copy of the testdata as a run directory: <tmp>/Breakout/1 holding replay_logs."""
  run = tmp_path / "Breakout" / "1"
  shutil.copytree(TESTDATA, run / "replay_logs")
  return str(run)


@pytest.fixture
def fs_calls(monkeypatch):
  """Counts, by path, the calls of replay_files.list_dir and replay_files.path_isdir (every
  stage reaches the file system through these two: the source's own look-ups, and the
  frame-store cache's listing as replay_files.list_dir)."""
  calls = {"list_dir": collections.Counter(), "path_isdir": collections.Counter()}
  for name, counter in calls.items():
    real = getattr(replay_files, name)

    def counted(path, real=real, counter=counter):
      counter[path] += 1
      return real(path)
    monkeypatch.setattr(replay_files, name, counted)
  return calls


def _settings(dataset_dir, root_dir):
  """An offline run's DataSettings on `dataset_dir` (the default dataset is never used)."""
  default = DefaultDataset(root_dir=root_dir, game="Breakout", steps=1000, policy="random",
                           env="sequential", behaviour_epsilon=0.0, seed=0)
  return offline_dataset.DataSettings(dataset_dir=dataset_dir, subset="all", batch_size=32,
                                      num_deltas=8, seeds=Seeds(0), default=default)


def _open(data):
  def no_env():
    raise AssertionError("a run with --dataset_dir collects nothing")
  return offline_dataset.open_dataset(data, no_env, BREAKOUT["observation_shape"],
                                      num_actions=4, log=lambda message: None,
                                      game="Breakout", action_set=BREAKOUT["action_set"])


def test_one_open_looks_at_the_run_directory_and_its_replay_logs_once_each(
    run_dir, tmp_path, fs_calls):
  logs = os.path.join(run_dir, "replay_logs")
  data = _settings(run_dir, str(tmp_path / "root"))
  opened = _open(data)
  # Resolving the run directory: is it a directory (1), is its replay_logs one (1), its
  # listing (1: no checkpoint files of its own, so replay_logs is the replay directory),
  # then the listing of replay_logs (1). The record's check, the reader's inspection (its
  # suffixes, its ccvl_dataset.json) and the identity (the run directory's listing) all use
  # these: a stage that resolved or listed again would count 2.
  assert fs_calls["path_isdir"] == {run_dir: 1, logs: 1}
  assert fs_calls["list_dir"] == {run_dir: 1, logs: 1}
  assert opened.store.num_transitions == FrameStore.from_replay(TESTDATA).num_transitions
  assert opened.identity["path"] == run_dir and opened.identity["files"] == 1
  # Nothing is kept from one open to the next: a second open looks again, once.
  fs_calls["path_isdir"].clear()
  fs_calls["list_dir"].clear()
  again = _open(data)
  assert fs_calls["list_dir"] == {run_dir: 1, logs: 1}
  assert again.identity == opened.identity


def test_a_path_and_its_source_give_the_same_results(run_dir, tmp_path):
  bare = tmp_path / "bare"  # a DQN Replay directory: no ccvl_dataset.json, notes returned
  shutil.copytree(TESTDATA, bare)
  os.remove(bare / replay_files.METADATA_FILENAME)
  for path in (run_dir, TESTDATA, str(bare)):
    source = replay_source.replay_source(path)
    assert replay_source.replay_source(source) is source
    assert source.replay_dir == replay_source.resolve_replay_dir(path)
    fresh = lambda: replay_source.replay_source(path)  # noqa: E731
    assert dataset_record.check(source, **BREAKOUT) == dataset_record.check(fresh(), **BREAKOUT)
    assert dqn_replay.inspect_dir(source) == dqn_replay.inspect_dir(fresh())
    assert dqn_replay.dataset_format(source) == dqn_replay.dataset_format(path)
    assert replay_source.list_suffixes(source) == replay_source.list_suffixes(path) == [0, 1, 2]
    assert offline_dataset.dataset_identity(source) == offline_dataset.dataset_identity(fresh())
    assert replay_plan.subset_plan(source, "1%") == replay_plan.subset_plan(path, "1%")
    from_source = FrameStore.from_replay(source, "all", num_actions=4)
    from_path = FrameStore.from_replay(path, "all", num_actions=4)
    for name, array in from_path.arrays().items():
      np.testing.assert_array_equal(from_source.arrays()[name], array, err_msg=name)
  assert dataset_record.check(replay_source.replay_source(str(bare)), **BREAKOUT)[0].startswith(
      f"{bare} has no {replay_files.METADATA_FILENAME} (a DQN Replay directory)")


def test_a_path_and_its_source_raise_the_same_errors_naming_the_directory(tmp_path):
  missing = str(tmp_path / "missing")
  a_file = tmp_path / "a_file"
  a_file.write_text("not a directory")
  empty = tmp_path / "empty"
  empty.mkdir()
  expected = {
      missing: f"replay directory does not exist: {missing}",
      str(a_file): f"replay directory {a_file} is a file, not a directory",
      str(empty): f"replay directory {empty} holds no Dopamine checkpoint files "
                  "('$store$_observation_ckpt.N.gz' ...)",
  }
  for path, message in expected.items():
    for given in (path, replay_source.replay_source(path)):
      with pytest.raises(DatasetError) as e:
        dqn_replay.inspect_dir(replay_source.replay_source(given))
      assert str(e.value) == message
      with pytest.raises(DatasetError) as e:
        FrameStore.from_replay(given)
      assert str(e.value) == message


@pytest.fixture
def ram_logs(tmp_path, monkeypatch):
  """The testdata copied to ram://.../Breakout/1/replay_logs, the frame-store cache under
  tmp_path."""
  monkeypatch.setenv(replay_files.CACHE_ENV, str(tmp_path / "cache"))
  root = "ram://ccvl_source_{}".format(uuid.uuid4().hex)
  logs = root + "/Breakout/1/replay_logs"
  tf.io.gfile.makedirs(logs)
  for name in sorted(os.listdir(TESTDATA)):
    with open(os.path.join(TESTDATA, name), "rb") as f, \
        tf.io.gfile.GFile(logs + "/" + name, "wb") as out:
      out.write(f.read())
  yield logs
  tf.io.gfile.rmtree(root)


def test_a_cached_remote_load_after_the_check_lists_the_remote_directory_once(
    ram_logs, fs_calls):
  FrameStore.from_replay(ram_logs, "all", num_actions=4, progress=lambda m: None)  # cached
  fs_calls["list_dir"].clear()
  source = replay_source.replay_source(ram_logs)
  assert dataset_record.check(source, **BREAKOUT) == []
  messages = []
  FrameStore.from_replay(source, "all", num_actions=4, progress=messages.append)
  offline_dataset.dataset_identity(source)
  # The check lists the directory (1); the cache's staleness check compares that listing,
  # and the identity hashes it: one listing in all, where each stage used to list again.
  assert fs_calls["list_dir"] == {ram_logs: 1}
  assert len(messages) == 1 and messages[0].startswith("Using the cached frame store")
  assert "source listing and" in messages[0]


def test_the_stages_below_the_entry_points_refuse_a_path_naming_what_they_take(run_dir):
  """dqn_replay.inspect_dir, dataset_record.check and dataset_identity take the source their
  entry point resolved once; a path there (which would be resolved and listed again) is a
  TypeError naming the function and what it takes."""
  stages = {"dqn_replay.inspect_dir": dqn_replay.inspect_dir,
            "dataset_record.check": lambda p: dataset_record.check(p, **BREAKOUT),
            "offline.dataset.dataset_identity": offline_dataset.dataset_identity}
  for name, stage in stages.items():
    with pytest.raises(TypeError) as e:
      stage(run_dir)
    assert str(e.value) == (f"{name} takes a replay_source.ReplaySource (made once by the "
                            f"entry point: replay_source.replay_source(path)), got str "
                            f"{run_dir!r}")


def test_a_game_folder_given_for_a_runs_replay_logs_names_its_runs(tmp_path):
  """The game folder (the one holding 1/, 2/, ...) where a run's replay_logs is expected:
  refused naming the runs it holds and the path to pass, before any data is read."""
  from ccvl_tf.experiments.offline import config as offline_config  # pylint: disable=g-import-not-at-top
  game = tmp_path / "Breakout"
  for run in ("2", "1", "10"):
    shutil.copytree(TESTDATA, game / run / "replay_logs")
  (game / "notes").mkdir()  # a folder that is not a run is not named
  source = replay_source.ReplaySource(str(game))
  assert source.game_folder_runs == ("1", "2", "10")
  said = (f"{game} is a game folder holding runs 1, 2, 10 (the DQN Replay layout "
          f"<game>/<run>/replay_logs), not a run's replay directory: pass "
          f"{game / '1' / 'replay_logs'}")
  assert source.game_folder_error() == said
  with pytest.raises(DatasetError) as raised:
    replay_source.list_suffixes(str(game))
  assert str(raised.value) == said
  with pytest.raises(ValueError) as raised:
    offline_config.OfflineConfig(dataset_dir=str(game), root_dir=str(tmp_path / "r")).validate()
  assert str(raised.value) == "--dataset_dir " + said
  # A run directory and its replay_logs are no game folder.
  for path in (game / "1", game / "1" / "replay_logs"):
    assert replay_source.ReplaySource(str(path)).game_folder_error() is None
  # A directory of neither kind keeps the plain message.
  with pytest.raises(DatasetError, match="holds no Dopamine checkpoint files"):
    replay_source.list_suffixes(str(game / "notes"))
