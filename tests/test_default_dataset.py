"""The default dataset is collected into a temporary folder and renamed into place whole: while
it is collected (and after an interrupted collection) its folder does not exist, two
collections of the same dataset at once keep the first one renamed, and the leftovers of a
killed collection are removed. Real ALE collections of 200 random-policy steps."""
import json
import os
import subprocess
import sys

import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import replay_files
from ccvl_tf.envs import atari
from ccvl_tf.experiments.offline import default_dataset


def _spec(root):
  return default_dataset.DefaultDataset(root_dir=str(root), game="Breakout", steps=200,
                                        policy="random", env="sequential",
                                        behaviour_epsilon=0.25, seed=0)


def _env(seed):
  return atari.AtariEnvironment("Breakout", seed=seed)


def _dot_folders(parent):
  return sorted(n for n in os.listdir(parent) if n.startswith("."))


def test_the_dataset_folder_appears_only_whole(tmp_path):
  spec = _spec(tmp_path)
  seen_during = []

  def log(line):
    if line.startswith("[collect]"):
      seen_during.append(os.path.exists(spec.out_dir))

  out = default_dataset.ensure_default_dataset(spec, _env, log)
  assert out == spec.out_dir == str(tmp_path / "default_dataset" / "Breakout")
  assert seen_during and not any(seen_during)  # a reader never saw a half-written dataset
  assert json.load(open(os.path.join(out, "COMPLETE")))["steps"] == 200
  assert os.path.exists(os.path.join(out, "ccvl_dataset.json"))
  assert _dot_folders(os.path.dirname(out)) == []  # the temporary folder was renamed
  # The files the writer wrote keep their verification at their place: the first load reads
  # only what it needs (a final buffer of 1,000,000 slots is not inflated again).
  written = sorted(n for n in os.listdir(out) if n.endswith(".gz"))
  assert len(written) == 6, written
  for name in written:
    path = os.path.join(out, name)
    assert replay_files.is_verified(path, replay_files.file_identity(path)), name


def test_an_interrupted_collection_leaves_nothing_in_place(tmp_path):
  spec = _spec(tmp_path)

  def log(line):
    if line.startswith("[collect]"):
      raise KeyboardInterrupt  # as a Ctrl-C half-way through

  with pytest.raises(KeyboardInterrupt):
    default_dataset.ensure_default_dataset(spec, _env, log)
  assert not os.path.exists(spec.out_dir)
  assert _dot_folders(os.path.dirname(spec.out_dir)) == []


@pytest.mark.slow
def test_two_collections_of_one_dataset_at_once_keep_the_first_renamed(tmp_path):
  """The second collection starts while the first is half-way and finishes first (here
  nested, in the first's progress line): the first then finds the same dataset in place and
  uses it."""
  spec = _spec(tmp_path)
  inner_logs, outer_logs = [], []

  def outer_log(line):
    outer_logs.append(line)
    if line.startswith("[collect]") and not inner_logs:
      default_dataset.ensure_default_dataset(spec, _env, inner_logs.append)

  default_dataset.ensure_default_dataset(spec, _env, outer_log)
  assert any(line.startswith("Behaviour policy") for line in inner_logs)
  assert any(line == f"Another process put the same default dataset in {spec.out_dir} first; "
                     f"using it." for line in outer_logs), outer_logs
  assert json.load(open(os.path.join(spec.out_dir, "COMPLETE")))["steps"] == 200
  assert _dot_folders(os.path.dirname(spec.out_dir)) == []


def test_the_leftovers_of_a_killed_collection_are_removed(tmp_path):
  spec = _spec(tmp_path)
  parent = os.path.dirname(spec.out_dir)
  gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  dead_pid = int(gone.stdout)
  os.makedirs(os.path.join(parent, f".Breakout.tmp-{dead_pid}-abc", "partial"))
  alive = f".Breakout.tmp-{os.getpid()}-xyz"  # a collection still running: kept
  os.makedirs(os.path.join(parent, alive))
  default_dataset.ensure_default_dataset(spec, _env, lambda line: None)
  assert _dot_folders(parent) == [alive]
