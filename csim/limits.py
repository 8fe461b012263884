"""Limits of the compiled core, in pure Python: configurations are checked against them
without the extension built. `csim._engine` imports these and refuses to load if they differ
from the constants it was compiled with."""

MAX_VCS = 64                       # a port's VCs are bits of one 64-bit candidate mask word
FLIT_TAIL = 1 << 30                # CSIM_FLIT_TAIL (_consts.h): a flit's tail mark in its seq
MAX_PACKET_FLITS = FLIT_TAIL - 1   # a flit's position and its tail mark share an int32
