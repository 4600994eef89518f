"""The settings of a run on one's own data (`ccvl_tf.fit` on a `Transitions` dataset), each
declared once, and the network a dataset's observations get.

`FitSettings` holds the run's own settings; the learner's (alpha, learning_rate, ...) are
the agent configs' (ccvl_tf/agents/*_agent.py), given by name as `agent_values` and filled
from `VECTOR_DEFAULTS` / `IMAGE_DEFAULTS` where not given (`agent_values_for`).
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Dict, Mapping, Optional, Sequence, Tuple

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import run_settings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.algorithm import networks
from ccvl_tf.experiments import agent_registry

# summary.json's 'route' of a run on own data: fine-tuning reads such a run's record by it
# (experiments/online/own_data.py).
ROUTE = "own_data"
TORSOS = ("auto",) + tuple(networks.TORSOS)

# The learner settings a run on vector observations uses where the caller gives none: chosen
# on development datasets by the rule committed before the runs (docs/own_data_protocol.md,
# Study 1; docs/results/own_data_defaults.md: candidate C). DR3 off, as MinAtar's suite.
VECTOR_DEFAULTS: Dict[str, object] = dict(learning_rate=1e-3, target_update_period=100,
                                          alpha=0.1, dr3_coef=0.0)
# Frames (uint8 [H, W, C]): the agent configs' own defaults (the demo's data scale).
IMAGE_DEFAULTS: Dict[str, object] = {}


@config_flags.compared_settings(
    compared=("seed", "batch_size", "torso", "mlp_units"),
    not_compared={
        "root_dir": "where the run writes",
        "num_steps": "the budget: a larger one continues the run where it stopped",
        "eval_interval": "which steps are evaluated",
        "log_interval": "how often progress is printed",
        "checkpoint_interval": "how often the (exact-resume) checkpoints are written",
        "tf_threads": "the float rounding of CPU kernels only, no random stream (as "
                      "train_offline.py's)",
        "deterministic": "no bit changed on CPU at a fixed thread count (as train_offline.py's)",
        **{name: "used after training, afresh at every call: the policies and the results "
                 "table are rebuilt from the checkpoint and summary.json records the value"
           for name in ("eval_episodes", "eval_max_steps", "eval_epsilon", "num_grid_deltas",
                        "belief_temperature", "belief_prior", "held_out_batches")}})
@dataclasses.dataclass(frozen=True)
class FitSettings:
  """A run on a `Transitions` dataset: what `ccvl_tf.fit` takes besides the data, the method
  and the learner's settings."""
  root_dir: str = setting("", "Directory of the run: checkpoints, summaries, policies, "
                          "results (a rerun resumes).", output="dir")
  seed: int = run_settings.borrow("seed")
  num_steps: int = run_settings.borrow("num_steps")
  batch_size: int = run_settings.borrow("batch_size", default=64)
  eval_episodes: int = run_settings.borrow("eval_episodes", lower_bound=0)
  eval_max_steps: Optional[int] = run_settings.borrow(
      "eval_max_steps", default=None, note="the environment's own limit")
  eval_interval: int = run_settings.borrow("eval_interval", default=0)
  eval_epsilon: float = setting(0.0, "Epsilon of the evaluation's epsilon-greedy actions.",
                                lower_bound=0.0, upper_bound=1.0)
  log_interval: int = run_settings.borrow("log_interval", default=1000)
  checkpoint_interval: int = run_settings.borrow("checkpoint_interval", default=1000)
  num_grid_deltas: int = run_settings.borrow("num_grid_deltas")
  belief_temperature: Optional[float] = run_settings.borrow(
      "belief_temperature", default=None, note="set from held-out data")
  belief_prior: str = run_settings.borrow("belief_prior", default=config_flags.DECLARED)
  torso: str = setting("auto", "The network's torso: auto (from the observations: mlp for "
                       "vectors, nature for frames of at least 36x36, minatar for 10x10xC "
                       "grids), or one of mlp, nature, minatar.", enum_values=TORSOS)
  mlp_units: Tuple[int, ...] = setting((256, 256), "Widths of the MLP torso's ReLU layers.",
                                       kind="csv", flag_default="256,256", distinct=False,
                                       parse=lambda v: parse_units(v))
  # TensorFlow's threads and op determinism for the process (experiments/tf_setup.py), set
  # at the start of the run as train_offline.py sets them for its Atari route.
  tf_threads: int = run_settings.borrow("tf_threads")
  deterministic: bool = run_settings.borrow("deterministic")
  held_out_batches: int = setting(8, "Batches of the data (another seed) on which Fixed-CCVL's "
                                  "delta and the belief temperature are chosen after "
                                  "training.", lower_bound=1, upper_bound=10_000)

  def validate(self) -> None:
    config_flags.check(self)
    if not self.root_dir:
      raise ValueError("root_dir is required: the run's checkpoints, policies and results go "
                       "there")
    parse_units(self.mlp_units)


@dataclasses.dataclass(frozen=True)
class DataSetting:
  """`ccvl_tf.fit`'s data named on the command line (train_offline.py --dataset)."""
  dataset: Optional[str] = setting(
      None, "Own data: .npz, Minari dir or tfds:<dir> (docs/your_data.md); --game then "
      "scores it.")


def parse_units(value) -> Tuple[int, ...]:
  """'64,64' or ['64', '64'] or (64, 64) -> (64, 64); 64 -> (64,) (one hidden layer);
  ValueError for anything but integers >= 1."""
  if isinstance(value, numbers.Integral) and not isinstance(value, bool):
    value = (int(value),)
  try:
    items = value.split(",") if isinstance(value, str) else list(value)
    units = tuple(int(str(u).strip()) for u in items)
  except (TypeError, ValueError):
    units = ()
  if not units or any(u < 1 for u in units):
    raise ValueError(f"mlp_units must be one or more integers >= 1 (e.g. 256,256), got "
                     f"{value!r}")
  return units


FIELDS = tuple(f.name for f in dataclasses.fields(FitSettings))


def split_settings(settings: Mapping[str, object]) -> Tuple[Dict[str, object],
                                                             Dict[str, object]]:
  """(FitSettings' values, the learner's values) of keyword settings; a name neither declares is
  refused, naming the valid ones."""
  own = {f.name for f in dataclasses.fields(FitSettings)}
  learner_names = {n for spec in agent_registry.AGENT_REGISTRY.values() for n in spec.takes}
  unknown = sorted(set(settings) - own - learner_names)
  if unknown:
    raise ValueError(f"unknown setting{'s' if len(unknown) > 1 else ''} "
                     f"{', '.join(unknown)}; the run's settings are {', '.join(sorted(own))} "
                     f"and the learners' {', '.join(sorted(learner_names))}")
  return ({k: v for k, v in settings.items() if k in own},
          {k: v for k, v in settings.items() if k not in own and v is not None})


def torso_for(observation_shape: Sequence[int], observation_dtype) -> str:
  """The torso `auto` picks for these observations: 'mlp' for rank-1 vectors, 'minatar' for
  [10, 10, C] grids, 'nature' for larger uint8 [H, W, C] frames; ValueError otherwise."""
  shape = tuple(int(d) for d in observation_shape)
  if len(shape) == 1:
    return "mlp"
  if len(shape) == 3 and shape[:2] == (10, 10):
    return "minatar"
  if len(shape) == 3:
    return "nature"
  raise ValueError(f"observations of shape {list(shape)}: no torso takes them (rank-1 vectors "
                   f"or [H, W, C] frames); flatten them or give a network_config")


def network_config(settings: FitSettings, observation_shape, observation_dtype
                   ) -> networks.QNetworkConfig:
  """The Q-network for these observations: the torso `settings.torso` (auto: `torso_for`) at
  the project's settings for it, checked against the observations."""
  torso = (torso_for(observation_shape, observation_dtype) if settings.torso == "auto"
           else settings.torso)
  if torso == "mlp":
    cfg = networks.QNetworkConfig(torso="mlp", mlp_units=tuple(int(u) for u in settings.mlp_units),
                                  hidden_units=0)
  elif torso == "minatar":
    cfg = networks.minatar_network_config()
  else:
    cfg = networks.QNetworkConfig(torso="nature")
  cfg.validate()
  networks.validate_observation_spec(observation_shape, observation_dtype, torso)
  return cfg


def agent_values_for(given: Mapping[str, object], method: str, image: bool) -> Dict[str, object]:
  """The learner's values: the given ones over the data kind's defaults, each only where the
  method takes it (agent_registry.AgentSpec.takes); a given one it does not take is refused."""
  spec = agent_registry.get_agent_spec(method, flag="method")
  agent_registry.check_taken(dict(given), [method], f"method={method!r}", spec.takes)
  defaults = IMAGE_DEFAULTS if image else VECTOR_DEFAULTS
  return {**{k: v for k, v in defaults.items() if k in spec.takes}, **dict(given)}
