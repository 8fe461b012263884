"""The memory policies, one per module; importing them registers them."""
from pysim.workload.memory.policies import karma, lms, none, offload, recompute  # noqa: F401
