"""Runs the binaries for the tests, each command line in its own process, without paying the
binary's imports and the interpreter's teardown every time.

A binary's process spends about 4-6 s of CPU importing TensorFlow, TF-Agents, Reverb and ALE
and about 1.7 s freeing them at exit, before and after whatever the test checks; most of a
test that refuses a bad flag is that. `run(binary, args, cwd)` hands the command line to a
server process (one per binary and environment, started on first use; at most MAX_SERVERS
kept, the least recently used closed first) that has run the binary as its `__main__` up to its
last block -- its flags defined, `quiet_start` and `pin_cpu_kernels` done, exactly as
`python binaries/<binary>` does before `main` -- and forks one child per command line. The child changes to `cwd`, sets `sys.argv`, reads /dev/null and
writes its stdout and stderr to files, runs what every binary's `if __name__ == "__main__":`
block runs, `config_flags.run(main)`, and ends as a script ends: its SystemExit's code, an
uncaught exception's traceback and 1, the atexit handlers, flushed output. Only the
interpreter's teardown is left out (`os._exit`), which no test here depends on. Every child
starts from the state the import left: the server itself never runs `main` or a TensorFlow op,
so one run sees nothing of another, and TensorFlow's thread pools do not exist yet at a fork (the
only other threads, two measured, are idle ones that the imported libraries start).

What keeps a fresh `subprocess` start (`fresh=True`, or the tests' own Popen): a test of the
start itself (what is printed before `main`, the environment TensorFlow loads under, a CPU
affinity), of signals, kills and a process's parent, of a SavedModel loaded in a TensorFlow-only
process, and one end-to-end run of each binary.

  r = forked_binary.run("train_offline.py", ["--alpha=-1"], cwd=tmp_path)
  r.returncode, r.stdout, r.stderr          # as subprocess.run(..., capture_output=True, text=True)
"""
import atexit
import collections
import json
import os
import select
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What every binary's `if __name__ == "__main__":` block is; a child runs the same call.
MAIN_BLOCK = 'if __name__ == "__main__":\n  config_flags.run(main)\n'
# The environment the subprocess tests give a binary.
BINARY_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}

# (binary path, environment items) -> _Server, least recently used first. Each server holds
# the binary's imports (about 350 MB resident with TensorFlow); at most MAX_SERVERS are kept.
_servers = collections.OrderedDict()
MAX_SERVERS = 3


def binary_env(**more):
  """This process's environment with BINARY_ENV and `more`."""
  return dict(os.environ, **BINARY_ENV, **more)


def run(binary, args, cwd=ROOT, env=None, timeout=600, fresh=False):
  """subprocess.CompletedProcess of `python binaries/<binary> *args` run in `cwd` (stdout and
  stderr as text). `env`: the binary's environment (default binary_env()). `fresh`: a real
  subprocess start instead of a fork of the binary's server. A run longer than `timeout`
  seconds is killed and raises subprocess.TimeoutExpired, as subprocess.run does."""
  path = os.path.join(ROOT, "binaries", binary)
  env = binary_env() if env is None else env
  args = [str(a) for a in args]
  if fresh:
    return subprocess.run([sys.executable, path, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout, check=False)
  key = (path, tuple(sorted(env.items())))
  server = _servers.pop(key, None)
  if server is None or not server.alive():
    while len(_servers) >= MAX_SERVERS:
      _servers.popitem(last=False)[1].close()
    server = _Server(path, env)
  _servers[key] = server
  return server.run(args, str(cwd), timeout)


class _Server:
  """The client side of one binary's server process."""

  def __init__(self, path, env):
    with open(path, encoding="utf-8") as f:
      if not f.read().endswith(MAIN_BLOCK):
        raise AssertionError(f"{path} does not end with {MAIN_BLOCK!r}: a forked run would not "
                             "run what the binary runs")
    self.path = path
    self.work = tempfile.mkdtemp(prefix="forked-binary-")
    self.log = open(os.path.join(self.work, "server.log"), "w+", encoding="utf-8")
    # Unbuffered bytes: readline() then takes one reply and no more, so select() on the pipe
    # sees whether the next reply has come.
    self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), path],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                 env=env, cwd=ROOT, bufsize=0)
    self.count = 0
    atexit.register(self.close)

  def alive(self):
    return self.proc.poll() is None

  def _reply(self, timeout=None):
    if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
      return None
    line = self.proc.stdout.readline()
    if not line:
      self.log.seek(0)
      raise AssertionError(f"the server of {self.path} ended "
                           f"({self.proc.wait()}):\n{self.log.read()[-3000:]}")
    return json.loads(line)

  def run(self, args, cwd, timeout):
    self.count += 1
    out = {s: os.path.join(self.work, f"{self.count}.{s}") for s in ("stdout", "stderr")}
    self.proc.stdin.write((json.dumps({"args": args, "cwd": cwd, **out}) + "\n").encode())
    pid = self._reply()["pid"]
    done = self._reply(timeout)
    if done is None:
      os.kill(pid, signal.SIGKILL)
      self._reply()
      raise subprocess.TimeoutExpired([self.path, *args], timeout, *self._read(out))
    return subprocess.CompletedProcess([self.path, *args], done["returncode"], *self._read(out))

  @staticmethod
  def _read(out):
    texts = []
    for name in ("stdout", "stderr"):
      with open(out[name], encoding="utf-8", errors="replace") as f:
        texts.append(f.read())
      os.remove(out[name])
    return texts

  def close(self):
    if self.log.closed:
      return
    if self.alive():
      self.proc.stdin.close()
      self.proc.wait(timeout=60)
    self.proc.stdout.close()
    self.log.close()
    import shutil  # pylint: disable=g-import-not-at-top
    shutil.rmtree(self.work, ignore_errors=True)


# ------------------------------------------------------------------------------ the server
def _exit_code(run_main):
  """Runs `run_main` and ends as the interpreter ends a script (see the module docstring):
  the exit code."""
  code = 0
  try:
    run_main()
  except SystemExit as e:
    if e.code is None:
      code = 0
    elif isinstance(e.code, int):
      code = e.code
    else:
      print(e.code, file=sys.stderr)
      code = 1
  except BaseException:  # pylint: disable=broad-except
    sys.excepthook(*sys.exc_info())
    code = 1
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  sys.stdout.flush()
  sys.stderr.flush()
  return code


def _serve(binary):
  """Imports `binary` as `python binary` would before `main`, then forks one child per request
  line on stdin ({"args", "cwd", "stdout", "stderr"}), answering {"pid"} when it starts and
  {"returncode"} when it has ended. Ends at the end of stdin."""
  sys.path[0] = os.path.dirname(binary)  # as for `python binaries/<binary>`
  sys.argv = [binary]
  # The binary becomes this process's __main__ (absl's help prints __main__'s docstring; a
  # spawned worker re-imports __main__ from its file), run without its last block, which each
  # child runs instead.
  import types  # pylint: disable=g-import-not-at-top
  with open(binary, encoding="utf-8") as f:
    source = f.read()
  main = types.ModuleType("__main__")
  main.__file__ = binary
  sys.modules["__main__"] = main
  exec(compile(source[:-len(MAIN_BLOCK)], binary, "exec"), main.__dict__)  # pylint: disable=exec-used
  module = main.__dict__
  # What a run imports only when it gets there (rliable, ~1.2 s, for the results tables' CIs):
  # imported once here instead of in every child that reaches it. Nothing of a run is done.
  from ccvl_tf.evaluation import score_stats  # pylint: disable=g-import-not-at-top
  score_stats._import_rliable()  # pylint: disable=protected-access
  replies = sys.stdout
  for line in sys.stdin:
    request = json.loads(line)
    replies.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      null = os.open(os.devnull, os.O_RDONLY)
      os.dup2(null, 0)
      for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
      os.chdir(request["cwd"])
      sys.argv = [binary, *request["args"]]
      os._exit(_exit_code(lambda: module["config_flags"].run(module["main"])))
    replies.write(json.dumps({"pid": pid}) + "\n")
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
    replies.flush()


if __name__ == "__main__":
  _serve(sys.argv[1])
  os._exit(0)  # nothing left to write; the interpreter's teardown would only cost time
