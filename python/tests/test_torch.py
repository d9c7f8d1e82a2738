"""torch front end: correctness with autograd, opcheck, gradcheck, SDPA, torch.compile,
strides, streams.  CPU always; CUDA when torch and libflashattn both see a GPU."""

import math
import os

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
import flashattn._torch_ops  # noqa: E402,F401  torch.ops.flashattn.* (flashattn may predate torch here)
from torch_ref import EPS, assert_lse, assert_rule, attention_torch  # noqa: E402

CUDA = torch.cuda.is_available() and flashattn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DT_IDS = ["fp32", "fp16", "bf16"]


def _leaves(dtype, device, *tensors):
    return [t.detach().to(device=device, dtype=dtype).requires_grad_() for t in tensors]


def _run(fn, q, k, v, do, dtype, device):
    """out, lse, dq, dk, dv of fn on fresh leaves of (dtype, device)."""
    ql, kl, vl = _leaves(dtype, device, q, k, v)
    out, lse = fn(ql, kl, vl)
    dq, dk, dv = torch.autograd.grad(out, (ql, kl, vl), do.to(device=device, dtype=out.dtype))
    return out, lse, dq, dk, dv


def _randn(shape, device, gen, dtype=torch.float32):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def _skip_unsupported(device, dtype, d=64):
    """Skip (naming the reason) what this build of libflashattn cannot run,
    e.g. fp32 on CUDA, which has fp16/bf16 kernels only."""
    x = torch.zeros(1, 1, 1, d, device=device, dtype=dtype)
    try:
        flashattn.attention(x, x, x)
    except flashattn.UnsupportedError as e:
        pytest.skip(f"libflashattn: {e}")


@pytest.fixture
def gen(request):
    import zlib

    g = torch.Generator()
    g.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    return g


CASES = [  # (b, sq, sk, hq, hk, d, causal, window, softcap)
    (2, 17, 17, 4, 4, 64, False, (-1, -1), 0.0),
    (1, 113, 267, 4, 1, 128, True, (-1, -1), 0.0),
    (1, 267, 113, 6, 2, 64, True, (-1, -1), 0.0),   # rows that see no key
    (1, 113, 113, 2, 2, 32, False, (16, 4), 0.0),
    (2, 33, 65, 2, 1, 64, True, (-1, -1), 2.0),
]


@pytest.fixture(params=["eager", "op"])
def path(request, monkeypatch):
    """eager: attention's fast path (autograd.Function, no dispatcher);
    op: always through torch.ops.flashattn.fwd and its registered autograd."""
    from flashattn import _torch_ops

    monkeypatch.setattr(_torch_ops, "EAGER_FAST_PATH", request.param == "eager")
    return request.param


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "b{}-q{}-k{}-h{}:{}-d{}-c{}-w{}:{}-cap{}".format(
    *c[:7], *c[7], c[8]))
def test_forward_backward_against_float64(gen, device, dtype, case, path):
    b, sq, sk, hq, hk, d, causal, window, cap = case
    _skip_unsupported(device, dtype, d)
    q, k, v = (_randn(s, "cpu", gen) for s in ((b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d)))
    do = _randn((b, sq, hq, d), "cpu", gen)
    kw = dict(causal=causal, window=window, softcap=cap)
    q, k, v, do = (x.to(dtype) for x in (q, k, v, do))  # exact inputs of every run

    ours = _run(lambda a, b_, c: flashattn.attention(a, b_, c, return_lse=True, **kw),
                q, k, v, do, dtype, device)
    ref = _run(lambda a, b_, c: attention_torch(a, b_, c, **kw), q, k, v, do, torch.float64, "cpu")
    naive = (_run(lambda a, b_, c: attention_torch(a, b_, c, **kw), q, k, v, do, dtype, "cpu")
             if dtype != torch.float32 else (None,) * 5)
    assert ours[0].dtype == dtype and ours[1].dtype == torch.float32 and ours[0].device.type == device
    n = max(sq, sk)
    assert_lse(ours[1], ref[1], n=n, d=d)
    for name, i in (("out", 0), ("dq", 2), ("dk", 3), ("dv", 4)):
        assert_rule(name, ours[i], ref[i], naive[i], n=n, d=d)


def _sdpa(q, k, v, causal):
    """SDPA on BSHD tensors; causal bottom-right aligned through an explicit mask."""
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
    o = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
        enable_gqa=q.shape[2] != k.shape[2])
    return o.transpose(1, 2), None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("causal", [False, True])
def test_agrees_with_sdpa(gen, device, dtype, causal):
    """flashattn is at least as close to the fp64 truth as SDPA in the same dtype
    (within 2x + atol), outputs and gradients; GQA 4:2, Sq != Sk."""
    b, sq, sk, hq, hk, d = 2, 77, 77 if causal else 129, 4, 2, 64
    _skip_unsupported(device, dtype, d)
    q, k, v = (_randn(s, "cpu", gen).to(dtype) for s in ((b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d)))
    do = _randn((b, sq, hq, d), "cpu", gen).to(dtype)
    ours = _run(lambda a, b_, c: (flashattn.attention(a, b_, c, causal=causal), None),
                q, k, v, do, dtype, device)
    sdpa = _run(lambda a, b_, c: _sdpa(a, b_, c, causal), q, k, v, do, dtype, device)
    ref = _run(lambda a, b_, c: _sdpa(a, b_, c, causal), q, k, v, do, torch.float64, "cpu")
    for name, i in (("out", 0), ("dq", 2), ("dk", 3), ("dv", 4)):
        assert_rule(name, ours[i], ref[i], sdpa[i] if dtype != torch.float32 else None,
                    n=max(sq, sk), d=d)


def _args(device, dtype=torch.float32, b=1, sq=5, sk=7, hq=2, hk=1, d=8, requires_grad=True):
    g = torch.Generator().manual_seed(0)
    mk = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype).requires_grad_(requires_grad)  # noqa: E731
    return mk(b, sq, hq, d), mk(b, sk, hk, d), mk(b, sk, hk, d)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_opcheck(device, causal):
    q, k, v = _args(device, torch.float16 if device == "cuda" else torch.float32)
    torch.library.opcheck(torch.ops.flashattn.fwd.default,
                          (q, k, v, 0.0, causal, -1, -1, 0.0, False))
    out, lse = torch.ops.flashattn.fwd(q, k, v, 0.0, causal, -1, -1, 0.0, False)
    do = torch.randn_like(out)
    torch.library.opcheck(torch.ops.flashattn.bwd.default,
                          (do, q.detach(), k.detach(), v.detach(), out.detach(), lse, 0.0, causal,
                           -1, -1, 0.0, False))


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_fp32(causal):
    """torch.autograd.gradcheck in float32 (the C library has no float64):
    central differences with eps=1e-2 and tolerances of 1e-2; the tight
    check of the gradients is test_forward_backward_against_float64."""
    q, k, v = _args("cpu", torch.float32, b=1, sq=3, sk=4, hq=2, hk=1, d=8)
    fn = lambda q, k, v: flashattn.attention(q, k, v, causal=causal, softcap=0.0)  # noqa: E731
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "inputs are not double precision"
        assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-2, atol=1e-2, rtol=1e-2)


def test_backward_fills_no_zero_gradients():
    """lse (and the variants' mask) carry no gradient: autograd must not fill a
    zero tensor for them before each backward (no_gradient_outputs; the fill
    cost ~0.4 ms of host time per call on the H200 machine). Every op of the
    backward, the engine's included, is recorded; a zeros / fill op fails."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    q, k, v = _args("cpu", torch.float32, b=1, sq=17, sk=9, hq=2, hk=1, d=16)
    for fn in (lambda: flashattn.attention(q, k, v, causal=True),
               lambda: flashattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)[0]):
        out = fn()
        g = torch.randn_like(out)
        with Ops() as m:
            dq, = torch.autograd.grad(out, (q,), g)
        assert dq.abs().sum() > 0
        bad = [n for n in m.names if "zero" in n or "fill" in n]
        assert not bad, bad


class _GraphCounter:
    """A torch.compile backend that counts graphs and the flashattn ops in them."""

    def __init__(self, inner="aot_eager"):
        self.graphs, self.ops, self.inner = 0, [], inner

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += [n.target for n in gm.graph.nodes if n.op == "call_function"
                     and "flashattn" in str(n.target)]
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend(self.inner)(gm, example_inputs)


def _compile_backend(device):
    # Inductor compiles C++ on CPU (tens of seconds on 2 cores); aot_eager traces
    # exactly as far (dynamo, fake tensors, AOT autograd) and is the default there.
    if device == "cuda" or os.environ.get("FLASHATTN_TEST_INDUCTOR") == "1":
        return "inductor"
    return "aot_eager"


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, k, v = _args(device, dtype, b=2, sq=33, sk=45, hq=4, hk=2, d=64)
    w = torch.randn(64, 64, device=device, dtype=dtype)

    def block(q, k, v):
        o = flashattn.attention(torch.relu(q), k, v, causal=True, window=(16, -1))
        return (o @ w).float().square().mean()

    counter = _GraphCounter(_compile_backend(device))
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend=counter)
    loss = compiled(q, k, v)
    loss.backward()
    grads = [x.grad.clone() for x in (q, k, v)]
    assert counter.graphs == 1 and counter.ops, f"graphs={counter.graphs} ops={counter.ops}"
    for x in (q, k, v):
        x.grad = None
    eager = block(q, k, v)
    eager.backward()
    torch.testing.assert_close(loss, eager, rtol=1e-3, atol=1e-3)
    for g, x in zip(grads, (q, k, v)):
        torch.testing.assert_close(g, x.grad, rtol=2e-2, atol=2e-2)


def test_torch_compile_dynamic_shapes():
    q, k, v = _args("cpu", torch.float32, b=1, sq=9, sk=9, hq=2, hk=2, d=16)
    torch._dynamo.reset()
    f = torch.compile(lambda q, k, v: flashattn.flash_attn_func(q, k, v, causal=True),
                      fullgraph=True, dynamic=True, backend="aot_eager")
    for s in (9, 17, 30):
        q2, k2, v2 = (torch.randn(1, s, 2, 16) for _ in range(3))
        torch.testing.assert_close(f(q2, k2, v2), flashattn.attention(q2, k2, v2, causal=True))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["packed_qkv", "bhsd_transposed", "last_dim_strided",
                                    "expanded_batch"])
def test_strided_inputs(device, layout, gen):
    """Strided views give the results of their contiguous copies."""
    b, s, h, d = 2, 37, 4, 64
    dt = torch.float32 if device == "cpu" else torch.bfloat16
    r = lambda shape: _randn(shape, device, gen, dt)  # noqa: E731
    if layout == "packed_qkv":
        q, k, v = r((b, s, 3, h, d)).unbind(2)
    elif layout == "bhsd_transposed":
        q, k, v = (r((b, h, s, d)).transpose(1, 2) for _ in range(3))
    elif layout == "last_dim_strided":
        q, k, v = (r((b, s, h, 2 * d))[..., ::2] for _ in range(3))
    else:  # one K/V shared by the batch: batch stride 0
        q = r((b, s, h, d))
        k, v = (r((1, s, h, d)).expand(b, s, h, d) for _ in range(2))
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    out = flashattn.attention(q, k, v, causal=True)
    out.float().square().sum().backward()
    qc, kc, vc = (x.detach().contiguous().requires_grad_() for x in (q, k, v))
    outc = flashattn.attention(qc, kc, vc, causal=True)
    outc.float().square().sum().backward()
    tol = dict(rtol=1e-5, atol=1e-5) if dt == torch.float32 else {}
    torch.testing.assert_close(out, outc, **tol)
    for x, xc in zip((q, k, v), (qc, kc, vc)):
        torch.testing.assert_close(x.grad, xc.grad, **tol)


def test_return_lse_and_its_gradient_is_not_propagated():
    q, k, v = _args("cpu", b=1, sq=5, sk=9, hq=2, hk=2, d=16)
    out, lse = flashattn.attention(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    ref = torch.logsumexp(torch.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, dim=-1)
    torch.testing.assert_close(lse, ref, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert q.grad is not None


def test_op_is_visible_to_the_profiler_and_modes():
    """The eager fast path steps aside when someone is watching."""
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = _args("cpu", requires_grad=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], acc_events=True) as prof:
        flashattn.attention(q, k, v).sum().backward()
    names = {e.name for e in prof.events()}
    assert "flashattn::fwd" in names and "flashattn::bwd" in names, sorted(names)[:50]
    with FlopCounterMode(display=False):  # a dispatch mode: the op path, no crash
        flashattn.attention(q, k, v)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fq = torch.empty(2, 9, 4, 64)
        fo = flashattn.attention(fq, fq, fq)
        assert fo.shape == (2, 9, 4, 64)


def test_inference_mode_and_no_grad():
    q, k, v = _args("cpu", requires_grad=False)
    with torch.inference_mode():
        a = flashattn.attention(q, k, v)
    with torch.no_grad():
        b = flashattn.attention(q, k, v)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_errors_are_clear():
    q, k, v = _args("cpu", requires_grad=False)
    with pytest.raises(flashattn.InvalidArgumentError, match="q: dtype torch.float64"):
        flashattn.attention(q.double(), k, v)
    with pytest.raises(flashattn.InvalidArgumentError, match="^k: expected dtype"):
        flashattn.attention(q, k.half(), v)
    with pytest.raises(flashattn.InvalidArgumentError, match="^q: expected 4 dimensions"):
        flashattn.attention(q[0], k, v)
    with pytest.raises(ValueError, match="softmax_scale"):
        flashattn.attention(q, k, v, softmax_scale=0.0)
    if CUDA:
        with pytest.raises(flashattn.InvalidArgumentError, match="same device"):
            flashattn.attention(q.cuda(), k, v)


@pytest.mark.skipif(not CUDA, reason="needs CUDA in torch and libflashattn")
def test_current_stream_is_used():
    """Inputs written on a side stream after a long sleep: a kernel launched on
    any other stream would read them before they are written."""
    dev = torch.device("cuda")
    q, k, v = (torch.zeros(2, 257, 8, 128, device=dev, dtype=torch.bfloat16) for _ in range(3))
    src = [torch.randn(2, 257, 8, 128, device=dev, dtype=torch.bfloat16) for _ in range(3)]
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on this stream
        for dst, x in zip((q, k, v), src):
            dst.copy_(x)
        out = flashattn.attention(q, k, v, causal=True)
        ref = flashattn.attention(*src, causal=True)
    s.synchronize()
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.skipif(not CUDA, reason="needs CUDA in torch and libflashattn")
def test_cuda_graph_capture():
    # The op must not synchronize: it runs under CUDA graph capture.
    q, k, v = _args("cuda", torch.bfloat16, b=1, sq=128, sk=128, hq=4, hk=4, d=64,
                    requires_grad=False)
    flashattn.attention(q, k, v)  # warm-up (library init outside capture)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flashattn.attention(q, k, v, causal=True)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, flashattn.attention(q, k, v, causal=True), rtol=0, atol=0)


def test_eps_table_matches_torch():
    for dt, e in EPS.items():
        assert torch.finfo(dt).eps == e
    assert math.isclose(torch.finfo(torch.float32).eps, 2.0**-23)


@pytest.mark.skipif(not CUDA, reason="needs CUDA in torch and libflashattn")
def test_cuda_graph_capture_forward_backward():
    """Training step under CUDA graph capture (what torch.compile's
    mode='reduce-overhead' does): no synchronisation, no capture-unsafe
    allocation in forward or backward."""
    q, k, v = _args("cuda", torch.bfloat16, b=2, sq=256, sk=256, hq=4, hk=2, d=64)
    do = torch.randn(2, 256, 4, 64, device="cuda", dtype=torch.bfloat16)

    def step():
        for x in (q, k, v):
            x.grad = None
        flashattn.attention(q, k, v, causal=True).backward(do)
        return q.grad, k.grad, v.grad

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up on a side stream, as torch's docs require
            step()
    torch.cuda.current_stream().wait_stream(s)
    for x in (q, k, v):
        x.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flashattn.attention(q, k, v, causal=True)
        out.backward(do)
    g.replay()
    torch.cuda.synchronize()
    grads = [x.grad.clone() for x in (q, k, v)]
    eager = [t.clone() for t in step()]
    for a, b in zip(grads, eager):  # bf16 tolerance: dQ accumulation order may differ
        torch.testing.assert_close(a, b)
