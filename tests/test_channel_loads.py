"""Per-link loads against the channel-load formulas, every link.

Below saturation a link carries about gamma * T flits in a window of T cycles; accept
|measured - gamma T| <= 4 sqrt(gamma T) + 1. Single-flit packets keep flit arrivals close to
Poisson, which is what the tolerance assumes."""
import numpy as np

from conftest import make_cfg
from pysim.sim import simulate


def coords(name):
    return tuple(int(x) for x in name[1:].split("_"))


def check_links(result, gamma_of, T):
    bad = []
    for link in result.links:
        g = gamma_of(link)
        expect = g * T
        if abs(link["flits"] - expect) > 4 * np.sqrt(expect) + 1:
            bad.append((link["src"], link["dst"], link["flits"], round(expect, 1)))
    assert not bad, bad


def test_mesh_8x8_dor_uniform_every_link():
    k, lam, T = 8, 0.05, 20000
    r = simulate(make_cfg(topology={"kind": "mesh", "dims": [k, k]},
                          simulation={"warmup_cycles": 2000, "measure_cycles": T},
                          traffic={"injection_rate": lam, "packet_flits": 1}))
    assert not r.saturated
    assert len(r.links) == 2 * 2 * k * (k - 1)

    def gamma(link):
        a, b = coords(link["src"]), coords(link["dst"])
        d = 0 if a[0] != b[0] else 1
        i = min(a[d], b[d])              # the link joins positions i and i+1
        return lam * (i + 1) * (k - 1 - i) / k
    check_links(r, gamma, T)
    # the middle links carry the most: 4/k saturation bound comes from them
    assert max(gamma(l) for l in r.links) == lam * k / 4


def test_bidirectional_ring_16_every_link():
    """Ties at distance k/2 split by the parity of the source coordinate: every link carries
    lam k / 8. Four VCs (two per dateline class) keep this load well below saturation; with
    one VC per class and wait_for_tail_credit the ring saturates near 0.04 for 1-flit packets.
    """
    k, lam, T = 16, 0.05, 30000
    r = simulate(make_cfg(topology={"kind": "ring", "size": k}, network={"vcs": 4},
                          simulation={"warmup_cycles": 2000, "measure_cycles": T},
                          traffic={"injection_rate": lam, "packet_flits": 1}))
    assert not r.saturated
    assert len(r.links) == 2 * k
    check_links(r, lambda link: lam * k / 8, T)
