"""Package-level behaviour: import without torch, the loader, the C struct layout,
the flash-attn compatible API surface."""

import inspect
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import flashattn
from flashattn import _capi

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(flashattn.__file__)))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code, env=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = PKG_PARENT + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                          capture_output=True, text=True, timeout=120)


def test_import_and_numpy_without_torch():
    r = _python("""
        import sys
        sys.modules["torch"] = None          # `import torch` now raises ImportError
        import numpy as np
        import flashattn, flashattn.numpy as fanp
        q = np.random.default_rng(0).standard_normal((1, 3, 2, 8)).astype(np.float32)
        out, lse = fanp.forward(q, q, q)
        assert out.shape == q.shape
        try:
            flashattn.attention
        except ImportError as e:
            assert "needs PyTorch" in str(e), e
        else:
            raise AssertionError("flashattn.attention without torch")
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_import_does_not_load_torch_or_the_library():
    r = _python("""
        import sys, flashattn
        print("torch" in sys.modules, flashattn._capi._lib is None)
    """, env={"FLASHATTN_LIBRARY": "/nonexistent/libflashattn.so"})
    assert r.returncode == 0 and r.stdout.split() == ["False", "True"], r.stderr


def test_missing_library_error_names_the_paths():
    r = _python("""
        import flashattn
        try:
            flashattn.library_version()
        except flashattn.FlashAttnLibraryError as e:
            print(e)
    """, env={"FLASHATTN_LIBRARY": "/nonexistent/libflashattn.so"})
    assert "/nonexistent/libflashattn.so (not found)" in r.stdout and "FLASHATTN_LIBRARY" in r.stdout


def test_version_matches_the_library():
    assert flashattn.library_version() == flashattn.__version__
    assert _capi.lib().fa_version() == 100  # 0.1.0


def test_struct_layout_matches_the_header(tmp_path):
    """Compile a probe against include/flashattn/flashattn.h and compare
    sizeof/offsetof with the ctypes structs."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    header = os.path.join(REPO, "include", "flashattn", "flashattn.h")
    if cc is None or not os.path.exists(header):
        pytest.skip("needs a C compiler and the source tree")
    fields = {
        "fa_tensor": (_capi.Tensor, [f for f, _ in _capi.Tensor._fields_]),
        "fa_options": (_capi.Options, [f for f, _ in _capi.Options._fields_]),
        "fa_forward_args": (_capi.ForwardArgs, [f for f, _ in _capi.ForwardArgs._fields_]),
        "fa_backward_args": (_capi.BackwardArgs, [f for f, _ in _capi.BackwardArgs._fields_]),
    }
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "flashattn/flashattn.h"',
             "int main(void) {"]
    for s, (_, names) in fields.items():
        lines.append(f'printf("{s} %zu\\n", sizeof({s}));')
        for n in names:
            lines.append(f'printf("{s}.{n} %zu\\n", offsetof({s}, {n}));')
    lines.append("return 0; }")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "probe"
    subprocess.run([cc, "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)], check=True)
    got = dict(l.rsplit(" ", 1) for l in subprocess.run([str(exe)], capture_output=True, text=True,
                                                           check=True).stdout.splitlines())
    import ctypes

    for s, (cls, names) in fields.items():
        assert int(got[s]) == ctypes.sizeof(cls), s
        for n in names:
            assert int(got[f"{s}.{n}"]) == getattr(cls, n).offset, f"{s}.{n}"


def test_status_codes_map_to_exceptions():
    import numpy as np

    q = np.zeros((1, 2, 2, 8), np.float32)
    t = _capi.make_tensor(q.ctypes.data, _capi.FA_F32, _capi.FA_CPU, 0, q.shape, (32, 16, 8, 1))
    bad = _capi.make_tensor(None, _capi.FA_F32, _capi.FA_CPU, 0, q.shape, (32, 16, 8, 1))
    with pytest.raises(_capi.InvalidArgumentError, match="null pointer") as e:
        _capi.forward(_capi.ForwardArgs(bad, t, t, t, _capi.Tensor(), _capi.make_options()))
    assert e.value.status == _capi.FA_ERR_INVALID_ARGUMENT
    assert isinstance(e.value, ValueError) and isinstance(e.value, flashattn.FlashAttnError)
    assert issubclass(flashattn.UnsupportedError, NotImplementedError)
    # CUDA tensors in a CPU-only build are 'unsupported' or a device error, never a crash.
    if not flashattn.cuda_available():
        cu = _capi.make_tensor(1 << 20, _capi.FA_F32, _capi.FA_CUDA, 0, q.shape, (32, 16, 8, 1))
        with pytest.raises(flashattn.FlashAttnError):
            _capi.forward(_capi.ForwardArgs(cu, cu, cu, cu, _capi.Tensor(), _capi.make_options()))


# ---- flash-attn compatible API --------------------------------------------------------
# flash-attn 2.x signatures (flash_attn/flash_attn_interface.py), names and defaults.
FLASH_ATTN_SIGNATURES = {
    "flash_attn_func": "q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False",
    "flash_attn_qkvpacked_func": "qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False",
    "flash_attn_kvpacked_func": "q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False",
    "flash_attn_varlen_func": "q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None",
    "flash_attn_varlen_qkvpacked_func": "qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False",
    "flash_attn_varlen_kvpacked_func": "q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False",
    "flash_attn_with_kvcache": "q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False",
}


# flashattn's additions: keyword-only, after flash-attn's own parameters, so
# every flash-attn call binds the same (FlashAttention-3's fp8 descales).
FLASHATTN_KEYWORD_EXTRAS = {"flash_attn_func": ["q_descale", "k_descale", "v_descale"],
                            "flash_attn_varlen_func": ["q_descale", "k_descale", "v_descale"]}


@pytest.mark.parametrize("name", sorted(FLASH_ATTN_SIGNATURES))
def test_flash_attn_signatures(name):
    pytest.importorskip("torch")
    from flashattn import flash_attn_interface as fai

    params = list(inspect.signature(getattr(fai, name)).parameters.values())
    extras = FLASHATTN_KEYWORD_EXTRAS.get(name, [])
    own = params[:len(params) - len(extras)]
    got = ", ".join(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                    for p in own)
    assert got == FLASH_ATTN_SIGNATURES[name]
    tail = params[len(own):]
    assert [p.name for p in tail] == extras
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None for p in tail)
    assert getattr(flashattn, name) is getattr(fai, name)


def test_flash_attn_functions_map_to_attention():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(2, 19, 3, 4, 32, generator=g)
    q, k, v = qkv.unbind(2)
    kw = dict(softmax_scale=0.2, causal=True, window_size=(8, -1), softcap=3.0)
    ref = flashattn.attention(q, k, v, softmax_scale=0.2, causal=True, window=(8, -1), softcap=3.0)
    for out in (flashattn.flash_attn_func(q, k, v, **kw),
                flashattn.flash_attn_qkvpacked_func(qkv, **kw),
                flashattn.flash_attn_kvpacked_func(q, qkv[:, :, 1:], **kw),
                flashattn.flash_attn_func(q, k, v, deterministic=True, **kw)):
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
    # qkvpacked: one gradient for the packed buffer
    qkv.requires_grad_()
    flashattn.flash_attn_qkvpacked_func(qkv, causal=True).sum().backward()
    assert qkv.grad.shape == qkv.shape and qkv.grad.abs().sum() > 0


@pytest.mark.parametrize("kwargs, match", [
    ({"return_attn_probs": True}, "return_attn_probs"),
])
def test_flash_attn_varlen_unsupported_arguments_raise(kwargs, match):
    """The varlen functions have ALiBi and dropout (test_varlen_variants.py)
    but return no dropout mask: return_attn_probs is refused by name."""
    torch = pytest.importorskip("torch")
    q = torch.randn(4, 2, 16)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match=match):
        flashattn.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, **kwargs)


@pytest.mark.parametrize("name, kwargs, match", [
    ("flash_attn_varlen_func", {"block_table": 1}, "block_table"),
])
def test_flash_attn_missing_features_raise(name, kwargs, match):
    """Varlen exists (python/tests/test_varlen.py); a paged varlen call does not yet."""
    pytest.importorskip("torch")
    fn = getattr(flashattn, name)
    nargs = sum(p.default is inspect.Parameter.empty for p in inspect.signature(fn).parameters.values())
    with pytest.raises(NotImplementedError, match=match):
        fn(*([None] * nargs), **kwargs)


def test_packed_arguments_equal_the_ctypes_structs():
    """The hot path's struct.pack blocks are byte for byte the ctypes structures."""
    import ctypes

    vals = [(0x1000 * (i + 1), 1, 1, 2, 4, 2, 3, 4, 64, 768, 256, 64, 1) for i in range(9)]
    opts = (0.125, 30.0, 8, -1, 1, 1, 0xDEAD)
    ts = [_capi.make_tensor(v[0], v[1], v[2], v[3], v[5:9], v[9:13]) for v in vals]
    o = _capi.make_options(*opts)
    fwd = _capi.ForwardArgs(*ts[:5], o)
    bwd = _capi.BackwardArgs(*ts, o)
    flat = [x for v in vals for x in v]
    packed = _capi.options_tuple(*opts)
    assert _capi.FORWARD_PACK.pack(*flat[:65], *packed, *_capi.NO_TENSOR) == ctypes.string_at(ctypes.addressof(fwd), ctypes.sizeof(fwd))
    assert _capi.BACKWARD_PACK.pack(*flat, *packed) == ctypes.string_at(ctypes.addressof(bwd), ctypes.sizeof(bwd))
    # ALiBi and dropout fields in place: the same bytes both ways.
    o2 = _capi.Options(*opts[:6], opts[6], ts[8], 0.25, 2**64 - 3, 7)
    packed2 = _capi.options_tuple(*opts, alibi_slopes=vals[8], dropout_p=0.25, dropout_seed=2**64 - 3,
                                  dropout_offset=7)
    fwd2 = _capi.ForwardArgs(*ts[:5], o2, ts[7])
    assert _capi.FORWARD_PACK.pack(*flat[:65], *packed2, *vals[7]) == ctypes.string_at(ctypes.addressof(fwd2), ctypes.sizeof(fwd2))


def test_compile_fullgraph_when_flashattn_is_imported_before_torch():
    """flashattn.attention resolved lazily (inside the traced function) must
    not break the graph."""
    pytest.importorskip("torch")
    r = _python("""
        import flashattn
        import torch
        f = torch.compile(lambda q: flashattn.attention(q, q, q, causal=True).sum(),
                          fullgraph=True, backend="aot_eager")
        q = torch.randn(1, 5, 2, 16)
        torch.testing.assert_close(f(q), flashattn.attention(q, q, q, causal=True).sum())
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
