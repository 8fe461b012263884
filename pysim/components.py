"""Every component of pysim, imported in one place: what `import pysim` loads.

A component declares the configuration keys it reads (`pysim.schema.declare`) and registers
itself by name (topology builders, traffic patterns, workload kinds, memory policies, the
zoo's models, allocation policies) when its module is imported. `pysim.config` consults those
registries and imports none of them; this module is where they are all imported, so that a
configuration parsed after `import pysim` is checked against every key. A new component is
added to the list below (tests/test_layers.py checks that every module declaring keys is on
it).
"""
from pysim import cluster, flow, network, routing, topology, traffic  # noqa: F401
from pysim import models  # noqa: F401  (the zoo, presets)
from pysim.jobs import loop, policies, stream  # noqa: F401
from pysim.workload import (astra, base, chakra, collectives, endpoint, graph,  # noqa: F401
                            memory, nccl, synthetic, training)
from pysim.workload.training import (builder, compute, data, layout,  # noqa: F401
                                     recompute)
from pysim.workload.memory import registry  # noqa: F401  (declares workload.memory's keys)
