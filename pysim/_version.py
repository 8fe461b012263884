"""pysim's version: a leaf module, so that results can carry it without importing the package."""

__version__ = "0.1.0"
