"""ALiBi and dropout through flash_attn_func (CPU tensors): forward and
backward against an fp64 torch reference that applies the same ALiBi bias and
the kernel's returned dropout mask (the backward regenerates the mask from
the seed, so agreement of its gradients with the reference shows forward and
backward used the same one); torch.compile through the fake impls; the
same on CUDA tensors (the sm80 kernels), with a same-dtype yardstick."""

import math

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from torch_ref import assert_lse, assert_rule, visible  # noqa: E402


class _RoundGrad(torch.autograd.Function):
    """Identity whose backward rounds the incoming gradient to `dt`."""

    @staticmethod
    def forward(ctx, x, dt):
        ctx.dt = dt
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dt).to(g.dtype), None


def reference(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, slopes=None, mask=None,
              p=0.0, work=torch.float64, pdt=None, dsdt=None):
    """fp64 (out, lse); slopes [H] or [B, H]; mask int32 [B, H, Sq, Sk] or None.
    work=float32 with pdt=the input dtype: the naive same-dtype yardstick
    (fp32 arithmetic, P rounded to the dtype before P V); dsdt=the input dtype
    also rounds dS (the scores' gradient) before dQ = dS K and dK = dS^T Q, as
    a 16-bit kernel's backward does (exact up to the scale when it is a power
    of two, head dim 64)."""
    q, k, v = (x.detach().to(work).requires_grad_() for x in (q, k, v))
    B, Sq, Hq, D = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    kd = k.repeat_interleave(Hq // Hk, dim=2)
    vd = v.repeat_interleave(Hq // Hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kd)
    if dsdt is not None:
        s = _RoundGrad.apply(s, dsdt)
    s = s / math.sqrt(D)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None:
        sl = slopes.to(work).reshape(-1 if slopes.dim() == 2 else 1, Hq)  # [B or 1, H]
        i = torch.arange(Sq, dtype=work)[:, None] + (Sk - Sq)
        j = torch.arange(Sk, dtype=work)[None, :]
        s = s - sl[:, :, None, None] * (i - j).abs()
    vis = visible(Sq, Sk, causal, window, q.device)
    any_row = vis.any(dim=-1, keepdim=True)
    s = torch.where(vis, s, torch.where(any_row, float("-inf"), 0.0))
    lse = torch.where(any_row[..., 0], torch.logsumexp(s, dim=-1), float("-inf"))
    prob = torch.softmax(s, dim=-1) * any_row
    if mask is not None:
        prob = prob * mask.to(work) / (1.0 - p)
    if pdt is not None:
        prob = prob.to(pdt).to(work)
    out = torch.einsum("bhqk,bkhd->bqhd", prob, vd)
    return q, k, v, out, lse


def run(B, Sq, Sk, Hq, Hk, D, *, causal=False, window=(-1, -1), softcap=0.0, alibi=0, p=0.0,
        seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Sq, Hq, D, generator=g, requires_grad=True)
    k = torch.randn(B, Sk, Hk, D, generator=g, requires_grad=True)
    v = torch.randn(B, Sk, Hk, D, generator=g, requires_grad=True)
    dout = torch.randn(B, Sq, Hq, D, generator=g)
    slopes = None
    if alibi:
        base = torch.tensor([2.0 ** (-8.0 * (h + 1) / Hq) for h in range(Hq)], dtype=torch.float32)
        slopes = base if alibi == 1 else torch.stack([base * (1 + 0.5 * b) for b in range(B)])
    out, lse, mask = flashattn.flash_attn_func(q, k, v, dropout_p=p, causal=causal,
                                               window_size=window, softcap=softcap,
                                               alibi_slopes=slopes, return_attn_probs=True)
    assert (mask is None) == (p == 0.0)
    out.backward(dout)
    rq, rk, rv, rout, rlse = reference(q, k, v, causal=causal, window=window, softcap=softcap,
                                       slopes=slopes, mask=mask, p=p)
    rout.backward(dout.double())
    n = max(Sk, Sq * Hq // Hk)
    assert_rule("out", out, rout, n=Sk, d=D)
    assert_lse(lse, rlse, n=Sk, d=D)
    assert_rule("dq", q.grad, rq.grad, n=Sk, d=D)
    assert_rule("dk", k.grad, rk.grad, n=n, d=D)
    assert_rule("dv", v.grad, rv.grad, n=n, d=D)
    return mask


@pytest.mark.parametrize("kw", [
    dict(alibi=1),
    dict(alibi=2, causal=True),
    dict(alibi=1, softcap=5.0, window=(20, 7)),
    dict(p=0.3),
    dict(p=0.5, causal=True),
    dict(p=0.2, alibi=2, window=(15, 15), softcap=8.0),
])
def test_variants_against_reference(kw):
    run(2, 37, 61, 4, 2, 32, seed=hash(tuple(sorted(kw.items()))) % 1000, **kw)


def test_dropout_keep_rate_and_seeding():
    torch.manual_seed(5)
    mask = run(1, 200, 250, 4, 4, 16, p=0.25, seed=9)
    n = mask.numel()
    z = (mask.sum().item() - 0.75 * n) / math.sqrt(n * 0.25 * 0.75)
    assert abs(z) < 5, z
    q = torch.randn(1, 16, 2, 16)
    torch.manual_seed(1)
    a = flashattn.flash_attn_func(q, q, q, dropout_p=0.5, return_attn_probs=True)[2]
    b = flashattn.flash_attn_func(q, q, q, dropout_p=0.5, return_attn_probs=True)[2]
    torch.manual_seed(1)
    c = flashattn.flash_attn_func(q, q, q, dropout_p=0.5, return_attn_probs=True)[2]
    assert not torch.equal(a, b)  # a fresh seed per call
    assert torch.equal(a, c)      # torch.manual_seed makes it repeatable


def test_compile_with_alibi():
    q = torch.randn(1, 9, 2, 16, requires_grad=True)
    slopes = torch.tensor([0.5, 0.25])
    f = torch.compile(lambda q: flashattn.flash_attn_func(q, q, q, alibi_slopes=slopes,
                                                          causal=True).sum(),
                      backend="aot_eager")
    y = f(q)
    y.backward()
    torch.testing.assert_close(y, flashattn.flash_attn_func(q, q, q, alibi_slopes=slopes,
                                                            causal=True).sum())


def test_bad_variant_arguments():
    q = torch.randn(1, 4, 2, 16)
    with pytest.raises(ValueError, match="dropout_p"):
        flashattn.flash_attn_func(q, q, q, dropout_p=1.0)
    with pytest.raises(ValueError, match="alibi_slopes"):
        flashattn.flash_attn_func(q, q, q, alibi_slopes=torch.ones(3))
    with pytest.raises(ValueError, match="alibi_slopes"):
        flashattn.flash_attn_func(q, q, q, alibi_slopes=torch.ones(2, dtype=torch.float64))


@pytest.mark.skipif(not flashattn.cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kw", [
    dict(alibi=1),
    dict(alibi=2, causal=True, p=0.25),
    dict(p=0.5, window=(20, 7)),
])
def test_cuda_variants_against_reference(kw):
    """CUDA tensors (the sm80 kernels; the returned mask drives the reference)."""
    B, Sq, Sk, Hq, Hk, D = 2, 67, 131, 4, 2, 64
    p, causal, window = kw.get("p", 0.0), kw.get("causal", False), kw.get("window", (-1, -1))
    g = torch.Generator().manual_seed(7)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to("cuda", torch.float16).requires_grad_()

    q, k, v = randn(B, Sq, Hq, D), randn(B, Sk, Hk, D), randn(B, Sk, Hk, D)
    dout = torch.randn(B, Sq, Hq, D, generator=g).to("cuda", torch.float16)
    slopes = None
    if kw.get("alibi"):
        base = torch.tensor([2.0 ** (-8.0 * (h + 1) / Hq) for h in range(Hq)], dtype=torch.float32)
        slopes = base if kw["alibi"] == 1 else torch.stack([base * (1 + 0.5 * b) for b in range(B)])
        slopes = slopes.cuda()
    out, lse, mask = flashattn.flash_attn_func(q, k, v, dropout_p=p, causal=causal, window_size=window,
                                               alibi_slopes=slopes, return_attn_probs=True)
    assert (mask is None) == (p == 0.0)
    out.backward(dout)

    def cpu(t):
        return None if t is None else t.detach().cpu()

    args = dict(causal=causal, window=window, slopes=cpu(slopes), mask=cpu(mask), p=p)
    rq, rk, rv, rout, rlse = reference(cpu(q), cpu(k), cpu(v), **args)
    rout.backward(dout.cpu().double())
    nq, nk, nv, nout, _ = reference(cpu(q), cpu(k), cpu(v), work=torch.float32, pdt=torch.float16, **args)
    nout.backward(dout.cpu().float())
    n = max(Sk, Sq * Hq // Hk)
    assert_rule("out", out, rout, nout, n=Sk, d=D)
    assert_lse(lse, rlse, n=Sk, d=D)
    assert_rule("dq", q.grad, rq.grad, nq.grad, n=Sk, d=D)
    assert_rule("dk", k.grad, rk.grad, nk.grad, n=n, d=D)
    assert_rule("dv", v.grad, rv.grad, nv.grad, n=n, d=D)
