"""ccvl_tf.data.replay_pool (K checkpoints in memory, a new draw every N batches) and
pipeline.pool_dataset, on a synthetic run of 50 small checkpoints written in the Dopamine
format by the project's writer."""
import os

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import replay_files, replay_pool, replay_writer
from ccvl_tf.data.frame_store import FrameStore

CAPACITY = 24
CHECKPOINTS = 50


def _frame(value: int) -> np.ndarray:
  """A frame whose first two pixels spell ``value`` (16 bits): the slot it came from."""
  f = np.zeros((84, 84), np.uint8)
  f[0, 0], f[0, 1] = value // 256, value % 256
  return f


def write_run(d: str, checkpoints: int = CHECKPOINTS, capacity: int = CAPACITY,
              offset: int = 0) -> list:
  """A run of `checkpoints` logged buffers of `capacity` slots (the last one the final,
  partial buffer), episodes of 7 steps; frame value = offset + the add's number."""
  w = replay_writer.DopamineReplayWriter(d, replay_capacity=capacity)
  step = 0
  while w.log_count < checkpoints - 1:
    w.add(_frame(offset + step), step % 3, 0.0, step % 7 == 6)
    step += 1
  for _ in range(12):  # the final buffer: transitions past the last logged one
    w.add(_frame(offset + step), step % 3, 0.0, step % 7 == 6)
    step += 1
  suffixes = w.close()
  assert suffixes == list(range(checkpoints))
  return suffixes


@pytest.fixture(scope="module")
def run50(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("pool") / "Pong" / "1" / "replay_logs")
  write_run(d)
  return d


def test_every_checkpoint_is_drawn_once_per_epoch_and_draws_depend_on_seed_only(run50):
  pool = replay_pool.CheckpointPool([run50], "all", 5, 3, seed=11)
  assert pool.num_checkpoints == 50 and pool.draws_per_epoch == 10
  seen = []
  for j in range(10):  # one epoch: 10 draws of 5 = the 50 checkpoints, each once
    draw = pool.draw(j)
    assert len(set(draw)) == 5
    seen += draw
  assert sorted(seen) == list(range(50))
  again = replay_pool.CheckpointPool([run50], "all", 5, 3, seed=11)
  assert [again.draw(j) for j in range(25)] == [pool.draw(j) for j in range(25)]
  other = replay_pool.CheckpointPool([run50], "all", 5, 3, seed=12)
  assert [other.draw(j) for j in range(10)] != [pool.draw(j) for j in range(10)]
  # A second epoch is another order of the same 50.
  assert sorted(sum((pool.draw(j) for j in range(10, 20)), ())) == list(range(50))
  assert [pool.draw(j) for j in range(10, 20)] != [pool.draw(j) for j in range(10)]


def test_a_draw_that_does_not_divide_the_checkpoints_holds_no_checkpoint_twice(run50):
  pool = replay_pool.CheckpointPool([run50], "all", 7, 3, seed=0)
  assert pool.draws_per_epoch == 8  # ceil(50 / 7)
  for j in range(24):
    assert len(set(pool.draw(j))) == 7
  assert set(sum((pool.draw(j) for j in range(8)), ())) == set(range(50))


def test_the_pool_holds_the_whole_store_of_its_checkpoints(run50):
  pool = replay_pool.CheckpointPool([run50], "all", 5, 3, seed=3)
  # |D|: a whole-dataset store of the same directory counts the same transitions.
  assert pool.num_transitions == FrameStore.from_replay(run50).num_transitions
  for j in (0, 4):
    store = pool.store_of_draw(j)
    suffixes = [s for _, s in pool.draw_names(j)]
    whole = FrameStore.from_plan(run50, [(s, None) for s in suffixes])
    for name, arr in whole.arrays().items():
      np.testing.assert_array_equal(getattr(store, name), arr)
    # 5 of 50 checkpoints in memory: about a tenth of the frames.
    assert store.num_frames <= 5 * CAPACITY
  assert pool.current_draw == 4


def _batches(pool, seed, start, stop, batch_size=6):
  from ccvl_tf.data import pipeline
  it = iter(pipeline.pool_dataset(pool, batch_size, seed=seed, start_batch=start))
  return [{k: v.numpy() for k, v in next(it).items()} for _ in range(start, stop)]


def test_pool_batches_are_the_draws_batches_and_resume_exactly(run50):
  swap = 4
  pool = replay_pool.CheckpointPool([run50], "all", 5, swap, seed=5)
  full = _batches(pool, seed=9, start=0, stop=22)  # draws 0..5
  # Batch i: the seeded sample of the whole store of draw i // 4's checkpoints.
  for i in (0, 3, 4, 13, 21):
    suffixes = [s for _, s in pool.draw_names(i // swap)]
    store = FrameStore.from_plan(run50, [(s, None) for s in suffixes])
    want = store.sample(6, np.random.default_rng([9, i]))
    for k in want:
      np.testing.assert_array_equal(full[i][k], want[k])
  # Resumed in a fresh pool (another process) at batch 6 (mid draw 1) and 12 (a draw start).
  for start in (6, 12):
    fresh = replay_pool.CheckpointPool([run50], "all", 5, swap, seed=5)
    resumed = _batches(fresh, seed=9, start=start, stop=22)
    for a, b in zip(full[start:], resumed):
      for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # The prefetch may have run ahead into the next draws; each draw was read once.
    assert fresh.current_draw >= 21 // swap
    assert len(fresh.swap_seconds) == fresh.current_draw - start // swap + 1


def test_over_a_run_every_checkpoint_is_sampled(run50):
  pool = replay_pool.CheckpointPool([run50], "all", 5, 2, seed=1)
  batches = _batches(pool, seed=2, start=0, stop=20, batch_size=32)  # 10 draws = one epoch
  values = {int(o[0, 0, 3]) * 256 + int(o[0, 1, 3]) for b in batches for o in b["observation"]}
  # Add number v sits in checkpoint v // (CAPACITY - 1) or the next (the writer logs when
  # add_count % C == C - 1; episode padding adds 3 slots per episode): every checkpoint's
  # adds appear, so the sampled frames span the whole run, first and last checkpoints too.
  whole = FrameStore.from_replay(run50)
  all_values = {int(f[0, 0]) * 256 + int(f[0, 1]) for f in whole.frames}
  span = max(all_values)
  assert min(values) < span * 0.05 and max(values) > span * 0.95
  hist = np.histogram(sorted(values), bins=10, range=(0, span + 1))[0]
  assert (hist > 0).all(), hist


def test_a_stream_opened_later_makes_the_earlier_one_stale(run50):
  from ccvl_tf.data import pipeline
  pool = replay_pool.CheckpointPool([run50], "all", 5, 2, seed=1)
  first = pool.open_stream()
  pool.activate(first, 0)
  second = pool.open_stream()
  with pytest.raises(replay_pool.StaleStream):
    pool.activate(first, 1)
  with pytest.raises(replay_pool.StaleStream):
    pool.store_for_batch(first, 0)
  with pytest.raises(RuntimeError, match="needs draw 1 of the checkpoint pool, which holds "
                     "draw 0"):
    pool.store_for_batch(second, 2)
  assert pipeline  # the pipeline's streams are opened the same way (pool_dataset)


def test_several_runs_are_pooled(tmp_path):
  a, b = str(tmp_path / "a"), str(tmp_path / "b")
  write_run(a, checkpoints=4)
  write_run(b, checkpoints=3, offset=20_000)
  pool = replay_pool.CheckpointPool([a, b], "all", 2, 1, seed=0)
  assert pool.num_checkpoints == 7 and pool.draws_per_epoch == 4
  names = set()
  for j in range(4):
    names |= set(pool.draw_names(j))
  assert names == {(a, s) for s in range(4)} | {(b, s) for s in range(3)}
  assert pool.num_transitions == (FrameStore.from_replay(a).num_transitions
                                  + FrameStore.from_replay(b).num_transitions)
  # A draw across both runs: their checkpoints side by side in one store.
  j = next(j for j in range(8) if len({d for d, _ in pool.draw_names(j)}) == 2)
  store = pool.store_of_draw(j)
  values = {int(f[0, 0]) * 256 + int(f[0, 1]) for f in store.frames}
  assert min(v for v in values if v) < 20_000 <= max(values)


def test_a_run_given_twice_however_spelled_is_refused_naming_both(tmp_path):
  """Before, RUN with a symlink to it, or with a byte-identical copy, was pooled twice: |D|
  doubled (scaling n(s)^-1) and its checkpoints drawn twice as often; only the literal same
  path twice was refused."""
  import shutil  # pylint: disable=g-import-not-at-top
  a = str(tmp_path / "a")
  write_run(a, checkpoints=2)
  os.symlink(a, tmp_path / "link")
  shutil.copytree(a, tmp_path / "copy")
  with pytest.raises(ValueError, match=rf"^--dataset_dir: {tmp_path}/link is the same directory "
                                       rf"as {a}; a run given twice would be pooled twice"):
    replay_pool.CheckpointPool([a, str(tmp_path / "link")], "all", 1, 1, seed=0)
  with pytest.raises(ValueError, match=rf"^--dataset_dir: {tmp_path}/copy holds the same data "
                                       rf"as {a} \(the same files, sizes and records: listing "
                                       rf"hash [0-9a-f]{{16}}\); a run given twice"):
    replay_pool.CheckpointPool([a, str(tmp_path / "copy")], "all", 1, 1, seed=0)
  write_run(str(tmp_path / "other"), checkpoints=2, offset=20_000)  # other data: pooled
  assert replay_pool.CheckpointPool([a, str(tmp_path / "other")], "all", 1, 1,
                                    seed=0).num_checkpoints == 4


def test_bad_settings_are_refused_naming_the_flag(run50, tmp_path):
  with pytest.raises(ValueError, match=r"--pool_checkpoints=51 is more than the 50 "
                     r"checkpoint\(s\) of subset 'all'"):
    replay_pool.CheckpointPool([run50], "all", 51, 10, seed=0)
  with pytest.raises(ValueError, match="--pool_swap_steps must be >= 1, got 0"):
    replay_pool.CheckpointPool([run50], "all", 5, 0, seed=0)
  with pytest.raises(ValueError, match="--pool_checkpoints must be >= 1"):
    replay_pool.CheckpointPool([run50], "all", 0, 10, seed=0)
  with pytest.raises(replay_files.DatasetError):
    replay_pool.CheckpointPool([str(tmp_path / "missing")], "all", 1, 10, seed=0)


def test_the_memory_of_the_largest_draw_is_checked_before_frames_are_read(run50, monkeypatch):
  from ccvl_tf.data import frame_store
  monkeypatch.setattr(frame_store, "_available_memory", lambda: 1_000_000)
  reserve = frame_store.Reserve(nbytes=700_000, what="training on --batch_size=32 batches")
  # 5 checkpoints of at most 24 frames: up to 5 * 24 * 7,065 ~ 0.85 MB, with 0.7 MB of
  # batches over 1 MB; one checkpoint (< 0.17 MB) fits.
  with pytest.raises(MemoryError, match="the 5 largest checkpoint"):
    replay_pool.CheckpointPool([run50], "all", 5, 10, seed=0, reserve=reserve)
  replay_pool.CheckpointPool([run50], "all", 1, 10, seed=0, reserve=reserve)
  assert os.path.isdir(run50)


def test_pool_benchmark_small_run(tmp_path):
  from ccvl_tf.bench import pool as bench_pool
  out = bench_pool.run(checkpoints=3, capacity=300, pool=1, swaps=3, work_dir=str(tmp_path))
  assert len(out["swap_s"]) == 3 and out["swap_frames_per_s"] > 0
  # One uint8 84x84 frame (7,056 B) + 9 B per slot + 8 B per transition, and the episodes'
  # 3 padding frames per 1,000 steps: a little above 7,073 B per transition.
  assert all(7073 <= b < 7200 for b in out["bytes_per_transition"])
  assert out["swap_s_per_1m_checkpoint"] > 0
  assert os.listdir(tmp_path) == []  # the run and its cache records removed


TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
OBSERVATION = "$store$_observation_ckpt.{}.gz"


def _copy_of_testdata(where) -> str:
  import shutil  # pylint: disable=g-import-not-at-top
  d = str(where / "Breakout" / "1" / "replay_logs")
  shutil.copytree(TESTDATA, d)
  return d


def _cut(path: str, keep: int) -> None:
  with open(path, "r+b") as f:
    f.truncate(keep)


def test_a_truncated_observation_file_is_named_when_the_pool_is_made(tmp_path, monkeypatch):
  """Before, a pooled run's truncated observation file was found only if and when a draw read
  it, as a tf.data traceback mid-training; the pool's survey now opens every observation file
  it may draw: its .npy header against the checkpoint, its gzip trailer's length against the
  header (replay_files.verified_read, as a prefix read of the whole-store route)."""
  monkeypatch.setenv(replay_files.CACHE_ENV, str(tmp_path / "cache"))
  bad_run = _copy_of_testdata(tmp_path / "b")
  bad = os.path.join(bad_run, OBSERVATION.format(1))
  _cut(bad, 40_000)  # of 71,862 bytes
  with pytest.raises(replay_files.DatasetError) as e:
    replay_pool.CheckpointPool([TESTDATA, bad_run], "all", 1, 1, seed=0)
  msg = str(e.value)
  assert msg.startswith(bad + " is corrupt: ") and "replace the file" in msg, msg
  assert len(msg.splitlines()) == 1


def test_a_file_damaged_after_the_survey_is_named_at_its_draw(tmp_path, monkeypatch):
  """What only a full read finds (here: a file cut short once the pool was made) is found when
  its draw reads it; the training batches then raise the pool's one line naming the file, not
  the tf.data error carrying it (a 129-line traceback before)."""
  from ccvl_tf.experiments.offline import dataset as offline_dataset  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline.seeds import Seeds  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(replay_files.CACHE_ENV, str(tmp_path / "cache"))
  run = _copy_of_testdata(tmp_path / "a")
  pool = replay_pool.CheckpointPool([run], "all", 1, 2, seed=0)
  (_, first), (_, second) = pool.draw_names(0)[0], pool.draw_names(1)[0]
  bad = os.path.join(run, OBSERVATION.format(second))
  _cut(bad, 40_000)
  batches = offline_dataset.Batches(None, 4, Seeds(0), pool=pool).training(0)
  got = []
  with pytest.raises(replay_files.DatasetError) as e:
    for batch in batches:
      got.append(batch)
  assert len(got) == 2  # draw 0's batches, then draw 1 fails
  msg = str(e.value)
  assert msg.startswith("checkpoint pool draw 1 (batches 2 to 3): cannot read " + bad), msg
  assert len(msg.splitlines()) == 1 and first != second
