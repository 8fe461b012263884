"""Build the compiled core (csim/) with one set of Cython directives.

CSIM_DEBUG=1 turns bounds/wraparound checks on and builds with -O0 -g.
"""
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

DEBUG = os.environ.get("CSIM_DEBUG", "0") not in ("", "0")

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": not DEBUG,
    "initializedcheck": DEBUG,
    "nonecheck": DEBUG,
}
CFLAGS = ["-O0", "-g"] if DEBUG else ["-O3"]

extensions = [
    Extension(
        "csim._engine",
        ["csim/_engine.pyx"],
        include_dirs=[np.get_include(), "csim"],
        extra_compile_args=CFLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("CSIM_DEBUG", "1" if DEBUG else "0")],
    ),
]

# Every package under pysim/ is found; the shipped systems live at the top of the repository
# in topologies/ and are installed as pysim/topologies/*.toml (pysim.systems finds them in either
# place).
setup(
    packages=find_packages(include=["pysim", "pysim.*", "csim"]) + ["pysim.topologies"],
    package_dir={"pysim.topologies": "topologies"},
    py_modules=["pysim_entry"],     # the console script's entry point (see its docstring)
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES),
)
