"""Workloads beyond synthetic traffic: op graphs executed inside csim."""
from pysim.workload.graph import GraphError, GraphResult, OpGraph, load_graph, run_graph

__all__ = ["GraphError", "GraphResult", "OpGraph", "load_graph", "run_graph"]
