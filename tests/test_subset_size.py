"""A subset that would select the whole dataset is refused, naming the subset, the directory
and its size (replay_plan.check_subset_is_part, on the one route every replay directory is
read by: FrameStore.from_replay). Before, `--subset=1%` and `initial10%` on data smaller than
the subset trained on all of it under the subset's name."""
import os
import types

import pytest

from ccvl_tf.data import frame_store
from ccvl_tf.data import replay_plan
from ccvl_tf.data.replay_files import DatasetError
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")


def _info(table, suffixes):
  return types.SimpleNamespace(subsets=table, suffixes=suffixes, replay_dir="D")


def _loaded(*capacities):
  return types.SimpleNamespace(chunks=[types.SimpleNamespace(stored_rows=c) for c in capacities])


@pytest.mark.parametrize("table,suffixes,capacities,refused", [
    ({"1%": (10_000, None)}, [0, 1], (1_000, 1_000), True),       # rows >= every checkpoint
    ({"1%": (10_000, None)}, [0, 1], (1_000, 20_000), False),     # one checkpoint is larger
    ({"1%": (1_000, None)}, [0], (1_000,), True),                 # rows == capacity: all slots
    ({"1%": (999, None)}, [0], (1_000,), False),
    ({"initial10%": (None, 5)}, [0, 1, 2], (10, 10, 10), True),   # 5 checkpoints of 3
    ({"initial10%": (None, 5)}, list(range(6)), (10,) * 5, False),
    ({"p": (10, 2, "prefix")}, [0, 1], (10, 10), True),           # a table's prefix mode
    ({"p": (10, 2, "prefix")}, [0, 1, 2], (10, 10), False),
])
def test_a_subset_is_refused_exactly_when_it_selects_everything(table, suffixes, capacities,
                                                                refused):
  name = next(iter(table))
  call = lambda: replay_plan.check_subset_is_part(_info(table, suffixes), name,
                                                  _loaded(*capacities))
  if refused:
    with pytest.raises(DatasetError, match=f"^subset '{name}' is the first"):
      call()
  else:
    call()


def test_all_is_never_refused():
  replay_plan.check_subset_is_part(_info({"all": (None, None)}, [0]), "all", _loaded(5))


def test_the_probes_on_the_real_format_testdata():
  # 3 checkpoints of 1,000 slots (testdata/dqn_replay/Breakout/1, ccvl_dataset.json).
  with pytest.raises(DatasetError) as e:
    frame_store.FrameStore.from_replay(TESTDATA, "1%")
  assert str(e.value) == (
      f"subset '1%' is the first 10,000 slots of each checkpoint, and the checkpoints of "
      f"{TESTDATA} hold 1,000: it would be the whole dataset under the subset's name; give the "
      f"subset 'all' for the whole dataset (or a dataset with more data)")
  with pytest.raises(DatasetError, match=r"^subset 'initial10%' is the first 5 checkpoint\(s\), "
                     r"and .* holds 3 \(0, 1, 2\): it would be the whole dataset"):
    frame_store.FrameStore.from_replay(TESTDATA, "initial10%")
  # The whole of it, asked for by name.
  assert frame_store.FrameStore.from_replay(TESTDATA, "all").num_transitions == 2489


@pytest.mark.slow
def test_train_offline_on_a_subset_larger_than_the_data_is_one_line(tmp_path):
  root = tmp_path / "r"
  r = forked_binary.run("train_offline.py", ["--game=Breakout", f"--root_dir={root}",
                                             f"--dataset_dir={TESTDATA}", "--subset=1%",
                                             "--num_steps=2", "--reference_agents=none"],
                        timeout=300)
  assert r.returncode != 0
  lines = r.stderr.strip().splitlines()
  assert lines[-1].startswith("train_offline.py: error: ") and "subset '1%' is the first " \
      "10,000 slots of each checkpoint" in lines[-1], r.stderr[-3000:]
  assert len(lines) == 1, r.stderr[-3000:]
