"""Ring attention (context parallelism) over ``torch.distributed``.

The sequence is split over the P ranks of a process group; each rank holds
its local chunk of Q, K and V.  K/V chunks travel around the ring (rank r
sends to r+1 and receives from r-1); at step t rank r attends its queries to
the K/V chunk of rank (r - t) mod P while the next chunk is already in flight
(the send/recv is posted before the chunk's attention starts).  Each step
gives a partial (O, LSE) over a subset of the keys; partials are merged with
the online-softmax rescale rule (``merge_partial``), in fp32.

Causal attention uses the zig-zag layout for load balance: the global
sequence is cut into 2P chunks and rank r holds chunks r and 2P-1-r, one
early and one late, so every rank does the same work at every step.  Per
(query chunk, key chunk) pair the attention is full (key chunk earlier),
diagonal-causal (same chunk) or skipped (key chunk later); with the zig-zag
layout each step is one library call:

    step 0 (own K/V):   all local queries, all local keys, causal
    source s < r:       all local queries, key chunk s only (first half), full
    source s > r:       query chunk 2P-1-r only (second half), all keys, full

The backward passes K/V around the ring again, together with fp32 dK/dV
accumulators that collect every rank's contribution and arrive back at their
owner after P steps.  Each pair's gradient comes from the library backward
called with the GLOBAL out and LSE, which makes each pair's contribution
exact (P = exp(S - LSE) is the final softmax probability), so the sum over
pairs is the one-device gradient.  dQ, dK and dV accumulate in fp32.

Non-causal attention accepts any split of the sequence (queries and keys may
even be split differently): only causal needs to know positions.

Works with CPU tensors (gloo) and CUDA tensors (nccl): the library calls run
on the current stream, and NCCL's batch_isend_irecv orders itself after the
work already queued there.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from . import _torch_ops
from ._common import resolve_options

__all__ = ["ring_flash_attn_func", "merge_partial", "zigzag_chunk_sizes", "zigzag_shard",
           "zigzag_unshard"]

# gloo matches messages by (peer, tag): K/V and dK/dV move between the same
# pair of ranks at the same time, so they travel under different tags.
_TAG_KV = 0
_TAG_DKV = 1


# ---- layout -----------------------------------------------------------------

def zigzag_chunk_sizes(total: int, world: int) -> List[int]:
    """Sizes of the 2*world chunks of a sequence of ``total`` tokens: the first
    ``total % (2*world)`` chunks are one token longer (odd lengths allowed)."""
    n = 2 * world
    base, extra = divmod(int(total), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def zigzag_shard(x: Tensor, rank: int, world: int, dim: int = 1) -> Tensor:
    """Rank ``rank``'s local part of ``x`` in the zig-zag layout: chunks
    ``rank`` and ``2*world-1-rank`` of ``x`` along ``dim``, concatenated."""
    sizes = zigzag_chunk_sizes(x.shape[dim], world)
    chunks = torch.split(x, sizes, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * world - 1 - rank]], dim=dim)


def zigzag_unshard(parts: Sequence[Tensor], dim: int = 1) -> Tensor:
    """The inverse of zigzag_shard: ``parts[r]`` is rank r's local tensor."""
    world = len(parts)
    total = sum(p.shape[dim] for p in parts)
    sizes = zigzag_chunk_sizes(total, world)
    chunks: List[Optional[Tensor]] = [None] * (2 * world)
    for r, p in enumerate(parts):
        a, b = torch.split(p, [sizes[r], sizes[2 * world - 1 - r]], dim=dim)
        chunks[r], chunks[2 * world - 1 - r] = a, b
    return torch.cat(chunks, dim=dim)


# ---- the rescale rule ---------------------------------------------------------

def merge_partial(out: Tensor, lse: Tensor, part_out: Tensor, part_lse: Tensor) -> None:
    """Merges a partial attention result into an accumulator, in place.

    out: fp32 [B, S, H, D], lse: fp32 [B, H, S] (the accumulator; lse = -inf
    where nothing was seen yet); part_out [B, S, H, D] (any float dtype),
    part_lse fp32 [B, H, S]: attention of the same queries over a disjoint
    set of keys.  The result is the attention over the union:

        lse' = max + log1p(exp(min - max))      (max/min of lse, part_lse)
        out' = out * exp(lse - lse') + part_out * exp(part_lse - lse')

    the seed's rescale rule with normalised partials.  A row where both sides
    are -inf (no key visible so far) stays out = 0, lse = -inf, never NaN.
    """
    hi = torch.maximum(lse, part_lse)
    lo = torch.minimum(lse, part_lse)
    seen = torch.isfinite(hi)
    hi0 = torch.where(seen, hi, torch.zeros_like(hi))
    # lo - hi is -inf when only one side has seen a key (exp -> 0), and NaN
    # only when both are -inf, which `seen` masks out.
    new = torch.where(seen, hi0 + torch.log1p(torch.exp(torch.where(seen, lo - hi0, hi0))),
                      hi)
    new0 = torch.where(seen, new, torch.zeros_like(new))
    w_old = torch.exp(lse - new0).transpose(1, 2).unsqueeze(-1)  # [B, S, H, 1]
    w_new = torch.exp(part_lse - new0).transpose(1, 2).unsqueeze(-1)
    out.mul_(w_old).add_(part_out.to(torch.float32) * w_new)
    lse.copy_(new)


# ---- ring plumbing --------------------------------------------------------------

class _Ring:
    """The group's ring: ranks, neighbours and the layout of every rank."""

    def __init__(self, group, q: Tensor, k: Tensor, causal: bool):
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.next = dist.get_global_rank(group, (self.rank + 1) % self.world) \
            if group is not None else (self.rank + 1) % self.world
        self.prev = dist.get_global_rank(group, (self.rank - 1) % self.world) \
            if group is not None else (self.rank - 1) % self.world
        # Every rank's (Sq, Sk): receive buffers are sized from it, and causal
        # checks the zig-zag layout against it.
        mine = torch.tensor([q.shape[1], k.shape[1]], dtype=torch.int64, device=q.device)
        if self.world > 1:
            all_lens = [torch.empty_like(mine) for _ in range(self.world)]
            dist.all_gather(all_lens, mine, group=group)
        else:
            all_lens = [mine]
        lens = torch.stack(all_lens).tolist()  # one device-to-host copy
        self.sq = [int(x[0]) for x in lens]
        self.sk = [int(x[1]) for x in lens]
        self.chunks = None
        if causal:
            if self.sq != self.sk:
                raise ValueError(
                    "q, k: causal ring attention is self-attention: every rank needs as many "
                    f"queries as keys; local (seqlen_q, seqlen_k) per rank: "
                    f"{list(zip(self.sq, self.sk))}")
            total = sum(self.sk)
            self.chunks = zigzag_chunk_sizes(total, self.world)
            want = [self.chunks[r] + self.chunks[2 * self.world - 1 - r] for r in range(self.world)]
            if want != self.sk:
                raise ValueError(
                    f"q: causal ring attention expects the zig-zag layout (flashattn.ring."
                    f"zigzag_shard) of {total} tokens over {self.world} ranks: local lengths "
                    f"{want}, got {self.sk}")

    def first_chunk(self, r: int) -> int:
        """Length of rank r's first (early) zig-zag chunk."""
        return self.chunks[r]

    def exchange(self, send: Tensor, recv_shape, dtype, tag: int):
        """Posts send -> next and recv <- prev; returns (recv buffer, requests)."""
        recv = torch.empty(recv_shape, dtype=dtype, device=send.device)
        ops = [dist.P2POp(dist.isend, send, self.next, self.group, tag),
               dist.P2POp(dist.irecv, recv, self.prev, self.group, tag)]
        return recv, dist.batch_isend_irecv(ops)


def _wait(reqs) -> None:
    for r in reqs:
        r.wait()


def _fwd(q, k, v, scale, causal):
    return _torch_ops._fwd_impl(q, k, v, softmax_scale=scale, causal=causal, window_left=-1,
                                window_right=-1, softcap=0.0, deterministic=False)


def _bwd(dout, q, k, v, out, lse, scale, causal):
    return _torch_ops._bwd_impl(dout, q, k, v, out, lse, softmax_scale=scale, causal=causal,
                                window_left=-1, window_right=-1, softcap=0.0,
                                deterministic=False)


def _pair(ring: _Ring, src: int, causal: bool, sq: int, sk_src: int):
    """(query rows, key rows, causal flag) of this rank's queries against
    rank src's keys, or None when every pair is masked out."""
    if not causal:
        return slice(0, sq), slice(0, sk_src), False
    if src == ring.rank:
        return slice(0, sq), slice(0, sk_src), True
    if src < ring.rank:
        return slice(0, sq), slice(0, ring.first_chunk(src)), False
    return slice(ring.first_chunk(ring.rank), sq), slice(0, sk_src), False


# ---- autograd ---------------------------------------------------------------------

class _RingFlashAttn(torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, v, scale, causal, group):
        ring = _Ring(group, q, k, causal)
        B, Sq, Hq, D = q.shape
        out = torch.zeros((B, Sq, Hq, D), dtype=torch.float32, device=q.device)
        lse = torch.full((B, Hq, Sq), float("-inf"), dtype=torch.float32, device=q.device)
        kv = torch.stack([k, v])  # one message per step
        for t in range(ring.world):
            src = (ring.rank - t) % ring.world
            pending = None
            if t + 1 < ring.world:  # the next chunk travels while this one is computed
                nsrc = (ring.rank - t - 1) % ring.world
                pending = ring.exchange(kv, (2, B, ring.sk[nsrc]) + tuple(k.shape[2:]), kv.dtype,
                                        _TAG_KV)
            rows, keys, pair_causal = _pair(ring, src, causal, Sq, ring.sk[src])
            if rows.stop > rows.start and keys.stop > keys.start:
                part_out, part_lse = _fwd(q[:, rows], kv[0][:, keys], kv[1][:, keys], scale,
                                          pair_causal)
                merge_partial(out[:, rows], lse[:, :, rows], part_out, part_lse)
            if pending is not None:
                kv, reqs = pending
                _wait(reqs)
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.causal, ctx.ring = scale, causal, ring  # the layout, gathered once
        _torch_ops.no_gradient_outputs(ctx, lse)
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout, dlse):
        if dout is None:  # _torch_ops.no_gradient_outputs
            return (None,) * 6
        q, k, v, out, lse = ctx.saved_tensors
        scale, causal, ring = ctx.scale, ctx.causal, ctx.ring
        B, Sq = q.shape[:2]
        kv_tail = tuple(k.shape[2:])
        dout = dout.contiguous()
        dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        kv = torch.stack([k, v])
        dkv = torch.zeros((2,) + tuple(k.shape), dtype=torch.float32, device=q.device)
        dkv_pending = None
        for t in range(ring.world):
            src = (ring.rank - t) % ring.world
            kv_pending = None
            if t + 1 < ring.world:
                nsrc = (ring.rank - t - 1) % ring.world
                kv_pending = ring.exchange(kv, (2, B, ring.sk[nsrc]) + kv_tail, kv.dtype, _TAG_KV)
            rows, keys, pair_causal = _pair(ring, src, causal, Sq, ring.sk[src])
            grads = None
            if rows.stop > rows.start and keys.stop > keys.start:
                grads = _bwd(dout[:, rows], q[:, rows], kv[0][:, keys], kv[1][:, keys],
                             out[:, rows], lse[:, :, rows], scale, pair_causal)
                dq[:, rows] += grads[0]
            if dkv_pending is not None:  # src's accumulator, from the previous rank
                dkv, reqs = dkv_pending
                _wait(reqs)
            if grads is not None:
                dkv[0][:, keys] += grads[1]
                dkv[1][:, keys] += grads[2]
            if ring.world > 1:
                # After the last step the accumulator goes home: rank r holds
                # rank r+1's, and receives its own from rank r-1.
                nsrc = (ring.rank - t - 1) % ring.world
                dkv_pending = ring.exchange(dkv, (2, B, ring.sk[nsrc]) + kv_tail, torch.float32,
                                            _TAG_DKV)
            if kv_pending is not None:
                kv, reqs = kv_pending
                _wait(reqs)
        if dkv_pending is not None:
            dkv, reqs = dkv_pending
            _wait(reqs)
        return (dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype), None, None, None)


def ring_flash_attn_func(q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
                         softmax_scale: Optional[float] = None, group=None,
                         return_lse: bool = False):
    """Attention over a sequence split across the ranks of ``group`` (default:
    the world group), equal to ``flashattn.attention`` on the whole sequence.

    q: this rank's queries [batch, seqlen_q_local, heads_q, head_dim]; k, v:
    its keys/values [batch, seqlen_k_local, heads_kv, head_dim] (GQA: heads_q
    % heads_kv == 0).  Non-causal: any split of the sequence (contiguous
    chunks, uneven lengths, queries split differently from keys).  Causal
    (self-attention, the global causal mask): the zig-zag layout of
    ``zigzag_shard`` — rank r holds chunks r and 2P-1-r of 2P chunks.

    Returns this rank's out (q's dtype) or (out, lse) with lse fp32 [batch,
    heads_q, seqlen_q_local] over the whole sequence.  Differentiable in q, k,
    v; the backward is a ring too, and every rank of the group must call it.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() != 4:
            raise ValueError(f"{name}: expected a 4-d torch.Tensor [batch, seqlen, heads, head_dim]")
    if k.shape != v.shape:
        raise ValueError(f"k, v: expected the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"k, v: expected q's dtype {q.dtype}, got {k.dtype} and {v.dtype}")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("group: torch.distributed is not initialized (call "
                           "torch.distributed.init_process_group first)")
    scale = resolve_options(causal, softmax_scale, (-1, -1), 0.0)["softmax_scale"]
    out, lse = _RingFlashAttn.apply(q, k, v, scale, bool(causal), group)
    return (out, lse) if return_lse else out
