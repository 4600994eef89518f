"""The project's on/off environment variables, each read one way: 1, true, on, yes = on;
0, false, off, no or unset/empty = off (any case); any other value is refused naming the
variable (`check_all`, run for every binary by config_flags.from_flags). No imports beyond
the standard library: binaries read CCVL_VERBOSE before TensorFlow loads.
"""
from __future__ import annotations

import os

VERBOSE = "CCVL_VERBOSE"
VERIFY_PREFIXES = "CCVL_VERIFY_PREFIXES"
# Every on/off environment variable of the project.
BOOLEANS = (VERBOSE, VERIFY_PREFIXES)
ON = ("1", "true", "on", "yes")
OFF = ("", "0", "false", "off", "no")


def boolean(name: str, strict: bool = True) -> bool:
  """Whether the on/off environment variable `name` is on. A value neither on nor off: a
  ValueError naming it (strict), else off."""
  value = os.environ.get(name, "").strip().lower()
  if value in ON:
    return True
  if value in OFF or not strict:
    return False
  raise ValueError(f"{name}={os.environ[name]!r} is neither on ({', '.join(ON)}) nor off "
                   f"({', '.join(v for v in OFF if v)} or unset), any case")


def check_all() -> None:
  """ValueError naming the first of BOOLEANS set to a value neither on nor off."""
  for name in BOOLEANS:
    boolean(name)
