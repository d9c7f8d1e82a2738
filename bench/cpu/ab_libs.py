"""A/B of two (or more) libflashattn builds on the CPU, one process per build
and round, alternated so that every build sees the same host load:

  OMP_NUM_THREADS=2 PYTHONPATH=python python3 bench/cpu/ab_libs.py --rounds 3 OLD.so NEW.so

Shapes: flash_attn_func fp32 B=1 H=8 S=2048 D=128, causal and not (median of 5
calls); flash_attn_with_kvcache decode, one query token, 32 / 4 heads, 1k
and 64k keys, fp32 and bf16 (--decode-dtypes; median of 60 / 15; each call reads the next of
cache copies filling 1 GiB, so from memory: until the tenth session one copy
was timed, cache-warm on a host whose L3 holds it). Prints one line per
(build, round).
"""
import argparse
import itertools
import os
import subprocess
import sys


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def child(decode_dtypes: list) -> None:
    import torch

    import flashattn
    from torch_sdpa import timed  # same folder: the median / min / max timer

    torch.manual_seed(0)
    torch.set_grad_enabled(False)

    def med(f, n):
        return timed(f, n)[0]

    B, H, S, D = 1, 8, 2048, 128
    q, k, v = (torch.randn(B, S, H, D) for _ in range(3))
    fwd = []
    for causal in (False, True):
        t = med(lambda: flashattn.flash_attn_func(q, k, v, causal=causal), 5)
        fwd.append(4 * B * H * S * S * D / (2 if causal else 1) / t / 1e9)
    HQ, HKV = 32, 4
    dec = []
    for SK, n in ((1024, 60), (65536, 15)):
        for name in decode_dtypes:
            dt = getattr(torch, DTYPES[name])
            qd = torch.randn(1, 1, HQ, D, dtype=dt)
            kc, vc = (torch.randn(1, SK, HKV, D, dtype=dt) for _ in range(2))
            lens = torch.tensor([SK], dtype=torch.int32)
            # Calls rotate over copies filling 1 GiB: each reads its cache from
            # memory, not from a last-level cache that can hold it (bench_decode.py).
            nbytes = 2 * SK * HKV * D * kc.element_size()
            copies = [(kc, vc)] + [(kc.clone(), vc.clone()) for _ in range(-(-(1 << 30) // nbytes) - 1)]
            nxt = itertools.cycle(copies)

            def call():
                k, v = next(nxt)
                return flashattn.flash_attn_with_kvcache(qd, k, v, cache_seqlens=lens)
            t = med(call, n)
            dec.append(f"{name} {nbytes / t / 1e9:.2f}")
            del copies, nxt
    nd = len(decode_dtypes)
    print(f"fwd fp32 d128 2k GFLOP/s nc {fwd[0]:.0f} c {fwd[1]:.0f} | decode GB/s 1k {' '.join(dec[:nd])}, "
          f"64k {' '.join(dec[nd:])}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("libs", nargs="*")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode-dtypes", default="fp32,bf16",
                    help="comma-separated decode dtypes of fp32, bf16, fp16 (default fp32,bf16)")
    ap.add_argument("--child", action="store_true")
    a = ap.parse_args()
    dts = a.decode_dtypes.split(",")
    bad = [d for d in dts if d not in DTYPES]
    if bad:
        ap.error(f"unknown --decode-dtypes {bad}: choose from {sorted(DTYPES)}")
    if a.child:
        return child(dts)
    if len(a.libs) < 2:
        ap.error("give at least two library paths")
    for r in range(1, a.rounds + 1):
        for lib in a.libs:
            env = dict(os.environ, FLASHATTN_LIBRARY=os.path.abspath(lib))
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                  "--decode-dtypes", a.decode_dtypes], env=env,
                                 capture_output=True, text=True)
            line = out.stdout.strip() or f"failed: {out.stderr.strip().splitlines()[-1:]}"
            print(f"{os.path.basename(lib)} round {r}: {line}", flush=True)


if __name__ == "__main__":
    main()
