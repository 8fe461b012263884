"""Before a long run, its time is estimated and said, with the faster level; while it runs, a
total and an ETA. The estimate's work is the engine's own count (oracle: the flit-hops the
flit level counts as it moves every flit); its seconds are rates times that work."""
import pytest

import pysim
from pysim import traffic
from pysim.cli._common import Ticker, eta
from pysim.network import compile_network
from pysim.topology import build
from pysim.workload import runtime
from pysim.workload.collectives import collective_graph
from pysim.workload.compile import engine_ops
from pysim.workload.graph import compile_graph


def _estimate(cfg):
    topo = build(cfg)
    graph, _ = collective_graph(cfg, topo)
    network = compile_network(cfg, topo)
    arrays, _ = compile_graph(graph, network.topo, cfg)
    return runtime.estimate(network, arrays, cfg)


class Recorder(list):
    def __call__(self, now, last):
        pass

    def estimate(self, est):
        self.append(("estimate", est))

    def share(self, x):
        self.append(("share", x))


def test_the_estimated_flit_hops_are_those_the_flit_level_moves():
    for system, over in (("ring8", {"workload.bytes": 1 << 20}),
                         ("torus4x4", {"workload.collective": "all_to_all",
                                       "workload.algorithm": "direct",
                                       "workload.bytes": 1 << 18}),
                         ("dgx1-v100", {"workload.algorithm": "direct",
                                        "workload.collective": "all_to_all",
                                        "workload.bytes": 1 << 18})):
        cfg = pysim.load(system, {"workload.kind": "collective", **over})
        rec = Recorder()
        r = pysim.simulate(cfg, progress=rec)
        est = [e for k, e in rec if k == "estimate"][0]
        assert est["flit_hops"] == r.flit_hops, system
        assert est["sends"] == sum(1 for op in r.ops if op["kind"] == "send")


@pytest.mark.parametrize("system,over", [
    ("mesh8x8", {}),
    ("mesh8x8", {"traffic.pattern": "transpose", "traffic.injection_rate": 0.05}),
    ("torus4x4", {"traffic.pattern": "neighbor", "traffic.injection_rate": 0.3}),
    ("dgx1-v100", {"traffic.injection_rate": 0.05}),
])
def test_synthetic_traffic_is_estimated_by_the_flit_hops_it_moves(system, over):
    """Below saturation the engine moves the flits offered over the warm-up and window
    (and a short drain) along their routes: its count of flit-hops is the estimate's, to
    the sampling of the pattern's pairs and of the packets drawn."""
    cfg = pysim.load(system, {"simulation.warmup_cycles": 500,
                              "simulation.measure_cycles": 5000, **over})
    rec = Recorder()
    r = pysim.simulate(cfg, progress=rec)
    assert not r.saturated
    est = [e for k, e in rec if k == "estimate"]
    assert len(est) == 1 and est[0]["cycles"] == 5500
    assert est[0]["flit_hops"] == pytest.approx(r.flit_hops, rel=0.06), system


def test_a_synthetic_window_of_centuries_is_said_in_years():
    cfg = pysim.load("mesh8x8", {"simulation.measure_cycles": 10 ** 15})
    network = compile_network(cfg)
    est = runtime.synthetic(network, cfg, traffic.pattern(network.topo, cfg), 10 ** 15 + 2000)
    # 0.1 flits/node/cycle x 64 nodes x 5.25 hops (uniform on an 8-ary mesh: 2 (k^2 - 1) / 3k)
    assert est["flit_hops"] == pytest.approx(0.1 * 64 * 5.25 * 1e15, rel=0.03)
    line = runtime.describe(est)
    years = est["seconds"]["flit"] / (365.25 * 86400)
    assert line.startswith(f"estimate: about {years:,.0f} years to simulate "
                           f"1,000,000,000,002,000 cycles"), line
    assert runtime.duration(3 * 86400) == "3 days"


def test_a_long_run_is_said_before_it_starts_with_the_faster_level():
    cfg = pysim.load("ring8", {"workload.kind": "collective", "workload.bytes": 16 << 30})
    est = _estimate(cfg)
    line = runtime.describe(est)
    assert est["seconds"]["flit"] > runtime.LONG_SECONDS
    assert line.startswith("estimate: about ") and "at the flit level" in line
    assert "at the flow level (network.model = 'flow') about" in line
    # short runs say nothing
    small = _estimate(pysim.load("ring8", {"workload.kind": "collective"}))
    assert runtime.describe(small) is None


def test_the_progress_line_has_a_share_and_an_eta(capsys):
    assert eta(0.25, 10.0) == ", 25% done, ETA 30 s"
    assert eta(None, 10.0) == "" and eta(0.0, 10.0) == ""
    t = Ticker(draw=False)
    cfg = pysim.load("ring8", {"workload.kind": "collective", "workload.bytes": 16 << 30})
    t.estimate(_estimate(cfg))
    assert "estimate: about" in capsys.readouterr().err   # (said even with no line drawn)
    t = Ticker(draw=True)
    t.shown = -1.0                           # (drawn at once: no second to wait)
    t.share(0.5)
    t(1000, None)
    err = capsys.readouterr().err
    assert "cycle 1,000" in err and "50% done, ETA" in err


def test_the_meter_reports_the_share_of_the_estimated_work():
    class Engine:
        hops = 0

        def counters(self):
            return {"flit_hops": self.hops, "flows_started": 0}
    eng, rec = Engine(), Recorder()
    meter = runtime.Meter(rec, eng, {"model": "flit", "flit_hops": 400, "sends": 4})
    for hops in (100, 300, 500):
        eng.hops = hops
        meter.last = -10.0                   # (at most once a second: a second has passed)
        meter(hops)
    assert [x for k, x in rec if k == "share"] == [0.25, 0.75, 1.0]


def test_a_training_run_is_estimated_before_its_graph_is_built(monkeypatch):
    """A training run's first estimate comes from its op count, before any iteration is
    built (a 100,000-layer model spends a minute building): the ops it names bound those the
    graph then has from above (collectives counted by their closed-form bound), and a long
    one is said with its memory."""
    from pysim.workload.training import builder
    built = []
    real = builder._Builder.iteration
    monkeypatch.setattr(builder._Builder, "iteration",
                        lambda self, *a: (built.append(a[0]), real(self, *a))[1])

    class Stop(Exception):
        pass

    class First(Recorder):
        def estimate(self, est):
            self.append((est, list(built)))
            raise Stop

    cfg = pysim.load("dgx1-v100", {"workload.kind": "training", "workload.model": "resnet50",
                                   "workload.batch": 64, "network.model": "flow"})
    rec = First()
    try:
        pysim.simulate(cfg, progress=rec)
    except Stop:
        pass
    (est, before), = rec
    assert est["stage"] == "build" and before == []
    from pysim.workload.training import training_graph
    graph, _ = training_graph(cfg, build(cfg))
    assert len(graph) <= est["graph_ops"]
    assert engine_ops(graph) <= est["ops"]
    big = runtime.before_build(3_200_000, 6_400_000, 3e9, cfg)
    line = runtime.describe(big)
    assert line.startswith("estimate: about ") and "3,200,000 ops" in line and "3.0 GB" in line
    assert runtime.describe(runtime.before_build(1000, 2000, 1e6, cfg)) is None
