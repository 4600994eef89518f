"""CCVL's own options, declared once (agents.ccvl_agent.CCVLConfig) and exposed as flags.

The confidence options (objective, count estimate, belief resampling) live only in
`CCVLConfig`, with their documentation in its "Attributes:" docstring. Binaries do not copy
them: `define_flags()` generates one absl flag per option from the dataclass (type, default and
help text), `from_flags()` returns the options the user set, and experiment configs carry them
as one dict (`OfflineConfig.ccvl_options`, `CompareConfig.ccvl_options`) that the agent
registry passes to `CCVLConfig(**options)`. An option not given keeps CCVLConfig's default.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Dict, Mapping, Sequence

CCVL_OPTIONS = ("objective", "gap", "delta_head", "count_normalization", "count_ridge",
                "count_ridge_mode", "count_weight", "belief_resample")


def _ccvl_config():
  from agents import ccvl_agent  # pylint: disable=g-import-not-at-top
  return ccvl_agent.CCVLConfig


def field_docs(cls) -> Dict[str, str]:
  """name -> text of each entry of the class docstring's "Attributes:" section."""
  doc = cls.__doc__ or ""
  section = doc.split("Attributes:", 1)[-1]
  docs, name = {}, None
  for line in section.splitlines():
    m = re.match(r"^\s{4}(\w+): (.*)$", line)
    if m:
      name = m.group(1)
      docs[name] = m.group(2).strip()
    elif name and line.strip():
      docs[name] += " " + line.strip()
  return docs


def _fields(names: Sequence[str]):
  cls = _ccvl_config()
  by_name = {f.name: f for f in dataclasses.fields(cls)}
  unknown = [n for n in names if n not in by_name]
  if unknown:
    raise ValueError(f"not CCVLConfig fields: {unknown}")
  return cls, [by_name[n] for n in names]


def define_flags(names: Sequence[str] = CCVL_OPTIONS, flag_values=None) -> None:
  """Defines one absl flag per CCVLConfig field in `names` (default None = CCVLConfig's)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  fv = flags.FLAGS if flag_values is None else flag_values
  cls, fields = _fields(names)
  docs = field_docs(cls)
  for f in fields:
    text = f"CCVL: {docs.get(f.name, f.name)} (default: {f.default!r})"
    if isinstance(f.default, bool):
      flags.DEFINE_boolean(f.name, None, text, flag_values=fv)
    elif isinstance(f.default, int):
      flags.DEFINE_integer(f.name, None, text, flag_values=fv)
    elif isinstance(f.default, float):
      from ccvl_tf import config_flags  # pylint: disable=g-import-not-at-top
      config_flags.define_finite_float(f.name, None, text, flag_values=fv)
    else:
      flags.DEFINE_string(f.name, None, text, flag_values=fv)


def from_flags(names: Sequence[str] = CCVL_OPTIONS, flag_values=None) -> Dict[str, object]:
  """The options of `names` the user gave (flags left at None are omitted)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  fv = flags.FLAGS if flag_values is None else flag_values
  return {n: fv[n].value for n in names if fv[n].value is not None}


def validate(options: Mapping[str, object]) -> None:
  """CCVLConfig(**options).validate(); a ValueError names the --flag."""
  cls = _ccvl_config()
  known = {f.name for f in dataclasses.fields(cls)}
  for name in options:
    if name not in known:
      raise ValueError(f"unknown CCVL option {name!r}")
  try:
    cls(**dict(options)).validate()
  except ValueError as e:
    msg = str(e)
    for name in options:
      if msg.startswith(name):
        raise ValueError(f"--{msg}") from None
    raise


def effective(options: Mapping[str, object]) -> Dict[str, object]:
  """Every option of CCVL_OPTIONS with its value in force (given, else CCVLConfig's default)."""
  cfg = _ccvl_config()(**dict(options))
  return {n: getattr(cfg, n) for n in CCVL_OPTIONS}
