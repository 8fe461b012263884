/* Constants shared by csim modules. */
#ifndef CSIM_CONSTS_H
#define CSIM_CONSTS_H
#define CSIM_NEVER 0x3FFFFFFFFFFFFFFFLL
#define CSIM_CTZ64(x) __builtin_ctzll(x)
#define CSIM_EJECT_CREDITS (1 << 30)
#define CSIM_FLIT_TAIL (1 << 30)
#define CSIM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#endif
