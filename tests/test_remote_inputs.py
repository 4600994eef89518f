"""Dataset paths the binaries take are read through tf.io.gfile when remote (gs://): the
ablation's --dataset_dir / --heldout_dir checks, the MinAtar dataset root's COMPLETE markers and
minatar_scores.json (compare.py --suite=minatar --data_dir, finetune and score export). Tested
on TensorFlow's in-memory file system (ram://), which takes the same code path as gs://."""
import json
import os

import pytest
import tensorflow as tf

import ccvl_tf  # noqa: F401
from ccvl_tf.data import minatar_datasets, replay_files
from ccvl_tf.experiments.offline import ablation


def _write(path, text):
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(text)


def test_check_input_dir_takes_a_remote_directory_and_names_the_flag(ram_root):
  replay_files.check_input_dir(ram_root, "--dataset_dir")
  _write(ram_root + "/file", "x")
  with pytest.raises(ValueError, match=r"^--dataset_dir ram://\S+/file is a file, not a "
                                       r"directory \(expected logs\)$"):
    replay_files.check_input_dir(ram_root + "/file", "--dataset_dir", "logs")
  with pytest.raises(ValueError, match=r"^--heldout_dir ram://\S+/none does not exist$"):
    replay_files.check_input_dir(ram_root + "/none", "--heldout_dir")


def test_ablation_takes_remote_dataset_and_heldout_dirs(ram_root, tmp_path):
  for name in ("a", "b"):
    tf.io.gfile.makedirs(ram_root + "/" + name)

  def cfg(dataset_dir, heldout_dir):
    return ablation.AblationConfig(dataset_dir=dataset_dir, heldout_dir=heldout_dir,
                                   output_dir=str(tmp_path / "out"))

  cfg(ram_root + "/a", ram_root + "/b").validate()
  with pytest.raises(ValueError, match="--heldout_dir must be another collection"):
    cfg(ram_root + "/a", ram_root + "/a/").validate()
  with pytest.raises(ValueError, match=r"--heldout_dir ram://\S+/c does not exist"):
    cfg(ram_root + "/a", ram_root + "/c").validate()


def test_minatar_dataset_root_is_read_remotely(ram_root):
  assert not minatar_datasets.is_complete(ram_root, "Breakout", 1)
  _write(os.path.join(minatar_datasets.run_dir(ram_root, "Breakout", 1),
                      minatar_datasets.COMPLETE_FILENAME), "")
  assert minatar_datasets.is_complete(ram_root, "Breakout", 1)
  with pytest.raises(FileNotFoundError, match="make_minatar_datasets.py"):
    minatar_datasets.load_scores(ram_root)
  _write(ram_root + "/" + minatar_datasets.SCORES_FILENAME, json.dumps(
      {"games": {"Breakout": {"dqn": 12.5, "random": 0.5, "runs": {}}}}))
  assert minatar_datasets.load_scores(ram_root) == {"Breakout": {"dqn": 12.5, "random": 0.5}}
