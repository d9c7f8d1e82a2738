"""ALiBi and dropout through flash_attn_func (CPU tensors): forward and
backward against an fp64 torch reference that applies the same ALiBi bias and
the kernel's returned dropout mask (the backward regenerates the mask from
the seed, so agreement of its gradients with the reference shows forward and
backward used the same one); torch.compile through the fake impls; CUDA
tensors refused naming the option."""

import math

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from torch_ref import assert_lse, assert_rule, visible  # noqa: E402


def reference(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, slopes=None, mask=None,
              p=0.0):
    """fp64 (out, lse); slopes [H] or [B, H]; mask int32 [B, H, Sq, Sk] or None."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    B, Sq, Hq, D = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    kd = k.repeat_interleave(Hq // Hk, dim=2)
    vd = v.repeat_interleave(Hq // Hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kd) / math.sqrt(D)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None:
        sl = slopes.double().reshape(-1 if slopes.dim() == 2 else 1, Hq)  # [B or 1, H]
        i = torch.arange(Sq, dtype=torch.float64)[:, None] + (Sk - Sq)
        j = torch.arange(Sk, dtype=torch.float64)[None, :]
        s = s - sl[:, :, None, None] * (i - j).abs()
    vis = visible(Sq, Sk, causal, window, q.device)
    any_row = vis.any(dim=-1, keepdim=True)
    s = torch.where(vis, s, torch.where(any_row, float("-inf"), 0.0))
    lse = torch.where(any_row[..., 0], torch.logsumexp(s, dim=-1), float("-inf"))
    prob = torch.softmax(s, dim=-1) * any_row
    if mask is not None:
        prob = prob * mask.double() / (1.0 - p)
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
def test_cuda_refuses_variants():
    q = torch.randn(1, 8, 2, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        flashattn.flash_attn_func(q, q, q, alibi_slopes=torch.ones(2, device="cuda"))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flashattn.flash_attn_func(q, q, q, dropout_p=0.1)
