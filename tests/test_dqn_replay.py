"""ccvl_tf.data.dqn_replay: the Dopamine replay checkpoint reader, subsets, errors.

Checkpoints are hand-built here with gzip + np.save exactly as Dopamine's
OutOfGraphReplayBuffer.save does, independent of our writer. Frame values
identify slots: a real frame at slot s is filled with a value given below, the
episode-start padding frames are 0.
"""
import gzip
import json
import os
import re

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_validity
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.data import replay_plan
from ccvl_tf.data import replay_writer
from ccvl_tf.data.replay_files import DatasetError


def write_ckpt(d, suffix, frame_values, action, reward, terminal, add_count, invalid_range,
               extra=None):
  os.makedirs(d, exist_ok=True)
  obs = np.zeros((len(frame_values), 84, 84), np.uint8)
  obs[:] = np.asarray(frame_values, np.uint8)[:, None, None]
  arrays = {"$store$_observation": obs, "$store$_action": np.asarray(action, np.int32),
            "$store$_reward": np.asarray(reward, np.float32),
            "$store$_terminal": np.asarray(terminal, np.uint8),
            "add_count": np.array(add_count), "invalid_range": np.asarray(invalid_range)}
  arrays.update(extra or {})
  for name, arr in arrays.items():
    with open(os.path.join(d, "{}_ckpt.{}.gz".format(name, suffix)), "wb") as f:
      with gzip.GzipFile(fileobj=f, mode="wb") as out:
        np.save(out, arr, allow_pickle=False)


# Example A, not full (capacity 16, add_count 13, cursor 13):
# slot:     0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
# frame:    0  0  0 10 11 12  0  0  0 20 21 22 23  -  -  -   (0 = padding)
# action:   0  0  0  1  2  3  0  0  0  1  0  2  3
# reward:   0  0  0  0  1 -1  0  0  0  0  1  0  0
# terminal: 0  0  0  0  0  1  0  0  0  0  0  0  0
# Episode 1 = slots 3-5 (ends at 5), episode 2 = slots 9-12 (running).
# invalid_range = (13 - 1 + i) % 16, i < 5 = [12, 13, 14, 15, 0].
# Dopamine: not full -> 3 <= i < cursor - 1 = 12; minus invalid range; minus a
# terminal among i-3..i-1: slot 6 (5 in 3,4,5), 7 (5), 8 (5) are out.
# Valid: 3, 4, 5 (terminal), 9, 10, 11. Slot 12 has no next frame yet.
A_FRAMES = [0, 0, 0, 10, 11, 12, 0, 0, 0, 20, 21, 22, 23, 0, 0, 0]
A_ACTION = [0, 0, 0, 1, 2, 3, 0, 0, 0, 1, 0, 2, 3, 0, 0, 0]
A_REWARD = [0, 0, 0, 0, 1, -1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
A_TERM = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
A_EXPECTED = [  # (slot, obs stack, action, reward, next stack, terminal)
    (3, [0, 0, 0, 10], 1, 0., [0, 0, 10, 11], False),
    (4, [0, 0, 10, 11], 2, 1., [0, 10, 11, 12], False),
    (5, [0, 10, 11, 12], 3, -1., [0, 10, 11, 12], True),  # terminal: next = obs
    (9, [0, 0, 0, 20], 1, 0., [0, 0, 20, 21], False),
    (10, [0, 0, 20, 21], 0, 1., [0, 20, 21, 22], False),
    (11, [0, 20, 21, 22], 2, 0., [20, 21, 22, 23], False),
]

# Example B, full and wrapped (capacity 12, add_count 30, cursor 6):
# Chronological order from the cursor: 6 7 8 9 10 11 0 1 | 2 3 4 (padding) 5.
# Episode 1 ends at slot 1 (terminal); slots 2, 3, 4 pad episode 2; slot 5 is its
# first frame. Real frames: value 100 + slot.
# invalid_range = (6 - 1 + i) % 12 = [5, 6, 7, 8, 9].
# Dopamine: full -> candidates randint(6 - 12 + 3, 6 - 1) = -3..4 mod 12 =
# {9, 10, 11, 0, 1, 2, 3, 4}; minus invalid range (9) -> {10, 11, 0, 1, 2, 3, 4};
# terminal check: 2 (prev 11, 0, 1), 3 (0, 1, 2), 4 (1, 2, 3) contain slot 1 -> out.
# Valid in storage order: 0, 1 (terminal), 10, 11. Stacks wrap around the array end.
B_FRAMES = [100, 101, 0, 0, 0, 105, 106, 107, 108, 109, 110, 111]
B_ACTION = [0, 1, 0, 0, 0, 2, 3, 0, 1, 2, 3, 1]
B_TERM = [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
B_EXPECTED = [
    (0, [109, 110, 111, 100], 0, [110, 111, 100, 101], False),
    (1, [110, 111, 100, 101], 1, [110, 111, 100, 101], True),
    (10, [107, 108, 109, 110], 3, [108, 109, 110, 111], False),
    (11, [108, 109, 110, 111], 1, [109, 110, 111, 100], False),
]


@pytest.fixture
def dir_a(tmp_path):
  d = str(tmp_path / "a")
  write_ckpt(d, 0, A_FRAMES, A_ACTION, A_REWARD, A_TERM, 13, [12, 13, 14, 15, 0])
  return d


def _stack_values(obs):
  assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
  assert (obs == obs[:1, :1, :]).all()  # every frame constant
  return [int(v) for v in obs[0, 0, :]]


def test_reader_matches_hand_worked_example_with_padding(dir_a):
  got = list(dqn_replay.iterate_transitions(dir_a, 0))
  assert len(got) == len(A_EXPECTED)
  for t, (slot, obs, a, r, nxt, term) in zip(got, A_EXPECTED):
    assert _stack_values(t.observation) == obs, slot
    assert _stack_values(t["next_observation"]) == nxt, slot
    assert (t.action, t.reward, t.terminal) == (a, r, term), slot


def test_reader_full_wrapped_buffer_and_invalid_range(tmp_path):
  d = str(tmp_path / "b")
  write_ckpt(d, 3, B_FRAMES, B_ACTION, np.zeros(12), B_TERM, 30, [5, 6, 7, 8, 9])
  ckpt = dqn_replay.load_checkpoint(d, 3)
  np.testing.assert_array_equal(ckpt.valid_indices(), [0, 1, 10, 11])
  got = list(dqn_replay.iterate_transitions(d, 3))
  assert len(got) == 4
  for t, (slot, obs, a, nxt, term) in zip(got, B_EXPECTED):
    assert _stack_values(t.observation) == obs, slot
    assert _stack_values(t.next_observation) == nxt, slot
    assert (t.action, t.terminal) == (a, term), slot


@pytest.mark.parametrize("block_rows", [1, 7, 4096])
def test_streaming_reader_equals_full_load_on_real_testdata(monkeypatch, block_rows):
  d = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "testdata",
                   "dqn_replay", "Breakout", "1", "replay_logs")
  monkeypatch.setattr(dqn_replay, "STREAM_BLOCK_ROWS", block_rows)
  ckpt = dqn_replay.load_checkpoint(d, 1)
  idx = ckpt.valid_indices()
  ref = dqn_replay.transition_arrays(ckpt, idx)
  got = list(dqn_replay.iterate_transitions(d, 1))
  assert len(got) == idx.size > 900
  np.testing.assert_array_equal(np.stack([t.observation for t in got]), ref["observation"])
  np.testing.assert_array_equal(np.stack([t.next_observation for t in got]),
                                ref["next_observation"])
  np.testing.assert_array_equal([t.action for t in got], ref["action"])
  np.testing.assert_array_equal([t.terminal for t in got], ref["terminal"])
  assert sum(t.terminal for t in got) >= 3


def test_an_invalid_range_that_is_not_dopamines_for_the_cursor_is_refused(tmp_path):
  # Example A (cursor 13, Dopamine's invalid_range (13 - 1 + i) % 16 = [12, 13, 14, 15, 0])
  # with slot 4 listed instead of 12: it holds the cursor, so a check that only asks for the
  # cursor passed it and dropped slot 4 silently.
  d = str(tmp_path / "a")
  write_ckpt(d, 0, A_FRAMES, A_ACTION, A_REWARD, A_TERM, 13, [4, 13, 14, 15, 0])
  with pytest.raises(DatasetError, match=re.escape(
      "marks the slots [4, 13, 14, 15, 0] around the cursor, where Dopamine writes "
      "[12, 13, 14, 15, 0] for that cursor")):
    dqn_replay.load_checkpoint(d, 0)
  # A buffer nothing was added to keeps Dopamine's initial invalid_range (stack_size zeros).
  write_ckpt(str(tmp_path / "fresh"), 0, np.zeros(16), np.zeros(16), np.zeros(16),
             np.zeros(16), 0, [0, 0, 0, 0])
  assert dqn_replay.load_checkpoint(str(tmp_path / "fresh"), 0).slots.size == 0


def _dopamine_reference(terminal, add_count, invalid_range, cap, k=4, n=1):
  """Literal transcription of Dopamine's sample_index_batch candidate range and
  is_valid_transition (loops, get_range wrap-around), enumerating every index."""
  cursor = add_count % cap
  full = add_count >= cap
  if full:
    min_id, max_id = cursor - cap + k - 1, cursor - n
  else:
    min_id, max_id = k - 1, cursor - n
    if max_id <= min_id:
      return []
  out = set()
  for raw in range(min_id, max_id):
    index = raw % cap
    if index < 0 or index >= cap:
      continue
    if not full:
      if index >= cursor - n or index < k - 1:
        continue
    if index in set(invalid_range):
      continue
    start, end = index - k + 1, index + 1
    if start % cap < end % cap:
      stack = terminal[start:end]
    else:
      stack = terminal[[(start + i) % cap for i in range(end - start)]]
    if stack[:-1].any():
      continue
    out.add(index)
  return sorted(out)


def test_valid_indices_equals_dopamine_reference_on_random_buffers():
  rng = np.random.default_rng(0)
  for trial in range(300):
    cap = int(rng.integers(6, 40))
    terminal = (rng.random(cap) < rng.choice([0.05, 0.2, 0.5])).astype(np.uint8)
    add_count = int(rng.integers(0, 3 * cap))
    cursor = add_count % cap
    inv = np.array([(cursor - 1 + i) % cap for i in range(5)])
    ours = replay_validity.valid_indices(terminal, add_count, inv).tolist()
    assert ours == _dopamine_reference(terminal, add_count, inv, cap), trial


def test_subset_capacity_reproduces_batch_rl(tmp_path):
  # A full checkpoint logged like the DQN Replay Dataset: capacity 16, logged at
  # add_count = 2 * 16 + 15 = 47 (cursor 15), invalid_range [14, 15, 0, 1, 2],
  # no terminals. Whole checkpoint: slots 3..13.
  # "Subset" capacity 8 (batch_rl: buffer built with replay_capacity=8, then the
  # 16-slot arrays loaded): cursor 47 % 8 = 7, candidates randint(7 - 8 + 3, 6) =
  # 2..5, minus invalid range (2) -> slots 3, 4, 5 of the first 8.
  d = str(tmp_path / "s")
  write_ckpt(d, 0, np.arange(16) + 1, np.zeros(16), np.zeros(16), np.zeros(16), 47,
             [14, 15, 0, 1, 2])
  ckpt = dqn_replay.load_checkpoint(d, 0)
  assert ckpt.valid_indices().tolist() == list(range(3, 14))
  assert ckpt.valid_indices(replay_capacity=8).tolist() == [3, 4, 5]
  got = list(dqn_replay.iterate_transitions(d, 0, replay_capacity=8))
  assert [_stack_values(t.observation) for t in got] == [[1, 2, 3, 4], [2, 3, 4, 5],
                                                         [3, 4, 5, 6]]
  # Only the first 8 frames are decompressed.
  assert dqn_replay.load_checkpoint(d, 0, max_rows=8).observation.shape == (8, 84, 84)


def test_subset_plans(tmp_path):
  d = str(tmp_path / "run")
  for s in range(7):
    write_ckpt(d, s, A_FRAMES, A_ACTION, A_REWARD, A_TERM, 13, [12, 13, 14, 15, 0])
  assert replay_plan.subset_plan(d, "1%") == [(s, 10_000) for s in range(7)]
  assert replay_plan.subset_plan(d, "5%") == [(s, 50_000) for s in range(7)]
  assert replay_plan.subset_plan(d, "initial10%") == [(s, None) for s in range(5)]
  assert replay_plan.subset_plan(d, "all") == [(s, None) for s in range(7)]
  with pytest.raises(ValueError, match="initial10%"):
    replay_plan.subset_plan(d, "10%")
  # A subset capacity larger than the checkpoint means the whole checkpoint.
  assert len(list(dqn_replay.iterate_transitions(d, 0, replay_capacity=10_000))) == 6


def test_episode_end_indices_truncation(tmp_path):
  # Newer Dopamine: a pickled set of episode ends. Example A with slot 10 marked as
  # an episode end without terminal (a time-limit truncation): slot 10 is not a
  # transition (Dopamine), nor is 11 whose stack would cross it (ours).
  import pickle
  d = str(tmp_path / "e")
  write_ckpt(d, 0, A_FRAMES, A_ACTION, A_REWARD, A_TERM, 13, [12, 13, 14, 15, 0])
  with gzip.open(os.path.join(d, "episode_end_indices_ckpt.0.gz"), "wb") as f:
    pickle.dump({5, np.int64(10)}, f)
  ckpt = dqn_replay.load_checkpoint(d, 0)
  assert ckpt.episode_end_indices.tolist() == [5, 10]
  assert ckpt.valid_indices().tolist() == [3, 4, 5, 9]


# ------------------------------------------------------------------ writer

def test_writer_pads_episodes_and_logs_like_batch_rl(tmp_path):
  d = str(tmp_path / "w")
  w = replay_writer.DopamineReplayWriter(d, replay_capacity=8, metadata={"game": "Fake",
                                                                      "num_actions": 4})
  # Episode 1: frames 1, 2 (terminal). Episode 2: frames 3, 4, 5 ...
  w.add(np.full((84, 84), 1, np.uint8), 1, 0.5, False)   # pads slots 0-2, slot 3
  w.add(np.full((84, 84), 2, np.uint8), 2, 1.0, True)    # slot 4, terminal
  assert w.add_count == 5 and w.written_suffixes == []
  w.add(np.full((84, 84), 3, np.uint8), 3, 0.0, False)   # pads 5-7, slot 0 (wraps)
  # add_count 9 -> 9 % 8 = 1; logging happens when add_count % 8 == 7.
  for v in (4, 5, 6, 7, 8, 9):
    w.add(np.full((84, 84), v, np.uint8), 0, 0.0, False)  # slots 1..6; add_count 15
  assert w.written_suffixes == [0]  # logged at add_count 15
  w.add(np.full((84, 84), 10, np.uint8), 0, 0.0, False)  # slot 7
  w.add(np.full((84, 84), 11, np.uint8), 0, 0.0, False)  # slot 0, add_count 17
  assert w.close() == [0, 1]
  c0 = dqn_replay.load_checkpoint(d, 0)
  assert c0.add_count == 15
  np.testing.assert_array_equal(c0.observation[:, 0, 0], [3, 4, 5, 6, 7, 8, 9, 0])
  np.testing.assert_array_equal(c0.terminal, np.zeros(8))  # slot 4 (terminal) overwritten
  np.testing.assert_array_equal(c0.action, [3, 0, 0, 0, 0, 0, 0, 0])
  assert sorted(c0.invalid_range.tolist()) == [0, 1, 2, 6, 7]  # (7 - 1 + i) % 8
  c1 = dqn_replay.load_checkpoint(d, 1)  # final buffer: add_count = cursor (batch_rl)
  assert c1.add_count == 17 % 8
  assert c1.observation[0, 0, 0] == 11 and c1.observation[7, 0, 0] == 10
  meta = json.load(open(os.path.join(d, replay_files.METADATA_FILENAME)))
  assert meta["num_actions"] == 4 and meta["suffixes"] == [0, 1]
  with pytest.raises(FileExistsError):
    replay_writer.DopamineReplayWriter(d, replay_capacity=8)


# ------------------------------------------------------------------ bad input

def _snapshot(d):
  return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def test_missing_and_empty_directory(tmp_path):
  missing = str(tmp_path / "nope")
  with pytest.raises(DatasetError, match="nope"):
    list(dqn_replay.iterate_transitions(missing, 0))
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(DatasetError, match="empty"):
    replay_source.list_suffixes(str(empty))
  with pytest.raises(DatasetError, match="empty"):
    dqn_replay.load_checkpoint(str(empty), 0)


def test_suffix_with_a_missing_array(dir_a):
  os.remove(os.path.join(dir_a, "$store$_reward_ckpt.0.gz"))
  before = _snapshot(dir_a)
  with pytest.raises(DatasetError, match=r"\$store\$_reward_ckpt\.0\.gz"):
    replay_source.list_suffixes(dir_a)
  with pytest.raises(DatasetError, match=r"\$store\$_reward_ckpt\.0\.gz"):
    list(dqn_replay.iterate_transitions(dir_a, 0))
  assert _snapshot(dir_a) == before


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_or_truncated_gzip(dir_a, damage):
  for name in ("$store$_terminal_ckpt.0.gz", "$store$_observation_ckpt.0.gz"):
    path = os.path.join(dir_a, name)
    good = open(path, "rb").read()
    bad = b"not a gzip file at all" if damage == "garbage" else good[:len(good) // 2]
    open(path, "wb").write(bad)
    before = _snapshot(dir_a)
    with pytest.raises(DatasetError, match=name.replace("$", r"\$")):
      list(dqn_replay.iterate_transitions(dir_a, 0))
    assert _snapshot(dir_a) == before
    open(path, "wb").write(good)


def test_arrays_of_different_lengths(tmp_path):
  d = str(tmp_path / "l")
  write_ckpt(d, 0, A_FRAMES, A_ACTION[:15], A_REWARD, A_TERM, 13, [12, 13, 14, 15, 0])
  with pytest.raises(DatasetError, match="different lengths"):
    dqn_replay.load_checkpoint(d, 0)
  d2 = str(tmp_path / "l2")
  write_ckpt(d2, 0, A_FRAMES[:10], A_ACTION, A_REWARD, A_TERM, 13, [12, 13, 14, 15, 0])
  with pytest.raises(DatasetError, match=r"observation_ckpt\.0\.gz.*10 frames"):
    dqn_replay.load_checkpoint(d2, 0)


def test_actions_outside_the_action_set(dir_a):
  assert len(list(dqn_replay.iterate_transitions(dir_a, 0, num_actions=4))) == 6
  with pytest.raises(DatasetError, match=r"action_ckpt\.0\.gz.*outside.*\[0, 3\)"):
    list(dqn_replay.iterate_transitions(dir_a, 0, num_actions=3))


def test_dataset_of_another_games_action_count(dir_a):
  with open(os.path.join(dir_a, replay_files.METADATA_FILENAME), "w") as f:
    json.dump({"game": "Seaquest", "num_actions": 18}, f)
  with pytest.raises(DatasetError, match="Seaquest.*18 actions.*4 actions"):
    dqn_replay.load_checkpoint(dir_a, 0, num_actions=4)
  # Same count: fine.
  dqn_replay.load_checkpoint(dir_a, 0, num_actions=18)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e30])
def test_non_finite_or_absurd_rewards_are_refused_naming_the_file(tmp_path, bad):
  d = str(tmp_path / "r")
  reward = np.array(A_REWARD, np.float32)
  reward[3] = bad
  write_ckpt(d, 0, A_FRAMES, A_ACTION, reward, A_TERM, 13, [12, 13, 14, 15, 0])
  with pytest.raises(DatasetError, match=r"reward_ckpt\.0\.gz: rewards must be finite.*index 3"):
    dqn_replay.load_checkpoint(d, 0)


def test_negative_add_count_is_refused_not_read_modulo_the_capacity(tmp_path):
  d = str(tmp_path / "n")
  write_ckpt(d, 0, A_FRAMES, A_ACTION, A_REWARD, A_TERM, -3, [12, 13, 14, 15, 0])
  with pytest.raises(DatasetError, match=r"add_count_ckpt\.0\.gz: add_count must be >= 0 "
                                         r".*got -3"):
    dqn_replay.load_checkpoint(d, 0)


TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "testdata", "dqn_replay", "Breakout", "1", "replay_logs")


def _testdata_with(tmp_path, name, suffix, value):
  """A copy of the real-format testdata with one small array replaced (gzip + np.save)."""
  import shutil
  d = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, d)
  path = d / "{}_ckpt.{}.gz".format(name, suffix)
  with gzip.open(path, "wb") as f:
    np.save(f, np.asarray(value), allow_pickle=False)
  return d, path


def test_an_add_count_that_cannot_be_true_is_refused_naming_the_file_and_both_numbers(tmp_path):
  """Suffix 2 of the testdata is a final partial buffer: add_count 545 of 1,000 slots,
  invalid_range 544..548 around its cursor. An add_count of 10^12 would read it as full (cursor
  0): before, its 455 never-written slots entered the store as transitions (976 loaded where
  it holds 532)."""
  from ccvl_tf.data.frame_store import FrameStore
  assert FrameStore.from_replay(TESTDATA, suffixes=[2]).num_transitions == 532
  d, path = _testdata_with(tmp_path, "add_count", 2, np.int64(10**12))
  with pytest.raises(DatasetError) as e:
    FrameStore.from_replay(str(d), suffixes=[2])
  assert str(e.value) == (
      f"{path}: add_count 1000000000000 puts the write cursor at slot 0 of the 1000 slots, but "
      f"{d / 'invalid_range_ckpt.2.gz'} marks the slots [544, 545, 546, 547, 548] around the "
      f"cursor, where Dopamine writes [999, 0, 1, 2, 3] for that cursor (it recomputes them from "
      f"the cursor at every add): the two cannot both be true; the file is damaged or was not "
      f"written by Dopamine's replay buffer")
  # A wrapped buffer's add_count beyond the capacity is true (suffix 1: 1,999 of 1,000 slots).
  assert dqn_replay.load_checkpoint(TESTDATA, 1).add_count == 1999


def test_an_invalid_range_outside_the_buffer_is_refused_naming_the_file(tmp_path):
  d, path = _testdata_with(tmp_path, "invalid_range", 2, np.array([544, 545, 546, 547, 5000]))
  with pytest.raises(DatasetError, match=r"^{}: invalid_range slot 5000 is outside the buffer "
                                         r"of 1000 slots \[0, 1000\)".format(
                                             re.escape(str(path)))):
    dqn_replay.load_checkpoint(str(d), 2)


# The testdata's bookkeeping, read off its files: suffixes 0 and 1 were logged full (add_count
# 999 and 1999, cursor 999, invalid_range [998, 999, 0, 1, 2]); suffix 2 is the final partial
# buffer (add_count 545 = its cursor, invalid_range [544 .. 548]). Its record lists the
# suffixes [0, 1, 2], 2,500 steps, capacity 1,000, stack 4. The transitions each suffix holds
# (Dopamine's rule, test_valid_indices_equals_dopamine_reference_on_random_buffers):
TESTDATA_TRANSITIONS = {0: 980, 1: 977, 2: 532}


def _store_size(d, **kw):
  from ccvl_tf.data.frame_store import FrameStore
  return FrameStore.from_replay(str(d), **kw).num_transitions


def test_testdata_transitions_per_suffix():
  for suffix, n in TESTDATA_TRANSITIONS.items():
    ckpt = dqn_replay.load_checkpoint(TESTDATA, suffix)
    assert ckpt.slots.tolist() == _dopamine_reference(
        ckpt.terminal, ckpt.add_count, ckpt.invalid_range, ckpt.capacity)
    assert ckpt.slots.size == n
  assert _store_size(TESTDATA) == sum(TESTDATA_TRANSITIONS.values())


def test_an_add_count_beyond_the_capacity_with_its_cursor_in_place_is_refused_by_the_record(
    tmp_path):
  """add_count 10^12 + 545 in the final suffix 2 keeps its cursor (545) where invalid_range
  puts it, so the cursor check passed it: before, the half-written buffer read as full, 980
  transitions where it holds 532 (2,937 in the store instead of 2,489). The record's writer
  logs a full buffer only at add_count % 1000 == 999, and the final one at its cursor."""
  d, path = _testdata_with(tmp_path, "add_count", 2, np.int64(10**12 + 545))
  with pytest.raises(DatasetError) as e:
    _store_size(d)
  assert str(e.value) == (
      f"{path}: add_count 1000000000545 is not one the writer stores in suffix 2 of the "
      f"checkpoints [0, 1, 2]: it stores add_count % 1000 == 999 and add_count >= 2999 (suffix 2 "
      f"is log 3 of a writer that logs when add_count % 1000 reaches 999), or, the final buffer, "
      f"its write cursor below 1000, as recorded in {d / 'ccvl_dataset.json'}; the file is "
      f"damaged or the record is not this dataset's")
  # A logged-full count on suffix 1 (cursor 999 in place) far beyond what the record's 2,500
  # steps can add (4 x 2,500).
  d2, _ = _testdata_with(tmp_path / "b", "add_count", 1, np.int64(10**12 + 999))
  with pytest.raises(DatasetError, match=re.escape(
      "add_count 1000000000999 counts more transitions than 2500 steps can add: at most 10000")):
    _store_size(d2)


def test_without_the_record_a_count_past_the_written_slots_is_refused(tmp_path):
  """The DQN Replay layout (no ccvl_dataset.json): add_count 1545 on the final suffix 2 (545
  adds; its cursor and invalid_range in place). Before, the buffer read as full: 980
  transitions where it holds 532, 448 of them the old transitions of suffix 1 left in the
  slots past the cursor. Dopamine's count says those slots were written after suffix 1 was
  logged; they hold exactly suffix 1's actions, rewards and flags, so they were not."""
  d, path = _testdata_with(tmp_path, "add_count", 2, np.int64(1545))
  os.remove(d / "ccvl_dataset.json")
  with pytest.raises(DatasetError) as e:
    _store_size(d)
  assert str(e.value).startswith(
      f"{path}: add_count 1545 says all 1000 slots were written, but slots [545, 1000) hold "
      f"exactly the actions, rewards and terminal flags of suffix 1 ({d}): they were not written "
      f"since that checkpoint"), str(e.value)
  # The same directory with the true count reads as before, record or not.
  d2, _ = _testdata_with(tmp_path / "b", "add_count", 2, np.int64(545))
  os.remove(d2 / "ccvl_dataset.json")
  assert _store_size(d2) == sum(TESTDATA_TRANSITIONS.values())
  # A full buffer whose later slots were rewritten is read (suffix 1 after suffix 0).
  assert _store_size(d2, subset="all") == 2489


def test_an_add_count_of_zero_under_a_full_buffers_invalid_range_is_refused(tmp_path):
  """add_count 0 on suffix 1 (invalid_range still [998, 999, 0, 1, 2]): the cursor 0 is among
  those slots, so it passed, and the suffix read as empty: its 977 transitions dropped (1,512
  in the store instead of 2,489) without a line."""
  d, path = _testdata_with(tmp_path, "add_count", 1, np.int64(0))
  with pytest.raises(DatasetError, match=re.escape(
      f"{path}: add_count 0 puts the write cursor at slot 0 of the 1000 slots, but "
      f"{d / 'invalid_range_ckpt.1.gz'} marks the slots [998, 999, 0, 1, 2] around the cursor, "
      f"where Dopamine writes [999, 0, 1, 2, 3] for that cursor")):
    _store_size(d)


def test_a_suffix_the_record_lists_but_the_directory_lacks_is_refused_naming_it(tmp_path):
  """Every file of suffix 2 removed while ccvl_dataset.json lists [0, 1, 2]: before, the store
  held 1,957 transitions (suffixes 0 and 1) without a note. A suffix the record does not list
  would add transitions it does not know of."""
  import shutil
  d = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, d)
  for name in os.listdir(d):
    if "_ckpt.2.gz" in name:
      os.remove(d / name)
  with pytest.raises(DatasetError) as e:
    _store_size(d)
  assert str(e.value) == (
      f"{d / 'ccvl_dataset.json'} lists the checkpoints [0, 1, 2], but the directory holds "
      f"[0, 1]: suffix(es) [2] listed there have no files in the directory. Restore the missing "
      f"files (or remove the unlisted ones): a dataset is read whole or not at all")
  for name in os.listdir(TESTDATA):
    if "_ckpt.2.gz" in name:
      shutil.copy(os.path.join(TESTDATA, name), d / name)
      shutil.copy(os.path.join(TESTDATA, name), d / name.replace("_ckpt.2.", "_ckpt.3."))
  with pytest.raises(DatasetError, match=re.escape(
      "but the directory holds [0, 1, 2, 3]: suffix(es) [3] in the directory are not listed "
      "there")):
    _store_size(d)


def test_rewards_outside_the_clipped_range_are_refused_unless_the_record_says_unclipped(
    tmp_path):
  """Rewards 50 and -3 at two transitions of suffix 0 (the contract: stored rewards are clipped
  to [-1, 1]): before, trained on without a note."""
  slots = dqn_replay.load_checkpoint(TESTDATA, 0).slots
  reward = replay_files.read_array(os.path.join(TESTDATA, "$store$_reward_ckpt.0.gz"))[0].copy()
  reward[slots[10]], reward[slots[20]] = 50.0, -3.0
  d, path = _testdata_with(tmp_path, "$store$_reward", 0, reward)
  with pytest.raises(DatasetError) as e:
    _store_size(d)
  assert str(e.value).startswith(
      f"{path}: rewards must lie in [-1, 1] (Dopamine clips rewards before storing them, and the "
      f"learners are tuned for clipped rewards), got 50.0 at index {int(slots[10])} (2 of the "
      f"980 transitions read); clip them when writing the dataset, or record "
      f"\"reward_clipping\": false")
  # A dataset recorded as unclipped (a MinAtar collection without clipping) is read as stored.
  meta = json.load(open(d / "ccvl_dataset.json"))
  json.dump(dict(meta, reward_clipping=False), open(d / "ccvl_dataset.json", "w"))
  ckpt = dqn_replay.load_checkpoint(str(d), 0)
  assert (ckpt.reward[slots[10]], ckpt.reward[slots[20]]) == (50.0, -3.0)
  # The writer refuses to store them in the first place.
  w = replay_writer.DopamineReplayWriter(str(tmp_path / "w"), replay_capacity=8)
  with pytest.raises(ValueError, match=r"reward 50.0 is outside \[-1, 1\]"):
    w.add(np.zeros((84, 84), np.uint8), 0, 50.0, False)
