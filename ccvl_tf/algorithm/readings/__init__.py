"""CCVL's readings of its update, each a typed variant in its own module (CCVLConfig.reading),
holding only the options it takes:

  'paper'     paper.py     Eq. (cql update) as Algorithm 1 writes it: the paper's, the default.
                           No options.
  'ablation'  ablation.py  Algorithm 1's pair loss with the ladder's research changes: gap,
                           delta_weight, count_weight, train_delta, and its two samplings:
                           pair_delta_1, pair_delta_2.
  'bound'     bound.py     the proof of Lemma 1's reading (delta_1 = delta, max_j over targets):
                           the same options.
  'bonus'     bonus.py     Eq. (update)'s anti-exploration bonus with n(s)^-1: gap, gap_weight,
                           support_threshold, bonus_counts.

A run gives a reading as flags: --reading and the reading's options. `from_options` makes the
variant (the one place a combination is checked), `to_options` gives it back flat, as runs
record it (their fingerprints and summaries). --objective, the older name of the choice, maps
'algorithm1' to 'paper' (to 'ablation' when ablation options are given values other than the
paper's), 'bound' and 'bonus' to themselves. docs/agent.md says what each reading measured.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Mapping

from ccvl_tf.algorithm.readings import ablation, bonus, bound, options, paper
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime.config_flags import setting

Reading = options.Reading
READINGS = {cls.NAME: cls for cls in (paper.Paper, ablation.Ablation, bound.Bound, bonus.Bonus)}
NAMES = tuple(READINGS)
# The older names of the choice, as runs recorded them (`to_options`).
OBJECTIVES = ("algorithm1", "bound", "bonus")
# Every option of some reading, in the order runs record them.
OPTIONS = ("gap", "gap_weight", "bonus_counts", "support_threshold", "count_weight",
           "delta_weight", "train_delta", "pair_delta_1", "pair_delta_2")


@dataclasses.dataclass(frozen=True)
class Choice:
  """The flags that choose the reading (its options are declared by the readings)."""
  reading: str = setting(
      "paper", "which reading of the update is trained: 'paper' (Eq. cql update as Algorithm 1 "
      "writes it, no options), 'ablation' (Algorithm 1 with the ladder's changes: --gap, "
      "--delta_weight, --count_weight, --train_delta, --pair_delta_1, --pair_delta_2), "
      "'bound' (delta_1 = delta, target max over delta_2 <= delta: the proof of Lemma 1; "
      "--gap, --delta_weight, --count_weight, --train_delta) or 'bonus' (Eq. update's "
      "anti-exploration form with n(s)^-1: --gap, --gap_weight, --support_threshold, "
      "--bonus_counts). docs/agent.md explains each.", enum_values=NAMES)
  objective: str = setting(
      "algorithm1", "the older name of --reading: 'algorithm1' is 'paper' ('ablation' when an "
      "ablation option is given), 'bound' and 'bonus' the same.", enum_values=OBJECTIVES)


FLAGS = ("reading", "objective") + OPTIONS


def declaring_class(name: str) -> type:
  """The dataclass that declares the flag `name` of FLAGS (the first reading taking it)."""
  if name in _fields(Choice):
    return Choice
  return READINGS[takers(name)[0]]


def takers(option: str) -> tuple:
  """The names of the readings that take `option`."""
  return tuple(n for n, cls in READINGS.items() if option in _fields(cls))


def _fields(cls) -> tuple:
  return tuple(f.name for f in dataclasses.fields(cls))


def default(option: str):
  """The paper's value of `option` (what a reading not taking it trains with)."""
  return getattr(Reading, option)


def from_options(values: Mapping[str, object], prefix: str = "--") -> Reading:
  """The reading of flat options (FLAGS; None: not given): --reading, else the reading --objective
  names, with the options given. An option the reading does not take is refused unless it is
  given the paper's value (what the reading trains with anyway); the ValueError is one line
  naming the reading to use."""
  given = {k: v for k, v in values.items() if v is not None}
  unknown = sorted(set(given) - set(FLAGS))
  if unknown:
    raise ValueError(f"unknown reading option(s) {unknown}; the options are {', '.join(FLAGS)}")
  config_flags.check_values(Choice, {k: given[k] for k in ("reading", "objective")
                                     if k in given}, prefix)
  changed = {k: given[k] for k in OPTIONS if k in given and given[k] != default(k)}
  name, objective = given.get("reading"), given.get("objective")
  if name is None:
    name = {"bound": "bound", "bonus": "bonus"}.get(objective, "paper")
    if name == "paper" and changed and set(changed) <= set(_fields(ablation.Ablation)):
      name = "ablation"
  elif objective is not None and objective != READINGS[name].OBJECTIVE:
    raise ValueError(f"{prefix}objective={objective!r} is the older name of another reading "
                     f"than {prefix}reading={name!r}: give {prefix}reading alone")
  cls = READINGS[name]
  taken = _fields(cls)
  for option, value in changed.items():
    if option not in taken:
      raise ValueError(
          f"{prefix}{option}={value!r} is not an option of reading {name!r} (it takes "
          f"{', '.join(taken) or 'none'}); give {prefix}reading="
          f"{' or '.join(takers(option))}")
  reading = cls(**{k: given[k] for k in taken if k in given})
  validate(reading, prefix)
  return reading


def validate(reading: Reading, prefix: str = "") -> None:
  """ValueError naming the option of `reading` outside its bounds or choices."""
  if type(reading) not in READINGS.values():
    raise ValueError(f"{prefix}reading must be one of the readings {', '.join(NAMES)} "
                     f"(ccvl_tf/algorithm/readings/), got {reading!r}")
  config_flags.check(reading, prefix)
  reading.validate()


# Options recorded only when they differ from the paper's value: the keys of a fingerprint
# stored before they existed stay the keys recorded now, so those runs keep resuming.
RECORDED_WHEN_SET = ("pair_delta_1", "pair_delta_2")


def to_options(reading: Reading) -> Dict[str, object]:
  """`reading` flat, as runs record it: its older name ('objective') and every option of
  OPTIONS in force (the paper's value for an option it does not take), but an option of
  RECORDED_WHEN_SET at the paper's value."""
  return {"objective": reading.OBJECTIVE,
          **{k: getattr(reading, k) for k in OPTIONS
             if k not in RECORDED_WHEN_SET or getattr(reading, k) != default(k)}}
