"""Unfused attention in torch (for the torch tests), plus the DESIGN.md rule.

``attention_torch(..., dtype=torch.float64)`` is the oracle; in the input's
dtype it is the "naive same dtype" run of the correctness rule: scores and
P @ V as matmuls in that dtype, softmax in fp32, P rounded to the dtype.
Gradients come from autograd through this graph.
"""

import math

import torch

EPS = {torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}


def visible(sq, sk, causal, window, device):
    left, right = window
    if causal:
        right = 0
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    m = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if left >= 0:
        m &= j >= i - left
    if right >= 0:
        m &= j <= i + right
    return m


def attention_torch(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, scale=None,
                    dtype=None):
    """Returns (out, lse); differentiable in q, k, v.  dtype=None: q's dtype."""
    dtype = dtype or q.dtype
    B, Sq, Hq, D = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    qd, kd, vd = (x.to(dtype) for x in (q, k, v))
    kd = kd.repeat_interleave(Hq // Hk, dim=2)
    vd = vd.repeat_interleave(Hq // Hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", qd, kd).float() * scale if dtype != torch.float64 else \
        torch.einsum("bqhd,bkhd->bhqk", qd, kd) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    mask = visible(Sq, Sk, causal, window, q.device)
    any_row = mask.any(dim=-1, keepdim=True)  # [Sq, 1]
    # Rows that see nothing: a finite dummy row, zeroed after the softmax (no NaN grads).
    s = torch.where(mask, s, torch.where(any_row, float("-inf"), 0.0))
    lse = torch.where(any_row[..., 0], torch.logsumexp(s, dim=-1), float("-inf"))
    p = torch.softmax(s, dim=-1) * any_row
    out = torch.einsum("bhqk,bkhd->bqhd", p.to(dtype), vd)
    return out.to(q.dtype) if dtype != torch.float64 else out, lse


def assert_rule(name, x, ref, naive=None, *, n, d):
    """max|x - ref| <= 2 max|naive - ref| + eps/4 max(|ref|,1)  (fp16/bf16);
    <= 4 eps32 sqrt(N + D) max(|ref|, 1)  (fp32).  No NaN."""
    assert x.shape == ref.shape, f"{name}: shape {tuple(x.shape)} != {tuple(ref.shape)}"
    assert not torch.isnan(x).any(), f"{name}: NaN in the result"
    if x.numel() == 0:
        return
    x64, ref = x.detach().double().cpu(), ref.detach().double().cpu()
    scale = max(ref.abs().max().item(), 1.0)
    err = (x64 - ref).abs().max().item()
    if x.dtype == torch.float32 or naive is None:
        bound = 4 * EPS[torch.float32] * math.sqrt(n + d) * scale
        if x.dtype != torch.float32:
            bound = EPS[x.dtype] * scale  # no naive given: one ulp of the dtype
        rule = f"{bound:.3g}"
    else:
        naive_err = (naive.detach().double().cpu() - ref).abs().max().item()
        bound = 2 * naive_err + EPS[x.dtype] / 4 * scale
        rule = f"2 * {naive_err:.3g} + atol = {bound:.3g}"
    assert err <= bound, f"{name} ({x.dtype}): max|x - ref| = {err:.3g} > {rule}"


def assert_lse(lse, ref, *, n, d):
    lse, ref = lse.detach().double().cpu(), ref.detach().double().cpu()
    assert not torch.isnan(lse).any(), "lse: NaN"
    ninf = torch.isneginf(ref)
    assert torch.equal(torch.isneginf(lse), ninf), "lse: -inf rows differ from the reference"
    if (~ninf).any():
        err = (lse - ref)[~ninf].abs().max().item()
        bound = 4 * EPS[torch.float32] * math.sqrt(n + d) * max(ref[~ninf].abs().max().item(), 1.0)
        assert err <= bound, f"lse: max|lse - ref| = {err:.3g} > {bound:.3g}"
