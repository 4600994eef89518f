"""Gymnasium classic-control datasets: the online DQN's logged arrays against the environment
replayed with the logged actions, the TD targets at a termination and a truncation, exact
seeding, the build's files, its cache and its refusals."""
import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import ccvl_tf  # noqa: F401
from ccvl_tf.data import gym_datasets
from ccvl_tf.data import gym_dqn
from ccvl_tf.envs import factory

ENV = "CartPole-v1"
STEPS = 300
# A tiny DQN: updates from step 50 on, the target copied often, epsilon down to 0.2 by step
# 150, so the run has random, epsilon-greedy and trained steps and several episodes.
TINY = dataclasses.replace(gym_dqn.config_for(ENV), hidden_units=(16,), learning_starts=50,
                           batch_size=16, train_freq=4, gradient_steps=2,
                           target_update_interval=20, exploration_fraction=0.5,
                           exploration_final_eps=0.2)


@pytest.fixture(scope="module")
def tiny_run():
  return gym_dqn.run_dqn(ENV, STEPS, config=TINY, seed=3, eval_episodes=2, random_episodes=3)


def test_arrays_are_the_environment_replayed_with_the_logged_actions(tiny_run):
  a = tiny_run.arrays
  assert sorted(a) == sorted(gym_dqn.ARRAYS)
  assert a["observations"].shape == (STEPS, 4) and a["observations"].dtype == np.float32
  assert a["actions"].shape == (STEPS,) and a["actions"].dtype == np.int32
  for k in ("rewards", "terminals", "timeouts"):
    assert a[k].shape == (STEPS,) and a[k].dtype == np.float32
  # The same seed's environment stepped with the logged actions gives the logged observations,
  # rewards, and terminated / truncated flags (the last step: truncated by the run's end).
  env = factory.make_env("gymnasium:" + ENV, seed=3).env
  gym_env = env.gymnasium_env
  time_step = env.reset()
  terminated_seen = truncated_seen = 0
  for t in range(STEPS):
    np.testing.assert_array_equal(a["observations"][t], time_step.observation)
    obs, reward, terminated, truncated, _ = gym_env.step(int(a["actions"][t]))
    assert a["rewards"][t] == reward
    # CartPole terminates outside x +-2.4, theta +-12 degrees
    # (gymnasium/envs/classic_control/cartpole.py)
    assert terminated == (abs(obs[0]) > 2.4 or abs(obs[2]) > 12 * 2 * np.pi / 360)
    end = terminated or truncated
    assert a["terminals"][t] == float(terminated)
    assert a["timeouts"][t] == float(truncated and not terminated) + float(
        t == STEPS - 1 and not end)
    terminated_seen += terminated
    truncated_seen += truncated and not terminated
    if end:
      time_step = env.reset()
    else:
      time_step = time_step._replace(observation=np.asarray(obs, np.float32))
  assert terminated_seen >= 5  # several episodes, random and trained
  # Exactly one of terminal / timeout at every episode end, and the data ends at one.
  assert not np.any((a["terminals"] > 0) & (a["timeouts"] > 0))
  assert a["terminals"][-1] + a["timeouts"][-1] == 1.0
  s = tiny_run.summary
  ends = np.flatnonzero(a["terminals"] + a["timeouts"]) + 1
  assert s["episode_end_steps"] == [int(e) for e in ends[:s["finished_episodes"]]]
  assert s["finished_episodes"] == int(a["terminals"].sum() + a["timeouts"].sum()) - int(
      s["unfinished_last_episode"])
  # a round after every 4th step past learning_starts
  assert s["updates"] == TINY.gradient_steps * (STEPS // 4 - TINY.learning_starts // 4)
  assert len(s["final_greedy_returns"]) == 2 and len(s["random_returns"]) == 3


def test_same_seed_gives_identical_arrays_and_another_seed_others(tiny_run):
  again = gym_dqn.run_dqn(ENV, STEPS, config=TINY, seed=3, eval_episodes=2, random_episodes=3)
  for k in gym_dqn.ARRAYS:
    np.testing.assert_array_equal(again.arrays[k], tiny_run.arrays[k])
  assert again.summary["final_greedy_returns"] == tiny_run.summary["final_greedy_returns"]
  assert again.summary["random_returns"] == tiny_run.summary["random_returns"]
  other = gym_dqn.run_dqn(ENV, 40, config=TINY, seed=4, eval_episodes=1, random_episodes=1)
  assert not np.array_equal(other.arrays["observations"], tiny_run.arrays["observations"][:40])


def test_td_target_bootstraps_through_a_truncation_and_not_a_termination():
  """The loss of an update (agent.train's, computed before the step with the agent's gamma)
  on a batch ending its episodes: target r after a termination, r + gamma max Q'(s') after a
  truncation."""
  env = gym_dqn.make_env(ENV, 0)
  config = dataclasses.replace(TINY, gamma=0.9)
  rng = np.random.default_rng(0)
  obs = rng.normal(size=(2, 4)).astype(np.float32)
  next_obs = rng.normal(size=(2, 4)).astype(np.float32)
  action, reward = np.array([0, 1], np.int32), np.array([1.0, 1.0], np.float32)

  def huber(x):
    return np.where(np.abs(x) <= 1, 0.5 * x * x, np.abs(x) - 0.5)

  for discount in (0.0, 1.0):
    agent, net, target = gym_dqn.make_agent(env.observation_spec(), env.action_spec(), config,
                                            0)
    q = net(obs)[0].numpy()[np.arange(2), action]
    q_next = target(next_obs)[0].numpy().max(axis=1)
    expected_target = reward + 0.9 * discount * q_next
    batch = gym_dqn.transition_batch(obs, action, reward, np.full(2, discount, np.float32),
                                     np.array([True, True]), next_obs)
    loss = float(agent.train(batch).loss)
    assert loss == pytest.approx(float(np.mean(huber(expected_target - q))), rel=1e-5)


def test_an_update_round_is_its_updates_one_after_another():
  env = gym_dqn.make_env(ENV, 0)
  rng = np.random.default_rng(2)
  batches = [(rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 2, 8).astype(np.int32),
              rng.normal(size=8).astype(np.float32), (rng.random(8) < 0.8).astype(np.float32),
              rng.random(8) < 0.3, rng.normal(size=(8, 4)).astype(np.float32))
             for _ in range(5)]
  weights = []
  for rounds in (False, True):
    agent, net, _ = gym_dqn.make_agent(env.observation_spec(), env.action_spec(), TINY, 0)
    if rounds:
      gym_dqn._train_round_fn(agent)(*[np.stack(c) for c in zip(*batches)])  # pylint: disable=protected-access
    else:
      one = tf.function(lambda *b: agent.train(gym_dqn.transition_batch(*b)).loss,
                        autograph=False)  # pylint: disable=cell-var-from-loop
      for b in batches:
        one(*b)
    assert int(agent.train_step_counter.numpy()) == 5
    weights.append([v.numpy() for v in net.trainable_variables])
  for singly, in_one_round in zip(*weights):
    np.testing.assert_array_equal(singly, in_one_round)


def test_numpy_greedy_is_the_networks_argmax():
  env = gym_dqn.make_env("Acrobot-v1", 0)
  _, net, _ = gym_dqn.make_agent(env.observation_spec(), env.action_spec(),
                                 gym_dqn.config_for("Acrobot-v1"), 1)
  greedy = gym_dqn.Greedy(net)
  obs = np.random.default_rng(1).normal(size=(50, 6)).astype(np.float32)
  q = net(obs)[0].numpy()
  np.testing.assert_allclose([greedy.q_values(o) for o in obs], q, rtol=1e-4, atol=1e-5)
  net.trainable_variables[-1].assign_add(tf.constant([0.0, 5.0, 0.0]))
  assert greedy(obs[0]) == int(np.argmax(q[0]))  # a copy, until refreshed
  greedy.refresh()
  assert greedy(obs[0]) == 1


def test_configs_and_their_checks():
  assert gym_dqn.config_for("gymnasium:Acrobot-v1") == gym_dqn.config_for("Acrobot-v1")
  assert gym_dqn.config_for("Acrobot-v1").updates_per_round() == 4
  assert gym_dqn.config_for("MountainCar-v0").hidden_units == (256, 256)
  assert gym_dqn.config_for("Pendulum-like-v9") == gym_dqn.GymDQNConfig()
  c = gym_dqn.config_for(ENV)
  assert [c.epsilon(t, 10_000) for t in (0, 999, 1000)] == [1.0, 1.0, pytest.approx(
      1.0 - 0.96 * 1000 / 1600)]
  assert c.epsilon(1600, 10_000) == pytest.approx(0.04)
  with pytest.raises(ValueError, match=r"^GymDQNConfig.gradient_steps must be"):
    dataclasses.replace(c, gradient_steps=-2).validate()
  with pytest.raises(ValueError, match=r"^GymDQNConfig.hidden_units must be"):
    dataclasses.replace(c, hidden_units=()).validate()
  with pytest.raises(ValueError, match=r"^num_steps must be an integer >= 1, got 0$"):
    gym_dqn.run_dqn(ENV, 0, config=TINY)


def test_build_writes_caches_and_refuses_other_settings(tmp_path, tiny_run):
  kw = dict(num_steps=STEPS, seed=3, config=TINY, eval_episodes=2, random_episodes=3,
            log=lambda m: None)
  s = gym_datasets.build(str(tmp_path), "gymnasium:" + ENV, **kw)
  rdir = tmp_path / ENV / "seed_3"
  assert s["cached"] is False and s["data_path"] == str(rdir / "data.npz")
  assert sorted(os.listdir(rdir)) == ["data.npz", "dqn_q_network.npz", "summary.json"]
  with np.load(rdir / "data.npz") as z:
    assert sorted(z.files) == sorted(gym_dqn.ARRAYS)
    for k in gym_dqn.ARRAYS:
      np.testing.assert_array_equal(z[k], tiny_run.arrays[k])
  summary = json.loads((rdir / "summary.json").read_text())
  assert summary["settings"]["env_id"] == ENV and summary["settings"]["num_steps"] == STEPS
  assert summary["data"]["transitions"] == STEPS
  assert summary["data"]["episodes"] == int(tiny_run.arrays["terminals"].sum()
                                            + tiny_run.arrays["timeouts"].sum())
  # the behaviour's returns: the run's finished episodes (not the one the run's end cut)
  assert summary["data"]["behaviour_mean_return"] == pytest.approx(
      np.mean(tiny_run.summary["episode_returns"]))
  assert summary["data"]["unfinished_last_episode"] is True  # seed 3's run ends mid-episode
  assert summary["data"]["timed_out_episodes"] == 0
  assert summary["reference_scores"] == dict(random=tiny_run.summary["random_mean"],
                                             final_greedy=tiny_run.summary["final_greedy_mean"])
  assert set(summary["versions"]) >= {"gymnasium", "tensorflow", "tf_agents", "numpy"}
  mtime = os.path.getmtime(rdir / "data.npz")
  cached = gym_datasets.build(str(tmp_path), ENV, **kw)
  assert cached["cached"] is True and os.path.getmtime(rdir / "data.npz") == mtime
  with pytest.raises(ValueError, match=r"seed_3 holds a dataset built with other settings "
                     r"\(num_steps: 300 there, 90 asked\); use another output_dir"):
    gym_datasets.build(str(tmp_path), ENV, **dict(kw, num_steps=90))
  with pytest.raises(ValueError, match=r"dqn_config: .*\"learning_rate\": 0.0023.* there, "
                     r".*\"learning_rate\": 0.001"):
    gym_datasets.build(str(tmp_path), ENV, **dict(kw, config=dataclasses.replace(
        TINY, learning_rate=1e-3)))


def test_an_interrupted_build_is_built_again(tmp_path):
  kw = dict(num_steps=40, seed=1, config=TINY, eval_episodes=1, random_episodes=1,
            log=lambda m: None)  # 40 steps: before learning_starts, no updates
  rdir = tmp_path / ENV / "seed_1"
  rdir.mkdir(parents=True)
  (rdir / "data.npz").write_text("partial")
  s = gym_datasets.build(str(tmp_path), ENV, **kw)
  assert s["cached"] is False and s["updates"] == 0
  assert s["data"]["behaviour_mean_return"] is None or s["finished_episodes"] > 0
  with np.load(rdir / "data.npz") as z:
    assert z["actions"].shape == (40,)


def test_tasks_outside_the_recipe_are_refused(tmp_path):
  with pytest.raises(ValueError, match=r"^MountainCar-v0: no default num_steps \(the recipe's "
                     r"tasks: CartPole-v1, Acrobot-v1, LunarLander-v3\); pass num_steps$"):
    gym_datasets.build(str(tmp_path), "MountainCar-v0")
  with pytest.raises(ValueError, match=r"^no recipe for Pong, gymnasium:Foo-v0; the recipe's "
                     r"tasks: CartPole-v1, Acrobot-v1, LunarLander-v3$"):
    gym_datasets.build_all(str(tmp_path), ["CartPole-v1", "Pong", "gymnasium:Foo-v0"])
  with pytest.raises(ValueError, match=r"^no tasks given; the recipe's tasks: CartPole-v1, "):
    gym_datasets.build_all(str(tmp_path), [])
  assert not os.listdir(tmp_path)


def test_every_task_is_made_once_before_any_is_built(tmp_path, monkeypatch):
  """A task that cannot be made (e.g. LunarLander-v3 without Box2D) is refused before the
  tasks before it are built."""
  def check_game(game):
    if game == "gymnasium:LunarLander-v3":
      raise ValueError("gymnasium:LunarLander-v3: gymnasium cannot make it: no Box2D")
  monkeypatch.setattr(gym_datasets.factory, "check_game", check_game)
  monkeypatch.setattr(gym_datasets, "build", lambda *a, **k: pytest.fail("built"))
  with pytest.raises(ValueError, match=r"^gymnasium:LunarLander-v3: gymnasium cannot make it"):
    gym_datasets.build_all(str(tmp_path), ["CartPole-v1", "LunarLander-v3"])
  assert not os.listdir(tmp_path)
