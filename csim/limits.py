"""Limits of the compiled core, in pure Python: configurations are checked against them
without the extension built. `csim._engine` imports these and refuses to load if they differ
from the constants it was compiled with."""

MAX_VCS = 64                       # a port's VCs are bits of one 64-bit candidate mask word
FLIT_TAIL = 1 << 30                # CSIM_FLIT_TAIL (_consts.h): a flit's tail mark in its seq
MAX_PACKET_FLITS = FLIT_TAIL - 1   # a flit's position and its tail mark share an int32

# Op kinds of an op graph and the units of a node (csim/_types.pxd; see csim/_dag.pxd)
(OP_COMPUTE, OP_SEND, OP_DELAY, OP_ROOF, OP_ROOF_MEM, OP_ACQUIRE, OP_RELEASE, OP_HOLD,
 OP_UNHOLD) = range(9)
N_OP_KINDS = 9
# The allocators' input arbiters by name (csim/_types.pxd: VA_*, SA_*; pysim.engine documents
# them)
VC_ARBITERS = {"round_robin": 0, "own_index": 1}
SW_ARBITERS = {"outputs": 0, "vcs": 1}
N_UNITS = 10    # 0 compute, 1 memory, 2 collectives engine, 3 a gate, 4 the compute units held
                # by NPU-run collectives, 5 communication's share of the memory (what it
                # sends), 6 memory transfers' share of it, 7 communication's share for what it
                # receives, 8 and 9 the second lanes of 5 and 7
