import itertools, math, sys, time, torch, flashattn
ctx = int(sys.argv[1]); iters = int(sys.argv[2]); dt = torch.bfloat16 if len(sys.argv) < 4 else getattr(torch, sys.argv[3])
g = torch.Generator().manual_seed(0)
kc = torch.randn(1, ctx, 4, 128, generator=g).to(dt); vc = torch.randn(1, ctx, 4, 128, generator=g).to(dt)
q = torch.randn(1, 1, 32, 128, generator=g).to(dt)
kvb = 2 * kc.numel() * kc.element_size(); n = int(sys.argv[4]) if len(sys.argv) > 4 else max(1, math.ceil((1 << 30) / kvb))
caches = [(kc, vc)] + [(kc.clone(), vc.clone()) for _ in range(n - 1)]
ts = []
for i in range(iters):
    k, v = caches[i % n]
    t0 = time.perf_counter(); flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=ctx); ts.append(time.perf_counter() - t0)
ts.sort(); print(f"median {ts[len(ts)//2]*1e3:.3f} ms  {kvb/ts[len(ts)//2]/1e9:.2f} GB/s")
