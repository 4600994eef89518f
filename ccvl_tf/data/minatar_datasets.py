"""MinAtar offline datasets made the way the DQN Replay Dataset was made.

The DQN Replay Dataset (Agarwal et al., ICML 2020) logged *every* transition of
an online Nature-DQN run (Dopamine) into 50 replay checkpoints. Here, per game:

1. an online DQN (TF-Agents' own ``DqnAgent``; the MinAtar paper's network: one
   conv layer of 16 3x3 filters, stride 1, then a dense layer of 128 ReLUs) is
   trained for ``num_steps`` environment steps with epsilon-greedy exploration
   and uniform experience replay, with MinAtar's DQN baseline hyperparameters
   except a 4x learning rate, a scaled epsilon decay and clipped rewards
   (:class:`BehaviourDQNConfig`; sources and reasons there, measurements in docs/minatar.md);
2. every transition it takes is written, in order, with
   :class:`ccvl_tf.data.replay_writer.DopamineReplayWriter` (stack_size 1: a slot
   holds the whole uint8 [10, 10, C] observation before the action, the action,
   the clipped reward and the terminal flag) into ``num_checkpoints`` (K)
   checkpoints of capacity ``ceil((num_steps + 1) / K)`` slots. As in batch_rl
   the last one is the final, partial buffer;
3. the final Q-network, acted epsilon-greedily with epsilon 0.001, is evaluated
   for ``eval_episodes`` episodes: its mean raw return is the "DQN" reference
   score of the game (the Atari tables normalize to Nature DQN); a uniformly
   random policy is scored the same way (``random_episodes`` episodes). Both go
   to ``minatar_scores.json`` (:func:`load_scores` reads them back as the
   ``references`` of :func:`ccvl_tf.scores.normalized_score`).

Subsets (:func:`subset_table`, written into each dataset's ``ccvl_dataset.json``
so that ``FrameStore.from_replay(dir, subset)`` / ``dqn_replay.subset_plan``
use them): the DQN Replay names scaled to the run:
  * ``"1%"`` / ``"5%"``: the first 1% / 5% of the slots of *every* checkpoint
    (DQN Replay: the first 10,000 / 50,000 of each 1M-slot checkpoint), taken
    as literal prefixes (``dqn_replay.PREFIX``; see ``dqn_replay`` for why not
    batch_rl's capacity trick with stack size 1);
  * ``"initial10%"``: the first 10% of the checkpoints whole (DQN Replay: the
    first 5 of 50), i.e. the first 10% of the run, when the policy is still
    mostly random;
  * ``"all"``: everything.

Layout under ``output_dir`` (one *run* per game and seed, like DQN Replay's
``<game>/<run>/replay_logs``)::

  minatar_scores.json                     DQN and random reference scores per game
  <Game>/<seed>/replay_logs/*_ckpt.N.gz   the Dopamine checkpoints
  <Game>/<seed>/replay_logs/ccvl_dataset.json
  <Game>/<seed>/summary.json              steps, seconds, returns, hyperparameters
  <Game>/<seed>/dqn_q_network.npz         the final online Q-network's weights
  <Game>/<seed>/COMPLETE                  written last: the run is finished

Public API: :class:`BehaviourDQNConfig`, :func:`build_game`, :func:`build_all`,
:func:`run_dqn`, :func:`evaluate`, :func:`random_policy_returns`,
:func:`subset_table`, :func:`checkpoint_capacity`, :func:`run_dir`,
:func:`replay_dir`, :func:`load_scores`, :func:`write_scores`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_writer
from ccvl_tf.envs import minatar as minatar_env

DEFAULT_STEPS = 100_000
# Games whose DQN needs a longer run to be clearly better than random (docs/minatar.md,
# measured): at 100k steps Asterix's DQN scored 0.30 (random 0.57), Freeway's 0.45 (0.34),
# Seaquest's 0.35 (0.10). These override DEFAULT_STEPS in build_all / the binary.
DEFAULT_GAME_STEPS = {"Asterix": 300_000, "Freeway": 300_000, "Seaquest": 300_000}
DEFAULT_NUM_CHECKPOINTS = 20
EVAL_EPSILON = 0.001          # the paper's / Dopamine's evaluation epsilon
SCORES_FILENAME = "minatar_scores.json"
SUMMARY_FILENAME = "summary.json"
COMPLETE_FILENAME = "COMPLETE"
WEIGHTS_FILENAME = "dqn_q_network.npz"
# name -> (fraction of each checkpoint's slots or None, fraction of checkpoints or None)
SUBSET_FRACTIONS = {
    "1%": (0.01, None),
    "5%": (0.05, None),
    "initial10%": (None, 0.10),
    "all": (None, None),
}


@dataclasses.dataclass(frozen=True)
class BehaviourDQNConfig:
  """The online DQN that generates the data (the behaviour policy's learner; not
  agents.dqn_agent.DQNConfig, the offline DQN baseline).

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


# ----------------------------------------------------------------------- layout

def run_dir(output_dir: str, game: str, seed: int) -> str:
  """``<output_dir>/<Game>/<seed>``: one run (DQN Replay: ``<game>/<run>``)."""
  return os.path.join(output_dir, minatar_env.canonical_game_name(game), str(int(seed)))


def replay_dir(output_dir: str, game: str, seed: int) -> str:
  """The Dopamine checkpoint directory of a run (what FrameStore.from_replay takes)."""
  return os.path.join(run_dir(output_dir, game, seed), "replay_logs")


def is_complete(output_dir: str, game: str, seed: int) -> bool:
  return os.path.exists(os.path.join(run_dir(output_dir, game, seed), COMPLETE_FILENAME))


def checkpoint_capacity(num_steps: int, num_checkpoints: int) -> int:
  """Slots per checkpoint: ``ceil((num_steps + 1) / K)``. The writer logs a full
  buffer whenever ``add_count % C == C - 1``, so a run of ``num_steps`` adds gives
  K checkpoints (the last one the final, partial buffer unless K divides
  num_steps + 1). At least 2 slots (one transition needs two)."""
  if num_steps < 1 or num_checkpoints < 1:
    raise ValueError("num_steps and num_checkpoints must be >= 1, got {} and {}".format(
        num_steps, num_checkpoints))
  return max(2, int(math.ceil((num_steps + 1) / num_checkpoints)))


def subset_table(capacity: int, num_checkpoints: int) -> Dict[str, list]:
  """The ``"subsets"`` table of ``ccvl_dataset.json`` for a run with checkpoints
  of ``capacity`` slots: {name: [rows per checkpoint or None, number of leading
  checkpoints or None, "prefix"?]} from :data:`SUBSET_FRACTIONS`. Rows are
  ``max(2, round(fraction * capacity))``, checkpoints ``max(1, round(fraction * K))``."""
  table = {}
  for name, (row_frac, ckpt_frac) in SUBSET_FRACTIONS.items():
    rows = None if row_frac is None else min(capacity, max(2, int(round(row_frac * capacity))))
    n_ckpt = None if ckpt_frac is None else max(1, int(round(ckpt_frac * num_checkpoints)))
    table[name] = [rows, n_ckpt] + ([dqn_replay.PREFIX] if rows is not None else [])
  return table


# ------------------------------------------------------------------------ DQN

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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.agents.dqn import dqn_agent  # pylint: disable=g-import-not-at-top
  from tf_agents.networks import q_network  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts_lib  # pylint: disable=g-import-not-at-top
  from tf_agents.utils import common  # pylint: disable=g-import-not-at-top

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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  @tf.function(input_signature=[tf.TensorSpec((1,) + tuple(obs_shape), tf.uint8)])
  def greedy(obs):
    q, _ = q_net(obs, training=False)                 # [1, A]
    return tf.argmax(q[0], output_type=tf.int32)
  return lambda o: int(greedy(o[None]).numpy())


def _train_fn(agent):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import policy_step  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts_lib  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top

  @tf.function
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


def evaluate(env, act: Callable[[np.ndarray], int], num_episodes: int, *,
             epsilon: float = EVAL_EPSILON, seed: int = 0) -> List[float]:
  """Raw returns of ``num_episodes`` episodes of ``act`` taken epsilon-greedily
  (``act=None``: uniformly random)."""
  rng = np.random.default_rng([int(seed), 3])
  out = []
  for _ in range(num_episodes):
    time_step = env.reset()
    while True:
      if act is None or rng.random() < epsilon:
        a = int(rng.integers(env.num_actions))
      else:
        a = act(time_step.observation)
      time_step = env.step(a)
      if time_step.is_last():
        out.append(float(env.episode_raw_return))
        break
  return out


def random_policy_returns(game: str, num_episodes: int, *, seed: int = 0,
                          **env_kwargs) -> List[float]:
  """Raw returns of a uniformly random policy over the minimal action set (seeded)."""
  env = minatar_env.MinAtarEnvironment(game, seed=seed, **env_kwargs)
  return evaluate(env, None, num_episodes, seed=seed)


def validate_split(game: str, num_steps: int, num_checkpoints: int) -> None:
  """ValueError unless `num_steps` adds fill exactly `num_checkpoints` checkpoints of
  `checkpoint_capacity` slots (too few steps, or a K that the ceil-sized buffers skip)."""
  capacity = checkpoint_capacity(num_steps, num_checkpoints)
  written = int(math.ceil((num_steps + 1) / capacity))
  if written != num_checkpoints:
    fits = [k for k in range(1, num_checkpoints + 1)
            if math.ceil((num_steps + 1) / checkpoint_capacity(num_steps, k)) == k]
    raise ValueError(
        f"{game}: {num_steps} steps give {written} checkpoints of {capacity} slots, not "
        f"--num_checkpoints={num_checkpoints} (each checkpoint holds >= 2 transitions); use "
        f"more steps or --num_checkpoints={fits[-1]}")


# ---------------------------------------------------------------------- building

def build_game(output_dir: str, game: str, *, num_steps: int = DEFAULT_STEPS, seed: int = 0,
               num_checkpoints: int = DEFAULT_NUM_CHECKPOINTS, eval_episodes: int = 20,
               random_episodes: int = 100, config: BehaviourDQNConfig = BehaviourDQNConfig(),
               sticky_action_prob: float = minatar_env.STICKY_ACTION_PROB,
               max_episode_steps: int = minatar_env.MAX_EPISODE_STEPS,
               log: Callable[[str], None] = print, progress_every: int = 5_000) -> dict:
  """Builds (or finds cached) the dataset of one game and seed; returns its summary.

  A run directory with a COMPLETE marker is reused if it was built with the same
  settings (else ValueError naming the directory); one without the marker (an
  interrupted build) is deleted and rebuilt from scratch.
  """
  game = minatar_env.canonical_game_name(game)
  if num_steps < 1 or num_checkpoints < 1 or eval_episodes < 1 or random_episodes < 1:
    raise ValueError("steps, num_checkpoints, eval_episodes and random_episodes must be >= 1")
  validate_split(game, num_steps, num_checkpoints)
  rdir = run_dir(output_dir, game, seed)
  settings = dict(game=game, seed=int(seed), steps=int(num_steps),
                  num_checkpoints=int(num_checkpoints), eval_episodes=int(eval_episodes),
                  random_episodes=int(random_episodes),
                  sticky_action_prob=float(sticky_action_prob),
                  max_episode_steps=int(max_episode_steps),
                  dqn_config=dataclasses.asdict(config))
  summary_path = os.path.join(rdir, SUMMARY_FILENAME)
  if is_complete(output_dir, game, seed):
    with open(summary_path) as f:
      summary = json.load(f)
    if summary.get("settings") != settings:
      diff = sorted(k for k in settings if summary.get("settings", {}).get(k) != settings[k])
      raise ValueError(
          "{} holds a finished {} dataset built with other settings ({}: {} there, {} asked); "
          "use another --output_dir or delete that directory".format(
              rdir, game, ", ".join(diff),
              ", ".join(str(summary.get("settings", {}).get(k)) for k in diff),
              ", ".join(str(settings[k]) for k in diff)))
    log("[{}] cached: {} (COMPLETE)".format(game, rdir))
    summary["cached"] = True
    return summary
  if os.path.isdir(rdir):
    log("[{}] {} has no COMPLETE marker (interrupted build): deleting it and starting "
        "again".format(game, rdir))
    shutil.rmtree(rdir)
  t_start = time.time()
  env_kwargs = dict(sticky_action_prob=sticky_action_prob, max_episode_steps=max_episode_steps,
                    clip_rewards=config.clip_rewards)
  env = minatar_env.MinAtarEnvironment(game, seed=seed, **env_kwargs)
  capacity = checkpoint_capacity(num_steps, num_checkpoints)
  rlogs = replay_dir(output_dir, game, seed)
  writer = replay_writer.DopamineReplayWriter(
      rlogs, replay_capacity=capacity, stack_size=1,
      observation_shape=env.observation_spec().shape,
      metadata=dict(game=game, suite="minatar", num_actions=env.num_actions,
                    action_set=env.action_set, policy="online DQN (epsilon-greedy)",
                    steps=num_steps, seed=seed, sticky_action_prob=sticky_action_prob,
                    max_episode_steps=max_episode_steps, reward_clipping=config.clip_rewards,
                    num_checkpoints=num_checkpoints,
                    subsets=subset_table(capacity, num_checkpoints)))
  log("[{}] online DQN for {} steps ({} actions, observation {}), {} checkpoints of {} "
      "slots -> {}".format(game, num_steps, env.num_actions, list(env.observation_spec().shape),
                           num_checkpoints, capacity, rlogs))

  def _progress(p):
    ret = "-" if p["mean_return"] is None else "{:.2f}".format(p["mean_return"])
    log("[{}] step {}/{}  {:.0f} steps/s  ETA {:.0f}s  episodes {}  mean return (last 20) {}  "
        "epsilon {:.3f}".format(game, p["step"], p["num_steps"], p["steps_per_s"], p["eta_s"],
                                p["episodes"], ret, p["epsilon"]))

  train_summary, agent, greedy = run_dqn(env, num_steps, config=config, seed=seed,
                                         writer=writer, progress=_progress,
                                         progress_every=progress_every)
  suffixes = writer.close()
  t_eval = time.time()
  eval_env = minatar_env.MinAtarEnvironment(game, seed=seed + 10_000, **env_kwargs)
  dqn_returns = evaluate(eval_env, greedy, eval_episodes, seed=seed + 10_000)
  rand_returns = random_policy_returns(game, random_episodes, seed=seed + 20_000, **env_kwargs)
  eval_seconds = time.time() - t_eval
  weights = {"{:02d}_{}".format(i, v.name.replace("/", "_").replace(":", "_")): v.numpy()
             for i, v in enumerate(agent._q_network.variables)}  # pylint: disable=protected-access
  np.savez(os.path.join(rdir, WEIGHTS_FILENAME), **weights)
  rets = train_summary["episode_returns"]
  tail = rets[-max(1, len(rets) // 10):] if rets else []
  summary = dict(
      settings=settings, game=game, seed=int(seed), replay_dir=rlogs,
      checkpoint_capacity=capacity, suffixes=suffixes,
      subsets=subset_table(capacity, num_checkpoints),
      dqn_eval_mean=float(np.mean(dqn_returns)), dqn_eval_returns=dqn_returns,
      dqn_eval_epsilon=EVAL_EPSILON,
      random_mean=float(np.mean(rand_returns)), random_returns=rand_returns,
      train_episodes=train_summary["episodes"],
      train_return_first10pct=float(np.mean(rets[:max(1, len(rets) // 10)])) if rets else None,
      train_return_last10pct=float(np.mean(tail)) if tail else None,
      train_episode_returns=rets, train_episode_lengths=train_summary["episode_lengths"],
      updates=train_summary["updates"], losses_every_100_updates=
      train_summary["losses_every_100_updates"],
      dqn_seconds=train_summary["seconds"], eval_seconds=eval_seconds,
      total_seconds=time.time() - t_start,
      dataset_bytes=sum(os.path.getsize(os.path.join(rlogs, n)) for n in os.listdir(rlogs)))
  with open(summary_path + ".tmp", "w") as f:
    json.dump(summary, f, indent=1)
  os.replace(summary_path + ".tmp", summary_path)
  with open(os.path.join(rdir, COMPLETE_FILENAME), "w") as f:
    f.write("{}\n".format(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
  log("[{}] done in {:.0f}s ({:.0f}s DQN, {:.0f}s scoring): DQN eval return {:.2f} "
      "(epsilon {}), random {:.2f}; {} checkpoints, {:.1f} MB".format(
          game, summary["total_seconds"], summary["dqn_seconds"], eval_seconds,
          summary["dqn_eval_mean"], EVAL_EPSILON, summary["random_mean"], len(suffixes),
          summary["dataset_bytes"] / 1e6))
  summary["cached"] = False
  return summary


def parse_game_steps(text: str) -> Dict[str, int]:
  """``"Asterix:300000,Freeway:300000"`` -> {"Asterix": 300000, "Freeway": 300000}
  (canonical names; ValueError naming the bad entry and the expected form)."""
  out: Dict[str, int] = {}
  for item in [t.strip() for t in text.split(",") if t.strip()]:
    name, sep, value = item.partition(":")
    try:
      steps = int(value)
    except ValueError:
      steps = 0
    if not sep or steps < 1:
      raise ValueError("bad per-game steps {!r}: expected Game:steps with steps an integer "
                       ">= 1, e.g. Asterix:300000".format(item))
    out[minatar_env.canonical_game_name(name.strip())] = steps
  return out


def build_all(output_dir: str, games: Sequence[str], *, log: Callable[[str], None] = print,
              num_steps: int = DEFAULT_STEPS, game_steps: Optional[Dict[str, int]] = None,
              **kwargs) -> Dict[str, dict]:
  """:func:`build_game` for each game (in order), then :func:`write_scores`.

  Each game runs for ``game_steps[game]`` steps if given there, else ``num_steps``
  (``game_steps=None``: :data:`DEFAULT_GAME_STEPS`; pass ``{}`` for one length for all)."""
  names = [minatar_env.canonical_game_name(g) for g in games]  # fail fast on a bad name
  per_game = dict(DEFAULT_GAME_STEPS if game_steps is None else
                  {minatar_env.canonical_game_name(g): int(n) for g, n in game_steps.items()})
  k = kwargs.get("num_checkpoints", DEFAULT_NUM_CHECKPOINTS)
  for g in names:  # every game's split checked before any game is built
    validate_split(g, per_game.get(g, num_steps), k)
  out = {}
  for g in names:
    out[g] = build_game(output_dir, g, log=log, num_steps=per_game.get(g, num_steps), **kwargs)
  write_scores(output_dir)
  return out


def write_scores(output_dir: str) -> dict:
  """Collects every finished run's reference scores into ``minatar_scores.json``:
  {"games": {Game: {"dqn": mean over seeds, "random": ..., "runs": {seed: ...}}},
  "normalization": "..."}."""
  games: Dict[str, dict] = {}
  for game in minatar_env.valid_game_names():
    gdir = os.path.join(output_dir, game)
    if not os.path.isdir(gdir):
      continue
    for seed in sorted(os.listdir(gdir)):
      rdir = os.path.join(gdir, seed)
      if not os.path.exists(os.path.join(rdir, COMPLETE_FILENAME)):
        continue
      with open(os.path.join(rdir, SUMMARY_FILENAME)) as f:
        s = json.load(f)
      games.setdefault(game, {"runs": {}})["runs"][seed] = dict(
          dqn=s["dqn_eval_mean"], random=s["random_mean"], steps=s["settings"]["steps"],
          dqn_eval_episodes=len(s["dqn_eval_returns"]),
          random_episodes=len(s["random_returns"]))
  for g in games.values():
    g["dqn"] = float(np.mean([r["dqn"] for r in g["runs"].values()]))
    g["random"] = float(np.mean([r["random"] for r in g["runs"].values()]))
  scores = dict(
      games=games,
      normalization="normalized = (score - random) / (dqn - random): 0 = uniformly random "
                    "policy, 1 = the online DQN that generated the data (its final Q-network, "
                    "epsilon {}), as the Atari tables normalize to Nature DQN".format(
                        EVAL_EPSILON))
  path = os.path.join(output_dir, SCORES_FILENAME)
  os.makedirs(output_dir, exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(scores, f, indent=1, sort_keys=True)
  os.replace(path + ".tmp", path)
  return scores


def load_scores(output_dir: str) -> Dict[str, Dict[str, float]]:
  """{Game: {"dqn": x, "random": y}} from ``minatar_scores.json``; raises
  FileNotFoundError saying how to make it."""
  path = os.path.join(output_dir, SCORES_FILENAME)
  if not os.path.exists(path):
    raise FileNotFoundError(
        "{} does not exist; build the MinAtar datasets first: python "
        "binaries/make_minatar_datasets.py --output_dir={}".format(path, output_dir))
  with open(path) as f:
    games = json.load(f)["games"]
  return {g: dict(dqn=v["dqn"], random=v["random"]) for g, v in games.items()}
