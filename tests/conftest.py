import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from pysim.config import from_dict  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOLOGIES = os.path.join(ROOT, "topologies")


def make_cfg(**sections):
    """from_dict with sections given as keyword dicts: make_cfg(topology={...}, ...)."""
    return from_dict({k: v for k, v in sections.items() if v})


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
