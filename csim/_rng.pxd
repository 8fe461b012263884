# A small, fast, seeded PRNG: xoshiro256** seeded through splitmix64.
from libc.stdint cimport uint64_t
from libc.math cimport log, log1p

cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))

cdef inline uint64_t splitmix64(uint64_t* x) noexcept nogil:
    x[0] += <uint64_t>0x9E3779B97F4A7C15
    cdef uint64_t z = x[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)

cdef inline void rng_seed(uint64_t* s, uint64_t seed) noexcept nogil:
    cdef uint64_t x = seed
    s[0] = splitmix64(&x)
    s[1] = splitmix64(&x)
    s[2] = splitmix64(&x)
    s[3] = splitmix64(&x)

cdef inline uint64_t rng_next(uint64_t* s) noexcept nogil:
    cdef uint64_t result = _rotl(s[1] * 5, 7) * 9
    cdef uint64_t t = s[1] << 17
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result

cdef inline double rng_uniform(uint64_t* s) noexcept nogil:
    """Uniform in [0, 1)."""
    return (rng_next(s) >> 11) * (1.0 / 9007199254740992.0)

cdef inline long rng_below(uint64_t* s, long n) noexcept nogil:
    """Uniform integer in [0, n)."""
    cdef long r = <long>(rng_uniform(s) * n)
    if r >= n:
        r = n - 1
    return r

cdef inline long rng_geometric(uint64_t* s, double p) noexcept nogil:
    """Trials up to and including the first success of a Bernoulli(p): support 1, 2, ..."""
    if p >= 1.0:
        return 1
    if p <= 0.0:                 # never: as far off as a result can be
        return <long>4000000000000000000
    cdef double u = 1.0 - rng_uniform(s)   # (0, 1]
    cdef double g = log(u) / log1p(-p)
    if g > 4.0e18:
        return <long>4000000000000000000
    return 1 + <long>g
