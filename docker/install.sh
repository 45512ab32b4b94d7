#!/bin/sh
# The image's install step (docker/Dockerfile, builder stage), also run by docker/check.sh: a fresh virtual
# environment at $1 holding privfit installed (not editable) from the source tree at $2, dependencies from
# pyproject.toml only, and the solvers' kernels compiled (`privfit compile`).
set -eu
venv="$1"
src="$2"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet "$src[s3,dask]"   # the s3 and dask extras: profile "dask" of compose
"$venv/bin/privfit" --help >/dev/null
# the solvers' numba kernels compiled into NUMBA_CACHE_DIR (the image ships that cache: a fresh container's first fit
# loads them instead of compiling; privfit.solvers.warmup)
"$venv/bin/privfit" compile >/dev/null
