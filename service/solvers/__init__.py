"""Private solvers and their building blocks (pure numpy/scipy; no web or DB imports, DESIGN §4).

- :mod:`privfit.solvers.losses`: convex GLM losses with public Lipschitz/smoothness constants.
- :mod:`privfit.solvers.geometry`: per-example clipping, L2-ball projection, intercept augmentation.
"""
