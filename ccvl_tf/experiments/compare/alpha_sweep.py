"""The alpha sweep: the neural version of the paper's Fig. 1 (left), return vs alpha.

More in docs/alpha_sweep.md "Module notes", `ccvl_tf/experiments/compare/alpha_sweep.py`.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import runner as compare

# The sweep's layout (methods, part directories) is defined with its report, the stage below.
from ccvl_tf.experiments.compare import alpha_sweep_report  # noqa: E402
from ccvl_tf.experiments.compare.alpha_sweep_report import (  # noqa: E402
    ALPHA_DIR_PREFIX, ALPHA_FREE_METHODS, ALPHA_METHODS, BC_DIR, SWEEP_METHODS, alpha_dir_name)
from ccvl_tf.runtime import strict_json

# The default grid: {0.03, 0.1, 0.3, 1, 3, 10}, a decade in half-decade steps.
DEFAULT_ALPHAS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
def parse_alphas(text) -> Tuple[float, ...]:
  """'0.03, 0.1,1' -> (0.03, 0.1, 1.0), sorted; ValueError naming --alphas for a value that is
  not a finite number > 0 (the plot's x-axis is logarithmic), a duplicate or an empty list."""
  items = ([t.strip() for t in text.split(",")] if isinstance(text, str)
           else [str(t) for t in text])
  items = [t for t in items if t]
  if not items:
    raise ValueError("--alphas is empty; give comma-separated values > 0, e.g. "
                     "0.03,0.1,0.3,1,3,10")
  out = []
  for t in items:
    try:
      a = float(t)
    except ValueError:
      raise ValueError(f"--alphas: {t!r} is not a number") from None
    if not (math.isfinite(a) and a > 0):
      raise ValueError(f"--alphas: every alpha must be a finite number > 0 (log axis), got {t!r}")
    out.append(a)
  names = [alpha_dir_name(a) for a in out]
  dup = sorted({n for n in names if names.count(n) > 1})
  if dup:
    values = ", ".join(d[len(ALPHA_DIR_PREFIX):] for d in dup)
    raise ValueError(f"--alphas: duplicate values ({values})")
  return tuple(sorted(out))


def parse_sweep_methods(text) -> List[str]:
  """compare's method names (parse_methods), restricted to SWEEP_METHODS."""
  methods = compare_config.parse_methods(text if isinstance(text, str) else ",".join(text))
  bad = [m for m in methods if m not in SWEEP_METHODS]
  if bad:
    raise ValueError(f"--methods: {', '.join(bad)} not in the alpha sweep; valid: "
                     f"{', '.join(SWEEP_METHODS)}")
  return methods


@config_flags.compared_settings(compared=("alphas",))
@dataclasses.dataclass
class AlphaSweepConfig(compare_config.CompareConfig):
  """CompareConfig with a grid of alphas: binaries/alpha_sweep.py's flags are CompareConfig's
  (see there) except --alpha, plus --alphas.

  Attributes (beyond CompareConfig's):
    alphas: the regularizer weights alpha of CQL (on logsumexp_a Q - Q(s, a_D)) and of CCVL /
      Fixed-CCVL (on alpha sqrt(log(1/delta_1) n(s)^-1) x the same gap), each a finite number
      > 0, sorted.
    methods: a subset of SWEEP_METHODS; BC is trained once (OUT/bc/), the others at every alpha
      (OUT/alpha_<a>/).
    alpha: not a flag here; always None (the sweep sets it per part).
  """
  methods: Sequence[str] = setting(SWEEP_METHODS, "Comma-separated, from: "
                                   f"{', '.join(SWEEP_METHODS)} (BC once, alpha-free; the "
                                   "others at every alpha).", kind="csv",
                                   parse=parse_sweep_methods)
  alpha: Optional[float] = None
  alphas: Sequence[float] = setting(DEFAULT_ALPHAS, "alpha grid, comma-separated values > 0.",
                                    kind="csv", parse=parse_alphas,
                                    flag_default=",".join(f"{a:g}" for a in DEFAULT_ALPHAS))

  def validate(self) -> None:
    if self.alpha is not None:
      raise ValueError("the alpha sweep sets alpha per part: give --alphas, not --alpha")
    self.alphas = parse_alphas(list(self.alphas))
    self.methods = parse_sweep_methods(list(self.methods))
    super().validate()

  def parts(self) -> List[Tuple[str, Optional[float], List[str]]]:
    """(directory name, alpha or None, methods) of every comparison of the sweep: BC first
    (one alpha-free part), then the alpha-dependent methods at each alpha, in increasing
    order."""
    out = []
    free = [m for m in self.methods if m in ALPHA_FREE_METHODS]
    dependent = [m for m in self.methods if m in ALPHA_METHODS]
    if free:
      out.append((BC_DIR, None, free))
    if dependent:
      out.extend((alpha_dir_name(a), float(a), dependent) for a in self.alphas)
    return out

  def compare_config(self, name: str, alpha: Optional[float],
                     methods: Sequence[str]) -> compare_config.CompareConfig:
    """The CompareConfig of one part: every CompareConfig setting of this config that one of
    the part's methods takes (`untaken` lists the others), with that part's alpha, methods and
    output directory OUT/<name>."""
    base = {f.name: getattr(self, f.name)
            for f in dataclasses.fields(compare_config.CompareConfig)}
    takes = self._takes(methods)
    for n in compare_config.AGENT_SETTINGS:
      if n not in takes:
        base[n] = None
    base["ccvl_options"] = {k: v for k, v in dict(base["ccvl_options"]).items() if k in takes}
    if not any(compare_config.METHODS[m] in agent_registry.BELIEF_AGENTS for m in methods):
      base["belief_temperature"] = None
    return compare_config.CompareConfig(**dict(
        base, alpha=alpha, methods=list(methods),
        output_dir=os.path.join(self.output_dir, name)))

  @staticmethod
  def _takes(methods: Sequence[str]) -> set:
    return {n for m in methods
            for n in agent_registry.AGENT_REGISTRY[compare_config.METHODS[m]].takes}

  def untaken(self, methods: Sequence[str]) -> List[str]:
    """The settings given to the sweep that none of `methods` takes (not applied to their
    part, and not recorded as theirs)."""
    takes = self._takes(methods)
    out = [n for n in compare_config.AGENT_SETTINGS
           if n != "alpha" and getattr(self, n) is not None and n not in takes]
    out += [k for k in self.ccvl_options if k not in takes]
    if self.belief_temperature is not None and not any(
        compare_config.METHODS[m] in agent_registry.BELIEF_AGENTS for m in methods):
      out.append("belief_temperature")
    return out


def run(cfg: AlphaSweepConfig, log: Callable[[str], None] = print) -> Dict[str, object]:
  """Runs compare once per part (`AlphaSweepConfig.parts`), then writes the sweep's report;
  returns dict(parts={name: compare.run's result}, paths=the report's files)."""
  cfg.validate()
  os.makedirs(cfg.output_dir, exist_ok=True)
  parts = cfg.parts()
  with open(os.path.join(cfg.output_dir, "sweep_config.json"), "w") as f:
    strict_json.dump(dict(dataclasses.asdict(cfg), alphas=list(cfg.alphas)), f, indent=1)
  log(f"alpha sweep: suite {cfg.suite}, alphas {', '.join(f'{a:g}' for a in cfg.alphas)}; "
      f"{len(parts)} comparisons ({', '.join(p[0] for p in parts)}) into {cfg.output_dir}")
  results = {}
  for i, (name, alpha, methods) in enumerate(parts, 1):
    what = "alpha-free" if alpha is None else f"alpha = {alpha:g}"
    log(f"alpha sweep: [{i}/{len(parts)}] {name}: {', '.join(methods)} ({what})")
    untaken = cfg.untaken(methods)
    if untaken:
      log(f"alpha sweep: {', '.join(methods)} take(s) none of "
          f"{', '.join('--' + n for n in untaken)}: not applied to this part.")
    results[name] = compare.run(cfg.compare_config(name, alpha, methods), log=log)
  paths = alpha_sweep_report.write_outputs(cfg.output_dir, cfg.suite, cfg.bootstrap_reps,
                                           alphas=cfg.alphas)
  log(f"alpha sweep: wrote {', '.join(paths.values())}")
  return {"parts": results, "paths": paths}
