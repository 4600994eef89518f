"""Where a demo run's scores fall against the reported demo over five training seeds.

The trained networks depend on the CPU's kernels and thread count (BUILD.md, "What is and is not
bit-reproducible"), so a user's `make demo` on another machine trains another network: its
numbers are placed, not matched. `place(record, rows)` compares each row of a run's results
table with the reported runs of the same settings (docs/results/demo_seeds.md: five training
seeds, one set of evaluation episodes): inside the range of the five per-seed means, or below
or above it. The random and behaviour rows do not depend on a trained network: with the
reported evaluation episodes (--eval_seed 0, or --seed 0) they reproduce the reported values
exactly unless the environment differs (another ale-py or ROM).

`REPORTED` is filled from docs/results/demo_seeds_results.json (the per-episode scores of the
reported runs); tests/test_results_tables.py recomputes it from there.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

# The reported demo's settings: the fields of a run's config record (config.record) that fix
# what it trains and how it is scored. A run with other values is not placed.
REPORTED_SETTINGS: Dict[str, object] = {
    "game": "Breakout", "agent": "ccvl", "preset": "demo", "subset": "all",
    "dataset_dir": None, "default_dataset_steps": 50_000, "default_dataset_policy": "auto",
    "behaviour_epsilon": 0.25, "batch_size": 32, "num_steps": 17_500, "eval_episodes": 10,
    "eval_max_steps": 2_000, "eval_env": "vector", "num_grid_deltas": 8,
    "reference_agents": ["bc", "cql"], "tf_threads": 2, "ccvl_options": {},
    "mixed_precision": "off"}
# Settings a record made before they existed does not hold: it had this value.
_RECORD_DEFAULTS: Dict[str, object] = {"mixed_precision": "off"}
# Settings that only one row of the table depends on: a run with another value is placed on
# the other rows. The reported CCVL rows were trained with the cosine-monotone delta head (the
# learner's settings in force, summary.json's learner_settings) and the adaptive row carried
# one belief over 10 episodes (--belief_episodes) from the uniform prior (--belief_prior).
ROW_SETTINGS: Dict[str, Dict[str, object]] = {
    "CCVL (adaptive)": {"belief_episodes": 10, "delta_head": "cosine_monotone",
                        "belief_prior": "uniform"},
    "Fixed-CCVL": {"delta_head": "cosine_monotone"}}


def _setting(record: Mapping[str, object], name: str, default: object) -> object:
  """A setting of the run: its config record's, else the learner's settings in force."""
  if name in record:
    return record[name]
  return dict(record.get("learner_settings") or {}).get(name, default)
# The agent settings a run may give as flags without leaving the reported settings: none.
_AGENT_FLAGS = ("alpha", "learning_rate", "adam_epsilon", "dr3_coef", "target_update_period")

# Per policy, the reported per-seed means (training seeds 0-3 of the five; seed 4 not yet run;
# evaluation seed 0), from docs/results/demo_seeds_results.json.
REPORTED: Dict[str, Sequence[float]] = {
    "random": [1.1, 1.1, 1.1, 1.1, 1.1],
    "behaviour (scripted, epsilon 0.25)": [22.2, 22.2, 22.2, 22.2, 22.2],
    "BC": [25.8, 29.5, 19.0, 23.4, 30.8],
    "CQL": [25.9, 22.9, 25.3, 23.3, 23.7],
    "CCVL (adaptive)": [31.3, 28.2, 16.2, 21.8, 15.3],
    "Fixed-CCVL": [28.5, 23.0, 17.1, 24.4, 29.0],
}
REPORTED_EVAL_SEED = 0
# The machine that trained the reported seeds (docs/results/five_seeds.md): its model and
# flags were not recorded then (runs now record theirs, checkpoints/machines.json); `make demo`
# on an Intel Xeon with AVX-512 and AMX reproduced seed 0's table (reproducibility.md).
REPORTED_MACHINE = "2 cores of an Intel Xeon with AVX-512"
# Rows that do not depend on a trained network.
_FIXED_ROWS = ("random", "behaviour")


def differences(record: Mapping[str, object]) -> List[str]:
  """The settings in which the run of config record `record` differs from the reported demo
  ('name: value (reported: value)'); empty when it can be placed."""
  out = []
  for name, want in REPORTED_SETTINGS.items():
    got = record.get(name, _RECORD_DEFAULTS.get(name))
    if isinstance(want, list):
      got = list(got or [])
    if got != want:
      out.append(f"{name}: {got!r} (reported: {want!r})")
  for name in _AGENT_FLAGS:
    if record.get(name) is not None:
      out.append(f"--{name}={record[name]!r} given (reported: the preset's)")
  return out


def _is_fixed(policy: str) -> bool:
  return any(str(policy).startswith(p) for p in _FIXED_ROWS)


def place(record: Mapping[str, object], rows: Sequence[Mapping[str, object]],
          reported: Optional[Mapping[str, Sequence[float]]] = None,
          machine: Optional[str] = None) -> List[str]:
  """Lines saying where each row of a results table (policy, mean) falls against the reported
  five seeds (`reported`: REPORTED by default), or one line saying why the run is not placed;
  `machine` (ccvl_tf.runtime.machine.describe of the run's last training segment) is named
  beside the reported runs' machine."""
  reported = REPORTED if reported is None else reported
  if not reported:
    return ["No reported demo to place this run against."]
  diff = differences(record)
  if diff:
    return ["Not placed against the reported demo (docs/results/demo_seeds.md): the settings "
            "differ: " + "; ".join(diff) + "."]
  eval_seed = record.get("eval_seed")
  same_episodes = (record.get("seed") if eval_seed is None else eval_seed) == REPORTED_EVAL_SEED
  where = "" if machine is None else (
      f", {REPORTED_MACHINE}; this run trained on {machine}: another CPU type trains other "
      f"networks, as a new seed does")
  lines = [f"Where this run falls against the reported demo ({len(next(iter(reported.values())))}"
           f" training seeds on one machine{where}; docs/results/demo_seeds.md):"]
  for row in rows:
    name = str(row["policy"])
    if name not in reported:
      continue
    other = {k: v for k, v in ROW_SETTINGS.get(name, {}).items()
             if _setting(record, k, v) != v}
    if other:
      lines.append(f"  {name}: {float(row['mean']):.2f} -- not placed: reported with "
                   + ", ".join(f"{k} {v!r} (this run: {_setting(record, k, v)!r})"
                               for k, v in other.items()))
      continue
    means = [float(x) for x in reported[name]]
    lo, hi, mean = min(means), max(means), sum(means) / len(means)
    got = float(row["mean"])
    if _is_fixed(name):
      if same_episodes:
        verdict = ("the reported value, as it must be (the same episodes)" if abs(got - mean)
                   < 1e-9 else f"NOT the reported {mean:.2f} on the same episodes: the "
                   f"environment differs (ale-py, ROM) from the reported run's")
      else:
        verdict = f"reported {mean:.2f} on other episodes"
    elif got < lo:
      verdict = f"below the reported range [{lo:.2f}, {hi:.2f}] (mean {mean:.2f})"
    elif got > hi:
      verdict = f"above the reported range [{lo:.2f}, {hi:.2f}] (mean {mean:.2f})"
    else:
      verdict = f"inside the reported range [{lo:.2f}, {hi:.2f}] (mean {mean:.2f})"
    lines.append(f"  {name}: {got:.2f} -- {verdict}")
  return lines
