"""ctypes binding of the flashattn C ABI (include/flashattn/flashattn.h).

Nothing here knows about torch or NumPy: callers hand in raw pointers, shapes
and element strides.  The shared library is found, in this order:

1. ``$FLASHATTN_LIBRARY``: a path to ``libflashattn.so`` (or a folder holding
   it), e.g. a CMake build folder: ``FLASHATTN_LIBRARY=build/src/libflashattn.so``;
2. the copy installed inside this package by ``pip install`` (any folder of
   the package's ``__path__``, so editable installs work too).

The library is opened on first use, so ``import flashattn`` never fails for a
missing library; the first call raises ``FlashAttnLibraryError`` instead.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
from typing import Optional, Sequence

__all__ = [
    "FA_F32", "FA_F16", "FA_BF16", "FA_F8E4M3", "FA_CPU", "FA_CUDA",
    "FlashAttnError", "InvalidArgumentError", "UnsupportedError", "CudaError",
    "InternalError", "FlashAttnLibraryError",
    "Tensor", "Options", "ForwardArgs", "BackwardArgs",
    "lib", "library_path", "make_tensor", "make_options", "forward", "backward",
    "forward_workspace_bytes", "forward_packed", "backward_packed", "options_tuple",
    "FORWARD_PACK", "BACKWARD_PACK", "KVCACHE_PACK", "FP8_DESCALE_PACK", "forward_kvcache_packed",
    "forward_fp8_packed", "VARLEN_PACK", "forward_varlen_packed", "backward_varlen_packed",
    "forward_varlen_fp8_packed",
    "NO_TENSOR", "backward_workspace_bytes", "version", "cuda_available",
]

# ---- enums (must match flashattn.h) ------------------------------------------
FA_F32, FA_F16, FA_BF16 = 0, 1, 2
FA_I32 = 3  # index tensors: cu_seqlens, cache_seqlens, block_table
FA_F8E4M3 = 4  # fp8 e4m3 (torch.float8_e4m3fn): fa_forward_fp8 inputs
FA_CPU, FA_CUDA = 0, 1
FA_OK, FA_ERR_INVALID_ARGUMENT, FA_ERR_UNSUPPORTED, FA_ERR_CUDA, FA_ERR_INTERNAL = 0, 1, 2, 3, 4


# ---- errors --------------------------------------------------------------------
class FlashAttnError(RuntimeError):
    """A call into libflashattn failed; ``status`` is the fa_status code."""

    status = FA_ERR_INTERNAL

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(FlashAttnError, ValueError):
    """Bad shape, dtype, device, stride, alignment or null pointer."""

    status = FA_ERR_INVALID_ARGUMENT


class UnsupportedError(FlashAttnError, NotImplementedError):
    """A valid request this build or device cannot run (head dim, arch, ...)."""

    status = FA_ERR_UNSUPPORTED


class CudaError(FlashAttnError):
    status = FA_ERR_CUDA


class InternalError(FlashAttnError):
    status = FA_ERR_INTERNAL


class FlashAttnLibraryError(FlashAttnError, OSError):
    """libflashattn.so could not be found or opened."""


_ERRORS = {
    FA_ERR_INVALID_ARGUMENT: InvalidArgumentError,
    FA_ERR_UNSUPPORTED: UnsupportedError,
    FA_ERR_CUDA: CudaError,
    FA_ERR_INTERNAL: InternalError,
}


# ---- structs (must match flashattn.h field for field) ------------------------------
class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * 4),
        ("stride", ctypes.c_int64 * 4),
    ]


class Options(ctypes.Structure):
    _fields_ = [
        ("softmax_scale", ctypes.c_float),
        ("softcap", ctypes.c_float),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("causal", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("alibi_slopes", Tensor),  # data NULL = off
        ("dropout_p", ctypes.c_float),
        ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint64),
    ]


class ForwardArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k", "v", "out", "lse")] + [
        ("options", Options), ("dropout_mask", Tensor)]


class BackwardArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv")] + [
        ("options", Options)
    ]


class Varlen(ctypes.Structure):
    _fields_ = [("cu_seqlens_q", Tensor), ("cu_seqlens_k", Tensor),
                ("max_seqlen_q", ctypes.c_int64), ("max_seqlen_k", ctypes.c_int64)]


class KvCacheArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k_cache", "v_cache", "cache_seqlens", "block_table",
                                      "k_new", "v_new", "out", "lse")] + [
        ("options", Options), ("num_splits", ctypes.c_int32)] + [
        (n, Tensor) for n in ("cache_batch_idx", "cache_leftpad", "rotary_cos", "rotary_sin")] + [
        ("rotary_interleaved", ctypes.c_int32)]


# The sizes the C compiler gives these structs on LP64 (checked against the
# header by python/tests/test_package.py, which compiles a probe).
assert ctypes.sizeof(Tensor) == 88 and ctypes.sizeof(Options) == 152

# Hot path: the front ends pack a whole argument block with one struct.pack
# call (a few hundred ns) instead of filling ctypes structures field by field
# (tens of microseconds per call).  A tensor is 13 values: data, dtype,
# device, device_index, ndim, shape[4], stride[4]; options are 23 values in
# fa_options order (7 scalars, the alibi_slopes tensor's 13, dropout_p, seed,
# offset; "4x" is the padding after dropout_p).  The forward block ends with
# the dropout_mask tensor.  Same bytes as the ctypes structures above (tested).
TENSOR_FORMAT = "Q4i4q4q"
OPTIONS_FORMAT = "ffqqiiQ" + TENSOR_FORMAT + "f4xQQ"
FORWARD_PACK = struct.Struct("=" + TENSOR_FORMAT * 5 + OPTIONS_FORMAT + TENSOR_FORMAT)
BACKWARD_PACK = struct.Struct("=" + TENSOR_FORMAT * 9 + OPTIONS_FORMAT)
# fa_kvcache_args: q, k_cache, v_cache, cache_seqlens, block_table, k_new,
# v_new, out, lse, options, num_splits ("4x": padding before the next tensor),
# cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, rotary_interleaved
# ("4x": the struct's tail padding).
KVCACHE_PACK = struct.Struct("=" + TENSOR_FORMAT * 9 + OPTIONS_FORMAT + "i4x" + TENSOR_FORMAT * 4 + "i4x")
# fa_fp8_descale: the q, k, v descale tensors.
FP8_DESCALE_PACK = struct.Struct("=" + TENSOR_FORMAT * 3)
VARLEN_PACK = struct.Struct("=" + TENSOR_FORMAT * 2 + "qq")  # fa_varlen
NO_TENSOR = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)  # e.g. lse not wanted
NO_VARIANTS = NO_TENSOR + (0.0, 0, 0)  # options past stream: no ALiBi, no dropout
assert FORWARD_PACK.size == ctypes.sizeof(ForwardArgs)
assert BACKWARD_PACK.size == ctypes.sizeof(BackwardArgs)
assert KVCACHE_PACK.size == ctypes.sizeof(KvCacheArgs)
assert VARLEN_PACK.size == ctypes.sizeof(Varlen)


# ---- loading -------------------------------------------------------------------
_LIB_NAMES = {"linux": "libflashattn.so", "darwin": "libflashattn.dylib", "win32": "flashattn.dll"}
_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
# The entry points that the hot paths call on packed argument blocks (bytes,
# only read by the callee): name -> ctypes function, filled by _declare.
_raw: dict = {}


def _lib_name() -> str:
    for prefix, name in _LIB_NAMES.items():
        if sys.platform.startswith(prefix):
            return name
    return "libflashattn.so"


def _candidates() -> list:
    found = []
    env = os.environ.get("FLASHATTN_LIBRARY")
    if env:
        found.append(os.path.join(env, _lib_name()) if os.path.isdir(env) else env)
        return found  # an explicit choice is never second-guessed
    # The package folder(s): an editable install (pip install -e) puts the
    # library in site-packages/flashattn while __file__ stays in the source
    # tree; the package's __path__ lists both.
    pkg = sys.modules.get(__package__ or "")
    dirs = list(getattr(pkg, "__path__", None) or [os.path.dirname(os.path.abspath(__file__))])
    found.extend(os.path.join(d, _lib_name()) for d in dirs)
    return found


def _declare(lib: ctypes.CDLL) -> None:
    P = ctypes.POINTER
    lib.fa_options_init.argtypes = [P(Options)]
    lib.fa_options_init.restype = None
    lib.fa_forward.argtypes = [P(ForwardArgs)]
    lib.fa_forward.restype = ctypes.c_int
    lib.fa_backward.argtypes = [P(BackwardArgs)]
    lib.fa_backward.restype = ctypes.c_int
    lib.fa_forward_workspace_bytes.argtypes = [P(ForwardArgs), P(ctypes.c_size_t)]
    lib.fa_forward_workspace_bytes.restype = ctypes.c_int
    lib.fa_backward_workspace_bytes.argtypes = [P(BackwardArgs), P(ctypes.c_size_t)]
    lib.fa_backward_workspace_bytes.restype = ctypes.c_int
    lib.fa_last_error.argtypes = []
    lib.fa_last_error.restype = ctypes.c_char_p
    lib.fa_version_string.argtypes = []
    lib.fa_version_string.restype = ctypes.c_char_p
    lib.fa_version.argtypes = []
    lib.fa_version.restype = ctypes.c_int32
    lib.fa_cuda_available.argtypes = []
    lib.fa_cuda_available.restype = ctypes.c_int32
    lib.fa_forward_varlen.argtypes = [P(ForwardArgs), P(Varlen)]
    lib.fa_forward_varlen.restype = ctypes.c_int
    lib.fa_backward_varlen.argtypes = [P(BackwardArgs), P(Varlen)]
    lib.fa_backward_varlen.restype = ctypes.c_int
    lib.fa_forward_kvcache.argtypes = [P(KvCacheArgs)]
    lib.fa_forward_kvcache.restype = ctypes.c_int
    proto1 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p)
    proto2 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
    proto3 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)
    for name, proto in (("fa_forward", proto1), ("fa_backward", proto1), ("fa_forward_kvcache", proto1),
                        ("fa_forward_fp8", proto2), ("fa_forward_varlen", proto2),
                        ("fa_backward_varlen", proto2), ("fa_forward_varlen_fp8", proto3)):
        _raw[name] = proto((name, lib))


def lib() -> ctypes.CDLL:
    """The opened libflashattn (opened on first call)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            if not os.path.exists(path):
                tried.append(f"{path} (not found)")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            try:
                _declare(handle)
            except AttributeError as e:
                tried.append(f"{path} (not a flashattn library: {e})")
                continue
            _lib, _lib_path = handle, path
            return _lib
        raise FlashAttnLibraryError(
            "could not load libflashattn: tried " + "; ".join(tried)
            + ". Install the package with pip, or set FLASHATTN_LIBRARY to the path of a "
            "libflashattn.so built with CMake."
        )


def library_path() -> str:
    """Path of the loaded shared library (loads it if needed)."""
    lib()
    assert _lib_path is not None
    return _lib_path


def _check(status: int) -> None:
    if status == FA_OK:
        return
    msg = (_lib.fa_last_error() or b"").decode("utf-8", "replace") or f"fa_status {status}"
    raise _ERRORS.get(status, FlashAttnError)(msg, status)


# ---- helpers -------------------------------------------------------------------
def make_tensor(data: int, dtype: int, device: int, device_index: int,
                shape: Sequence[int], stride: Sequence[int]) -> Tensor:
    t = Tensor()
    t.data = data
    t.dtype = dtype
    t.device = device
    t.device_index = device_index
    n = len(shape)
    t.ndim = n
    t.shape[:n] = shape
    t.stride[:n] = stride
    return t


def make_options(softmax_scale: float = 0.0, softcap: float = 0.0, window_left: int = -1,
                 window_right: int = -1, causal: bool = False, deterministic: bool = False,
                 stream: int = 0) -> Options:
    # Field by field rather than fa_options_init + patching: same values, one
    # foreign call less per attention call.  ALiBi and dropout stay off.
    return Options(softmax_scale, softcap, window_left, window_right, int(bool(causal)),
                   int(bool(deterministic)), stream or None, Tensor(), 0.0, 0, 0)


def forward(args: ForwardArgs) -> None:
    _check(lib().fa_forward(ctypes.byref(args)))


def backward(args: BackwardArgs) -> None:
    _check(lib().fa_backward(ctypes.byref(args)))


def forward_kvcache(args: KvCacheArgs) -> None:
    _check(lib().fa_forward_kvcache(ctypes.byref(args)))


_FWD_VALUES_NO_MASK = 5 * 13 + 23


def _call_packed(name: str, *blocks: bytes) -> None:
    """The C function `name` on packed argument blocks; raises on its status."""
    fn = _raw.get(name)
    if fn is None:
        lib()
        fn = _raw[name]
    status = fn(*blocks)
    if status:
        _check(status)


def forward_fp8_packed(forward_values: tuple, descale_values: tuple) -> None:
    """fa_forward_fp8 on FORWARD_PACK.pack(*forward_values) (with the
    dropout_mask tensor) and FP8_DESCALE_PACK.pack(*descale_values)."""
    _call_packed("fa_forward_fp8", FORWARD_PACK.pack(*forward_values),
                 FP8_DESCALE_PACK.pack(*descale_values))


def forward_varlen_fp8_packed(forward_values: tuple, varlen_values: tuple, descale_values: tuple) -> None:
    """fa_forward_varlen_fp8 on FORWARD_PACK.pack(*forward_values) (no
    dropout_mask), VARLEN_PACK.pack(*varlen_values) and
    FP8_DESCALE_PACK.pack(*descale_values)."""
    _call_packed("fa_forward_varlen_fp8", FORWARD_PACK.pack(*forward_values, *NO_TENSOR),
                 VARLEN_PACK.pack(*varlen_values), FP8_DESCALE_PACK.pack(*descale_values))


def forward_varlen_packed(forward_values: tuple, varlen_values: tuple) -> None:
    """fa_forward_varlen on FORWARD_PACK.pack(*forward_values) (q, k, v, out,
    lse, options; no dropout_mask) and VARLEN_PACK.pack(*varlen_values)
    (cu_seqlens_q, cu_seqlens_k: 13 values each; max_seqlen_q, max_seqlen_k)."""
    _call_packed("fa_forward_varlen", FORWARD_PACK.pack(*forward_values, *NO_TENSOR),
                 VARLEN_PACK.pack(*varlen_values))


def backward_varlen_packed(backward_values: tuple, varlen_values: tuple) -> None:
    """fa_backward_varlen on BACKWARD_PACK.pack(*backward_values) and
    VARLEN_PACK.pack(*varlen_values)."""
    _call_packed("fa_backward_varlen", BACKWARD_PACK.pack(*backward_values),
                 VARLEN_PACK.pack(*varlen_values))


def forward_packed(*values) -> None:
    """fa_forward on FORWARD_PACK.pack(*values): q, k, v, out, lse, options
    [, dropout_mask] (left out: none)."""
    if len(values) == _FWD_VALUES_NO_MASK:
        values = values + NO_TENSOR
    _call_packed("fa_forward", FORWARD_PACK.pack(*values))


def backward_packed(*values) -> None:
    """fa_backward on BACKWARD_PACK.pack(*values): q, k, v, out, dout, lse, dq, dk, dv, options."""
    _call_packed("fa_backward", BACKWARD_PACK.pack(*values))


def forward_kvcache_packed(*values) -> None:
    """fa_forward_kvcache on KVCACHE_PACK.pack(*values): q, k_cache, v_cache,
    cache_seqlens, block_table, k_new, v_new, out, lse (13 values each),
    options (23), num_splits, cache_batch_idx, cache_leftpad, rotary_cos,
    rotary_sin (13 each), rotary_interleaved."""
    _call_packed("fa_forward_kvcache", KVCACHE_PACK.pack(*values))


def options_tuple(softmax_scale: float = 0.0, softcap: float = 0.0, window_left: int = -1,
                  window_right: int = -1, causal: bool = False, deterministic: bool = False,
                  stream: int = 0, alibi_slopes: tuple = NO_TENSOR, dropout_p: float = 0.0,
                  dropout_seed: int = 0, dropout_offset: int = 0) -> tuple:
    """The 23 packed fa_options values (alibi_slopes: 13 packed tensor values)."""
    return (softmax_scale, softcap, window_left, window_right, 1 if causal else 0,
            1 if deterministic else 0, stream or 0, *alibi_slopes, dropout_p, dropout_seed,
            dropout_offset)


def forward_workspace_bytes(args: ForwardArgs) -> int:
    n = ctypes.c_size_t(0)
    _check(lib().fa_forward_workspace_bytes(ctypes.byref(args), ctypes.byref(n)))
    return int(n.value)


def backward_workspace_bytes(args: BackwardArgs) -> int:
    n = ctypes.c_size_t(0)
    _check(lib().fa_backward_workspace_bytes(ctypes.byref(args), ctypes.byref(n)))
    return int(n.value)


def version() -> str:
    """Version string of the loaded C library ("MAJOR.MINOR.PATCH")."""
    return lib().fa_version_string().decode()


def cuda_available() -> bool:
    """True if the loaded library carries CUDA kernels and sees a CUDA device."""
    return bool(lib().fa_cuda_available())
