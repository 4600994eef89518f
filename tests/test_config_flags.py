"""Flags generated from config dataclasses: floats must be finite, usage errors are one line."""
import dataclasses
import os
import subprocess
import sys
from typing import Optional

import pytest
from absl import flags

from ccvl_tf import config_flags
from ccvl_tf.config_flags import setting

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
      "from ccvl_tf import config_flags\n"
      "def main(argv):\n"
      "  raise app.UsageError('--thing must be given')\n"
      "config_flags.run(main)\n")
  env = dict(os.environ, PYTHONPATH=ROOT)
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                     timeout=120)
  assert r.returncode == 1
  assert r.stderr.strip().splitlines() == [
      "tool.py: error: --thing must be given (--helpshort lists the flags)"], r.stderr
