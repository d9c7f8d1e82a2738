# cold decode by GQA group: one query token, d 128, 16k keys, caches rotated over 1 GiB; GB/s medians
import itertools, time, statistics, torch, flashattn
torch.set_grad_enabled(False)
out = []
x = torch.empty(1 << 28)
ts = []
for i in range(8):
    t0 = time.perf_counter(); x.sum(); ts.append(time.perf_counter() - t0)
out.append(f"read:{(1 << 30) / statistics.median(ts) / 1e9:.1f}")
del x
SK = 16384
for hq, hk in ((32, 4), (32, 8), (32, 32)):
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        q = torch.randn(1, 1, hq, 128, dtype=dt)
        kc, vc = (torch.randn(1, SK, hk, 128, dtype=dt) for _ in range(2))
        lens = torch.tensor([SK], dtype=torch.int32)
        nbytes = 2 * SK * hk * 128 * kc.element_size()
        copies = [(kc.clone(), vc.clone()) for _ in range(-(-(1 << 30) // nbytes))]
        nxt = itertools.cycle(copies)
        ts = []
        for i in range(60):
            k, v = next(nxt)
            t0 = time.perf_counter(); flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=lens); ts.append(time.perf_counter() - t0)
        out.append(f"{hq}/{hk}{name}:{nbytes / statistics.median(ts[10:]) / 1e9:.1f}")
        del copies, nxt
print(" ".join(out), flush=True)
