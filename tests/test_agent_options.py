"""CCVL's options: declared once (CCVLConfig, or the reading that takes them), generated as
flags (experiments/agent_options)."""
import dataclasses

import pytest
from absl import flags

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm.readings import ablation, bound
from ccvl_tf.experiments import agent_options


def test_flags_are_generated_from_the_declarations_with_their_docs():
  fv = flags.FlagValues()
  agent_options.define_flags(flag_values=fv)
  fv(["prog", "--reading=bound", "--gap=max", "--count_ridge=0.01"])
  assert agent_options.from_flags(flag_values=fv) == {"reading": "bound", "gap": "max",
                                                      "count_ridge": 0.01}
  assert fv["count_ridge"].help.startswith(
      "CCVL: " + agent_options.field_docs(ccvl_agent.CCVLConfig)["count_ridge"][:30])
  # A reading's option: its help and default are the first reading's that takes it.
  gap_doc = agent_options.field_docs(ablation.Ablation)["gap"]
  assert fv["gap"].help.startswith("CCVL: " + gap_doc[:30])
  assert fv["reading"].help.startswith("CCVL: which reading")
  config_defaults = {f.name: f.default for f in dataclasses.fields(ccvl_agent.CCVLConfig)}
  reading_defaults = {"reading": "paper", "objective": "algorithm1", "gap": "logsumexp",
                      "gap_weight": 0.0, "bonus_counts": "state", "support_threshold": 0.0,
                      "count_weight": "linear", "delta_weight": "sqrt_log", "train_delta": None,
                      "pair_delta_1": "uniform", "pair_delta_2": "uniform"}
  for name in agent_options.CCVL_OPTIONS:
    assert fv[name].default is None                     # unset: the default in force
    default = reading_defaults[name] if name in readings.FLAGS else config_defaults[name]
    assert f"(default: {default!r})" in fv[name].help, name


def test_validate_names_the_flag_and_the_reading_to_use():
  with pytest.raises(ValueError, match="^--objective must be one of"):
    agent_options.validate({"objective": "max"})
  with pytest.raises(ValueError, match="^--reading must be one of"):
    agent_options.validate({"reading": "lemma"})
  with pytest.raises(ValueError, match="^--count_normalization must be one of"):
    agent_options.validate({"count_normalization": "median"})
  with pytest.raises(ValueError, match="^--gap must be one of"):
    agent_options.validate({"gap": "min"})
  with pytest.raises(ValueError, match="unknown CCVL option 'alpha2'"):
    agent_options.validate({"alpha2": 1.0})
  with pytest.raises(ValueError, match=r"^--delta_weight='constant' is not an option of "
                                       r"reading 'bonus'.*give --reading=ablation or bound$"):
    agent_options.validate({"objective": "bonus", "delta_weight": "constant"})
  agent_options.validate({"objective": "bound", "delta_weight": "constant", "alpha": 1.0})
  assert agent_options.value({}, "num_deltas") == ccvl_agent.CCVLConfig().num_deltas
  assert agent_options.value({"num_deltas": 3}, "num_deltas") == 3


def test_with_values_makes_the_reading_from_the_flags():
  base = ccvl_agent.CCVLConfig()
  assert base.with_values({"objective": "bound", "train_delta": 0.5}).reading == bound.Bound(
      train_delta=0.5)
  assert base.with_values({"count_weight": "off", "alpha": 2.0}).reading == ablation.Ablation(
      count_weight="off")
  # Options alone add to a research reading already chosen; a reading given replaces it.
  research = base.with_values({"reading": "bound", "gap": "max"})
  assert research.with_values({"train_delta": 0.2}).reading == bound.Bound(gap="max",
                                                                          train_delta=0.2)
  assert research.with_values({"reading": "paper"}).reading == readings.paper.Paper()
  assert base.with_values({"objective": None}).reading == readings.paper.Paper()
