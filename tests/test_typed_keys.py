"""A key the user typed (an override, --set, a dict from Python) for a command that does not
read it is refused, naming the key, its value and what reads it; the same key held by a file
is not (a server's file may describe both a job stream's [jobs] and single runs' [traffic])."""
import pickle

import pytest

import pysim
from pysim import ConfigError, load, simulate
from pysim.jobs.servers import load_server


def test_a_jobs_key_typed_for_a_single_run_is_refused():
    with pytest.raises(ConfigError, match=r"jobs\.count = 5 is read by a stream of training "
                                          r"jobs \(pysim jobs"):
        simulate(load("ring8", {"jobs.count": 5}))


def test_a_jobs_key_in_the_file_is_not_refused_by_a_single_run(tmp_path):
    f = tmp_path / "server.toml"
    f.write_text('[topology]\nkind = "ring"\nsize = 4\n[jobs]\ncount = 5\n'
                 '[simulation]\nwarmup_cycles = 10\nmeasure_cycles = 100\n')
    cfg = load(str(f))
    assert "jobs.count" in cfg.explicit and "jobs.count" not in cfg.typed
    assert simulate(cfg).packets_measured > 0
    with pytest.raises(ConfigError, match=r"jobs\.count = 6 is read by a stream"):
        simulate(cfg.with_overrides({"jobs.count": 6}))


@pytest.mark.parametrize("path, v, reader", [
    ("traffic.injection_rate", 0.5, "'synthetic'"),
    ("simulation.measure_cycles", 500, "'synthetic'"),
    ("workload.bytes", 4096, "'collective'")])
def test_a_key_typed_for_a_job_stream_that_it_does_not_read_is_refused(path, v, reader):
    with pytest.raises(ConfigError, match=rf"{path} = {v} is not read by a stream of jobs "
                                          rf"\(pysim jobs\).*read by workload.kind = {reader}"):
        load_server("dgx1-v100", {path: v})


def test_a_servers_own_traffic_section_is_not_refused_by_a_job_stream():
    cfg = load("dgx1-v100")
    assert any(p.startswith("traffic.") for p in cfg.explicit)
    assert load_server("dgx1-v100").cfg.workload.kind == cfg.workload.kind


def test_typed_keys_survive_pickling_and_the_sweep():
    cfg = load("ring8", {"jobs.count": 5})
    assert pickle.loads(pickle.dumps(cfg)).typed == {"jobs.count"}
    row, = pysim.sweep("ring8", {"jobs.count": [3]}, jobs=1)       # (a failed point)
    assert row["status"] == "failed" and "jobs.count = 3 is read by a stream" in row["error"]


COLLECTIVE = {"workload.kind": "collective", "workload.bytes": 1 << 16}


@pytest.mark.parametrize("path, v", [("network.va_input_arbiter", "own_index"),
                                     ("network.sa_input_arbiter", "vcs"),
                                     ("network.nic_injection", "shared"),
                                     ("simulation.watchdog_cycles", 100000),
                                     ("simulation.max_packets", 100000)])
def test_a_flit_level_key_typed_at_the_flow_level_is_refused(path, v):
    cfg = load("ring8", {**COLLECTIVE, "network.model": "flow", path: v})
    with pytest.raises(ConfigError, match=rf"{path} = '?{v}'? is not read by network.model = "
                                          rf"'flow': it is read by network.model = 'flit'"):
        simulate(cfg)
    with pytest.raises(ConfigError, match=rf"{path} = '?{v}'? is not read by network.model = "
                                          rf"'flow' \(a stream's default\)"):
        load_server("dgx1-v100", {path: v})
    # (the same key at the flit level runs; a stream at the flit level takes it too)
    assert simulate(cfg.with_overrides({"network.model": "flit"})).makespan_cycles > 0
