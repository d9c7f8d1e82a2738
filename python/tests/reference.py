"""Independent NumPy attention for the tests: the textbook (unfused) algorithm.

``attention_ref`` runs in float64: the oracle.  ``attention_naive`` runs the
same unfused algorithm the way a kernel in the input dtype would (fp32
accumulation; P, and dS in the backward, rounded to the input dtype before
they meet the next matmul): its error against the oracle sets the tolerance
of the correctness rule in DESIGN.md:

    max|out - ref| <= 2 * max|naive - ref| + atol

Shares nothing with libflashattn, not even the mask rule.
"""

from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def visible_mask(sq, sk, causal, window):
    """[sq, sk] bool: query i sees key j.  Bottom-right aligned."""
    left, right = window
    if causal:  # causal is the window's right edge at the diagonal
        right = 0
    i = np.arange(sq)[:, None] + (sk - sq)  # the key index on query i's diagonal
    j = np.arange(sk)[None, :]
    m = np.ones((sq, sk), dtype=bool)
    if left >= 0:
        m &= j >= i - left
    if right >= 0:
        m &= j <= i + right
    return m


def _expand_kv(x, hq):
    return np.repeat(x, hq // x.shape[2], axis=2)


def _scores(q, k, scale, softcap, acc):
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(acc), k.astype(acc)) * acc(scale)
    raw = s
    if softcap:
        s = acc(softcap) * np.tanh(s / acc(softcap))
    return raw, s


def _softmax(s, mask, acc):
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m_safe)
    l = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(l > 0, e / np.where(l > 0, l, 1), 0).astype(acc)
        lse = np.where(l > 0, m_safe + np.log(np.where(l > 0, l, 1)), -np.inf)
    return p, lse[..., 0]


def attention_ref(q, k, v, dout=None, *, scale=None, causal=False, window=(-1, -1), softcap=0.0):
    """float64 forward (and backward when dout is given).

    Returns (out, lse) or (out, lse, dq, dk, dv), all float64; lse [B, Hq, Sq]."""
    return _attention(q, k, v, dout, scale, causal, window, softcap, np.float64, None)


def attention_naive(q, k, v, dout=None, *, scale=None, causal=False, window=(-1, -1), softcap=0.0):
    """The unfused algorithm in q's dtype with fp32 accumulation (P and dS
    rounded to the dtype before the matmuls they feed); results in q's dtype."""
    dt = q.dtype
    return _attention(q, k, v, dout, scale, causal, window, softcap, np.float32, dt)


def _attention(q, k, v, dout, scale, causal, window, softcap, acc, rnd):
    B, Sq, Hq, D = q.shape
    Sk = k.shape[1]
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    rd = (lambda x: x.astype(rnd).astype(acc)) if rnd is not None else (lambda x: x)
    ke, ve = _expand_kv(k, Hq), _expand_kv(v, Hq)
    mask = visible_mask(Sq, Sk, causal, window)
    raw, s = _scores(q, ke, scale, softcap, acc)
    p, lse = _softmax(s, mask, acc)
    out = np.einsum("bhqk,bkhd->bqhd", rd(p), ve.astype(acc))
    out_r = rd(out)
    res = [out_r if rnd is None else out.astype(rnd), lse.astype(np.float32) if rnd is not None else lse]
    if dout is None:
        return tuple(res)
    do = dout.astype(acc)
    # dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dO * O)); softcap chain rule.
    dv_e = np.einsum("bhqk,bqhd->bkhd", rd(p), do)
    dp = np.einsum("bqhd,bkhd->bhqk", do, ve.astype(acc))
    delta = np.einsum("bqhd,bqhd->bhq", do, out_r)[..., None]
    ds = p * (dp - delta)
    if softcap:
        t = np.tanh(raw / acc(softcap))
        ds = ds * (1 - t * t)
    ds = rd(ds)
    dq = np.einsum("bhqk,bkhd->bqhd", ds, ke.astype(acc)) * acc(scale)
    dk_e = np.einsum("bhqk,bqhd->bkhd", ds, q.astype(acc)) * acc(scale)
    g = Hq // k.shape[2]
    dk = dk_e.reshape(B, Sk, k.shape[2], g, D).sum(axis=3)
    dv = dv_e.reshape(B, Sk, k.shape[2], g, D).sum(axis=3)
    if rnd is not None:
        dq, dk, dv = dq.astype(rnd), dk.astype(rnd), dv.astype(rnd)
    return tuple(res) + (dq, dk, dv)
