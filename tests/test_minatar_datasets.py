"""MinAtar datasets: the [10, 10, C] stack-1 data path, scaled subsets, the DQN logger,
building/caching and binaries/make_minatar_datasets.py."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_validity
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.data import replay_plan
from ccvl_tf.data import replay_writer
from ccvl_tf.data import minatar_datasets as md
from ccvl_tf.data import minatar_dqn
from ccvl_tf.data import pipeline
from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.envs import minatar
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = (10, 10, 3)


def frame(v):
  """A [10, 10, 3] observation whose channel c holds 10 * v + c everywhere."""
  return (10 * v + np.arange(3, dtype=np.uint8))[None, None, :].repeat(10, 0).repeat(10, 1)


def value(obs):
  """Inverse of frame() (checks every pixel and channel)."""
  v = int(obs[0, 0, 0]) // 10
  np.testing.assert_array_equal(obs, frame(v))
  return v


def _records(batch):
  return sorted((value(o), int(a), float(r), value(n), bool(t))
                for o, a, r, n, t in zip(batch["observation"], batch["action"], batch["reward"],
                                         batch["next_observation"], batch["terminal"]))


@pytest.fixture
def tiny(tmp_path):
  """Capacity 4, stack 1. Adds (value, action, reward, terminal):
  episode 1: (1,0,0,-) (2,1,1,-) (3,2,0,T); episode 2: (4,0,0,-) (5,1,1,-) (6,2,1,T);
  episode 3: (7,0,0,-).
  Logging when add_count % 4 == 3 (no padding with stack 1):
    suffix 0 at add_count 3: slots [1, 2, 3, 0], cursor 3, invalid_range [2, 3]; not full,
      so slots 0 .. cursor-2 = {0, 1}: 1->2 and 2->3. (Slot 2, the terminal 3, is the
      newest slot: Dopamine never samples cursor - 1.)
    suffix 1 at add_count 7: slots [5, 6, 7, 4], full, cursor 3, invalid [2, 3]; the
      range [cursor - 4, cursor - 1) = {3, 0, 1} minus invalid {3} = {0, 1}: 5->6 and the
      terminal 6 (next = a copy of its observation). 4->5 (slot 3, the cursor) is lost
      at the seam, as 4-stacks lose their seam slots in the DQN Replay Dataset.
  add_count 7 % 4 == 3 at close: no final partial buffer."""
  d = str(tmp_path / "Tiny" / "0" / "replay_logs")
  w = replay_writer.DopamineReplayWriter(d, replay_capacity=4, stack_size=1,
                                      observation_shape=SHAPE,
                                      metadata=dict(game="Tiny", num_actions=3))
  for v, a, r, t in [(1, 0, 0, 0), (2, 1, 1, 0), (3, 2, 0, 1), (4, 0, 0, 0), (5, 1, 1, 0),
                     (6, 2, 1, 1), (7, 0, 0, 0)]:
    w.add(frame(v), a, float(r), bool(t))
  assert w.close() == [0, 1]
  return d


EXPECTED = [(1, 0, 0.0, 2, False), (2, 1, 1.0, 3, False), (5, 1, 1.0, 6, False),
            (6, 2, 1.0, 6, True)]


def test_writer_reader_store_pipeline_on_hand_worked_stack1_buffer(tiny):
  meta = replay_files.read_metadata(tiny)
  assert meta["stack_size"] == 1 and meta["observation_shape"] == [10, 10, 3]
  c0 = dqn_replay.load_checkpoint(tiny, 0, num_actions=3)
  assert c0.observation.shape == (4, 10, 10, 3) and c0.stack_size == 1
  assert [value(o) for o in c0.observation[:3]] == [1, 2, 3] and not c0.observation[3].any()
  assert c0.add_count == 3 and c0.invalid_range.tolist() == [2, 3]
  assert c0.valid_indices().tolist() == [0, 1]
  c1 = dqn_replay.load_checkpoint(tiny, 1)
  assert [value(o) for o in c1.observation] == [5, 6, 7, 4] and c1.add_count == 7
  assert c1.terminal.tolist() == [0, 1, 0, 0] and c1.valid_indices().tolist() == [0, 1]
  # The reader.
  got = [(value(t.observation), t.action, t.reward, value(t.next_observation), t.terminal)
         for s in replay_source.list_suffixes(tiny) for t in dqn_replay.iterate_transitions(tiny, s)]
  assert sorted(got) == EXPECTED
  arrays = dqn_replay.transition_arrays(c1, c1.valid_indices())
  assert arrays["observation"].shape == (2, 10, 10, 3)
  # The frame store: each observation once, states are the slots' frames.
  store = FrameStore.from_replay(os.path.dirname(tiny), num_actions=3)  # run dir works too
  assert store.stack_size == 1 and store.frame_shape == SHAPE
  assert store.observation_shape == SHAPE and store.num_transitions == 4
  batch = store.gather(np.arange(4))
  assert batch["observation"].shape == (4, 10, 10, 3) and batch["observation"].dtype == np.uint8
  assert batch["terminal"].dtype == np.float32 and batch["action"].dtype == np.int32
  assert _records(batch) == EXPECTED
  # tf.data: shapes from the store, the same batches as the numpy sampler.
  ds = pipeline.transition_dataset(store, batch_size=5, seed=3, num_parallel_calls=1)
  assert ds.element_spec == pipeline.transition_spec(5, frame_shape=SHAPE)
  first = next(iter(ds))
  ref = pipeline.sample_batch(store, 5, 3, 0)
  for k in pipeline.KEYS:
    np.testing.assert_array_equal(first[k].numpy(), ref[k])
  assert set(_records(ref)) <= set(EXPECTED)


def test_stacking_multichannel_frames_with_k2():
  frames = np.stack([frame(v) for v in (0, 1, 2, 3)])  # [4, 10, 10, 3]
  store = FrameStore(frames, np.zeros(4, np.int32), np.zeros(4, np.float32),
                     np.zeros(4, np.uint8), np.array([1, 2]), stack_size=2)
  assert store.observation_shape == (10, 10, 6)
  b = store.gather(np.array([0]))   # slot 1: frames 0, 1 -> channels [0,1,2 | 10,11,12]
  assert b["observation"][0, 3, 4].tolist() == [0, 1, 2, 10, 11, 12]
  assert b["next_observation"][0, 0, 0].tolist() == [10, 11, 12, 20, 21, 22]
  stacked = dqn_replay.stack_frames(frames[None, 1:3], frame_ndim=3)
  np.testing.assert_array_equal(stacked[0], store.gather(np.array([1]))["observation"][0])
  assert dqn_replay.stacked_shape((84, 84), 4) == (84, 84, 4)
  assert dqn_replay.stacked_shape((10, 10, 7), 1) == (10, 10, 7)


def test_wrong_observation_shape_is_rejected(tiny):
  with pytest.raises(replay_files.DatasetError, match=r"observation_ckpt\.0\.gz.*84, 84"):
    dqn_replay.load_checkpoint(tiny, 0, observation_shape=(84, 84))


def test_subset_table_and_scaled_subsets_on_a_tiny_dataset(tmp_path):
  assert md.checkpoint_capacity(100_000, 20) == 5001
  assert md.subset_table(5001, 20) == {"1%": [50, None, "prefix"], "5%": [250, None, "prefix"],
                                       "initial10%": [None, 2], "all": [None, None]}
  assert md.subset_table(10, 3)["1%"] == [2, None, "prefix"]  # at least one transition
  # One long episode, value = add index + 1; capacity 20; logs at add_count 19, 39, 59.
  d = str(tmp_path / "run")
  w = replay_writer.DopamineReplayWriter(
      d, replay_capacity=20, stack_size=1, observation_shape=SHAPE,
      metadata=dict(subsets={"1%": [5, None, "prefix"], "initial10%": [None, 1],
                             "all": [None, None]}))
  for j in range(59):
    w.add(np.full(SHAPE, j + 1, np.uint8), j % 3, 0.0, False)
  assert w.close() == [0, 1, 2]
  assert replay_plan.subset_plan(d, "1%") == [(0, 5, "prefix"), (1, 5, "prefix"),
                                             (2, 5, "prefix")]
  assert replay_plan.subset_plan(d, "initial10%") == [(0, None)]
  with pytest.raises(ValueError, match="initial10%"):
    replay_plan.subset_plan(d, "5%")  # this dataset declares no 5%
  store = FrameStore.from_replay(d, "1%")
  b = store.gather(np.arange(store.num_transitions))
  assert all((o == o[0, 0, 0]).all() for o in b["observation"])
  pairs = sorted((int(o[0, 0, 0]), int(n[0, 0, 0]))
                 for o, n in zip(b["observation"], b["next_observation"]))
  # The first 5 slots of each checkpoint: suffix 0 holds adds 1..19, suffixes 1 and 2
  # hold adds 21..40 and 41..60 in slots 0..19 (slot 19 holds the oldest add).
  assert pairs == [(v, v + 1) for v in (1, 2, 3, 4, 21, 22, 23, 24, 41, 42, 43, 44)]
  # batch_rl's capacity trick would pair slot 4 (value 25) with slot 0 (21): a bogus
  # transition with stack size 1 -- why this dataset's subsets are prefixes.
  c1 = dqn_replay.load_checkpoint(d, 1)
  assert 4 in replay_validity.valid_indices(c1.terminal, c1.add_count, c1.invalid_range,
                                       replay_capacity=5, stack_size=1)
  assert FrameStore.from_replay(d, "initial10%").num_transitions == 18  # slots 0..17
  assert FrameStore.from_replay(d, "all").num_transitions == 18 * 3


class _Recorder:
  """Wraps an env and records (obs value bytes, action) -> (reward, next obs, last)."""

  def __init__(self, env):
    self.env, self.steps, self._last = env, {}, None

  def __getattr__(self, name):
    return getattr(self.env, name)

  def reset(self):
    self._last = self.env.reset()
    return self._last

  def step(self, action):
    nxt = self.env.step(action)
    self.steps.setdefault((self._last.observation.tobytes(), int(action)), []).append(
        (float(nxt.reward), nxt.observation.tobytes(), bool(nxt.is_last())))
    self._last = nxt
    return nxt


TINY_DQN = minatar_dqn.BehaviourDQNConfig(batch_size=4, min_replay_size=8, target_update_period=5,
                        replay_capacity=50, epsilon_decay_frames=20)


def _tiny_run(tmp, seed, config=TINY_DQN):
  env = _Recorder(minatar.MinAtarEnvironment("Breakout", seed=seed))
  out = os.path.join(tmp, "s{}".format(seed))
  w = replay_writer.DopamineReplayWriter(out, replay_capacity=md.checkpoint_capacity(80, 4),
                                      stack_size=1, observation_shape=(10, 10, 4))
  summary, agent, greedy = minatar_dqn.run_dqn(env, 80, config=config, seed=seed, writer=w)
  w.close()
  store = FrameStore.from_replay(out, num_actions=3)
  return env, summary, store, agent


@pytest.mark.slow
def test_dqn_logs_every_transition_and_is_deterministic(tmp_path):
  env, summary, store, agent = _tiny_run(str(tmp_path), 0)
  assert summary["steps"] == 80 and summary["updates"] == 80 - 8 + 1
  assert int(agent.train_step_counter.numpy()) == 73
  batch = store.gather(np.arange(store.num_transitions))
  # Every stored transition is a real step; only seam slots are lost (<= 2 per checkpoint).
  assert 80 - 2 * 4 - 1 <= store.num_transitions <= 80
  for o, a, r, n, t in zip(batch["observation"], batch["action"], batch["reward"],
                           batch["next_observation"], batch["terminal"]):
    cands = env.steps[(o.tobytes(), int(a))]
    assert any(r == cr and bool(t) == cl and (cl or n.tobytes() == cn) for cr, cn, cl in cands)
  assert batch["terminal"].sum() >= 1  # Breakout episodes are short
  # Same seed: the same data and weights; another seed: other data.
  _, summary2, store2, agent2 = _tiny_run(str(tmp_path / "again"), 0)
  np.testing.assert_array_equal(store.frames, store2.frames)
  np.testing.assert_array_equal(store.action, store2.action)
  assert summary["episode_returns"] == summary2["episode_returns"]
  for v1, v2 in zip(agent._q_network.variables, agent2._q_network.variables):
    np.testing.assert_array_equal(v1.numpy(), v2.numpy())
  # Another seed (no updates needed to see it: the first 8 steps are random actions).
  _, _, store3, _ = _tiny_run(str(tmp_path), 1,
                              minatar_dqn.BehaviourDQNConfig(batch_size=4, min_replay_size=100))
  assert not np.array_equal(store.frames, store3.frames)
  assert not np.array_equal(store.action[:8], store3.action[:8])


def test_epsilon_schedule_and_config_checks():
  c = minatar_dqn.BehaviourDQNConfig()
  assert c.epsilon(0, 100_000) == 1.0 and c.epsilon(4_999, 100_000) == 1.0
  assert c.epsilon_decay_steps(100_000) == 20_000 and c.epsilon_decay_steps(10_000_000) == 100_000
  assert c.epsilon(5_000 + 10_000, 100_000) == pytest.approx(0.55)
  assert c.epsilon(90_000, 100_000) == pytest.approx(0.1)
  with pytest.raises(ValueError, match="min_replay_size"):
    minatar_dqn.BehaviourDQNConfig(min_replay_size=4).validate()


def test_missing_scores_and_unknown_game(tmp_path):
  # Normalizing with the loaded scores: tests/test_scores.py.
  with pytest.raises(FileNotFoundError, match="make_minatar_datasets.py"):
    md.load_scores(str(tmp_path))
  with pytest.raises(ValueError, match="valid names"):
    md.build_all(str(tmp_path), ["Pong"])


def _files(d):
  out = {}
  for root, _, names in os.walk(d):
    for n in names:
      p = os.path.join(root, n)
      out[os.path.relpath(p, d)] = os.path.getmtime(p)
  return out


CH = {"Breakout": 4, "SpaceInvaders": 6}  # MinAtar channels


@pytest.mark.slow
def test_binary_builds_caches_and_restarts_an_interrupted_game(tmp_path):
  out = str(tmp_path / "minatar")
  cmd = [sys.executable, os.path.join(ROOT, "binaries", "make_minatar_datasets.py"),
         "--games=Breakout,space_invaders", "--steps=120", "--game_steps=SpaceInvaders:130",
         "--num_checkpoints=3",
         "--eval_episodes=2", "--random_episodes=3", "--progress_every=60",
         "--output_dir=" + out, "--seed=1"]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=ROOT)
  assert res.returncode == 0, res.stderr[-3000:]
  assert "[Breakout] step 60/120" in res.stdout and "steps/s" in res.stdout
  assert "ETA" in res.stdout and "episodes" in res.stdout
  for game in ("Breakout", "SpaceInvaders"):
    rdir = os.path.join(out, game, "1")
    assert sorted(n for n in os.listdir(rdir) if n != "replay_logs") == sorted(
        ["COMPLETE", "summary.json", "dqn_q_network.npz"])
    logs = os.path.join(rdir, "replay_logs")
    assert replay_source.list_suffixes(logs) == [0, 1, 2]
    per_suffix = {"$store$_observation", "$store$_action", "$store$_reward", "$store$_terminal",
                  "add_count", "invalid_range"}
    assert sorted(os.listdir(logs)) == sorted(
        ["{}_ckpt.{}.gz".format(n, s) for n in per_suffix for s in range(3)] +
        ["ccvl_dataset.json"])
    meta = replay_files.read_metadata(logs)
    assert meta["stack_size"] == 1 and meta["replay_capacity"] == {"Breakout": 41,
                                                                   "SpaceInvaders": 44}[game]
    assert meta["subsets"]["1%"] == [2, None, "prefix"] and meta["game"] == game
    store = FrameStore.from_replay(logs, "all", num_actions=meta["num_actions"])
    n = {"Breakout": 120, "SpaceInvaders": 130}[game]
    assert store.observation_shape == (10, 10, CH[game]) and n - 10 <= store.num_transitions <= n
    assert FrameStore.from_replay(logs, "initial10%").num_transitions < store.num_transitions
    summary = json.load(open(os.path.join(rdir, "summary.json")))
    assert summary["settings"]["steps"] == n and len(summary["dqn_eval_returns"]) == 2
    assert len(summary["random_returns"]) == 3
  scores = json.load(open(os.path.join(out, "minatar_scores.json")))
  assert sorted(scores["games"]) == ["Breakout", "SpaceInvaders"]
  assert "(score - random) / (dqn - random)" in scores["normalization"]
  assert md.load_scores(out)["Breakout"]["random"] == scores["games"]["Breakout"]["random"]

  # Second run: everything cached, nothing rewritten.
  before = _files(out)
  again = forked_binary.run("make_minatar_datasets.py", cmd[2:], env=dict(os.environ),
                            timeout=150)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "[Breakout] cached" in again.stdout and "[SpaceInvaders] cached" in again.stdout
  after = _files(out)
  assert {k: v for k, v in after.items() if k != "minatar_scores.json"} == {
      k: v for k, v in before.items() if k != "minatar_scores.json"}

  # An interrupted game (no COMPLETE marker, a half-written checkpoint) restarts cleanly
  # and the finished one stays; other settings for a finished game are refused.
  os.remove(os.path.join(out, "SpaceInvaders", "1", "COMPLETE"))
  open(os.path.join(out, "SpaceInvaders", "1", "replay_logs", "junk.tmp"), "w").write("x")
  msgs = []
  s = md.build_all(out, ["Breakout", "SpaceInvaders"], num_steps=120, seed=1, num_checkpoints=3,
                   game_steps={"space_invaders": 130}, eval_episodes=2, random_episodes=3,
                   log=msgs.append)
  assert s["Breakout"]["cached"] and not s["SpaceInvaders"]["cached"]
  assert any("interrupted" in m for m in msgs)
  assert not os.path.exists(os.path.join(out, "SpaceInvaders", "1", "replay_logs", "junk.tmp"))
  assert os.path.exists(os.path.join(out, "SpaceInvaders", "1", "COMPLETE"))
  with pytest.raises(ValueError, match="other settings.*steps"):
    md.build_game(out, "Breakout", num_steps=999, seed=1, num_checkpoints=3)
  bad = forked_binary.run("make_minatar_datasets.py", ["--games=Pong", "--output_dir=" + out],
                          env=dict(os.environ), timeout=60)
  assert bad.returncode != 0 and "Breakout" in bad.stderr and "Pong" in bad.stderr
  bad = forked_binary.run("make_minatar_datasets.py",
                          ["--game_steps=Asterix:many", "--output_dir=" + out],
                          env=dict(os.environ), timeout=60)
  assert bad.returncode != 0 and "--game_steps" in bad.stderr and "'Asterix:many'" in bad.stderr


def test_per_game_steps_parse_and_default():
  assert md.parse_game_steps("asterix:300000, Freeway:5") == {"Asterix": 300000, "Freeway": 5}
  assert md.parse_game_steps("") == {}
  for bad in ("Asterix", "Asterix:0", "Asterix:1e5"):
    with pytest.raises(ValueError, match="expected Game:steps"):
      md.parse_game_steps(bad)
  with pytest.raises(ValueError, match="Pong"):
    md.parse_game_steps("Pong:10")
  assert set(md.DEFAULT_GAME_STEPS) <= set(minatar.valid_game_names())



def test_checkpoint_split_is_checked_before_any_game_is_built(tmp_path):
  """K checkpoints of C = ceil((n + 1) / K) slots hold n + 1 frames in ceil((n + 1) / C) files:
  n = 10, K = 20 -> C = 2 -> 6 files; n = 10, K = 5 -> C = 3 -> 4 files (not 5); n = 120,
  K = 3 -> C = 41 -> 3 files; n = 120, K = 6 -> C = 21 -> 6 files; n = 9, K = 6 -> C = 2 ->
  5 files. A split that does not give K files is refused, naming the game, the counts and a K
  that works, before anything is written (Breakout's valid split comes first here)."""
  md.validate_split("Breakout", 120, 3)
  with pytest.raises(ValueError, match=r"Breakout: 10 steps give 6 checkpoints of 2 slots, "
                                       r"not --num_checkpoints=20.*--num_checkpoints=6"):
    md.validate_split("Breakout", 10, 20)
  with pytest.raises(ValueError, match=r"give 4 checkpoints of 3 slots.*num_checkpoints=4"):
    md.validate_split("Breakout", 10, 5)
  out = str(tmp_path / "minatar")
  md.validate_split("Breakout", 120, 6)
  with pytest.raises(ValueError, match="SpaceInvaders: 9 steps give 5 checkpoints of 2 slots"):
    md.build_all(out, ["Breakout", "SpaceInvaders"], num_steps=120, num_checkpoints=6,
                 game_steps={"SpaceInvaders": 9})
  assert not os.path.exists(os.path.join(out, "Breakout"))
