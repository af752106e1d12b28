"""The numpy array types of the columnar snapshot: node indexes, masks and integer columns."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["IndexArray", "IntArray", "MaskArray"]

IntArray = NDArray[np.int64]
MaskArray = NDArray[np.bool_]
IndexArray = NDArray[np.intp]
