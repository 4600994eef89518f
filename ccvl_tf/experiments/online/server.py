"""The online learner's calls to its Reverb server, each with a deadline.

Reverb's client calls that the learner makes -- the weight push (TF-Agents'
ReverbVariableContainer.push, a TFClient.insert op), the variable container's ServerInfo,
Client.checkpoint() -- take no deadline, and a server that dies or freezes between a health
check and the call blocked the learner forever. `LearnerServerLink` runs every one of them
under `ccvl_tf.data.reverb_replay.call_with_deadline` (a worker thread waited for with a timeout):

  push, ServerInfo         --server_timeout_s
  Reverb checkpoint        --reverb_checkpoint_timeout_s (a big table takes a while to write)

and turns a call that does not return in time, or fails while the server does not answer a
ServerInfo, into `ServerLost` naming the address, the train step and the deadline. No health
check precedes a call any more (the deadline makes it redundant). The samples (the replay
dataset) end on the rate limiter's timeout on a live server, and run under a deadline of
--sample_timeout_s + --server_timeout_s for a killed one (runner.py `_next_batch`).
"""
from __future__ import annotations

from typing import Callable, Optional, TypeVar

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf
from tf_agents.experimental.distributed import reverb_variable_container
from tf_agents.specs import tensor_spec

from ccvl_tf.data import reverb_replay

_T = TypeVar("_T")


class ServerLost(ConnectionError):
  """The Reverb server stopped answering (the message names its address)."""


class ServerMismatch(ValueError):
  """The server's 'replay' table has other settings than the learner's (the message names
  each, and the flags that set them)."""


# A replay-table setting -> the learner flag(s) that set it (reverb_replay.table_settings).
_FLAGS = {"samples_per_insert": "--samples_per_insert", "min_size_to_sample": "--min_replay_size",
          "max_size": "--replay_capacity",
          "min_diff": "--batch_size, --offline_fraction, --samples_per_insert and "
                      "--min_replay_size",
          "max_diff": "--batch_size, --offline_fraction, --samples_per_insert and "
                      "--min_replay_size"}


def _number(x: float) -> str:
  return str(int(x)) if float(x).is_integer() else f"{x:g}"


def check_table(address: str, table_info, cfg, trajectory_spec) -> None:
  """Raises ServerMismatch unless the server's 'replay' table (`table_info`) has the settings
  `cfg` (OnlineConfig) gives it and the item signature of `trajectory_spec`: its rate limiter
  decides how many env steps the actors take per learner step."""
  expected = reverb_replay.table_settings(
      max_size=cfg.replay_capacity, min_size=cfg.min_replay_size,
      samples_per_insert=cfg.samples_per_insert, batch_size=cfg.online_batch_size)
  diffs = reverb_replay.setting_differences(table_info, expected,
                                            tensor_spec.add_outer_dim(trajectory_spec))
  if not diffs:
    return
  parts = []
  for key, (server, mine) in diffs.items():
    if key == "signature":
      parts.append(f"its items are another game's or agent's (this learner: --game={cfg.game} "
                   f"--agent={cfg.agent})")
    else:
      parts.append(f"{key} {_number(server)} (this learner's {_FLAGS[key]} give "
                   f"{_number(mine)})")
  raise ServerMismatch(
      f"the Reverb server at {address} runs another 'replay' table than this learner's: "
      + "; ".join(parts) + ". Its rate limiter sets how many env steps the actors take per "
      "learner step, so the run's env-step budget and counts would be off. Start "
      "binaries/reverb_server.py with this learner's --game, --agent, --samples_per_insert, "
      "--min_replay_size, --replay_capacity, --batch_size and --offline_fraction, or give "
      "finetune_online.py the server's.")


def check_variables_table(address: str, table_info, cfg, variables) -> None:
  """Raises ServerMismatch unless the server's 'variables' table takes the learner's weights
  (`variables`: the pushed nest), whose shapes --game, --agent and the offline run's network
  settings (cfg.offline_settings: the delta head) give."""
  flat = lambda nest: [(tuple(s.shape.as_list()), s.dtype.name)  # noqa: E731
                       for s in tf.nest.flatten(nest)]
  mine = reverb_replay.variable_signature(variables)
  if table_info.signature is not None and flat(table_info.signature) == flat(mine):
    return
  # CQL's network has no delta head: its variables follow --game and --agent alone.
  head = ("" if cfg.agent == "cql" else
          f", delta head {cfg.offline_settings.get('delta_head', 'the default')} from "
          f"--offline_dir's summary.json")
  raise ServerMismatch(
      f"the Reverb server at {address} runs another 'variables' table than this learner's: its "
      f"weights are another network's (this learner: --game={cfg.game} --agent={cfg.agent}"
      f"{head}). Start binaries/reverb_server.py with this learner's --game, --agent and "
      f"--offline_dir.")


class LearnerServerLink:
  """The learner's side of the server: its client, the variable container and the pushed
  variables, with the deadlines of the module docstring."""

  def __init__(self, address: str, server_timeout_s: float, checkpoint_timeout_s: float):
    # Here: reverb (~20-40 ms after TensorFlow, its native libraries) loads only in
    # processes that use a server.
    import reverb  # pylint: disable=g-import-not-at-top
    self.address = address
    self.server_timeout_s = float(server_timeout_s)
    self.checkpoint_timeout_s = float(checkpoint_timeout_s)
    self.client = reverb.Client(address)
    self.container = None
    self.variables = None

  def connect(self, variables, step: int) -> None:
    """The variable container of the 'variables' table, and the first push of `variables`
    (a nest of tf.Variables, pushed again by every `push`)."""
    self.variables = variables
    self.container = self.call(
        lambda: reverb_variable_container.ReverbVariableContainer(
            self.address, table_names=[reverb_replay.VARIABLE_TABLE]),
        "the variable container's ServerInfo", step)
    self.push(step)

  def push(self, step: int) -> None:
    """The variables' values now (a snapshot) into the 'variables' table."""
    self._guard(lambda: reverb_replay.push_with_deadline(
        self.container, self.variables, self.address, self.server_timeout_s),
        "the weight push", step, "--server_timeout_s", self.server_timeout_s)

  def checkpoint(self, step: int) -> str:
    """A checkpoint of the server (written by the server, on its machine)."""
    return self._guard(lambda: reverb_replay.call_with_deadline(
        self.client.checkpoint, self.address, self.checkpoint_timeout_s,
        "the Reverb checkpoint"),
        "the Reverb checkpoint", step, "--reverb_checkpoint_timeout_s",
        self.checkpoint_timeout_s)

  def call(self, fn: Callable[[], _T], what: str, step: int) -> _T:
    """fn() (a call to the server) with the deadline --server_timeout_s."""
    return self._guard(lambda: reverb_replay.call_with_deadline(
        fn, self.address, self.server_timeout_s, what), what, step, "--server_timeout_s",
        self.server_timeout_s)

  def replay_inserts(self, step: int) -> int:
    """Items inserted into the 'replay' table since the server started (its rate limiter's
    completed inserts)."""
    info = self.call(self.client.server_info, "ServerInfo", step)
    return int(reverb_replay.rate_limiter_stats(info[reverb_replay.REPLAY_TABLE])["inserts"])

  def replay_items(self, step: int) -> int:
    """Items in the 'replay' table now."""
    return int(self.call(self.client.server_info, "ServerInfo", step)[
        reverb_replay.REPLAY_TABLE].current_size)

  def check(self, step: int, error: Optional[Exception] = None) -> None:
    """Raises ServerLost naming the address when the server does not answer a ServerInfo
    within --server_timeout_s (`error`: the failure that made the learner ask, named in the
    message)."""
    try:
      reverb_replay.check_server(self.address, self.server_timeout_s)
    except ConnectionError as ce:
      if error is None:
        raise ServerLost(f"learner: lost the Reverb server at {self.address} at train step "
                         f"{step}: {ce}") from ce
      raise ServerLost(f"learner: lost the Reverb server at {self.address} at train step "
                       f"{step} ({type(error).__name__}: {error}); {ce}") from error

  def _guard(self, call: Callable[[], _T], what: str, step: int, flag: str,
             timeout_s: float) -> _T:
    try:
      return call()
    except reverb_replay.DeadlineExceeded as e:
      raise ServerLost(f"learner: lost the Reverb server at {self.address} at train step "
                       f"{step}: {what} did not return within {flag}={timeout_s:g}s") from e
    except Exception as e:  # pylint: disable=broad-except
      self.check(step, e)  # ServerLost when the server is gone, else the failure as it is
      raise
