"""Argument handling shared by the NumPy and torch front ends."""

from __future__ import annotations

import math
from typing import Optional, Sequence


def resolve_options(causal: bool, softmax_scale: Optional[float], window: Sequence[int],
                    softcap: float) -> dict:
    """Validate the Python-level options and return fa_options fields.

    softmax_scale None -> 0.0, which the C library reads as 1/sqrt(head_dim)
    (computed there, so Python and C callers get bit-identical scales).
    """
    if softmax_scale is None:
        scale = 0.0
    else:
        scale = float(softmax_scale)
        if scale == 0.0 or not math.isfinite(scale):
            raise ValueError(
                f"softmax_scale: expected a finite nonzero number or None (= 1/sqrt(head_dim)), got {softmax_scale}")
    try:
        left, right = (int(w) for w in window)
    except (TypeError, ValueError):
        raise ValueError(f"window: expected a pair (left, right) of ints, -1 = unbounded; got {window!r}") from None
    if left < -1 or right < -1:
        raise ValueError(f"window: expected entries >= -1 (-1 = unbounded), got {(left, right)}")
    cap = float(softcap)
    if cap < 0 or not math.isfinite(cap):
        raise ValueError(f"softcap: expected a finite number >= 0 (0 disables), got {softcap}")
    return dict(softmax_scale=scale, softcap=cap, window_left=left, window_right=right,
                causal=bool(causal))
