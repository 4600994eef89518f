"""Reverb servers on a given port: a port outside [0, 65535] and a port another socket listens
on are refused naming the port, in the one place every route starts a server
(reverb_replay.start_server: binaries/reverb_server.py, the online learner's in-process
server); a server restarted on its own port after it stopped still starts; online_scaleout.py
refuses a configuration whose actors could never insert."""
import socket

import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.bench import online_scaleout
from ccvl_tf.data import reverb_replay
from tests import forked_binary


def _tables():
  import reverb  # pylint: disable=g-import-not-at-top
  return [reverb.Table.queue("q", 10)]


@pytest.mark.parametrize("port", [99999, 65536, -1, 1.5, True])
def test_a_port_outside_the_range_is_refused_naming_it(port):
  with pytest.raises(ValueError, match=r"the Reverb port must be an integer in \[0, 65535\] "
                                       r"\(0: a free one\), got " + repr(port).replace(".", r"\.")):
    reverb_replay.start_server([], port)


def test_a_port_another_socket_listens_on_is_refused():
  with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as other:
    other.bind(("::", 0))
    other.listen()
    port = other.getsockname()[1]
    with pytest.raises(RuntimeError, match=f"port {port} is already in use"):
      reverb_replay.start_server(_tables(), port)


def test_a_second_server_on_a_served_port_is_refused_and_a_restart_on_it_starts():
  import reverb  # pylint: disable=g-import-not-at-top
  server, address = reverb_replay.start_server(_tables(), 0)
  port = server.port
  try:
    client = reverb.Client(address)
    client.insert([1], {"q": 1.0})  # a connection, left in TIME_WAIT once the server stops
    with pytest.raises(RuntimeError, match=f"port {port} is already in use"):
      reverb_replay.start_server(_tables(), port)
    assert client.server_info()["q"].current_size == 1  # the first one still serves
  finally:
    server.stop()
  again, _ = reverb_replay.start_server(_tables(), port)
  again.stop()


def test_the_server_binary_refuses_a_port_out_of_range_in_one_line(tmp_path):
  r = forked_binary.run("reverb_server.py", ["--game=gridworld", "--port=99999"], cwd=tmp_path,
                        timeout=120)
  assert r.returncode != 0 and "serving" not in r.stdout
  assert r.stderr.strip().splitlines()[-1] == (
      "reverb_server.py: error: the Reverb port must be an integer in [0, 65535] (0: a free "
      "one), got 99999"), r.stderr[-2000:]


def test_scaleout_refuses_zero_actors(tmp_path):
  cfg = online_scaleout.ScaleoutConfig(offline_dir=str(tmp_path), game="gridworld",
                                       output_dir=str(tmp_path / "out"), actors=(1, 0))
  with pytest.raises(ValueError, match=r"--actors must list actor counts >= 1 .* got 1,0"):
    cfg.validate()


def test_a_file_as_the_checkpoint_directory_is_refused_naming_it(tmp_path):
  """Before: reverb_server.py --checkpoint_dir=<a file> ended in a FileExistsError
  traceback."""
  a_file = tmp_path / "ckpt"
  a_file.write_text("x")
  with pytest.raises(ValueError, match=rf"^the Reverb checkpoint directory {a_file} is a file, "
                     r"not a directory"):
    reverb_replay.start_server([], 0, str(a_file))
  assert a_file.read_text() == "x"
