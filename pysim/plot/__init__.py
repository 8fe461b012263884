"""Figures (matplotlib, no screen needed): PNG, PDF or SVG chosen by the file extension.

    import pysim
    rows = pysim.sweep("mesh8x8", {"traffic.injection_rate": [0.1, 0.2, 0.3]})
    pysim.plot.latency_load(rows, "latency.png")

From a sweep's rows (`pysim.sweep(...)`, or `pysim.sweep.Store(db).rows()`): `latency_load`,
`throughput`, `collective`, `speedup_bars`, `breakdown` (pysim/plot/sweeps.py). From one run:
`link_utilisation` (a result's dict), `draw_topology` (a compiled network; both in
systems.py), `timeline` (a Chrome/Perfetto trace), `memory` (a result holding memory),
`jobs_cdf` (a job stream's result; all three in runs.py). Each writes the file and returns the
data it drew; a file that exists already is refused (OSError) before anything is drawn,
unless `force=True`. Points repeated over seeds (`simulation.seed` swept) are averaged, with 95%
confidence intervals as error bars.
"""
from pysim.plot._common import (CLIP, LABELS, SEED, check_breakdown, check_links,  # noqa: F401
                                check_result, check_rows, check_speedup, check_trace, mean_ci,
                                points, t975)
from pysim.plot.runs import check_timeline, jobs_cdf, memory, timeline  # noqa: F401
from pysim.plot.sweeps import (breakdown, collective, latency_load, speedup_bars,  # noqa: F401
                               throughput)
from pysim.plot.systems import (check_drawable, draw_topology, layout,  # noqa: F401
                                link_utilisation)
