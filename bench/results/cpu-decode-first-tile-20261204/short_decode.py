# cold decode at short contexts: one query token, 32/4 heads, d 128, caches rotated over 1 GiB; prints GB/s medians
import itertools, sys, time, statistics, torch, flashattn
torch.set_grad_enabled(False)
out = []
for SK in (1024, 4096):
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        q = torch.randn(1, 1, 32, 128, dtype=dt)
        kc, vc = (torch.randn(1, SK, 4, 128, dtype=dt) for _ in range(2))
        lens = torch.tensor([SK], dtype=torch.int32)
        nbytes = 2 * SK * 4 * 128 * kc.element_size()
        copies = [(kc.clone(), vc.clone()) for _ in range(-(-(1 << 30) // nbytes))]
        nxt = itertools.cycle(copies)
        ts = []
        for i in range(600):
            k, v = next(nxt)
            t0 = time.perf_counter(); flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=lens); ts.append(time.perf_counter() - t0)
        out.append(f"{name}{SK}:{nbytes / statistics.median(ts[100:]) / 1e9:.1f}")
        del copies, nxt
print(" ".join(out), flush=True)
