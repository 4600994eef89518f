"""The online DQN that generates the MinAtar datasets (the behaviour policy's learner).

`BehaviourDQNConfig` (hyperparameters and their sources), `make_agent` (TF-Agents' DqnAgent
with MinAtar's network and initialization) and `run_dqn` (the training loop, every transition
written to a replay writer). ccvl_tf/data/minatar_datasets.py builds the datasets with it.
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, List, Optional

import numpy as np
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import policy_step
from tf_agents.trajectories import time_step as ts_lib
from tf_agents.trajectories import trajectory
from tf_agents.utils import common

from ccvl_tf.data import replay_writer


@dataclasses.dataclass(frozen=True)
class BehaviourDQNConfig:
  """The online DQN that generates the data (the behaviour policy's learner; not
  ccvl_tf.agents.dqn_agent.DQNConfig, the offline DQN baseline).

  Source of each value: MinAtar's DQN baseline (Young & Tian 2019, arXiv
  1903.03176; github.com/kenjyoung/MinAtar ``examples/dqn.py`` constants in
  capitals), except where noted.
  """
  batch_size: int = 32                # BATCH_SIZE
  replay_capacity: int = 100_000      # REPLAY_BUFFER_SIZE (uniform replay)
  update_period: int = 1              # TRAINING_FREQ: one update per env step
  target_update_period: int = 1_000   # TARGET_NETWORK_UPDATE_FREQ (in updates)
  min_replay_size: int = 5_000        # REPLAY_START_SIZE: uniform random actions until then
  epsilon_start: float = 1.0          # EPSILON
  epsilon_end: float = 0.1            # END_EPSILON
  # FIRST_N_FRAMES = 100,000 of a 5M-frame run (2%). Our runs are ~50x shorter,
  # so the linear decay lasts min(100,000, epsilon_decay_fraction * num_steps)
  # steps after min_replay_size (see epsilon_decay_steps()).
  epsilon_decay_frames: int = 100_000
  epsilon_decay_fraction: float = 0.2  # ours: scaling for short runs
  # STEP_SIZE is 2.5e-4; ours: 1e-3 (4x) because our runs are ~50x shorter than
  # MinAtar's 5M frames. Measured (docs/minatar.md): Breakout eval return 1.1 after
  # 100k steps at 2.5e-4 vs 2.0 after 60k steps at 1e-3 (random: 0.46).
  learning_rate: float = 1e-3         # centered RMSProp
  rmsprop_rho: float = 0.95           # SQUARED_GRAD_MOMENTUM
  rmsprop_epsilon: float = 0.01       # MIN_SQUARED_GRAD
  gamma: float = 0.99                 # GAMMA
  conv_filters: int = 16              # QNetwork: Conv2d(C, 16, 3, stride 1), valid padding
  conv_kernel: int = 3
  conv_stride: int = 1
  hidden_units: int = 128             # fc_hidden: 128 ReLUs
  huber_loss: bool = True             # f.smooth_l1_loss
  # Ours: train on rewards clipped to [-1, 1] as Dopamine's DQN did for the DQN
  # Replay Dataset (and the dataset stores them clipped). MinAtar's baseline does
  # not clip; only Seaquest's surfacing bonus and SpaceInvaders' multi-kills exceed 1.
  clip_rewards: bool = True

  def epsilon_decay_steps(self, num_steps: int) -> int:
    return max(1, min(self.epsilon_decay_frames, int(self.epsilon_decay_fraction * num_steps)))

  def epsilon(self, t: int, num_steps: int) -> float:
    """MinAtar's schedule: 1.0 (uniform random) before min_replay_size, then a linear
    decay from epsilon_start to epsilon_end over epsilon_decay_steps, then constant."""
    if t < self.min_replay_size:
      return 1.0
    frac = min(1.0, (t - self.min_replay_size) / self.epsilon_decay_steps(num_steps))
    return self.epsilon_start + frac * (self.epsilon_end - self.epsilon_start)

  def validate(self) -> None:
    for name in ("batch_size", "replay_capacity", "update_period", "target_update_period",
                 "epsilon_decay_frames", "conv_filters", "conv_kernel", "conv_stride",
                 "hidden_units"):
      v = getattr(self, name)
      if int(v) != v or v < 1:
        raise ValueError("BehaviourDQNConfig.{} must be an integer >= 1, got {!r}".format(
            name, v))
    if self.min_replay_size < self.batch_size:
      raise ValueError("BehaviourDQNConfig.min_replay_size ({}) must be >= batch_size "
                       "({})".format(self.min_replay_size, self.batch_size))
    for name in ("epsilon_start", "epsilon_end", "gamma"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError("BehaviourDQNConfig.{} must be in [0, 1]".format(name))


class _Replay:
  """MinAtar's uniform experience replay (a circular buffer), in numpy."""

  def __init__(self, capacity: int, obs_shape):
    self.obs = np.zeros((capacity,) + tuple(obs_shape), np.uint8)       # [N, 10, 10, C]
    self.next_obs = np.zeros((capacity,) + tuple(obs_shape), np.uint8)  # [N, 10, 10, C]
    self.action = np.zeros((capacity,), np.int32)
    self.reward = np.zeros((capacity,), np.float32)
    self.discount = np.zeros((capacity,), np.float32)  # 0 at a game over, else 1
    self.last = np.zeros((capacity,), bool)            # episode ended (game over or cap)
    self.size = 0
    self.cursor = 0
    self.capacity = capacity

  def add(self, obs, action, reward, discount, last, next_obs) -> None:
    c = self.cursor
    self.obs[c], self.action[c], self.reward[c] = obs, action, reward
    self.discount[c], self.last[c], self.next_obs[c] = discount, last, next_obs
    self.cursor = (c + 1) % self.capacity
    self.size = min(self.size + 1, self.capacity)

  def sample(self, batch_size: int, rng: np.random.Generator):
    i = rng.integers(0, self.size, size=batch_size)  # with replacement (Dopamine)
    return self.obs[i], self.action[i], self.reward[i], self.discount[i], self.last[i], \
        self.next_obs[i]


def _init_like_pytorch(variables, rng: np.random.Generator) -> None:
  """PyTorch's default Conv2d/Linear init, which MinAtar's baseline uses: weights and
  biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Numpy-seeded, so the initial
  network does not depend on TensorFlow's global seed or op order."""
  fan_in = None
  for v in variables:
    shape = tuple(v.shape.as_list())
    if len(shape) == 4:          # conv kernel [kh, kw, in, out]
      fan_in = shape[0] * shape[1] * shape[2]
    elif len(shape) == 2:        # dense kernel [in, out]
      fan_in = shape[0]
    elif len(shape) != 1 or fan_in is None:
      raise ValueError("unexpected variable {} of shape {}".format(v.name, shape))
    bound = 1.0 / math.sqrt(fan_in)
    v.assign(rng.uniform(-bound, bound, size=shape).astype(np.float32))


def make_agent(observation_spec, action_spec, config: BehaviourDQNConfig, seed: int):
  """TF-Agents ``DqnAgent`` with the MinAtar network. Returns (agent, q_network)."""
  obs_spec = tensor_spec.from_spec(observation_spec)
  act_spec = tensor_spec.from_spec(action_spec)
  net = q_network.QNetwork(
      obs_spec, act_spec,
      preprocessing_layers=tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32)),
      conv_layer_params=[(config.conv_filters, config.conv_kernel, config.conv_stride)],
      fc_layer_params=(config.hidden_units,))
  net.create_variables()
  _init_like_pytorch(net.trainable_variables, np.random.default_rng([int(seed), 7]))
  optimizer = tf.keras.optimizers.RMSprop(learning_rate=config.learning_rate,
                                          rho=config.rmsprop_rho,
                                          epsilon=config.rmsprop_epsilon, centered=True)
  agent = dqn_agent.DqnAgent(
      ts_lib.time_step_spec(obs_spec), act_spec, q_network=net, optimizer=optimizer,
      epsilon_greedy=config.epsilon_end,
      target_update_tau=1.0, target_update_period=config.target_update_period,
      td_errors_loss_fn=(common.element_wise_huber_loss if config.huber_loss
                         else common.element_wise_squared_loss),
      gamma=config.gamma, train_step_counter=tf.Variable(0, dtype=tf.int64))
  agent.initialize()  # target network <- online network
  return agent, net


def _greedy_fn(q_net, obs_shape):
  @common.function(reduce_retracing=False, input_signature=[tf.TensorSpec((1,) + tuple(obs_shape), tf.uint8)])
  def greedy(obs):
    q, _ = q_net(obs, training=False)                 # [1, A]
    return tf.argmax(q[0], output_type=tf.int32)
  return lambda o: int(greedy(o[None]).numpy())


def _train_fn(agent):
  @common.function(reduce_retracing=False)
  def train(obs, action, reward, discount, last, next_obs):
    b = tf.shape(action)[0]
    mid = tf.fill([b], ts_lib.StepType.MID)
    # s_t is never the last state of an episode; the next one is LAST at an episode end.
    step = ts_lib.TimeStep(mid, tf.zeros([b]), tf.ones([b]), obs)
    nxt = ts_lib.TimeStep(tf.where(last, ts_lib.StepType.LAST, ts_lib.StepType.MID),
                          reward, discount, next_obs)
    return agent.train(trajectory.Transition(step, policy_step.PolicyStep(action, (), ()),
                                             nxt)).loss
  return train


def run_dqn(env, num_steps: int, *, config: BehaviourDQNConfig = BehaviourDQNConfig(),
            seed: int = 0,
            writer: Optional[replay_writer.DopamineReplayWriter] = None,
            progress: Optional[Callable[[dict], None]] = None, progress_every: int = 5_000):
  """Trains an online DQN in ``env`` (a MinAtarEnvironment with clip_rewards as
  ``config.clip_rewards``) for ``num_steps`` steps, adding every transition to
  ``writer`` (observation before the action, action, reward as the agent sees it,
  terminal = 1 at every episode end, game over or the episode cap, as in the DQN
  Replay Dataset; the run's last episode is cut off without a terminal flag).

  Order per step (MinAtar's baseline): act epsilon-greedily, step, store, then one
  update from a uniform replay batch once ``min_replay_size`` transitions exist.
  Randomness: numpy ``default_rng([seed, ...])`` for the network init, epsilon
  coins, random actions and replay sampling; the env has its own seed.

  Returns (summary dict, agent, greedy function obs -> action).
  """
  config.validate()
  if num_steps < 1:
    raise ValueError("num_steps must be >= 1, got {}".format(num_steps))
  obs_shape = tuple(env.observation_spec().shape)
  num_actions = env.num_actions
  agent, q_net = make_agent(env.observation_spec(), env.action_spec(), config, seed)
  greedy = _greedy_fn(q_net, obs_shape)
  train = _train_fn(agent)
  act_rng = np.random.default_rng([int(seed), 1])
  replay_rng = np.random.default_rng([int(seed), 2])
  replay = _Replay(min(config.replay_capacity, num_steps), obs_shape)
  t0 = time.time()
  time_step = env.reset()
  returns: List[float] = []
  lengths: List[int] = []
  losses: List[float] = []
  updates = 0
  for t in range(num_steps):
    obs = time_step.observation                       # uint8 [10, 10, C]
    eps = config.epsilon(t, num_steps)
    if act_rng.random() < eps:
      action = int(act_rng.integers(num_actions))
    else:
      action = greedy(obs)
    nxt = env.step(action)
    last = bool(nxt.is_last())
    replay.add(obs, action, float(nxt.reward), float(nxt.discount), last, nxt.observation)
    if writer is not None:
      writer.add(obs, action, float(nxt.reward), last)
    if last:
      returns.append(env.episode_raw_return)
      lengths.append(env.episode_steps)
      time_step = env.reset()
    else:
      time_step = nxt
    if replay.size >= config.min_replay_size and (t + 1) % config.update_period == 0:
      loss = train(*replay.sample(config.batch_size, replay_rng))
      updates += 1
      if updates % 100 == 0:
        losses.append(float(loss))
    if progress is not None and ((t + 1) % progress_every == 0 or t + 1 == num_steps):
      el = time.time() - t0
      recent = returns[-20:]
      progress(dict(step=t + 1, num_steps=num_steps, steps_per_s=(t + 1) / max(el, 1e-9),
                    eta_s=(num_steps - t - 1) * el / (t + 1), episodes=len(returns),
                    mean_return=float(np.mean(recent)) if recent else None,
                    epsilon=eps, loss=losses[-1] if losses else None))
  summary = dict(steps=num_steps, updates=updates, episodes=len(returns),
                 episode_returns=[float(r) for r in returns], episode_lengths=lengths,
                 seconds=time.time() - t0, losses_every_100_updates=losses)
  return summary, agent, greedy
