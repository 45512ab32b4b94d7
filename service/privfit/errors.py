"""The error every pure layer (privacy, solvers, datasets) raises for a bad public parameter.

It names the parameter, so the API layer can turn it into a 422 problem+json pointing at the right field.
"""

from __future__ import annotations


class ParameterError(ValueError):
    """A public parameter is outside its domain; ``parameter`` names it and the message says why."""

    def __init__(self, parameter: str, message: str) -> None:
        self.parameter = parameter
        super().__init__(f"{parameter}: {message}")
