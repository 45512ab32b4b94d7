"""Fits beyond one machine's memory: datasets held by partitions in the parquet store, read and reduced where a
Dask cluster runs (issue 39). :mod:`privfit.scaleout.dask_rows` computes a fit's clipped gradient sums partition by
partition on the workers."""
