"""flash-attn (Dao-AILab/flash-attention 2.x) compatible functions.

Same names, argument names, defaults and tensor layouts as
``flash_attn.flash_attn_interface``, so ``from flashattn import
flash_attn_func`` can replace ``from flash_attn import flash_attn_func``.
Features flashattn already has map straight through (softmax_scale, causal,
window_size, softcap, deterministic, GQA/MQA, Sq != Sk); an argument that asks
for a feature flashattn does not have yet raises NotImplementedError naming
the argument.  Variable-length (cu_seqlens) batches and the KV cache are not
implemented yet: those functions keep flash-attn's signatures but raise.
"""

from __future__ import annotations

from typing import Optional, Tuple

from ._torch_ops import attention

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


def _unsupported(fn: str, dropout_p: float, alibi_slopes, return_attn_probs: bool) -> None:
    if dropout_p:
        raise NotImplementedError(
            f"{fn}: dropout_p={dropout_p} is not supported by flashattn yet (attention dropout "
            "is a later feature); pass dropout_p=0.0")
    if alibi_slopes is not None:
        raise NotImplementedError(
            f"{fn}: alibi_slopes is not supported by flashattn yet (ALiBi is a later feature); "
            "pass alibi_slopes=None")
    if return_attn_probs:
        raise NotImplementedError(
            f"{fn}: return_attn_probs=True is not supported by flashattn (it never materialises "
            "the attention matrix); use flashattn.attention(..., return_lse=True) for the "
            "log-sum-exp")


def flash_attn_func(q, k, v, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                    causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                    softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
                    return_attn_probs: bool = False):
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k,
    headdim), nheads % nheads_k == 0.  Returns out (batch, seqlen_q, nheads,
    headdim).  Causal masking is aligned to the bottom-right corner."""
    _unsupported("flash_attn_func", dropout_p, alibi_slopes, return_attn_probs)
    return attention(q, k, v, **_opts(softmax_scale, causal, window_size, softcap, deterministic))


def flash_attn_qkvpacked_func(qkv, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                              causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                              softcap: float = 0.0, alibi_slopes=None,
                              deterministic: bool = False, return_attn_probs: bool = False):
    """qkv: (batch, seqlen, 3, nheads, headdim).  Q, K and V are read in place
    (strided views, no copy)."""
    _unsupported("flash_attn_qkvpacked_func", dropout_p, alibi_slopes, return_attn_probs)
    if qkv.dim() != 5 or qkv.shape[2] != 3:
        raise ValueError(f"qkv: expected shape (batch, seqlen, 3, nheads, headdim), got {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(2)
    return attention(q, k, v, **_opts(softmax_scale, causal, window_size, softcap, deterministic))


def flash_attn_kvpacked_func(q, kv, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                             causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                             softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
                             return_attn_probs: bool = False):
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2, nheads_k,
    headdim)."""
    _unsupported("flash_attn_kvpacked_func", dropout_p, alibi_slopes, return_attn_probs)
    if kv.dim() != 5 or kv.shape[2] != 2:
        raise ValueError(f"kv: expected shape (batch, seqlen_k, 2, nheads_k, headdim), got {tuple(kv.shape)}")
    k, v = kv.unbind(2)
    return attention(q, k, v, **_opts(softmax_scale, causal, window_size, softcap, deterministic))


_VARLEN = ("variable-length batches (cu_seqlens / max_seqlen) are not implemented in flashattn "
           "yet; pad to (batch, seqlen, nheads, headdim) and call flash_attn_func, or wait for "
           "the varlen feature")


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                           causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                           softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table=None):
    """Not implemented yet: flashattn has no variable-length (varlen) support."""
    raise NotImplementedError(f"flash_attn_varlen_func: {_VARLEN}")


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p: float = 0.0,
                                     softmax_scale: Optional[float] = None, causal: bool = False,
                                     window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                                     alibi_slopes=None, deterministic: bool = False,
                                     return_attn_probs: bool = False):
    """Not implemented yet: flashattn has no variable-length (varlen) support."""
    raise NotImplementedError(f"flash_attn_varlen_qkvpacked_func: {_VARLEN}")


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                                    causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                                    softcap: float = 0.0, alibi_slopes=None,
                                    deterministic: bool = False, return_attn_probs: bool = False):
    """Not implemented yet: flashattn has no variable-length (varlen) support."""
    raise NotImplementedError(f"flash_attn_varlen_kvpacked_func: {_VARLEN}")


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale: Optional[float] = None,
                            causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                            softcap: float = 0.0, rotary_interleaved: bool = True,
                            alibi_slopes=None, num_splits: int = 0,
                            return_softmax_lse: bool = False):
    """Not implemented yet: flashattn has no KV-cache (decode) support."""
    raise NotImplementedError(
        "flash_attn_with_kvcache: the KV cache (in-place cache append, cache_seqlens, paged "
        "block_table, rotary, split-KV decode) is not implemented in flashattn yet; for "
        "attention over a full cache call flash_attn_func(q, k_cache, v_cache, causal=...)")
