"""The inputs that are earlier runs' outputs are read through tf.io.gfile when remote (gs://):
evaluate.py's --policy_dir (an exported policy), finetune_online.py's --offline_dir (the
offline run's summary.json, checkpoints and fingerprint.json) and --offline_states, and the
fine-tuning suite's --compare_dir. Tested on TensorFlow's in-memory file system (ram://),
which takes the same code path as gs://: a local directory copied there is read as the local
one is, and gives the same results and the same error messages."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import ccvl_tf  # noqa: F401
from ccvl_tf.evaluation import rollouts
from ccvl_tf.experiments import score_export
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import finetune_suite
from ccvl_tf.experiments.online import offline_record
from ccvl_tf.experiments.online import penalty
from ccvl_tf.experiments.online import start as online_start
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import training
from tests.test_evaluate_binary import _export_gridworld_policy
from tests.test_offline_record import FINGERPRINT, SUMMARY, _run_dir


def _copy_tree(src, dst):
  """Copies the local directory `src` to `dst` (remote) file by file."""
  src = str(src)
  for dirpath, _, filenames in tf.io.gfile.walk(src):
    target = dst + dirpath[len(src):]
    tf.io.gfile.makedirs(target)
    for name in filenames:
      tf.io.gfile.copy(os.path.join(dirpath, name), target + "/" + name)
  return dst


def _write(path, text):
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)  # ram:// appends to an existing file rather than replacing it
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(text)


def test_the_path_helpers_read_remote_files_as_local_ones(ram_root, tmp_path):
  _write(ram_root + "/d/f.json", '{"a": 1}')
  assert paths.exists(ram_root + "/d/f.json") and paths.isfile(ram_root + "/d/f.json")
  assert paths.isdir(ram_root + "/d") and not paths.isfile(ram_root + "/d")
  assert not paths.exists(ram_root + "/none") and not paths.isdir(ram_root + "/none")
  assert not paths.isfile(ram_root + "/none")
  assert paths.read_text(ram_root + "/d/f.json") == '{"a": 1}'
  assert paths.read_bytes(ram_root + "/d/f.json") == b'{"a": 1}'
  # A missing remote file raises what a missing local one does.
  with pytest.raises(FileNotFoundError):
    paths.read_text(ram_root + "/none")
  with pytest.raises(FileNotFoundError):
    paths.read_text(str(tmp_path / "none"))
  # The input-directory check: the local messages, with the remote path in them.
  paths.check_input_dir(ram_root + "/d", "--policy_dir")
  for where in (ram_root, str(tmp_path)):
    _write(where + "/file", "x")
    with pytest.raises(ValueError) as e:
      paths.check_input_dir(where + "/file", "--offline_dir", "a run")
    assert str(e.value) == f"--offline_dir {where}/file is a file, not a directory (expected a run)"
    with pytest.raises(ValueError) as e:
      paths.check_input_dir(where + "/nope", "--compare_dir")
    assert str(e.value) == f"--compare_dir {where}/nope does not exist"


def test_a_file_system_that_answers_with_an_error_is_named_unreachable():
  """A scheme TensorFlow has no file system for answers as gs:// without network does (an
  error other than "not found"): the flag's check says the path could not be reached, and a
  read raises an OSError saying so (what a caller catches for a local read)."""
  with pytest.raises(ValueError, match=r"^--policy_dir could not reach nosuch://b/x "
                                       r"\(UnimplementedError: .*Google credentials$"):
    paths.check_input_dir("nosuch://b/x", "--policy_dir")
  with pytest.raises(OSError, match=r"^could not reach nosuch://b/x \(UnimplementedError"):
    paths.read_text("nosuch://b/x")


def test_an_exported_policy_on_a_remote_path_evaluates_as_the_local_copy(ram_root, tmp_path):
  local = _export_gridworld_policy(tmp_path / "policy")
  remote = _copy_tree(local, ram_root + "/policy")
  assert tf.io.gfile.exists(remote + "/saved_model.pb")
  assert tf.io.gfile.exists(remote + "/policy_specs.pbtxt")

  def evaluate(policy_dir, out):
    return score_export.run(score_export.EvaluateConfig(
        policy_dir=policy_dir, game="gridworld", output_dir=str(tmp_path / out), episodes=2,
        seeds=1, bootstrap_reps=20, progress=False))

  by_local, by_remote = evaluate(str(local), "local"), evaluate(remote, "remote")
  assert by_remote["policy_dir"] == remote
  assert by_local["policy_dir"] == os.path.abspath(str(local))
  assert by_remote["num_episodes"] == 2
  # The same policy and seeds: the same episodes, read from either copy.
  assert by_remote["raw_iqm_over_episodes"] == by_local["raw_iqm_over_episodes"]
  specs = {k: v for k, v in by_remote["policy_specs"].items() if k != "game_note"}
  assert specs == {k: v for k, v in by_local["policy_specs"].items() if k != "game_note"}
  assert specs == {"num_actions": 4, "observation_shape": [64], "observation_dtype": "float32"}
  assert by_remote["policy_specs"]["game_note"].startswith(f"{remote} has no ccvl_policy.json")
  assert ((tmp_path / "remote" / "returns.csv").read_text()
          == (tmp_path / "local" / "returns.csv").read_text())
  # The game record an export keeps is read remotely too (a wrong game is refused).
  _write(remote + "/" + rollouts.POLICY_RECORD, json.dumps({"game": "Pong"}))
  with pytest.raises(ValueError, match=r"ccvl_policy\.json records a policy of another game: "
                                       r"the game Pong, but this run's game is gridworld"):
    rollouts.check_policy_game(remote, "gridworld", None)
  # A remote directory without saved_model.pb is refused as a local one is.
  tf.io.gfile.makedirs(ram_root + "/empty")
  with pytest.raises(ValueError, match=r"is not a SavedModel directory \(no saved_model.pb\)"):
    rollouts.check_saved_model_dir(ram_root + "/empty")
  with pytest.raises(ValueError, match=r"^--policy_dir ram://\S+/nope does not exist"):
    rollouts.check_saved_model_dir(ram_root + "/nope")


def test_an_offline_run_on_a_remote_path_is_read_as_the_local_copy(ram_root, tmp_path):
  remote = _copy_tree(_run_dir(tmp_path), ram_root + "/off")
  assert offline_record.offline_record(remote) == SUMMARY
  assert training.read_fingerprint(remote + "/checkpoints/fingerprint.json") == FINGERPRINT
  online_config.OnlineConfig(offline_dir=remote, root_dir=str(tmp_path / "online")).validate()
  with pytest.raises(ValueError, match=r"^--offline_dir ram://\S+/nope does not exist"):
    online_config.OnlineConfig(offline_dir=ram_root + "/nope",
                               root_dir=str(tmp_path / "online")).validate()
  # A summary that disagrees with its checkpoints' record: refused naming both remote files.
  _write(remote + "/summary.json", json.dumps(dict(SUMMARY, num_transitions=50000)))
  with pytest.raises(ValueError) as e:
    offline_record.offline_record(remote)
  assert str(e.value).startswith(
      f"{remote}/summary.json records 'num_transitions' = 50000, but the checkpoints' "
      f"{remote}/checkpoints/fingerprint.json records 'num_transitions' = 49999"), str(e.value)
  # Checkpoints without a summary (found by listing the remote directory): refused.
  tf.io.gfile.remove(remote + "/summary.json")
  with pytest.raises(ValueError, match=r"summary.json is missing, but ram://\S+/checkpoints "
                                       r"holds checkpoints"):
    offline_record.offline_record(remote)


def test_a_remote_offline_checkpoint_restores(ram_root, tmp_path):
  """restore_offline finds the newest checkpoint of a remote run and restores from it."""
  variable = tf.Variable(3.0)
  counter = tf.Variable(7, dtype=tf.int64)
  tf.train.CheckpointManager(tf.train.Checkpoint(v=variable, step=counter),
                             str(tmp_path / "off" / "checkpoints"), 2).save(checkpoint_number=7)
  remote = _copy_tree(tmp_path / "off", ram_root + "/off")
  variable.assign(0.0)
  counter.assign(0)

  class Agent:
    train_step_counter = counter

    def restore_offline(self, path):
      assert path == remote + "/checkpoints/ckpt-7"
      tf.train.Checkpoint(v=variable, step=counter).restore(path).assert_consumed()
      return "both"

  assert online_start.restore_offline(Agent(), remote, log=lambda s: None) == 7
  assert float(variable.numpy()) == 3.0


def test_remote_offline_states_are_read(ram_root, tmp_path):
  observations = np.arange(24, dtype=np.uint8).reshape(3, 2, 4)
  np.savez_compressed(tmp_path / "states.npz", observation=observations)
  tf.io.gfile.copy(str(tmp_path / "states.npz"), ram_root + "/states.npz")
  np.testing.assert_array_equal(
      penalty.offline_states("minatar/Breakout", ram_root + "/states.npz", 2, 0),
      observations[:2])
  with pytest.raises(ValueError, match=r"^--offline_states 'ram://\S+/none.npz' is not a file$"):
    online_config.OnlineConfig(offline_dir=ram_root, root_dir=str(tmp_path / "o"),
                               offline_states=ram_root + "/none.npz").validate()
  online_config.OnlineConfig(offline_dir=ram_root, root_dir=str(tmp_path / "o"),
                             offline_states=ram_root + "/states.npz").validate()


def test_a_remote_compare_dir_gives_its_offline_runs(ram_root, tmp_path):
  cfg = finetune_suite.FinetuneSuiteConfig(compare_dir=ram_root, data_dir=str(tmp_path),
                                           output_dir=str(tmp_path / "out"),
                                           games=("Breakout",), seeds=("0",), methods=("cql",))
  root = finetune_suite.offline_dir(cfg, "cql", "Breakout", 0)
  assert root.startswith(ram_root + "/")
  with pytest.raises(ValueError, match=r"no offline run of CQL for Breakout seed 0"):
    finetune_suite.ensure_offline_summary(cfg, "cql", "Breakout", 0, log=lambda s: None)
  tf.io.gfile.makedirs(root + "/checkpoints")
  # A comparison that predates summary.json: it would be written into the input directory.
  with pytest.raises(ValueError, match=r"summary.json is missing \(the comparison predates "
                                       r"it\) and cannot be written into the remote "
                                       r"--compare_dir"):
    finetune_suite.ensure_offline_summary(cfg, "cql", "Breakout", 0, log=lambda s: None)
  _write(root + "/summary.json", json.dumps(SUMMARY))
  assert finetune_suite.ensure_offline_summary(cfg, "cql", "Breakout", 0,
                                               log=lambda s: None) == root
