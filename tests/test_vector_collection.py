"""ccvl_tf.data.vector_collection: a random policy's dataset collected on N copies side by side.

The stream order, episode ends, the step cap and the final cut are checked on a scripted fake
vector environment against a stream worked out by hand; the format on the real ALE (vector
environment -> DopamineReplayWriter -> dqn_replay reader) against the observations the
environment returned.
"""
import hashlib
import json
import os

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.data import replay_writer
from ccvl_tf.data import vector_collection
from ccvl_tf.envs import atari
from ccvl_tf.evaluation import atari_vector
from ccvl_tf.experiments.offline import default_dataset


class _ListWriter:
  def __init__(self):
    self.rows = []

  def add(self, frame, action, reward, terminal):
    self.rows.append((int(np.asarray(frame).reshape(-1)[-1]), int(action), float(reward),
                      bool(terminal)))


class _FakeVectorEnv:
  """Copy j's episodes end by game over after lengths[j] agent steps (every episode), or by the
  frame cap one step after max_episode_steps; raw reward 2.0 per step; the latest frame of
  copy j, episode e, step t is the value 100 j + 10 e + t; autoreset on the step after an end."""

  num_actions = 3

  def __init__(self, lengths, max_episode_steps):
    self.lengths, self.max_episode_steps = list(lengths), max_episode_steps
    self.num_envs = len(lengths)
    self.reset_seeds = None

  def _obs(self):
    return np.array([[[[0, 0, 0, 100 * j + 10 * self.ep[j] + self.t[j]]]]
                     for j in range(self.num_envs)], np.uint8)   # [N, 1, 1, 4]

  def reset(self, seeds):
    self.reset_seeds = np.asarray(seeds)
    self.t, self.ep = [0] * self.num_envs, [0] * self.num_envs
    self.pending = [False] * self.num_envs
    return self._obs()

  def step(self, actions):
    assert len(actions) == self.num_envs
    assert all(0 <= a < self.num_actions for a in actions)
    rewards, ended = np.zeros(self.num_envs), np.zeros(self.num_envs, bool)
    for j in range(self.num_envs):
      if self.pending[j]:
        self.ep[j], self.t[j], self.pending[j] = self.ep[j] + 1, 0, False
        continue
      self.t[j] += 1
      rewards[j] = 2.0
      ended[j] = self.t[j] >= self.lengths[j] or self.t[j] == self.max_episode_steps + 1
      self.pending[j] = bool(ended[j])
    return self._obs(), rewards, ended, ended


def _collect(num_steps, lengths=(2, 5), cap=3, seed=0):
  env, writer = _FakeVectorEnv(lengths, cap), _ListWriter()
  summary = vector_collection.collect_random(env, num_steps, writer, seed)
  return env, writer.rows, summary


def test_whole_episodes_in_the_order_they_end_with_the_cap_and_the_autoreset():
  # By hand (copy 0: game over after 2 steps; copy 1: 5, capped at 3 agent steps):
  # step 1: copy 0 holds [0], copy 1 [100]; step 2: copy 0 ends -> write 0, 1T;
  # step 3: copy 0 autoresets, copy 1 reaches the cap -> write 100, 101, 102T;
  # step 4: copy 0 holds [10], copy 1 drains (its own frame cap ends it);
  # step 5: copy 0 ends -> write 10, 11T: 7 transitions, 3 episodes (raw returns 4, 6, 4).
  env, rows, summary = _collect(7)
  assert [r[0] for r in rows] == [0, 1, 100, 101, 102, 10, 11]
  assert [r[3] for r in rows] == [False, True, False, False, True, False, True]
  assert all(r[2] == 1.0 for r in rows)          # raw 2.0 stored clipped
  assert summary["episodes"] == 3 and summary["episode_returns"] == [4.0, 6.0, 4.0]
  assert summary["steps"] == 7
  np.testing.assert_array_equal(env.reset_seeds, vector_collection.copy_seeds(0, 2)[0])


def test_the_stream_ends_in_one_cut_episode():
  # 6 steps: after step 3 five are written and copy 0 holds [10] -> written cut, no terminal.
  _, rows, summary = _collect(6)
  assert [r[0] for r in rows] == [0, 1, 100, 101, 102, 10]
  assert [r[3] for r in rows] == [False, True, False, False, True, False]
  assert summary["episodes"] == 2
  # 1 step: both copies hold one transition after step 1; copy 0's goes (lower index).
  _, rows, summary = _collect(1)
  assert rows == [(0, rows[0][1], 1.0, False)] and summary["episodes"] == 0


def test_actions_follow_the_seed_not_the_run():
  _, a, _ = _collect(7, seed=3)
  _, b, _ = _collect(7, seed=3)
  assert a == b
  ale3, rngs3 = vector_collection.copy_seeds(3, 2)
  ale4, _ = vector_collection.copy_seeds(4, 2)
  assert not set(ale3) & set(ale4)
  # Copy 0's first action is its own generator's first draw.
  assert a[0][1] == int(rngs3[0].integers(3))


def test_bad_num_steps_is_refused():
  with pytest.raises(ValueError, match="num_steps"):
    vector_collection.collect_random(_FakeVectorEnv((2,), 3), 0, _ListWriter(), 0)


class _Recording:
  """Wraps an AtariVectorEnvironment; keeps every copy's (observation, action) -> (reward,
  next observation, ended) of the steps that were not autoresets."""

  def __init__(self, env):
    self.env = env
    self.num_envs, self.num_actions = env.num_envs, env.num_actions
    self.max_episode_steps = env.max_episode_steps
    self.seen = {}
    self._obs, self._wait = None, None

  def reset(self, seeds):
    self._obs = self.env.reset(seeds)
    self._wait = np.zeros(self.num_envs, bool)
    return self._obs

  def step(self, actions):
    obs, rewards, ended, terminated = self.env.step(actions)
    for j in range(self.num_envs):
      if not self._wait[j]:
        key = _key(self._obs[j], actions[j])
        self.seen.setdefault(key, []).append(
            (float(np.clip(rewards[j], -1, 1)), _key(obs[j], 0), bool(ended[j])))
    self._wait = ended.copy()
    self._obs = obs
    return obs, rewards, ended, terminated


def _key(obs, action):
  return hashlib.sha1(np.ascontiguousarray(obs).tobytes() + bytes([int(action)])).hexdigest()


def test_real_ale_dataset_reads_back_as_the_environment_played(tmp_path):
  vec = atari_vector.AtariVectorEnvironment("Pong", 2, max_episode_steps=60, num_threads=1)
  env = _Recording(vec)
  out = str(tmp_path / "ds")
  writer = replay_writer.DopamineReplayWriter(out, replay_capacity=1000,
                                              metadata=dict(game="Pong", num_actions=6))
  try:
    summary = vector_collection.collect_random(env, 250, writer, seed=5)
  finally:
    vec.close()
  writer.close()
  # Pong's random episodes are far longer than 60 steps: every episode ends at the cap.
  assert summary["steps"] == 250 and summary["episodes"] == 4
  n, terminals = 0, 0
  for s in replay_source.list_suffixes(out):
    for t in dqn_replay.iterate_transitions(out, s, num_actions=6):
      cands = env.seen[_key(t.observation, t.action)]   # KeyError: not a step the env made
      nk = None if t.terminal else _key(t.next_observation, 0)
      assert any(t.reward == r and (t.terminal or nk == k) for r, k, _ in cands)
      n += 1
      terminals += int(t.terminal)
  # All 250 are readable but the last one, whose next frame was never written (cut episode).
  assert n == 249 and terminals == 4


def test_real_ale_same_seed_same_files(tmp_path):
  digests = []
  for run in range(2):
    vec = atari_vector.AtariVectorEnvironment("Pong", 2, max_episode_steps=40,
                                              num_threads=1 + run)  # threads do not matter
    out = str(tmp_path / f"ds{run}")
    writer = replay_writer.DopamineReplayWriter(out, replay_capacity=500,
                                                metadata=dict(game="Pong", num_actions=6))
    try:
      vector_collection.collect_random(vec, 120, writer, seed=1)
    finally:
      vec.close()
    writer.close()
    h = hashlib.sha256()
    for name in sorted(os.listdir(out)):
      if name.endswith(".gz"):
        h.update(replay_files.read_array(os.path.join(out, name))[0].tobytes())
    digests.append(h.hexdigest())
  assert digests[0] == digests[1]


def _cfg(root, game="Pong", default_dataset_env="auto"):
  return default_dataset.DefaultDataset(root_dir=str(root), game=game, steps=200, policy="auto",
                                        env=default_dataset_env, behaviour_epsilon=0.25, seed=0)


def _env_factory(game):
  return lambda seed: atari.AtariEnvironment(game, seed=seed)


@pytest.mark.slow
def test_default_dataset_of_a_random_policy_goes_to_the_vector_env_and_is_cached(tmp_path):
  logs = []
  out = default_dataset.ensure_default_dataset(_cfg(tmp_path), _env_factory("Pong"), logs.append)
  info = json.load(open(os.path.join(out, "COMPLETE")))
  meta = json.load(open(os.path.join(out, replay_files.METADATA_FILENAME)))
  assert info["collection_env"] == "vector" and info["num_envs"] == 8
  assert meta["collection_env"] == "vector" and meta["policy"] == "random"
  assert any("on 8 copies of the vector environment" in line for line in logs)
  # 200 transitions in the files (the last one's next frame unwritten).
  n = sum(1 for s in replay_source.list_suffixes(out)
          for _ in dqn_replay.iterate_transitions(out, s, num_actions=6))
  assert n == 199
  # auto reuses it; sequential collects again in one environment and is then reused by auto.
  logs.clear()
  default_dataset.ensure_default_dataset(_cfg(tmp_path), _env_factory("Pong"), logs.append)
  assert any("Using the cached default dataset" in line and "collected vector" in line
             for line in logs)
  logs.clear()
  default_dataset.ensure_default_dataset(_cfg(tmp_path, default_dataset_env="sequential"),
                                         _env_factory("Pong"), logs.append)
  assert any("collecting it again" in line for line in logs)
  assert json.load(open(os.path.join(out, "COMPLETE")))["collection_env"] == "sequential"
  logs.clear()
  default_dataset.ensure_default_dataset(_cfg(tmp_path), _env_factory("Pong"), logs.append)
  assert any("collected sequential" in line for line in logs)


def test_vector_collection_of_the_scripted_player_is_refused_by_flag(tmp_path):
  cfg = _cfg(tmp_path, game="Breakout", default_dataset_env="vector")
  with pytest.raises(ValueError, match="--default_dataset_env=vector .* scripted_eps0.25"):
    default_dataset.ensure_default_dataset(cfg, _env_factory("Breakout"), print)
  assert not os.path.exists(os.path.join(tmp_path, "default_dataset"))
  # auto: the scripted player in one environment.
  assert default_dataset.collection_env(_cfg(tmp_path, game="Breakout"), "scripted_eps0.25") \
      == "sequential"
  assert default_dataset.collection_env(_cfg(tmp_path, game="Breakout"), "random") == "vector"
  with pytest.raises(ValueError, match="--default_dataset_env must be one of"):
    default_dataset.collection_env(_cfg(tmp_path, default_dataset_env="gpu"), "random")
