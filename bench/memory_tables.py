"""The Markdown tables of a results JSON of bench/memory.py, as docs/memory.md shows them.

    python bench/memory.py --tables bench/results/memory.json
"""
import numpy as np


def tables(out):
    """Markdown tables of a results JSON (as docs/memory.md shows them)."""
    lines = []
    st = out["studies"]
    nan = float("nan")
    for key in ("mcdla", "mcdla_conv", "mcdla_dynamic", "mcdla_pcie16"):
        if key not in st:
            continue
        lines += [f"study {key}", "",
                  "| application | per NPU | DC-DLA (s) | HC-DLA (s) | MC-DLA (s) | MC over DC | "
                  "HC over DC | offloaded per NPU (GB) | policy chosen | every tensor in HBM "
                  "(s) |", "|---|---|---|---|---|---|---|---|---|---|"]
        sps = []
        for r in st[key]["rows"]:
            runs = r["runs"]
            t = {k: (f"{v['iteration_seconds']:.2f}" if v.get("fits") else "does not fit")
                 for k, v in runs.items()}
            sp = r.get("speedup", {})
            if "MC-DLA" in sp:
                sps.append(sp["MC-DLA"])
            ch = (runs["DC-DLA"].get("chosen") or {}).get("layers", r["layers"])

            def x(v, f="{:.2f}x"):
                return "-" if v is None or v != v else f.format(v)
            lines.append(f"| {r['model']} | {r['per_npu']} | {t['DC-DLA']} | "
                         f"{t.get('HC-DLA', '-')} | {t['MC-DLA']} | {x(sp.get('MC-DLA'))} | "
                         f"{x(sp.get('HC-DLA'))} | "
                         f"{x(runs['MC-DLA'].get('offloaded_gb_per_npu'), '{:.1f}')} | {ch} | "
                         f"{(r.get('ideal') or {}).get('iteration_seconds', nan):.2f} |")
        if sps:
            lines.append(f"| **mean** | | | | | **{np.mean(sps):.2f}x** (geometric "
                         f"{np.exp(np.mean(np.log(sps))):.2f}x) | | | | |")
        lines.append("")
    if "mcdla_sens" in st:
        lines += ["study mcdla_sens", "", "| application | per NPU | system | iteration (s) | "
                  "policy chosen | offloaded per NPU (GB) | MC-DLA over it |",
                  "|---|---|---|---|---|---|---|"]
        rows = st["mcdla_sens"]["rows"]
        for r in rows:
            mc = next((x for x in rows if x["model"] == r["model"] and
                       x["per_npu"] == r["per_npu"] and x["case"] == "MC-DLA"), None)
            v = r["run"]
            sp = (mc["run"]["iteration_seconds"] and v["iteration_seconds"] /
                  mc["run"]["iteration_seconds"]) if mc and v.get("fits") and \
                mc["run"].get("fits") else nan
            lines.append(f"| {r['model']} | {r['per_npu']} | {r['case']} | "
                         f"{v.get('iteration_seconds', nan):.2f} | "
                         f"{(v.get('chosen') or {}).get('layers')} | "
                         f"{v.get('offloaded_gb_per_npu', nan):.1f} | {sp:.2f}x |")
        lines.append("")
    if "vdnn" in st:
        lines += ["study vdnn", "", "| network | batch | oracle (s) | all | conv | dynamic | "
                  "peak HBM oracle / all / conv (GB) |", "|---|---|---|---|---|---|---|"]
        for r in st["vdnn"]["rows"]:
            runs = r["runs"]
            o = runs["oracle"]["iteration_seconds"]

            def cell(v):
                if not v.get("fits"):
                    return "does not fit"
                return f"{v['iteration_seconds']:.3f} s (+{100 * (v['iteration_seconds'] / o - 1):.0f}%)"
            dyn = runs["dynamic"]
            lines.append(f"| {r['model']} | {r['batch']} | {o:.3f} | {cell(runs['all'])} | "
                         f"{cell(runs['conv'])} | {cell(dyn)} ({(dyn.get('chosen') or {}).get('layers')}) | "
                         f"{runs['oracle']['peak_gb']['gpu0']:.1f} / "
                         f"{runs['all'].get('peak_gb', {}).get('gpu0', nan):.1f} / "
                         f"{runs['conv'].get('peak_gb', {}).get('gpu0', nan):.1f} |")
        lines.append("")
    if "karma" in st:
        lines += ["study karma", "", "| model | per GPU x GPUs | every tensor in HBM | KARMA | "
                  "offload (vDNN) | LMS | checkpointing | KARMA over the best other | "
                  "over the best swapping one | KARMA's plan (per GPU) | KARMA's prediction |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        means = {"best": [], "swapping": [], "checkpointing": []}
        for r in st["karma"]["rows"]:
            runs = r["runs"]
            t = {k: (f"{v['iteration_seconds']:.3f} s" if v.get("fits") else "does not fit")
                 for k, v in runs.items()}
            k = runs["karma"].get("plan") or {}
            spd = r.get("speedup_over_best")
            sws = r.get("speedup_over_swapping")
            for key in means:
                v = r.get(f"speedup_over_{key}")
                if v:
                    means[key].append(v)
            pc = (runs["karma"].get("chosen") or {}).get("predicted_cycles")
            pred = "-" if pc is None else f"{pc / 1e9:.3f} s"
            lines.append(f"| {r['model']} | {r['per_gpu']} x {r['gpus']} | {t['ideal']} | "
                         f"{t['karma']} | {t['offload']} | {t['lms']} | {t['recompute']} | "
                         f"{'-' if spd is None else f'{spd:.2f}x'} | "
                         f"{'-' if sws is None else f'{sws:.2f}x'} | {k.get('keep')} kept, "
                         f"{k.get('swap')} swapped, {k.get('recompute')} recomputed | "
                         f"{pred} |")
        for key, v in means.items():
            if v:
                lines.append(f"- KARMA over the {key} baseline: mean {np.mean(v):.2f}x, "
                             f"geometric {np.exp(np.mean(np.log(v))):.2f}x ({len(v)} models)")
        lines.append("")
    if "comet" in st:
        lines += ["study comet", "", "| model | batch | policy | peak HBM (GB) | iteration (s) |",
                  "|---|---|---|---|---|"]
        sweep = []
        for r in st["comet"]["rows"]:
            if "sweep" in r:
                sweep = r["sweep"]
                continue
            for p, v in r["runs"].items():
                lines.append(f"| {r['model']} | {r['batch']} | {p} | "
                             f"{v['peak_gb']['gpu0']:.2f} | {v['iteration_seconds']:.3f} |")
        lines += ["", "| model | batch | HBM peak saved | kept tensors saved | time |",
                  "|---|---|---|---|---|"]
        for r in st["comet"]["rows"]:
            if "sweep" not in r:
                lines.append(f"| {r['model']} | {r['batch']} | {r['memory_saved_x']:.1f}x | "
                             f"{r.get('kept_saved_x', nan):.1f}x | {r['time_cost_x']:.2f}x |")
        if sweep:
            lines += ["", "| ratio | peak HBM (GB) | HBM peak saved | kept tensors saved | "
                      "iteration (s) |", "|---|---|---|---|---|"]
            for v in sweep:
                lines.append(f"| {v['ratio']:g} | {v['peak_gb']:.2f} | "
                             f"{v['memory_saved_x']:.2f}x | {v['kept_saved_x']:.2f}x | "
                             f"{v['iteration_seconds']:.3f} |")
        lines.append("")
    if "lms" in st:
        lines += ["study lms", ""]
        for r in st["lms"]["rows"]:
            a = r["at"]
            lines.append(f"- {r['policy']}, workspace {r.get('workspace_mb', 0)} MiB per "
                         f"convolution: largest batch {r['largest_batch']}, "
                         f"{a.get('iteration_seconds', nan):.3f} s per iteration, "
                         f"peak {a.get('peak_gb')}, next batch fits: "
                         f"{(r.get('above') or {}).get('fits')}")
    return "\n".join(lines)
