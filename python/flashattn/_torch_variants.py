"""torch custom ops for attention with ALiBi and/or dropout (CPU tensors, and
CUDA tensors through the sm80 kernels on every GPU, Hopper included).

torch.ops.flashattn.fwd_variants / bwd_variants: the plain ops
(_torch_ops.fwd / bwd) keep their signatures and fast path; these carry the
extra arguments.  Semantics are those of flashattn.hpp (Options): the ALiBi
bias -slope * |i + Sk - Sq - j| is added after scale and softcap; dropout
keeps an entry of P with probability 1 - p (Philox4x32-10 keyed by seed and
offset, indexed by (batch, head, row, key)) and scales it by 1 / (1 - p); the
LSE is of the undropped softmax.  The backward regenerates the same mask from
(seed, offset), so nothing of size Sq x Sk is saved.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _capi
from ._torch_ops import _device, _empty_bshd, _lse_values, _raw_stream, _view, no_gradient_outputs


def _slopes_values(slopes: Optional[Tensor], q: Tensor, batch: int, heads: int) -> tuple:
    if slopes is None:
        return _capi.NO_TENSOR
    if not isinstance(slopes, Tensor) or slopes.dtype != torch.float32 or slopes.dim() not in (1, 2):
        raise _capi.InvalidArgumentError(
            "alibi_slopes: expected a float32 tensor of shape (nheads,) or (batch, nheads)")
    if slopes.device != q.device:
        raise _capi.InvalidArgumentError("alibi_slopes: must be on the same device as q")
    fa_dev, idx = _device(slopes)
    if slopes.dim() == 1:
        return (slopes.data_ptr(), _capi.FA_F32, fa_dev, idx, 1, slopes.shape[0], 0, 0, 0,
                slopes.stride(0), 0, 0, 0)
    return (slopes.data_ptr(), _capi.FA_F32, fa_dev, idx, 2, slopes.shape[0], slopes.shape[1], 0, 0,
            slopes.stride(0), slopes.stride(1), 0, 0)


def _slopes_arg(slopes: Optional[Tensor], q: Tensor, batch: int, heads: int) -> Tuple[Optional[Tensor], tuple]:
    """(slopes used, made contiguous: keep them alive through the call; their
    13 packed values) for fa_options.alibi_slopes: [heads] or [batch, heads]
    (varlen: batch = the number of sequences)."""
    if isinstance(slopes, Tensor):
        slopes = slopes.contiguous()
    return slopes, _slopes_values(slopes, q, batch, heads)


def dropout_seed(dropout_p: float, seed: Optional[int] = None) -> int:
    """Checks dropout_p (in [0, 1)) and returns the Philox seed: `seed`, else
    a fresh one when dropout is on (new_seed), else 0."""
    if not 0.0 <= float(dropout_p) < 1.0:
        raise _capi.InvalidArgumentError(f"dropout_p: expected a value in [0, 1), got {dropout_p}")
    if seed is not None:
        return int(seed)
    return new_seed() if dropout_p > 0 else 0


def _u64(x: int) -> int:
    return int(x) & 0xFFFFFFFFFFFFFFFF


def _fwd_impl(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
              dropout_p, seed, offset, return_mask):
    q, tq = _view("q", q)
    k, tk = _view("k", k)
    v, tv = _view("v", v)
    B, Sq, Hq, Sk = tq[5], tq[6], tq[7], tk[6]
    alibi_slopes, ta = _slopes_arg(alibi_slopes, q, B, Hq)
    out, to = _empty_bshd((B, Sq, Hq, v.shape[3]), q, tq)  # v's head dim
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    fa_dev, idx = tq[2], tq[3]
    if return_mask and dropout_p > 0:
        mask = torch.empty((B, Hq, Sq, Sk), dtype=torch.int32, device=q.device)
        tm = (mask.data_ptr(), _capi.FA_I32, fa_dev, idx, 4, B, Hq, Sq, Sk, Hq * Sq * Sk, Sq * Sk, Sk, 1)
    else:
        mask = torch.empty((0,), dtype=torch.int32, device=q.device)
        tm = _capi.NO_TENSOR
    _capi.forward_packed(*tq, *tk, *tv, *to, *_lse_values(lse),
                         *_capi.options_tuple(softmax_scale, softcap, window_left, window_right,
                                              causal, False,
                                              _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0,
                                              ta, float(dropout_p), _u64(seed), _u64(offset)),
                         *tm)
    return out, lse, mask


@torch.library.custom_op("flashattn::fwd_variants", mutates_args=())
def fwd_variants(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, causal: bool,
                 window_left: int, window_right: int, softcap: float,
                 alibi_slopes: Optional[Tensor], dropout_p: float, seed: int, offset: int,
                 return_mask: bool, deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(out, lse, mask): mask is the int32 [B, Hq, Sq, Sk] dropout keep mask
    when return_mask and dropout_p > 0, else an empty tensor."""
    return _fwd_impl(q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                     alibi_slopes, dropout_p, seed, offset, return_mask)


@fwd_variants.register_fake
def _fwd_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
              dropout_p, seed, offset, return_mask, deterministic):
    B, Sq, Hq, D = q.shape
    Sk = k.shape[1]
    mshape = (B, Hq, Sq, Sk) if (return_mask and dropout_p > 0) else (0,)
    return (q.new_empty((B, Sq, Hq, v.shape[3])), q.new_empty((B, Hq, Sq), dtype=torch.float32),
            q.new_empty(mshape, dtype=torch.int32))


def _bwd_impl(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
              alibi_slopes, dropout_p, seed, offset, deterministic):
    q, tq = _view("q", q)
    k, tk = _view("k", k)
    v, tv = _view("v", v)
    out, to = _view("out", out)
    dout, tdo = _view("dout", dout)
    lse = lse.contiguous()
    alibi_slopes, ta = _slopes_arg(alibi_slopes, q, tq[5], tq[7])
    dq, tdq = _empty_bshd(q.shape, q, tq)
    dk, tdk = _empty_bshd(k.shape, k, tk)
    dv, tdv = _empty_bshd(v.shape, v, tv)
    fa_dev, idx = tq[2], tq[3]
    _capi.backward_packed(*tq, *tk, *tv, *to, *tdo, *_lse_values(lse), *tdq, *tdk, *tdv,
                          *_capi.options_tuple(softmax_scale, softcap, window_left, window_right,
                                               causal, deterministic,
                                               _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0,
                                               ta, float(dropout_p), _u64(seed), _u64(offset)))
    return dq, dk, dv


@torch.library.custom_op("flashattn::bwd_variants", mutates_args=())
def bwd_variants(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                 softmax_scale: float, causal: bool, window_left: int, window_right: int,
                 softcap: float, alibi_slopes: Optional[Tensor], dropout_p: float, seed: int,
                 offset: int, deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    return _bwd_impl(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right,
                     softcap, alibi_slopes, dropout_p, seed, offset, deterministic)


@bwd_variants.register_fake
def _bwd_fake(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
              alibi_slopes, dropout_p, seed, offset, deterministic):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))


def _setup_context(ctx, inputs, output):
    (q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, dropout_p,
     seed, offset, return_mask, deterministic) = inputs
    out, lse, mask = output
    ctx.save_for_backward(q, k, v, out, lse, alibi_slopes)
    ctx.params = (softmax_scale, causal, window_left, window_right, softcap, dropout_p, seed,
                  offset, deterministic)
    no_gradient_outputs(ctx, lse, mask)


def _backward(ctx, dout, dlse, dmask):
    if dout is None:  # no_gradient_outputs
        return (None,) * 14
    q, k, v, out, lse, alibi_slopes = ctx.saved_tensors
    (softmax_scale, causal, window_left, window_right, softcap, dropout_p, seed, offset,
     deterministic) = ctx.params
    dq, dk, dv = torch.ops.flashattn.bwd_variants(
        dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
        alibi_slopes, dropout_p, seed, offset, deterministic)
    return (dq, dk, dv) + (None,) * 11


fwd_variants.register_autograd(_backward, setup_context=_setup_context)


def new_seed() -> int:
    """A Philox seed from torch's default CPU generator (so torch.manual_seed
    makes runs repeatable); the offset stays 0, every call gets a fresh seed."""
    return int(torch.randint(-(2 ** 63), 2 ** 63 - 1, (), dtype=torch.int64))


def attention_variants(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: float, causal: bool,
                       window_left: int, window_right: int, softcap: float,
                       alibi_slopes: Optional[Tensor] = None, dropout_p: float = 0.0,
                       seed: Optional[int] = None, offset: int = 0, return_mask: bool = False,
                       deterministic: bool = False):
    """(out, lse, mask or None) with resolved options (see _common.resolve_options)."""
    seed = dropout_seed(dropout_p, seed)
    out, lse, mask = torch.ops.flashattn.fwd_variants(
        q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
        float(dropout_p), int(seed), int(offset), bool(return_mask), bool(deterministic))
    return out, lse, (mask if mask.dim() == 4 else None)
