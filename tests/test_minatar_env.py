"""ccvl_tf/envs/minatar.py: MinAtar games as TF-Agents PyEnvironments."""
import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.envs import minatar

# MinAtar 1.0.15: channels per game and minimal action sets (ids into n,l,u,r,d,f).
CHANNELS = {"Asterix": 4, "Breakout": 4, "Freeway": 7, "Seaquest": 10, "SpaceInvaders": 6}
ACTION_SETS = {"Asterix": [0, 1, 2, 3, 4], "Breakout": [0, 1, 3], "Freeway": [0, 2, 4],
               "Seaquest": [0, 1, 2, 3, 4, 5], "SpaceInvaders": [0, 1, 3, 5]}


def _rollout(env, actions):
  out = [env.reset()]
  for a in actions:
    ts = env.step(a)
    out.append(ts)
  return out


@pytest.mark.parametrize("game", sorted(CHANNELS))
def test_specs_shapes_dtypes_and_action_set(game):
  env = minatar.MinAtarEnvironment(game, seed=0)
  c = CHANNELS[game]
  spec = env.observation_spec()
  assert spec.shape == (10, 10, c) and spec.dtype == np.uint8
  assert (spec.minimum, spec.maximum) == (0, 1)
  assert env.action_set == ACTION_SETS[game] and env.num_actions == len(ACTION_SETS[game])
  assert env.action_spec().dtype == np.int32 and env.action_spec().maximum == env.num_actions - 1
  assert env.num_channels == c
  rng = np.random.default_rng(0)
  ts = env.reset()
  assert ts.is_first()
  for _ in range(30):
    assert ts.observation.dtype == np.uint8 and ts.observation.shape == (10, 10, c)
    assert set(np.unique(ts.observation)) <= {0, 1}
    assert ts.reward.dtype == np.float32
    ts = env.step(int(rng.integers(env.num_actions)))
  env.reset()
  with pytest.raises(ValueError, match=r"action {n} outside \[0, {n}\) for MinAtar {g}$".format(
      n=env.num_actions, g=game)):
    env.step(env.num_actions)


def test_game_names_and_unknown_game():
  assert minatar.valid_game_names() == sorted(CHANNELS)
  for name in ("space_invaders", "SpaceInvaders", "spaceinvaders", "MinAtar/SpaceInvaders-v1"):
    assert minatar.canonical_game_name(name) == "SpaceInvaders"
  with pytest.raises(ValueError) as e:
    minatar.MinAtarEnvironment("Pong")
  msg = str(e.value)
  assert "'Pong'" in msg and all(g in msg for g in CHANNELS)


@pytest.mark.parametrize("game", ["Asterix", "Seaquest", "Breakout"])
def test_same_seed_same_trajectory_other_seed_differs(game):
  actions = list(np.random.default_rng(5).integers(0, len(ACTION_SETS[game]), 300))

  def trace(seed):
    env = minatar.MinAtarEnvironment(game, seed=seed)
    out = []
    env.reset()
    for a in actions:
      ts = env.step(a)  # steps after an episode end reset automatically
      out.append((ts.observation.tobytes(), float(ts.reward), int(ts.step_type)))
    return out

  assert trace(3) == trace(3)
  assert trace(3) != trace(4)


def test_sticky_actions_repeat_the_previous_action():
  # Breakout: paddle on row 9 of channel 0, starting at column 4; action 1 = left.
  def paddle(ts):
    return int(np.argmax(ts.observation[9, :, 0]))

  never = minatar.MinAtarEnvironment("Breakout", seed=0, sticky_action_prob=0.0)
  steps = _rollout(never, [1, 1])
  assert [paddle(t) for t in steps] == [4, 3, 2]
  # Probability 1: the previous action (MinAtar starts from no-op) is always repeated.
  always = minatar.MinAtarEnvironment("Breakout", seed=0, sticky_action_prob=1.0)
  steps = _rollout(always, [1, 1, 2])
  assert [paddle(t) for t in steps] == [4, 4, 4, 4]
  # Default: MinAtar's 0.1.
  assert minatar.MinAtarEnvironment("Breakout").minatar_env.sticky_action_prob == 0.1


def test_episode_cap_truncates_with_discount_one():
  env = minatar.MinAtarEnvironment("Freeway", seed=0, max_episode_steps=5)  # Freeway: 2500
  steps = _rollout(env, [0] * 5)
  assert [int(t.step_type) for t in steps] == [0, 1, 1, 1, 1, 2]
  assert float(steps[-1].discount) == 1.0
  assert env.get_info()["truncated"] and not env.get_info()["game_over"]
  assert env.step(0).is_first()  # the next step starts a new episode
  fresh = minatar.MinAtarEnvironment("Freeway").get_info()
  assert fresh["episode_steps"] == 0 and not fresh["game_over"] and not fresh["truncated"]
  with pytest.raises(ValueError, match="max_episode_steps"):
    minatar.MinAtarEnvironment("Freeway", max_episode_steps=0)


def test_game_over_terminates_with_discount_zero():
  env = minatar.MinAtarEnvironment("Breakout", seed=0, sticky_action_prob=0.0)
  ts = env.reset()
  n = 0
  while not ts.is_last():
    ts = env.step(0)  # the paddle never moves: the ball is lost within a few steps
    n += 1
    assert n < 100
  assert float(ts.discount) == 0.0 and env.get_info()["game_over"]
  assert not env.get_info()["truncated"]


def test_reward_clipped_in_timestep_raw_score_kept(monkeypatch):
  env = minatar.MinAtarEnvironment("Seaquest", seed=0)
  env.reset()
  # Seaquest's surfacing bonus can be up to 10; fake one.
  monkeypatch.setattr(env.minatar_env, "act", lambda a: (7, False))
  ts = env.step(0)
  assert float(ts.reward) == 1.0 and env.last_raw_reward == 7.0
  env.step(0)
  assert env.episode_raw_return == 14.0 and env.get_info()["raw_reward"] == 7.0
  raw = minatar.MinAtarEnvironment("Seaquest", seed=0, clip_rewards=False)
  raw.reset()
  monkeypatch.setattr(raw.minatar_env, "act", lambda a: (7, False))
  assert float(raw.step(0).reward) == 7.0
