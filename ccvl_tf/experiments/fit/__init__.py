"""`ccvl_tf.fit`: one call that does an offline run, on one's own data or on Atari's.

    import ccvl_tf
    data = ccvl_tf.Transitions.from_arrays(observations, actions, rewards, terminals, timeouts)
    result = ccvl_tf.fit(data, "ccvl", env="gymnasium:CartPole-v1", root_dir="runs/cartpole")
    result.table            # each policy's mean return with its 95% CI
    result.policies         # TF-Agents policies: 'policy' (CCVL's adaptive), 'policy_fixed'
    result.paths            # the SavedModels, checkpoints, TensorBoard summaries, results

The data decides the route:
  * a `Transitions` (numpy arrays, an .npz, RLDS episodes, a Minari dataset), an .npz path or a
    Minari dataset directory: experiments/fit/own_data.py, with the network following the
    observations (an MLP for vectors, the Nature torso for frames, MinAtar's for 10x10xC
    grids) and the settings of experiments/fit/settings.py;
  * a DQN Replay directory, or None (the scripted Breakout dataset the demo collects): the
    Atari run of binaries/train_offline.py (experiments/offline/runner.py, then the reference
    agents and the results table, experiments/compare/offline_table.py), with its settings
    (experiments/offline/config.py OfflineConfig) as keywords.
Both resume a stopped run from its root_dir's checkpoints and refuse one of other settings.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Mapping, Optional

from ccvl_tf.data import transitions as transitions_lib


@dataclasses.dataclass
class FitResult:
  """What `fit` returns.

  Attributes:
    agent: the trained learner (ccvl_tf/agents/learner.py: a CCVLAgent, CQLAgent, ...).
    policies: export name -> TF-Agents policy: 'policy' is the method's own (CCVL: the
      confidence-adaptive policy; fixed_ccvl: Fixed-CCVL), with CCVL the other one beside it
      ('policy_fixed' / 'policy_adaptive'). Each is exported as a SavedModel in paths[name].
    paths: root_dir, checkpoints, summaries (TensorBoard), summary (summary.json), each
      export name's SavedModel directory and, with an environment, results_md / results_csv /
      results_json / results_png.
    table: the results table's rows (policy, episodes, mean, ci_low, ci_high, scores); empty
      without an environment.
    summary: summary.json's content.
  """
  agent: object
  policies: Dict[str, object]
  paths: Dict[str, str]
  table: List[Dict[str, object]]
  summary: Dict[str, object]


def load_data(data):
  """`data` as the route takes it: a Transitions (given, or read from an .npz file or a Minari
  dataset directory) or a DQN Replay directory path / None (unchanged)."""
  if data is None or isinstance(data, transitions_lib.Transitions):
    return data
  if not isinstance(data, (str, os.PathLike)):
    if hasattr(data, "element_spec"):  # a tf.data.Dataset of RLDS episodes
      return transitions_lib.Transitions.from_rlds(data)
    raise TypeError(f"data must be a ccvl_tf.Transitions, a path (.npz file, Minari dataset "
                    f"directory, DQN Replay directory), RLDS episodes or None, got "
                    f"{type(data).__name__}")
  path = os.fspath(data)
  if path.startswith("tfds:"):
    return transitions_lib.Transitions.from_tfds(path.removeprefix("tfds:"))
  if path.endswith(".npz"):
    return transitions_lib.Transitions.from_npz(path)
  if path.startswith("minari:") or os.path.isfile(os.path.join(path, "data",
                                                               "main_data.hdf5")):
    return transitions_lib.Transitions.from_minari(path.removeprefix("minari:"))
  return path


def fit(data=None, method: str = "ccvl", *, root_dir: str, env: Optional[str] = None,
        network_config=None, log: Callable[[str], None] = print, **settings) -> FitResult:
  """Trains `method` offline on `data`, exports its policies and, with an environment, scores
  them; resumes the run in `root_dir` when there is one (module docstring).

  Args:
    data: a `ccvl_tf.Transitions`; an .npz path (observations, actions, rewards, terminals,
      timeouts); a Minari dataset directory ('minari:<dir>' or the directory itself); RLDS
      episodes (a tf.data.Dataset) or a TFDS dataset of them on disk ('tfds:<dir>'); a DQN
      Replay directory; None (Atari: the demo's collected dataset).
    method: 'ccvl' (CCVL acted with the confidence-adaptive policy), 'fixed_ccvl', 'cql',
      'rem', 'aevl', 'aevl_td', 'dqn' or 'bc'.
    root_dir: the run's directory.
    env: the environment the policies are scored in ('gymnasium:CartPole-v1', 'minatar/Breakout',
      'Breakout', 'gridworld'); None on own data: train and export only. Atari route: the game
      (default 'Breakout').
    network_config: a ccvl_tf.QNetworkConfig replacing the one the observations get (own data).
    log: where progress lines go.
    **settings: the run's settings (own data: experiments/fit/settings.py FitSettings, e.g.
      num_steps, batch_size, seed, eval_episodes; Atari: OfflineConfig's, e.g. preset, subset)
      and the learner's (alpha, learning_rate, target_update_period, ..., as the agent
      configs declare them).

  Returns:
    FitResult.
  """
  data = load_data(data)
  if isinstance(data, transitions_lib.Transitions):
    from ccvl_tf.experiments.fit import own_data, settings as fit_settings  # pylint: disable=g-import-not-at-top
    own, learner_values = fit_settings.split_settings(dict(settings, root_dir=root_dir))
    agent, policies, paths, table, summary = own_data.run(
        data, method, env, fit_settings.FitSettings(**own), learner_values, network_config,
        log=log)
    return FitResult(agent, policies, paths, table, summary)
  if network_config is not None:
    raise ValueError("network_config is taken on own data (a Transitions); the Atari run's "
                     "network is the Nature DQN's")
  from ccvl_tf.envs import factory, gymnasium_name  # pylint: disable=g-import-not-at-top
  if data is not None and isinstance(env, str) and (
      env == factory.GRIDWORLD or factory.is_minatar(env) or gymnasium_name.is_gymnasium(env)):
    raise ValueError(f"data {data}: not an .npz file, a Minari dataset directory or "
                     f"'tfds:<dir>', so it is read as a DQN Replay directory, which is Atari "
                     f"data; env {env!r} takes own data (those formats, or a Transitions)")
  from ccvl_tf.experiments.fit import replay  # pylint: disable=g-import-not-at-top
  return replay.fit_replay(data, method, root_dir=root_dir, env=env, log=log, **settings)


__all__ = ["FitResult", "fit", "load_data"]
