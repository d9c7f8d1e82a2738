"""KV-cache decode on the GPU: flashattn.flash_attn_with_kvcache (sm80 path:
packed GQA + split-KV) against torch SDPA, same process, same inputs.

Grid (issue 8): batch 1 / 8 / 64, context 1k ... 128k, GQA 8:1 (64 query
heads, 8 KV heads), head dim 128 (--head-dim for others), bf16, one query
token per sequence. Achieved bandwidth = K/V bytes read (2 * batch * context
* 8 * head_dim * 2 bytes)
/ median time, set against the device's copy bandwidth measured in the same
run (torch copy_ of 2 GiB: read + write bytes / time). Caches are rotated
over several copies when one is smaller than 512 MB, so that the L2 (50 MB)
never holds the next call's cache. CUDA events, 5 warm-up calls, median of 20
single calls (ms: host time before the launch included, the cost of one
isolated call) and, as ms_stream, the event time of 20 calls queued back to
back / 20 (median of 5 blocks: host and device overlap, so when the kernels
take longer than the host path this is the device's time, the throughput of a
decode loop), and as kernel_ms the device time of one call: the span from
its first kernel's start to its last kernel's end (torch.profiler, median of
20 calls; flashattn's kernels, or every kernel of the SDPA call), which is
what a decode loop replayed from a CUDA graph pays, without host time.
Rows `copy_same_bytes`: a torch copy_ that moves as many bytes as the step
reads (half read, half written; buffers rotated like the caches), timed the
same ways: the bandwidth one kernel reaches at this size, for the fixed costs
(launch ramp, first DRAM round trips, tail) that the 2 GiB figure hides.

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_decode.py out.csv [--head-dim 256]

CSV: impl,batch,context,hq,hkv,d,ms,kv_gbytes,gbps,frac_copy,ms_stream,gbps_stream,
frac_copy_stream,kernel_ms,gbps_kernel,frac_copy_kernel,kernels (+ header lines with
device, driver, date, commit, torch version).
"""
import argparse
import datetime
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import cuda_time_ms, kernel_time, median_ms  # noqa: E402  (bench/gpu/timing.py)

HQ, HKV = 64, 8


def copy_bandwidth():
    n = 2 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * n / (ms * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", help="write the rows here too")
    ap.add_argument("--head-dim", type=int, default=128, help="head dim (default 128, the issue's grid)")
    ap.add_argument("--impls", default="flashattn,torch_sdpa,copy_same_bytes",
                    help="comma list of the rows to time (default: all three)")
    args = ap.parse_args()
    impls = args.impls.split(",")
    out_path, D = args.csv, args.head_dim
    dev = torch.cuda.get_device_name()
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    commit = os.environ.get("FLASHATTN_COMMIT", "unknown")
    copy_gbps = copy_bandwidth()
    lines = [f"# device={dev} driver={drv} date={datetime.datetime.now(datetime.timezone.utc).isoformat()} commit={commit} "
             f"torch={torch.__version__} flashattn={flashattn.library_version()}",
             f"# copy_gbps={copy_gbps:.0f}",
             "impl,batch,context,hq,hkv,d,ms,kv_gbytes,gbps,frac_copy,ms_stream,gbps_stream,frac_copy_stream,"
             "kernel_ms,gbps_kernel,frac_copy_kernel,kernels"]
    print("\n".join(lines), flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in (1, 8, 64):
        for ctx in (1024, 8192, 32768, 131072):
            kv_bytes = 2 * batch * ctx * HKV * D * 2
            copies = max(1, min(16, -(-(512 << 20) // kv_bytes)))
            caches = [(torch.randn(batch, ctx, HKV, D, device="cuda", dtype=torch.bfloat16, generator=gen),
                       torch.randn(batch, ctx, HKV, D, device="cuda", dtype=torch.bfloat16, generator=gen))
                      for _ in range(copies)]
            q = torch.randn(batch, 1, HQ, D, device="cuda", dtype=torch.bfloat16, generator=gen)
            lens = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
            state = {"i": 0}

            def fa():
                kc, vc = caches[state["i"] % copies]
                state["i"] += 1
                flashattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)

            # SDPA: [B, H, S, D] views of the same caches (no copy), GQA through enable_gqa.
            qt = q.transpose(1, 2)
            views = [(kc.transpose(1, 2), vc.transpose(1, 2)) for kc, vc in caches]

            def sdpa():
                kt, vt = views[state["i"] % copies]
                state["i"] += 1
                F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)

            # Correctness spot check against SDPA on the first cache.
            ref = F.scaled_dot_product_attention(qt, *views[0], enable_gqa=True).transpose(1, 2)
            got = flashattn.flash_attn_with_kvcache(q, caches[0][0], caches[0][1], cache_seqlens=lens)
            err = (got.float() - ref.float()).abs().max().item()
            half = kv_bytes // 2
            bufs = [(torch.empty(half, dtype=torch.uint8, device="cuda"),
                     torch.empty(half, dtype=torch.uint8, device="cuda")) for _ in range(copies)]

            def copy_same():
                src, dst = bufs[state["i"] % copies]
                state["i"] += 1
                dst.copy_(src)

            for impl, f in (("flashattn", fa), ("torch_sdpa", sdpa), ("copy_same_bytes", copy_same)):
                if impl not in impls:
                    continue
                try:
                    ms = median_ms(f)
                    ms_stream = cuda_time_ms(f, iters=20)
                    names, kms = kernel_time(f, only="flashattn::" if impl == "flashattn" else None, span=True)
                except RuntimeError as e:  # e.g. out of memory in a fallback backend
                    print(f"# {impl} batch={batch} context={ctx}: {str(e).splitlines()[0]}", flush=True)
                    torch.cuda.empty_cache()
                    continue
                gbps = kv_bytes / (ms * 1e-3) / 1e9
                gbps_s = kv_bytes / (ms_stream * 1e-3) / 1e9
                line = (f"{impl},{batch},{ctx},{HQ},{HKV},{D},{ms:.4f},{kv_bytes / 1e9:.4f},{gbps:.0f},"
                        f"{gbps / copy_gbps:.3f},{ms_stream:.4f},{gbps_s:.0f},{gbps_s / copy_gbps:.3f},")
                if kms:
                    gbps_k = kv_bytes / (kms * 1e-3) / 1e9
                    line += f"{kms:.4f},{gbps_k:.0f},{gbps_k / copy_gbps:.3f},"
                else:
                    line += ",,,"
                line += names.replace(",", ";")
                print(line, flush=True)
                lines.append(line)
            print(f"# max|flashattn - sdpa| = {err:.3g} (batch {batch}, context {ctx})", flush=True)
            lines.append(f"# max|flashattn - sdpa| = {err:.3g} (batch {batch}, context {ctx})")
            del caches, views, bufs
            torch.cuda.empty_cache()
    if out_path:
        with open(out_path, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
