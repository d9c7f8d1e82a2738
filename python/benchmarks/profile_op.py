"""Where the torch op's per-call time goes (a development aid for call_overhead.py)."""
import sys
import timeit

import torch

import flashattn
from flashattn import _torch_ops as T_

dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
dt = torch.bfloat16 if dev == "cuda" else torch.float32
x = torch.zeros(1, 1, 1, 64, device=dev, dtype=dt)
idx = x.device.index or 0


def T(stmt, number=5000):
    t = min(timeit.repeat(stmt, globals=globals(), number=number, repeat=5)) / number * 1e6
    print(f"{stmt:78s} {t:7.2f} us")


T("T_.fwd._init_fn(x,x,x,0.0,False,-1,-1,0.0,False)")
T("torch.ops.flashattn.fwd.default(x,x,x,0.0,False,-1,-1,0.0,False)")
with torch.inference_mode():
    T("torch.ops.flashattn.fwd.default(x,x,x,0.0,False,-1,-1,0.0,False)")
T("T_._view('q', x)")
T("torch.empty((1,1,1,64), dtype=x.dtype, device=x.device)")
T("x.device")
T("x.data_ptr()")
T("T_._stream(x)")
if dev == "cuda":
    T("torch._C._cuda_getCurrentRawStream(idx)")
    T("torch.cuda.current_stream(x.device).cuda_stream")
T("torch.sin(x)")
T("torch.ops.aten.sin.default(x)")
if dev == "cuda":
    torch.cuda.synchronize()
