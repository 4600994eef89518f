"""ccvl_tf.data.transitions.Transitions: the derivation of transitions from per-step arrays
(d3rlpy's MDPDataset meaning), batches, split, fingerprint, the .npz round trip, every refused
input as one line naming the field, and the Minari reader. Expected values are worked out by
hand from the small dataset below. The RLDS reader (TensorFlow): tests/test_transitions_rlds.py.
"""
import itertools
import json
import os

import numpy as np
import pytest

from ccvl_tf.data.transitions import Transitions

# Three episodes, 7 steps: A terminated after 3 steps (rows 0-2), B timed out after 3 steps
# (rows 3-5: 2 transitions, row 5 is only the s' of row 4), C terminated after 1 step (row 6).
OBS = np.array([[t, 10 * t] for t in range(7)], np.float64)
ACTIONS = np.array([0, 1, 2, 1, 0, 2, 1])
REWARDS = np.array([1, 2, 3, 4, 5, 6, 7], np.float64)
TERMINALS = np.array([0, 0, 1, 0, 0, 0, 1])
TIMEOUTS = np.array([0, 0, 0, 0, 0, 1, 0])


def steps(**change):
  """The hand-made arrays as from_arrays' arguments, with ``change`` applied."""
  a = dict(observations=OBS.copy(), actions=ACTIONS.copy(), rewards=REWARDS.copy(),
           terminals=TERMINALS.copy(), timeouts=TIMEOUTS.copy())
  a.update(change)
  return a


def hand_made(**kw):
  return Transitions.from_arrays(**steps(), **kw)


def assert_same(a: Transitions, b: Transitions):
  for name in ("observations", "obs_index", "next_index", "action", "reward", "terminal",
               "episode"):
    x, y = getattr(a, name), getattr(b, name)
    assert x.dtype == y.dtype and x.shape == y.shape, name
    np.testing.assert_array_equal(x, y, err_msg=name)
  assert a.num_actions == b.num_actions
  assert a.fingerprint() == b.fingerprint()


def test_transitions_derived_by_hand():
  t = hand_made()
  assert t.num_transitions == 6  # A: 3, B: 3 - 1 (timed out), C: 1
  np.testing.assert_array_equal(t.obs_index, [0, 1, 2, 3, 4, 6])
  # s' = the next row; terminal transitions (rows 2, 6) name their own row
  np.testing.assert_array_equal(t.next_index, [1, 2, 2, 4, 5, 6])
  np.testing.assert_array_equal(t.terminal, [0, 0, 1, 0, 0, 1])
  np.testing.assert_array_equal(t.episode, [0, 0, 0, 1, 1, 2])
  np.testing.assert_array_equal(t.action, [0, 1, 2, 1, 0, 1])
  np.testing.assert_array_equal(t.reward, [1, 2, 3, 4, 5, 7])
  assert t.num_actions == 3  # the largest action of a transition + 1
  assert t.observations.shape == (7, 2) and t.observation_shape == (2,)
  assert t.observation_dtype == np.float32
  for name, dtype in (("obs_index", np.int64), ("next_index", np.int64), ("action", np.int32),
                      ("reward", np.float32), ("terminal", np.float32), ("episode", np.int64)):
    assert getattr(t, name).dtype == dtype, name
  assert t.nbytes == 7 * 2 * 4 + 6 * (8 + 8 + 4 + 4 + 4 + 8)
  assert t.source == "arrays" and t.num_episodes == 3
  with pytest.raises(ValueError):
    t.reward[0] = 9.0  # read-only


def test_a_timed_out_step_is_not_read():
  # Row 5 ends episode B by a time-out: its action and reward are not part of any transition.
  t = Transitions.from_arrays(**steps(actions=np.r_[ACTIONS[:5], 99, ACTIONS[6]],
                                      rewards=np.r_[REWARDS[:5], np.nan, REWARDS[6]]))
  assert_same(t, hand_made())


def test_unused_rows_are_not_stored():
  # A one-step timed-out episode (row 7) gives no transition; its row is dropped.
  a = steps()
  a = {k: np.concatenate([v, v[-1:] if k not in ("terminals", "timeouts") else [0]])
       for k, v in a.items()}
  a["timeouts"][-1] = 1
  t = Transitions.from_arrays(**a)
  assert_same(t, hand_made())


def test_batch_by_hand():
  b = hand_made().batch(np.array([5, 0, 3]))
  assert list(b) == ["observation", "action", "reward", "next_observation", "terminal"]
  np.testing.assert_array_equal(b["observation"], [[6, 60], [0, 0], [3, 30]])
  np.testing.assert_array_equal(b["next_observation"], [[6, 60], [1, 10], [4, 40]])
  np.testing.assert_array_equal(b["action"], [1, 0, 1])
  np.testing.assert_array_equal(b["reward"], [7, 1, 4])
  np.testing.assert_array_equal(b["terminal"], [1, 0, 0])
  assert [b[k].dtype for k in b] == [np.float32, np.int32, np.float32, np.float32, np.float32]
  with pytest.raises(ValueError, match=r"^arrays: batch: expected indices in \[0, 6\), got 6$"):
    hand_made().batch([6])
  assert hand_made().batch([])["observation"].shape == (0, 2)


def test_batches_are_a_function_of_seed_and_number():
  t = hand_made()
  first = list(itertools.islice(t.batches(4, seed=3), 5))
  for i, b in enumerate(first):
    idx = np.random.default_rng([3, i]).integers(0, 6, 4)
    for k, v in t.batch(idx).items():
      np.testing.assert_array_equal(b[k], v)
  again = list(itertools.islice(t.batches(4, seed=3), 5))
  resumed = list(itertools.islice(t.batches(4, seed=3, start=2), 3))
  for x, y in zip(first, again):
    np.testing.assert_array_equal(x["action"], y["action"])
  for x, y in zip(first[2:], resumed):
    for k in x:
      np.testing.assert_array_equal(x[k], y[k])
  other = next(t.batches(4, seed=4))
  assert not all(np.array_equal(first[0][k], other[k]) for k in other)
  with pytest.raises(ValueError, match=r"^arrays: batch_size: expected an integer >= 1, got 0$"):
    t.batches(0, seed=3)  # checked at the call, not at the first batch


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_split_by_whole_episodes(seed):
  kept, held = hand_made().split(1 / 3, seed=seed)  # round(3 / 3) = 1 episode held out
  assert held.num_episodes == 1 and kept.num_episodes == 2
  assert kept.num_transitions + held.num_transitions == 6
  # the held-out part is one whole episode: the same as reading that episode's rows alone
  rows = {0: slice(0, 3), 3: slice(3, 6), 6: slice(6, 7)}[int(held.observations[0, 0])]
  alone = Transitions.from_arrays(**{k: v[rows] for k, v in steps().items()})
  for name in ("observations", "obs_index", "next_index", "action", "reward", "terminal",
               "episode"):
    np.testing.assert_array_equal(getattr(held, name), getattr(alone, name))
  assert held.num_actions == 3 and "held out" in held.source
  again = hand_made().split(1 / 3, seed=seed)
  assert again[1].fingerprint() == held.fingerprint()


@pytest.mark.parametrize("fraction", [0.1, 0.9, 0.0, 1.0, -1, "a"])
def test_split_leaves_both_parts_non_empty(fraction):
  with pytest.raises(ValueError, match=r"^arrays: held_out_fraction: expected a fraction .* "
                     r"of the 3 episodes"):
    hand_made().split(fraction, seed=0)


def test_fingerprint():
  t = hand_made()
  assert t.fingerprint() == hand_made().fingerprint()
  assert len(t.fingerprint()) == 64
  changed = steps()
  changed["rewards"][1] += 1e-3
  assert Transitions.from_arrays(**changed).fingerprint() != t.fingerprint()
  assert hand_made(num_actions=4).fingerprint() != t.fingerprint()


def test_npz_round_trip(tmp_path):
  for t in (hand_made(num_actions=5), hand_made().split(1 / 3, seed=1)[0], images()):
    path = str(tmp_path / "d.npz")
    t.save_npz(path)
    with np.load(path) as z:
      assert sorted(z.files) == ["actions", "num_actions", "observations", "rewards",
                                 "terminals", "timeouts"]
    back = Transitions.from_npz(path)
    assert_same(back, t)
    assert back.source == path
  assert not [f for f in os.listdir(tmp_path) if f != "d.npz"]  # no temporary left


def test_npz_without_timeouts_or_num_actions(tmp_path):
  path = str(tmp_path / "mdp.npz")
  np.savez(path, observations=OBS[:3], actions=ACTIONS[:3], rewards=REWARDS[:3],
           terminals=TERMINALS[:3])
  t = Transitions.from_npz(path)
  np.testing.assert_array_equal(t.obs_index, [0, 1, 2])
  np.testing.assert_array_equal(t.next_index, [1, 2, 2])
  assert t.num_actions == 3


def images(dtype=np.uint8):
  return Transitions.from_arrays(**steps(
      observations=np.arange(7 * 4 * 4 * 3).reshape(7, 4, 4, 3).astype(dtype)))


def test_image_observations_stay_uint8():
  t = images()
  assert t.observations.dtype == np.uint8 and t.observation_shape == (4, 4, 3)
  b = t.batch([3])
  assert b["observation"].dtype == np.uint8 and b["observation"].shape == (1, 4, 4, 3)
  np.testing.assert_array_equal(b["next_observation"][0], t.observations[4])


def test_integer_vectors_become_float32():
  t = Transitions.from_arrays(**steps(observations=OBS.astype(np.int16)))
  assert t.observations.dtype == np.float32
  assert_same(t, hand_made())


# Each wrong input: (the change to the hand-made arrays or the call, the field the one line
# must name right after the source, a part of what it must say).
NAN_OBS = OBS.copy()
NAN_OBS[4, 1] = np.nan
WRONG = {
    "actions short": (dict(actions=ACTIONS[:6]), "actions", "expected 7 rows (one per step, "
                      "as observations), got 6"),
    "rewards long": (dict(rewards=np.r_[REWARDS, 0]), "rewards", "expected 7 rows"),
    "terminals short": (dict(terminals=TERMINALS[:3]), "terminals", "expected 7 rows"),
    "observations rank 1": (dict(observations=OBS[:, 0]), "observations",
                            "expected [T, D] vectors"),
    "observations rank 3": (dict(observations=OBS.reshape(7, 1, 2)), "observations",
                            "channel axis"),
    "float images": (dict(observations=np.zeros((7, 2, 2, 1), np.float32)), "observations",
                     "images must be uint8"),
    "ragged observations": (dict(observations=[[0.0, 1.0]] * 6 + [[1.0]]), "observations",
                            "different shapes"),
    "action too large": (dict(num_actions=2), "actions",
                         "expected integers in [0, 2) (num_actions=2), got 2 at row 2"),
    "negative action": (dict(actions=np.r_[ACTIONS[:3], -1, ACTIONS[4:]]), "actions",
                        "expected integers >= 0, got -1 at row 3"),
    "fractional action": (dict(actions=np.r_[ACTIONS[:1], 0.5, ACTIONS[2:]]), "actions",
                          "expected integers (discrete actions), got 0.5 at row 1"),
    "nan observation": (dict(observations=NAN_OBS), "observations", "got nan at row 4"),
    "inf reward": (dict(rewards=np.r_[REWARDS[:2], np.inf, REWARDS[3:]]), "rewards",
                   "got inf at row 2"),
    "never ends": (dict(terminals=np.r_[TERMINALS[:6], 0], timeouts=np.r_[TIMEOUTS[:5], 0, 0]),
                   "terminals, timeouts", "the last 4 step(s) (row 3 to row 6) end no episode: "
                   "the last step must be terminal or timed out"),
    "terminal and timeout": (dict(timeouts=np.r_[TIMEOUTS[:6], 1]), "terminals, timeouts",
                             "row 6 is both terminal and timed out"),
    "flag not 0/1": (dict(terminals=np.r_[TERMINALS[:2], 2, TERMINALS[3:]]), "terminals",
                     "expected 0 or 1, got 2 at row 2"),
    "empty": (dict(observations=np.zeros((0, 2)), actions=[], rewards=[], terminals=[],
                   timeouts=[]), "observations", "the dataset is empty (0 steps)"),
    "no transition": (dict(observations=OBS[:1], actions=[0], rewards=[0], terminals=[0],
                           timeouts=[1]), "timeouts", "0 transitions"),
    "bad num_actions": (dict(num_actions=0), "num_actions", "expected an integer >= 1"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_wrong_input_is_one_line_naming_the_field(case):
  change, field, says = WRONG[case]
  change = dict(change)
  num_actions = change.pop("num_actions", None)
  with pytest.raises(ValueError) as e:
    Transitions.from_arrays(**steps(**change), num_actions=num_actions)
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith("arrays: {}: ".format(field)), message
  assert says in message, message


def test_wrong_npz_inputs(tmp_path):
  path = str(tmp_path / "data.npz")
  np.savez(path, observations=OBS, actions=ACTIONS, terminal=TERMINALS)
  with pytest.raises(ValueError, match=r"^{}: missing key\(s\) rewards, terminals: expected "
                     r"observations, actions, rewards, terminals \(and optionally timeouts, "
                     r"num_actions\), found actions, observations, terminal$".format(path)):
    Transitions.from_npz(path)
  np.savez(path, **steps(actions=np.r_[ACTIONS[:6], 7]))
  with pytest.raises(ValueError, match=r"^{}: actions: expected integers in \[0, 3\) "
                     r"\(num_actions=3\), got 7 at row 6$".format(path)):
    Transitions.from_npz(path, num_actions=3)
  with pytest.raises(ValueError, match=r"^{}: no such file".format(tmp_path / "none.npz")):
    Transitions.from_npz(str(tmp_path / "none.npz"))
  (tmp_path / "text.npz").write_text("not a zip")
  with pytest.raises(ValueError, match=r"^{}: not a readable \.npz".format(tmp_path / "text.npz")):
    Transitions.from_npz(str(tmp_path / "text.npz"))


def test_constructor_checks_the_layout():
  t = hand_made()
  arrays = [t.observations, t.obs_index, t.next_index, t.action, t.reward, t.terminal,
            t.episode, t.num_actions]
  Transitions(*arrays)
  bad = list(arrays)
  bad[2] = np.array([1, 2, 2, 4, 5, 5])  # s' of the terminal transition 5 is another row
  with pytest.raises(ValueError, match=r"^arrays: Transitions: obs_index, next_index: "):
    Transitions(*bad)


# The hand-made episodes in Minari's layout: each episode's observations include the final
# one (T + 1 rows); B's time-out is a truncation after its 2 steps, its last row the final s'.
MINARI_EPISODES = [
    dict(observations=np.r_[OBS[0:3], [[-1, -1]]], actions=ACTIONS[0:3], rewards=REWARDS[0:3],
         terminations=[0, 0, 1], truncations=[0, 0, 0]),
    dict(observations=OBS[3:6], actions=ACTIONS[3:5], rewards=REWARDS[3:5],
         terminations=[0, 0], truncations=[0, 1]),
    dict(observations=np.r_[OBS[6:7], [[-2, -2]]], actions=ACTIONS[6:7], rewards=REWARDS[6:7],
         terminations=[1], truncations=[0]),
]
DISCRETE_3 = json.dumps({"type": "Discrete", "dtype": "int64", "start": 0, "n": 3})
BOX_2 = json.dumps({"type": "Box", "dtype": "float32", "shape": [2], "low": [-9, -9],
                    "high": [99, 99]})


def write_minari(root, episodes=MINARI_EPISODES, **metadata):
  """A Minari dataset directory written with h5py per Minari's documented HDF5 layout:
  data/metadata.json and data/main_data.hdf5 with one episode_<i> group each (what minari's
  HDF5Storage.update_episodes writes), so that a test can also write what Minari would not
  (its metadata edited, episodes malformed). test_minari_written_by_minari uses minari."""
  import h5py  # pylint: disable=g-import-not-at-top
  data = os.path.join(root, "data")
  os.makedirs(data)
  meta = dict(total_episodes=len(episodes), total_steps=sum(len(e["actions"]) for e in episodes),
              data_format="hdf5", observation_space=BOX_2, action_space=DISCRETE_3)
  meta.update(metadata)
  with open(os.path.join(data, "metadata.json"), "w") as f:
    json.dump({k: v for k, v in meta.items() if v is not None}, f)
  with h5py.File(os.path.join(data, "main_data.hdf5"), "w") as f:
    for i, e in enumerate(episodes):
      g = f.create_group("episode_{}".format(i))
      g.attrs["id"] = i
      g.attrs["total_steps"] = len(e["actions"])
      g.create_dataset("observations", data=np.asarray(e["observations"], np.float32))
      g.create_dataset("actions", data=np.asarray(e["actions"], np.int64))
      g.create_dataset("rewards", data=np.asarray(e["rewards"], np.float64))
      g.create_dataset("terminations", data=np.asarray(e["terminations"], bool))
      g.create_dataset("truncations", data=np.asarray(e["truncations"], bool))
  return str(root)


def test_minari_equals_the_same_steps_as_arrays(tmp_path):
  path = write_minari(tmp_path / "toy-v0")
  t = Transitions.from_minari(path)
  assert_same(t, hand_made())  # the final observations of terminated episodes are not kept
  assert t.source == "minari:" + path
  assert_same(Transitions.from_minari(os.path.join(path, "data")), t)


@pytest.mark.filterwarnings("ignore:.*(is set to None|env_spec is None):UserWarning")
def test_minari_written_by_minari(tmp_path, monkeypatch):
  """The hand-made episodes written by Minari's own writer (minari.create_dataset_from_buffers,
  HDF5 format), read back as the same transitions."""
  minari = pytest.importorskip("minari")
  from gymnasium import spaces  # pylint: disable=g-import-not-at-top
  EpisodeBuffer = minari.data_collector.episode_buffer.EpisodeBuffer  # pylint: disable=invalid-name
  monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
  buffers = [EpisodeBuffer(observations=np.asarray(e["observations"], np.float32),
                           actions=np.asarray(e["actions"], np.int64),
                           rewards=np.asarray(e["rewards"], np.float64),
                           terminations=np.asarray(e["terminations"], bool),
                           truncations=np.asarray(e["truncations"], bool))
             for e in MINARI_EPISODES]
  minari.create_dataset_from_buffers(
      "toy/hand-v0", buffers, action_space=spaces.Discrete(3),
      observation_space=spaces.Box(-9, 99, (2,), np.float32), algorithm_name="by hand",
      data_format="hdf5")
  t = Transitions.from_minari(str(tmp_path / "toy" / "hand-v0"))
  assert_same(t, hand_made())


def test_minari_num_actions_from_the_action_space(tmp_path):
  wide = json.dumps({"type": "Discrete", "dtype": "int64", "start": 0, "n": 6})
  assert Transitions.from_minari(write_minari(tmp_path / "a", action_space=wide)
                                 ).num_actions == 6
  # no space recorded: given, or the largest action + 1
  path = write_minari(tmp_path / "b", action_space=None)
  assert Transitions.from_minari(path).num_actions == 3
  assert Transitions.from_minari(path, num_actions=4).num_actions == 4


def _episode(i, **change):
  e = dict(MINARI_EPISODES[i])
  e.update(change)
  return e


MINARI_WRONG = {
    "dict observations": (dict(observation_space=json.dumps(
        {"type": "Dict", "subspaces": {"a": json.loads(BOX_2)}})), "observation_space",
        "a Dict space: only one array observation per step (Box) is read"),
    "box actions": (dict(action_space=BOX_2), "action_space",
                    "expected Discrete actions, got a Box space"),
    "never ends": (dict(episodes=[_episode(0, terminations=[0, 0, 0])]), "episode_0",
                   "never ends: its last step 2 is neither terminated nor truncated"),
    "early end": (dict(episodes=[_episode(0, terminations=[0, 1, 1])]),
                  "episode_0/terminations", "set at step 1, before the episode's last step 2"),
    "observation rows": (dict(episodes=[_episode(1, observations=OBS[3:5])]),
                         "episode_0/observations", "expected 3 rows (steps + 1"),
    "action range": (dict(episodes=[_episode(0, actions=[0, 3, 1])]), "actions",
                     "expected integers in [0, 3) (num_actions=3), got 3 at episode_0 step 1"),
    "nan reward": (dict(episodes=[_episode(1), _episode(0, rewards=[0, np.nan, 0])]), "rewards",
                   "got nan at episode_1 step 1"),
    "arrow format": (dict(data_format="arrow"), "data_format", "expected hdf5"),
}


@pytest.mark.parametrize("case", sorted(MINARI_WRONG))
def test_minari_wrong_input_is_one_line_naming_the_field(tmp_path, case):
  change, field, says = MINARI_WRONG[case]
  path = write_minari(tmp_path / "bad-v0", **change)
  with pytest.raises(ValueError) as e:
    Transitions.from_minari(path)
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith("minari:{}: {}: ".format(path, field)), message
  assert says in message, message


def test_minari_missing_files(tmp_path):
  with pytest.raises(ValueError, match=r"^minari:{}: expected a Minari dataset directory "
                     r"holding data/metadata.json and data/main_data.hdf5".format(tmp_path)):
    Transitions.from_minari(str(tmp_path))
  path = write_minari(tmp_path / "toy-v0")
  with pytest.raises(ValueError, match=r"^minari:.*: num_actions: given 4, but the dataset's "
                     r"action space is Discrete\(3\)$"):
    Transitions.from_minari(path, num_actions=4)


def test_benchmark_runs_small():
  from ccvl_tf.bench import transitions as bench  # pylint: disable=g-import-not-at-top
  out = bench.run(num_transitions=2000, batch_size=32, seconds=0.05)
  n, m = out["transitions"], out["stored_observations"]
  assert n >= 2000 and 0 <= m - n <= out["episodes"]  # the timed-out episodes' last rows
  # 4 float32 observations per stored row, 8 + 8 + 4 + 4 + 4 + 8 bytes per transition
  assert out["nbytes"] == 16 * m + 36 * n
  assert out["batches_per_s"] > 0


def test_an_inferred_action_count_beyond_the_ceiling_is_refused():
  # Action ids not numbered 0..A-1 would make a network of a million outputs: one line naming
  # the largest action and where it is; a given num_actions means it.
  big = ACTIONS.copy()
  big[3] = 10**6
  with pytest.raises(ValueError, match=r"^arrays: actions: the largest action is 1000000 "
                     r"\(at row 3\), so the network would have 1000001 outputs for 4 "
                     r"distinct actions: expected actions numbered 0\.\.A-1 with A <= 4096 "):
    Transitions.from_arrays(**steps(actions=big))
  assert Transitions.from_arrays(**steps(actions=big), num_actions=10**6 + 1).num_actions == (
      10**6 + 1)
  edge = ACTIONS.copy()
  edge[3] = 4095  # the ceiling itself: inferred
  assert Transitions.from_arrays(**steps(actions=edge)).num_actions == 4096
