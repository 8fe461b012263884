/* Constants shared by csim modules. */
#ifndef CSIM_CONSTS_H
#define CSIM_CONSTS_H
#define CSIM_NEVER 0x3FFFFFFFFFFFFFFFLL
#endif
