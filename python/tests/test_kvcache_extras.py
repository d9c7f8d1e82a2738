"""flash_attn_with_kvcache's rotary_cos / rotary_sin / rotary_interleaved,
cache_batch_idx and cache_leftpad against a torch reference that writes the
rotation out on its own (float64, then rounded to the dtype as the library's
fp32 rotation is): the appended cache rows, the output and the LSE, on CPU and
(when present) CUDA, eagerly and through torch.ops.flashattn.kvcache_fwd."""

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from flashattn import flash_attn_with_kvcache  # noqa: E402
from torch_ref import assert_lse, assert_rule, attention_torch  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and flashattn.cuda_available() else [])


@pytest.fixture(params=["eager", "op"])
def path(request, monkeypatch):
    from flashattn import _torch_ops

    monkeypatch.setattr(_torch_ops, "EAGER_FAST_PATH", request.param == "eager")
    return request.param


def rope_tables(n, rotary_dim, dtype, device):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    ang = pos * freq[None]
    return torch.cos(ang).to(device=device, dtype=dtype), torch.sin(ang).to(device=device, dtype=dtype)


def rotate(x, cos, sin, interleaved):
    """x [..., d] (float64) rotated with cos / sin [..., rotary_dim / 2]
    broadcast over x's leading dims; dims past rotary_dim pass through."""
    rd = cos.shape[-1] * 2
    xr, rest = x[..., :rd], x[..., rd:]
    if interleaved:
        x0, x1 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    else:
        x0, x1 = xr[..., : rd // 2], xr[..., rd // 2:]
        y = torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return torch.cat((y, rest), dim=-1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_rotary_leftpad_batch_idx(device, interleaved, causal, path):
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    g = torch.Generator().manual_seed(11 + 2 * interleaved + causal)
    B, sq, hq, hk, d, rd, s_new, cap, entries = 3, 3, 8, 2, 128, 64, 2, 96, 5
    lens, left = [40, 7, 90], [5, 7, 0]
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device=device)
    kc = torch.randn(entries, cap, hk, d, generator=g).to(device=device, dtype=dtype)
    vc = torch.randn(entries, cap, hk, d, generator=g).to(device=device, dtype=dtype)
    q = torch.randn(B, sq, hq, d, generator=g).to(device=device, dtype=dtype)
    kn = torch.randn(B, s_new, hk, d, generator=g).to(device=device, dtype=dtype)
    vn = torch.randn(B, s_new, hk, d, generator=g).to(device=device, dtype=dtype)
    cos, sin = rope_tables(cap + sq, rd, dtype, device)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    leftpad = torch.tensor(left, dtype=torch.int32, device=device)
    k_before, v_before = kc.clone(), vc.clone()
    out, lse = flash_attn_with_kvcache(q, kc, vc, kn, vn, rotary_cos=cos, rotary_sin=sin, cache_seqlens=seqlens,
                                       cache_batch_idx=idx, cache_leftpad=leftpad, causal=causal,
                                       rotary_interleaved=interleaved, return_softmax_lse=True)
    expect_k, expect_v = k_before.clone(), v_before.clone()
    for b in range(B):
        e, t = int(idx[b]), torch.arange(lens[b], lens[b] + s_new, device=device)
        c, s = cos[t].double()[:, None], sin[t].double()[:, None]  # [s_new, 1, rd / 2]
        expect_k[e, t] = rotate(kn[b].double(), c, s, interleaved).to(dtype)
        expect_v[e, t] = vn[b]
    # An fp32 rotation may round an element to the neighbouring value.
    torch.testing.assert_close(kc, expect_k, rtol=2 ** -7, atol=1e-3)
    assert torch.equal(vc, expect_v)
    untouched = torch.ones(entries, dtype=torch.bool)
    untouched[idx.cpu().long()] = False
    assert torch.equal(kc[untouched.to(device)], k_before[untouched.to(device)])
    for b in range(B):
        e = int(idx[b])
        pos = lens[b] + (torch.arange(sq, device=device) if causal else torch.zeros(sq, device=device).long())
        c, s = cos[pos].double()[:, None], sin[pos].double()[:, None]
        qb = rotate(q[b].double(), c, s, interleaved).to(dtype)[None]
        n = lens[b] + s_new - left[b]
        ks, vs = kc[e, left[b]:lens[b] + s_new][None], vc[e, left[b]:lens[b] + s_new][None]
        ref, ref_lse = attention_torch(qb, ks, vs, causal=causal, dtype=torch.float64)
        naive, _ = attention_torch(qb, ks, vs, causal=causal)
        assert_rule("out", out[b:b + 1], ref, naive, n=n, d=d)
        assert_lse(lse[b:b + 1], ref_lse, n=n, d=d)


@pytest.mark.parametrize("device", DEVICES)
def test_rotary_needs_new_keys_and_leftpad_is_checked(device):
    dtype = torch.float16
    kc = torch.zeros(2, 32, 1, 64, device=device, dtype=dtype)
    q = torch.zeros(2, 1, 2, 64, device=device, dtype=dtype)
    cos, sin = rope_tables(40, 32, dtype, device)
    with pytest.raises(flashattn.InvalidArgumentError, match="rotary_cos"):
        flash_attn_with_kvcache(q, kc, kc.clone(), rotary_cos=cos, rotary_sin=sin, cache_seqlens=3)
    if device == "cpu":  # index values are read on the host for CPU tensors only
        with pytest.raises(flashattn.InvalidArgumentError, match="cache_leftpad"):
            flash_attn_with_kvcache(q, kc, kc.clone(), cache_seqlens=3,
                                    cache_leftpad=torch.tensor([4, 0], dtype=torch.int32))


def test_opcheck_with_extras():
    """The custom op's schema and fake impl with every optional input set."""
    g = torch.Generator().manual_seed(5)
    kc = torch.randn(4, 32, 2, 64, generator=g)
    vc = torch.randn(4, 32, 2, 64, generator=g)
    qd = torch.randn(2, 2, 4, 64, generator=g)
    kn = torch.randn(2, 1, 2, 64, generator=g)
    lens = torch.tensor([5, 20], dtype=torch.int32)
    idx = torch.tensor([3, 1], dtype=torch.int32)
    left = torch.tensor([2, 0], dtype=torch.int32)
    cos, sin = rope_tables(40, 32, torch.float32, "cpu")
    torch.library.opcheck(torch.ops.flashattn.kvcache_fwd.default,
                          (qd, kc, vc, lens, None, kn, kn.clone(), 0.0, True, -1, 0, 0.0, 0, None, idx, left,
                           cos, sin, False),
                          test_utils=("test_schema", "test_faketensor"))
