"""Flags generated from config dataclasses: floats must be finite, usage errors are one line."""
import dataclasses
import os
import subprocess
import sys
from typing import Optional

import pytest
from absl import flags

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import run_settings
from ccvl_tf.runtime.config_flags import setting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class _Config:
  rate: float = setting(0.1, "A bounded float.", lower_bound=1e-12)
  scale: Optional[float] = setting(None, "An unbounded float.")
  share: float = setting(0.5, "A float in [0, 1].", lower_bound=0.0, upper_bound=1.0)


def _parse(*args):
  fv = flags.FlagValues()
  config_flags.define(_Config, flag_values=fv)
  fv(["prog", *args])
  return config_flags.from_flags(_Config, flag_values=fv)


@pytest.mark.parametrize("arg,match", [
    ("--rate=inf", r"flag --rate=inf: inf is not a finite number >= 1e-12"),
    ("--rate=nan", r"flag --rate=nan: nan is not a finite number >= 1e-12"),
    ("--scale=-inf", r"flag --scale=-inf: -inf is not a finite number"),
    ("--share=nan", r"flag --share=nan: nan is not a finite number in the range \[0.0, 1.0\]"),
    ("--share=2", r"flag --share=2: 2.0 is not a finite number in the range \[0.0, 1.0\]"),
])
def test_float_flags_refuse_inf_and_nan(arg, match):
  with pytest.raises(flags.IllegalFlagValueError, match=match):
    _parse(arg)


def test_finite_float_flags_parse_and_keep_none_defaults():
  cfg = _parse("--rate=3e-4", "--share=1")
  assert cfg == _Config(rate=3e-4, scale=None, share=1.0)


def test_usage_error_is_one_line_last_not_after_the_help(tmp_path):
  script = tmp_path / "tool.py"
  script.write_text(
      '"""A tool.\n\n' + "A long help text.\n" * 100 + '"""\n'
      "from absl import app\n"
      "from ccvl_tf.runtime import config_flags\n"
      "def main(argv):\n"
      "  raise app.UsageError('--thing must be given')\n"
      "config_flags.run(main)\n")
  env = dict(os.environ, PYTHONPATH=ROOT)
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                     timeout=120)
  assert r.returncode == 1
  assert r.stderr.strip().splitlines() == [
      "tool.py: error: --thing must be given (--helpshort lists the flags)"], r.stderr


def test_sigusr1_prints_every_threads_stack_and_the_run_goes_on(tmp_path):
  """`kill -USR1 <pid>` on a run that seems stuck: each thread's Python stack on stderr, then
  the run continues to its normal end."""
  script = tmp_path / "tool.py"
  script.write_text(
      "import os, signal, threading\n"
      "from ccvl_tf.runtime import config_flags\n"
      "def waiting_here(ready, ev):\n"
      "  ready.set()\n"
      "  ev.wait()\n"
      "def main(argv):\n"
      "  ready, ev = threading.Event(), threading.Event()\n"
      "  t = threading.Thread(target=waiting_here, args=(ready, ev))\n"
      "  t.start(); ready.wait()\n"
      "  os.kill(os.getpid(), signal.SIGUSR1)\n"
      "  ev.set(); t.join()\n"
      "  print('finished')\n"
      "config_flags.run(main)\n")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                     env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
  assert r.returncode == 0, r.stderr
  assert r.stdout == "finished\n"
  assert "waiting_here" in r.stderr and " in main" in r.stderr, r.stderr
  assert r.stderr.lower().count("thread 0x") == 2, r.stderr


@dataclasses.dataclass(frozen=True)
class _Agent:
  alpha: float = setting(0.1, "alpha, a weight.", lower_bound=0.0, parse_bounds=False)
  delta: float = setting(0.5, "delta in (0, 1).", above=0.0, below=1.0)
  n: int = setting(8, "N, samples.", lower_bound=1, upper_bound=1024)
  mode: str = setting("a", "a or b.", enum_values=("a", "b"))
  grid: int = setting(10, "K, the grid.", lower_bound=1, flag_name="num_deltas")


@dataclasses.dataclass(frozen=True)
class _SubAgent(_Agent):
  alpha: float = config_flags.redeclare(_Agent, "alpha", 1.0)


@dataclasses.dataclass
class _Run:
  alpha: Optional[float] = config_flags.borrow(_Agent, "alpha", "the run's, else {default}")


def test_check_validates_the_declared_bounds_and_choices_naming_the_setting():
  config_flags.check(_Agent())
  for values, match in (({"alpha": -1.0}, "^alpha must be a finite number >= 0, got -1.0"),
                        ({"alpha": float("nan")}, "^alpha must be a finite number >= 0"),
                        ({"delta": 1.0}, r"^delta must be in \(0, 1\), got 1.0"),
                        ({"n": 0}, "^n must be an integer >= 1 and <= 1024, got 0"),
                        ({"n": 2.5}, "^n must be an integer >= 1"),
                        ({"mode": "c"}, "^mode must be one of a, b, got 'c'"),
                        ({"grid": -1}, "^--num_deltas must be an integer"),
                        # A record's value of another type, or past the ceilings of a setting
                        # declared without an upper bound (2**31 - 1; 1e12).
                        ({"n": "8"}, "^n must be of type int, got '8'$"),
                        ({"alpha": "3"}, "^alpha must be of type float, got '3'$"),
                        ({"mode": 1}, "^mode must be one of a, b, got 1$"),
                        ({"grid": 2**31}, r"^--num_deltas must be an integer <= 2147483647 "
                                          r"\(a 32-bit integer\), got 2147483648$"),
                        ({"alpha": 1e13}, r"^alpha must be a finite number of magnitude <= "
                                          r"1e\+12, got 10000000000000.0$")):
    with pytest.raises(ValueError, match=match):
      config_flags.check_values(_Agent, values, prefix="--" if "grid" in values else "")
  config_flags.check_values(_Agent, {"grid": 2**31 - 1, "alpha": 1e12})  # the ceilings
  assert _SubAgent().alpha == 1.0
  with pytest.raises(ValueError, match="^alpha must be a finite number >= 0"):
    config_flags.check(_SubAgent(alpha=-1.0))  # the inherited declaration's bound


def test_agent_flags_default_to_not_given_and_borrowed_fields_keep_the_declaration():
  fv = flags.FlagValues()
  config_flags.define(_Agent, ["alpha", "mode", "grid"], fv, unset=True,
                      default_notes={"alpha": "the preset's, else {default}"})
  fv(["prog", "--alpha=-2", "--num_deltas=3"])  # alpha's bound is checked on the config
  assert config_flags.given(_Agent, ["alpha", "mode", "grid"], fv) == {"alpha": -2.0,
                                                                      "grid": 3}
  # A bound absl does not check while parsing is stated in the help.
  assert fv["alpha"].help == "alpha, a weight. (a number >= 0) (default: the preset's, else 0.1)"
  assert fv["mode"].default is None and fv["mode"].help.endswith("(default: 'a')")
  run_fv = flags.FlagValues()
  config_flags.define(_Run, flag_values=run_fv)
  run_fv(["prog"])
  assert run_fv["alpha"].help == "alpha, a weight. (a number >= 0) (default: the run's, else 0.1)"
  assert config_flags.from_flags(_Run, flag_values=run_fv).alpha is None
  with pytest.raises(ValueError, match="^--alpha must be a finite number >= 0"):
    config_flags.check(_Run(alpha=-1.0), prefix="--")


def test_a_run_gives_an_embedded_setting_its_own_flag_default_with_the_same_help():
  fv = flags.FlagValues()
  config_flags.define(_Agent, ["alpha", "n"], fv, flag_defaults={"alpha": None})
  fv(["prog", "--n=3"])
  assert fv["alpha"].default is None and fv["alpha"].help == "alpha, a weight. (a number >= 0)"
  assert config_flags.given(_Agent, ["alpha", "n"], fv) == {"n": 3}


def test_a_lower_bound_with_an_exclusive_upper_bound_is_a_half_open_interval():
  @dataclasses.dataclass
  class Share:
    share: float = setting(0.0, "Share in [0, 1).", lower_bound=0.0, upper_bound=1.0, below=1.0)
  config_flags.check(Share(0.0))
  for value in (1.0, -0.1, float("nan")):
    with pytest.raises(ValueError, match=r"^--share must be in \[0, 1\), got"):
      config_flags.check(Share(value), prefix="--")


@dataclasses.dataclass
class _Workflow:
  """A run config borrowing the shared run settings (ccvl_tf/runtime/run_settings.py)."""
  batch_size: int = run_settings.borrow("batch_size")
  eval_episodes: int = run_settings.borrow("eval_episodes", 5, lower_bound=0)
  num_steps: Optional[int] = run_settings.borrow("num_steps", None, "the suite's")
  offline_dir: str = run_settings.borrow("offline_dir")


def test_run_settings_are_borrowed_with_one_help_and_a_workflows_own_default():
  declared = {f.name: f for f in dataclasses.fields(run_settings.RunSettings)}
  assert _Workflow() == _Workflow(batch_size=declared["batch_size"].default, eval_episodes=5,
                                  num_steps=None, offline_dir="")
  fv = flags.FlagValues()
  config_flags.define(_Workflow, flag_values=fv)
  fv(["prog", "--eval_episodes=0"])  # 0 allowed here (this run's own lower bound)
  helps = {name: fv[name].help for name in ("batch_size", "eval_episodes", "num_steps")}
  own = {name: spec.help for f, spec in config_flags.flag_fields(run_settings.RunSettings)
         for name in [f.name]}
  assert helps["batch_size"] == own["batch_size"] + " (an integer >= 1)"
  assert helps["eval_episodes"] == own["eval_episodes"] + " (an integer >= 0)"
  assert helps["num_steps"] == own["num_steps"] + " (an integer >= 1) (default: the suite's)"
  assert fv["offline_dir"].default is None  # the declaration's flag default, kept
  cfg = config_flags.from_flags(_Workflow, flag_values=fv)
  assert (cfg.batch_size, cfg.eval_episodes, cfg.num_steps) == (32, 0, None)
  with pytest.raises(ValueError, match=r"^--batch_size must be an integer >= 1, got 0$"):
    config_flags.check(dataclasses.replace(cfg, batch_size=0), prefix="--")
  with pytest.raises(ValueError, match=r"^--eval_episodes must be an integer >= 0, got -1$"):
    config_flags.check(dataclasses.replace(cfg, eval_episodes=-1), prefix="--")


@dataclasses.dataclass(frozen=True)
class _Typed:
  rate: float = setting(0.1, "A float.")
  steps: Optional[int] = setting(None, "An optional int.")
  name: str = setting("a", "A string.")
  on: bool = setting(False, "A bool.")


@pytest.mark.parametrize("name, value, problem", [
    ("rate", 0.5, None), ("rate", 2, None), ("rate", "0.5", "must be of type float"),
    ("rate", True, "must be of type float"), ("steps", 3, None),
    ("steps", 3.0, "must be of type int"), ("name", "b", None), ("name", 1, "must be of type str"),
    ("on", True, None), ("on", 1, "must be of type bool"),
])
def test_type_problem_of_a_recorded_value(name, value, problem):
  assert config_flags.type_problem(_Typed, name, value) == problem


def test_flags_left_out_of_short_are_advanced_listed_by_helpfull_only():
  """define(short=): the flags named are the calling module's (absl's --helpshort lists them);
  the others (floats, ints, enums given unset) are defined under config_flags.ADVANCED (--helpfull only) and
  parse as any flag."""
  fv = flags.FlagValues()
  config_flags.define(_Config, flag_values=fv, short=("rate",))
  config_flags.define(_Agent, ["alpha", "mode", "grid"], fv, unset=True, short=("rate",))
  fv(["prog", "--share=0.25", "--num_deltas=3"])
  advanced = {f.name for f in fv.get_flags_for_module(config_flags.ADVANCED)}
  assert advanced == {"scale", "share", "alpha", "mode", "num_deltas"}
  assert [f.name for f in fv.get_flags_for_module(__name__)] == ["rate"]
  assert fv.share == 0.25 and fv.num_deltas == 3
  assert config_flags.ADVANCED in fv.get_help()  # --helpfull's heading
  everyone = flags.FlagValues()
  config_flags.define(_Config, flag_values=everyone)  # no short: all the binary's own
  assert not everyone.get_flags_for_module(config_flags.ADVANCED)
