"""Process plumbing: flags from config dataclasses, shared run settings, path checks, the
offline training loop, failed writes, strict JSON, the run lock, a quiet start and worker
lifetimes.

Independent of the method: it imports no module of ccvl_tf outside runtime/, nor ccvl_tf/agents/
"""
