"""Train a small GPT for a few steps with flashattn and with torch SDPA from the
same initialisation and the same batches, and print both loss curves.

    FLASHATTN_LIBRARY=build/src/libflashattn.so PYTHONPATH=python \\
        python python/examples/train_gpt_block.py                 # CPU, fp32
    ... --device cuda                                            # bf16 autocast
    ... --device cuda --compile                                  # torch.compile(fullgraph=True)

The attention call is the only difference between the two runs: flashattn's
flash-attn compatible ``flash_attn_qkvpacked_func`` on the packed QKV
projection (strided views, no copies) versus
``scaled_dot_product_attention(..., is_causal=True)``.  Exits non-zero when
the curves disagree by more than the tolerance of the precision in use.
"""

import argparse
import copy
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import flashattn


class Block(nn.Module):
    def __init__(self, d_model, n_heads, attn):
        super().__init__()
        self.n_heads, self.attn = n_heads, attn
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        B, S, C = x.shape
        qkv = self.qkv(self.ln1(x)).view(B, S, 3, self.n_heads, C // self.n_heads)
        if self.attn == "flashattn":
            y = flashattn.flash_attn_qkvpacked_func(qkv, causal=True)      # [B, S, H, D]
        else:
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))           # [B, H, S, D]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        x = x + self.proj(y.reshape(B, S, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seqlen, d_model, n_heads, n_layers, attn):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seqlen, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, attn) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def set_attention(self, attn):
        for b in self.blocks:
            b.attn = attn

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x)).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def batches(steps, batch, seqlen, vocab, device, seed=0):
    """Learnable synthetic text: noisy arithmetic sequences modulo vocab."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        step = torch.randint(1, 8, (batch, 1), generator=g)
        seq = (start + step * torch.arange(seqlen + 1)) % vocab
        noise = torch.rand(batch, seqlen + 1, generator=g) < 0.05
        seq = torch.where(noise, torch.randint(0, vocab, seq.shape, generator=g), seq)
        yield seq[:, :-1].to(device), seq[:, 1:].to(device)


def train(model, args, device, amp_dtype):
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    step_fn = model
    if args.compile:
        step_fn = torch.compile(model, fullgraph=True)
    losses, t0 = [], time.perf_counter()
    for x, y in batches(args.steps, args.batch, args.seqlen, args.vocab, device):
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = step_fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return losses, time.perf_counter() - t0


def main():
    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if cuda else "cpu")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--seqlen", type=int, default=None)
    ap.add_argument("--d-model", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    # CPU: fp32 throughout; CUDA: bf16 autocast (the CUDA kernels are fp16/bf16).
    args.batch = args.batch or (8 if on_gpu else 4)
    args.seqlen = args.seqlen or (1024 if on_gpu else 128)
    args.d_model = args.d_model or (512 if on_gpu else 128)
    args.heads = args.heads or (8 if on_gpu else 4)
    amp_dtype = torch.bfloat16 if on_gpu else None
    # fp32 runs agree to rounding; bf16 runs drift by the bf16 rounding of the
    # two attention implementations, compounded over the steps.
    tol = 2e-2 if amp_dtype is not None else 1e-3

    torch.manual_seed(args.seed)
    base = GPT(args.vocab, args.seqlen, args.d_model, args.heads, args.layers, "sdpa").to(device)
    models = {"flashattn": copy.deepcopy(base), "sdpa": copy.deepcopy(base)}
    models["flashattn"].set_attention("flashattn")
    print(f"GPT: {args.layers} layers, d_model {args.d_model}, {args.heads} heads "
          f"(head_dim {args.d_model // args.heads}), batch {args.batch} x seqlen {args.seqlen}, "
          f"device {device}, {'bf16 autocast' if amp_dtype else 'fp32'}"
          f"{', torch.compile' if args.compile else ''}; libflashattn {flashattn.library_version()}")
    results = {name: train(m, args, device, amp_dtype) for name, m in models.items()}
    (lf, tf), (ls, ts) = results["flashattn"], results["sdpa"]
    print(f"{'step':>4}  {'flashattn':>10}  {'sdpa':>10}  {'rel diff':>9}")
    worst = 0.0
    for i, (a, b) in enumerate(zip(lf, ls)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        worst = max(worst, rel)
        print(f"{i:4d}  {a:10.5f}  {b:10.5f}  {rel:9.2e}")
    print(f"time: flashattn {tf:.2f} s, sdpa {ts:.2f} s (first steps include warm-up"
          f"{' and compilation' if args.compile else ''})")
    ok = worst <= tol and all(math.isfinite(x) for x in lf) and lf[-1] < lf[0]
    print(f"max relative loss difference {worst:.2e} (tolerance {tol:.0e}); loss "
          f"{lf[0]:.3f} -> {lf[-1]:.3f}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
