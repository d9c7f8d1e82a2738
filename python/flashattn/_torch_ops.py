"""torch custom ops over the C ABI: ``torch.ops.flashattn.fwd`` / ``bwd``.

Registered with ``torch.library.custom_op`` (functional: mutates_args=()),
``register_fake`` (shapes for torch.compile / meta tensors) and
``register_autograd`` (the backward calls fa_backward with the saved out and
lse), so ``loss.backward()`` works and ``torch.compile(fullgraph=True)``
traces the ops as single graph nodes.

Strides: a tensor whose last dimension is contiguous is passed as it is (any
other strides, including views into a packed QKV buffer, BHSD tensors
transposed to BSHD, and stride-0 broadcasts); a tensor whose last dimension
is not contiguous is first copied with ``.contiguous()``.  Outputs are always
freshly allocated contiguous BSHD tensors; lse is float32 [B, Hq, Sq].

CUDA tensors run on ``torch.cuda.current_stream(device)``.
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from . import _capi
from ._common import resolve_options

_DTYPES = {torch.float32: _capi.FA_F32, torch.float16: _capi.FA_F16, torch.bfloat16: _capi.FA_BF16}


def _bad(name: str, t) -> Exception:
    if not isinstance(t, Tensor):
        return TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _DTYPES:
        return _capi.InvalidArgumentError(
            f"{name}: dtype {t.dtype} is not supported; expected torch.float32, torch.float16 or "
            "torch.bfloat16")
    if t.dim() != 4:
        return _capi.InvalidArgumentError(
            f"{name}: expected 4 dimensions [batch, seqlen, heads, head_dim], got shape {tuple(t.shape)}")
    return _capi.InvalidArgumentError(f"{name}: device {t.device} is not supported; expected cpu or cuda")


def _device(t: Tensor):
    dev = t.device
    if dev.type == "cpu":
        return _capi.FA_CPU, 0
    if dev.type == "cuda":
        return _capi.FA_CUDA, dev.index if dev.index is not None else torch.cuda.current_device()
    return None, None


def _view(name: str, t: Tensor):
    """(tensor actually used, its 13 packed fa_tensor values)."""
    code = _DTYPES.get(getattr(t, "dtype", None))
    if code is None or t.dim() != 4:
        raise _bad(name, t)
    fa_dev, idx = _device(t)
    if fa_dev is None:
        raise _bad(name, t)
    b, s, h, d = t.shape
    st = t.stride()
    if st[3] != 1 and d > 1:
        t = t.contiguous()
        st = t.stride()
    return t, (t.data_ptr(), code, fa_dev, idx, 4, b, s, h, d, st[0], st[1], st[2], 1)


def _lse_values(t: Tensor) -> tuple:
    b, h, sq = t.shape
    fa_dev, idx = _device(t)
    return (t.data_ptr(), _capi.FA_F32, fa_dev, idx, 3, b, h, sq, 0, h * sq, sq, 1, 0)


def _stream(t: Tensor) -> int:
    if t.device.type == "cuda":
        return torch.cuda.current_stream(t.device).cuda_stream
    return 0


@torch.library.custom_op("flashattn::fwd", mutates_args=())
def fwd(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, causal: bool, window_left: int,
        window_right: int, softcap: float, deterministic: bool) -> Tuple[Tensor, Tensor]:
    """Returns (out [B, Sq, Hq, D] in q's dtype, lse fp32 [B, Hq, Sq]).
    softmax_scale 0 means 1/sqrt(head_dim); ``deterministic`` only matters to
    the backward (it is an input so the autograd context can see it)."""
    q, tq = _view("q", q)
    k, tk = _view("k", k)
    v, tv = _view("v", v)
    B, Sq, Hq, D = q.shape
    out = torch.empty((B, Sq, Hq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    _, to = _view("out", out)
    _capi.forward_packed(*tq, *tk, *tv, *to, *_lse_values(lse), softmax_scale, softcap,
                         window_left, window_right, causal, deterministic, _stream(q))
    return out, lse


@fwd.register_fake
def _fwd_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic):
    B, Sq, Hq, D = q.shape
    torch._check(k.dim() == 4 and v.dim() == 4, lambda: "k, v: expected 4 dimensions")
    return (q.new_empty((B, Sq, Hq, D)), q.new_empty((B, Hq, Sq), dtype=torch.float32))


@torch.library.custom_op("flashattn::bwd", mutates_args=())
def bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
        softmax_scale: float, causal: bool, window_left: int, window_right: int, softcap: float,
        deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients (dq, dk, dv) of sum(out * dout); shapes and dtypes of q, k, v."""
    q, tq = _view("q", q)
    k, tk = _view("k", k)
    v, tv = _view("v", v)
    out, to = _view("out", out)
    dout, tdo = _view("dout", dout)
    lse = lse.contiguous()
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    _, tdq = _view("dq", dq)
    _, tdk = _view("dk", dk)
    _, tdv = _view("dv", dv)
    _capi.backward_packed(*tq, *tk, *tv, *to, *tdo, *_lse_values(lse), *tdq, *tdk, *tdv,
                          softmax_scale, softcap, window_left, window_right, causal, deterministic,
                          _stream(q))
    return dq, dk, dv


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
              deterministic):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))


def _setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.params = (softmax_scale, causal, window_left, window_right, softcap, deterministic)
    # lse is an output for callers (e.g. to merge partial attentions); like
    # flash-attn, its gradient is not propagated.
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.flashattn.bwd(dout, q, k, v, out, lse, *ctx.params)
    return dq, dk, dv, None, None, None, None, None, None


fwd.register_autograd(_backward, setup_context=_setup_context)


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, softmax_scale=None,
              window=(-1, -1), softcap: float = 0.0, return_lse: bool = False,
              deterministic: bool = False):
    """Exact attention softmax(scale * q k^T) v on torch tensors (CPU or CUDA).

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv,
    head_dim] with heads_q % heads_kv == 0 (GQA/MQA).  float32, float16 or
    bfloat16.  Causal masking is bottom-right aligned (query i sees key j iff
    j <= i + seqlen_k - seqlen_q); ``window=(left, right)`` is a sliding
    window, -1 = unbounded; ``softcap`` > 0 applies cap * tanh(s / cap).
    softmax_scale defaults to 1/sqrt(head_dim).

    Returns out ([batch, seqlen_q, heads_q, head_dim], q's dtype) or, with
    return_lse=True, (out, lse) where lse is float32 [batch, heads_q,
    seqlen_q] (natural log; -inf for rows that see no key; not
    differentiable).  Differentiable in q, k, v.

    Strides: inputs whose last dimension is contiguous are used in place
    (BHSD tensors: pass ``x.transpose(1, 2)``); others are copied first.
    """
    o = resolve_options(causal, softmax_scale, window, softcap)
    out, lse = torch.ops.flashattn.fwd(q, k, v, o["softmax_scale"], o["causal"], o["window_left"],
                                       o["window_right"], o["softcap"], bool(deterministic))
    return (out, lse) if return_lse else out
