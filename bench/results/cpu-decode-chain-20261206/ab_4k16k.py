"""Two libflashattn builds alternated in separate processes (four rounds): CPU decode,
one query token, 32 / 4 heads, head dim 128, caches rotated over 1 GiB, GB/s
(K/V bytes / median call time of 40 calls), at 4k and 16k keys, fp32 and bf16.

  OMP_NUM_THREADS=2 PYTHONPATH=python python3 ab_4k16k.py OLD.so NEW.so
"""
import itertools, os, subprocess, sys, time
if len(sys.argv) > 1 and sys.argv[1] == "--child":
    import torch, flashattn
    torch.set_grad_enabled(False)
    out = []
    for dt in (torch.float32, torch.bfloat16):
        for SK in (4096, 16384):
            q = torch.randn(1, 1, 32, 128, dtype=dt)
            kc, vc = (torch.randn(1, SK, 4, 128, dtype=dt) for _ in range(2))
            nb = 2 * kc.numel() * kc.element_size()
            copies = [(kc, vc)] + [(kc.clone(), vc.clone()) for _ in range((1 << 30) // nb)]
            nxt = itertools.cycle(copies)
            ts = []
            for i in range(45):
                k, v = next(nxt)
                t0 = time.perf_counter(); flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=SK); t = time.perf_counter() - t0
                if i >= 5: ts.append(t)
            out.append(f"{str(dt)[6:]}-{SK // 1024}k {nb / sorted(ts)[len(ts) // 2] / 1e9:.1f}")
            del copies
    print(" ".join(out))
else:
    for r in range(4):
        for lib in sys.argv[1:]:
            env = dict(os.environ, FLASHATTN_LIBRARY=lib)
            o = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
            print(os.path.basename(lib), r, o.stdout.strip() or o.stderr[-300:], flush=True)
