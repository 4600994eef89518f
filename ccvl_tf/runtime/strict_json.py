"""Strict JSON for every file the project writes: no NaN and no Infinity.

Python's `json` writes a non-finite float as the bare words `NaN` / `Infinity` and reads them
back, but JSON has no such values: JavaScript's `JSON.parse`, jq and most other parsers refuse
the whole file. Here a non-finite number (Python or numpy, also inside arrays) is written as
`null`; in a dict the reason goes beside it under `<key>_note` (the caller's `notes[key]` when
given, else what the value was), unless the dict already has that key. Everything is then
encoded with `allow_nan=False`, so nothing non-finite can slip through.

  strict_json.dump(obj, f, indent=1)            # json.dump's keywords
  text = strict_json.dumps(obj, notes={"lemma1_fraction": "undefined: one grid delta"})
  value = strict_json.loads(text, source=path)  # refuses NaN / Infinity, names `source`

Values in memory are not changed (a copy is written), so code that computes with them still
sees the NaN.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Mapping, Optional

import numpy as np

NOTE_SUFFIX = "_note"


def _note(value: float) -> str:
  return f"not a finite number ({value!r}), written as null"


def finite(obj: Any, notes: Optional[Mapping[str, str]] = None) -> Any:
  """A copy of `obj` with every non-finite float as None (numpy scalars and arrays become
  Python numbers and lists); in a dict, `<key>_note` says why (`notes[key]`, else the value it
  was) unless the dict has that key already. Tuples become lists, as json writes them."""
  notes = notes or {}
  if isinstance(obj, dict):
    out = {}
    for key, value in obj.items():
      clean = finite(value, notes)
      out[key] = clean
      if clean is None and _non_finite(value):
        note_key = f"{key}{NOTE_SUFFIX}"
        if note_key not in obj:
          out[note_key] = notes.get(str(key), _note(_as_float(value)))
    return out
  if isinstance(obj, (list, tuple)):
    return [finite(v, notes) for v in obj]
  if isinstance(obj, np.ndarray):
    return finite(obj.tolist(), notes)
  if isinstance(obj, np.generic):
    obj = obj.item()
  if isinstance(obj, float) and not math.isfinite(obj):
    return None
  return obj


def _as_float(value) -> float:
  return float(value.item() if isinstance(value, np.generic) else value)


def _non_finite(value) -> bool:
  """Whether `value` is a float (Python or numpy) that is NaN or infinite."""
  if isinstance(value, np.generic):
    value = value.item()
  return isinstance(value, float) and not math.isfinite(value)


def _strict_default(default: Optional[Callable], notes) -> Optional[Callable]:
  """json's `default` hook with its result made finite too (e.g. `default=float`)."""
  if default is None:
    return None
  return lambda o: finite(default(o), notes)


def dumps(obj: Any, *, notes: Optional[Mapping[str, str]] = None,
          default: Optional[Callable] = None, **kwargs) -> str:
  """json.dumps of `finite(obj, notes)`, refusing anything non-finite (allow_nan=False)."""
  return json.dumps(finite(obj, notes), allow_nan=False,
                    default=_strict_default(default, notes), **kwargs)


def dump(obj: Any, f, *, notes: Optional[Mapping[str, str]] = None,
         default: Optional[Callable] = None, **kwargs) -> None:
  """json.dump of `finite(obj, notes)` into the text file `f` (allow_nan=False)."""
  json.dump(finite(obj, notes), f, allow_nan=False, default=_strict_default(default, notes),
            **kwargs)


def _refuse_constant(name: str):
  raise ValueError(f"{name} is not a JSON value")


def loads(text: str, source: str = "") -> Any:
  """json.loads that refuses NaN, Infinity and -Infinity as any strict parser does; the
  ValueError names `source` (e.g. the file's path) when given."""
  try:
    return json.loads(text, parse_constant=_refuse_constant)
  except ValueError as e:
    raise ValueError(f"{source + ': ' if source else ''}not strict JSON: {e}") from e
