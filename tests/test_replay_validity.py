"""Checkpoints as Dopamine itself leaves them: garbage in the slots no sampler reads.

Dopamine's OutOfGraphReplayBuffer allocates its arrays with np.empty; a buffer that is
not full (the last checkpoint of any run, a user's own small collection) therefore
saves whatever bytes were in memory past add_count, and nothing keeps the slots of
invalid_range clean either. The buffers here are built the way Dopamine's ``add``
fills them (stack_size - 1 zero transitions before an episode's first frame, a
circular cursor, episode_end_indices as a pickled set) and saved the way its ``save``
writes them (gzip + np.save, the set pickled), independent of our writer; the
unwritten slots are filled with garbage of every kind explicitly (np.empty is not
deterministic). Expected transitions come from the test's own record of what was
added and the literal Dopamine transcription in test_dqn_replay.
"""
import gzip
import os
import pickle

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay
from ccvl_tf.data.replay_files import DatasetError
from ccvl_tf.data.frame_store import FrameStore
from tests.test_dqn_replay import _dopamine_reference

K = 4
GARBAGE_REWARDS = [np.nan, np.inf, -np.inf, 1e31, -1.2094326e31]
GARBAGE_ACTIONS = [-7, 255, 2**31 - 1, 4, -2**31]
GARBAGE_TERMINALS = [3, 255, 2]


class DopamineLikeBuffer:
  """The arrays of Dopamine's OutOfGraphReplayBuffer as ``add`` writes them, starting
  from garbage in every slot (what np.empty may hand out)."""

  def __init__(self, capacity, seed=0):
    rng = np.random.default_rng(seed)
    self.cap = capacity
    self.frames = rng.integers(0, 256, (capacity, 84, 84), dtype=np.uint8)
    self.action = np.resize(np.array(GARBAGE_ACTIONS, np.int32), capacity)
    self.reward = np.resize(np.array(GARBAGE_REWARDS, np.float32), capacity)
    self.terminal = np.resize(np.array(GARBAGE_TERMINALS, np.uint8), capacity)
    self.add_count = 0
    self.episode_end_indices = set()
    self._episode_start = True
    # The clean copies: what the test itself put into each slot (garbage until then).
    self.written = np.zeros(capacity, bool)

  def _put(self, frame, action, reward, terminal):
    c = self.add_count % self.cap
    self.frames[c], self.action[c], self.reward[c], self.terminal[c] = frame, action, reward, terminal
    self.written[c] = True
    self.add_count += 1

  def add(self, frame_value, action, reward, terminal):
    if self._episode_start:
      for _ in range(K - 1):
        self.episode_end_indices.discard(self.add_count % self.cap)
        self._put(0, 0, 0.0, 0)
      self._episode_start = False
    if terminal:
      self.episode_end_indices.add(self.add_count % self.cap)
      self._episode_start = True
    else:
      self.episode_end_indices.discard(self.add_count % self.cap)
    self._put(frame_value, action, reward, int(terminal))

  @property
  def invalid_range(self):
    cursor = self.add_count % self.cap
    return np.array([(cursor - 1 + i) % self.cap for i in range(K + 1)])

  def save(self, d, suffix=0):
    os.makedirs(d, exist_ok=True)
    arrays = {"$store$_observation": self.frames, "$store$_action": self.action,
              "$store$_reward": self.reward, "$store$_terminal": self.terminal,
              "add_count": np.array(self.add_count), "invalid_range": self.invalid_range}
    for name, value in list(arrays.items()) + [("episode_end_indices",
                                                 set(self.episode_end_indices))]:
      with open(os.path.join(d, "{}_ckpt.{}.gz".format(name, suffix)), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb") as out:
          if isinstance(value, np.ndarray):
            np.save(out, value, allow_pickle=False)
          else:
            pickle.dump(value, out)
    return d


def play(buf, num_adds, seed=1):
  """Episodes of 5..40 steps; real frame values 1..250 (0 is padding); actions 0..3;
  rewards in {-1, 0, 1}. Returns the clean (frame value, action, reward, terminal)
  per slot as the buffer holds them."""
  rng = np.random.default_rng(seed)
  step = 0
  while buf.add_count < num_adds:
    length = int(rng.integers(5, 41))
    for t in range(length):
      if buf.add_count >= num_adds:
        break
      buf.add(1 + step % 250, int(rng.integers(0, 4)), float(rng.integers(-1, 2)),
              t == length - 1)
      step += 1
  return (buf.frames.copy(), buf.action.copy(), buf.reward.copy(), buf.terminal.copy())


def expected_transitions(frames, action, reward, terminal, slots, cap):
  """Stacks of the clean frames at ``slots`` (mod cap), next = obs when terminal."""
  offs = np.arange(-K + 1, 1)
  obs = np.moveaxis(frames[(slots[:, None] + offs) % cap], 1, -1)
  term = terminal[slots] != 0
  nxt_slots = np.where(term, slots, slots + 1)
  nxt = np.moveaxis(frames[(nxt_slots[:, None] + offs) % cap], 1, -1)
  return dict(observation=obs, action=action[slots], reward=reward[slots],
              next_observation=nxt, terminal=term)


def assert_reads_exactly(d, exp, num_actions=4):
  got = list(dqn_replay.iterate_transitions(d, 0, num_actions=num_actions))
  assert len(got) == len(exp["action"])
  np.testing.assert_array_equal(np.stack([t.observation for t in got]), exp["observation"])
  np.testing.assert_array_equal(np.stack([t.next_observation for t in got]),
                                exp["next_observation"])
  np.testing.assert_array_equal([t.action for t in got], exp["action"])
  np.testing.assert_array_equal([t.reward for t in got], exp["reward"])
  np.testing.assert_array_equal([t.terminal for t in got], exp["terminal"])
  # The frame store holds the same transitions (in chronological order).
  store = FrameStore.from_replay(d, num_actions=num_actions)
  batch = store.gather(np.arange(store.num_transitions))
  key = lambda o, a, n, t: (o.tobytes(), int(a), n.tobytes(), bool(t))  # noqa: E731
  assert sorted(key(*x) for x in zip(batch["observation"], batch["action"],
                                     batch["next_observation"], batch["terminal"])) == sorted(
      key(*x) for x in zip(exp["observation"], exp["action"], exp["next_observation"],
                           exp["terminal"]))
  assert np.isfinite(batch["reward"]).all()


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
  """Capacity 500, add_count 273 (cursor 273), a checkpoint taken mid-buffer."""
  buf = DopamineLikeBuffer(500)
  clean = play(buf, 273)
  assert buf.add_count == 273 and buf.written.sum() == 273
  d = buf.save(str(tmp_path_factory.mktemp("partial") / "replay_logs"))
  return d, buf, clean


def test_partial_checkpoint_reads_back_exactly_its_valid_transitions(partial):
  d, buf, clean = partial
  # The unwritten slots really hold garbage of every kind, in the files.
  ckpt = dqn_replay.load_checkpoint(d, 0, num_actions=4)
  tail = slice(273, 500)
  assert np.isnan(ckpt.reward[tail]).any() and np.isinf(ckpt.reward[tail]).any()
  assert (np.abs(ckpt.reward[tail]) > 1e30).any()
  assert (ckpt.action[tail] < 0).any() and (ckpt.action[tail] >= 4).any()
  assert set(ckpt.terminal[tail].tolist()) == set(GARBAGE_TERMINALS)
  slots = np.array(_dopamine_reference(clean[3], 273, buf.invalid_range, 500), np.int64)
  assert slots.size > 200 and slots.max() == 271  # cursor 273 - update horizon 1 - 1
  np.testing.assert_array_equal(ckpt.slots, slots)
  assert_reads_exactly(d, expected_transitions(*clean, slots, 500))


def test_wrapped_checkpoint_with_garbage_around_the_cursor(tmp_path):
  """Capacity 64, add_count 150 (cursor 22, invalid_range 21..25). Garbage in what
  is never read: the rewards and actions of the whole invalid range, the terminal
  flags of slots 21 (its next state is not written yet) and 22 (the cursor), and the
  frame of slot 22. Stacks wrap around the end of the array."""
  buf = DopamineLikeBuffer(64)
  clean = play(buf, 150)
  inv = buf.invalid_range
  assert buf.add_count % 64 == 22 and inv.tolist() == [21, 22, 23, 24, 25]
  buf.reward[inv] = GARBAGE_REWARDS
  buf.action[inv] = GARBAGE_ACTIONS
  buf.terminal[[21, 22]] = [3, 255]
  buf.frames[22] = 77
  d = buf.save(str(tmp_path / "replay_logs"))
  slots = np.array(_dopamine_reference(clean[3], 150, inv, 64), np.int64)
  assert slots.tolist() == _dopamine_reference(buf.terminal, 150, inv, 64)
  assert slots.min() < K - 1  # some stacks wrap around the array end
  assert_reads_exactly(d, expected_transitions(*clean, slots, 64))


def _with(d_src, d, array, slot_values):
  """A copy of the checkpoint files in d_src with ``array`` changed at some slots."""
  os.makedirs(d)
  for n in os.listdir(d_src):
    data = open(os.path.join(d_src, n), "rb").read()
    open(os.path.join(d, n), "wb").write(data)
  path = os.path.join(d, "$store$_{}_ckpt.0.gz".format(array))
  with gzip.open(path, "rb") as f:
    arr = np.load(f)
  for slot, value in slot_values:
    arr[slot] = value
  with gzip.open(path, "wb") as f:
    np.save(f, arr, allow_pickle=False)
  return d


@pytest.mark.parametrize("array,value,num_actions,message", [
    ("reward", np.nan, None, r"rewards must be finite numbers \(\|r\| <= 1e9\), got nan"),
    ("reward", np.inf, None, r"rewards must be finite numbers .*, got inf"),
    ("reward", 1e31, None, r"rewards must be finite numbers .*, got 9\.9999\d*e\+30"),  # float32
    ("action", -7, None, r"actions must be >= 0 .*got -7"),
    ("action", 255, 4, r"actions outside the game's action set \[0, 4\): got 255"),
    ("terminal", 3, None, r"terminal flags must be 0 or 1, got 3"),
])
def test_garbage_inside_a_valid_slot_is_refused_naming_file_and_slot(
    partial, tmp_path, array, value, num_actions, message):
  d_src, buf, clean = partial
  slots = dqn_replay.load_checkpoint(d_src, 0).slots
  first, later = int(slots[50]), int(slots[120])
  d = _with(d_src, str(tmp_path / "bad"), array, [(later, value), (first, value)])
  terminal = clean[3].copy()
  if array == "terminal":  # a terminal flag also ends the stacks of the next 3 slots
    terminal[[first, later]] = value
  read = _dopamine_reference(terminal, 273, buf.invalid_range, 500)
  assert first in read and later in read
  pattern = r"{}_ckpt\.0\.gz: {} at index {} \(2 of the {} transitions read\)".format(
      r"bad/\$store\$_" + array, message, first, len(read))
  with pytest.raises(DatasetError, match=pattern):
    dqn_replay.load_checkpoint(d, 0, num_actions=num_actions)
  with pytest.raises(DatasetError, match=pattern):
    list(dqn_replay.iterate_transitions(d, 0, num_actions=num_actions))
  with pytest.raises(DatasetError, match=pattern):
    FrameStore.from_replay(d, num_actions=num_actions)


def test_a_subset_checks_only_the_slots_it_reads(partial, tmp_path):
  """A NaN reward at a written, valid slot past the first 100: batch_rl's capacity
  trick at 100 (and a literal 100-slot prefix) never read it; the whole checkpoint
  does."""
  d_src, buf, clean = partial
  d = _with(d_src, str(tmp_path / "bad"), "reward", [(150, np.nan)])
  assert 150 in dqn_replay.load_checkpoint(d_src, 0).slots
  with pytest.raises(DatasetError, match=r"reward_ckpt\.0\.gz: .* at index 150 "):
    FrameStore.from_plan(d, [(0, None)])
  trick = [t.reward for t in dqn_replay.iterate_transitions(d, 0, replay_capacity=100)]
  assert len(trick) > 80 and np.isfinite(trick).all()
  assert FrameStore.from_plan(d, [(0, 100)]).num_transitions == len(trick)
  assert FrameStore.from_plan(d, [(0, 100, "prefix")]).num_frames <= 100
