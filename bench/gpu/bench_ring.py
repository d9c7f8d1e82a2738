"""Ring attention (flashattn.ring) scaling over P GPUs of one host, 128k to 1M tokens.

Run with torchrun, one process per GPU, with the CUDA build's library:

  FLASHATTN_LIBRARY=build/src/libflashattn.so PYTHONPATH=python \
    torchrun --standalone --nproc_per_node 8 bench/gpu/bench_ring.py \
      --tokens 131072,262144,524288,1048576 --out bench/results/h200x8-ring.csv

Problem: batch 1, hidden 2048 (heads = 2048 / hdim, hdim 128 by default),
bf16, causal by default (zig-zag layout); the sequence of N tokens is split
over the P ranks (N / P each). Timed: the forward, and forward + backward,
with CUDA events on every rank after warm-up; per repeat the ring's time is
the slowest rank's (all_reduce MAX), and the CSV gives the median and the
minimum over repeats. Rank 0 also times ONE GPU running flashattn.attention
(no ring) on N / P tokens and, up to --single-max tokens, on N tokens, while
the other ranks wait; and the K/V ring alone (P - 1 exchanges, no compute),
the transfer time the ring has to hide behind the attention.

Definitions (FLOPs as DESIGN.md: 4 B H N^2 d, halved when causal, x3.5 for
forward + backward):
  tflops_per_gpu  = F(N) / (P * T_P(N))
  strong_eff      = T_1(N) / (P * T_P(N))        (one GPU on all N tokens; only
                                                  where N <= --single-max)
  weak_eff        = [F(N) / (P T_P(N))] / [F(N/P) / T_1(N/P)]
                    the per-GPU FLOP rate of the ring against one GPU running
                    the per-GPU share N/P alone; the tokens ratio is P, the work
                    ratio P^2, so weak_eff = P * T_1(N/P) / T_P(N).
  kv_ring_only    rows: the P - 1 K/V exchanges of a forward alone (no
                    compute); the part of it not hidden behind the attention
                    shows up as weak_eff below 1.

--device cpu runs the same script on CPU processes over gloo (wall-clock
timing), a smoke test of the script itself, e.g.
  torchrun --standalone --nproc_per_node 2 bench/gpu/bench_ring.py --device cpu \
    --tokens 1024 --hidden 128 --hdim 32 --repeat 2

NVLink multicast stays off (the machine's rule): NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are set before
torch.distributed starts, and a different value in the environment stops the
script.
"""
import argparse
import datetime
import os
import subprocess
import sys
import time

_NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
for _k, _v in _NO_MULTICAST.items():
    if os.environ.setdefault(_k, _v) != _v:
        sys.exit(f"bench_ring: {_k}={os.environ[_k]} in the environment; this machine needs "
                 f"{_k}={_v} (NVLink multicast must stay off)")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import flashattn  # noqa: E402
from flashattn import ring  # noqa: E402


def flops(n, heads, hdim, causal, with_bwd):
    f = 4.0 * heads * n * n * hdim / (2 if causal else 1)
    return f * (3.5 if with_bwd else 1.0)


DEV = "cuda"


def timed(fn, warmup, repeat, group_max=True):
    """Per repeat: CUDA events around fn() on this rank (wall clock on CPU),
    then the slowest rank's time (all_reduce MAX). Returns the list of ms."""
    for _ in range(warmup):
        fn()
    if DEV == "cuda":
        torch.cuda.synchronize()
    out = []
    for _ in range(repeat):
        if group_max and dist.get_world_size() > 1:
            dist.barrier()
        if DEV == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ms = s.elapsed_time(e)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        t = torch.tensor([ms], dtype=torch.float64, device=DEV)
        if group_max and dist.get_world_size() > 1:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out.append(float(t))
    return out


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def meta():
    if DEV == "cpu":
        import platform
        name = platform.processor() or platform.machine()
    else:
        name = torch.cuda.get_device_properties(0).name
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split("\n")[0].strip()
    except Exception:  # noqa: BLE001 - informational only
        drv = "?"
    commit = os.environ.get("FLASHATTN_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, timeout=30).stdout.strip() or "?"
        except Exception:  # noqa: BLE001
            commit = "?"
    nccl = ".".join(str(x) for x in torch.cuda.nccl.version()) if DEV == "cuda" else "-"
    return dict(device=(name or "cpu").replace(",", " "), driver=drv,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
                commit=commit, torch=torch.__version__, nccl=nccl)


def check(heads, hdim, causal, n=4096):
    """Before timing: the ring's out, dq, dk, dv on n tokens against the fp64
    unfused attention under DESIGN.md's rule, with the unfused attention in
    bf16 (softmax in fp32, P rounded to bf16) as the yardstick:
    max|ring - ref| <= 2 max|naive - ref| + 2^-9 max(max|ref|, 1). Raises otherwise."""
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator(device=DEV).manual_seed(7)  # the same global tensors on every rank
    q, k, v, do = (torch.randn(1, n, heads, hdim, device=DEV, dtype=torch.bfloat16, generator=g)
                   for _ in range(4))
    mask = torch.ones(n, n, dtype=torch.bool, device=DEV).triu(1) if causal else None

    def unfused(dt):
        def f(q_, k_, v_):
            s_ = torch.einsum("bqhd,bkhd->bhqk", q_.to(dt), k_.to(dt)).double() / hdim ** 0.5
            if mask is not None:
                s_ = s_.masked_fill(mask, float("-inf"))
            p_ = torch.softmax(s_ if dt == torch.float64 else s_.float(), -1).to(dt)
            return torch.einsum("bhqk,bkhd->bqhd", p_, v_.to(dt))
        return f

    def grads(fn, xs, dout):
        xs = [x.detach().clone().requires_grad_() for x in xs]
        o = fn(*xs)
        o.backward(dout.to(o.dtype))
        return [o.detach()] + [x.grad for x in xs]

    ref = grads(unfused(torch.float64), (q, k, v), do)
    naive = grads(unfused(torch.bfloat16), (q, k, v), do)
    local = [ring.zigzag_shard(x, rank, world) for x in (q, k, v, do)]
    got = grads(lambda a, b, c: ring.ring_flash_attn_func(a, b, c, causal=causal), local[:3],
                local[3])
    for name, r_, n_, x_ in zip(("out", "dq", "dk", "dv"), ref, naive, got):
        r_loc = ring.zigzag_shard(r_, rank, world)
        n_loc = ring.zigzag_shard(n_, rank, world).double()
        err = (x_.double() - r_loc).abs().max().item()
        bound = 2 * (n_loc - r_loc).abs().max().item() + 2.0 ** -9 * max(r_loc.abs().max().item(), 1)
        if not err <= bound:
            raise SystemExit(f"bench_ring --check: rank {rank} {name}: ring error {err:.3g} > {bound:.3g}")
    if rank == 0:
        print(f"# check: ring within DESIGN.md's rule on {n} tokens, P = {world}")


COLUMNS = ["device", "driver", "date", "commit", "torch", "nccl", "world", "impl", "pass", "causal",
           "tokens", "tokens_per_gpu", "heads", "hdim", "ms_median", "ms_min", "repeats",
           "tflops_per_gpu", "strong_eff", "weak_eff"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="131072,262144,524288,1048576")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--non-causal", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--single-max", type=int, default=262144,
                    help="largest N that rank 0 also runs whole on one GPU (strong_eff)")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: gloo and CPU tensors, a smoke test of this script")
    args = ap.parse_args()

    global DEV
    DEV = args.device
    dist.init_process_group("nccl" if DEV == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if DEV == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    causal = not args.non_causal
    heads, hdim = args.hidden // args.hdim, args.hdim
    if not args.no_check:
        check(heads, hdim, causal)
    m = meta()
    rows = []

    def row(impl, pas, n, ms, with_bwd, per_gpu_tokens, p):
        rows.append(dict(m, world=p, impl=impl, pass_=pas, causal=int(causal), tokens=n,
                         tokens_per_gpu=per_gpu_tokens, heads=heads, hdim=hdim,
                         ms_median=median(ms), ms_min=min(ms), repeats=len(ms),
                         tflops_per_gpu=(flops(n, heads, hdim, causal, with_bwd) /
                                         (p * median(ms) * 1e-3) / 1e12) if impl != "kv_ring_only" else ""))

    passes = [("fwd", False)] + ([] if args.no_backward else [("fwd+bwd", True)])
    single_cache = {}

    def single(n, with_bwd):
        """One GPU, flashattn.attention on n tokens (rank 0 only; others wait)."""
        key = (n, with_bwd)
        if key not in single_cache and rank == 0:
            g = torch.Generator(device=DEV).manual_seed(n)
            q, k, v = (torch.randn(1, n, heads, hdim, device=DEV, dtype=torch.bfloat16,
                                   generator=g).requires_grad_(with_bwd) for _ in range(3))
            do = torch.randn_like(q)

            def f():
                o = flashattn.attention(q, k, v, causal=causal)
                if with_bwd:
                    o.backward(do)
            ms = timed(f, args.warmup, args.repeat, group_max=False)
            single_cache[key] = ms
            row("single", "fwd+bwd" if with_bwd else "fwd", n, ms, with_bwd, n, 1)
            del q, k, v, do
            if DEV == "cuda":
                torch.cuda.empty_cache()
        if world > 1:
            dist.barrier()
        return single_cache.get(key)

    for n in (int(x) for x in args.tokens.split(",")):
        if causal and n % (2 * world):
            raise SystemExit(f"--tokens: {n} is not a multiple of 2 * world = {2 * world}")
        local = n // world
        g = torch.Generator(device=DEV).manual_seed(1000 * rank + n)
        for pas, with_bwd in passes:
            q, k, v = (torch.randn(1, local, heads, hdim, device=DEV, dtype=torch.bfloat16,
                                   generator=g).requires_grad_(with_bwd) for _ in range(3))
            do = torch.randn_like(q)

            def f():
                o = ring.ring_flash_attn_func(q, k, v, causal=causal)
                if with_bwd:
                    o.backward(do)
            ms = timed(f, args.warmup, args.repeat)
            row("ring", pas, n, ms, with_bwd, local, world)
            del q, k, v, do
            if DEV == "cuda":
                torch.cuda.empty_cache()
            t1_share = single(local, with_bwd)
            t1_whole = single(n, with_bwd) if n <= args.single_max and world > 1 else None
            if rank == 0:
                ring_row = next(x for x in reversed(rows) if x["impl"] == "ring" and x["tokens"] == n
                                and x["pass_"] == pas)
                tp = ring_row["ms_median"]
                ring_row["weak_eff"] = world * median(t1_share) / tp
                whole = t1_share if world == 1 else t1_whole
                if whole:
                    ring_row["strong_eff"] = median(whole) / (world * tp)
        if world > 1:  # the K/V ring alone: what the attention has to hide
            kv = torch.randn(2, 1, local, heads, hdim, device=DEV, dtype=torch.bfloat16)
            nxt, prv = (rank + 1) % world, (rank - 1) % world

            def ring_only():
                buf = kv
                for _ in range(world - 1):
                    recv = torch.empty_like(buf)
                    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, buf, nxt),
                                                   dist.P2POp(dist.irecv, recv, prv)])
                    for r_ in reqs:
                        r_.wait()
                    buf = recv
            ms = timed(ring_only, args.warmup, args.repeat)
            row("kv_ring_only", "fwd", n, ms, False, local, world)
            del kv

    if rank == 0:
        lines = [",".join(COLUMNS)]
        for r in rows:
            r = dict(r, **{"pass": r["pass_"]})
            lines.append(",".join(
                (f"{r.get(c, ''):.4g}" if isinstance(r.get(c, ""), float) else str(r.get(c, "")))
                for c in COLUMNS))
        text = "\n".join(lines) + "\n"
        print(text, end="")
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
