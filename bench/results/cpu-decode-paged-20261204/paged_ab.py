"""Paged vs contiguous CPU decode: flash_attn_with_kvcache, batch 1, 32/4 heads, d 128, one token."""
import sys, time, torch, flashattn
torch.manual_seed(0)
HQ, HKV, D = 32, 4, 128
ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
rot = 6  # copies rotated so K/V come from memory
def med(f, n=15):
    for _ in range(3): f()
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    ts.sort(); return ts[n // 2]
for dt in (torch.bfloat16, torch.float32):
    q = torch.randn(1, 1, HQ, D, dtype=dt)
    seqlens = torch.tensor([ctx], dtype=torch.int32)
    byt = 2 * ctx * HKV * D * q.element_size()
    caches = [(torch.randn(1, ctx, HKV, D, dtype=dt), torch.randn(1, ctx, HKV, D, dtype=dt)) for _ in range(rot)]
    it = [0]
    def contig():
        k, v = caches[it[0] % rot]; it[0] += 1
        return flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens)
    ref = flashattn.flash_attn_with_kvcache(q, caches[0][0], caches[0][1], cache_seqlens=seqlens)
    t = med(contig)
    print(f"{dt} ctx {ctx} contiguous {t*1e3:.3f} ms {byt/t/1e9:.1f} GB/s", flush=True)
    for ps in (16, 64, 256):
        npg = ctx // ps
        paged = []
        for k, v in caches:
            perm = torch.randperm(npg)
            kp = torch.empty(npg, ps, HKV, D, dtype=dt); vp = torch.empty_like(kp)
            kp[perm] = k.view(npg, ps, HKV, D); vp[perm] = v.view(npg, ps, HKV, D)
            paged.append((kp, vp, perm.to(torch.int32).view(1, npg)))
        def pg():
            kp, vp, bt = paged[it[0] % rot]; it[0] += 1
            return flashattn.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=seqlens, block_table=bt)
        it[0] = 0
        o = pg()
        err = (o.float() - ref.float()).abs().max().item()
        t = med(pg)
        print(f"{dt} ctx {ctx} page {ps} {t*1e3:.3f} ms {byt/t/1e9:.1f} GB/s  max|paged-contig| {err:.2e}", flush=True)
