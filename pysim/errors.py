"""The errors and warnings every layer of pysim may raise: a leaf module that imports nothing
of pysim (and nothing compiled), so that any module can import it without a circle."""


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


class ModelError(ConfigError):
    """A model cannot be built or read: a shape that does not compose, a malformed file, an
    unknown model or operator. The message names the layer, node or line."""


class PysimWarning(UserWarning):
    """Something runs, but perhaps not as meant: the message says what is assumed."""


class GraphError(ConfigError):
    """An op graph is malformed: unknown node, cycle of dependencies, bad size, ..."""
