"""Batched Atari evaluation (ccvl_tf/evaluation/atari_vector.py): the slot state machine on a fake
vector environment whose episodes are known in advance, the real AtariVectorEnv against our
sequential environment, the dispatch, and the observation-reading Breakout player."""
import collections

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.envs import atari, scripted
from ccvl_tf.evaluation import atari_vector

_Step = collections.namedtuple("_Step", ["action", "state", "info"])


class FakeVectorEnv:
  """Slot j plays the episodes `lengths[j]` in order: each step pays a raw reward of 2.0 and
  the episode is a game over after its length; as AtariVectorEnvironment, a copy also ends one
  step past the `max_episode_steps` cap (the frame cap) and its next step is the autoreset.
  Observations [N, 1, 1, 2]: (slot, step within the copy's episode)."""

  num_actions = 3

  def __init__(self, lengths, max_episode_steps=100):
    self.lengths = [list(x) for x in lengths]
    self.num_envs = len(lengths)
    self.max_episode_steps = max_episode_steps
    self.t = np.zeros(self.num_envs, np.int64)
    self.ep = np.zeros(self.num_envs, np.int64)
    self.pending = np.zeros(self.num_envs, bool)
    self.sent = []  # the actions of every step

  def _obs(self):
    obs = np.zeros((self.num_envs, 1, 1, 2), np.uint8)
    obs[:, 0, 0, 0] = np.arange(self.num_envs)
    obs[:, 0, 0, 1] = self.t
    return obs

  def reset(self, seeds):
    assert len(seeds) == self.num_envs
    self.seeds = list(seeds)
    return self._obs()

  def step(self, actions):
    self.sent.append(np.array(actions))
    raw = np.zeros(self.num_envs)
    ended = np.zeros(self.num_envs, bool)
    terminated = np.zeros(self.num_envs, bool)
    for j in range(self.num_envs):
      if self.pending[j]:
        self.pending[j], self.t[j] = False, 0
        self.ep[j] += 1
        continue
      self.t[j] += 1
      raw[j] = 2.0
      length = self.lengths[j][min(self.ep[j], len(self.lengths[j]) - 1)]
      terminated[j] = self.t[j] >= length
      ended[j] = terminated[j] or self.t[j] >= self.max_episode_steps + 1
      self.pending[j] = ended[j]
    return self._obs(), raw, ended, terminated


class CountingPolicy:
  """A stateful batched policy: each row's state counts the calls it has seen; the action is
  the observation's step mod 3 and info.delta the row's count, so the recorded deltas show
  which state row an episode was played with. Logs (batch size, step types, discounts)."""

  def __init__(self):
    self.calls = []

  def get_initial_state(self, batch_size=1):
    return {"count": np.zeros(batch_size, np.int64), "prev_action": np.zeros(batch_size,
                                                                             np.int32)}

  def action(self, time_step, state):
    import tensorflow as tf
    count = np.asarray(state["count"]) + 1
    obs = np.asarray(time_step.observation)
    self.calls.append((obs.shape[0], np.asarray(time_step.step_type).tolist(),
                       np.asarray(time_step.discount).tolist(), obs[:, 0, 0, 0].tolist(),
                       np.asarray(state["prev_action"]).tolist()))
    action = (obs[:, 0, 0, 1] % 3).astype(np.int32)
    return _Step(tf.constant(action), {"count": count, "prev_action": action},
                 {"delta": tf.constant(count.astype(np.float32))})


def test_scores_lengths_and_state_rows_per_slot():
  # 3 slots, 5 episodes: slot 0 plays episodes 0 and 3, slot 1 episodes 1 and 4, slot 2
  # episode 2. An episode of L steps takes L + 1 policy calls (the LAST one scored, its action
  # not executed); the autoreset step between a slot's episodes takes none.
  env = FakeVectorEnv([[2, 4], [5, 1], [3]])
  policy = CountingPolicy()
  recs = atari_vector.run_batched_episodes(policy, env, 5, run=7, seed=1)
  assert [r.episode for r in recs] == [0, 1, 2, 3, 4]
  assert [r.length for r in recs] == [2, 5, 3, 4, 1]
  assert [r.raw_score for r in recs] == [4.0, 10.0, 6.0, 8.0, 2.0]   # raw 2.0 per step
  assert [r.return_ for r in recs] == [2.0, 5.0, 3.0, 4.0, 1.0]      # clipped to 1.0
  assert all(r.run == 7 for r in recs)
  # Each slot's row carries its count across its episodes: slot 0's second episode starts at
  # call 4 (calls 1-2 acted, 3 was LAST), slot 1's at call 7.
  assert [r.deltas for r in recs] == [[1, 2], [1, 2, 3, 4, 5], [1, 2, 3], [4, 5, 6, 7], [7]]


def test_finished_slots_leave_the_batch_without_disturbing_the_others():
  short = atari_vector.run_batched_episodes(CountingPolicy(), FakeVectorEnv([[1], [6]]), 2)
  long = atari_vector.run_batched_episodes(CountingPolicy(), FakeVectorEnv([[6], [6]]), 2)
  # Slot 1's episode is the same whether slot 0 ended after 1 step or played 6.
  assert short[1].deltas == long[1].deltas == [1, 2, 3, 4, 5, 6]
  assert short[1].raw_score == long[1].raw_score == 12.0
  policy = CountingPolicy()
  atari_vector.run_batched_episodes(policy, FakeVectorEnv([[1], [4]]), 2)
  # Calls: both FIRST; slot 0 LAST + slot 1 MID; then slot 1 alone until its LAST.
  assert [c[0] for c in policy.calls] == [2, 2, 1, 1, 1]
  assert policy.calls[1][1] == [2, 1]
  assert [c[3] for c in policy.calls[2:]] == [[1], [1], [1]]


def test_step_cap_truncates_with_discount_one_then_the_slot_goes_on():
  # Cap 3: slot 0's 10-step episode is cut at 3 steps (LAST, discount 1); its copy ends one
  # step later and autoresets, then slot 0 plays episode 2 (a 2-step game over, discount 0).
  env = FakeVectorEnv([[10, 2], [2]], max_episode_steps=3)
  policy = CountingPolicy()
  recs = atari_vector.run_batched_episodes(policy, env, 3)
  assert [r.length for r in recs] == [3, 2, 2]
  assert [r.raw_score for r in recs] == [6.0, 4.0, 4.0]
  lasts = [(c[3][i], c[2][i]) for c in policy.calls for i, st in enumerate(c[1]) if st == 2]
  assert lasts == [(1, 0.0), (0, 1.0), (0, 0.0)]


def test_no_policy_call_while_every_slot_waits():
  # One slot, 3 episodes: between them the slot waits (autoreset, or the step past the cap);
  # the policy is never called on an empty batch.
  class NonEmpty(CountingPolicy):
    def action(self, time_step, state):
      assert np.asarray(time_step.step_type).shape[0] > 0
      return super().action(time_step, state)

  recs = atari_vector.run_batched_episodes(NonEmpty(), FakeVectorEnv([[2, 9, 1]], 4), 3)
  assert [r.length for r in recs] == [2, 4, 1]


def test_epsilon_replaces_actions_and_prev_action():
  # epsilon 1: every executed action is drawn at random, and the state row's prev_action the
  # policy sees next is the executed action, not its own choice (step mod 3).
  env = FakeVectorEnv([[30], [30]])
  policy = CountingPolicy()
  atari_vector.run_batched_episodes(policy, env, 2, epsilon=1.0, seed=3)
  sent = np.array(env.sent)
  greedy = np.array([[t % 3, t % 3] for t in range(len(sent))])
  assert (sent != greedy).any() and set(np.unique(sent)) <= {0, 1, 2}
  for k in range(1, 30):
    assert policy.calls[k][4] == sent[k - 1].tolist()


def test_too_few_episodes_and_bad_epsilon_are_refused():
  with pytest.raises(ValueError, match="num_episodes"):
    atari_vector.run_batched_episodes(CountingPolicy(), FakeVectorEnv([[1], [1]]), 1)
  with pytest.raises(ValueError, match="epsilon"):
    atari_vector.run_batched_episodes(CountingPolicy(), FakeVectorEnv([[1]]), 1, epsilon=2.0)


def test_dispatch_picks_sequential_for_minatar_and_gridworld():
  assert atari_vector.use_vector_env("Breakout", "vector")
  assert atari_vector.use_vector_env("space_invaders", "vector")
  assert not atari_vector.use_vector_env("Breakout", "sequential")
  assert not atari_vector.use_vector_env("minatar/Breakout", "vector")
  assert not atari_vector.use_vector_env("gridworld", "vector")
  with pytest.raises(ValueError, match="--eval_env"):
    atari_vector.use_vector_env("Breakout", "threads")


def test_offline_config_declares_eval_env_once_with_vector_default():
  import dataclasses
  from ccvl_tf.experiments.offline import config
  fields = {f.name: f for f in dataclasses.fields(config.OfflineConfig)}
  assert fields["eval_env"].default == "vector"


def test_slot_seeds_differ_between_neighbouring_runs():
  a, b = atari_vector.slot_seeds(5, 10), atari_vector.slot_seeds(6, 10)
  assert len(set(a.tolist()) | set(b.tolist())) == 20
  assert (a >= 0).all() and (a < 2**31 - 1).all()
  np.testing.assert_array_equal(a, atari_vector.slot_seeds(5, 10))


def test_real_vector_env_matches_the_sequential_environment_frame_for_frame():
  seq = atari.AtariEnvironment("Breakout", seed=11)
  vec = atari_vector.AtariVectorEnvironment("Breakout", 1, num_threads=1)
  assert vec.action_set == seq.action_set and vec.num_actions == 4
  a = seq.reset().observation
  b = vec.reset([11])[0]
  np.testing.assert_array_equal(a, b)  # [0, 0, 0, s_0] in both
  actions = np.random.default_rng(0).integers(4, size=40)
  for act in actions:
    ts = seq.step(np.int32(act))
    obs, raw, ended, _ = vec.step(np.array([act]))
    assert raw[0] == seq.last_raw_reward and bool(ended[0]) == bool(ts.is_last())
    assert np.abs(ts.observation.astype(int) - obs[0].astype(int)).max() <= 1
  vec.close()


def test_real_vector_env_step_cap_and_queued_episodes():
  # NOOP never serves in Breakout: every episode runs into the 7-step cap. 3 episodes on 2
  # slots: slot 0 plays its second episode after its copy's autoreset.
  env = atari_vector.AtariVectorEnvironment("Breakout", 2, max_episode_steps=7, num_threads=1)

  class Noop:
    def get_initial_state(self, batch_size=1):
      return ()

    def action(self, time_step, state):
      import tensorflow as tf
      return _Step(tf.zeros([time_step.step_type.shape[0]], tf.int32), state, ())

  recs = atari_vector.run_batched_episodes(Noop(), env, 3)
  env.close()
  assert [(r.episode, r.length, r.raw_score) for r in recs] == [(0, 7, 0.0), (1, 7, 0.0),
                                                                 (2, 7, 0.0)]


def _frame(ball_col=None, paddle_cols=(30, 38)):
  obs = np.zeros((1, 84, 84, 4), np.uint8)
  obs[0, scripted.PIXEL_PADDLE_ROW, paddle_cols[0]:paddle_cols[1], -1] = 150
  if ball_col is not None:
    obs[0, 60, ball_col, -1] = 110
  return obs


def test_pixel_breakout_player_reads_ball_and_paddle():
  # Paddle columns 30..37: centre 33.5.
  assert scripted.breakout_pixel_actions(_frame(None))[0] == scripted.FIRE
  assert scripted.breakout_pixel_actions(_frame(60))[0] == scripted.RIGHT
  assert scripted.breakout_pixel_actions(_frame(10))[0] == scripted.LEFT
  assert scripted.breakout_pixel_actions(_frame(34))[0] == scripted.NOOP   # within 1.5
  batch = np.concatenate([_frame(60), _frame(10)])
  assert scripted.breakout_pixel_actions(batch).tolist() == [scripted.RIGHT, scripted.LEFT]


def test_evaluate_atari_reuses_its_environment_and_repeats_exactly():
  # A random batched player (numpy RNG seeded per call) through the cached environment: the
  # second call reuses the copies and, seeded alike, plays the same episodes.
  class Random:
    def __init__(self):
      self.rng = np.random.default_rng(4)

    def get_initial_state(self, batch_size=1):
      return ()

    def action(self, time_step, state):
      import tensorflow as tf
      b = time_step.step_type.shape[0]
      return _Step(tf.constant(self.rng.integers(4, size=b), tf.int32), state, ())

  first = atari_vector.evaluate_atari(Random(), "Breakout", 3, seed=2, epsilon=0.0,
                                      max_episode_steps=60)
  env = atari_vector._CACHED["env"]
  again = atari_vector.evaluate_atari(Random(), "Breakout", 3, seed=2, epsilon=0.0,
                                      max_episode_steps=60)
  assert atari_vector._CACHED["env"] is env
  assert [(r.raw_score, r.length) for r in first] == [(r.raw_score, r.length) for r in again]
  assert all(r.length <= 60 for r in first)
