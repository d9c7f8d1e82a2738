#!/usr/bin/env python3
"""Varlen (packed + cu_seqlens) against padded prefill of the same tokens (issue 8:
"varlen prefill within 5% of the padded-batch speed of the same kernel").

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_varlen.py OUT.csv

Shapes: batch 8 x seqlen {1k, 2k, 4k} (every sequence full length, so both
layouts do the same work), 16 heads, head dim 128, bf16, causal and not.
padded: flash_attn_func on [B, S, H, D]; varlen: flash_attn_varlen_func on
[B*S, H, D] with cu_seqlens = 0, S, 2S, ... Forward, and forward+backward
through autograd (both functions are differentiable). CUDA events
(bench/gpu/timing.py): padded and varlen alternate in ROUNDS rounds, each a
median of 15 single-call timings after 3 warm-ups, so that both layouts see
the same clocks (timing one layout after the other read 1.0-1.7x at 1k for one
build: the card's clocks moved between them). ms is the median over rounds;
varlen_over_padded the median of the rounds' ratios, ratio_range their span.

Each dispatch mode runs in its own process (FLASHATTN_DISABLE_SM90 is read once
per process): `default` (sm90a kernels where they apply: forward and backward,
padded and varlen, so both passes are like for like) and `sm80`
(FLASHATTN_DISABLE_SM90=1: both layouts on the sm80 kernels). The kernels each
call launched are read with torch.profiler and written to the CSV.

CSV columns: mode,pass,causal,batch,seqlen,layout,ms,tflops,varlen_over_padded,ratio_range,
kernel_ms,kernel_ratio,kernels (kernel_ms: the library's kernels' device time per call from
torch.profiler, without the host time that ms holds; kernel_ratio: varlen / padded of it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
H, D = 16, 128
ROUNDS = int(os.environ.get("FA_VARLEN_ROUNDS", "5"))

sys.path.insert(0, HERE)
from timing import kernel_time  # noqa: E402  (bench/gpu/timing.py)


def child(mode: str) -> list:
    import torch

    from timing import median_ms

    from flashattn import flash_attn_func, flash_attn_varlen_func

    rows = []
    dev = torch.device("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    B = 8
    for S in (1024, 2048, 4096):
        q = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16, generator=gen)
        k = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16, generator=gen)
        v = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16, generator=gen)
        do = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16, generator=gen)
        qp, kp, vp, dop = (x.reshape(B * S, H, D) for x in (q, k, v, do))
        cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
        for causal in (False, True):
            flops_f = 4 * B * H * S * S * D / (2 if causal else 1)
            calls = {}
            for layout in ("padded", "varlen"):
                if layout == "padded":
                    def fwd(g=False, causal=causal):
                        a, b, c = (x.detach().requires_grad_(g) for x in (q, k, v))
                        return flash_attn_func(a, b, c, causal=causal), (a, b, c)
                    dout = do
                else:
                    def fwd(g=False, causal=causal):
                        a, b, c = (x.detach().requires_grad_(g) for x in (qp, kp, vp))
                        return flash_attn_varlen_func(a, b, c, cu, cu, S, S, causal=causal), (a, b, c)
                    dout = dop

                def f_fwd(fwd=fwd):
                    with torch.no_grad():
                        fwd()

                def f_fb(fwd=fwd, dout=dout):
                    o, _ = fwd(True)
                    o.backward(dout)

                calls[layout] = (fwd, {"fwd": f_fwd, "fwd+bwd": f_fb})
            outs = {}
            for layout, (fwd, _) in calls.items():
                with torch.no_grad():
                    outs[layout] = fwd()[0].reshape(B * S, H, D).float()
            for pname, fl in (("fwd", flops_f), ("fwd+bwd", flops_f * 3.5)):
                times = {"padded": [], "varlen": []}
                kern_ms = {}
                err = ""
                try:
                    for _ in range(ROUNDS):
                        for layout in ("padded", "varlen"):
                            times[layout].append(median_ms(calls[layout][1][pname], warmup=3, repeat=15))
                except Exception as e:  # e.g. out of memory: rows that say so
                    err = f"error: {str(e).splitlines()[0][:100]}"
                ratios = sorted(v / p for p, v in zip(times["padded"], times["varlen"]))
                for layout in ("padded", "varlen"):
                    row = dict(mode=mode, **{"pass": pname}, causal=int(causal), batch=B, seqlen=S,
                               layout=layout, ms="", tflops="", varlen_over_padded="", ratio_range="",
                               kernel_ms="", kernel_ratio="", kernels=err)
                    if not err:
                        ms = statistics.median(times[layout])
                        names, kms = kernel_time(calls[layout][1][pname])
                        kern_ms[layout] = kms
                        row.update(ms=f"{ms:.4f}", tflops=f"{fl / (ms * 1e-3) / 1e12:.1f}", kernels=names,
                                   kernel_ms="" if kms is None else f"{kms:.4f}")
                        if layout == "varlen":
                            row.update(varlen_over_padded=f"{statistics.median(ratios):.3f}",
                                       ratio_range=f"{ratios[0]:.3f}-{ratios[-1]:.3f}")
                            if kms is not None and kern_ms.get("padded"):
                                row.update(kernel_ratio=f"{kms / kern_ms['padded']:.3f}")
                    rows.append(row)
            err = (outs["padded"] - outs["varlen"]).abs().max().item()
            print(f"# {mode} S={S} causal={int(causal)}: max|padded - varlen| forward = {err:.3g}", flush=True)
        del q, k, v, do, qp, kp, vp, dop
        torch.cuda.empty_cache()
    return rows


FIELDS = ["mode", "pass", "causal", "batch", "seqlen", "layout", "ms", "tflops", "varlen_over_padded",
          "ratio_range", "kernel_ms", "kernel_ratio", "kernels"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="")
    ap.add_argument("--child", choices=["default", "sm80"])
    ap.add_argument("--modes", default="sm80,default")
    a = ap.parse_args()
    if a.child:
        for r in child(a.child):
            print("ROW," + ",".join(str(r[f]).replace(",", ";") for f in FIELDS), flush=True)
        return
    import datetime

    lines = [f"# bench_varlen {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%MZ} "
             f"commit={os.environ.get('FLASHATTN_COMMIT', 'unknown')} lib={os.environ.get('FLASHATTN_LIBRARY', '?')}",
             ",".join(FIELDS)]
    print("\n".join(lines), flush=True)
    for mode in a.modes.split(","):
        env = dict(os.environ, FLASHATTN_DISABLE_SM90="1" if mode == "sm80" else "0")
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode], env=env,
                               capture_output=True, text=True,
                               timeout=int(os.environ.get("FA_T_VARLEN_MODE", "140")))
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            p = subprocess.CompletedProcess(e.cmd, 124, out, "timed out")
        for ln in p.stdout.splitlines():
            if ln.startswith("ROW,"):
                ln = ln[4:]
                lines.append(ln)
            print(ln, flush=True)
        if p.returncode:
            msg = f"# mode {mode}: exit {p.returncode}: " + " | ".join(p.stderr.strip().splitlines()[-3:])
            print(msg, flush=True)
            lines.append(msg)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print("wrote", a.out)


if __name__ == "__main__":
    main()
