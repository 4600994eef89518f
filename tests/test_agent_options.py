"""CCVL's options: declared once in CCVLConfig, generated as flags (experiments/agent_options)."""
import dataclasses

import pytest
from absl import flags

from agents import ccvl_agent
from ccvl_tf.experiments import agent_options


def test_flags_are_generated_from_the_dataclass_with_its_docs():
  fv = flags.FlagValues()
  agent_options.define_flags(flag_values=fv)
  fv(["prog", "--objective=bound", "--count_ridge=0.01"])
  assert agent_options.from_flags(flag_values=fv) == {"objective": "bound", "count_ridge": 0.01}
  docs = agent_options.field_docs(ccvl_agent.CCVLConfig)
  assert fv["objective"].help.startswith("CCVL: " + docs["objective"][:30])
  defaults = {f.name: f.default for f in dataclasses.fields(ccvl_agent.CCVLConfig)}
  for name in agent_options.CCVL_OPTIONS:
    assert fv[name].default is None                     # unset = CCVLConfig's default
    assert f"(default: {defaults[name]!r})" in fv[name].help


def test_validate_names_the_flag_and_effective_fills_defaults():
  with pytest.raises(ValueError, match="^--objective must be one of"):
    agent_options.validate({"objective": "max"})
  with pytest.raises(ValueError, match="^--count_normalization must be one of"):
    agent_options.validate({"count_normalization": "median"})
  with pytest.raises(ValueError, match="unknown CCVL option 'alpha2'"):
    agent_options.validate({"alpha2": 1.0})
  eff = agent_options.effective({"objective": "bonus"})
  assert eff["objective"] == "bonus"
  assert eff["count_normalization"] == ccvl_agent.CCVLConfig().count_normalization
