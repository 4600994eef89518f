"""Measurement code behind binaries/benchmark.py (each module has `run()`; `BenchmarkConfig`
declares the binary's settings, which ccvl_tf/runtime/config_flags.py makes its flags)."""
import dataclasses
from typing import Optional

from ccvl_tf.runtime.config_flags import setting


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
  """Settings of binaries/benchmark.py."""
  output: str = setting("", "Path of the JSON file to write.", flag_default=None, required=True,
                        output="file")
  quick: bool = setting(False, "Tiny smoke run (batch 4, 2 steps, 2 variants).")
  rounds: Optional[int] = setting(None, "Interleaved timing rounds (default 5).",
                                  lower_bound=1)
  iters: Optional[int] = setting(None, "Train steps per round (default 10).", lower_bound=1)
  skip_data: bool = setting(False, "Do not run ccvl_tf.bench.data.")
  profile: bool = setting(False, "Also trace a few steps with the TensorFlow profiler and write "
                          "the top ops per step under 'profile' (ccvl_tf/bench/profile_step).")
  skip_end_to_end: bool = setting(False, "Do not run ccvl_tf.bench.end_to_end.")
