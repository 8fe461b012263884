"""The op-by-op expansion of an op graph into csim's primitives, the reference that
pysim.workload.compile's array expansion must equal primitive for primitive
(tests/test_bulk.py): pysim.workload.graph keeps it for graphs with memory ops."""
from pysim.workload.graph import _compile_by_op as compile_graph_by_op  # noqa: F401
