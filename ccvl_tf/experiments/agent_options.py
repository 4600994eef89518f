"""The agent settings a run's binary takes as flags, generated from ccvl_tf.agents.ccvl_agent.CCVLConfig
and CCVL's readings (ccvl_tf/algorithm/readings/: --reading and each reading's options).

Each setting is declared once, with its default, bounds and help, in the agent config or the
reading that takes it (`setting` of ccvl_tf/runtime/config_flags.py). `define_flags(names)`
makes one flag per setting whose default is None ("not given": the run's preset or the agent config's default applies),
`from_flags(names)` returns the settings the user gave, and a run config carries them as one
dict (`OfflineConfig.agent_values`; `CompareConfig.ccvl_options` beside the fields it borrows
from the agent configs, config_flags.borrow) that the agent registry applies with the
agent config's `with_values` (`AgentSpec.resolve`; CCVLConfig makes the reading there).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional, Sequence

from absl import flags

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import readings
from ccvl_tf.runtime import config_flags

# The flags defined here belong to the binary that calls define_flags() (its --helpshort).
flags.disclaim_key_flags()

# CCVL's own options: the reading (--reading, its older name --objective and the readings'
# options, declared by the readings), the delta head, the count estimate and the belief's
# resampling.
CCVL_OPTIONS = readings.FLAGS + ("delta_head", "delta_members", "count_normalization",
                                 "count_ridge", "count_ridge_mode", "count_gram",
                                 "count_gram_states", "td_loss", "belief_resample")
# N, M and the delta of the greedy policy evaluated during training.
CCVL_SAMPLING = ("num_deltas", "num_pairs", "policy_delta")
# The training settings every learner of a run shares (CCVL's alpha also CQL's and AEVL's).
TRAINING = ("alpha", "learning_rate", "adam_epsilon", "dr3_coef", "target_update_period")


def field_docs(cls) -> Dict[str, str]:
  """name -> help text of each setting declared in the dataclass `cls`."""
  return {f.name: spec.help for f, spec in config_flags.flag_fields(cls)}


def _declaring_class(name: str) -> type:
  """CCVLConfig, or the class of ccvl_tf/algorithm/readings/ that declares the flag `name`."""
  return readings.declaring_class(name) if name in readings.FLAGS else ccvl_agent.CCVLConfig


def _by_class(names: Sequence[str]) -> Dict[type, list]:
  out: Dict[type, list] = {}
  for name in names:
    out.setdefault(_declaring_class(name), []).append(name)
  return out


def define_flags(names: Sequence[str] = CCVL_OPTIONS, flag_values=None,
                 default_notes: Optional[Mapping[str, str]] = None,
                 short: Optional[Sequence[str]] = None) -> None:
  """One flag per setting of `names` (CCVLConfig's or a reading's), default None (not given);
  its help is the declaration's, after "CCVL: " for CCVL's own settings, ending with the
  default in force (`default_notes`, and `short`, the flags --helpshort lists: see
  config_flags.define)."""
  for cls, own in _by_class([n for n in names if n not in TRAINING]).items():
    config_flags.define(cls, own, flag_values, unset=True, help_prefix="CCVL: ",
                        default_notes=default_notes, short=short)
  config_flags.define(ccvl_agent.CCVLConfig, [n for n in names if n in TRAINING], flag_values,
                      unset=True, default_notes=default_notes, short=short)


def from_flags(names: Sequence[str] = CCVL_OPTIONS, flag_values=None) -> Dict[str, object]:
  """The settings of `names` the user gave (flags left at None are omitted)."""
  out = {}
  for cls, own in _by_class(names).items():
    out.update(config_flags.given(cls, own, flag_values))
  return {n: out[n] for n in names if n in out}


def validate(options: Mapping[str, object]) -> None:
  """Each given setting within the bounds / choices declared for it, and the reading's
  options a combination some reading takes (readings.from_options); a ValueError names the
  --flag."""
  known = {f.name for f in dataclasses.fields(ccvl_agent.CCVLConfig)} | set(readings.FLAGS)
  for name in options:
    if name not in known:
      raise ValueError(f"unknown CCVL option {name!r}")
  for cls, own in _by_class(list(options)).items():
    config_flags.check_values(cls, {n: options[n] for n in own}, prefix="--")
  readings.from_options({n: v for n, v in options.items() if n in readings.FLAGS})


def value(options: Mapping[str, object], name: str):
  """The CCVLConfig setting `name` in force: given in `options`, else its default."""
  if name in options:
    return options[name]
  return {f.name: f.default for f in dataclasses.fields(ccvl_agent.CCVLConfig)}[name]
