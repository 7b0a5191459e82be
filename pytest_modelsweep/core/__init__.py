"""The ground floor: typed records, the metric table, statistics, settings, errors, secrets.

Nothing here imports a floor above it.
"""

__version__ = "0.1.0"
