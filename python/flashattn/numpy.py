"""flashattn on NumPy arrays (CPU).

    out, lse = flashattn.numpy.forward(q, k, v, causal=True)
    dq, dk, dv = flashattn.numpy.backward(dout, q, k, v, out, lse, causal=True)

Arrays are [batch, seqlen, heads, head_dim] (BSHD), float32 or float16, or
bfloat16 when ``ml_dtypes`` is importable.  Any strides are passed through as
they are when the last axis is contiguous and every stride is a non-negative
multiple of the item size; other arrays are copied to C order first.  ``out``
has q's dtype, ``lse`` is float32 [batch, heads_q, seqlen_q] (natural log,
-inf for a row that sees no key).
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import _capi
from ._common import resolve_options

__all__ = ["forward", "backward", "supported_dtypes"]

_DTYPES = {np.dtype(np.float32): _capi.FA_F32, np.dtype(np.float16): _capi.FA_F16}
try:  # optional bfloat16 through ml_dtypes
    import ml_dtypes as _ml_dtypes  # type: ignore

    _DTYPES[np.dtype(_ml_dtypes.bfloat16)] = _capi.FA_BF16
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None


def supported_dtypes() -> tuple:
    return tuple(_DTYPES)


def _view(name: str, a: np.ndarray, keep: list) -> Tuple[np.ndarray, tuple]:
    """(array actually used, its 13 packed fa_tensor values)."""
    fa_dtype = _DTYPES.get(getattr(a, "dtype", None))
    if fa_dtype is None or not isinstance(a, np.ndarray) or a.ndim != 4:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
        if fa_dtype is None:
            names = ", ".join(str(d) for d in _DTYPES)
            raise _capi.InvalidArgumentError(
                f"{name}: dtype {a.dtype} is not supported; expected one of {names}")
        raise _capi.InvalidArgumentError(
            f"{name}: expected 4 dimensions [batch, seqlen, heads, head_dim], got shape {a.shape}")
    item = a.itemsize
    b, s, h, d = a.shape
    if a.flags.c_contiguous or a.size == 0:
        # Empty arrays get zero strides from NumPy; any strides do, nothing is read.
        st = (s * h * d, h * d, d, 1)
    else:
        st = a.strides
        if st[0] < 0 or st[1] < 0 or st[2] < 0 or st[0] % item or st[1] % item or st[2] % item \
                or (d > 1 and st[3] != item):
            a = np.ascontiguousarray(a)
            st = (s * h * d, h * d, d, 1)
        else:
            st = (st[0] // item, st[1] // item, st[2] // item, 1)
    keep.append(a)
    return a, (a.ctypes.data, fa_dtype, _capi.FA_CPU, 0, 4, b, s, h, d) + st


def _lse_values(lse: np.ndarray) -> tuple:
    b, h, sq = lse.shape
    return (lse.ctypes.data, _capi.FA_F32, _capi.FA_CPU, 0, 3, b, h, sq, 0, h * sq, sq, 1, 0)


def _out_view(name: str, a: Optional[np.ndarray], shape: tuple, dtype, keep: list):
    if a is None:
        a = np.empty(shape, dtype=dtype)
    elif not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype:
        raise _capi.InvalidArgumentError(
            f"{name}: expected a numpy.ndarray of shape {shape} and dtype {np.dtype(dtype)}")
    elif not a.flags.writeable:
        raise _capi.InvalidArgumentError(f"{name}: array is read-only")
    _, t = _view(name, a, keep)
    if keep[-1] is not a:  # _view copied it: results would land in the copy
        raise _capi.InvalidArgumentError(f"{name}: the last axis must be contiguous")
    return a, t


def forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = False,
            softmax_scale: Optional[float] = None, window=(-1, -1), softcap: float = 0.0,
            out: Optional[np.ndarray] = None, lse: Optional[np.ndarray] = None):
    """Attention forward on CPU.  Returns ``(out, lse)``; ``out``/``lse`` may be
    given to write into (out: q's shape with v's head dim, q's dtype, last axis contiguous; lse:
    float32 [B, Hq, Sq] C-contiguous)."""
    opts = resolve_options(causal, softmax_scale, window, softcap)
    keep: list = []
    q, tq = _view("q", q, keep)
    k, tk = _view("k", k, keep)
    v, tv = _view("v", v, keep)
    B, Sq, Hq, _ = q.shape
    out, to = _out_view("out", out, (B, Sq, Hq, v.shape[3]), q.dtype, keep)
    if lse is None:
        lse = np.empty((B, Hq, Sq), dtype=np.float32)
    elif not (isinstance(lse, np.ndarray) and lse.shape == (B, Hq, Sq) and lse.dtype == np.float32
              and lse.flags.c_contiguous and lse.flags.writeable):
        raise _capi.InvalidArgumentError(f"lse: expected a writable C-contiguous float32 array of shape {(B, Hq, Sq)}")
    keep.append(lse)
    _capi.forward_packed(*tq, *tk, *tv, *to, *_lse_values(lse), *_capi.options_tuple(**opts))
    return out, lse


def backward(dout: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, out: np.ndarray,
             lse: np.ndarray, *, causal: bool = False, softmax_scale: Optional[float] = None,
             window=(-1, -1), softcap: float = 0.0, deterministic: bool = False,
             dq: Optional[np.ndarray] = None, dk: Optional[np.ndarray] = None,
             dv: Optional[np.ndarray] = None):
    """Attention backward on CPU: gradients of ``sum(out * dout)`` with respect
    to q, k, v, given the forward's ``out`` and ``lse``.  The options must be
    the forward's.  Returns ``(dq, dk, dv)`` with the dtypes of q, k, v."""
    opts = resolve_options(causal, softmax_scale, window, softcap)
    keep: list = []
    q, tq = _view("q", q, keep)
    k, tk = _view("k", k, keep)
    v, tv = _view("v", v, keep)
    out, to = _view("out", out, keep)
    dout, tdo = _view("dout", dout, keep)
    if not isinstance(lse, np.ndarray) or lse.dtype != np.float32 or lse.ndim != 3:
        raise _capi.InvalidArgumentError(
            "lse: expected the float32 [batch, heads_q, seqlen_q] array returned by forward()")
    lse = np.ascontiguousarray(lse)
    keep.append(lse)
    dq, tdq = _out_view("dq", dq, q.shape, q.dtype, keep)
    dk, tdk = _out_view("dk", dk, k.shape, k.dtype, keep)
    dv, tdv = _out_view("dv", dv, v.shape, v.dtype, keep)
    _capi.backward_packed(*tq, *tk, *tv, *to, *tdo, *_lse_values(lse), *tdq, *tdk, *tdv,
                          *_capi.options_tuple(deterministic=deterministic, **opts))
    return dq, dk, dv
