"""Bad input gets a clear error, never another exception: seeded random configurations, valid
and not (a value somewhere replaced by a wrong type, a sign, a huge or non-finite number, None),
either run or are refused with a ConfigError. The generator is the one that found the defects
named in test_config_cli.py (there in a longer run); here it is a regression net, kept small."""
import math
import random

import pytest

from pysim import ConfigError, from_dict, simulate

WEIRD = [0, -1, 0.0, 2 ** 63, 1e300, float("inf"), float("nan"), "x", True, None, [], {},
         [1, "a"]]


def random_config(rng):
    c = {"simulation": {"warmup_cycles": rng.choice([0, 50]), "measure_cycles": 200,
                        "drain_cycles": 400, "seed": rng.randrange(1000)}}
    kind = rng.choice(["mesh", "torus", "ring", "switch", "fully_connected", "graph"])
    topo = {"kind": kind}
    if kind in ("mesh", "torus"):
        topo["dims"] = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
    elif kind != "graph":
        topo["size"] = rng.randint(1, 8)
    else:
        names = [f"n{i}" for i in range(rng.randint(2, 5))]
        topo["nodes"] = [{"name": a, "kind": rng.choice(["npu", "mem", "host", "switch"])}
                         for a in names]
        topo["links"] = [{"a": names[i], "b": names[rng.randrange(i)]}
                         for i in range(1, len(names))]
        if rng.random() < 0.5:
            topo["links"][0].update(count=rng.randint(1, 3), gbps=rng.choice([8.0, 50.0]),
                                    latency_cycles=rng.randint(1, 9))
    if rng.random() < 0.3:
        topo["link_gbps"] = rng.choice([8.0, 16.0, 64.0, 10.7])
    c["topology"] = topo
    c["network"] = {k: rng.randint(0, 3) for k in ("routing_delay", "vc_alloc_delay",
                                                  "st_delay") if rng.random() < 0.3}
    if rng.random() < 0.4:
        c["network"].update(vcs=rng.randint(1, 4), vc_buffer_flits=rng.randint(1, 8))
    if rng.random() < 0.3:
        c["workload"] = {"kind": "collective", "bytes": rng.choice([64, 4096, 65536]),
                         "collective": rng.choice(["all_reduce", "all_gather", "broadcast"]),
                         "algorithm": rng.choice(["ring", "direct", "tree"]),
                         "chunks": rng.randint(1, 4)}
    else:
        c["traffic"] = {"pattern": rng.choice(["uniform", "transpose", "bitcomp", "tornado",
                                               "neighbor", "shuffle"]),
                        "injection_rate": rng.choice([0.0, 0.05, 0.3]),
                        "process": rng.choice(["bernoulli", "onoff"]),
                        "packet_flits": rng.choice([1, 4, [2, 6]])}
    if rng.random() < 0.5:
        section = rng.choice([s for s in c if c[s]])
        c[section][rng.choice(list(c[section]))] = rng.choice(WEIRD)
    return c


@pytest.mark.parametrize("seed", range(60))
def test_a_random_config_runs_or_is_refused_clearly(seed):
    cfg = random_config(random.Random(seed))
    try:
        r = simulate(from_dict(cfg)).to_dict()
    except ConfigError as e:
        msg = str(e)
        assert msg and "Traceback" not in msg and "np.int64" not in msg
        return
    for k in ("avg_packet_latency", "collective_cycles"):
        if k in r and r.get("packets_delivered", 1):
            assert math.isfinite(r[k]) and r[k] > 0
