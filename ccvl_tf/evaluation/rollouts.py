"""Running a policy for evaluation episodes in any unbatched TF-Agents PyEnvironment
(`run_episodes`, `CompiledPolicy`) and loading exported policies (`load_saved_policy`; as a
callable `time_step -> action` for collecting a dataset: `saved_model_policy`).

The evaluation protocol, and where the statistics of the scores are: docs/policies.md
"Evaluation" (ccvl_tf/evaluation/score_stats.py).
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Callable, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf.runtime import paths
from ccvl_tf.runtime import strict_json

# TensorFlow, TF-Agents and the modules that load them (belief, training) are imported in the
# functions that run or load policies: reporting and the compare report import this module
# without TensorFlow (~0.2 s instead of ~2.5 s, measured).


@dataclasses.dataclass
class EpisodeRecord:
  """One evaluation episode."""
  run: int               # run (seed) index
  episode: int           # episode index within the run
  return_: float         # sum of the rewards the environment emitted (clipped on Atari)
  raw_score: float       # the game score (unclipped; = return_ when the env has no raw score)
  length: int            # agent steps
  deltas: List[float]    # delta acted under at each step (empty if the policy emits none)
  map_delta: float       # argmax of the policy's belief at the episode's end (nan if none)
  log_belief: Optional[np.ndarray] = None  # the policy's log-belief [K] at the episode's end
  # The squared Bellman errors e(delta) [K] float64 the belief summed in this episode (each
  # transition's, exactly as they updated it), and how many transitions they are; None for a
  # policy whose state keeps no such record (ccvl_tf.algorithm.policies.SQ_ERROR_SUM).
  sq_error_sum: Optional[np.ndarray] = None
  sq_error_count: Optional[int] = None


def _belief_of(state) -> Optional[np.ndarray]:
  """The log-belief [K] in a batch-1 policy state (None for a policy without one)."""
  if isinstance(state, Mapping) and "log_belief" in state:
    return np.asarray(state["log_belief"])[0]
  return None


def sq_errors_of(state, row: int = 0):
  """(sum [K] float64, count) of the belief's record in row `row` of a policy state (the
  running sums, `ccvl_tf.algorithm.policies.SQ_ERROR_SUM` / `SQ_ERROR_COUNT`); None for a
  state without them. An episode's are the difference of two of these."""
  if isinstance(state, Mapping) and "sq_error_sum" in state and "sq_error_count" in state:
    return (np.array(np.asarray(state["sq_error_sum"])[row], np.float64),
            int(np.asarray(state["sq_error_count"])[row]))
  return None


def episode_sq_errors(now, before):
  """EpisodeRecord's (sq_error_sum, sq_error_count) of an episode from the running record at
  its end (`now`, sq_errors_of) and at its start (`before`); (None, None) without one."""
  if now is None or before is None:
    return None, None
  return now[0] - before[0], now[1] - before[1]


def sq_error_fields(records: Sequence[EpisodeRecord]) -> dict:
  """The summed squared Bellman errors of `records` for a result row that lists its episodes
  (a compare result file, a results table's row): {'sq_error_sum': per episode its [K] list,
  'sq_error_count': per episode its count} (None for an episode without them), or {} when no
  episode's policy kept the record (a policy without a belief)."""
  if all(r.sq_error_sum is None for r in records):
    return {}
  return {"sq_error_sum": [None if r.sq_error_sum is None else
                           [float(v) for v in np.asarray(r.sq_error_sum, np.float64).reshape(-1)]
                           for r in records],
          "sq_error_count": [None if r.sq_error_count is None else int(r.sq_error_count)
                             for r in records]}


SQ_ERROR_SUM_COLUMN = "sq_error_sum@"


def sq_error_columns(grid) -> List[str]:
  """The per-episode files' column of each grid delta's summed squared Bellman errors:
  'sq_error_sum@<delta>', the delta as the shortest decimal of its float32 (0.0625, 0.1875,
  ...)."""
  return [SQ_ERROR_SUM_COLUMN + np.format_float_positional(np.float32(d), trim="-")
          for d in np.asarray(grid, np.float32).reshape(-1)]


def delta_grid_of(k: int) -> np.ndarray:
  """ccvl_tf.algorithm.belief.delta_grid(k) without importing TensorFlow (the midpoints of k
  equal bins of (0, 1), float32): the reports' column names."""
  return ((np.arange(int(k), dtype=np.float64) + 0.5) / int(k)).astype(np.float32)


def _initial_state(policy, seed: int):
  """The policy's batch-1 initial state, its delta sampler ('rng' entry) seeded with `seed`."""
  # Here: TensorFlow (see the note at the top).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  state = policy.get_initial_state(batch_size=1)
  if isinstance(state, Mapping):
    state = dict(state)
    if "rng" in state:  # per-run seed of the delta sampler
      r = np.asarray(state["rng"]).copy()
      r[:, 0] = seed
      state["rng"] = tf.constant(r, tf.int64)
  return state


def _delta_of(step) -> Optional[float]:
  """The delta a PolicyStep acted under (its info's 'delta'), None if it reports none."""
  info = getattr(step, "info", None)
  delta = getattr(info, "delta", None)
  if delta is None and isinstance(info, Mapping):
    delta = info.get("delta")
  return None if delta is None else float(np.asarray(delta).reshape(-1)[0])


def run_episodes(policy, env, num_episodes: int, *, run: int = 0, epsilon: float = 0.0,
                 seed: int = 0, delta_grid: Optional[np.ndarray] = None,
                 raw_score_fn: Optional[Callable[[object], Optional[float]]] = None,
                 on_episode: Optional[Callable[[EpisodeRecord], None]] = None,
                 on_step: Optional[Callable[[int, int], None]] = None,
                 max_total_steps: Optional[int] = None) -> List[EpisodeRecord]:
  # Over 80 lines with its docstring: the loop is one state machine over the TimeSteps (score
  # the step, close the episode at LAST, act, explore), clearer read in one piece.
  """Runs `policy` for `num_episodes` episodes of `env`, carrying the policy state throughout.

  The policy state is created once (get_initial_state(1)) and carried across episode
  boundaries, so a confidence-adaptive belief adapts over the whole run; the policy is called on
  every time step including LAST (its transition, with the final reward, is scored) and the
  environment is then reset. The action chosen at a LAST step is not executed. Each record
  holds the belief at the episode's end and the squared Bellman errors it summed during the
  episode (the differences of the state's running record; `EpisodeRecord`).

  Args:
    policy: a TF-Agents TFPolicy or a SavedModel loaded with tf.saved_model.load (anything with
      `get_initial_state(batch_size)` and `action(time_step, state)`), batch size 1.
    env: an unbatched TF-Agents PyEnvironment.
    num_episodes: >= 1.
    run: index stored in the records.
    epsilon: evaluation epsilon-greedy applied here (with a numpy RNG seeded by `seed`); when the
      random action replaces the greedy one, the state's 'prev_action' is overwritten with the
      executed action so that a belief scores what really happened. Use 0 when the exported
      policy already is epsilon-greedy.
    seed: seeds the epsilon RNG, and the 'rng' entry of a ConfidenceAdaptivePolicy state (so
      runs with different seeds draw different deltas).
    delta_grid: the policy's delta grid, for `map_delta` (default: infer K from the state and use
      ccvl_tf.algorithm.belief.delta_grid(K)).
    raw_score_fn: env -> game score of the episode just ended (None: the sum of rewards). Atari:
      `lambda env: env.get_info()['episode_raw_return']`.
    on_episode: called with each finished EpisodeRecord (progress display).
    on_step: called as on_step(steps_in_episode, total_steps) after every env step.
    max_total_steps: optional safety cap on the total number of steps.

  Returns:
    A list of EpisodeRecord, one per episode.
  """
  # Here: TensorFlow (see the note at the top).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm import belief  # pylint: disable=g-import-not-at-top

  if int(num_episodes) != num_episodes or num_episodes < 1:
    raise ValueError(f"num_episodes must be an integer >= 1, got {num_episodes!r}")
  if not 0.0 <= epsilon <= 1.0:
    raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
  if getattr(env, "batched", False):
    raise ValueError("run_episodes needs an unbatched PyEnvironment")
  rng = np.random.default_rng(seed)
  action_spec = env.action_spec()
  num_actions = int(action_spec.maximum) - int(action_spec.minimum) + 1

  state = _initial_state(policy, seed)
  log_b = _belief_of(state)
  summed = sq_errors_of(state)  # the running record at the start of the episode
  if delta_grid is None and log_b is not None:
    delta_grid = belief.delta_grid(log_b.shape[-1])

  def batch1(x):
    return tf.constant(np.asarray(x)[np.newaxis])  # [...] -> [1, ...]

  records: List[EpisodeRecord] = []
  time_step = env.reset()
  ep_return, ep_len, ep_deltas, total = 0.0, 0, [], 0
  while len(records) < num_episodes:
    t = ts.TimeStep(batch1(time_step.step_type), batch1(np.float32(time_step.reward)),
                    batch1(np.float32(time_step.discount)), batch1(time_step.observation))
    step = policy.action(t, state)
    state = step.state
    if not time_step.is_first():
      ep_return += float(time_step.reward)
    if time_step.is_last():
      log_b = _belief_of(state)
      map_delta = (float(delta_grid[int(np.argmax(log_b))])
                   if log_b is not None and delta_grid is not None else math.nan)
      raw = raw_score_fn(env) if raw_score_fn is not None else None
      now = sq_errors_of(state)
      sq_sum, sq_count = episode_sq_errors(now, summed)
      summed = now
      rec = EpisodeRecord(run=run, episode=len(records), return_=ep_return,
                          raw_score=float(ep_return if raw is None else raw), length=ep_len,
                          deltas=ep_deltas, map_delta=map_delta,
                          log_belief=None if log_b is None else np.array(log_b),
                          sq_error_sum=sq_sum, sq_error_count=sq_count)
      records.append(rec)
      if on_episode is not None:
        on_episode(rec)
      ep_return, ep_len, ep_deltas = 0.0, 0, []
      if len(records) >= num_episodes:
        break
      time_step = env.reset()
      continue
    action = int(np.asarray(step.action).reshape(-1)[0])
    delta = _delta_of(step)
    if delta is not None:
      ep_deltas.append(delta)
    if epsilon > 0.0 and rng.random() < epsilon:
      action = int(action_spec.minimum) + int(rng.integers(num_actions))
      if isinstance(state, Mapping) and "prev_action" in state:
        state = dict(state)
        state["prev_action"] = tf.constant([action], tf.as_dtype(state["prev_action"].dtype))
    time_step = env.step(np.asarray(action, dtype=action_spec.dtype))
    ep_len += 1
    total += 1
    if on_step is not None:
      on_step(ep_len, total)
    if max_total_steps is not None and total >= max_total_steps:
      raise RuntimeError(f"run_episodes: exceeded max_total_steps={max_total_steps}")
  return records


class CompiledPolicy:
  """A TF-Agents policy (or loaded SavedModel) whose `action` runs as one tf.function: what
  run_episodes calls once per step (traced once instead of running eagerly, ~5x faster)."""

  def __init__(self, policy):
    # Here: TensorFlow (see the note at the top).
    from tf_agents.utils import common  # pylint: disable=g-import-not-at-top
    self.policy = policy
    self.action = common.function(policy.action, reduce_retracing=False)
    self.get_initial_state = policy.get_initial_state


# ------------------------------------------------------------------------------ loading policies
def check_saved_model_dir(policy_dir: str) -> None:
  """Raises ValueError unless `policy_dir` is a directory holding a SavedModel (no TF import)."""
  # Here: training loads TensorFlow (see the note at the top).
  from ccvl_tf.runtime import training  # pylint: disable=g-import-not-at-top
  training.check_input_dir(policy_dir, "--policy_dir", "an exported policy's SavedModel "
                           "directory")
  if not _has_saved_model(policy_dir):
    # A run's directory (train_offline.py --root_dir, fit's root_dir): name its exports.
    names = [] if paths.is_remote(policy_dir) else sorted(os.listdir(policy_dir))
    inside = [os.path.join(policy_dir, n) for n in names
              if _has_saved_model(os.path.join(policy_dir, n))]
    if inside:
      raise ValueError(
          f"{policy_dir!r} is a run's directory, not a SavedModel directory: its exported "
          f"policies are {' and '.join(repr(p) for p in inside)}")
    raise ValueError(
        f"{policy_dir!r} is not a SavedModel directory (no saved_model.pb); export a policy with "
        "ccvl_tf.algorithm.policies.export_policy (TF-Agents PolicySaver) first")


def _has_saved_model(directory: str) -> bool:
  return (paths.exists(os.path.join(directory, "saved_model.pb"))
          or paths.exists(os.path.join(directory, "saved_model.pbtxt")))


# The name of the record an export keeps of its game (ccvl_tf.algorithm.policy_export.POLICY_RECORD;
# spelled here so that reading it does not import TensorFlow).
POLICY_RECORD = "ccvl_policy.json"


def _spelling(game) -> str:
  """A game name without case, '_', '-' or spaces ('space_invaders' = 'SpaceInvaders')."""
  return "".join(c for c in str(game).lower() if c.isalnum() or c == "/")


def check_policy_game(policy_dir: str, game: str,
                      action_set: Optional[Sequence[int]]) -> Optional[str]:
  """Checks the game an export records (POLICY_RECORD, written by export_policy) against
  `game` and its `action_set` (None: not compared).

  Returns None, or, for an export without the record (made before exports kept it), a
  sentence for the log saying what could not be checked.

  Raises:
    ValueError: naming the file, what it records and what the caller plays, when they differ;
      or a record that cannot be read.
  """
  path = os.path.join(policy_dir, POLICY_RECORD)
  if not paths.exists(path):
    return (f"{policy_dir} has no {POLICY_RECORD} (exported before policies recorded their "
            f"game): its game and action set cannot be checked against {game}; checked "
            f"instead: its action count and observation spec (policy_specs.pbtxt)")
  try:
    record = strict_json.loads(paths.read_text(path))
    recorded_game = record["game"]
    recorded_set = record.get("action_set")
  except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
    raise ValueError(f"{path} is not a policy's game record ({type(e).__name__}: {e}); "
                     f"re-export the policy") from e
  problems = []
  if _spelling(recorded_game) != _spelling(game):
    problems.append(f"the game {recorded_game}, but this run's game is {game}")
  if (action_set is not None and recorded_set is not None
      and [int(a) for a in recorded_set] != [int(a) for a in action_set]):
    problems.append(f"the action set (action ids) {list(recorded_set)}, but {game}'s is "
                    f"{[int(a) for a in action_set]}")
  if problems:
    raise ValueError(f"{path} records a policy of another game: " + "; ".join(problems)
                     + f". Use it with the game it was trained in ({recorded_game})")
  return None


def load_saved_policy(policy_dir: str, num_actions: Optional[int] = None,
                      observation_shape: Optional[Sequence[int]] = None,
                      observation_dtype=None, game: Optional[str] = None,
                      action_set: Optional[Sequence[int]] = None):
  """Loads an exported policy (ccvl_tf.algorithm.policies.export_policy / PolicySaver) with clear
  errors.

  Args:
    policy_dir: directory holding saved_model.pb (and policy_specs.pbtxt).
    num_actions: if given, must equal the policy's action count (from policy_specs.pbtxt).
    observation_shape: if given, must equal the policy's observation shape.
    observation_dtype: if given (numpy or TensorFlow dtype), must equal the policy's
      observation dtype: the environment's observations are then the policy's, and a call
      cannot fail on a dtype the policy does not take.
    game, action_set: if given, the game the export records must be this one, with this
      action set (`check_policy_game`).

  Returns:
    (loaded SavedModel, dict(num_actions=..., observation_shape=..., observation_dtype=...) or
    {} without specs file; with `game`, also 'game_note': None, or what could not be checked).
  """
  # Here: TensorFlow (see the note at the top).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  check_saved_model_dir(policy_dir)
  meta = {}
  if game is not None:
    meta["game_note"] = check_policy_game(policy_dir, game, action_set)
  specs_path = os.path.join(policy_dir, "policy_specs.pbtxt")
  if paths.exists(specs_path):
    # Here: TF-Agents (see the note at the top).
    from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
    specs = tensor_spec.from_pbtxt_file(specs_path)
    data_spec = specs["collect_data_spec"] if isinstance(specs, Mapping) else specs
    action_spec = data_spec.action
    meta["num_actions"] = int(np.asarray(action_spec.maximum) - np.asarray(action_spec.minimum)
                              + 1)
    meta["observation_shape"] = tuple(data_spec.observation.shape.as_list())
    meta["observation_dtype"] = data_spec.observation.dtype.name
  elif num_actions is not None or observation_shape is not None or observation_dtype is not None:
    raise ValueError(
        f"{specs_path} is missing, so the policy in {policy_dir!r} cannot be checked against "
        f"this game's actions and observations (a policy of another game would run and report a "
        f"meaningless score); re-export it with ccvl_tf.algorithm.policies.export_policy, which "
        f"writes the spec file")
  if num_actions is not None and "num_actions" in meta and meta["num_actions"] != num_actions:
    raise ValueError(
        f"the policy in {policy_dir!r} has {meta['num_actions']} actions but the game has "
        f"{num_actions}: it was exported for another game")
  if (observation_shape is not None and "observation_shape" in meta
      and tuple(meta["observation_shape"]) != tuple(observation_shape)):
    raise ValueError(
        f"the policy in {policy_dir!r} expects observations of shape "
        f"{meta['observation_shape']} but the environment gives {tuple(observation_shape)}")
  if observation_dtype is not None and "observation_dtype" in meta:
    given = tf.as_dtype(observation_dtype).name
    if given != meta["observation_dtype"]:
      raise ValueError(
          f"the policy in {policy_dir!r} takes {meta['observation_dtype']} observations "
          f"{list(meta['observation_shape'])} (policy_specs.pbtxt) but the environment gives "
          f"{given}: convert them first, or export the policy for this environment")
  # A plain PolicySaver export also serializes distribution(), whose TFP type specs must be
  # registered before loading: importing TFP does that.
  import tensorflow_probability  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  try:
    saved = tf.saved_model.load(policy_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f"could not load the SavedModel in {policy_dir!r}: {e}") from e
  for attr in ("action", "get_initial_state"):
    if not hasattr(saved, attr):
      raise ValueError(f"the SavedModel in {policy_dir!r} has no '{attr}' function: not a "
                       "TF-Agents policy export")
  return saved, meta


def saved_model_policy(policy_dir: str, env=None) -> Callable:
  """A TF-Agents PolicySaver export as a callable ``time_step -> action``.

  Loads with ``tf.saved_model.load`` and calls ``get_initial_state(1)`` at each
  episode start and ``action(TimeStep(step_type, reward, discount, observation),
  policy_state)`` (batch of 1) each step, carrying the policy state. With ``env`` and the
  export's ``policy_specs.pbtxt`` (ccvl_tf.algorithm.policies.export_policy writes it), the policy's
  action count and observation shape and dtype, and the game and action set its
  ``ccvl_policy.json`` records, are checked against the environment's first
  (``load_saved_policy``: a ValueError naming both; an export without the record
  prints a note saying what could not be checked).
  """
  # Here: TensorFlow and TF-Agents (see the note at the top).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts_lib  # pylint: disable=g-import-not-at-top
  if not paths.isdir(policy_dir):
    raise ValueError("--policy must be 'random' or a SavedModel directory; {} does not "
                     "exist".format(policy_dir))
  if env is not None and paths.exists(os.path.join(policy_dir, "policy_specs.pbtxt")):
    spec = env.observation_spec()
    policy, meta = load_saved_policy(policy_dir, num_actions=env.num_actions,
                                     observation_shape=spec.shape,
                                     observation_dtype=spec.dtype, game=env.game,
                                     action_set=env.action_set)
    if meta.get("game_note"):
      print(f"Note: {meta['game_note']}.", flush=True)
  else:
    policy = tf.saved_model.load(policy_dir)
  state = {"s": None}

  def act(time_step) -> int:
    if time_step.is_first() or state["s"] is None:
      state["s"] = policy.get_initial_state(batch_size=1)
    batched = ts_lib.TimeStep(
        step_type=tf.constant([time_step.step_type], tf.int32),
        reward=tf.constant([time_step.reward], tf.float32),
        discount=tf.constant([time_step.discount], tf.float32),
        observation=tf.constant(np.asarray(time_step.observation)[None]))
    step = policy.action(batched, state["s"])
    state["s"] = step.state
    return int(np.asarray(step.action).reshape(-1)[0])
  return act
