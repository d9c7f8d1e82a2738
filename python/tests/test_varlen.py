"""flash_attn_varlen_func (forward + autograd) and flash_attn_with_kvcache
(append, paged cache, split-KV) against the per-sequence torch reference
(torch_ref.attention_torch in float64, the naive run in the input dtype),
plus opcheck and torch.compile(fullgraph=True) over the new custom ops."""

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from flashattn import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402
from torch_ref import assert_lse, assert_rule, attention_torch  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and flashattn.cuda_available() else [])


def _cu(lens, device):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)


@pytest.fixture(params=["eager", "op"])
def path(request, monkeypatch):
    """eager: flash_attn_varlen_func's fast path (autograd.Function, no
    dispatcher); op: always through torch.ops.flashattn.varlen_fwd and its
    registered autograd."""
    from flashattn import _torch_ops

    monkeypatch.setattr(_torch_ops, "EAGER_FAST_PATH", request.param == "eager")
    return request.param


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_forward_backward(device, dtype, causal, path):
    if device == "cpu" and dtype != torch.float32 and not causal:
        pytest.skip("one low-precision CPU case per causal setting keeps the suite short")
    g = torch.Generator().manual_seed(1234 + int(causal))
    lens_q, lens_k, hq, hk, d = [17, 0, 65, 1], [30, 4, 65, 0], 4, 2, 128
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(tq, hq, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    k = torch.randn(tk, hk, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    v = torch.randn(tk, hk, d, generator=g).to(device=device, dtype=dtype).requires_grad_()
    dout = torch.randn(tq, hq, d, generator=g).to(device=device, dtype=dtype)
    out = flash_attn_varlen_func(q, k, v, _cu(lens_q, device), _cu(lens_k, device), max(lens_q),
                                 max(lens_k), causal=causal)
    try:
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    except flashattn.UnsupportedError:
        if device != "cuda":
            raise
        dq = None  # the CUDA varlen backward is not there yet (the C++ tests say the same)
    oq = ok = 0
    for lq, lk in zip(lens_q, lens_k):
        sl_q, sl_k = slice(oq, oq + lq), slice(ok, ok + lk)
        oq, ok = oq + lq, ok + lk
        if lq == 0:
            continue
        qs, ks, vs = (x.detach()[s][None].double().requires_grad_() for x, s in ((q, sl_q), (k, sl_k), (v, sl_k)))
        ref, _ = attention_torch(qs, ks, vs, causal=causal, dtype=torch.float64)
        naive, _ = attention_torch(q.detach()[sl_q][None], k.detach()[sl_k][None], v.detach()[sl_k][None],
                                   causal=causal)
        assert_rule("out", out[sl_q][None], ref, naive, n=max(lk, 1), d=d)
        if dq is not None and lk > 0:
            gq, gk, gv = torch.autograd.grad(ref, (qs, ks, vs), dout[sl_q][None].double())
            # The naive run in the input dtype, differentiated by autograd (the rule's yardstick).
            ql, kl, vl = (x.detach()[s][None].clone().requires_grad_() for x, s in ((q, sl_q), (k, sl_k), (v, sl_k)))
            nout, _ = attention_torch(ql, kl, vl, causal=causal)
            nq, nk, nv = torch.autograd.grad(nout, (ql, kl, vl), dout[sl_q][None])
            n = max(lk, lq * hq // hk)
            for name, got, want, nai in (("dq", dq[sl_q], gq, nq), ("dk", dk[sl_k], gk, nk), ("dv", dv[sl_k], gv, nv)):
                assert_rule(name, got[None], want, None if dtype == torch.float32 else nai, n=n, d=d)
    if dq is not None:  # sequences without queries have zero key gradients
        assert torch.all(dk[30:34] == 0) and torch.all(dv[30:34] == 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_rows_past_the_last_sequence(device, dtype, path):
    """A packed buffer longer than its tokens (static shapes): the rows past
    cu_seqlens[-1] come out as rows that see no key (out 0) and get zero
    gradients, so a projection in front of the attention keeps a finite weight
    gradient (torch.empty's garbage there used to reach it as NaN); the other
    rows are those of the call without the extra rows, bit for bit."""
    g = torch.Generator().manual_seed(77)
    lens, used, total, h, d = [9, 20], 29, 40, 2, 64
    x = torch.randn(total, h * d, generator=g).to(device=device, dtype=dtype)
    w = torch.randn(h * d, 3 * h * d, generator=g).to(device=device, dtype=dtype).div_(16).requires_grad_()
    cu = _cu(lens, device)

    def run(rows):
        q, k, v = (x[:rows] @ w).view(rows, 3, h, d).unbind(1)
        out = flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True)
        (gw,) = torch.autograd.grad(out[:used].float().square().sum(), (w,))
        return out, gw

    out, gw = run(total)
    assert torch.all(out[used:] == 0)
    assert torch.isfinite(gw).all()
    out_exact, gw_exact = run(used)
    assert torch.equal(out[:used], out_exact)
    torch.testing.assert_close(gw, gw_exact)


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA in torch and libflashattn")
def test_varlen_cuda_graph_static_buffer():
    """The use the tail is for: a CUDA graph captured over a static packed
    buffer, replayed with new cu_seqlens values written in place. Each replay
    must read cu_seqlens[batch] on the device (rows past it 0 in out, dq, dk,
    dv), and give what an eager call on the same values gives."""
    g = torch.Generator().manual_seed(5)
    total, h, d = 96, 4, 64
    q, k, v = (torch.randn(total, h, d, generator=g).cuda().bfloat16().requires_grad_() for _ in range(3))
    dout = torch.randn(total, h, d, generator=g).cuda().bfloat16()
    cu = _cu([40, 56], "cuda")

    def step():
        for x in (q, k, v):
            x.grad = None
        out = flash_attn_varlen_func(q, k, v, cu, cu, 64, 64, causal=True)
        out.backward(dout)
        return out

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up on a side stream, as torch's docs require
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    grads = [x.grad for x in (q, k, v)]  # the graph's own buffers (eager steps replace .grad)
    for lens in ([40, 56], [17, 30], [0, 5]):
        cu.copy_(_cu(lens, "cuda"))
        graph.replay()
        torch.cuda.synchronize()
        used = sum(lens)
        got = [out.clone()] + [t.clone() for t in grads]
        want = [step().detach().clone()] + [x.grad.clone() for x in (q, k, v)]
        for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
            assert torch.all(a[used:] == 0), f"{name} rows past {used} with lengths {lens}"
            torch.testing.assert_close(a, b, msg=f"{name} with lengths {lens}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("page_size", [0, 16, 48])
def test_kvcache_append_and_attend(device, page_size):
    dtype = torch.float16
    g = torch.Generator().manual_seed(7 + page_size)
    B, sq, hq, hk, d, s_new = 3, 2, 8, 2, 128, 2
    lens = [40, 0, 93]
    cap = 96
    if page_size:
        pages_per = -(-cap // page_size)
        num_pages = B * pages_per + 2
        kc = torch.randn(num_pages, page_size, hk, d, generator=g).to(device=device, dtype=dtype)
        vc = torch.randn(num_pages, page_size, hk, d, generator=g).to(device=device, dtype=dtype)
        table = torch.randperm(num_pages, generator=g)[: B * pages_per].view(B, pages_per).to(
            device=device, dtype=torch.int32)
    else:
        kc = torch.randn(B, cap, hk, d, generator=g).to(device=device, dtype=dtype)
        vc = torch.randn(B, cap, hk, d, generator=g).to(device=device, dtype=dtype)
        table = None
    q = torch.randn(B, sq, hq, d, generator=g).to(device=device, dtype=dtype)
    kn = torch.randn(B, s_new, hk, d, generator=g).to(device=device, dtype=dtype)
    vn = torch.randn(B, s_new, hk, d, generator=g).to(device=device, dtype=dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    k_before, v_before = kc.clone(), vc.clone()
    out, lse = flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=seqlens, block_table=table,
                                       causal=True, return_softmax_lse=True)
    assert torch.equal(seqlens.cpu(), torch.tensor(lens, dtype=torch.int32))  # not updated

    def rows(cache, b, n):  # logical tokens [0, n) of sequence b
        if table is None:
            return cache[b, :n]
        t = torch.arange(n, device=device)
        return cache[table[b, t // page_size].long(), t % page_size]

    expect_k, expect_v = k_before.clone(), v_before.clone()
    for b in range(B):
        t = torch.arange(lens[b], lens[b] + s_new, device=device)
        if table is None:
            expect_k[b, t], expect_v[b, t] = kn[b], vn[b]
        else:
            idx = (table[b, t // page_size].long(), t % page_size)
            expect_k[idx], expect_v[idx] = kn[b], vn[b]
    assert torch.equal(kc, expect_k) and torch.equal(vc, expect_v)
    for b in range(B):
        n = lens[b] + s_new
        ks, vs = rows(kc, b, n)[None], rows(vc, b, n)[None]
        ref, ref_lse = attention_torch(q[b:b + 1], ks, vs, causal=True, dtype=torch.float64)
        naive, _ = attention_torch(q[b:b + 1], ks, vs, causal=True)
        assert_rule("out", out[b:b + 1], ref, naive, n=n, d=d)
        assert_lse(lse[b:b + 1], ref_lse, n=n, d=d)


@pytest.mark.parametrize("num_splits", [1, 2, 5, 32])
def test_kvcache_split_counts(num_splits):
    g = torch.Generator().manual_seed(99)
    B, hq, hk, d, n = 1, 8, 1, 128, 1500
    kc = torch.randn(B, 1536, hk, d, generator=g, dtype=torch.float32)
    vc = torch.randn(B, 1536, hk, d, generator=g, dtype=torch.float32)
    q = torch.randn(B, 1, hq, d, generator=g, dtype=torch.float32)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=n, num_splits=num_splits)
    ref, _ = attention_torch(q, kc[:, :n], vc[:, :n], dtype=torch.float64)
    assert_rule("out", out, ref, None, n=n, d=d)


def test_opcheck_and_compile():
    g = torch.Generator().manual_seed(5)
    q = torch.randn(20, 4, 64, generator=g, requires_grad=True)
    k = torch.randn(26, 2, 64, generator=g, requires_grad=True)
    v = torch.randn(26, 2, 64, generator=g, requires_grad=True)
    cu_q, cu_k = _cu([7, 13], "cpu"), _cu([11, 15], "cpu")
    torch.library.opcheck(torch.ops.flashattn.varlen_fwd.default,
                          (q, k, v, cu_q, cu_k, 13, 15, 0.0, True, -1, -1, 0.0, False))
    kc = torch.randn(2, 32, 2, 64, generator=g)
    vc = torch.randn(2, 32, 2, 64, generator=g)
    qd = torch.randn(2, 1, 4, 64, generator=g)
    kn = torch.randn(2, 1, 2, 64, generator=g)
    lens = torch.tensor([5, 20], dtype=torch.int32)
    torch.library.opcheck(torch.ops.flashattn.kvcache_fwd.default,
                          (qd, kc, vc, lens, None, kn, kn.clone(), 0.0, False, -1, -1, 0.0, 0),
                          test_utils=("test_schema", "test_faketensor"))

    def f(q, k, v):
        return flash_attn_varlen_func(q, k, v, cu_q, cu_k, 13, 15, causal=True).sum()

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert torch.allclose(compiled(q, k, v), f(q, k, v))

    def g2(qd, kc, vc, kn):
        return flash_attn_with_kvcache(qd, kc, vc, kn, kn, cache_seqlens=lens)

    kc1, vc1, kc2, vc2 = kc.clone(), vc.clone(), kc.clone(), vc.clone()
    got = torch.compile(g2, fullgraph=True, backend="eager")(qd, kc1, vc1, kn)
    want = g2(qd, kc2, vc2, kn)
    assert torch.equal(got, want) and torch.equal(kc1, kc2) and torch.equal(vc1, vc2)


def test_errors_name_the_argument():
    q = torch.randn(10, 2, 64)
    k = torch.randn(10, 2, 64)
    with pytest.raises(flashattn.InvalidArgumentError, match="cu_seqlens_q"):
        flash_attn_varlen_func(q, k, k, torch.tensor([0, 6, 5, 10], dtype=torch.int32),
                               torch.tensor([0, 3, 6, 10], dtype=torch.int32), 6, 4)
    kc = torch.randn(1, 16, 2, 64)
    with pytest.raises(flashattn.InvalidArgumentError, match="cache_seqlens"):
        flash_attn_with_kvcache(torch.randn(1, 1, 2, 64), kc, kc.clone(), torch.randn(1, 2, 2, 64),
                                torch.randn(1, 2, 2, 64), cache_seqlens=15)
    with pytest.raises(flashattn.InvalidArgumentError, match="rotary_sin"):
        flash_attn_with_kvcache(torch.randn(1, 1, 2, 64), kc, kc.clone(), torch.randn(1, 1, 2, 64),
                                torch.randn(1, 1, 2, 64), rotary_cos=torch.randn(16, 16), cache_seqlens=3)


def test_kvcache_packed_block_matches_ctypes_struct():
    """kvcache_impl hands fa_forward_kvcache one struct.pack (KVCACHE_PACK):
    the same bytes as the ctypes KvCacheArgs filled field by field."""
    import ctypes

    from flashattn import _capi
    from flashattn._torch_varlen import _tvals

    q = torch.randn(2, 3, 4, 64)
    kc = torch.randn(5, 16, 2, 64)
    lens = torch.tensor([3, 7], dtype=torch.int32)
    bt = torch.tensor([[0, 1], [2, 4]], dtype=torch.int32)
    out = torch.empty_like(q)
    lse = torch.empty(2, 4, 3)
    vals = [_tvals(n, t, t.dim(), index=t.dtype == torch.int32)[1]
            for n, t in (("q", q), ("k_cache", kc), ("v_cache", kc), ("cache_seqlens", lens),
                         ("block_table", bt), ("out", out))]
    tl = (lse.data_ptr(), _capi.FA_F32, _capi.FA_CPU, 0, 3, 2, 4, 3, 0, 12, 3, 1, 0)
    cos = torch.randn(40, 16)
    extra = [_tvals(n, t, t.dim(), index=t.dtype == torch.int32)[1]
             for n, t in (("cache_batch_idx", lens), ("cache_leftpad", lens), ("rotary_cos", cos),
                          ("rotary_sin", cos))]
    packed = _capi.KVCACHE_PACK.pack(*vals[0], *vals[1], *vals[2], *vals[3], *vals[4],
                                     *_capi.NO_TENSOR, *_capi.NO_TENSOR, *vals[5], *tl,
                                     0.5, 2.0, 7, -1, 1, 0, 0, *_capi.NO_VARIANTS, 3,
                                     *extra[0], *extra[1], *extra[2], *extra[3], 1)

    def t(v):
        return _capi.make_tensor(v[0], v[1], v[2], v[3], v[5:5 + v[4]], v[9:9 + v[4]])

    args = _capi.KvCacheArgs(t(vals[0]), t(vals[1]), t(vals[2]), t(vals[3]), t(vals[4]), _capi.Tensor(),
                             _capi.Tensor(), t(vals[5]), t(tl),
                             _capi.make_options(0.5, 2.0, 7, -1, True, False, 0), 3,
                             *(t(x) for x in extra), 1)
    assert packed == ctypes.string_at(ctypes.addressof(args), ctypes.sizeof(args))


def test_varlen_packed_blocks_match_ctypes_structs():
    """The varlen forward and backward hand fa_forward_varlen /
    fa_backward_varlen packed blocks (FORWARD_PACK / BACKWARD_PACK +
    VARLEN_PACK): the same bytes as the ctypes structures filled field by
    field, including the out / lse values _varlen_fwd_impl writes by hand."""
    import ctypes

    from flashattn import _capi
    from flashattn._torch_varlen import _tvals, _varlen_values

    q = torch.randn(11, 4, 64)
    kv = torch.randn(13, 2, 64)
    cu_q = torch.tensor([0, 5, 11], dtype=torch.int32)
    cu_k = torch.tensor([0, 9, 13], dtype=torch.int32)
    out = torch.empty(11, 4, 64)
    lse = torch.empty(4, 11)
    _, tq = _tvals("q", q, 3)
    _, tk = _tvals("k", kv, 3)
    _, to = _tvals("out", out, 3)
    _, tl = _tvals("lse", lse, 2)
    # _varlen_fwd_impl's hand-written values for its own contiguous out / lse:
    assert to == (out.data_ptr(), _capi.FA_F32, _capi.FA_CPU, 0, 3, 11, 4, 64, 0, 256, 64, 1, 0)
    assert tl == (lse.data_ptr(), _capi.FA_F32, _capi.FA_CPU, 0, 2, 4, 11, 0, 0, 11, 1, 0, 0)
    _, vl = _varlen_values(cu_q, cu_k, 6, 9)
    opts = _capi.options_tuple(0.125, 0.0, 3, 0, True, True, 0)

    def t(v):
        return _capi.make_tensor(v[0], v[1], v[2], v[3], v[5:5 + v[4]], v[9:9 + v[4]])

    ctypes_opts = _capi.make_options(0.125, 0.0, 3, 0, True, True, 0)
    fwd = _capi.ForwardArgs(t(tq), t(tk), t(tk), t(to), t(tl), ctypes_opts)
    bwd = _capi.BackwardArgs(t(tq), t(tk), t(tk), t(to), t(to), t(tl), t(tq), t(tk), t(tk), ctypes_opts)
    varlen = _capi.Varlen(t(vl[:13]), t(vl[13:26]), 6, 9)
    assert _capi.FORWARD_PACK.pack(*tq, *tk, *tk, *to, *tl, *opts, *_capi.NO_TENSOR) == \
        ctypes.string_at(ctypes.addressof(fwd), ctypes.sizeof(fwd))
    assert _capi.BACKWARD_PACK.pack(*tq, *tk, *tk, *to, *to, *tl, *tq, *tk, *tk, *opts) == \
        ctypes.string_at(ctypes.addressof(bwd), ctypes.sizeof(bwd))
    assert _capi.VARLEN_PACK.pack(*vl) == ctypes.string_at(ctypes.addressof(varlen), ctypes.sizeof(varlen))


def test_kvcache_bad_input_errors_and_writes_nothing():
    """The packed hot path keeps the checks: each bad argument is named, and
    neither cache is written (the append happens only after every check)."""
    q = torch.randn(1, 1, 2, 64)
    kc, vc = torch.randn(1, 16, 2, 64), torch.randn(1, 16, 2, 64)
    kn, vn = torch.randn(1, 1, 2, 64), torch.randn(1, 1, 2, 64)
    kc0, vc0 = kc.clone(), vc.clone()
    lens = torch.tensor([4], dtype=torch.int32)
    cases = [
        (dict(q=q.to(torch.int64)), flashattn.InvalidArgumentError, "q"),
        (dict(q=q[0]), flashattn.InvalidArgumentError, "q"),
        (dict(cache_seqlens=torch.tensor([16], dtype=torch.int32)), flashattn.InvalidArgumentError,
         "cache_seqlens"),
        (dict(cache_seqlens=torch.tensor([4, 4], dtype=torch.int32)), flashattn.InvalidArgumentError,
         "cache_seqlens"),
        (dict(k=kn[..., :32], v=vn[..., :32]), flashattn.InvalidArgumentError, "k_new|k"),
        (dict(v=None), flashattn.InvalidArgumentError, "k, v"),
        (dict(softcap=float("inf")), ValueError, "softcap"),
        (dict(num_splits=-1), flashattn.InvalidArgumentError, "num_splits"),
    ]
    for over, exc, match in cases:
        a = dict(q=q, k=kn, v=vn, cache_seqlens=lens, softcap=0.0, num_splits=0)
        a.update(over)
        with pytest.raises(exc, match=match):
            flash_attn_with_kvcache(a["q"], kc, vc, a["k"], a["v"], cache_seqlens=a["cache_seqlens"],
                                    softcap=a["softcap"], num_splits=a["num_splits"])
        assert torch.equal(kc, kc0) and torch.equal(vc, vc0), over


def test_kvcache_options_memo_matches_plain_resolution():
    """flash_attn_with_kvcache memoises the option resolution: lists, tuples
    and repeated calls give the same answer as the first call; an invalid
    option still raises."""
    torch.manual_seed(0)
    q = torch.randn(1, 2, 4, 64)
    kc, vc = torch.randn(1, 40, 2, 64), torch.randn(1, 40, 2, 64)
    lens = torch.tensor([33], dtype=torch.int32)
    a = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True, window_size=[8, 4],
                                softmax_scale=0.2, softcap=3.0)
    b = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True, window_size=(8, 4),
                                softmax_scale=0.2, softcap=3.0)
    c = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=False, window_size=(8, 4),
                                softmax_scale=0.2, softcap=3.0)
    assert torch.equal(a, b) and not torch.equal(a, c)
    with pytest.raises(ValueError, match="softmax_scale"):
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, softmax_scale=float("nan"))
    with pytest.raises(TypeError):  # not a pair: as before the memo
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, window_size=5)
