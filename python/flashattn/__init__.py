"""flashattn: exact FlashAttention on CPU and CUDA, over the libflashattn C ABI.

PyTorch (optional; CPU and CUDA tensors, autograd, torch.compile)::

    import flashattn
    out = flashattn.attention(q, k, v, causal=True)           # [B, S, H, D]
    out = flashattn.flash_attn_func(q, k, v, causal=True)     # flash-attn's API
    out = flashattn.attention_fp8(q8, k8, v8, q_descale=sq, k_descale=sk, v_descale=sv)  # e4m3 in, bf16 out

NumPy (CPU)::

    import flashattn.numpy
    out, lse = flashattn.numpy.forward(q, k, v, causal=True)

``import flashattn`` needs neither torch nor the shared library: the torch
front end is imported on first use of a torch function (or right away when
torch is already imported), and libflashattn is opened on the first call.
Set ``FLASHATTN_LIBRARY`` to a libflashattn.so path to use a CMake build.
"""

from __future__ import annotations

import importlib
import sys

from ._capi import (  # noqa: F401
    CudaError,
    FlashAttnError,
    FlashAttnLibraryError,
    InternalError,
    InvalidArgumentError,
    UnsupportedError,
    cuda_available,
    library_path,
)
from ._capi import version as library_version  # noqa: F401

__version__ = "0.1.0"

_TORCH_NAMES = {
    "attention": "_torch_ops",
    "attention_fp8": "_torch_fp8",  # fp8 (e4m3) forward, bf16 out
    "flash_attn_func": "flash_attn_interface",
    "flash_attn_qkvpacked_func": "flash_attn_interface",
    "flash_attn_kvpacked_func": "flash_attn_interface",
    "flash_attn_varlen_func": "flash_attn_interface",
    "flash_attn_varlen_qkvpacked_func": "flash_attn_interface",
    "flash_attn_varlen_kvpacked_func": "flash_attn_interface",
    "flash_attn_with_kvcache": "flash_attn_interface",
    "ring_flash_attn_func": "ring",  # context parallelism over torch.distributed
}

__all__ = [
    "attention", "attention_fp8", "flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
    "flash_attn_varlen_func", "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func", "flash_attn_with_kvcache", "ring_flash_attn_func",
    "FlashAttnError", "InvalidArgumentError", "UnsupportedError", "CudaError", "InternalError",
    "FlashAttnLibraryError", "cuda_available", "library_path", "library_version",
]


def __getattr__(name: str):
    mod = _TORCH_NAMES.get(name)
    if mod is not None:
        try:
            m = importlib.import_module(f".{mod}", __name__)
        except ModuleNotFoundError as e:
            if e.name == "torch":
                raise ImportError(
                    f"flashattn.{name} needs PyTorch (pip install torch); for NumPy arrays use "
                    "flashattn.numpy.forward / backward") from e
            raise
        value = getattr(m, name)
        globals()[name] = value
        return value
    if name == "numpy":
        return importlib.import_module(".numpy", __name__)
    raise AttributeError(f"module 'flashattn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_TORCH_NAMES) | {"numpy"})


# With torch already imported the ops cost nothing extra to register, and
# torch.ops.flashattn.* then exist as soon as flashattn is imported.
if sys.modules.get("torch") is not None:
    from ._torch_ops import attention  # noqa: E402,F401
    from ._torch_fp8 import attention_fp8  # noqa: E402,F401
    from .flash_attn_interface import (  # noqa: E402,F401
        flash_attn_func,
        flash_attn_kvpacked_func,
        flash_attn_qkvpacked_func,
        flash_attn_varlen_func,
        flash_attn_varlen_kvpacked_func,
        flash_attn_varlen_qkvpacked_func,
        flash_attn_with_kvcache,
    )
