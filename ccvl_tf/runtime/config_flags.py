"""Absl flags generated from config dataclasses: each setting is declared once.

A setting is a field declared with `setting(default, help, bounds or choices)`; the agents'
configs (ccvl_tf/agents/*.py) declare theirs so, and run configs too. `define(Config)` makes one flag
per setting (`unset=True`: default None, "not given", for agent settings a run may take from
a preset), `from_flags` / `given` read them back, `check(config)` validates a config against
its declarations, `redeclare` gives an inherited setting another default, `borrow` puts a
setting declared elsewhere (an agent's, or a run setting of ccvl_tf/runtime/run_settings.py) in a
run config. `from_flags` also checks, for every binary alike, the output paths (settings declared
`output="dir"` or `"file"`) and the list flags (a repeated, empty or unknown item). `run(main)`:
absl's app.run with one-line usage errors and a one-line Ctrl-C.
More in docs/library.md "Module notes", `ccvl_tf/runtime/config_flags.py`.
"""
from __future__ import annotations

import dataclasses
import faulthandler
import math
import os
import signal
import sys
import typing
from typing import Callable, Mapping, Optional, Sequence

from absl import app
from absl import flags

from ccvl_tf.runtime import env_flags
from ccvl_tf.runtime import paths

# Flags defined through this module belong to the binary that calls define() (its --helpshort).
flags.disclaim_key_flags()

_KEY = "ccvl_flag"
# absl's --helpshort lists the flags of the binary's own module; a flag defined under this
# module name instead (`define(..., short=)`) is listed by --helpfull only, under this heading
# (capitalized: it sorts right after the binary's own flags).
ADVANCED = "Advanced settings (--helpfull only)"
_SAME = object()  # flag default = the field's default


@dataclasses.dataclass(frozen=True)
class FlagSpec:
  """How a config field appears as a flag (see the module docstring)."""
  help: str
  flag_default: object = _SAME
  lower_bound: Optional[float] = None
  upper_bound: Optional[float] = None
  enum_values: Optional[Sequence[str]] = None
  kind: Optional[str] = None               # None (from the annotation), 'list' or 'csv'
  parse: Optional[Callable[[object], object]] = None  # flag value -> field value
  required: bool = False                   # absl's required=True: the flag must be given
  above: Optional[float] = None            # exclusive lower bound (check() only)
  below: Optional[float] = None            # exclusive upper bound (check() only)
  parse_bounds: bool = True                # lower/upper_bound also at flag parse time
  flag_name: Optional[str] = None          # the flag's name where it is not the field's
  default_note: Optional[str] = None       # help's "(default: ...)" ending (borrow, default None)
  output: Optional[str] = None             # 'dir' or 'file': a path the binary writes (below)
  distinct: bool = True                    # a list's items each once (False: layer widths)
  needs: Optional[str] = None              # the setting it depends on (check_partners)


class _FiniteFloatParser(flags.FloatParser):
  """absl's float parser that also refuses inf and nan (absl's bounds let inf beyond a lower
  bound, and nan past any bound)."""

  def __init__(self, lower_bound=None, upper_bound=None):
    super().__init__(lower_bound, upper_bound)
    self.syntactic_help = "a finite " + self.syntactic_help.removeprefix("a ")

  def is_outside_bounds(self, val) -> bool:
    return not math.isfinite(val) or super().is_outside_bounds(val)


def define_finite_float(name: str, default, help: str, lower_bound=None,  # pylint: disable=redefined-builtin
                        upper_bound=None, flag_values=None, required: bool = False,
                        module_name: Optional[str] = None):
  """flags.DEFINE_float whose value must also be finite (a default of None stays allowed)."""
  fv = flags.FLAGS if flag_values is None else flag_values
  parser = _FiniteFloatParser(lower_bound, upper_bound)
  holder = flags.DEFINE(parser, name, default, help, fv, flags.ArgumentSerializer(),
                        required=required, module_name=module_name)
  flags.register_validator(
      name, lambda v: v is None or not parser.is_outside_bounds(v),
      message=f"--{name} must be {parser.syntactic_help}", flag_values=fv)
  return holder


# The exit status of a run ended by Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED_EXIT = 130


def run(main: Callable) -> None:
  """app.run(main); an app.UsageError from `main` prints one line, '<binary>: error:
  <message> (--helpshort lists the flags)', and exits with its exit code. Ctrl-C (a
  KeyboardInterrupt) prints one line too, '<binary>: interrupted (Ctrl-C)', followed by what
  the interrupted work said of its rerun (ccvl_tf.runtime.training.Interrupted: where it resumes),
  and exits with status 130. SIGUSR1 prints every thread's Python stack to stderr and the
  run goes on (`kill -USR1 <pid>`: where a run that seems stuck is)."""
  if hasattr(signal, "SIGUSR1"):
    faulthandler.register(signal.SIGUSR1, all_threads=True)

  def short_usage_errors(argv):
    prog = os.path.basename(sys.argv[0])
    try:
      return main(argv)
    except app.UsageError as e:
      print(f"{prog}: error: {e} (--helpshort lists the flags)", file=sys.stderr, flush=True)
      sys.exit(e.exitcode)
    except KeyboardInterrupt as e:
      said = str(e)
      print(f"{prog}: interrupted (Ctrl-C)" + (f": {said}" if said else ""), file=sys.stderr,
            flush=True)
      sys.exit(INTERRUPTED_EXIT)
  app.run(short_usage_errors)


def config_from_flags(cls, required: Sequence[str] = (), flag_values=None, **more):
  """A binary's validated config `cls` from its flags (from_flags, with `more` fields given
  directly): absl's logging at ERROR unless --verbosity is given, each flag of `required`
  given (app.UsageError '--<name> is required'), and cls.validate(); its ValueError becomes an
  app.UsageError (one line under `run`)."""
  fv = flags.FLAGS if flag_values is None else flag_values
  if "verbosity" in fv and not fv["verbosity"].present:
    from absl import logging  # pylint: disable=g-import-not-at-top
    logging.set_verbosity(logging.ERROR)
  for name in required:
    if not getattr(fv, name):
      raise app.UsageError(f"--{name} is required")
  try:
    cfg = from_flags(cls, flag_values=flag_values, **more)
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  return cfg


def setting(default=dataclasses.MISSING, help: str = "", *,  # pylint: disable=redefined-builtin
            default_factory=dataclasses.MISSING, flag: bool = True, **spec) -> dataclasses.Field:
  """A dataclass field that is also a flag: dataclasses.field(default, ...) with its FlagSpec
  (help, flag_default, lower_bound, upper_bound, enum_values, kind, parse) in the metadata.
  The field itself (name, default, asdict()) is what a plain field would be."""
  metadata = {_KEY: FlagSpec(help, **spec)} if flag else {}
  return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def flag_fields(cls, names: Optional[Sequence[str]] = None) -> list:
  """(field, FlagSpec) of the flags of `cls`, in declaration order (`names`: only those)."""
  out = []
  for f in dataclasses.fields(cls):
    spec = f.metadata.get(_KEY)
    if spec is not None and (names is None or f.name in names):
      out.append((f, spec))
  if names is not None and len(out) != len(names):
    raise ValueError(f"not flags of {cls.__name__}: "
                     f"{sorted(set(names) - {f.name for f, _ in out})}")
  return out


def _flag_type(cls, field) -> type:
  """The field's annotation without Optional."""
  return _declared(cls, field.name)


def _declared(cls, name: str) -> type:
  """The annotation of the field `name` of the dataclass `cls`, without Optional."""
  hint = typing.get_type_hints(cls)[name]
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  return args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint


def _default_of(field, spec: FlagSpec):
  if spec.flag_default is not _SAME:
    return spec.flag_default
  default = (field.default_factory() if field.default is dataclasses.MISSING
             else field.default)
  if spec.kind == "csv":
    return ",".join(default)
  return default


def _range_text(kind, spec: FlagSpec) -> str:
  """The bounds a flag's help states itself, " (an integer >= 1)": those absl's own help line
  does not show (checked by `check` only: parse_bounds=False, above, below)."""
  parts = []
  if not spec.parse_bounds:
    number = "an integer" if kind is int else "a number"
    if spec.lower_bound is not None:
      parts.append(f"{number} >= {spec.lower_bound:g}")
    if spec.upper_bound is not None:
      parts.append((f"{number} " if not parts else "") + f"<= {spec.upper_bound:g}")
  if spec.above is not None:
    parts.append(f"> {spec.above:g}")
  if spec.below is not None:
    parts.append(f"< {spec.below:g}")
  return f" ({' and '.join(parts)})" if parts else ""


def define(cls, names: Optional[Sequence[str]] = None, flag_values=None, unset: bool = False,
           help_prefix: str = "", default_notes: Optional[Mapping[str, str]] = None,
           flag_defaults: Optional[Mapping[str, object]] = None,
           short: Optional[Sequence[str]] = None) -> None:
  """Defines one absl flag per flag field of the dataclass `cls` (`names`: only those).

  unset=True: every flag's default is None ("not given"; `given` omits it) and its help ends
  with the field's default, "(default: 0.1)", or with default_notes[name] formatted with
  {default} ("the preset's, else {default}"); `help_prefix` starts each help text.
  flag_defaults[name]: the flag's default instead of the field's, help unchanged (a run's
  own default of an agent setting it embeds, e.g. None: unset, the run fills it in).
  short: the flags the binary's --helpshort lists (the ones a user sets); the others are its
  advanced settings, listed by --helpfull only (under ADVANCED). None: all are listed."""
  fv = flags.FLAGS if flag_values is None else flag_values
  for f, spec in flag_fields(cls, names):
    name = spec.flag_name or f.name
    common = dict(flag_values=fv, required=spec.required)
    if short is not None and name not in short:
      common["module_name"] = ADVANCED
    bounds = (dict(lower_bound=spec.lower_bound, upper_bound=spec.upper_bound)
              if spec.parse_bounds else {})
    text = spec.help + _range_text(_flag_type(cls, f), spec)
    default = _default_of(f, spec)
    if flag_defaults and f.name in flag_defaults:
      default = flag_defaults[f.name]
    if unset:
      note = (default_notes or {}).get(f.name, "{default}").format(default=repr(default))
      text = f"{help_prefix}{text} (default: {note})"
      default = None
    elif spec.default_note is not None:
      text = f"{text} (default: {spec.default_note})"
    spec = dataclasses.replace(spec, help=text)
    kind = spec.kind or ("enum" if spec.enum_values is not None else _flag_type(cls, f))
    if kind == "enum" and unset:  # a value outside the choices: check() names the setting
      flags.DEFINE_string(name, default, spec.help, **common)
    elif kind == "enum":
      flags.DEFINE_enum(name, default, list(spec.enum_values), spec.help, **common)
    elif kind == "list":
      flags.DEFINE_list(name, default, spec.help, **common)
    elif kind in ("csv", str):
      flags.DEFINE_string(name, default, spec.help, **common)
    elif kind is bool:
      flags.DEFINE_boolean(name, default, spec.help, **common)
    elif kind is int:
      flags.DEFINE_integer(name, default, spec.help, **common, **bounds)
    elif kind is float:
      define_finite_float(name, default, spec.help, **common, **bounds)
    else:
      raise TypeError(f"{cls.__name__}.{f.name}: no flag type for {kind!r}; give kind=")


def values(cls, names: Optional[Sequence[str]] = None, flag_values=None) -> dict:
  """{field: value} of the flag fields of `cls` (`names`: only those) from the parsed flags
  (`parse` applied). A list flag (kind 'list' or 'csv') with an empty or repeated item, or
  whose `parse` refuses it, is an app.UsageError naming the flag (one line under `run`)."""
  fv = flags.FLAGS if flag_values is None else flag_values
  out = {}
  for f, spec in flag_fields(cls, names):
    name = spec.flag_name or f.name
    value = fv[name].value
    if spec.kind in ("list", "csv") and value is not None:
      _check_items(name, value, spec.distinct)
    try:
      out[f.name] = spec.parse(value) if spec.parse is not None else value
    except (ValueError, TypeError, KeyError) as e:
      text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
      raise app.UsageError(text if f"--{name}" in text else f"--{name}={_shown(value)}: {text}"
                           ) from None
  return out


def _shown(value) -> str:
  return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _check_items(name: str, value, distinct: bool = True) -> None:
  """app.UsageError unless the list flag --`name` (a comma-separated string or absl's list)
  names each item once and none empty: '--seeds=0,0' would run seed 0 twice, '--games=a,,b'
  or a trailing comma is a typo."""
  items = [str(v).strip() for v in (value.split(",") if isinstance(value, str) else value)]
  if isinstance(value, str) and not value.strip():
    return  # an empty list: the setting's own check says whether it may be
  if any(not item for item in items):
    raise app.UsageError(f"--{name}={_shown(value)} has an empty item (a stray comma); "
                         f"expected a comma-separated list")
  repeated = sorted({item for item in items if items.count(item) > 1})
  if repeated and distinct:
    raise app.UsageError(f"--{name}={_shown(value)} lists {', '.join(repeated)} more than once; "
                         f"give each once")


def check_outputs(config, names: Optional[Sequence[str]] = None) -> None:
  """app.UsageError naming the flag unless every output path of the dataclass instance
  `config` (settings declared `output='dir'` or `'file'`) can be written: not a file where a
  directory is meant (nor a directory where a file is), not under a file, writable, no name
  longer than the file system allows (ccvl_tf.runtime.paths). An empty value is left to the binary
  (a required flag, or a default it fills in). `names`: only those settings."""
  for f, spec in flag_fields(type(config), names):
    value = getattr(config, f.name)
    if spec.output is None or not value:
      continue
    check = paths.check_output_dir if spec.output == "dir" else paths.check_output_file
    try:
      check(str(value), f"--{spec.flag_name or f.name}")
    except ValueError as e:
      raise app.UsageError(str(e)) from None


def check_partners(config, names: Optional[Sequence[str]] = None, flag_values=None) -> None:
  """app.UsageError naming both flags when a setting declared `needs="<other>"` was given on
  the command line while the setting it depends on is off (0, None, empty, False) in
  `config`: it would be ignored and still recorded (`--pool_swap_steps=3` without
  `--pool_checkpoints`). `names`: only those settings."""
  fv = flags.FLAGS if flag_values is None else flag_values
  for f, spec in flag_fields(type(config), names):
    name = spec.flag_name or f.name
    if spec.needs is None or name not in fv or not fv[name].present:
      continue
    if not getattr(config, spec.needs):
      partner = dict((g.name, s) for g, s in flag_fields(type(config)))[spec.needs]
      raise app.UsageError(
          f"--{name}={_shown(fv[name].value)} takes effect only with --"
          f"{partner.flag_name or spec.needs}, which is off "
          f"({getattr(config, spec.needs)!r}): give --{partner.flag_name or spec.needs} or "
          f"leave --{name} out")


def from_flags(cls, names: Optional[Sequence[str]] = None, flag_values=None, **more):
  """cls(**flag values, **more): the config of the parsed flags (`names`: only those flags,
  the other fields keep their defaults; `more` adds or overrides). Its list flags, output
  paths and settings given without the one they depend on are checked here, for every binary
  alike (`values`, `check_outputs`, `check_partners`): an app.UsageError naming the flag; so
  are the on/off environment variables (env_flags.check_all), naming the variable."""
  try:
    env_flags.check_all()
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  config = cls(**dict(values(cls, names, flag_values), **more))
  check_outputs(config, names)
  check_partners(config, names, flag_values)
  return config


def given(cls, names: Optional[Sequence[str]] = None, flag_values=None) -> dict:
  """{field: value} of the flags of `cls` (`names`: only those) that were given, i.e. whose
  value is not None (flags defined with `define(..., unset=True)`)."""
  return {k: v for k, v in values(cls, names, flag_values).items() if v is not None}


def redeclare(base, name: str, default) -> dataclasses.Field:
  """The field `name` of the dataclass `base` declared again with another default (its help,
  bounds and choices kept): a subclass's own default for an inherited setting."""
  field = {f.name: f for f in dataclasses.fields(base)}[name]
  return dataclasses.field(default=default, metadata=field.metadata)


# borrow(default=DECLARED): the declaration's own default (and flag default).
DECLARED = object()


def borrow(cls, name: str, note: Optional[str] = "{default}", *, default=None,
           lower_bound=_SAME) -> dataclasses.Field:
  """A run config's field for the setting `name` that the dataclass `cls` declares (an agent
  config, or ccvl_tf/runtime/run_settings.py's RunSettings): help, bounds and choices those of the
  declaration.

  default None: "not given" (the run's own default or the agent's applies), the help ending
  with "(default: <note>)" (`note` formatted with the declaration's {default}; None: no
  ending). DECLARED: the declaration's default. Another `default`: the run's own. `lower_bound`:
  the run's own where it allows less or needs more than the declaration (e.g. 0 evaluation
  episodes: none)."""
  field = {f.name: f for f in dataclasses.fields(cls)}[name]
  spec = field.metadata[_KEY]
  if lower_bound is not _SAME:
    spec = dataclasses.replace(spec, lower_bound=lower_bound)
  if default is DECLARED:
    return dataclasses.field(default=field.default, default_factory=field.default_factory,
                             metadata={_KEY: spec})
  spec = dataclasses.replace(spec, flag_default=_SAME)
  if default is None and note is not None:
    spec = dataclasses.replace(spec, default_note=note.format(
        default=repr(_default_of(field, field.metadata[_KEY]))))
  return dataclasses.field(default=default, metadata={_KEY: spec})


# The largest value of a numeric setting declared without an upper bound: an integer fits
# TensorFlow's int32 (step counters, indices, seeds as numpy takes them), a float stays far
# from float32's overflow (3.4e38) even once squared. A larger value in a flag or a record is
# a typo or a corruption; no run of this project needs one.
INT_CEILING = 2**31 - 1
FLOAT_CEILING = 1e12


def _problem(spec: FlagSpec, value) -> Optional[str]:
  """What `value` breaks of the declared bounds / choices ("must be ..."), or None. A number
  of a setting declared without an upper bound is held to INT_CEILING / FLOAT_CEILING."""
  if spec.enum_values is not None:
    if value not in spec.enum_values:
      return f"must be one of {', '.join(map(str, spec.enum_values))}"
    return None
  if value is None or isinstance(value, str) or not isinstance(value, (int, float)):
    return None
  if spec.upper_bound is None and spec.below is None and not isinstance(value, bool):
    if isinstance(value, int) and isinstance(spec.lower_bound, int) and value > INT_CEILING:
      return f"must be an integer <= {INT_CEILING} (a 32-bit integer)"
    if math.isfinite(value) and abs(value) > FLOAT_CEILING:
      return f"must be a finite number of magnitude <= {FLOAT_CEILING:g}"
  lo, hi, above, below = spec.lower_bound, spec.upper_bound, spec.above, spec.below
  if lo is None and hi is None and above is None and below is None:
    return None
  if isinstance(value, int) and not isinstance(value, bool) and isinstance(lo, int):
    if lo is not None and value < lo or hi is not None and value > hi:
      return f"must be an integer >= {lo}" + (f" and <= {hi}" if hi is not None else "")
    return None
  if isinstance(lo, int) and not isinstance(lo, bool) and (isinstance(value, bool)
                                                          or int(value) != value):
    return f"must be an integer >= {lo}" + (f" and <= {hi}" if hi is not None else "")
  finite = math.isfinite(value)
  if above is not None and below is not None:
    return None if finite and above < value < below else f"must be in ({above:g}, {below:g})"
  if lo is not None and below is not None:
    return None if finite and lo <= value < below else f"must be in [{lo:g}, {below:g})"
  if above is not None and not (finite and value > above):
    return f"must be > {above:g} (a finite number)"
  if lo is not None and hi is not None:
    return None if finite and lo <= value <= hi else f"must be in [{lo:g}, {hi:g}]"
  if lo is not None and not (finite and value >= lo):
    return f"must be a finite number >= {lo:g}"
  if hi is not None and not (finite and value <= hi):
    return f"must be a finite number <= {hi:g}"
  return None


def check_values(cls, values_: dict, prefix: str = "") -> None:
  """ValueError "<prefix><name> must be ..., got <value>" for the first of `values_` (field
  name -> value of the dataclass `cls`) of another type than declared, or outside its declared
  bounds or choices."""
  specs = {f.name: spec for f, spec in flag_fields(cls)}
  for name, value in values_.items():
    spec = specs.get(name)
    problem = None if spec is None else _problem(spec, value)
    if (spec is not None and value is not None and spec.parse is None
        and _declared(cls, name) in (bool, int, float, str)):
      # A value read back from a record (JSON) may be of another type than a flag gives:
      # "8" for an int would pass every bound above and fail far from here.
      problem = problem or type_problem(cls, name, value)
    if problem:
      raise ValueError(f"{prefix}{spec.flag_name or name} {problem}, got {value!r}")


def declared_type(cls, name: str) -> type:
  """The type the dataclass `cls` declares for its field `name` (without Optional)."""
  return _declared(cls, name)


def type_problem(cls, name: str, value) -> Optional[str]:
  """"must be of type T" when `value` (read back from a record, e.g. JSON) is not of the type
  the dataclass `cls` declares for its field `name` (without Optional; an int passes for a
  float, a bool only for a bool), else None."""
  kind = _declared(cls, name)
  if kind is bool:
    ok = isinstance(value, bool)
  else:
    ok = (isinstance(value, kind) or kind is float and isinstance(value, int)) and not isinstance(
        value, bool)
  return None if ok else f"must be of type {kind.__name__}"


# ------------------------------------------------------------------ compared settings
# Every field of a run config is classified once: result-affecting (compared when a run
# resumes its checkpoints or reuses finished work: refused, or with --allow_config_change
# recorded) or not, with the reason (`compared_settings`).
_COMPARISON = "__compared_settings__"


@dataclasses.dataclass(frozen=True)
class Comparison:
  """A run config's classification: `compared` (the fields its result depends on) and
  `not_compared` (field -> why a resume or a reuse may differ in it)."""
  compared: tuple
  not_compared: Mapping[str, str]


def compared_settings(compared: Sequence[str] = (),
                      not_compared: Optional[Mapping[str, str]] = None):
  """Class decorator (above @dataclasses.dataclass) classifying every field of a run config
  once: `compared` names the result-affecting ones, `not_compared` maps each other one to the
  reason it may change between a run and its resume or reuse. A field in neither, in both,
  or unknown, or a reason left empty, is a TypeError when the class is made: a new setting
  cannot join a run config without that choice. A subclass classifies the fields it adds (or
  redeclares) on top of its base's classification."""
  not_compared = dict(not_compared or {})

  def mark(cls):
    inherited = getattr(cls, _COMPARISON, None)
    comp = set(compared) | set(inherited.compared if inherited else ())
    reasons = dict(inherited.not_compared if inherited else {})
    comp -= set(not_compared)
    for name in compared:
      reasons.pop(name, None)
    reasons.update(not_compared)
    names = [f.name for f in dataclasses.fields(cls)]
    problems = []
    missing = [n for n in names if n not in comp and n not in reasons]
    if missing:
      problems.append(f"unclassified {', '.join(missing)}")
    both = sorted(set(compared) & set(not_compared))
    if both:
      problems.append(f"both compared and not: {', '.join(both)}")
    unknown = sorted((comp | set(reasons)) - set(names))
    if unknown:
      problems.append(f"not fields: {', '.join(unknown)}")
    empty = sorted(n for n, why in not_compared.items() if not str(why).strip())
    if empty:
      problems.append(f"not compared without a reason: {', '.join(empty)}")
    if problems:
      raise TypeError(f"{cls.__name__}: every field must be classified once as compared on "
                      f"resume / reuse or not (config_flags.compared_settings): "
                      + "; ".join(problems))
    setattr(cls, _COMPARISON, Comparison(compared=tuple(n for n in names if n in comp),
                                         not_compared={n: reasons[n] for n in names
                                                       if n in reasons}))
    return cls
  return mark


def comparison(cls) -> Comparison:
  """The classification of the run config `cls` (`compared_settings`); TypeError if it has
  none."""
  found = getattr(cls, _COMPARISON, None)
  if found is None or set(found.compared) | set(found.not_compared) != {
      f.name for f in dataclasses.fields(cls)}:
    raise TypeError(f"{cls.__name__} does not classify its fields "
                    f"(config_flags.compared_settings)")
  return found


def diff_lines(old: Mapping[str, object], new: Mapping[str, object], prefix: str = "",
               skip: Sequence[str] = ()) -> list:
  """'name: old -> new' for each key whose value differs between the two records, nested
  dicts entry by entry ('learner.alpha: 1.0 -> 2.0'), keys of `skip` left out: each changed
  setting once, not the whole record twice."""
  out = []
  for key in sorted(set(old) | set(new), key=str):
    if key in skip:
      continue
    a, b = old.get(key), new.get(key)
    if isinstance(a, tuple):
      a = list(a)
    if isinstance(b, tuple):
      b = list(b)
    if a == b:
      continue
    if isinstance(a, dict) and isinstance(b, dict):
      out += diff_lines(a, b, f"{prefix}{key}.")
    else:
      out.append(f"{prefix}{key}: {a!r} -> {b!r}")
  return out


def check(config, prefix: str = "") -> None:
  """check_values of every declared field of the dataclass instance `config`."""
  check_values(type(config), {f.name: getattr(config, f.name)
                              for f in dataclasses.fields(config)}, prefix)
