"""Defaults nobody ran: every suite of compare.py declares the run settings a command may leave
out, and the compare.py commands the docs show resolve every unit's settings with only the
flags they give (in this process: flags parsed, config validated, each unit's recorded
settings made; no data read, nothing trained)."""
import shlex

import pytest
from absl import flags

import ccvl_tf  # noqa: F401
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.compare import units as compare_units

import markdown_docs as md


def _units_settings(cfg):
  """unit_settings of every method and dataset kind of `cfg` (its first seed)."""
  suite = compare_suites.SUITE_CLASSES[cfg.suite](cfg)
  return {(m, d): compare_units.unit_settings(suite, m, d, cfg.first_seed)
          for m in cfg.methods for d in cfg.datasets}


@pytest.mark.parametrize("name", sorted(compare_suites.SUITE_CLASSES))
def test_every_suite_resolves_its_defaults_without_the_flags(name, tmp_path):
  """Before, `compare.py --suite=gridworld` without --eval_max_steps ended in `TypeError:
  int() argument must be ... not 'NoneType'` (units.unit_settings): the gridworld suite
  declared no default_eval_max_steps, and every test passed the flag."""
  cfg = compare_config.CompareConfig(suite=name, output_dir=str(tmp_path), data_dir="DATA")
  cfg.validate()
  suite = compare_suites.SUITE_CLASSES[name](cfg)
  for attr in compare_suites.DEFAULTS:
    assert isinstance(getattr(suite, attr), int) and getattr(suite, attr) >= 1, (name, attr)
  settings = _units_settings(cfg)
  for s in settings.values():
    for key in ("batch_size", "num_steps", "eval_episodes", "eval_max_steps"):
      assert isinstance(s[key], int) and s[key] >= 1, (name, key, s[key])


def test_a_suite_without_a_default_is_refused_when_declared():
  with pytest.raises(TypeError, match="suite 'nodefault' .* must declare "
                                      "default_eval_max_steps as an integer >= 1"):
    type("NoDefault", (compare_suites.Suite,), {"name": "nodefault"})


def _compare_commands():
  out = []
  for page in md.doc_files():
    for command in md.shell_commands(page):
      binary, _ = md.binary_flags(command)
      # A whole command (its required --output_dir given), not a mention in prose; one of
      # shell variables ($COMMON) is left out.
      if binary == "compare" and "$" not in command and "--output_dir" in command:
        out.append(command)
  return out


def _config_of(command, tmp_path):
  """The CompareConfig compare.py makes of `command`'s flags (its output_dir under tmp)."""
  words = shlex.split(command)
  args = words[next(i for i, w in enumerate(words) if w.endswith("binaries/compare.py")) + 1:]
  args = [a for a in args if not a.startswith("--output_dir")] + [f"--output_dir={tmp_path}"]
  fv = flags.FlagValues()
  config_flags.define(compare_config.CompareConfig, flag_values=fv)
  agent_options.define_flags(flag_values=fv)
  fv(["compare.py", *args])
  return config_flags.config_from_flags(compare_config.CompareConfig, required=("output_dir",),
                                        flag_values=fv,
                                        ccvl_options=agent_options.from_flags(flag_values=fv))


def test_the_documented_compare_commands_resolve_every_units_settings(tmp_path):
  commands = _compare_commands()
  assert any("--suite=gridworld" in c for c in commands), commands
  assert len({c.split("--suite=")[1].split()[0] for c in commands if "--suite=" in c}) == 3
  for command in commands:
    try:
      cfg = _config_of(command, tmp_path)
      assert _units_settings(cfg)
    except Exception as e:
      raise AssertionError(f"{command}: {type(e).__name__}: {e}") from e
