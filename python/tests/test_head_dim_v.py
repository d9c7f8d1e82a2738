"""v with a head dim of its own (DeepSeek-style q / k 192, v 128; and v the wider
side), and head dims that are not multiples of 8 (100, 36 / 20: zero-padded
copies): the torch front end (autograd, both dispatch paths, torch.compile),
varlen, flash_attn_func, NumPy, against the float64 torch reference."""

import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
import flashattn._torch_ops  # noqa: E402,F401
import flashattn.numpy as fnp  # noqa: E402
from torch_ref import assert_lse, assert_rule, attention_torch  # noqa: E402

CUDA = torch.cuda.is_available() and flashattn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])


@pytest.fixture
def gen(request):
    g = torch.Generator()
    g.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    return g


@pytest.fixture(params=["eager", "op"])
def path(request, monkeypatch):
    from flashattn import _torch_ops

    monkeypatch.setattr(_torch_ops, "EAGER_FAST_PATH", request.param == "eager")
    return request.param


def _grads(fn, q, k, v, do, dtype, device):
    leaves = [t.detach().to(device=device, dtype=dtype).requires_grad_() for t in (q, k, v)]
    out, lse = fn(*leaves)
    return (out, lse, *torch.autograd.grad(out, leaves, do.to(device=device, dtype=out.dtype)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("dims", [(192, 128), (64, 128), (100, 100), (36, 20)],
                         ids=["d192-dv128", "d64-dv128", "d100", "d36-dv20"])
def test_forward_backward_against_float64(gen, device, dtype, dims, path):
    d, dv = dims
    b, sq, sk, hq, hk = 2, 45, 77, 4, 2
    q = torch.randn(b, sq, hq, d, generator=gen).to(dtype)
    k = torch.randn(b, sk, hk, d, generator=gen).to(dtype)
    v = torch.randn(b, sk, hk, dv, generator=gen).to(dtype)
    do = torch.randn(b, sq, hq, dv, generator=gen).to(dtype)
    kw = dict(causal=True)
    ours = _grads(lambda a, b_, c: flashattn.attention(a, b_, c, return_lse=True, **kw),
                  q, k, v, do, dtype, device)
    ref = _grads(lambda a, b_, c: attention_torch(a, b_, c, **kw), q, k, v, do, torch.float64, "cpu")
    naive = (_grads(lambda a, b_, c: attention_torch(a, b_, c, **kw), q, k, v, do, dtype, "cpu")
             if dtype != torch.float32 else (None,) * 5)
    assert ours[0].shape == (b, sq, hq, dv) and ours[0].dtype == dtype
    assert ours[2].shape == q.shape and ours[4].shape == v.shape
    n, dd = max(sq, sk), max(d, dv)
    assert_lse(ours[1], ref[1], n=n, d=dd)
    for name, i in (("out", 0), ("dq", 2), ("dk", 3), ("dv", 4)):
        assert_rule(name, ours[i], ref[i], naive[i], n=n, d=dd)


def test_scale_follows_q_head_dim(gen):
    """The default scale is 1/sqrt(q's head dim), not v's or the padded width."""
    q = torch.randn(1, 9, 2, 32, generator=gen)
    k = torch.randn(1, 9, 2, 32, generator=gen)
    v = torch.randn(1, 9, 2, 96, generator=gen)
    out = flashattn.attention(q, k, v)
    want = flashattn.attention(q, k, v, softmax_scale=32 ** -0.5)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    other = flashattn.attention(q, k, v, softmax_scale=96 ** -0.5)
    assert (out - other).abs().max() > 1e-3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dims", [(192, 128), (100, 100)], ids=["d192-dv128", "d100"])
def test_torch_compile_shapes(device, dims, gen):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    d, dv = dims
    q = torch.randn(1, 33, 4, d, generator=gen).to(device=device, dtype=dtype).requires_grad_()
    k = torch.randn(1, 33, 2, d, generator=gen).to(device=device, dtype=dtype).requires_grad_()
    v = torch.randn(1, 33, 2, dv, generator=gen).to(device=device, dtype=dtype).requires_grad_()
    w = torch.randn(dv, 8, generator=gen).to(device=device, dtype=dtype)

    def block(q, k, v):
        return (flashattn.flash_attn_func(q, k, v, causal=True) @ w).float().square().mean()

    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    loss = compiled(q, k, v)
    loss.backward()
    grads = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    eager = block(q, k, v)
    eager.backward()
    torch.testing.assert_close(loss, eager, rtol=1e-3, atol=1e-3)
    for g, x in zip(grads, (q, k, v)):
        assert g.shape == x.shape
        torch.testing.assert_close(g, x.grad, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dims", [(192, 128), (100, 100)], ids=["d192-dv128", "d100"])
def test_varlen(device, dims, gen):
    dtype = torch.bfloat16
    (lens_q, lens_k, hq, hk), (d, dv) = ([17, 0, 40], [30, 5, 40], 4, 2), dims
    cu = [torch.tensor([0] + np.cumsum(x).tolist(), dtype=torch.int32, device=device)
          for x in (lens_q, lens_k)]
    q = torch.randn(sum(lens_q), hq, d, generator=gen).to(device=device, dtype=dtype).requires_grad_()
    k = torch.randn(sum(lens_k), hk, d, generator=gen).to(device=device, dtype=dtype).requires_grad_()
    v = torch.randn(sum(lens_k), hk, dv, generator=gen).to(device=device, dtype=dtype).requires_grad_()
    dout = torch.randn(sum(lens_q), hq, dv, generator=gen).to(device=device, dtype=dtype)
    out = flashattn.flash_attn_varlen_func(q, k, v, cu[0], cu[1], max(lens_q), max(lens_k), causal=True)
    assert out.shape == (sum(lens_q), hq, dv)
    dq, dk, dvv = torch.autograd.grad(out, (q, k, v), dout)
    assert dvv.shape == v.shape and dq.shape == q.shape
    oq = ok = 0
    for lq, lk in zip(lens_q, lens_k):
        sq_, sk_ = slice(oq, oq + lq), slice(ok, ok + lk)
        oq, ok = oq + lq, ok + lk
        if lq == 0:
            continue
        leaves = [x.detach()[s][None].double().requires_grad_() for x, s in ((q, sq_), (k, sk_), (v, sk_))]
        ref, _ = attention_torch(*leaves, causal=True, dtype=torch.float64)
        naive, _ = attention_torch(*(x.detach()[s][None] for x, s in ((q, sq_), (k, sk_), (v, sk_))),
                                   causal=True)
        assert_rule("out", out[sq_][None], ref, naive, n=lk, d=d)
        gq, gk, gv = torch.autograd.grad(ref, leaves, dout[sq_][None].double())
        nl = [x.detach()[s][None].clone().requires_grad_() for x, s in ((q, sq_), (k, sk_), (v, sk_))]
        nout, _ = attention_torch(*nl, causal=True)
        nq, nk, nv = torch.autograd.grad(nout, nl, dout[sq_][None])
        n = max(lk, lq * hq // hk)
        for name, got, want, nai in (("dq", dq[sq_], gq, nq), ("dk", dk[sk_], gk, nk), ("dv", dvv[sk_], gv, nv)):
            assert_rule(name, got[None], want, nai, n=n, d=d)


def test_numpy_forward_backward():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 19, 2, 64), dtype=np.float32)
    k = rng.standard_normal((1, 23, 1, 64), dtype=np.float32)
    v = rng.standard_normal((1, 23, 1, 40), dtype=np.float32)
    out, lse = fnp.forward(q, k, v, causal=True)
    assert out.shape == (1, 19, 2, 40)
    ref, ref_lse = attention_torch(*(torch.from_numpy(x).double() for x in (q, k, v)), causal=True,
                                   dtype=torch.float64)
    assert_rule("out", torch.from_numpy(out), ref, n=23, d=64)
    assert_lse(torch.from_numpy(lse), ref_lse, n=23, d=64)
    dout = rng.standard_normal(out.shape, dtype=np.float32)
    dq, dk, dv = fnp.backward(dout, q, k, v, out, lse, causal=True)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    leaves = [torch.from_numpy(x).double().requires_grad_() for x in (q, k, v)]
    ro, _ = attention_torch(*leaves, causal=True, dtype=torch.float64)
    want = torch.autograd.grad(ro, leaves, torch.from_numpy(dout).double())
    for name, got, w in zip(("dq", "dk", "dv"), (dq, dk, dv), want):
        assert_rule(name, torch.from_numpy(got), w, n=38, d=64)


def test_errors_name_the_tensor():
    q = torch.randn(1, 5, 2, 64)
    with pytest.raises(flashattn.InvalidArgumentError, match=r"v: head_dim must be in \[1, 256\]"):
        flashattn.attention(q, q, torch.randn(1, 5, 2, 264))
    # The KV cache is read in place: its head dims stay multiples of 8.
    q100 = torch.randn(1, 1, 2, 100)
    with pytest.raises(flashattn.InvalidArgumentError, match="head_dim that is a multiple of 8"):
        flashattn.flash_attn_with_kvcache(q100, torch.zeros(1, 16, 2, 100), torch.zeros(1, 16, 2, 100),
                                          cache_seqlens=3)
    cache = torch.zeros(1, 16, 2, 64)
    with pytest.raises(flashattn.InvalidArgumentError, match="v_cache"):
        flashattn.flash_attn_with_kvcache(q[:, :1], cache, torch.zeros(1, 16, 2, 32),
                                          cache_seqlens=torch.tensor([3], dtype=torch.int32))
