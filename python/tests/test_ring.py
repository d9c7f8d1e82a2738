"""Ring attention (flashattn.ring) with P = 1, 2, 4 gloo processes on the CPU,
against one-device attention under DESIGN.md's rule.

One spawn per P runs every case (spawning costs seconds; the cases are
milliseconds): the parent draws fresh random inputs for the whole sequence,
the workers shard them (zig-zag for causal, uneven contiguous splits
otherwise), run forward and backward, and send their local out, lse, dq, dk,
dv back; the parent reassembles them and compares with the fp64 reference
and the naive same-dtype run (torch_ref.attention_torch).
"""

import math
import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from torch_ref import assert_lse, assert_rule, attention_torch  # noqa: E402

import flashattn  # noqa: E402,F401
from flashattn import ring  # noqa: E402

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

# (name, dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal)
CASES = [
    ("f32_causal_odd_gqa", torch.float32, 2, 67, 67, 4, 2, 32, True),
    ("f32_full_odd_mqa", torch.float32, 1, 53, 53, 3, 1, 16, False),
    ("f32_full_cross", torch.float32, 1, 41, 75, 2, 2, 24, False),  # Sq != Sk, split differently
    ("f32_causal_tiny", torch.float32, 1, 9, 9, 2, 1, 8, True),  # P=4: chunks of 2 and 1 tokens
    ("bf16_causal_gqa", torch.bfloat16, 1, 131, 131, 4, 2, 64, True),
    ("f16_full", torch.float16, 2, 97, 97, 2, 2, 40, False),
]


def _split(x, world, dim=1):
    """Uneven contiguous split: rank r gets a share growing with r."""
    n = x.shape[dim]
    w = [r + 1 for r in range(world)]
    cuts = [n * sum(w[:r + 1]) // sum(w) for r in range(world)]
    sizes = [cuts[0]] + [cuts[r] - cuts[r - 1] for r in range(1, world)]
    return list(torch.split(x, sizes, dim=dim))


def _shard(x, rank, world, causal):
    return ring.zigzag_shard(x, rank, world) if causal else _split(x, world)[rank]


WORLDS = (1, 2, 4)


def _worker(rank, world, tmp):
    """One of 4 processes; runs the rings of 1, 2 and 4 ranks in turn (P < 4
    on a subgroup of ranks 0..P-1, P = 4 on the default group)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    # Loopback: gloo otherwise picks the interface of the host name, which a
    # sandboxed CI machine may not resolve.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank,
                            world_size=world)
    try:
        inputs = torch.load(os.path.join(tmp, "inputs.pt"))
        results = {}
        for p in WORLDS:
            group = dist.new_group(list(range(p))) if p < world else None
            if rank >= p:
                continue
            for name, (q, k, v, dout, causal) in inputs[p].items():
                lq = _shard(q, rank, p, causal).clone().requires_grad_()
                lk = _shard(k, rank, p, causal).clone().requires_grad_()
                lv = _shard(v, rank, p, causal).clone().requires_grad_()
                out, lse = ring.ring_flash_attn_func(lq, lk, lv, causal=causal, group=group,
                                                     return_lse=True)
                out.backward(_shard(dout, rank, p, causal))
                results[p, name] = (out.detach(), lse, lq.grad, lk.grad, lv.grad)
        # A layout the causal ring cannot use fails on every rank, naming q.
        x = torch.randn(1, 4 + rank, 1, 8)
        try:
            ring.ring_flash_attn_func(x, x, x, causal=True)
            results["bad_layout"] = "no error"
        except ValueError as e:
            results["bad_layout"] = str(e)
        torch.save(results, os.path.join(tmp, f"out{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _unshard(parts, world, causal):
    return ring.zigzag_unshard(parts) if causal else torch.cat(parts, dim=1)


@pytest.fixture(scope="module")
def ring_runs():
    """Spawns 4 gloo processes once (starting processes costs seconds, the
    cases milliseconds); fresh random inputs for every P and case."""
    world = max(WORLDS)
    gen = torch.Generator().manual_seed(1234)
    inputs = {}
    for p in WORLDS:
        inputs[p] = {}
        for name, dt, b, sq, sk, hq, hk, d, causal in CASES:
            q = torch.randn(b, sq, hq, d, generator=gen).to(dt)
            k = torch.randn(b, sk, hk, d, generator=gen).to(dt)
            v = torch.randn(b, sk, hk, d, generator=gen).to(dt)
            dout = torch.randn(b, sq, hq, d, generator=gen).to(dt)
            inputs[p][name] = (q, k, v, dout, causal)
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(inputs, os.path.join(tmp, "inputs.pt"))
        mp.spawn(_worker, args=(world, tmp), nprocs=world, join=True)
        outs = [torch.load(os.path.join(tmp, f"out{r}.pt")) for r in range(world)]
    return inputs, outs


@pytest.fixture(params=WORLDS, ids=lambda p: f"P{p}")
def ring_run(request, ring_runs):
    p = request.param
    inputs, outs = ring_runs
    return p, inputs[p], [{key[1]: o[key] for key in o if isinstance(key, tuple) and key[0] == p}
                          for o in outs[:p]], outs


def _grads(q, k, v, dout, causal, dtype):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out, lse = attention_torch(q, k, v, causal=causal, dtype=dtype)
    out.backward(dout.to(out.dtype))
    return out.detach(), lse.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_ring_matches_one_device(ring_run, case):
    world, inputs, outs, _ = ring_run
    name, dt, b, sq, sk, hq, hk, d, causal = case
    q, k, v, dout, _ = inputs[name]
    got = [_unshard([o[name][i] for o in outs], world, causal) for i in (0, 2, 3, 4)]
    lse_parts = [o[name][1] for o in outs]
    lse = ring.zigzag_unshard(lse_parts, dim=2) if causal else torch.cat(lse_parts, dim=2)
    ref = _grads(q, k, v, dout, causal, torch.float64)
    naive = _grads(q, k, v, dout, causal, dt) if dt != torch.float32 else [None] * 5
    n = max(sq, sk)
    assert_rule("out", got[0], ref[0], naive[0], n=n, d=d)
    assert_lse(lse, ref[1], n=n, d=d)
    for i, g in zip((2, 3, 4), ("dq", "dk", "dv")):
        assert_rule(g, got[i - 1], ref[i], naive[i], n=max(sq * hq // hk, sk), d=d)


def test_ring_bad_layout_names_q(ring_runs):
    _, outs = ring_runs
    for o in outs:
        assert o["bad_layout"].startswith("q: causal ring attention expects the zig-zag layout"), \
            o["bad_layout"]


# ---- the merge rule on its own (no processes) ---------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_merge_partial_equals_whole(causal):
    """Attention over keys [0, c) merged with attention over [c, Sk) equals
    attention over all keys, including rows that see nothing in one part
    (causal: early queries see no key of the second part) or in both (a
    window that leaves some rows empty)."""
    gen = torch.Generator().manual_seed(7 + causal)
    # Causal with Sq > Sk and a window: rows 0..13 see no key at all, and
    # rows near the split see keys of one part only.
    B, H, D = 2, 3, 16
    Sq, Sk, c = (37, 23, 9) if causal else (23, 37, 15)
    q, k, v = (torch.randn(B, s, H, D, generator=gen, dtype=torch.float64) for s in (Sq, Sk, Sk))
    window = (2, 0) if causal else (-1, -1)
    whole, whole_lse = attention_torch(q, k, v, causal=causal, window=window)
    # The parts: the same mask restricted to each key range (bottom-right
    # alignment shifts the diagonal, so restrict the full mask by hand).
    from torch_ref import visible
    mask = visible(Sq, Sk, causal, window, q.device)

    def part(lo, hi):
        s = torch.einsum("bqhd,bkhd->bhqk", q, k[:, lo:hi]) / math.sqrt(D)
        s = s.masked_fill(~mask[:, lo:hi], float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0)[..., None])
        return torch.einsum("bhqk,bkhd->bqhd", p, v[:, lo:hi]), lse

    acc = torch.zeros(B, Sq, H, D, dtype=torch.float32)
    acc_lse = torch.full((B, H, Sq), float("-inf"))
    for lo, hi in ((0, c), (c, Sk)):
        o, l = part(lo, hi)
        ring.merge_partial(acc, acc_lse, o.float(), l.float())
    assert not torch.isnan(acc).any() and not torch.isnan(acc_lse).any()
    if causal:  # the window leaves the first rows empty: they stay 0 / -inf
        assert torch.isneginf(whole_lse).any()
    assert_rule("merged out", acc, whole, n=Sk, d=D)
    assert_lse(acc_lse, whole_lse, n=Sk, d=D)


def test_zigzag_roundtrip():
    x = torch.arange(2 * 13 * 3).reshape(2, 13, 3, 1)
    for world in (1, 2, 3, 4):
        parts = [ring.zigzag_shard(x, r, world) for r in range(world)]
        assert sum(p.shape[1] for p in parts) == 13
        assert torch.equal(ring.zigzag_unshard(parts), x)
    assert ring.zigzag_chunk_sizes(9, 4) == [2, 1, 1, 1, 1, 1, 1, 1]


def test_ring_bad_arguments_named():
    """Checked before any communication (this process has no process group)."""
    q = torch.randn(1, 8, 2, 16)
    with pytest.raises(ValueError, match="^k, v: expected the same shape"):
        ring.ring_flash_attn_func(q, q, q[:, :4])
    with pytest.raises(ValueError, match="^k, v: expected q's dtype"):
        ring.ring_flash_attn_func(q, q.half(), q.half())
    with pytest.raises(ValueError, match="^q: expected a 4-d"):
        ring.ring_flash_attn_func(q[0], q, q)
    if not dist.is_initialized():
        with pytest.raises(RuntimeError, match="^group: torch.distributed is not initialized"):
            ring.ring_flash_attn_func(q, q, q)
