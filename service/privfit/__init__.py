"""privfit: differentially private model fitting as a service.

The import package is ``privfit``; its source lives in ``service/privfit/`` (``privfit.x.y`` is
``service/privfit/x/y.py``; setuptools finds it under ``service/``, see ``pyproject.toml``).
"""

__version__ = "0.1.0"
