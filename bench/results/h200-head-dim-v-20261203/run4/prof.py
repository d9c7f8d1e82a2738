# Per-kernel device time of one 192 / 128 backward call (1k tokens, batch 16, 16 heads) and of 192 / 192.
import torch, flashattn
from torch.profiler import ProfilerActivity, profile
torch.manual_seed(0)
b, n, h = 16, 1024, 16
mk = lambda d: torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
for dv in (128, 192):
    q, k, v = mk(192), mk(192), mk(dv)
    o = flashattn.flash_attn_func(q, k, v)
    g = torch.randn_like(o)
    f = lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
    for _ in range(3): f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10): f()
        torch.cuda.synchronize()
    print(f"== dv {dv}")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
