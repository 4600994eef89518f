"""The replay data layer is one straight pipeline (docs/data.md "Stages"), the folders of
ccvl_tf/ import only the folders below them (docs/ARCHITECTURE.md, "Layers"), and the
package has no import circle. Read from the source with ast (nothing is imported),
counting imports inside functions too: a deferred import is still a tie."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The reading pipeline, bottom first: a stage may import only the stages before it.
STAGES = ["replay_files", "replay_source", "replay_validity", "dqn_replay", "replay_plan",
          "store_cache", "frame_store", "replay_pool", "pipeline"]


def _module_name(path):
  rel = os.path.relpath(path, ROOT)[:-len(".py")].split(os.sep)
  return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _imports(path, known):
  """The modules of ``known`` that the file at ``path`` imports, anywhere in it."""
  out = set()
  for node in ast.walk(ast.parse(open(path).read(), path)):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [node.module] + ["{}.{}".format(node.module, a.name) for a in node.names]
    else:
      continue
    out |= {n for n in names if n in known}
  return out


def _graph():
  files = {}
  for top in ("ccvl_tf",):
    for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
      files.update({_module_name(os.path.join(dirpath, n)): os.path.join(dirpath, n)
                    for n in names if n.endswith(".py")})
  packages = {m for m, p in files.items() if p.endswith("__init__.py")}
  graph = {m: _imports(p, set(files)) - packages - {m} for m, p in files.items()}
  return graph


def test_data_stages_import_only_the_stages_below():
  graph = _graph()
  for i, stage in enumerate(STAGES):
    data_imports = {m.split(".")[-1] for m in graph["ccvl_tf.data." + stage]
                    if m.startswith("ccvl_tf.data.")}
    assert data_imports <= set(STAGES[:i]), (stage, sorted(data_imports - set(STAGES[:i])))
  # The writer and the MinAtar datasets sit beside the pipeline: no stage uses them.
  assert graph["ccvl_tf.data.dqn_replay"].isdisjoint(
      {"ccvl_tf.data.replay_writer", "ccvl_tf.data.minatar_datasets"})


# The folders of ccvl_tf/, bottom first: a module may import its own folder and the folders
# before it, never one after it.
LAYERS = ["runtime", "algorithm", "agents", "tabular", "envs", "data", "evaluation", "experiments",
          "bench"]


def test_folders_import_only_the_folders_below():
  upward = []
  for m, deps in _graph().items():
    parts = m.split(".")
    if parts[0] != "ccvl_tf" or len(parts) < 2:
      continue
    own = LAYERS.index(parts[1])
    upward += [(m, n) for n in sorted(deps)
               if n.startswith("ccvl_tf.") and LAYERS.index(n.split(".")[1]) > own]
  assert not upward, upward
  # The learners are used by the workflows only: no library folder below them reaches in.
  into_agents = [(m, n) for m, deps in _graph().items() for n in sorted(deps)
                 if n.startswith("ccvl_tf.agents.") and m.split(".")[1:2] not in (
                     ["agents"], ["experiments"], ["bench"])]
  assert not into_agents, into_agents
  assert sorted(LAYERS) == sorted(
      d for d in os.listdir(os.path.join(ROOT, "ccvl_tf"))
      if os.path.isfile(os.path.join(ROOT, "ccvl_tf", d, "__init__.py")))


def test_no_import_circles():
  graph = _graph()
  state = {}

  def visit(m, path):
    state[m] = "open"
    for n in sorted(graph.get(m, ())):
      assert state.get(n) != "open", "import circle: " + " -> ".join(path + [m, n])
      if n not in state:
        visit(n, path + [m])
    state[m] = "done"

  for m in sorted(graph):
    if m not in state:
      visit(m, [])
