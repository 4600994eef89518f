"""Reverb tables, servers and helpers for online fine-tuning (actors -> Reverb -> learner).

Two tables on one server:
  'replay'     TF-Agents Trajectory items of 2 steps (what `ReverbAddTrajectoryObserver(
               sequence_length=2, stride_length=1)` writes), uniform sampling, FIFO removal,
               rate-limited by `SampleToInsertRatio(samples_per_insert, min_size, error_buffer)`.
  'variables'  the learner's policy weights, one item (max_size 1), read by actors with
               TF-Agents' `ReverbVariableContainer` (the variable container pattern).

samples_per_insert (SPI) counts *sampled items* per inserted item. One learner step samples
`batch_size` items; one env step inserts one item. So SPI = batch_size * (learner steps per
env step). Default 8 = Dopamine/DQN's batch 32 with one update every 4 env steps.

Failure behaviour: `check_server` turns a dead or unreachable server into a ConnectionError
naming the address (gRPC would otherwise retry); the learner and the actors call it when a
sample or an insert fails or times out. The learner's own calls that take no deadline in
Reverb's API -- the weight push (TF-Agents' ReverbVariableContainer.push: a TFClient.insert op)
and Client.checkpoint() -- run through `call_with_deadline` (`push_with_deadline`), which
raises `DeadlineExceeded` naming the server when the call has not returned in time.
"""
from __future__ import annotations

import errno
import os
import socket
import threading
from typing import Callable, Dict, Optional, Sequence, TypeVar

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import portpicker
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.trajectories import time_step as ts

from ccvl_tf.runtime import paths

_T = TypeVar("_T")

REPLAY_TABLE = "replay"
VARIABLE_TABLE = "variables"  # == tf_agents' reverb_variable_container.DEFAULT_TABLE
DEFAULT_SAMPLES_PER_INSERT = 8.0


def error_buffer(samples_per_insert: float, min_size: int, batch_size: int) -> float:
  """Reverb's SampleToInsertRatio cushion: how far the sample/insert balance may drift.

  It must exceed one learner step's worth of samples (batch_size) and 2 * max(1, SPI) (Reverb
  requirement), else learner and actors ping-pong one item at a time; a larger buffer lets the
  learner run ahead (or behind) by error_buffer / SPI inserts.
  """
  return float(max(2.0 * max(1.0, samples_per_insert), 4.0 * batch_size,
                   0.1 * min_size * samples_per_insert))


def make_tables(replay_signature, variable_signature, *, max_size: int, min_size: int,
                samples_per_insert: float = DEFAULT_SAMPLES_PER_INSERT, batch_size: int = 32):
  """The 'replay' and 'variables' tables (see module docstring).

  Args:
    replay_signature: spec of one item: the collect data spec with an outer time dim.
    variable_signature: nest of TensorSpecs of the variables actors pull.
    max_size: replay capacity (items = transitions).
    min_size: items before the first sample (rate limiter's min_size_to_sample).
    samples_per_insert: SPI (> 0).
    batch_size: the learner's (online) batch, for the error buffer.
  """
  # Here: reverb (~130 ms, its native libraries) loads only in processes that use a server.
  import reverb  # pylint: disable=g-import-not-at-top
  if not samples_per_insert > 0:
    raise ValueError(f"samples_per_insert must be > 0, got {samples_per_insert!r}")
  if int(min_size) != min_size or min_size < 1 or max_size < min_size:
    raise ValueError(f"need 1 <= min_size <= max_size, got min_size={min_size!r}, "
                     f"max_size={max_size!r}")
  replay = reverb.Table(
      name=REPLAY_TABLE,
      sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(),
      max_size=int(max_size),
      rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=float(samples_per_insert), min_size_to_sample=int(min_size),
          error_buffer=error_buffer(samples_per_insert, min_size, batch_size)),
      signature=replay_signature)
  variables = reverb.Table(
      name=VARIABLE_TABLE,
      sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(),
      rate_limiter=reverb.rate_limiters.MinSize(1),
      max_size=1,
      max_times_sampled=0,
      signature=variable_signature)
  return [replay, variables]


def table_settings(*, max_size: int, min_size: int, samples_per_insert: float,
                   batch_size: int) -> Dict[str, float]:
  """What `make_tables` gives the 'replay' table, as a server reports it (`server_settings`):
  capacity, and the rate limiter's samples per insert, min size and sample/insert bounds."""
  offset = float(samples_per_insert) * int(min_size)
  buffer = error_buffer(samples_per_insert, min_size, batch_size)
  return {"max_size": float(max_size), "samples_per_insert": float(samples_per_insert),
          "min_size_to_sample": float(min_size), "min_diff": offset - buffer,
          "max_diff": offset + buffer}


def server_settings(table_info) -> Dict[str, float]:
  """The settings of a table as its server reports them (`client.server_info()[name]`), under
  the keys of `table_settings`."""
  limiter = table_info.rate_limiter_info
  return {"max_size": float(table_info.max_size),
          "samples_per_insert": float(limiter.samples_per_insert),
          "min_size_to_sample": float(limiter.min_size_to_sample),
          "min_diff": float(limiter.min_diff), "max_diff": float(limiter.max_diff)}


def setting_differences(table_info, expected: Dict[str, float], signature=None) -> Dict:
  """{key: (the server's value, the expected one)} of the settings that differ (`expected`:
  `table_settings`), and 'signature' when the item signature's shapes or dtypes differ from
  `signature`'s."""
  got = server_settings(table_info)
  out = {k: (got[k], v) for k, v in expected.items()
         if not np.isclose(got[k], v, rtol=1e-9, atol=1e-9)}
  if signature is not None:
    flat = lambda nest: [(tuple(s.shape.as_list()), s.dtype.name)  # noqa: E731
                         for s in tf.nest.flatten(nest)]
    if table_info.signature is None or flat(table_info.signature) != flat(signature):
      out["signature"] = (table_info.signature, signature)
  return out


def security_note(port: int) -> str:
  """What anyone who can reach a Reverb port can do (printed by binaries/reverb_server.py)."""
  return (f"Note: this Reverb server listens on every network interface ([::]:{port}) with no "
          f"authentication or encryption: anyone who can reach port {port} can insert "
          f"experience (poisoning the learner) or read the published policy weights. Keep the "
          f"port on a private network or behind a firewall (docs/online.md, 'Security').")


def _refuse_a_port_in_use(port: int) -> None:
  """RuntimeError when another socket is bound to `port`. gRPC, under reverb.Server, binds with
  SO_REUSEPORT, so a second server on a served port would start and report serving while the
  clients reach either one; a bind without SO_REUSEPORT on every interface fails instead.
  SO_REUSEADDR lets the probe pass over connections of a stopped server left in TIME_WAIT (a
  server restarted on its port), not over a socket that listens."""
  family = socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET
  with socket.socket(family, socket.SOCK_STREAM) as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind(("::" if family == socket.AF_INET6 else "", port))
    except OSError as e:
      if e.errno == errno.EADDRINUSE:
        raise RuntimeError(f"port {port} is already in use (another Reverb server or another "
                           f"program listens there); give another port, or 0 for a free one"
                           ) from e
      raise RuntimeError(f"could not bind port {port}: {e}") from e


def start_server(tables, port: int = 0, checkpoint_dir: Optional[str] = None):
  """A reverb.Server on `port` (0: a free one) with the default checkpointer in
  `checkpoint_dir` (the server loads the latest complete checkpoint found there at start).

  reverb.Server binds every interface ([::]:port; its Python API has no host option) and has
  no authentication: see `security_note`.

  Returns:
    (server, 'localhost:<port>').
  """
  if isinstance(port, bool) or int(port) != port or not 0 <= port <= 65535:
    raise ValueError(f"the Reverb port must be an integer in [0, 65535] (0: a free one), "
                     f"got {port!r}")
  if port:
    _refuse_a_port_in_use(int(port))
  # Here: reverb (~130 ms, its native libraries) loads only in processes that use a server.
  import reverb  # pylint: disable=g-import-not-at-top
  if not port:
    port = portpicker.pick_unused_port()
  checkpointer = None
  if checkpoint_dir:
    # An output like every other (runtime/paths.py): local and writable, checked before the
    # server starts; before, ram://ck was made as a local directory 'ram:/ck'.
    paths.check_output_dir(checkpoint_dir, "the Reverb checkpoint directory")
    os.makedirs(checkpoint_dir, exist_ok=True)
    checkpointer = reverb.checkpointers.DefaultCheckpointer(path=checkpoint_dir)
  try:
    server = reverb.Server(tables=tables, port=int(port), checkpointer=checkpointer)
  except Exception as e:  # pylint: disable=broad-except
    raise RuntimeError(f"could not start a Reverb server on port {port}"
                       + (f" from the checkpoints in {checkpoint_dir}" if checkpoint_dir else "")
                       + f": {e}") from e
  return server, f"localhost:{server.port}"


def check_server(address: str, timeout_s: float = 10.0,
                 tables: Sequence[str] = (REPLAY_TABLE, VARIABLE_TABLE)) -> Dict:
  """server_info of the Reverb server at `address`, or a ConnectionError naming it.

  Raises:
    ConnectionError: unreachable / dead server (after `timeout_s`), or a missing table.
  """
  # Here: reverb (~130 ms, its native libraries) loads only in processes that use a server.
  import reverb  # pylint: disable=g-import-not-at-top
  if not address or ":" not in address:
    raise ValueError(f"--reverb_address must be host:port, got {address!r}")
  try:
    info = reverb.Client(address).server_info(timeout=max(1, int(round(timeout_s))))
  except Exception as e:  # pylint: disable=broad-except
    raise ConnectionError(
        f"the Reverb server at {address} is not reachable (no answer within {timeout_s:.0f}s:"
        f" {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Is it running "
        f"(binaries/reverb_server.py) and is the address right?") from e
  missing = [t for t in tables if t not in info]
  if missing:
    raise ConnectionError(f"the Reverb server at {address} has no table(s) {missing} (it has "
                          f"{sorted(info)}); start it with binaries/reverb_server.py for the "
                          f"same --game")
  return info


class DeadlineExceeded(ConnectionError):
  """A call to the Reverb server did not return within its deadline (the message names the
  server's address, the call and the deadline)."""


def call_with_deadline(fn: Callable[[], _T], address: str, timeout_s: float, what: str,
                       started: Optional[threading.Event] = None) -> _T:
  """fn() -- a call to the Reverb server at `address` -- waited for at most `timeout_s`.

  Reverb's client calls that reach the server without a deadline (Client.checkpoint(), the
  TFClient.insert op behind the variable container's push, the ServerInfo of its constructor)
  block for as long as the server neither answers nor closes the connection: a frozen server,
  or a killed one when the call opens a new connection (gRPC waits for it to come back). fn
  runs in a daemon worker thread and the caller waits on an Event with a timeout.

  A call that times out keeps running in its thread (a gRPC call cannot be cancelled from
  Python); its eventual result or error is dropped, and it touches nothing of the caller's
  beyond what fn captured (pass it copies: `push_with_deadline` pushes a snapshot of the
  weights). The caller must treat the server as lost.

  Args:
    fn: the call (no arguments).
    address: host:port of the server, for the message.
    timeout_s: the deadline, seconds (> 0).
    what: the call in words, for the message (e.g. 'the weight push').
    started: optional Event set in the worker right before fn is called (for tests).

  Returns:
    fn's result. fn's own exception is re-raised as it is.

  Raises:
    DeadlineExceeded (a ConnectionError) naming address, call and deadline.
  """
  if not timeout_s > 0:
    raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
  result = {}
  done = threading.Event()

  def work():
    if started is not None:
      started.set()
    try:
      result["value"] = fn()
    except BaseException as e:  # pylint: disable=broad-except  (re-raised by the caller)
      result["error"] = e
    finally:
      done.set()

  threading.Thread(target=work, name=f"reverb call: {what}", daemon=True).start()
  if not done.wait(timeout_s):
    raise DeadlineExceeded(f"the Reverb server at {address} did not complete {what} within "
                           f"its deadline of {timeout_s:g}s")
  if "error" in result:
    raise result["error"]
  return result.get("value")


def push_with_deadline(container, variables, address: str, timeout_s: float,
                       started: Optional[threading.Event] = None) -> None:
  """container.push (TF-Agents' ReverbVariableContainer) of a snapshot of `variables` (their
  values now, copied before the call, so a late push still carries this step's weights and
  never reads them mid-update), under `call_with_deadline`."""
  values = tf.nest.map_structure(tf.identity, variables)
  call_with_deadline(lambda: container.push(values), address, timeout_s, "the weight push",
                     started)


def rate_limiter_stats(table_info) -> Dict[str, float]:
  """Calls a table's rate limiter completed since its server started (a reverb TableInfo,
  e.g. `client.server_info()[REPLAY_TABLE]`): 'inserts' (items written) and 'samples' (items
  sampled). This Reverb (dm-reverb-nightly 0.15.0.dev20240214) reports no wait times
  (RateLimiterCallStats has `completed` only):
  the time blocked is measured by the callers (experiments/online/runner.py, online/actor.py)."""
  info = table_info.rate_limiter_info
  return {"inserts": float(info.insert_stats.completed),
          "samples": float(info.sample_stats.completed)}


def trajectory_to_transition(traj) -> Dict[str, tf.Tensor]:
  """One 2-step Trajectory item (no batch dim) -> a contract transition dict.

  TF-Agents stores reward and discount of the *next* time step at index t, so the transition
  (s_0, a_0, r, s_1) has r = reward[0] and terminal = (discount[0] == 0) (a time-out keeps
  discount 1 and bootstraps). Items whose first step is LAST (episode boundary) are not
  transitions: filter them with `is_transition`.
  """
  return {
      "observation": traj.observation[0],
      "action": tf.cast(traj.action[0], tf.int32),
      "reward": tf.cast(traj.reward[0], tf.float32),
      "next_observation": traj.observation[1],
      "terminal": tf.cast(tf.equal(traj.discount[0], 0.0), tf.float32),
  }


def is_transition(traj) -> tf.Tensor:
  """False for boundary items (LAST -> FIRST), which are not (s, a, r, s') transitions."""
  return tf.not_equal(traj.step_type[0], ts.StepType.LAST)


def replay_dataset(data_spec, address: str, batch_size: int, *,
                   rate_limiter_timeout_ms: int = 30_000, prefetch: int = 2) -> tf.data.Dataset:
  """Batches of contract transitions sampled from the 'replay' table.

  Uses TF-Agents' ReverbReplayBuffer.as_dataset (sequence_length 2). With a finite
  `rate_limiter_timeout_ms` the dataset ends (StopIteration / OutOfRangeError) when no sample
  could be drawn for that long: the caller then checks the server and the actors.
  """
  buffer = reverb_replay_buffer.ReverbReplayBuffer(
      data_spec, REPLAY_TABLE, sequence_length=2, server_address=address,
      rate_limiter_timeout_ms=int(rate_limiter_timeout_ms))
  ds = buffer.as_dataset(sample_batch_size=None, num_steps=2)  # (Trajectory [2, ...], info)
  ds = ds.map(lambda traj, info: traj)
  ds = ds.filter(is_transition).map(trajectory_to_transition)
  return ds.batch(int(batch_size), drop_remainder=True).prefetch(prefetch)


def variable_signature(variables) -> object:
  """TensorSpecs of a nest of variables (the 'variables' table signature)."""
  return tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), variables)


def numpy_nest(nest):
  return tf.nest.map_structure(lambda x: np.asarray(x), nest)
