"""flash-attn (Dao-AILab/flash-attention 2.x) compatible functions.

Same names, argument names, defaults and tensor layouts as
``flash_attn.flash_attn_interface``, so ``from flashattn import
flash_attn_func`` can replace ``from flash_attn import flash_attn_func``.
Features flashattn already has map straight through (softmax_scale, causal,
window_size, softcap, deterministic, GQA/MQA, Sq != Sk; dropout_p and
alibi_slopes, see below); an argument that asks
for a feature flashattn does not have yet raises NotImplementedError naming
the argument.  Variable-length batches (cu_seqlens, the three *_varlen_*
functions, differentiable) and the KV cache (flash_attn_with_kvcache: in-place
append, cache_seqlens, paged block_table, split-KV decode, rotary_cos /
rotary_sin, cache_batch_idx, cache_leftpad) are supported.
As in flash-attn, flash_attn_with_kvcache does not update cache_seqlens.
v may have a head dim of its own (FlashAttention-3's hdim 192 / hdim_v 128,
and either side the wider): flash_attn_func and the varlen functions then
return out with v's head dim (not flash_attn_with_kvcache).

dropout_p / alibi_slopes (flash_attn_func, *_qkvpacked_func, *_kvpacked_func):
implemented by the CPU backend and, for CUDA tensors, by the sm80 kernels
(on Hopper ALiBi without dropout runs on the Hopper kernels, dropout on the
sm80 ones).  The varlen functions take both too, and
flash_attn_with_kvcache takes alibi_slopes ([nheads] or [batch, nheads],
batch = the number of sequences; a varlen call's dropout mask is that of a
padded batch of the same sequences).  Each call
with dropout draws a fresh Philox seed from torch's default generator
(torch.manual_seed makes it repeatable).  return_attn_probs=True returns
(out, softmax_lse, mask) where mask is flashattn's int32 dropout keep mask
[batch, nheads, seqlen_q, seqlen_k] (None without dropout) -- not flash-attn's
S_dmask: the attention probabilities are never materialised.
"""

from __future__ import annotations

import functools
from typing import Optional, Tuple

import torch

from ._common import resolve_options
from ._torch_fp8 import attention_fp8
from ._torch_ops import _fast_path_ok, attention
from . import _torch_varlen  # registers torch.ops.flashattn.varlen_* / kvcache_fwd
from ._torch_variants import attention_variants, dropout_seed

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_with_kvcache",
]


def _opts(softmax_scale, causal, window_size, softcap, deterministic) -> dict:
    # flash-attn reads any negative window side as unbounded and softcap <= 0 as off.
    left, right = (int(w) for w in window_size)
    return dict(softmax_scale=softmax_scale, causal=causal,
                window=(max(left, -1), max(right, -1)), softcap=max(float(softcap), 0.0),
                deterministic=deterministic)


def _unsupported(fn: str, return_attn_probs: bool) -> None:
    if return_attn_probs:
        raise NotImplementedError(
            f"{fn}: return_attn_probs=True is not supported by flashattn (it never materialises "
            "the attention matrix); use flashattn.attention(..., return_lse=True) for the "
            "log-sum-exp")


def _variants(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
              deterministic, return_attn_probs):
    """ALiBi / dropout / return_attn_probs through torch.ops.flashattn.fwd_variants."""
    o = _resolved(softmax_scale, causal, window_size, softcap)
    out, lse, mask = attention_variants(q, k, v, alibi_slopes=alibi_slopes,
                                        dropout_p=float(dropout_p), return_mask=return_attn_probs,
                                        deterministic=deterministic, **o)
    return (out, lse, mask) if return_attn_probs else out


def _wants_variants(dropout_p, alibi_slopes, return_attn_probs) -> bool:
    return bool(dropout_p) or alibi_slopes is not None or bool(return_attn_probs)


def _fp8(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
         return_attn_probs, q_descale, k_descale, v_descale, fn="flash_attn_func", **varlen):
    """float8_e4m3fn inputs (FlashAttention-3's fp8 forward): bfloat16 out;
    varlen: cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k."""
    if dropout_p or alibi_slopes is not None or return_attn_probs or softcap > 0:
        raise NotImplementedError(
            f"{fn}: float8_e4m3fn inputs take no dropout_p, alibi_slopes, softcap or "
            "return_attn_probs")
    return attention_fp8(q, k, v, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                         softmax_scale=softmax_scale, causal=causal,
                         window=tuple(max(int(w), -1) for w in window_size), **varlen)


def _no_descale(fn, q, q_descale, k_descale, v_descale):
    if q_descale is not None or k_descale is not None or v_descale is not None:
        raise ValueError(f"{fn}: q_descale / k_descale / v_descale are for "
                         f"torch.float8_e4m3fn inputs, q is {q.dtype}")


def flash_attn_func(q, k, v, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                    causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                    softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
                    return_attn_probs: bool = False, *, q_descale=None, k_descale=None,
                    v_descale=None):
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k,
    headdim), nheads % nheads_k == 0, headdim 1..256 (one that is not a
    multiple of 8 runs on zero-padded copies).  Returns out (batch, seqlen_q,
    nheads, headdim).  Causal masking is aligned to the bottom-right corner.

    FP8 (FlashAttention-3's keywords): torch.float8_e4m3fn q, k, v with
    optional q_descale / k_descale / v_descale (per-tensor: a float or a
    one-element tensor, not FA3's per-(batch, head) tensors) give a bfloat16
    out, forward only (``flashattn.attention_fp8``)."""
    if q.dtype == torch.float8_e4m3fn:
        return _fp8(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                    return_attn_probs, q_descale, k_descale, v_descale)
    _no_descale("flash_attn_func", q, q_descale, k_descale, v_descale)
    if _wants_variants(dropout_p, alibi_slopes, return_attn_probs):
        return _variants(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                         alibi_slopes, deterministic, return_attn_probs)
    return attention(q, k, v, **_opts(softmax_scale, causal, window_size, softcap, deterministic))


def flash_attn_qkvpacked_func(qkv, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                              causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                              softcap: float = 0.0, alibi_slopes=None,
                              deterministic: bool = False, return_attn_probs: bool = False):
    """qkv: (batch, seqlen, 3, nheads, headdim).  Q, K and V are read in place
    (strided views, no copy)."""
    if qkv.dim() != 5 or qkv.shape[2] != 3:
        raise ValueError(f"qkv: expected shape (batch, seqlen, 3, nheads, headdim), got {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(2)
    if _wants_variants(dropout_p, alibi_slopes, return_attn_probs):
        return _variants(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                         alibi_slopes, deterministic, return_attn_probs)
    return attention(q, k, v, **_opts(softmax_scale, causal, window_size, softcap, deterministic))


def flash_attn_kvpacked_func(q, kv, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                             causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                             softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
                             return_attn_probs: bool = False):
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2, nheads_k,
    headdim)."""
    if kv.dim() != 5 or kv.shape[2] != 2:
        raise ValueError(f"kv: expected shape (batch, seqlen_k, 2, nheads_k, headdim), got {tuple(kv.shape)}")
    k, v = kv.unbind(2)
    if _wants_variants(dropout_p, alibi_slopes, return_attn_probs):
        return _variants(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                         alibi_slopes, deterministic, return_attn_probs)
    return attention(q, k, v, **_opts(softmax_scale, causal, window_size, softcap, deterministic))


def _resolved(softmax_scale, causal, window_size, softcap) -> dict:
    o = _opts(softmax_scale, causal, window_size, softcap, False)
    return resolve_options(o["causal"], o["softmax_scale"], o["window"], o["softcap"])


@functools.lru_cache(maxsize=256)
def _resolved_cached(softmax_scale, causal, window_size, softcap) -> dict:
    return _resolved(softmax_scale, causal, window_size, softcap)


def _resolved_fast(softmax_scale, causal, window_size, softcap) -> dict:
    """_resolved, memoised on hashable arguments (the per-token decode loop
    passes the same options every call). The dict is shared: read only."""
    try:
        return _resolved_cached(softmax_scale, causal, tuple(window_size), softcap)
    except TypeError:  # unhashable or not a pair: the plain path (and its errors)
        return _resolved(softmax_scale, causal, window_size, softcap)


def _i32(name: str, t, device) -> torch.Tensor:
    if type(t) is torch.Tensor and t.dtype is torch.int32 and t.device == device:
        return t  # already int32 on q's device: skip .to()'s dispatch
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of int32, got {type(t).__name__}")
    return t.to(device=device, dtype=torch.int32)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                           causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                           softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table=None, *, q_descale=None,
                           k_descale=None, v_descale=None):
    """q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim);
    cu_seqlens_q / cu_seqlens_k: int32 (batch + 1,), cumulative lengths from 0;
    max_seqlen_q / max_seqlen_k: the longest sequence.  Rows past
    cu_seqlens[-1] (a buffer sized for more tokens) come out as 0, with zero
    gradients.  Causal masking is bottom-right aligned per sequence.
    alibi_slopes: optional fp32 (nheads,) or (batch, nheads), batch =
    len(cu_seqlens_q) - 1.  dropout_p: as flash_attn_func's, a fresh seed
    per call from torch's generator; the keep mask of sequence b is that of
    batch entry b of a padded call (rows and keys counted within the
    sequence).  Returns out (total_q, nheads, headdim).
    Differentiable in q, k, v.  FP8: torch.float8_e4m3fn q, k, v with the
    descale keywords, as flash_attn_func (bfloat16 out, forward only)."""
    _unsupported("flash_attn_varlen_func", return_attn_probs)
    if block_table is not None:
        raise NotImplementedError(
            "flash_attn_varlen_func: block_table (paged KV) is supported by flash_attn_with_kvcache, "
            "not by the varlen function yet; pass block_table=None")
    if q.dtype == torch.float8_e4m3fn:
        return _fp8(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                    return_attn_probs, q_descale, k_descale, v_descale, "flash_attn_varlen_func",
                    cu_seqlens_q=_i32("cu_seqlens_q", cu_seqlens_q, q.device),
                    cu_seqlens_k=_i32("cu_seqlens_k", cu_seqlens_k, q.device),
                    max_seqlen_q=int(max_seqlen_q), max_seqlen_k=int(max_seqlen_k))
    _no_descale("flash_attn_varlen_func", q, q_descale, k_descale, v_descale)
    seed = dropout_seed(dropout_p)
    o = _resolved(softmax_scale, causal, window_size, softcap)
    out, _ = _torch_varlen.varlen_forward(
        q, k, v, _i32("cu_seqlens_q", cu_seqlens_q, q.device), _i32("cu_seqlens_k", cu_seqlens_k, q.device),
        int(max_seqlen_q), int(max_seqlen_k), o["softmax_scale"], o["causal"], o["window_left"],
        o["window_right"], o["softcap"], bool(deterministic), alibi_slopes, float(dropout_p), seed, 0)
    return out


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p: float = 0.0,
                                     softmax_scale: Optional[float] = None, causal: bool = False,
                                     window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                                     alibi_slopes=None, deterministic: bool = False,
                                     return_attn_probs: bool = False):
    """qkv: (total, 3, nheads, headdim), read in place."""
    if qkv.dim() != 4 or qkv.shape[1] != 3:
        raise ValueError(f"qkv: expected shape (total, 3, nheads, headdim), got {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p,
                                  softmax_scale, causal, window_size, softcap, alibi_slopes,
                                  deterministic, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                                    causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                                    softcap: float = 0.0, alibi_slopes=None,
                                    deterministic: bool = False, return_attn_probs: bool = False):
    """q: (total_q, nheads, headdim); kv: (total_k, 2, nheads_k, headdim)."""
    if kv.dim() != 4 or kv.shape[1] != 2:
        raise ValueError(f"kv: expected shape (total_k, 2, nheads_k, headdim), got {tuple(kv.shape)}")
    k, v = kv.unbind(1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale: Optional[float] = None,
                            causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                            softcap: float = 0.0, rotary_interleaved: bool = True,
                            alibi_slopes=None, num_splits: int = 0,
                            return_softmax_lse: bool = False):
    """q: (batch, seqlen_q, nheads, headdim), headdim a multiple of 8 up to 256
    (the cache is read in place).  k_cache / v_cache: (batch,
    capacity, nheads_k, headdim), or (num_pages, page_size, nheads_k, headdim)
    with block_table int32 (batch, max_pages) (page_size a multiple of 16).
    k, v: optional (batch, seqlen_new, nheads_k, headdim), written into the
    caches in place at cache_seqlens before the attention.  cache_seqlens: int
    or int32 (batch,), the tokens already cached; NOT updated here (as in
    flash-attn: add seqlen_new yourself).  Causal is bottom-right aligned.
    num_splits: split-KV pieces (0 = heuristic).  alibi_slopes: optional fp32
    (nheads,) or (batch, nheads), the bias -slope * |i + Sk - Sq - j| over the
    Sk = cache_seqlens + seqlen_new keys.  cache_batch_idx: optional int32
    (batch,), the cache entry of each sequence (distinct when appending; not
    with block_table).  cache_leftpad: optional int32 (batch,), the first
    cache row of each sequence (keys [cache_leftpad, cache_seqlens +
    seqlen_new); not with block_table).  rotary_cos / rotary_sin: optional
    (seqlen_ro, rotary_dim / 2) in q's dtype (needs k, v): k is rotated at
    positions cache_seqlens + i as it is appended, q at cache_seqlens + i when
    causal or windowed, else at cache_seqlens; rotary_interleaved pairs
    dimensions (2i, 2i+1) (GPT-J) instead of (i, i + rotary_dim / 2)
    (GPT-NeoX); on CUDA rotary_dim is a multiple of 16.  Returns out, or (out,
    softmax_lse (batch, nheads, seqlen_q)) with return_softmax_lse."""
    B = q.shape[0]
    if cache_seqlens is None:
        if block_table is not None:
            raise ValueError("cache_seqlens: required with a paged cache (block_table)")
        cache_seqlens = k_cache.shape[1] - (0 if k is None else k.shape[1])
    dev = q.device
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((B,), cache_seqlens, dtype=torch.int32, device=dev)
    cache_seqlens = _i32("cache_seqlens", cache_seqlens, dev)
    if block_table is not None:
        block_table = _i32("block_table", block_table, dev)
    if cache_batch_idx is not None:
        cache_batch_idx = _i32("cache_batch_idx", cache_batch_idx, dev)
    if cache_leftpad is not None:
        cache_leftpad = _i32("cache_leftpad", cache_leftpad, dev)
    o = _resolved_fast(softmax_scale, causal, window_size, softcap)
    # Plain eager tensors skip the custom-op dispatch (same impl; see _torch_ops._fast_path_ok).
    fn = _torch_varlen.kvcache_impl if _fast_path_ok(q, k_cache, v_cache) else torch.ops.flashattn.kvcache_fwd
    out, lse = fn(q, k_cache, v_cache, cache_seqlens, block_table, k, v, o["softmax_scale"], o["causal"],
                  o["window_left"], o["window_right"], o["softcap"], int(num_splits), alibi_slopes,
                  cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, bool(rotary_interleaved))
    return (out, lse) if return_softmax_lse else out
