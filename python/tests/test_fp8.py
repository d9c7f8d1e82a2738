"""flashattn.attention_fp8 (e4m3 in, bf16 out) against the float64 torch
reference of the dequantised inputs.  Tolerance: the fp8 kernel rounds P to
e4m3 (3 fraction bits) before P V, so its error is of the order of
2^-4 * max|v| / sqrt(visible keys) plus bf16 rounding (the C++ tests hold
it to DESIGN.md's rule with the fp8 naive as yardstick); the CPU path
computes in fp32 and is held to bf16 rounding.  Also the torch.compile
trace, the descale forms (float, tensor, None) and the errors."""

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from torch_ref import attention_torch  # noqa: E402


def _sm90():
    return (torch.cuda.is_available() and flashattn.cuda_available()
            and torch.cuda.get_device_capability() == (9, 0))


DEVICES = ["cpu"] + (["cuda"] if _sm90() else [])


def _quantised(shape, sigma, descale, g, device):
    x = (torch.randn(shape, generator=g) * sigma).to(torch.float8_e4m3fn).to(device)
    return x, x.to(torch.float64) * descale


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_reference(device, d, causal):
    g = torch.Generator().manual_seed(d + int(causal))
    B, Sq, Sk, Hq, Hk = 2, 150, 333, 4, 2
    q8, q = _quantised((B, Sq, Hq, d), 8.0, 0.125, g, device)
    k8, k = _quantised((B, Sk, Hk, d), 8.0, 0.1171875, g, device)
    v8, v = _quantised((B, Sk, Hk, d), 8.0, 0.2109375, g, device)
    out, lse = flashattn.attention_fp8(q8, k8, v8, q_descale=0.125,
                                       k_descale=torch.tensor(0.1171875, device=device),
                                       v_descale=torch.tensor([0.2109375], device=device),
                                       causal=causal, return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == (B, Sq, Hq, d)
    ref, ref_lse = attention_torch(q, k, v, causal=causal, dtype=torch.float64)
    err = (out.double() - ref).abs().max().item()
    vmax = v.abs().max().item()
    # P's e4m3 rounding (relative 2^-4 at most) averages out over the visible
    # keys, at least Sk - Sq + 1 of them per row here: 4x the random-walk size.
    min_keys = Sk - Sq + 1 if causal else Sk
    tol = (4 * 2.0**-4 * vmax / min_keys**0.5 if device == "cuda" else 0.0) \
        + 2.0**-8 * ref.abs().max().item()
    assert err <= tol, f"max|out - ref| = {err:.4g} > {tol:.4g}"
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.double()), finite)
    assert (lse.double()[finite] - ref_lse[finite]).abs().max().item() < 1e-3


@pytest.mark.parametrize("device", DEVICES)
def test_descale_none_is_one_and_compile(device):
    g = torch.Generator().manual_seed(7)
    q8 = torch.randn(1, 64, 2, 128, generator=g).to(torch.float8_e4m3fn).to(device)
    k8 = torch.randn(1, 80, 2, 128, generator=g).to(torch.float8_e4m3fn).to(device)
    v8 = torch.randn(1, 80, 2, 128, generator=g).to(torch.float8_e4m3fn).to(device)
    a = flashattn.attention_fp8(q8, k8, v8)
    b = flashattn.attention_fp8(q8, k8, v8, q_descale=1.0, k_descale=1.0, v_descale=1.0)
    assert torch.equal(a, b)
    f = torch.compile(lambda x, y, z: flashattn.attention_fp8(x, y, z, v_descale=2.0), fullgraph=True)
    c = f(q8, k8, v8)
    assert torch.allclose(c.float(), 2 * a.float(), rtol=2**-7, atol=0)


def test_errors():
    x = torch.zeros(1, 8, 1, 128, dtype=torch.bfloat16)
    with pytest.raises(flashattn.InvalidArgumentError, match="float8_e4m3fn"):
        flashattn.attention_fp8(x, x, x)
    q8 = x.to(torch.float8_e4m3fn)
    with pytest.raises(flashattn.InvalidArgumentError, match="numel 1"):
        flashattn.attention_fp8(q8, q8, q8, q_descale=torch.ones(2))


def test_flash_attn_func_fp8_keywords():
    """flash_attn_func takes FlashAttention-3's descale keywords for e4m3 inputs."""
    g = torch.Generator().manual_seed(11)
    q8 = (torch.randn(1, 40, 2, 128, generator=g) * 4).to(torch.float8_e4m3fn)
    k8 = (torch.randn(1, 50, 1, 128, generator=g) * 4).to(torch.float8_e4m3fn)
    v8 = (torch.randn(1, 50, 1, 128, generator=g) * 4).to(torch.float8_e4m3fn)
    a = flashattn.flash_attn_func(q8, k8, v8, causal=True, q_descale=0.25, k_descale=0.25,
                                  v_descale=0.5)
    b = flashattn.attention_fp8(q8, k8, v8, causal=True, q_descale=0.25, k_descale=0.25,
                                v_descale=0.5)
    assert a.dtype == torch.bfloat16 and torch.equal(a, b)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flashattn.flash_attn_func(q8, k8, v8, dropout_p=0.1)
    with pytest.raises(ValueError, match="float8_e4m3fn inputs"):
        x = torch.zeros(1, 8, 1, 128)
        flashattn.flash_attn_func(x, x, x, q_descale=1.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d", [96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_reference_per_sequence(device, d, causal):
    """Packed sequences (one of length 0, last key tiles that the next
    sequence's rows fill) against the float64 reference of each sequence;
    flash_attn_varlen_func with FA3's descale keywords gives the same bits,
    and the custom op traces under torch.compile(fullgraph=True)."""
    g = torch.Generator().manual_seed(100 + d + int(causal))
    lens_q, lens_k, Hq, Hk = [37, 0, 300, 129], [100, 7, 261, 129], 4, 2
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=device)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=device)
    q8, q = _quantised((sum(lens_q), Hq, d), 8.0, 0.125, g, device)
    k8, k = _quantised((sum(lens_k), Hk, d), 8.0, 0.1171875, g, device)
    v8, v = _quantised((sum(lens_k), Hk, d), 8.0, 0.2109375, g, device)
    kw = dict(q_descale=0.125, k_descale=0.1171875, v_descale=0.2109375, causal=causal)
    out, lse = flashattn.attention_fp8(q8, k8, v8, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                       max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                                       return_lse=True, **kw)
    assert out.dtype == torch.bfloat16 and out.shape == q8.shape and lse.shape == (Hq, sum(lens_q))
    vmax = v.abs().max().item()
    oq = ok = 0
    for lq, lk in zip(lens_q, lens_k):
        if lq:
            ref, ref_lse = attention_torch(q[oq:oq + lq][None], k[ok:ok + lk][None], v[ok:ok + lk][None],
                                           causal=causal, dtype=torch.float64)
            err = (out[oq:oq + lq].double() - ref[0]).abs().max().item()
            min_keys = max(lk - lq + 1, 1) if causal else lk
            tol = (4 * 2.0**-4 * vmax / min_keys**0.5 if device == "cuda" else 0.0) \
                + 2.0**-8 * ref.abs().max().item()
            assert err <= tol, f"sequence ({lq}, {lk}): max|out - ref| = {err:.4g} > {tol:.4g}"
            got, want = lse[:, oq:oq + lq].double(), ref_lse[0]
            finite = torch.isfinite(want)
            assert torch.equal(torch.isfinite(got), finite)
            assert (got[finite] - want[finite]).abs().max().item() < 1e-3
        oq += lq
        ok += lk
    fa = flashattn.flash_attn_varlen_func(q8, k8, v8, cu_q, cu_k, max(lens_q), max(lens_k), **kw)
    assert torch.equal(fa, out)
    f = torch.compile(lambda x, y, z: flashattn.attention_fp8(
        x, y, z, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
        max_seqlen_k=max(lens_k), **kw), fullgraph=True)
    assert torch.equal(f(q8, k8, v8), out)


def test_varlen_errors():
    x = torch.zeros(8, 1, 128).to(torch.float8_e4m3fn)
    cu = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(flashattn.InvalidArgumentError, match="together"):
        flashattn.attention_fp8(x, x, x, cu_seqlens_q=cu)
    with pytest.raises(flashattn.InvalidArgumentError, match="3 dimensions"):
        flashattn.attention_fp8(x[None], x[None], x[None], cu_seqlens_q=cu, cu_seqlens_k=cu,
                                max_seqlen_q=8, max_seqlen_k=8)
    with pytest.raises(NotImplementedError, match="block_table"):
        flashattn.flash_attn_varlen_func(x, x, x, cu, cu, 8, 8, block_table=cu[None])
