"""Job streams on shared multi-accelerator servers: which NPUs each job gets (allocation
policies, after MAPA, Ranganath et al., SC 2021), how long it then takes (its training
iterations simulated on those NPUs, with the jobs it shares links with), and what the queue
does.

    import pysim.jobs as pj
    server = pj.load_server("dgx1-v100", {"jobs.count": 100})
    result = pj.run_stream(server)          # every policy of jobs.policies
    print(result.summary()); result.to_dict()
"""
import importlib

from pysim.jobs.policies import POLICIES, Candidates, register
from pysim.jobs.stream import Job, generate, load_jobs, write_jobs

__all__ = ["POLICIES", "Candidates", "register", "run_stream", "ALIASES", "PRESETS", "Server",
           "load_server", "Job", "generate", "load_jobs", "write_jobs"]

# Loaded when first asked for: running a stream needs the executors (pysim.sweep: processes,
# SQLite), which `import pysim` (the policies' and the stream's keys) does not.
_LAZY = {"run_stream": "pysim.jobs.run", "ALIASES": "pysim.jobs.servers",
         "PRESETS": "pysim.jobs.servers", "Server": "pysim.jobs.servers",
         "load_server": "pysim.jobs.servers"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pysim.jobs' has no attribute {name!r}")
