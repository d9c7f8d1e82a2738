"""ALiBi and dropout through the varlen functions (forward + autograd) and
ALiBi through flash_attn_with_kvcache (with the in-place append): each
sequence against test_variants' fp64 reference with the same bias, slopes
[nheads] and [batch, nheads] (batch = the number of sequences), and for
dropout the keep mask of a padded call of the same sequences drawn with the
same seed (the generator counts rows and keys within a sequence), so that
matching gradients show the backward regenerated the forward's mask; opcheck
and torch.compile(fullgraph=True) over the ops' new arguments; bad slopes and
dropout_p named."""

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from flashattn import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402
from test_variants import reference  # noqa: E402
from test_varlen import _cu, path  # noqa: E402,F401  (path: the eager / op fixture)
from torch_ref import assert_lse, assert_rule  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and flashattn.cuda_available() else [])


def _slopes(kind, batch, heads, device):
    base = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], dtype=torch.float32)
    s = base if kind == 1 else torch.stack([base * (1 + 0.5 * b) for b in range(batch)])
    return s.to(device)


def _seq_slopes(slopes, b):
    return slopes if slopes.dim() == 1 else slopes[b]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind,causal", [(1, False), (2, True), (2, False)])
def test_varlen_alibi_forward_backward(device, kind, causal, path):
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    g = torch.Generator().manual_seed(31 + 2 * kind + int(causal))
    # A sequence without keys (its rows see nothing) and one without queries.
    lens_q, lens_k, hq, hk, d = [17, 0, 40, 5], [23, 3, 31, 0], 4, 2, 64
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(tq, hq, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    k = torch.randn(tk, hk, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    v = torch.randn(tk, hk, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    dout = torch.randn(tq, hq, d, generator=g).to(device=device, dtype=dtype)
    slopes = _slopes(kind, len(lens_q), hq, device)
    out = flash_attn_varlen_func(q, k, v, _cu(lens_q, device), _cu(lens_k, device), max(lens_q),
                                 max(lens_k), causal=causal, alibi_slopes=slopes)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    oq = ok = 0
    for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
        sl_q, sl_k = slice(oq, oq + lq), slice(ok, ok + lk)
        oq, ok = oq + lq, ok + lk
        if lq == 0:
            continue
        xs = [x.detach()[s][None].cpu() for x, s in ((q, sl_q), (k, sl_k), (v, sl_k))]
        sb = _seq_slopes(slopes, b).cpu()
        rq, rk, rv, rout, _ = reference(*xs, causal=causal, slopes=sb)
        go = dout[sl_q][None].cpu()
        rout.backward(go.double())
        naive = nq = nk = nv = None
        if dtype != torch.float32:  # the rule's same-dtype yardstick (P and dS rounded)
            n_q, n_k, n_v, naive, _ = reference(*xs, causal=causal, slopes=sb, work=torch.float32,
                                                pdt=dtype, dsdt=dtype)
            naive.backward(go.float())
            nq, nk, nv = n_q.grad, n_k.grad, n_v.grad
        n = max(lk, 1)
        assert_rule("out", out[sl_q][None].cpu(), rout, naive, n=n, d=d)
        if lk == 0:
            assert torch.all(dq[sl_q] == 0)
            continue
        nkv = max(lk, lq * hq // hk)
        assert_rule("dq", dq[sl_q][None].cpu(), rq.grad, nq, n=n, d=d)
        assert_rule("dk", dk[sl_k][None].cpu(), rk.grad, nk, n=nkv, d=d)
        assert_rule("dv", dv[sl_k][None].cpu(), rv.grad, nv, n=nkv, d=d)
    assert torch.all(dk[23:26] == 0) and torch.all(dv[23:26] == 0)  # keys without queries


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", [1, 2])
def test_kvcache_alibi_append_and_attend(device, kind):
    dtype = torch.float32 if device == "cpu" else torch.float16
    g = torch.Generator().manual_seed(5 + kind)
    B, sq, hq, hk, d, s_new, cap = 3, 3, 8, 2, 128, 2, 80
    lens = [41, 0, 70]
    kc = torch.randn(B, cap, hk, d, generator=g).to(device=device, dtype=dtype)
    vc = torch.randn(B, cap, hk, d, generator=g).to(device=device, dtype=dtype)
    q = torch.randn(B, sq, hq, d, generator=g).to(device=device, dtype=dtype)
    kn = torch.randn(B, s_new, hk, d, generator=g).to(device=device, dtype=dtype)
    vn = torch.randn(B, s_new, hk, d, generator=g).to(device=device, dtype=dtype)
    slopes = _slopes(kind, B, hq, device)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    out, lse = flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=seqlens, causal=True,
                                       alibi_slopes=slopes, return_softmax_lse=True)
    for b in range(B):
        n = lens[b] + s_new
        assert torch.equal(kc[b, lens[b]:n], kn[b]) and torch.equal(vc[b, lens[b]:n], vn[b])
        xs = [x.cpu() for x in (q[b:b + 1], kc[b:b + 1, :n], vc[b:b + 1, :n])]
        sb = _seq_slopes(slopes, b).cpu()
        _, _, _, ref, ref_lse = reference(*xs, causal=True, slopes=sb)
        naive = None
        if dtype != torch.float32:
            naive = reference(*xs, causal=True, slopes=sb, work=torch.float32, pdt=dtype)[3]
        assert_rule("out", out[b:b + 1].cpu(), ref, naive, n=n, d=d)
        assert_lse(lse[b:b + 1].cpu(), ref_lse, n=n, d=d)


def test_variant_ops_opcheck_and_compile():
    g = torch.Generator().manual_seed(8)
    q = torch.randn(20, 4, 64, generator=g, requires_grad=True)
    k = torch.randn(26, 2, 64, generator=g, requires_grad=True)
    v = torch.randn(26, 2, 64, generator=g, requires_grad=True)
    cu_q, cu_k = _cu([7, 13], "cpu"), _cu([11, 15], "cpu")
    slopes = _slopes(2, 2, 4, "cpu")
    torch.library.opcheck(torch.ops.flashattn.varlen_fwd.default,
                          (q, k, v, cu_q, cu_k, 13, 15, 0.0, True, -1, -1, 0.0, False, slopes))
    torch.library.opcheck(torch.ops.flashattn.varlen_fwd.default,
                          (q, k, v, cu_q, cu_k, 13, 15, 0.0, True, -1, -1, 0.0, False, slopes, 0.2,
                           12345, 7))
    kc, vc = torch.randn(2, 32, 2, 64, generator=g), torch.randn(2, 32, 2, 64, generator=g)
    qd, kn = torch.randn(2, 1, 4, 64, generator=g), torch.randn(2, 1, 2, 64, generator=g)
    lens = torch.tensor([5, 20], dtype=torch.int32)
    torch.library.opcheck(torch.ops.flashattn.kvcache_fwd.default,
                          (qd, kc, vc, lens, None, kn, kn.clone(), 0.0, False, -1, -1, 0.0, 0, slopes),
                          test_utils=("test_schema", "test_faketensor"))

    def f(q, k, v):
        return flash_attn_varlen_func(q, k, v, cu_q, cu_k, 13, 15, causal=True,
                                      alibi_slopes=slopes).sum()

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert torch.allclose(compiled(q, k, v), f(q, k, v))
    # The bias is really applied: without it the result differs.
    assert not torch.allclose(f(q, k, v), flash_attn_varlen_func(q, k, v, cu_q, cu_k, 13, 15,
                                                                 causal=True).sum())


def test_alibi_bad_slopes_named():
    q = torch.randn(10, 2, 64)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    for bad in (torch.ones(3), torch.ones(2, dtype=torch.float64), torch.ones(3, 2)):
        with pytest.raises(ValueError, match="alibi_slopes"):
            flash_attn_varlen_func(q, q, q, cu, cu, 6, 6, alibi_slopes=bad)
    kc = torch.randn(1, 16, 2, 64)
    kc0 = kc.clone()
    with pytest.raises(ValueError, match="alibi_slopes"):
        flash_attn_with_kvcache(torch.randn(1, 1, 2, 64), kc, kc, torch.randn(1, 1, 2, 64),
                                torch.randn(1, 1, 2, 64), cache_seqlens=3, alibi_slopes=torch.ones(5))
    assert torch.equal(kc, kc0)  # refused before the append
    for p in (1.0, -0.1):
        with pytest.raises(ValueError, match="dropout_p"):
            flash_attn_varlen_func(q, q, q, cu, cu, 6, 6, dropout_p=p)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal,alibi", [(False, False), (True, True)])
def test_varlen_dropout_matches_padded_mask(device, causal, alibi, path):
    dtype = torch.float32 if device == "cpu" else torch.float16
    p = 0.3
    g = torch.Generator().manual_seed(77 + int(causal))
    lens_q, lens_k, hq, hk, d = [9, 0, 33, 4], [21, 2, 33, 0], 4, 2, 64
    nseq, mq, mk = len(lens_q), max(lens_q), max(lens_k)
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(tq, hq, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    k = torch.randn(tk, hk, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    v = torch.randn(tk, hk, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    dout = torch.randn(tq, hq, d, generator=g).to(device=device, dtype=dtype)
    slopes = _slopes(2, nseq, hq, device) if alibi else None
    torch.manual_seed(2024)  # the seed the call draws
    out = flash_attn_varlen_func(q, k, v, _cu(lens_q, device), _cu(lens_k, device), mq, mk,
                                 dropout_p=p, causal=causal, alibi_slopes=slopes)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    # The same seed's mask from a padded call (its values do not matter, only the mask).
    torch.manual_seed(2024)
    z = torch.zeros(nseq, mq, hq, d, device=device, dtype=dtype)
    zk = torch.zeros(nseq, mk, hk, d, device=device, dtype=dtype)
    _, _, mask = flashattn.flash_attn_func(z, zk, zk, dropout_p=p, return_attn_probs=True)
    mask = mask.cpu()
    oq = ok = 0
    kept = total = 0
    for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
        sl_q, sl_k = slice(oq, oq + lq), slice(ok, ok + lk)
        oq, ok = oq + lq, ok + lk
        if lq == 0 or lk == 0:
            continue
        mb = mask[b:b + 1, :, :lq, :lk]
        kept, total = kept + int(mb.sum()), total + mb.numel()
        xs = [x.detach()[s][None].cpu() for x, s in ((q, sl_q), (k, sl_k), (v, sl_k))]
        sb = _seq_slopes(slopes, b).cpu() if alibi else None
        rq, rk, rv, rout, _ = reference(*xs, causal=causal, slopes=sb, mask=mb, p=p)
        go = dout[sl_q][None].cpu()
        rout.backward(go.double())
        naive = nq = nk = nv = None
        if dtype != torch.float32:
            n_q, n_k, n_v, naive, _ = reference(*xs, causal=causal, slopes=sb, mask=mb, p=p,
                                                work=torch.float32, pdt=dtype, dsdt=dtype)
            naive.backward(go.float())
            nq, nk, nv = n_q.grad, n_k.grad, n_v.grad
        nkv = max(lk, lq * hq // hk)
        assert_rule("out", out[sl_q][None].cpu(), rout, naive, n=lk, d=d)
        assert_rule("dq", dq[sl_q][None].cpu(), rq.grad, nq, n=lk, d=d)
        assert_rule("dk", dk[sl_k][None].cpu(), rk.grad, nk, n=nkv, d=d)
        assert_rule("dv", dv[sl_k][None].cpu(), rv.grad, nv, n=nkv, d=d)
    assert 0.55 < kept / total < 0.85  # ~0.7 of 1,500+ entries kept
