"""FP8 (e4m3) attention forward on torch tensors: ``flashattn.attention_fp8``
and the custom ops ``torch.ops.flashattn.fwd_fp8`` and ``fwd_fp8_varlen``
(with fakes, so torch.compile(fullgraph=True) traces each as one node).

The attention computed is that of the dequantised tensors q * q_descale,
k * k_descale, v * v_descale (per-tensor factors, FlashAttention-3's
descale arguments), accumulated in fp32, written as bfloat16.  CUDA: the
Hopper (sm_90) kernel, head dims that are multiples of 16 up to 256 (on its
128 and 256 tiles).  CPU: any head dim, computed in
fp32 from dequantised copies (for agreement with the GPU, not for speed).
Forward only: fp8 inputs are not differentiable here.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _capi
from ._common import resolve_options
from ._torch_ops import _device, _fast_path_ok, _raw_stream

_FP8 = torch.float8_e4m3fn


def _fp8_view(name: str, t: Tensor, ndim: int = 4) -> tuple:
    """(tensor used, its 13 packed fa_tensor values): 4 dimensions [batch,
    seqlen, heads, head_dim], or 3 [total, heads, head_dim] (varlen)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != _FP8:
        raise _capi.InvalidArgumentError(
            f"{name}: dtype {t.dtype} is not supported here; expected torch.float8_e4m3fn "
            "(for 16-bit and fp32 inputs use flashattn.attention)")
    shape = t.shape  # (shape and strides read once: this is the per-call host path)
    if len(shape) != ndim:
        dims = "[batch, seqlen, heads, head_dim]" if ndim == 4 else "[total, heads, head_dim] (varlen)"
        raise _capi.InvalidArgumentError(
            f"{name}: expected {ndim} dimensions {dims}, got shape {tuple(shape)}")
    fa_dev, idx = _device(t)
    if fa_dev is None:
        raise _capi.InvalidArgumentError(f"{name}: device {t.device} is not supported; expected cpu or cuda")
    st = t.stride()
    if st[-1] != 1 and shape[-1] > 1:
        t = t.contiguous()
        st = t.stride()
    if ndim == 4:
        return t, (t.data_ptr(), _capi.FA_F8E4M3, fa_dev, idx, 4, *shape, st[0], st[1], st[2], 1)
    return t, (t.data_ptr(), _capi.FA_F8E4M3, fa_dev, idx, 3, *shape, 0, st[0], st[1], 1, 0)


def _scale_values(t: Optional[Tensor]) -> tuple:
    if t is None:
        return _capi.NO_TENSOR
    fa_dev, idx = _device(t)
    return (t.data_ptr(), _capi.FA_F32, fa_dev, idx, 1, 1, 0, 0, 0, 1, 0, 0, 0)


def _fwd_fp8_impl(q: Tensor, k: Tensor, v: Tensor, q_descale: Optional[Tensor],
                  k_descale: Optional[Tensor], v_descale: Optional[Tensor], softmax_scale: float,
                  causal: bool, window_left: int, window_right: int) -> Tuple[Tensor, Tensor]:
    q, tq = _fp8_view("q", q)
    k, tk = _fp8_view("k", k)
    v, tv = _fp8_view("v", v)
    B, Sq, Hq = tq[5], tq[6], tq[7]
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    d = tq[8]
    to = (out.data_ptr(), _capi.FA_BF16, tq[2], tq[3], 4, B, Sq, Hq, d, Sq * Hq * d, Hq * d, d, 1)
    fa_dev, idx = tq[2], tq[3]
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    tl = (lse.data_ptr(), _capi.FA_F32, fa_dev, idx, 3, B, Hq, Sq, 0, Hq * Sq, Sq, 1, 0)
    values = (*tq, *tk, *tv, *to, *tl,
              softmax_scale, 0.0, window_left, window_right, causal, False,
              _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0, *_capi.NO_VARIANTS,
              *_capi.NO_TENSOR)
    _capi.forward_fp8_packed(values, (*_scale_values(q_descale), *_scale_values(k_descale),
                                      *_scale_values(v_descale)))
    return out, lse


@torch.library.custom_op("flashattn::fwd_fp8", mutates_args=())
def fwd_fp8(q: Tensor, k: Tensor, v: Tensor, q_descale: Optional[Tensor], k_descale: Optional[Tensor],
            v_descale: Optional[Tensor], softmax_scale: float, causal: bool, window_left: int,
            window_right: int) -> Tuple[Tensor, Tensor]:
    """Returns (out [B, Sq, Hq, D] bfloat16, lse fp32 [B, Hq, Sq]); descale
    tensors are float32 [1] on q's device or None (= 1)."""
    return _fwd_fp8_impl(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                         window_left, window_right)


@fwd_fp8.register_fake
def _fwd_fp8_fake(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, window_left,
                  window_right):
    B, Sq, Hq, D = q.shape
    torch._check(k.dim() == 4 and v.dim() == 4, lambda: "k, v: expected 4 dimensions")
    return (q.new_empty((B, Sq, Hq, D), dtype=torch.bfloat16),
            q.new_empty((B, Hq, Sq), dtype=torch.float32))


def _fwd_fp8_varlen_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                         max_seqlen_q: int, max_seqlen_k: int, q_descale: Optional[Tensor],
                         k_descale: Optional[Tensor], v_descale: Optional[Tensor], softmax_scale: float,
                         causal: bool, window_left: int, window_right: int) -> Tuple[Tensor, Tensor]:
    from ._torch_varlen import _varlen_values  # (imports torch ops: not at module load)

    q, tq = _fp8_view("q", q, 3)
    k, tk = _fp8_view("k", k, 3)
    v, tv = _fp8_view("v", v, 3)
    keep, vl = _varlen_values(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    T, H, D = tq[5], tq[6], tq[7]
    fa_dev, idx = tq[2], tq[3]
    out = torch.empty((T, H, D), dtype=torch.bfloat16, device=q.device)
    to = (out.data_ptr(), _capi.FA_BF16, fa_dev, idx, 3, T, H, D, 0, H * D, D, 1, 0)
    lse = torch.empty((H, T), dtype=torch.float32, device=q.device)
    tl = (lse.data_ptr(), _capi.FA_F32, fa_dev, idx, 2, H, T, 0, 0, T, 1, 0, 0)
    values = (*tq, *tk, *tv, *to, *tl,
              softmax_scale, 0.0, window_left, window_right, causal, False,
              _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0, *_capi.NO_VARIANTS)
    _capi.forward_varlen_fp8_packed(values, vl, (*_scale_values(q_descale), *_scale_values(k_descale),
                                                 *_scale_values(v_descale)))
    del keep
    return out, lse


@torch.library.custom_op("flashattn::fwd_fp8_varlen", mutates_args=())
def fwd_fp8_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                   max_seqlen_q: int, max_seqlen_k: int, q_descale: Optional[Tensor],
                   k_descale: Optional[Tensor], v_descale: Optional[Tensor], softmax_scale: float,
                   causal: bool, window_left: int, window_right: int) -> Tuple[Tensor, Tensor]:
    """Returns (out [total_q, Hq, D] bfloat16, lse fp32 [Hq, total_q])."""
    return _fwd_fp8_varlen_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                q_descale, k_descale, v_descale, softmax_scale, causal, window_left,
                                window_right)


@fwd_fp8_varlen.register_fake
def _fwd_fp8_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_descale,
                         k_descale, v_descale, softmax_scale, causal, window_left, window_right):
    T, H, D = q.shape
    torch._check(k.dim() == 3 and v.dim() == 3, lambda: "k, v: expected 3 dimensions (varlen)")
    return (q.new_empty((T, H, D), dtype=torch.bfloat16), q.new_empty((H, T), dtype=torch.float32))


def _descale_tensor(name: str, x: Union[None, float, Tensor], like: Tensor) -> Optional[Tensor]:
    if x is None:
        return None
    if type(x) is Tensor and x.dtype is torch.float32 and x.shape == (1,) and x.device == like.device:
        return x  # already what the kernel reads: skip reshape / to (host time per call)
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise _capi.InvalidArgumentError(
                f"{name}: expected one per-tensor factor (numel 1), got shape {tuple(x.shape)}")
        return x.reshape(1).to(device=like.device, dtype=torch.float32)
    return torch.full((1,), float(x), dtype=torch.float32, device=like.device)


def attention_fp8(q: Tensor, k: Tensor, v: Tensor, *, q_descale=None, k_descale=None,
                  v_descale=None, causal: bool = False, softmax_scale=None, window=(-1, -1),
                  return_lse: bool = False, cu_seqlens_q: Optional[Tensor] = None,
                  cu_seqlens_k: Optional[Tensor] = None, max_seqlen_q: Optional[int] = None,
                  max_seqlen_k: Optional[int] = None):
    """FP8 attention forward: softmax(scale * (q qd)(k kd)^T) (v vd), in bfloat16.

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv,
    head_dim]; all torch.float8_e4m3fn.  q_descale / k_descale / v_descale:
    the per-tensor dequantisation factors (a Python float or a one-element
    tensor; None = 1), e.g. amax / 448 from the quantisation.  causal,
    softmax_scale (default 1/sqrt(head_dim)) and window as in ``attention``.
    Variable-length batches: packed q [total_q, heads_q, head_dim], k, v
    [total_k, heads_kv, head_dim] with cu_seqlens_q / cu_seqlens_k (int32
    [batch + 1]) and max_seqlen_q / max_seqlen_k, as ``flash_attn_varlen_func``
    takes them (causal per sequence, bottom-right aligned); lse is then
    [heads_q, total_q].  Returns out (bfloat16) or (out, lse).  Not
    differentiable.
    """
    if softmax_scale is not None and not isinstance(softmax_scale, (int, float)):
        raise TypeError("softmax_scale: expected a number or None")
    o = resolve_options(causal, softmax_scale, window, 0.0)
    qd = _descale_tensor("q_descale", q_descale, q)
    kd = _descale_tensor("k_descale", k_descale, q)
    vd = _descale_tensor("v_descale", v_descale, q)
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        if cu_seqlens_q is None or cu_seqlens_k is None or max_seqlen_q is None or max_seqlen_k is None:
            raise _capi.InvalidArgumentError(
                "varlen: pass cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k together")
        args = (q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k), qd, kd, vd,
                o["softmax_scale"], o["causal"], o["window_left"], o["window_right"])
        fn = _fwd_fp8_varlen_impl if _fast_path_ok(q, k, v) else torch.ops.flashattn.fwd_fp8_varlen
        out, lse = fn(*args)
        return (out, lse) if return_lse else out
    # Plain tensors in eager mode skip the op dispatch (as ``attention`` does);
    # compile tracing, modes and subclasses see the op.
    args = (q, k, v, qd, kd, vd, o["softmax_scale"], o["causal"], o["window_left"], o["window_right"])
    fn = _fwd_fp8_impl if _fast_path_ok(q, k, v) else torch.ops.flashattn.fwd_fp8
    out, lse = fn(*args)
    return (out, lse) if return_lse else out
