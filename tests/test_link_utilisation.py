"""Link utilisation is the fraction of the window a link spends serialising flits: never above
one, however slow the link, at either level; and bytes carried / (link rate x window) when
every flit's serialisation ends inside the window."""
import pytest

from conftest import make_cfg
from pysim.sim import simulate


def all_reduce(size, gbps, model, nbytes=1024):
    cfg = make_cfg(topology={"kind": "ring", "size": size, "link_gbps": gbps},
                   network={"model": model},
                   workload={"kind": "collective", "collective": "all_reduce",
                             "algorithm": "ring", "bytes": nbytes})
    return simulate(cfg).to_dict()


@pytest.mark.parametrize("model", ["flit", "flow"])
@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("gbps", [1e-3, 0.3, 7.0])
def test_utilisation_is_at_most_one_on_slow_links(model, size, gbps):
    """A link slower than a flit per cycle sends a flit's head at once and the next flit 1 / r
    cycles later: the last flit's serialisation may outlast the run, and is not counted."""
    r = all_reduce(size, gbps, model)
    used = [l for l in r["links"] if l["flits"]]
    assert used
    for l in used:
        assert 0 < l["utilisation"] <= 1 + 1e-12, l


def test_a_link_busy_to_the_end_is_close_to_one_not_above():
    """Two NPUs on a 0.001 GB/s ring (32-byte flits at 1 GHz: 32,000 cycles a flit): each
    lane carries its 16 flits back to back and the run ends with the last flit's head, so all
    but the last flit's serialisation lies inside the run: (16 - 1) / 16 of the carried
    flits' time at least, and at most the whole run."""
    r = all_reduce(2, 1e-3, "flit")
    T = r["makespan_cycles"]
    for l in r["links"]:
        per_flit = 32 / l["bandwidth_gbps"]              # cycles (1 GHz)
        assert l["flits"] == 16
        assert (l["flits"] - 1) * per_flit / T <= l["utilisation"] <= 1 + 1e-12


@pytest.mark.parametrize("model", ["flit", "flow"])
def test_utilisation_is_bytes_over_rate_times_window(model):
    """Ring all-reduce of N bytes on two NPUs: each direction carries (p - 1) / p x 2N = N
    bytes, N / 2 on each of its two lanes. At 16 GB/s (half a flit per cycle) the last flit's
    two cycles of serialisation end long before the run does (its head still crosses the
    link, the router and the NIC), so the utilisation is N / 2 / (16 B/cycle x makespan)."""
    N = 1024
    r = all_reduce(2, 16.0, model, N)
    T = r["makespan_cycles"]
    assert len(r["links"]) == 4
    for l in r["links"]:
        assert l["bandwidth_gbps"] == 16.0
        assert l["utilisation"] == pytest.approx(N / 2 / (16.0 * T), rel=1e-12)


@pytest.mark.parametrize("gbps,measure", [(3.0, 3000), (7.0, 3001), (7.0, 3007)])
def test_a_saturated_link_in_a_measured_window_is_busy_throughout(gbps, measure):
    """Synthetic traffic far past saturation on a ring of slow links (NICs 1000 GB/s): the
    busiest link is never idle, so it serialises flits the whole window: utilisation 1, not
    more, whatever part of a flit straddles the window's start or end (3 GB/s is 10 2/3
    cycles a flit, and the window sends 1.0027 x the flits its rate allows over 3000 cycles)."""
    cfg = make_cfg(topology={"kind": "ring", "size": 4, "link_gbps": gbps},
                   network={"model": "flit", "injection_gbps": 1000, "ejection_gbps": 1000},
                   traffic={"injection_rate": 0.9},
                   simulation={"warmup_cycles": 2001, "measure_cycles": measure})
    r = simulate(cfg).to_dict()
    assert r["saturated"]
    u = [l["utilisation"] for l in r["links"]]
    assert all(0 <= x <= 1 + 1e-12 for x in u)
    assert max(u) == pytest.approx(1.0, abs=1e-12)
