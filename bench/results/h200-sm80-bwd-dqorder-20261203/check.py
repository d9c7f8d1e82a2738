# Backward of the library in FLASHATTN_LIBRARY against float64 torch, sm80 path forced.
import os, torch, flashattn
torch.manual_seed(0)
worst = 0.0
for (B, Sq, Sk, H, Hkv, D, causal) in [(2, 127, 127, 8, 8, 128, False), (2, 1000, 1000, 8, 2, 128, True),
                                        (1, 300, 517, 4, 1, 128, False), (1, 517, 300, 4, 4, 72, True),
                                        (2, 2048, 2048, 16, 16, 128, True), (1, 64, 64, 2, 2, 128, False)]:
    q = torch.randn(B, Sq, H, D, device='cuda', dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, Sk, Hkv, D, device='cuda', dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, Sk, Hkv, D, device='cuda', dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(B, Sq, H, D, device='cuda', dtype=torch.bfloat16)
    o = flashattn.flash_attn_func(q, k, v, causal=causal)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    kr, vr = (t.repeat_interleave(H // Hkv, dim=2) for t in (kd, vd))
    s = torch.einsum('bqhd,bkhd->bhqk', qd, kr) / D ** 0.5
    if causal:
        m = torch.ones(Sq, Sk, device='cuda', dtype=torch.bool).tril(Sk - Sq)
        s = s.masked_fill(~m, float('-inf'))
    p = torch.softmax(s, -1).nan_to_num()
    od = torch.einsum('bhqk,bkhd->bqhd', p, vr)
    rq, rk, rv = torch.autograd.grad(od, (qd, kd, vd), do.double())
    errs = [((a.double() - r).abs().max() / r.abs().max()).item() for a, r in ((dq, rq), (dk, rk), (dv, rv))]
    worst = max(worst, *errs)
    print(f"B{B} Sq{Sq} Sk{Sk} H{H}/{Hkv} D{D} causal{int(causal)}: rel max err dq {errs[0]:.2e} dk {errs[1]:.2e} dv {errs[2]:.2e}")
print("worst", f"{worst:.2e}", "PASS" if worst < 2e-2 else "FAIL")
