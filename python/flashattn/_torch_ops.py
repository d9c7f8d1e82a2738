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

Eager fast path: the custom-op machinery (Python dispatch, the generated
autograd wrapper, the dynamo-disable guard) costs tens of microseconds per
call, several times a small kernel's launch.  ``attention`` therefore calls
the implementation directly (through a plain ``torch.autograd.Function`` when
a gradient is needed) for plain tensors in eager mode, and goes through
``torch.ops.flashattn.fwd`` whenever anything might need to see the op:
torch.compile tracing, tensor subclasses, dispatch or function modes
(FakeTensorMode, FlopCounterMode, ...), functorch transforms.  Both paths run
the same ``_fwd_impl`` / ``_bwd_impl``.  ``FLASHATTN_EAGER_FAST_PATH=0`` (or
``flashattn._torch_ops.EAGER_FAST_PATH = False``) always uses the op.
"""

from __future__ import annotations

import os
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
    # is_cpu / is_cuda / get_device() instead of t.device, which builds a
    # torch.device object per call (a few microseconds per tensor on the
    # decode hot path, bench/NOTES.md).
    if t.is_cpu:
        return _capi.FA_CPU, 0
    if t.is_cuda:
        return _capi.FA_CUDA, t.get_device()
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


try:  # what inductor's generated code uses: no Stream object per call
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - CPU-only torch builds
    def _raw_stream(index: int) -> int:
        return torch.cuda.current_stream(index).cuda_stream


def _empty_bshd(shape, like: Tensor, t: tuple):
    """A new contiguous BSHD tensor on like's device and its packed values;
    t is like's packed values (dtype code, device, index reused)."""
    b, s, h, d = shape
    x = torch.empty(shape, dtype=like.dtype, device=like.device)
    return x, (x.data_ptr(), t[1], t[2], t[3], 4, b, s, h, d, s * h * d, h * d, d, 1)


def _fwd_impl(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, causal: bool,
              window_left: int, window_right: int, softcap: float, deterministic: bool):
    q, tq = _view("q", q)
    k, tk = _view("k", k)
    v, tv = _view("v", v)
    B, Sq, Hq = tq[5], tq[6], tq[7]
    out, to = _empty_bshd((B, Sq, Hq, v.shape[3]), q, tq)  # v's head dim (may differ from q's)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    fa_dev, idx = tq[2], tq[3]
    _capi.forward_packed(*tq, *tk, *tv, *to,
                         lse.data_ptr(), _capi.FA_F32, fa_dev, idx, 3, B, Hq, Sq, 0, Hq * Sq, Sq, 1, 0,
                         softmax_scale, softcap, window_left, window_right, causal, deterministic,
                         _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0, *_capi.NO_VARIANTS)
    return out, lse


@torch.library.custom_op("flashattn::fwd", mutates_args=())
def fwd(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, causal: bool, window_left: int,
        window_right: int, softcap: float, deterministic: bool) -> Tuple[Tensor, Tensor]:
    """Returns (out [B, Sq, Hq, Dv] in q's dtype, Dv = v's head dim, lse fp32 [B, Hq, Sq]).
    softmax_scale 0 means 1/sqrt(head_dim); ``deterministic`` only matters to
    the backward (it is an input so the autograd context can see it)."""
    return _fwd_impl(q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                     deterministic)


@fwd.register_fake
def _fwd_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic):
    B, Sq, Hq, D = q.shape
    torch._check(k.dim() == 4 and v.dim() == 4, lambda: "k, v: expected 4 dimensions")
    return (q.new_empty((B, Sq, Hq, v.shape[3])), q.new_empty((B, Hq, Sq), dtype=torch.float32))


def _bwd_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
              softmax_scale: float, causal: bool, window_left: int, window_right: int,
              softcap: float, deterministic: bool):
    q, tq = _view("q", q)
    k, tk = _view("k", k)
    v, tv = _view("v", v)
    out, to = _view("out", out)
    dout, tdo = _view("dout", dout)
    if not isinstance(lse, Tensor) or lse.dtype != torch.float32 or lse.dim() != 3:
        raise _capi.InvalidArgumentError(
            "lse: expected the forward's float32 [batch, heads_q, seqlen_q] tensor")
    lse = lse.contiguous()
    dq, tdq = _empty_bshd(q.shape, q, tq)
    dk, tdk = _empty_bshd(k.shape, k, tk)
    dv, tdv = _empty_bshd(v.shape, v, tv)
    fa_dev, idx = tq[2], tq[3]
    _capi.backward_packed(*tq, *tk, *tv, *to, *tdo, *_lse_values(lse), *tdq, *tdk, *tdv,
                          softmax_scale, softcap, window_left, window_right, causal, deterministic,
                          _raw_stream(idx) if fa_dev == _capi.FA_CUDA else 0, *_capi.NO_VARIANTS)
    return dq, dk, dv


@torch.library.custom_op("flashattn::bwd", mutates_args=())
def bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
        softmax_scale: float, causal: bool, window_left: int, window_right: int, softcap: float,
        deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients (dq, dk, dv) of sum(out * dout); shapes and dtypes of q, k, v."""
    return _bwd_impl(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right,
                     softcap, deterministic)


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
              deterministic):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))


def no_gradient_outputs(ctx, *outputs):
    """Marks outputs that carry no gradient (lse, a dropout mask) and stops
    autograd from filling a zero tensor for each of them before every
    backward: the backward never reads one. (The fill cost ~0.4 ms of host
    time per call on the H200 machine, 45% of a seqlen-512 backward as the
    benchmark times it.) out's gradient then arrives as None when it has
    none (gradcheck does that): the backwards return None, a zero gradient."""
    ctx.mark_non_differentiable(*outputs)
    ctx.set_materialize_grads(False)


def _setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.params = (softmax_scale, causal, window_left, window_right, softcap, deterministic)
    # lse is an output for callers (e.g. to merge partial attentions); like
    # flash-attn, its gradient is not propagated.
    no_gradient_outputs(ctx, lse)


def _backward(ctx, dout, dlse):
    if dout is None:  # no_gradient_outputs
        return (None,) * 9
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.flashattn.bwd(dout, q, k, v, out, lse, *ctx.params)
    return dq, dk, dv, None, None, None, None, None, None


fwd.register_autograd(_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """The eager fast path's autograd node: same impls, same saved tensors,
    no dispatcher round trips."""

    # The six scalar options travel as one tuple: Function.apply walks every
    # argument through functorch's wrapper checks (a call of flash_attn_func
    # on a tiny CPU problem: 68 -> 62 us, medians of 3 interleaved runs).
    @staticmethod
    def forward(ctx, q, k, v, params):
        out, lse = _fwd_impl(q, k, v, *params)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.params = params
        no_gradient_outputs(ctx, lse)
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout, dlse):
        if dout is None:  # no_gradient_outputs
            return None, None, None, None
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _bwd_impl(dout, q, k, v, out, lse, *ctx.params)
        return dq, dk, dv, None


EAGER_FAST_PATH = os.environ.get("FLASHATTN_EAGER_FAST_PATH", "1") != "0"
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_mode = torch._C._is_torch_function_mode_enabled
_functorch_level = torch._C._functorch.peek_interpreter_stack
_profiler_enabled = torch._C._autograd._profiler_enabled


def _fast_path_ok(q, k, v) -> bool:
    # _is_compiling() first: under dynamo it is a constant True and nothing
    # after it is traced.
    return (not _is_compiling() and EAGER_FAST_PATH and type(q) is Tensor
            and type(k) is Tensor and type(v) is Tensor and not _dispatch_modes()
            and not _function_mode() and _functorch_level() is None
            and not _profiler_enabled())


def _forward(q, k, v, *params):
    if not _fast_path_ok(q, k, v):  # the op: visible to compile, modes, subclasses, profiler
        return torch.ops.flashattn.fwd(q, k, v, *params)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _EagerAttention.apply(q, k, v, params)
    return _fwd_impl(q, k, v, *params)


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, softmax_scale=None,
              window=(-1, -1), softcap: float = 0.0, return_lse: bool = False,
              deterministic: bool = False):
    """Exact attention softmax(scale * q k^T) v on torch tensors (CPU or CUDA).

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv,
    head_dim] with heads_q % heads_kv == 0 (GQA/MQA); v may have a head dim of
    its own (e.g. 192 for q / k and 128 for v), which out then has.  float32,
    float16 or bfloat16.  Causal masking is bottom-right aligned (query i sees key j iff
    j <= i + seqlen_k - seqlen_q); ``window=(left, right)`` is a sliding
    window, -1 = unbounded; ``softcap`` > 0 applies cap * tanh(s / cap).
    softmax_scale defaults to 1/sqrt(head_dim).

    Returns out ([batch, seqlen_q, heads_q, v's head_dim], q's dtype) or, with
    return_lse=True, (out, lse) where lse is float32 [batch, heads_q,
    seqlen_q] (natural log; -inf for rows that see no key; not
    differentiable).  Differentiable in q, k, v.

    Strides: inputs whose last dimension is contiguous are used in place
    (BHSD tensors: pass ``x.transpose(1, 2)``); others are copied first.
    """
    o = resolve_options(causal, softmax_scale, window, softcap)
    out, lse = _forward(q, k, v, o["softmax_scale"], o["causal"], o["window_left"],
                        o["window_right"], o["softcap"], bool(deterministic))
    return (out, lse) if return_lse else out
