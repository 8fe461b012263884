"""Figures: what each draws, checked on the matplotlib objects themselves -- averages and
95% intervals over seeds against a t table, saturated points kept and marked, the saturation
line at the measured saturation throughput, timelines in time units with overlapping ops side
by side and rows for memory nodes, labelled link-utilisation drawings."""
import json
import math
import os

import matplotlib
import numpy as np
import pytest
from click.testing import CliRunner

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pysim import plot  # noqa: E402
from pysim.cli import main  # noqa: E402
from pysim.errors import ConfigError  # noqa: E402


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions draw, kept open for inspection."""
    kept, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    yield kept
    close("all")


def row(rate, lat, seed=1, sat=False, accepted=None, zl=35.0, **params):
    return dict(hash=f"{rate}-{seed}-{params}", status="saturated" if sat else "done",
                error=None, params={"traffic.injection_rate": rate, "simulation.seed": seed,
                                    **params},
                result={"avg_packet_latency": lat, "saturated": sat, "zero_load_latency": zl,
                        "accepted_rate": rate if accepted is None else accepted,
                        "offered_rate": rate, "config": {"_system": "mesh8x8",
                                                         "traffic": {"pattern": "uniform",
                                                                     "packet_flits": 4}}})


def test_t_quantiles_match_the_tables():
    # Student's t, 0.975 quantile, as printed in statistical tables
    for df, t in ((1, 12.706), (2, 4.303), (10, 2.228), (30, 2.042), (40, 2.021),
                  (60, 2.000), (120, 1.980)):
        assert plot.t975(df) == pytest.approx(t, abs=1e-3)


def test_repeated_seeds_are_averaged_with_95_percent_intervals(tmp_path, figures):
    lat = {0.1: [40.0, 42.0, 47.0], 0.2: [50.0, 50.0, 53.0]}
    rows = [row(r, v, seed=s + 1) for r, vs in lat.items() for s, v in enumerate(vs)]
    data = plot.latency_load(rows, str(tmp_path / "l.png"))
    d = data[None]
    assert d["x"] == [0.1, 0.2] and d["n"] == [3, 3]
    for i, vs in enumerate(lat.values()):
        assert d["y"][i] == pytest.approx(np.mean(vs))
        assert d["ci"][i] == pytest.approx(4.303 * np.std(vs, ddof=1) / math.sqrt(3), rel=1e-3)
    ax = figures[0].axes[0]
    # one line through the means, not three on top of each other; error bars drawn
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(lines) == 1 and list(lines[0].get_ydata()) == pytest.approx(d["y"])
    assert ax.collections, "no error bars"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "95% CI over seeds" in legend


def test_saturated_points_stay_on_the_latency_load_figure(tmp_path, figures):
    """The y-axis ends at a multiple of the zero-load latency; a point beyond it is marked on
    the top edge; a saturated point below it is drawn hollow; the saturation line sits at the
    most the series accepted (0.37), not at the first saturated sample (0.4)."""
    rows = [row(0.1, 36), row(0.2, 40), row(0.3, 60), row(0.35, 150, sat=True, accepted=0.34),
            row(0.4, 900, sat=True, accepted=0.37), row(0.45, 4000, sat=True, accepted=0.36)]
    plot.latency_load(rows, str(tmp_path / "l.png"))
    ax = figures[0].axes[0]
    top = ax.get_ylim()[1]
    assert top == pytest.approx(plot.CLIP * 35.0)
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "^"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [0.4] and \
        list(marks[0].get_ydata()) == [top]
    hollow = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and
              ln.get_markerfacecolor() == "white" and len(ln.get_xdata())]
    assert [list(ln.get_xdata()) for ln in hollow] == [[0.35]]
    vertical = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":" and
                len(set(ln.get_xdata())) == 1 and len(ln.get_xdata()) == 2]
    assert len(vertical) == 1 and vertical[0].get_xdata()[0] == pytest.approx(0.37)
    # the style key is a legend, not the title
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"saturated", "zero-load latency", "saturation throughput"} <= set(legend)
    assert ax.get_title() == "mesh8x8, uniform traffic, 4-flit packets"


def test_figure_options_from_the_command_line(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(plot, "latency_load", lambda rows, out, **kw: seen.update(kw))
    from pysim.sweep import Store
    db = str(tmp_path / "r.sqlite")
    s = Store(db)
    r = row(0.1, 40)
    s.put("h", r["params"], "done", r["result"], None, 0.1)
    s.close()
    res = CliRunner().invoke(main, ["plot", db, "--kind", "latency-load", "--title", "T",
                                    "--xlim", "0", "0.5", "--ylim", "0", "300", "--logy",
                                    "-o", str(tmp_path / "x.png")])
    assert res.exit_code == 0, res.output
    assert seen["title"] == "T" and seen["xlim"] == (0, 0.5) and seen["ylim"] == (0, 300) \
        and seen["logy"] is True


def test_timeline_in_time_units_overlaps_side_by_side_legend_outside(tmp_path, figures):
    trace = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "npu0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "network"}},
        {"ph": "X", "name": "a", "cat": "send", "pid": 0, "tid": 1, "ts": 0.0, "dur": 40.0},
        {"ph": "X", "name": "b", "cat": "send", "pid": 0, "tid": 1, "ts": 10.0, "dur": 40.0},
        {"ph": "X", "name": "c", "cat": "send", "pid": 0, "tid": 1, "ts": 45.0, "dur": 5.0}],
        "otherData": {"system": "ring8"}}
    plot.timeline(trace, str(tmp_path / "t.png"))
    ax = figures[0].axes[0]
    bars = sorted(ax.patches, key=lambda b: b.get_x())
    # a and b overlap: two sub-rows; c starts after a ends: back in a's sub-row
    ya, yb, yc = (b.get_y() for b in bars)
    assert ya != yb and yc == ya
    assert ax.get_xlabel() == "time (µs)"
    assert ax.get_title() == "ring8: ops per node and unit"
    fig = figures[0]
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1          # outside the data
    # milliseconds for a long trace, without an offset or a multiplier on the axis
    trace["traceEvents"][-1]["ts"] = 2e6
    plot.timeline(trace, str(tmp_path / "t2.png"))
    ax2 = figures[1].axes[0]
    assert ax2.get_xlabel() == "time (ms)"
    figures[1].canvas.draw()
    assert ax2.xaxis.get_offset_text().get_text() == ""


def test_a_run_on_memory_nodes_gives_them_rows_and_names_the_system(tmp_path, figures,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.toml").write_text(
        '[[ops]]\nname = "w"\nkind = "mem_write"\nnpu = "npu0"\nmem = "mem0"\nbytes = 65536\n'
        '[[ops]]\nname = "s"\nkind = "send"\nsrc = "npu0"\ndst = "npu1"\nbytes = 65536\n')
    res = CliRunner().invoke(main, ["run", "mcdla-8", "--set", "workload.kind=graph", "--set",
                                    "workload.file=ops.toml", "--trace", "t.json", "--json",
                                    "r.json", "-q"])
    assert res.exit_code == 0, res.output
    trace = json.loads((tmp_path / "t.json").read_text())
    tracks = plot.timeline(trace, str(tmp_path / "t.png"))
    labels = [t.get_text() for t in figures[0].axes[0].get_yticklabels()]
    assert "mem0 memory" in labels and "npu0 network" in labels
    assert len(tracks) == 2 and figures[0].axes[0].get_title().startswith("mcdla-8")
    # the link-utilisation drawing of the same run labels the nodes and names the system
    from pysim.config import from_resolved
    from pysim.network import compile_network
    result = json.loads((tmp_path / "r.json").read_text())
    cfg = from_resolved(result["config"])
    plot.link_utilisation(compile_network(cfg), cfg, result, str(tmp_path / "u.png"))
    ax = figures[1].axes[0]
    texts = {t.get_text() for t in ax.texts}
    assert {"npu0", "mem0", "npu7", "mem7"} <= texts
    assert ax.get_title().startswith("mcdla-8, op graph")


def test_points_of_two_configurations_are_not_averaged_as_seeds(tmp_path):
    """Two sweeps of different systems in one database (`--db` defaults to results.sqlite)
    would be averaged as if they were seeds of one: refused, naming the key they differ in;
    as a series it draws."""
    rows = []
    for kind, lat in (("mesh", 37.0), ("ring", 21.0)):
        for rate in (0.1, 0.2):
            r = row(rate, lat)
            r["hash"] += kind
            r["result"]["config"] = {**r["result"]["config"], "topology": {"kind": kind},
                                     "simulation": {"seed": 1}}
            rows.append(r)
    with pytest.raises(ConfigError, match=r"topology\.kind.*'mesh'.*'ring'"):
        plot.latency_load(rows, str(tmp_path / "l.png"))
    assert not (tmp_path / "l.png").exists()
    data = plot.latency_load(rows, str(tmp_path / "l.png"), series="topology.kind")
    assert data["mesh"]["y"] == [37.0, 37.0] and data["ring"]["y"] == [21.0, 21.0]
    from pysim.sweep import Store
    db = str(tmp_path / "r.sqlite")
    s = Store(db)
    for r in rows:
        s.put(r["hash"], r["params"], "done", r["result"], None, 0.1)
    s.close()
    res = CliRunner().invoke(main, ["plot", db, "--kind", "throughput", "-o",
                                    str(tmp_path / "t.png")])
    assert res.exit_code == 1 and "--series topology.kind" in res.output, res.output


def test_bars_of_two_configurations_are_not_averaged_as_seeds(tmp_path):
    """Speed-up and breakdown bars average a cell's points over seeds only: a key that is
    not the group, series or x but differs (a second sweep over network.vcs in the same
    database) is refused, naming it."""
    rows = []
    for vcs in (2, 8):
        for alg in ("ring", "tree"):
            cycles = 1000.0 * vcs + (0 if alg == "ring" else 500)
            rows.append(dict(hash=f"{vcs}{alg}", status="done", error=None,
                             params={"workload.algorithm": alg},
                             result={"collective_cycles": cycles, "iteration_cycles": cycles,
                                     "iteration_seconds": cycles * 1e-9,
                                     "compute_cycles": cycles, "config": {
                                         "_system": "ring8", "network": {"vcs": vcs},
                                         "workload": {"algorithm": alg, "bytes": 64}}}))
    with pytest.raises(ConfigError, match=r"network\.vcs \(2 and 8\)"):
        plot.speedup_bars(rows, str(tmp_path / "s.png"), "workload.bytes",
                          "workload.algorithm", "collective_cycles", "ring")
    with pytest.raises(ConfigError, match=r"network\.vcs \(2 and 8\)"):
        plot.breakdown(rows, str(tmp_path / "b.png"), "workload.algorithm")
    groups, data = plot.speedup_bars(rows[:2], str(tmp_path / "s.png"), "workload.bytes",
                                     "workload.algorithm", "collective_cycles", "ring")
    assert data["tree"] == [pytest.approx(2000 / 2500)]


@pytest.mark.parametrize("args, said", [
    (["--kind", "timeline", "--xlim", "5", "1"], "--xlim 5 1: expected finite limits"),
    (["--kind", "timeline", "--xlim", "nan", "1"], "--xlim nan 1: expected finite limits"),
    (["--kind", "timeline", "--ylim", "1", "1"], "--ylim 1 1: expected finite limits"),
    (["--kind", "topology"], "is a trace; --kind topology takes a config"),
])
def test_plot_refuses_limits_it_cannot_draw_and_a_json_as_a_config(tmp_path, args, said):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [], "otherData": {"system": "ring8"}}))
    res = CliRunner().invoke(main, ["plot", str(trace), *args, "-o", str(tmp_path / "x.png")])
    assert res.exit_code == 1 and said in res.output, res.output
    assert not (tmp_path / "x.png").exists()


def test_the_python_figures_do_not_overwrite_a_file_unless_forced(tmp_path):
    """Nothing the user wrote is overwritten without asking: pysim.plot's functions refuse an
    existing file (before drawing, naming it and force=True) and write over it with
    force=True; a missing folder is refused before drawing too."""
    rows = [row(0.1, 36), row(0.2, 40)]
    path = tmp_path / "l.png"
    path.write_text("mine")
    with pytest.raises(OSError, match=r"l\.png exists; pass force=True to overwrite it"):
        plot.latency_load(rows, str(path))
    assert path.read_text() == "mine"
    trace = {"traceEvents": [{"ph": "X", "pid": "npu0", "tid": "compute", "ts": 0, "dur": 1,
                              "name": "a", "cat": "compute"}]}
    with pytest.raises(OSError, match="exists"):
        plot.timeline(trace, str(path))
    assert path.read_text() == "mine"
    with pytest.raises(OSError, match="no directory"):
        plot.latency_load(rows, str(tmp_path / "nowhere" / "l.png"))
    plot.latency_load(rows, str(path), force=True)
    assert path.read_bytes().startswith(b"\x89PNG")
    plot.latency_load(rows, str(tmp_path / "new.svg"))
    assert (tmp_path / "new.svg").read_text().lstrip().startswith("<?xml")
    assert sorted(os.listdir(tmp_path)) == ["l.png", "new.svg"]      # (no temporary left)


@pytest.mark.parametrize("rows", ["rows", [1, 2], [{"params": {}}], {"params": {}}])
def test_rows_that_are_not_a_sweeps_are_refused_naming_what_was_given(tmp_path, rows):
    """pysim.plot's sweep figures take pysim.sweep's rows; anything else is a ConfigError
    naming the entry and what a row holds, not a TypeError from inside."""
    with pytest.raises(ConfigError, match=r"rows\[0\] = .*expected a sweep's row, a dict with "
                                          r"params, result, status and error"):
        plot.latency_load(rows, str(tmp_path / "l.png"))
    assert not (tmp_path / "l.png").exists()
