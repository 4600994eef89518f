"""ccvl_tf.data.frame_store and ccvl_tf.data.pipeline."""
import os

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_writer
from ccvl_tf.data.frame_store import FrameStore
from tests.test_dqn_replay import (A_ACTION, A_EXPECTED, A_FRAMES, A_REWARD, A_TERM,
                                   B_ACTION, B_EXPECTED, B_FRAMES, B_TERM, write_ckpt)


def _vals(stack):
  return [int(v) for v in stack[0, 0, :]]


def _records(batch):
  return sorted((tuple(_vals(o)), int(a), tuple(_vals(n)), bool(t))
                for o, a, n, t in zip(batch["observation"], batch["action"],
                                      batch["next_observation"], batch["terminal"]))


@pytest.fixture
def two_ckpts(tmp_path):
  d = str(tmp_path / "run")
  write_ckpt(d, 0, A_FRAMES, A_ACTION, A_REWARD, A_TERM, 13, [12, 13, 14, 15, 0])
  write_ckpt(d, 1, B_FRAMES, B_ACTION, np.zeros(12), B_TERM, 30, [5, 6, 7, 8, 9])
  return d


def test_store_holds_exactly_the_dopamine_transitions(two_ckpts):
  store = FrameStore.from_replay(two_ckpts)
  assert store.num_transitions == len(A_EXPECTED) + len(B_EXPECTED)
  batch = store.gather(np.arange(store.num_transitions))
  expected = sorted([(tuple(o), a, tuple(n), t) for _, o, a, _, n, t in A_EXPECTED] +
                    [(tuple(o), a, tuple(n), t) for _, o, a, n, t in B_EXPECTED])
  assert _records(batch) == expected
  assert batch["observation"].dtype == np.uint8 and batch["observation"].shape[1:] == (84, 84, 4)
  assert batch["terminal"].dtype == np.float32 and batch["action"].dtype == np.int32
  assert sorted(batch["terminal"].tolist()) == [0.0] * 8 + [1.0] * 2
  # Each frame held once: checkpoint A needs slots 0..12, B (reordered from its
  # cursor, wrap-free) all 12 slots.
  assert store.num_frames == 13 + 12


def test_store_matches_reader_on_writer_output_and_never_crosses_episodes(tmp_path):
  """Random episodes (lengths 1..20) through our writer with a small capacity (so
  the circular buffer wraps and logs several checkpoints). Frame value encodes
  (episode, step): 1 + (25 * episode + step) % 250; padding is 0."""
  d = str(tmp_path / "w")
  rng = np.random.default_rng(0)
  w = replay_writer.DopamineReplayWriter(d, replay_capacity=37)
  for ep in range(40):
    n = int(rng.integers(1, 21))
    for step in range(n):
      v = 1 + (25 * ep + step) % 250  # a gap of >= 5 between episodes
      w.add(np.full((84, 84), v, np.uint8), step % 4, float(min(step, 1)), step == n - 1)
  suffixes = w.close()
  assert len(suffixes) > 3
  store = FrameStore.from_replay(d)
  batch = store.gather(np.arange(store.num_transitions))
  reader = []
  for s in suffixes:
    for t in dqn_replay.iterate_transitions(d, s):
      reader.append((tuple(_vals(t.observation)), t.action, tuple(_vals(t.next_observation)),
                     t.terminal))
  assert _records(batch) == sorted(reader)
  for o, n, term in zip(batch["observation"], batch["next_observation"], batch["terminal"]):
    for stack in ([o] if term else [o, n]):
      vals = _vals(stack)
      real = [v for v in vals if v]
      # zeros (padding) only before the first real frame; real frames consecutive
      # steps of one episode.
      assert vals[:4 - len(real)] == [0] * (4 - len(real)), vals
      assert all(b == a + 1 for a, b in zip(real, real[1:])), vals


def test_sample_uniform_and_memory_per_transition(tmp_path):
  d = str(tmp_path / "long")
  w = replay_writer.DopamineReplayWriter(d, replay_capacity=400)
  for i in range(380):  # one long episode: 3 padding frames only
    w.add(np.full((84, 84), i % 200 + 1, np.uint8), i % 3, 0.0, False)
  w.close()
  store = FrameStore.from_replay(d, num_actions=3)
  assert store.bytes_per_transition < 7056 * 1.03
  b = store.sample(4000, np.random.default_rng(0))
  # Uniform over 376 transitions: each action ~ 1/3.
  counts = np.bincount(b["action"], minlength=3) / 4000
  assert np.abs(counts - 1 / 3).max() < 0.04
  with pytest.raises(replay_files.DatasetError, match="outside"):
    FrameStore.from_replay(d, num_actions=2)


def test_truncated_observation_file_detected_when_loading_store(two_ckpts):
  path = os.path.join(two_ckpts, "$store$_observation_ckpt.1.gz")
  data = open(path, "rb").read()
  open(path, "wb").write(data[:len(data) // 2])
  with pytest.raises(replay_files.DatasetError, match=r"observation_ckpt\.1\.gz"):
    FrameStore.from_replay(two_ckpts)


def test_subset_rows_limit_frames(tmp_path):
  d = str(tmp_path / "s")
  write_ckpt(d, 0, np.arange(16) + 1, np.zeros(16), np.zeros(16), np.zeros(16), 47,
             [14, 15, 0, 1, 2])
  store = FrameStore.from_plan(d, [(0, 8)])
  assert store.num_transitions == 3 and store.num_frames == 7  # slots 0..6
  full = FrameStore.from_plan(d, [(0, None)])
  assert full.num_transitions == 11


def test_pipeline_batches_contract_determinism_and_resume(two_ckpts):
  import tensorflow as tf
  from ccvl_tf.data import pipeline
  store = FrameStore.from_replay(two_ckpts)
  ds = pipeline.transition_dataset(store, batch_size=5, seed=7)
  spec = ds.element_spec
  assert spec == pipeline.transition_spec(5)
  it = iter(ds)
  b0, b1, b2 = next(it), next(it), next(it)
  assert b0["observation"].dtype == tf.uint8 and b0["observation"].shape == (5, 84, 84, 4)
  assert b0["terminal"].dtype == tf.float32 and b0["action"].dtype == tf.int32
  again = next(iter(pipeline.transition_dataset(store, batch_size=5, seed=7,
                                                num_parallel_calls=1)))
  for k in pipeline.KEYS:
    np.testing.assert_array_equal(b0[k].numpy(), again[k].numpy())
  resumed = next(iter(pipeline.transition_dataset(store, batch_size=5, seed=7, start_batch=2)))
  np.testing.assert_array_equal(b2["observation"].numpy(), resumed["observation"].numpy())
  ref = pipeline.sample_batch(store, 5, 7, 1)
  np.testing.assert_array_equal(b1["action"].numpy(), ref["action"])
  other = next(iter(pipeline.transition_dataset(store, batch_size=5, seed=8)))
  assert not all(np.array_equal(b0[k].numpy(), other[k].numpy()) for k in ("action", "observation"))


def test_data_benchmark_small_run():
  from ccvl_tf.bench import data as bench_data
  out = bench_data.run(quick=True, num_frames=3000, seconds=0.05, ale_steps=20)
  for key in ("stacked_transitions_per_s", "pipeline_transitions_per_s", "bytes_per_transition",
              "ale_env_steps_per_s", "store_500k_frames_bytes"):
    assert out[key] > 0, key
  assert 7056 < out["bytes_per_transition"] < 7200
  assert 3.5e9 < out["store_500k_frames_bytes"] < 3.6e9
  json_safe = __import__("json").dumps(out)
  assert "stacked_transitions_per_s" in json_safe


def _no_frames_read(monkeypatch):
  from ccvl_tf.data import replay_plan

  def refuse(self, dst):
    raise AssertionError("frames were read before the checks")

  monkeypatch.setattr(replay_plan.Chunk, "read_frames_into", refuse)


def test_reserve_refuses_a_batch_larger_than_the_dataset_before_reading_frames(
    two_ckpts, monkeypatch):
  from ccvl_tf.data import frame_store
  _no_frames_read(monkeypatch)
  n = len(A_EXPECTED) + len(B_EXPECTED)
  reserve = frame_store.Reserve(nbytes=0, what="--batch_size=100", min_transitions=100)
  with pytest.raises(ValueError, match=r"--batch_size=100 needs at least 100 transitions, but "
                                       r".*run holds {}$".format(n)):
    FrameStore.from_replay(two_ckpts, reserve=reserve)


def test_reserve_refuses_store_and_batches_beyond_the_available_memory(two_ckpts, monkeypatch):
  from ccvl_tf.data import frame_store
  store = FrameStore.from_replay(two_ckpts)
  # The machine as the check sees it: 1 MB more than the store needs.
  monkeypatch.setattr(frame_store, "_available_memory", lambda: store.nbytes + 1_000_000)
  _no_frames_read(monkeypatch)
  reserve = frame_store.Reserve(nbytes=3_000_000_000, what="--batch_size=3000",
                                min_transitions=1)
  with pytest.raises(MemoryError, match=r"the frame store for .*run \(\d+ frames\) needs 0\.00 "
                                        r"GB and --batch_size=3000 needs about 3\.00 GB, but "
                                        r"only 0\.00 GB of memory is available"):
    FrameStore.from_replay(two_ckpts, reserve=reserve)
  # After the store is in memory (e.g. restored from the cache) only the reserve is checked.
  with pytest.raises(MemoryError, match=r"^--batch_size=3000 needs about 3\.00 GB, but only"):
    reserve.check(store.num_transitions)
  frame_store.Reserve(nbytes=500_000, what="--batch_size=1").check(store.num_transitions)
