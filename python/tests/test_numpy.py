"""flashattn.numpy against the float64 NumPy reference (tests/reference.py)."""

import numpy as np
import pytest

import flashattn
import flashattn.numpy as fanp
from checks import assert_close, assert_lse_close
from reference import attention_naive, attention_ref

try:
    import ml_dtypes

    BF16 = [pytest.param(ml_dtypes.bfloat16, id="bf16")]
except ImportError:  # pragma: no cover
    BF16 = [pytest.param(None, id="bf16", marks=pytest.mark.skip(reason="ml_dtypes not installed"))]

DTYPES = [pytest.param(np.float32, id="fp32"), pytest.param(np.float16, id="fp16")] + BF16

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal, window, softcap)
CASES = [
    (1, 1, 1, 1, 1, 8, False, (-1, -1), 0.0),
    (2, 17, 17, 2, 2, 64, False, (-1, -1), 0.0),
    (2, 17, 17, 2, 2, 64, True, (-1, -1), 0.0),
    (1, 113, 267, 4, 1, 128, True, (-1, -1), 0.0),      # MQA, Sq < Sk
    (1, 267, 113, 6, 2, 256, True, (-1, -1), 0.0),      # GQA 3:1, 154 rows see no key
    (1, 113, 17, 4, 2, 32, True, (-1, -1), 0.0),        # 96 rows see no key
    (1, 1030, 1030, 2, 1, 64, True, (-1, -1), 0.0),
    (1, 1, 1030, 4, 4, 96, False, (-1, -1), 0.0),       # one query, long keys
    (1, 1030, 113, 2, 2, 64, False, (-1, -1), 0.0),     # Sq > Sk, not causal
    (1, 267, 267, 2, 2, 64, False, (32, 8), 0.0),       # sliding window
    (1, 113, 267, 2, 1, 64, False, (16, 0), 0.0),
    (1, 267, 113, 2, 2, 40, False, (0, 0), 0.0),        # diagonal only; early rows empty
    (2, 17, 113, 2, 2, 64, False, (-1, -1), 1.5),       # softcap
    (1, 113, 113, 2, 2, 128, True, (20, -1), 5.0),
    (1, 113, 267, 4, 2, 100, True, (-1, -1), 0.0),      # head dims that are not multiples of 8
    (2, 17, 33, 2, 1, 3, False, (-1, -1), 0.0),
]


def _ids(c):
    b, sq, sk, hq, hk, d, causal, w, cap = c
    s = f"b{b}-q{sq}-k{sk}-h{hq}:{hk}-d{d}"
    s += "-causal" if causal else ""
    s += f"-w{w[0]}:{w[1]}" if w != (-1, -1) else ""
    s += f"-cap{cap}" if cap else ""
    return s


def _inputs(rng, dtype, b, sq, sk, hq, hk, d):
    def r(*shape):
        return rng.standard_normal(shape).astype(dtype)

    return r(b, sq, hq, d), r(b, sk, hk, d), r(b, sk, hk, d), r(b, sq, hq, d)


def _poisoned(shape, dtype):
    return np.full(shape, np.nan, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forward_backward_matches_reference(rng, dtype, case):
    b, sq, sk, hq, hk, d, causal, window, cap = case
    q, k, v, do = _inputs(rng, dtype, b, sq, sk, hq, hk, d)
    kw = dict(causal=causal, window=window, softcap=cap)

    out, lse = fanp.forward(q, k, v, **kw, out=_poisoned(q.shape, dtype),
                            lse=_poisoned((b, hq, sq), np.float32))
    dq, dk, dv = fanp.backward(do, q, k, v, out, lse, **kw, dq=_poisoned(q.shape, dtype),
                               dk=_poisoned(k.shape, dtype), dv=_poisoned(v.shape, dtype))
    assert out.dtype == dtype and dq.dtype == dtype and lse.dtype == np.float32

    ref = attention_ref(q, k, v, do, **kw)
    naive = attention_naive(q, k, v, do, **kw) if dtype != np.float32 else (None,) * 5
    n = max(sq, sk)
    assert_lse_close(lse, ref[1], n=n, d=d)
    for name, x, r, nv in zip(("out", "dq", "dk", "dv"), (out, dq, dk, dv),
                              ref[:1] + ref[2:], naive[:1] + naive[2:]):
        assert_close(name, x, r, nv, n=n, d=d)
    # Rows that see no key: O = 0 exactly, LSE = -inf, dQ = 0.
    empty = np.isneginf(ref[1])  # [b, hq, sq]
    if empty.any():
        rows = empty.transpose(0, 2, 1)  # [b, sq, hq]
        assert (out[rows] == 0).all() and (dq[rows] == 0).all()


def test_softmax_scale_is_used(rng):
    q, k, v, _ = _inputs(rng, np.float32, 1, 17, 33, 2, 2, 64)
    out, lse = fanp.forward(q, k, v, softmax_scale=0.3)
    ref = attention_ref(q, k, v, scale=0.3)
    assert_close("out", out, ref[0], None, n=33, d=64)
    assert_lse_close(lse, ref[1], n=33, d=64)


@pytest.mark.parametrize("layout", ["packed_qkv", "bhsd_transposed", "last_axis_strided"])
def test_strided_inputs(rng, layout):
    b, s, h, d = 2, 37, 4, 64
    if layout == "packed_qkv":  # views into one [B, S, 3, H, D] buffer, no copy
        qkv = rng.standard_normal((b, s, 3, h, d)).astype(np.float32)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    elif layout == "bhsd_transposed":  # BHSD storage seen as BSHD
        q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32).transpose(0, 2, 1, 3)
                   for _ in range(3))
    else:  # last axis not contiguous: copied by the wrapper
        q, k, v = (rng.standard_normal((b, s, h, 2 * d)).astype(np.float32)[..., ::2]
                   for _ in range(3))
    do = rng.standard_normal((b, s, h, d)).astype(np.float32)
    out, lse = fanp.forward(q, k, v, causal=True)
    grads = fanp.backward(do, q, k, v, out, lse, causal=True)
    c = [np.ascontiguousarray(x) for x in (q, k, v)]
    out_c, lse_c = fanp.forward(*c, causal=True)
    grads_c = fanp.backward(do, *c, out_c, lse_c, causal=True)
    ref = attention_ref(q, k, v, do, causal=True)
    assert_close("out", out, ref[0], None, n=s, d=d)
    for name, x, xc, r in zip(("dq", "dk", "dv"), grads, grads_c, ref[2:]):
        assert_close(name, x, r, None, n=s, d=d)
        np.testing.assert_allclose(x, xc, rtol=0, atol=1e-5)
    np.testing.assert_allclose(out, out_c, rtol=0, atol=1e-6)


def test_deterministic_backward_is_bitwise_repeatable(rng):
    q, k, v, do = _inputs(rng, np.float16, 2, 113, 267, 4, 2, 64)
    out, lse = fanp.forward(q, k, v, causal=True)
    a = fanp.backward(do, q, k, v, out, lse, causal=True, deterministic=True)
    b = fanp.backward(do, q, k, v, out, lse, causal=True, deterministic=True)
    for x, y in zip(a, b):
        assert np.array_equal(x.view(np.uint16), y.view(np.uint16))


@pytest.mark.parametrize("shape", [(0, 5, 2, 64), (2, 0, 2, 64)])
def test_empty_is_a_no_op(rng, shape):
    q = np.zeros(shape, np.float32)
    k = rng.standard_normal((shape[0], 7, 2, 64)).astype(np.float32)
    out, lse = fanp.forward(q, k, k)
    assert out.shape == shape and lse.shape == (shape[0], 2, shape[1])


def test_zero_keys_give_zero_output_and_minus_inf_lse(rng):
    q = rng.standard_normal((1, 5, 2, 64)).astype(np.float32)
    k = np.zeros((1, 0, 2, 64), np.float32)
    out, lse = fanp.forward(q, k, k, out=_poisoned(q.shape, np.float32))
    assert (out == 0).all() and np.isneginf(lse).all()


# ---- errors: clear, naming the argument, nothing written ------------------------------
def _base(rng, d=64):
    q = rng.standard_normal((1, 9, 4, d)).astype(np.float32)
    k = rng.standard_normal((1, 11, 2, d)).astype(np.float32)
    return q, k, k.copy()


@pytest.mark.parametrize("bad, match", [
    (lambda q, k, v: (q.astype(np.float64), k, v), r"q: dtype float64"),
    (lambda q, k, v: (q, k.astype(np.float16), v), r"^k: expected dtype"),
    (lambda q, k, v: (q, k, v[:, :10]), r"^v: expected shape"),
    (lambda q, k, v: (q[0], k, v), r"^q: expected 4 dimensions"),
    (lambda q, k, v: (q, k[:, :, :1].repeat(3, axis=2), v[:, :, :1].repeat(3, axis=2)),
     r"heads_q \(4\) must be a multiple of heads_kv \(3\)"),
])
def test_invalid_arguments_name_the_argument(rng, bad, match):
    q, k, v = bad(*_base(rng))
    out = np.full(np.shape(q), np.nan, np.float32) if np.ndim(q) == 4 and q.dtype == np.float32 else None
    with pytest.raises(flashattn.InvalidArgumentError, match=match):
        fanp.forward(q, k, v, out=out)
    if out is not None:
        assert np.isnan(out).all(), "a failed call wrote its output"


def test_unsupported_head_dim(rng):
    q, k, v = _base(rng, d=264)
    with pytest.raises(flashattn.InvalidArgumentError, match=r"head_dim must be in \[1, 256\]"):
        fanp.forward(q, k, v)


def test_python_side_option_checks(rng):
    q, k, v = _base(rng)
    with pytest.raises(ValueError, match="softmax_scale"):
        fanp.forward(q, k, v, softmax_scale=0.0)
    with pytest.raises(ValueError, match="window"):
        fanp.forward(q, k, v, window=(-2, 0))
    with pytest.raises(ValueError, match="softcap"):
        fanp.forward(q, k, v, softcap=-1.0)
    with pytest.raises(flashattn.InvalidArgumentError, match="^out: expected"):
        fanp.forward(q, k, v, out=np.empty((1, 9, 4, 32), np.float32))
    with pytest.raises(TypeError, match="^q: expected a numpy.ndarray"):
        fanp.forward(q.tolist(), k, v)
