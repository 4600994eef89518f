"""Wall time of each phase of a train_offline.py run, printed as a table at its end (and kept
in summary.json), so that a run says where its time went: collection, each training, each
evaluation, export, diagnostics.

A phase nested in another (an evaluation during training) is subtracted from the outer one,
so the rows add up to the timed total.
"""
from __future__ import annotations

import contextlib
import time
from typing import Dict, List


class PhaseTimes:
  """Named wall-clock phases in the order they started; `phase(name)` times a block."""

  def __init__(self):
    self._rows: List[List[object]] = []   # [name, seconds]
    self._stack: List[int] = []           # indices of the open phases
    self._start = time.perf_counter()

  @contextlib.contextmanager
  def phase(self, name: str):
    """Times the block as phase `name`; time spent in phases opened inside it is theirs."""
    self._rows.append([name, 0.0])
    index = len(self._rows) - 1
    self._stack.append(index)
    start = time.perf_counter()
    try:
      yield
    finally:
      self._stack.pop()
      elapsed = time.perf_counter() - start
      self._rows[index][1] += elapsed
      if self._stack:
        self._rows[self._stack[-1]][1] -= elapsed

  def as_dict(self) -> Dict[str, float]:
    """{phase: seconds} (repeated names summed) and 'total' (wall time since creation)."""
    out: Dict[str, float] = {}
    for name, seconds in self._rows:
      out[str(name)] = out.get(str(name), 0.0) + float(seconds)
    out["total"] = time.perf_counter() - self._start
    return out

  def render(self) -> str:
    """A markdown table: phase (repeated names summed, in order of first start), seconds,
    share of the total; the untimed rest; the total."""
    total = time.perf_counter() - self._start
    lines = ["Phase times (wall clock):", "", "| phase | seconds | share |",
             "| --- | --- | --- |"]
    timed = 0.0
    for name, seconds in self.as_dict().items():
      if name == "total":
        continue
      timed += float(seconds)
      lines.append(f"| {name} | {seconds:.1f} | {100 * seconds / max(total, 1e-9):.0f}% |")
    rest = total - timed
    lines.append(f"| other (set-up, loading, imports) | {rest:.1f} | "
                 f"{100 * rest / max(total, 1e-9):.0f}% |")
    lines.append(f"| total | {total:.1f} | 100% |")
    return "\n".join(lines)


def phase(timer: "PhaseTimes | None", name: str):
  """timer.phase(name), or a no-op block when the caller keeps no phase times (timer None)."""
  return contextlib.nullcontext() if timer is None else timer.phase(name)
