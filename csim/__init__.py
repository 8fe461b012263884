"""pysim's compiled core. Private: use the `pysim` package, not this one.

`csim` imports nothing from `pysim`; it is handed flat numpy arrays and hands back counters.
"""
