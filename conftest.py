"""Root conftest: pytester for the plugin's own tests (pytest-modelsweep itself is an installed plugin)."""

pytest_plugins = ("pytester",)
