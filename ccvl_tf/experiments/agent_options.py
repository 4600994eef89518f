"""The agent settings a run's binary takes as flags, generated from agents.ccvl_agent.CCVLConfig.

Each setting is declared once, with its default, bounds and help, in the agent config
(`setting` of ccvl_tf/runtime/config_flags.py). `define_flags(names)` makes one flag per setting
whose default is None ("not given": the run's preset or the agent config's default applies),
`from_flags(names)` returns the settings the user gave, and a run config carries them as one
dict (`OfflineConfig.agent_values`; `CompareConfig.ccvl_options` beside the fields it borrows
from the agent configs, config_flags.borrow) that the agent registry applies with
dataclasses.replace on the agent's default config (`AgentSpec.resolve`).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional, Sequence

from absl import flags

from agents import ccvl_agent
from ccvl_tf.runtime import config_flags

# The flags defined here belong to the binary that calls define_flags() (its --helpshort).
flags.disclaim_key_flags()

# CCVL's own options: the objective, the count estimate and the belief's resampling.
CCVL_OPTIONS = ("objective", "gap", "delta_head", "gap_weight", "support_threshold",
                "bonus_counts", "count_normalization", "count_ridge", "count_ridge_mode",
                "count_weight", "delta_weight", "train_delta", "td_loss", "belief_resample")
# N, M and the delta of the greedy policy evaluated during training.
CCVL_SAMPLING = ("num_deltas", "num_pairs", "policy_delta")
# The training settings every learner of a run shares (CCVL's alpha also CQL's and AEVL's).
TRAINING = ("alpha", "learning_rate", "adam_epsilon", "dr3_coef", "target_update_period")


def field_docs(cls) -> Dict[str, str]:
  """name -> help text of each setting declared in the dataclass `cls`."""
  return {f.name: spec.help for f, spec in config_flags.flag_fields(cls)}


def define_flags(names: Sequence[str] = CCVL_OPTIONS, flag_values=None,
                 default_notes: Optional[Mapping[str, str]] = None) -> None:
  """One flag per CCVLConfig setting of `names`, default None (not given); its help is the
  declaration's, after "CCVL: " for CCVL's own settings, ending with the default in force
  (`default_notes`: see config_flags.define)."""
  own = [n for n in names if n not in TRAINING]
  config_flags.define(ccvl_agent.CCVLConfig, own, flag_values, unset=True,
                      help_prefix="CCVL: ", default_notes=default_notes)
  config_flags.define(ccvl_agent.CCVLConfig, [n for n in names if n in TRAINING], flag_values,
                      unset=True, default_notes=default_notes)


def from_flags(names: Sequence[str] = CCVL_OPTIONS, flag_values=None) -> Dict[str, object]:
  """The settings of `names` the user gave (flags left at None are omitted)."""
  return config_flags.given(ccvl_agent.CCVLConfig, names, flag_values)


def validate(options: Mapping[str, object]) -> None:
  """Each given setting within the bounds / choices CCVLConfig declares; a ValueError names
  the --flag."""
  known = {f.name for f in dataclasses.fields(ccvl_agent.CCVLConfig)}
  for name in options:
    if name not in known:
      raise ValueError(f"unknown CCVL option {name!r}")
  config_flags.check_values(ccvl_agent.CCVLConfig, dict(options), prefix="--")


def value(options: Mapping[str, object], name: str):
  """The setting `name` in force: given in `options`, else CCVLConfig's default."""
  if name in options:
    return options[name]
  return {f.name: f.default for f in dataclasses.fields(ccvl_agent.CCVLConfig)}[name]


def effective(options: Mapping[str, object]) -> Dict[str, object]:
  """Every option of CCVL_OPTIONS with its value in force (given, else CCVLConfig's default)."""
  return {n: value(options, n) for n in CCVL_OPTIONS}
