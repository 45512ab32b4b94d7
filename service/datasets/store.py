"""Content-addressed storage of encoded dataset matrices (local directory backend).

Each dataset is one ``.npz`` file named by its content hash; it is written to a temporary file and renamed, so
a reader never sees half a file, and on read the hash is recomputed and checked. The matrices are private:
nothing here logs or returns values except to the job runner.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path

import numpy as np

from .encoding import EncodedDataset


class DatasetStoreError(Exception):
    """A stored dataset is missing or does not match its content hash."""


def _digest(X: np.ndarray, y: np.ndarray) -> str:
    hasher = hashlib.sha256()
    for array in (X, y):
        contiguous = np.ascontiguousarray(array, dtype=np.float64)
        hasher.update(str(contiguous.shape).encode())
        hasher.update(contiguous.tobytes())
    return hasher.hexdigest()


class LocalDatasetStore:
    """Datasets under ``root`` as ``<sha256 of X and y>.npz``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise DatasetStoreError("malformed storage key")
        return self.root / f"{key}.npz"

    def put(self, dataset: EncodedDataset) -> str:
        """Store ``dataset``'s matrix and labels; returns the storage key (idempotent for equal content)."""
        key = _digest(dataset.X, dataset.y)
        path = self._path(key)
        if path.exists():
            return key
        buffer = io.BytesIO()
        np.savez(buffer, X=np.asarray(dataset.X, dtype=np.float64), y=np.asarray(dataset.y, dtype=np.float64))
        with tempfile.NamedTemporaryFile(dir=self.root, suffix=".tmp", delete=False) as handle:
            handle.write(buffer.getvalue())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
        return key

    def get(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Load (X, y) and verify them against ``key``."""
        path = self._path(key)
        if not path.exists():
            raise DatasetStoreError("dataset data is not in the store (purged or never written)")
        with np.load(path, allow_pickle=False) as data:
            X, y = data["X"], data["y"]
        if _digest(X, y) != key:
            raise DatasetStoreError("stored dataset does not match its content hash")
        return X, y

    def delete(self, key: str) -> None:
        """Purge the data of ``key`` (the ledger keeps its entries)."""
        self._path(key).unlink(missing_ok=True)
