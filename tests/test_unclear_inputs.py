"""Inputs that used to end in a traceback or a message that missed the cause now give one line
naming the file, key or flag and what was expected: a dataset record whose replay_capacity is
not the checkpoints' (a 37-line KeyError: 'terminal' from the code building the message), a
malformed 'subsets' table ("list index out of range"), a truncated fingerprint.json (a
JSONDecodeError), an output file path ending in '/' (37 s of benchmark work lost to
IsADirectoryError) and benchmark.py --iters=-1 (UnboundLocalError)."""
import json
import os
import shutil

import pytest

from ccvl_tf.bench import BenchmarkConfig
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import frame_store
from ccvl_tf.data.replay_files import DatasetError
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")


def test_a_record_of_another_capacity_names_the_file_and_both_numbers(tmp_path):
  d = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, d)
  record = json.loads((d / "ccvl_dataset.json").read_text())
  (d / "ccvl_dataset.json").write_text(json.dumps(dict(record, replay_capacity=500)))
  with pytest.raises(DatasetError) as e:
    frame_store.FrameStore.from_replay(str(d), "all")
  assert str(e.value) == (
      f"{d}/$store$_terminal_ckpt.0.gz: the checkpoint has 1000 slots, but "
      f"{d}/ccvl_dataset.json records replay_capacity 500; the file is damaged or the record "
      f"is not this dataset's")


@pytest.mark.parametrize("table,named", [
    ({"1%": [10]}, "'subsets' '1%' must be [rows, checkpoints] or [rows, checkpoints, 'prefix']"),
    ({"1%": ["a", None]}, "'subsets' '1%' must be"),
    ({"1%": [10, 0]}, "'subsets' '1%' must be"),
    ({"1%": [10, 2, "suffix"]}, "'subsets' '1%' must be"),
    ([[10, None]], "'subsets' must be an object of name -> [rows, checkpoints"),
])
def test_a_malformed_subsets_table_names_the_entry(table, named):
  with pytest.raises(DatasetError) as e:
    dqn_replay.format_from_metadata({"subsets": table}, "D/ccvl_dataset.json")
  assert str(e.value).startswith("D/ccvl_dataset.json: " + named), str(e.value)
  # A well-formed table reads back as tuples.
  assert dqn_replay.format_from_metadata(
      {"subsets": {"a": [10, None], "b": [5, 2, "prefix"], "c": [None, 1]}}, "D")["subsets"] == \
      {"a": (10, None), "b": (5, 2, "prefix"), "c": (None, 1)}


def test_a_truncated_fingerprint_names_the_file(tmp_path):
  ckpt = tmp_path / "checkpoints"
  ckpt.mkdir()
  (ckpt / training.FINGERPRINT).write_text('{"agent": "ccvl", "alp')
  with pytest.raises(training.FingerprintMismatch) as e:
    training.check_fingerprint(str(ckpt), {"agent": "ccvl"})
  assert str(e.value).startswith(
      f"{ckpt}/fingerprint.json (what the checkpoints beside it were trained with) cannot be "
      f"read (Unterminated string"), str(e.value)
  assert (ckpt / training.FINGERPRINT).read_text() == '{"agent": "ccvl", "alp'  # kept


def test_an_output_file_path_ending_in_a_slash_is_refused_before_any_work(tmp_path):
  with pytest.raises(ValueError, match=r"^--output .*/new/ ends with '/', so it names a "
                     r"directory, not a file; give the file's path \(e.g. .*/new/out.json\)$"):
    paths.check_output_file(str(tmp_path / "new") + "/", "--output")
  paths.check_output_file(str(tmp_path / "new" / "out.json"), "--output")


@pytest.mark.parametrize("name", ["iters", "rounds"])
def test_benchmark_counts_below_one_are_refused_naming_the_flag(name):
  with pytest.raises(ValueError, match=f"--{name}"):
    config_flags.check(BenchmarkConfig(output="o.json", **{name: -1}), prefix="--")
  config_flags.check(BenchmarkConfig(output="o.json", **{name: 1}), prefix="--")


def test_a_failed_output_write_names_the_file_and_leaves_no_partial_file(tmp_path, monkeypatch):
  """Before: evaluate.py on a full disk ended in an ENOSPC traceback and left a 0-byte
  returns.csv. The writes of evaluate.py's files (reporting.write_*_csv, its summary.json) go
  through writes.write_atomic: one WriteFailed naming the file, nothing partial left."""
  import errno
  from ccvl_tf.evaluation import reporting
  from ccvl_tf.evaluation import rollouts
  from ccvl_tf.runtime import writes
  records = [rollouts.EpisodeRecord(run=0, episode=0, return_=1.0, raw_score=2.0, length=3,
                                    deltas=[0.5], map_delta=0.5, log_belief=None)]
  path = tmp_path / "returns.csv"
  path.write_text("old\n")
  real_replace = os.replace

  def full_disk(src, dst):
    raise OSError(errno.ENOSPC, "No space left on device")
  monkeypatch.setattr(os, "replace", full_disk)
  with pytest.raises(writes.WriteFailed) as e:
    reporting.write_returns_csv(str(path), records, [0.5])
  assert str(e.value) == (f"could not write {path}: No space left on device; no partial file "
                          f"was left: free space (or make the path writable) and rerun the same "
                          f"command")
  monkeypatch.setattr(os, "replace", real_replace)
  assert os.listdir(tmp_path) == ["returns.csv"] and path.read_text() == "old\n"
  reporting.write_returns_csv(str(path), records, [0.5])
  assert path.read_text().splitlines()[1] == "0,0,3,1,2,0.5"
