"""Workload kinds, each a module that registers its runner (pysim.workload.base.register):
synthetic traffic, op graphs executed inside csim, collectives expanded into op graphs,
training iterations of a model under a parallel plan."""
from pysim.workload.base import WORKLOADS, register
from pysim.workload import synthetic  # noqa: F401  (registers 'synthetic')
from pysim.workload.graph import GraphError, GraphResult, OpGraph, load_graph, run_graph
from pysim.workload import collectives  # noqa: F401  (registers 'collective')
from pysim.workload import training  # noqa: F401  (registers 'training')
from pysim.workload import astra  # noqa: F401,E402  (declares the workload.astra_* keys)

__all__ = ["WORKLOADS", "register", "GraphError", "GraphResult", "OpGraph", "load_graph",
           "run_graph"]
