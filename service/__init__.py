"""privfit: differentially private model fitting as a service.

The import package is ``privfit``; its source lives in ``service/`` (see ``pyproject.toml``).
"""

__version__ = "0.1.0"
