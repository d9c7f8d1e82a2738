"""torch custom ops for variable-length batches and the KV cache, over the C
ABI's fa_forward_varlen / fa_backward_varlen / fa_forward_kvcache:

  torch.ops.flashattn.varlen_fwd / varlen_bwd  (autograd through register_autograd)
  torch.ops.flashattn.kvcache_fwd              (mutates k_cache / v_cache: the append)

Each has a fake implementation (shapes only), so torch.compile traces them as
single graph nodes. Packed tensors are [total_tokens, heads, head_dim]; lse
is float32 [heads_q, total_q] (varlen) or [batch, heads_q, seqlen_q]
(kvcache). Index tensors are int32 on the device of q (converted if not).
alibi_slopes (optional, fp32 [heads_q] or [batch, heads_q], batch = the
number of sequences) adds the ALiBi bias as flash_attn_func's does; the
varlen ops' dropout_p / seed / offset drop entries of P as the padded
variants do (the generator's batch index is the sequence, its rows and keys
the sequence's own), and the backward regenerates the same mask.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _capi
from ._torch_ops import _DTYPES, _device, _fast_path_ok, _raw_stream, no_gradient_outputs
from ._torch_variants import _slopes_arg, _u64


_PAD = (0, 0, 0, 0)


def _tvals(name: str, t: Tensor, ndim: int, index: bool = False) -> Tuple[Tensor, tuple]:
    """(tensor used, its 13 packed fa_tensor values: _capi.TENSOR_FORMAT)
    after the checks: a torch.Tensor of `ndim` dimensions on a supported
    device, int32 (made contiguous) when `index`, else float32 / float16 /
    bfloat16 with its last dimension made contiguous if it is not. Hot path
    (decode): shape and strides read once, no ctypes structure filled field
    by field."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if index:
        if t.dtype != torch.int32:
            raise _capi.InvalidArgumentError(f"{name}: expected dtype torch.int32, got {t.dtype}")
        t = t.contiguous()
        code = _capi.FA_I32
    else:
        code = _DTYPES.get(t.dtype)
        if code is None:
            raise _capi.InvalidArgumentError(
                f"{name}: dtype {t.dtype} is not supported; expected float32, float16 or bfloat16")
    shape = t.shape
    if len(shape) != ndim:
        raise _capi.InvalidArgumentError(
            f"{name}: expected {ndim} dimensions, got shape {tuple(shape)}")
    stride = t.stride()
    if not index and ndim and shape[-1] > 1 and stride[-1] != 1:
        t = t.contiguous()
        stride = t.stride()
    dev, idx = _device(t)
    if dev is None:
        raise _capi.InvalidArgumentError(f"{name}: device {t.device} is not supported")
    pad = _PAD[ndim:]
    return t, (t.data_ptr(), code, dev, idx, ndim, *shape, *pad, *stride, *pad)


# ---- varlen ------------------------------------------------------------------------

def _varlen_values(cu_q: Tensor, cu_k: Tensor, max_q: int, max_k: int) -> Tuple[tuple, tuple]:
    """(index tensors used, the packed fa_varlen values: _capi.VARLEN_PACK)."""
    cu_q, tcq = _tvals("cu_seqlens_q", cu_q, 1, index=True)
    cu_k, tck = _tvals("cu_seqlens_k", cu_k, 1, index=True)
    return (cu_q, cu_k), (*tcq, *tck, int(max_q), int(max_k))


def _varlen_fwd_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                     max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool,
                     window_left: int, window_right: int, softcap: float,
                     deterministic: bool, alibi_slopes: Optional[Tensor] = None,
                     dropout_p: float = 0.0, seed: int = 0, offset: int = 0) -> Tuple[Tensor, Tensor]:
    """(out [total_q, Hq, Dv], lse fp32 [Hq, total_q]; Dv = v's head dim): the body of
    torch.ops.flashattn.varlen_fwd, also called directly in plain eager mode
    (varlen_forward). The argument blocks go to fa_forward_varlen packed
    (_capi.FORWARD_PACK, VARLEN_PACK), as the padded call's do: filling ctypes
    structures field by field cost ~40 us more per call than the padded call
    on the H200's host (bench/sm90/NOTES.md)."""
    q, tq = _tvals("q", q, 3)
    k, tk = _tvals("k", k, 3)
    v, tv = _tvals("v", v, 3)
    keep, vl = _varlen_values(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    T, H, D = tq[5], tq[6], tv[7]  # out has v's head dim (which may differ from q's)
    slopes, ta = _slopes_arg(alibi_slopes, q, keep[0].shape[0] - 1, H)
    dev, idx = tq[2], tq[3]
    out = torch.empty((T, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=q.device)
    to = (out.data_ptr(), tq[1], dev, idx, 3, T, H, D, 0, H * D, D, 1, 0)
    tl = (lse.data_ptr(), _capi.FA_F32, dev, idx, 2, H, T, 0, 0, T, 1, 0, 0)
    stream = _raw_stream(idx) if dev == _capi.FA_CUDA else 0
    _capi.forward_varlen_packed(
        (*tq, *tk, *tv, *to, *tl,
         *_capi.options_tuple(softmax_scale, softcap, window_left, window_right, causal,
                              deterministic, stream, ta, float(dropout_p), _u64(seed),
                              _u64(offset))), vl)
    return out, lse


@torch.library.custom_op("flashattn::varlen_fwd", mutates_args=())
def varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
               max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool,
               window_left: int, window_right: int, softcap: float,
               deterministic: bool, alibi_slopes: Optional[Tensor] = None,
               dropout_p: float = 0.0, seed: int = 0, offset: int = 0) -> Tuple[Tensor, Tensor]:
    """(out [total_q, Hq, Dv], lse fp32 [Hq, total_q]; Dv = v's head dim)."""
    return _varlen_fwd_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            softmax_scale, causal, window_left, window_right, softcap,
                            deterministic, alibi_slopes, dropout_p, seed, offset)


@varlen_fwd.register_fake
def _varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale, causal, window_left, window_right, softcap, deterministic,
                     alibi_slopes=None, dropout_p=0.0, seed=0, offset=0):
    return (q.new_empty((q.shape[0], q.shape[1], v.shape[2])),
            q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))


def _varlen_bwd_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                     cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
                     max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int,
                     window_right: int, softcap: float,
                     deterministic: bool, alibi_slopes: Optional[Tensor] = None,
                     dropout_p: float = 0.0, seed: int = 0,
                     offset: int = 0) -> Tuple[Tensor, Tensor, Tensor]:
    q, tq = _tvals("q", q, 3)
    k, tk = _tvals("k", k, 3)
    v, tv = _tvals("v", v, 3)
    out, to = _tvals("out", out, 3)
    dout, tdo = _tvals("dout", dout, 3)
    lse, tl = _tvals("lse", lse.contiguous(), 2)
    keep, vl = _varlen_values(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    slopes, ta = _slopes_arg(alibi_slopes, q, keep[0].shape[0] - 1, tq[6])
    dq, dk, dv = (torch.empty(x.shape, dtype=x.dtype, device=x.device) for x in (q, k, v))
    _, tdq = _tvals("dq", dq, 3)
    _, tdk = _tvals("dk", dk, 3)
    _, tdv = _tvals("dv", dv, 3)
    dev, idx = tq[2], tq[3]
    stream = _raw_stream(idx) if dev == _capi.FA_CUDA else 0
    _capi.backward_varlen_packed(
        (*tq, *tk, *tv, *to, *tdo, *tl, *tdq, *tdk, *tdv,
         *_capi.options_tuple(softmax_scale, softcap, window_left, window_right, causal,
                              deterministic, stream, ta, float(dropout_p), _u64(seed),
                              _u64(offset))), vl)
    return dq, dk, dv


@torch.library.custom_op("flashattn::varlen_bwd", mutates_args=())
def varlen_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
               cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
               max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int,
               window_right: int, softcap: float,
               deterministic: bool, alibi_slopes: Optional[Tensor] = None,
               dropout_p: float = 0.0, seed: int = 0,
               offset: int = 0) -> Tuple[Tensor, Tensor, Tensor]:
    return _varlen_bwd_impl(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                            max_seqlen_k, softmax_scale, causal, window_left, window_right,
                            softcap, deterministic, alibi_slopes, dropout_p, seed, offset)


@varlen_bwd.register_fake
def _varlen_bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                     deterministic, alibi_slopes=None, dropout_p=0.0, seed=0, offset=0):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


_VARIANT_DEFAULTS = (None, 0.0, 0, 0)  # alibi_slopes, dropout_p, seed, offset (inputs 13-16)


def _varlen_setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k = inputs[:5]
    slopes, *dropout = tuple(inputs[13:]) + _VARIANT_DEFAULTS[len(inputs) - 13:]
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, slopes)
    ctx.params = inputs[5:13]
    ctx.dropout = tuple(dropout)
    ctx.n_inputs = len(inputs)
    no_gradient_outputs(ctx, lse)


def _varlen_backward(ctx, dout, dlse):
    if dout is None:  # no_gradient_outputs
        return (None,) * ctx.n_inputs
    q, k, v, out, lse, cu_q, cu_k, slopes = ctx.saved_tensors
    max_q, max_k, *opts = ctx.params
    dq, dk, dv = torch.ops.flashattn.varlen_bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                                                *opts, slopes, *ctx.dropout)
    return (dq, dk, dv) + (None,) * (ctx.n_inputs - 3)


varlen_fwd.register_autograd(_varlen_backward, setup_context=_varlen_setup)


class _EagerVarlen(torch.autograd.Function):
    """The eager fast path's autograd node for varlen, as _torch_ops'
    _EagerAttention for padded batches: same impls and saved tensors, no
    dispatcher round trips."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, params):
        out, lse = _varlen_fwd_impl(q, k, v, cu_q, cu_k, *params)
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
        ctx.params = params
        no_gradient_outputs(ctx, lse)
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout, dlse):
        if dout is None:  # no_gradient_outputs
            return (None,) * 6
        q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
        dq, dk, dv = _varlen_bwd_impl(dout, q, k, v, out, lse, cu_q, cu_k, *ctx.params)
        return dq, dk, dv, None, None, None


def varlen_forward(q: Tensor, k: Tensor, v: Tensor, cu_q: Tensor, cu_k: Tensor, *params):
    """torch.ops.flashattn.varlen_fwd, or in plain eager mode its impl
    directly (_torch_ops._fast_path_ok says when)."""
    if not _fast_path_ok(q, k, v):
        return torch.ops.flashattn.varlen_fwd(q, k, v, cu_q, cu_k, *params)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _EagerVarlen.apply(q, k, v, cu_q, cu_k, params)
    return _varlen_fwd_impl(q, k, v, cu_q, cu_k, *params)


# ---- KV cache ----------------------------------------------------------------------

def kvcache_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor,
                 block_table: Optional[Tensor], k_new: Optional[Tensor], v_new: Optional[Tensor],
                 softmax_scale: float, causal: bool, window_left: int, window_right: int,
                 softcap: float, num_splits: int,
                 alibi_slopes: Optional[Tensor] = None,
                 cache_batch_idx: Optional[Tensor] = None, cache_leftpad: Optional[Tensor] = None,
                 rotary_cos: Optional[Tensor] = None, rotary_sin: Optional[Tensor] = None,
                 rotary_interleaved: bool = True) -> Tuple[Tensor, Tensor]:
    """The body of torch.ops.flashattn.kvcache_fwd, also called directly by
    flash_attn_with_kvcache in plain eager mode (see _torch_ops' fast path:
    the custom-op dispatch costs tens of microseconds, more than a decode
    kernel at short contexts). The argument block goes to fa_forward_kvcache
    as one struct.pack (_capi.KVCACHE_PACK), as fa_forward's does."""
    q, tq = _tvals("q", q, 4)
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        if c.shape[-1] > 1 and c.stride(-1) != 1:
            raise _capi.InvalidArgumentError(f"{name}: the last dimension must be contiguous "
                                             "(the cache is written in place)")
    k_cache, tkc = _tvals("k_cache", k_cache, 4)
    v_cache, tvc = _tvals("v_cache", v_cache, 4)
    lens, tl = _tvals("cache_seqlens", cache_seqlens, 1, index=True)
    tbt = _capi.NO_TENSOR
    if block_table is not None:
        block_table, tbt = _tvals("block_table", block_table, 2, index=True)
    tkn = tvn = _capi.NO_TENSOR
    if k_new is not None or v_new is not None:
        if k_new is None or v_new is None:
            raise _capi.InvalidArgumentError("k, v: the new keys and values go together")
        k_new, tkn = _tvals("k", k_new, 4)
        v_new, tvn = _tvals("v", v_new, 4)
    tidx = tlp = tcos = tsin = _capi.NO_TENSOR
    if cache_batch_idx is not None:
        cache_batch_idx, tidx = _tvals("cache_batch_idx", cache_batch_idx, 1, index=True)
    if cache_leftpad is not None:
        cache_leftpad, tlp = _tvals("cache_leftpad", cache_leftpad, 1, index=True)
    if rotary_cos is not None:
        rotary_cos, tcos = _tvals("rotary_cos", rotary_cos, 2)
    if rotary_sin is not None:
        rotary_sin, tsin = _tvals("rotary_sin", rotary_sin, 2)
    B, Sq, Hq, D = tq[5], tq[6], tq[7], tq[8]
    alibi_slopes, ta = _slopes_arg(alibi_slopes, q, B, Hq)
    fa_dev, idx = tq[2], tq[3]
    out = torch.empty((B, Sq, Hq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    to = (out.data_ptr(), tq[1], fa_dev, idx, 4, B, Sq, Hq, D, Sq * Hq * D, Hq * D, D, 1)
    tlse = (lse.data_ptr(), _capi.FA_F32, fa_dev, idx, 3, B, Hq, Sq, 0, Hq * Sq, Sq, 1, 0)
    _capi.forward_kvcache_packed(*tq, *tkc, *tvc, *tl, *tbt, *tkn, *tvn, *to, *tlse,
                                 softmax_scale, softcap, window_left, window_right,
                                 1 if causal else 0, 0,
                                 _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0,
                                 *ta, 0.0, 0, 0, int(num_splits),  # no dropout
                                 *tidx, *tlp, *tcos, *tsin, 1 if rotary_interleaved else 0)
    return out, lse


@torch.library.custom_op("flashattn::kvcache_fwd", mutates_args=("k_cache", "v_cache"))
def kvcache_fwd(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor,
                block_table: Optional[Tensor], k_new: Optional[Tensor], v_new: Optional[Tensor],
                softmax_scale: float, causal: bool, window_left: int, window_right: int,
                softcap: float, num_splits: int,
                alibi_slopes: Optional[Tensor] = None,
                cache_batch_idx: Optional[Tensor] = None, cache_leftpad: Optional[Tensor] = None,
                rotary_cos: Optional[Tensor] = None, rotary_sin: Optional[Tensor] = None,
                rotary_interleaved: bool = True) -> Tuple[Tensor, Tensor]:
    """(out [B, Sq, Hq, D], lse fp32 [B, Hq, Sq]); k_new / v_new are written into
    the caches at cache_seqlens first (cache_seqlens itself is not changed)."""
    return kvcache_impl(q, k_cache, v_cache, cache_seqlens, block_table, k_new, v_new,
                        softmax_scale, causal, window_left, window_right, softcap, num_splits,
                        alibi_slopes, cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin,
                        rotary_interleaved)


@kvcache_fwd.register_fake
def _kvcache_fwd_fake(q, k_cache, v_cache, cache_seqlens, block_table, k_new, v_new,
                      softmax_scale, causal, window_left, window_right, softcap, num_splits,
                      alibi_slopes=None, cache_batch_idx=None, cache_leftpad=None,
                      rotary_cos=None, rotary_sin=None, rotary_interleaved=True):
    B, Sq, Hq, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((B, Hq, Sq), dtype=torch.float32)
