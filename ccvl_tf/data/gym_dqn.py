"""The online DQN that makes the Gymnasium classic-control datasets (the behaviour policy's
learner), every transition it saw while it learned logged as per-step arrays.

`GymDQNConfig` (hyperparameters and their sources), `config_for(env_id)` (the per-task table),
`make_agent` (TF-Agents' DqnAgent with an MLP QNetwork and Adam) and `run_dqn` (the training
loop, the logged arrays, and the scores of the final greedy policy and of a random policy).
ccvl_tf/data/gym_datasets.py builds the datasets with it.

The loop follows Stable-Baselines3's DQN (stable_baselines3/dqn/dqn.py and
common/off_policy_algorithm.py, commit e05d2dbe), whose per-task settings rl-baselines3-zoo
tunes: uniformly random actions before `learning_starts` env steps, then epsilon-greedy with
epsilon decaying linearly from the run's first step over `exploration_fraction` of it; after
every `train_freq` env steps (once past `learning_starts`), `gradient_steps` updates on
uniform replay batches drawn with replacement; the target network copied from the online one
every `target_update_interval` env steps. The replay bootstraps through a truncation
(discount 1) and not through a termination (discount 0).
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import policy_step
from tf_agents.trajectories import time_step as ts_lib
from tf_agents.trajectories import trajectory
from tf_agents.utils import common

from ccvl_tf.envs import factory

# The logged per-step arrays, in d3rlpy's MDPDataset meaning (run_dqn).
ARRAYS = ("observations", "actions", "rewards", "terminals", "timeouts")
# The agent's own target update is switched off (its period is never reached); the loop copies
# the target every target_update_interval env steps, as SB3 does.
_NEVER = 2**62


@dataclasses.dataclass(frozen=True)
class GymDQNConfig:
  """The online DQN that generates the data (not ccvl_tf.agents.dqn_agent.DQNConfig, the
  offline DQN baseline).

  Defaults: Stable-Baselines3's DQN (``DQN.__init__`` and ``DQNPolicy`` in
  stable_baselines3/dqn/, commit e05d2dbe). `config_for` applies the per-task values of
  rl-baselines3-zoo's ``hyperparams/dqn.yml`` (commit 22e3ff24), :data:`TASK_OVERRIDES`.
  """
  hidden_units: Tuple[int, ...] = (64, 64)  # DQNPolicy net_arch default; ReLU
  learning_rate: float = 1e-4               # learning_rate (constant)
  adam_epsilon: float = 1e-8                # torch.optim.Adam's default eps (SB3's optimizer)
  buffer_size: int = 1_000_000              # buffer_size (uniform replay)
  learning_starts: int = 100                # learning_starts: random actions, no updates
  batch_size: int = 32                      # batch_size
  gamma: float = 0.99                       # gamma
  train_freq: int = 4                       # train_freq, in env steps
  gradient_steps: int = 1                   # gradient_steps; -1: train_freq of them
  target_update_interval: int = 10_000      # target_update_interval, in env steps (tau 1)
  exploration_fraction: float = 0.1         # exploration_fraction of the run
  exploration_initial_eps: float = 1.0      # exploration_initial_eps
  exploration_final_eps: float = 0.05       # exploration_final_eps
  max_grad_norm: float = 10.0               # max_grad_norm (global norm, clip_grad_norm_)
  huber_loss: bool = True                   # F.smooth_l1_loss

  def updates_per_round(self) -> int:
    """Gradient steps after each train_freq env steps (SB3: -1 means as many as env steps)."""
    return self.train_freq if self.gradient_steps < 0 else self.gradient_steps

  def epsilon(self, t: int, num_steps: int) -> float:
    """Probability of a uniformly random action at step t (0-based) of a num_steps run: 1
    before learning_starts, else SB3's LinearSchedule over exploration_fraction of the run
    from its first step."""
    if t < self.learning_starts:
      return 1.0
    frac = min(1.0, t / max(1e-9, self.exploration_fraction * num_steps))
    return self.exploration_initial_eps + frac * (self.exploration_final_eps
                                                  - self.exploration_initial_eps)

  def validate(self) -> None:
    """ValueError (one line naming the field) for a value out of its range."""
    if not self.hidden_units or any(int(h) != h or h < 1 for h in self.hidden_units):
      raise ValueError("GymDQNConfig.hidden_units must be a non-empty tuple of integers >= 1, "
                       "got {!r}".format(self.hidden_units))
    for name in ("buffer_size", "batch_size", "train_freq", "target_update_interval"):
      v = getattr(self, name)
      if int(v) != v or v < 1:
        raise ValueError("GymDQNConfig.{} must be an integer >= 1, got {!r}".format(name, v))
    if int(self.learning_starts) != self.learning_starts or self.learning_starts < 0:
      raise ValueError("GymDQNConfig.learning_starts must be an integer >= 0, got {!r}".format(
          self.learning_starts))
    if int(self.gradient_steps) != self.gradient_steps or self.gradient_steps < -1:
      raise ValueError("GymDQNConfig.gradient_steps must be an integer >= 0, or -1 (one per "
                       "env step), got {!r}".format(self.gradient_steps))
    for name in ("learning_rate", "adam_epsilon", "max_grad_norm"):
      v = getattr(self, name)
      if not (math.isfinite(v) and v > 0):
        raise ValueError("GymDQNConfig.{} must be a finite number > 0, got {!r}".format(name, v))
    for name in ("gamma", "exploration_fraction", "exploration_initial_eps",
                 "exploration_final_eps"):
      v = getattr(self, name)
      if not 0.0 <= v <= 1.0:
        raise ValueError("GymDQNConfig.{} must be in [0, 1], got {!r}".format(name, v))


# rl-baselines3-zoo hyperparams/dqn.yml (commit 22e3ff24), per task: every value the file
# gives besides n_timesteps (the run's length, ccvl_tf.data.gym_datasets.TASKS) and policy
# ('MlpPolicy'). policy_kwargs net_arch -> hidden_units.
TASK_OVERRIDES: Dict[str, dict] = {
    "CartPole-v1": dict(  # "Almost Tuned"
        learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
        gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
        exploration_fraction=0.16, exploration_final_eps=0.04, hidden_units=(256, 256)),
    "Acrobot-v1": dict(  # "Tuned"
        learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0,
        gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=-1,
        exploration_fraction=0.12, exploration_final_eps=0.1, hidden_units=(256, 256)),
    "LunarLander-v3": dict(  # "Tuned"
        learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0,
        gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=-1,
        exploration_fraction=0.12, exploration_final_eps=0.1, hidden_units=(256, 256)),
    "MountainCar-v0": dict(  # "Tuned"
        learning_rate=4e-3, batch_size=128, buffer_size=10_000, learning_starts=1000,
        gamma=0.98, target_update_interval=600, train_freq=16, gradient_steps=8,
        exploration_fraction=0.2, exploration_final_eps=0.07, hidden_units=(256, 256)),
}


def env_id_of(env_name: str) -> str:
  """The Gymnasium id of 'CartPole-v1' or 'gymnasium:CartPole-v1'."""
  name = str(env_name).strip()
  return factory.gymnasium_id(name) if factory.is_gymnasium(name) else name


def config_for(env_name: str) -> GymDQNConfig:
  """SB3's defaults with the task's rl-baselines3-zoo values (:data:`TASK_OVERRIDES`); a task
  without any gets the defaults."""
  return dataclasses.replace(GymDQNConfig(), **TASK_OVERRIDES.get(env_id_of(env_name), {}))


def make_env(env_name: str, seed: int):
  """The unbatched TF-Agents PyEnvironment of a Gymnasium task ('CartPole-v1' or
  'gymnasium:CartPole-v1'), through ccvl_tf.envs.factory.make_env."""
  return factory.make_env(factory.GYMNASIUM_PREFIX + env_id_of(env_name), seed=int(seed)).env


class _Replay:
  """SB3's uniform experience replay (a circular buffer, batches drawn with replacement)."""

  def __init__(self, capacity: int, obs_shape):
    self.obs = np.zeros((capacity,) + tuple(obs_shape), np.float32)
    self.next_obs = np.zeros((capacity,) + tuple(obs_shape), np.float32)
    self.action = np.zeros((capacity,), np.int32)
    self.reward = np.zeros((capacity,), np.float32)
    self.discount = np.zeros((capacity,), np.float32)  # 0 after a termination, else 1
    self.last = np.zeros((capacity,), bool)            # the episode ended (either way)
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
    i = rng.integers(0, self.size, size=batch_size)
    return self.obs[i], self.action[i], self.reward[i], self.discount[i], self.last[i], \
        self.next_obs[i]


def _init_like_pytorch(variables, rng: np.random.Generator) -> None:
  """PyTorch's default nn.Linear init, which SB3's Q-network keeps: weights and biases
  ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Numpy-seeded, so the initial network depends on the
  seed only."""
  fan_in = None
  for v in variables:
    shape = tuple(v.shape.as_list())
    if len(shape) == 2:          # dense kernel [in, out]
      fan_in = shape[0]
    elif len(shape) != 1 or fan_in is None:
      raise ValueError("unexpected variable {} of shape {}".format(v.name, shape))
    bound = 1.0 / math.sqrt(fan_in)
    v.assign(rng.uniform(-bound, bound, size=shape).astype(np.float32))


def make_agent(observation_spec, action_spec, config: GymDQNConfig, seed: int):
  """TF-Agents ``DqnAgent`` with an MLP QNetwork (``config.hidden_units``, ReLU), Adam with
  global-norm clipping, Huber TD loss. The agent's own target update is off: `run_dqn` copies
  the target every target_update_interval env steps. Returns (agent, q_network,
  target_q_network)."""
  obs_spec = tensor_spec.from_spec(observation_spec)
  act_spec = tensor_spec.from_spec(action_spec)
  net = q_network.QNetwork(obs_spec, act_spec, fc_layer_params=tuple(config.hidden_units))
  net.create_variables()
  _init_like_pytorch(net.trainable_variables, np.random.default_rng([int(seed), 7]))
  target = net.copy(name="TargetQNetwork")
  optimizer = tf.keras.optimizers.Adam(learning_rate=config.learning_rate,
                                       epsilon=config.adam_epsilon,
                                       global_clipnorm=config.max_grad_norm)
  optimizer.build(net.trainable_variables)  # its slots now: the update graph traces once
  agent = dqn_agent.DqnAgent(
      ts_lib.time_step_spec(obs_spec), act_spec, q_network=net, target_q_network=target,
      optimizer=optimizer, epsilon_greedy=config.exploration_final_eps,
      target_update_tau=1.0, target_update_period=_NEVER,
      td_errors_loss_fn=(common.element_wise_huber_loss if config.huber_loss
                         else common.element_wise_squared_loss),
      gamma=config.gamma, train_step_counter=tf.Variable(0, dtype=tf.int64))
  agent.initialize()  # target network <- online network
  return agent, net, target


def transition_batch(obs, action, reward, discount, last, next_obs) -> trajectory.Transition:
  """A replay batch as the TF-Agents Transition that ``DqnAgent.train`` takes: s_t
  is never an episode's last state (StepType.MID); s_{t+1} is LAST where the episode ended,
  with discount 0 after a termination and 1 after a truncation (the TD target bootstraps
  through a truncation only)."""
  b = tf.shape(action)[0]
  step = ts_lib.TimeStep(tf.fill([b], ts_lib.StepType.MID), tf.zeros([b]), tf.ones([b]),
                         tf.convert_to_tensor(obs, tf.float32))
  nxt = ts_lib.TimeStep(tf.where(tf.convert_to_tensor(last), ts_lib.StepType.LAST,
                                 ts_lib.StepType.MID),
                        tf.convert_to_tensor(reward, tf.float32),
                        tf.convert_to_tensor(discount, tf.float32),
                        tf.convert_to_tensor(next_obs, tf.float32))
  return trajectory.Transition(step, policy_step.PolicyStep(
      tf.convert_to_tensor(action, tf.int32), (), ()), nxt)


def _train_round_fn(agent):
  """One update round in one graph call: k updates, one per replay batch of the stacked
  [k, B, ...] arrays, in order (the same updates as k calls, without k dispatches). Traced
  without autograph: converting TF-Agents' training code costs ~15 s of CPU, and it needs
  none."""
  @common.function(reduce_retracing=False)
  def train_round(obs, action, reward, discount, last, next_obs):
    def body(i, _):
      loss = agent.train(transition_batch(obs[i], action[i], reward[i], discount[i], last[i],
                                          next_obs[i])).loss
      return i + 1, loss
    _, loss = tf.while_loop(lambda i, _: i < tf.shape(action)[0], body,
                            (tf.constant(0), tf.constant(0.0)), parallel_iterations=1)
    return loss
  return train_round


def _sync_fn(net, target):
  @common.function(reduce_retracing=False)
  def sync():
    common.soft_variables_update(net.variables, target.variables, tau=1.0)
  return sync


class Greedy:
  """obs [D] -> the action of the largest Q-value, computed in numpy from a copy of the
  QNetwork's weights (dense layers, ReLU between them; a TensorFlow call per env step costs
  more than the forward pass). `refresh()` copies the weights again after an update."""

  def __init__(self, q_net):
    self._variables = q_net.trainable_variables
    self._layers = []
    self.refresh()

  def refresh(self) -> None:
    values = [v.numpy() for v in self._variables]
    self._layers = list(zip(values[0::2], values[1::2]))  # (kernel [in, out], bias [out])

  def q_values(self, obs: np.ndarray) -> np.ndarray:
    h = np.asarray(obs, np.float32).reshape(-1)
    for i, (kernel, bias) in enumerate(self._layers):
      h = h @ kernel + bias
      if i + 1 < len(self._layers):
        h = np.maximum(h, 0.0)
    return h

  def __call__(self, obs: np.ndarray) -> int:
    return int(np.argmax(self.q_values(obs)))


def evaluate(env, act: Optional[Callable[[np.ndarray], int]], num_episodes: int, *,
             seed: int = 0) -> List[float]:
  """Undiscounted returns of ``num_episodes`` episodes of ``act`` (``None``: uniformly random
  actions, numpy-seeded with ``seed``) in ``env``, from its next reset."""
  rng = np.random.default_rng([int(seed), 3])
  out = []
  for _ in range(int(num_episodes)):
    time_step = env.reset()
    while True:
      a = int(rng.integers(env.num_actions)) if act is None else act(time_step.observation)
      time_step = env.step(a)
      if time_step.is_last():
        out.append(float(env.episode_raw_return))
        break
  return out


@dataclasses.dataclass
class DQNRun:
  """What `run_dqn` returns: the logged arrays (:data:`ARRAYS`), the summary, the network."""
  arrays: Dict[str, np.ndarray]
  summary: dict
  q_network: object


def run_dqn(env_name: str, num_steps: int, *, config: Optional[GymDQNConfig] = None,
            seed: int = 0, eval_episodes: int = 20, random_episodes: int = 100,
            progress: Optional[Callable[[dict], None]] = None,
            progress_every: int = 10_000) -> DQNRun:
  """Trains an online DQN in the Gymnasium task ``env_name`` ('CartPole-v1' or
  'gymnasium:CartPole-v1', made by ccvl_tf.envs.factory.make_env with ``seed``) for
  ``num_steps`` env steps and returns every step it took as per-step arrays with d3rlpy
  MDPDataset meaning, for step t:
    observations [T, D] float32  the observation the action was chosen on
    actions      [T]    int32    the action taken (0..num_actions-1)
    rewards      [T]    float32  the reward the environment gave for it
    terminals    [T]    float32  1 where the episode terminated after this step
    timeouts     [T]    float32  1 where it was truncated after this step (time limit), and
                                 on the run's last step when that episode is unfinished
  Exactly one of terminals[t], timeouts[t] is 1 at every episode end (terminated wins where
  the time limit falls on the terminating step, as in the environment).

  Order per step (SB3): act (random before learning_starts, else epsilon-greedy), step,
  store; every target_update_interval steps copy the target; every train_freq steps past
  learning_starts, ``config.updates_per_round()`` updates. Then the final network is scored
  greedily over ``eval_episodes`` episodes (env seed + 10,000) and a uniformly random policy
  over ``random_episodes`` (env seed + 20,000).

  Randomness: numpy ``default_rng([seed, k])`` for the network init, epsilon coins, random
  actions and replay sampling; the env's own seed. The same seed (and TensorFlow thread count)
  gives identical arrays.

  ``config``: None -> ``config_for(env_name)``. ``progress``: called with a dict (step,
  num_steps, steps_per_s, eta_s, episodes, mean_return of the last 20, epsilon, loss) every
  ``progress_every`` steps and at the end.
  """
  config = config_for(env_name) if config is None else config
  config.validate()
  for name, v in (("num_steps", num_steps), ("eval_episodes", eval_episodes),
                  ("random_episodes", random_episodes), ("progress_every", progress_every)):
    if int(v) != v or v < 1:
      raise ValueError("{} must be an integer >= 1, got {!r}".format(name, v))
  num_steps = int(num_steps)
  env = make_env(env_name, seed)
  obs_shape = tuple(env.observation_spec().shape)
  if len(obs_shape) != 1:
    raise ValueError("{}: observations of shape {} are not vectors; this DQN's MLP takes "
                     "vector observations [D]".format(env.game, list(obs_shape)))
  num_actions = env.num_actions
  agent, q_net, target = make_agent(env.observation_spec(), env.action_spec(), config, seed)
  greedy = Greedy(q_net)
  train_round, sync = _train_round_fn(agent), _sync_fn(q_net, target)
  k = config.updates_per_round()
  act_rng = np.random.default_rng([int(seed), 1])
  replay_rng = np.random.default_rng([int(seed), 2])
  replay = _Replay(min(config.buffer_size, num_steps), obs_shape)
  arrays = dict(observations=np.zeros((num_steps,) + obs_shape, np.float32),
                actions=np.zeros((num_steps,), np.int32),
                rewards=np.zeros((num_steps,), np.float32),
                terminals=np.zeros((num_steps,), np.float32),
                timeouts=np.zeros((num_steps,), np.float32))
  t0 = time.time()
  time_step = env.reset()
  returns: List[float] = []
  lengths: List[int] = []
  ended_at: List[int] = []
  losses: List[float] = []
  updates = 0
  eps = 1.0
  for t in range(num_steps):
    obs = np.asarray(time_step.observation, np.float32)
    eps = config.epsilon(t, num_steps)
    if act_rng.random() < eps:
      action = int(act_rng.integers(num_actions))
    else:
      action = greedy(obs)
    nxt = env.step(action)
    last = bool(nxt.is_last())
    discount = float(nxt.discount)
    replay.add(obs, action, float(nxt.reward), discount, last, nxt.observation)
    arrays["observations"][t] = obs
    arrays["actions"][t] = action
    arrays["rewards"][t] = float(nxt.reward)
    if last:
      arrays["terminals" if discount == 0.0 else "timeouts"][t] = 1.0
      returns.append(float(env.episode_raw_return))
      lengths.append(int(env.episode_steps))
      ended_at.append(t + 1)
      time_step = env.reset()
    else:
      time_step = nxt
    if (t + 1) % config.target_update_interval == 0:
      sync()
    if (t + 1) % config.train_freq == 0 and t + 1 > config.learning_starts and k > 0:
      batches = [replay.sample(config.batch_size, replay_rng) for _ in range(k)]
      loss = train_round(*[np.stack(column) for column in zip(*batches)])
      greedy.refresh()
      if (updates + k) // 100 > updates // 100:
        losses.append(float(loss))  # the round's last loss, about every 100 updates
      updates += k
    if progress is not None and ((t + 1) % progress_every == 0 or t + 1 == num_steps):
      el = time.time() - t0
      recent = returns[-20:]
      progress(dict(step=t + 1, num_steps=num_steps, steps_per_s=(t + 1) / max(el, 1e-9),
                    eta_s=(num_steps - t - 1) * el / (t + 1), episodes=len(returns),
                    mean_return=float(np.mean(recent)) if recent else None,
                    epsilon=eps, loss=losses[-1] if losses else None))
  unfinished = not (arrays["terminals"][-1] or arrays["timeouts"][-1])
  if unfinished:
    arrays["timeouts"][-1] = 1.0  # the data ends at an episode boundary
  train_seconds = time.time() - t0
  t_eval = time.time()
  eval_returns = evaluate(make_env(env_name, seed + 10_000), greedy, eval_episodes)
  random_returns = evaluate(make_env(env_name, seed + 20_000), None, random_episodes,
                            seed=seed + 20_000)
  eval_seconds = time.time() - t_eval
  summary = dict(
      env_id=env_id_of(env_name), num_actions=int(num_actions),
      observation_shape=list(obs_shape), steps=num_steps, updates=updates,
      finished_episodes=len(returns), unfinished_last_episode=bool(unfinished),
      episode_returns=returns, episode_lengths=lengths, episode_end_steps=ended_at,
      losses_about_every_100_updates=losses,
      final_greedy_mean=float(np.mean(eval_returns)), final_greedy_returns=eval_returns,
      random_mean=float(np.mean(random_returns)), random_returns=random_returns,
      train_seconds=train_seconds, steps_per_s=num_steps / max(train_seconds, 1e-9),
      eval_seconds=eval_seconds, wall_seconds=time.time() - t0)
  return DQNRun(arrays, summary, q_net)
