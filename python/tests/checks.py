"""The correctness rule of DESIGN.md, for NumPy results.

fp16 / bf16:  max|x - ref| <= 2 * max|naive - ref| + atol,
              atol = eps_dtype / 4 * max(max|ref|, 1)   (a quarter ulp at the largest value)
fp32:         max|x - ref| <= 4 * eps_fp32 * sqrt(N + head_dim) * max(max|ref|, 1),
              N = max(seqlen_q, seqlen_k): the longest reduction (a dot product of
              head_dim terms, then sums over up to N keys or queries) with random-walk
              rounding growth; measured errors on random normal inputs stay below 1/6
              of it for N up to 1030, head_dim up to 256.
lse (fp32 for every input dtype): the fp32 bound, with max(|ref|, 1); -inf exactly
              where the reference has -inf (rows that see no key).
The max(., 1): inputs are unit normal, so rounding errors are at least of unit
scale even where the exact value cancels to 0 (one key: dS = P * (dP - D) = 0).
A NaN anywhere fails.
"""

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)


def eps_of(dtype):
    name = np.dtype(dtype).name
    return {"float32": EPS32, "float16": 2.0**-10, "bfloat16": 2.0**-7}[name]


def fp32_bound(ref, n, d):
    return 4 * EPS32 * np.sqrt(n + d) * max(float(np.abs(ref).max(initial=0.0)), 1.0)


def assert_close(name, x, ref, naive, *, n, d):
    x64 = np.asarray(x).astype(np.float64)
    assert x64.shape == ref.shape, f"{name}: shape {x64.shape} != {ref.shape}"
    assert not np.isnan(x64).any(), f"{name}: NaN in the result"
    if x64.size == 0:
        return
    err = float(np.abs(x64 - ref).max())
    dt = np.dtype(np.asarray(x).dtype)
    if dt == np.float32:
        bound = fp32_bound(ref, n, d)
        rule = f"4*eps32*sqrt(N+D)*max(max|ref|, 1) = {bound:.3g}"
    else:
        naive_err = float(np.abs(np.asarray(naive).astype(np.float64) - ref).max())
        bound = 2 * naive_err + eps_of(dt) / 4 * max(float(np.abs(ref).max()), 1.0)
        rule = f"2*naive_err + atol = 2*{naive_err:.3g} + atol = {bound:.3g}"
    assert err <= bound, f"{name} ({dt.name}): max|x - ref| = {err:.3g} > {rule}"


def assert_lse_close(lse, ref, *, n, d):
    lse = np.asarray(lse).astype(np.float64)
    assert lse.shape == ref.shape, f"lse: shape {lse.shape} != {ref.shape}"
    assert not np.isnan(lse).any(), "lse: NaN in the result"
    ninf = np.isneginf(ref)
    assert np.array_equal(np.isneginf(lse), ninf), "lse: -inf rows differ from the reference"
    fin = ~ninf
    if fin.any():
        err = float(np.abs(lse[fin] - ref[fin]).max())
        bound = 4 * EPS32 * np.sqrt(n + d) * max(float(np.abs(ref[fin]).max()), 1.0)
        assert err <= bound, f"lse: max|lse - ref| = {err:.3g} > {bound:.3g}"
