// Runs the real sm80 kernel sources on the CPU through src/cuda/emu (one
// std::thread per CUDA thread; ldmatrix, mma.sync and shfl emulated from the
// PTX ISA's definitions) and checks them against attention in double, with
// the same criterion as sm80_selfcheck. Needs no GPU: it checks fragment
// layouts, swizzles, tile bounds, masking, the online softmax and the
// backward's algebra. It cannot see races (cp.async is synchronous here) or
// performance. Slow: keep shapes small.
//
//   sm80_emu_check [substring]   run the cases whose name contains it
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_emu.hpp"  // first: the CUDA keywords and intrinsics

#include "attn_cpu_ref.hpp"
#include "sm80/bwd_dq_kernel.cuh"
#include "sm80/bwd_kernel.cuh"
#include "sm80/bwd_postprocess.cuh"
#include "sm80/bwd_preprocess.cuh"
#include "sm80/fwd_kernel.cuh"
#include "sm80/launch.hpp"

EMU_DEFINE_SMEM

namespace fc = flashattn::detail::cuda;
namespace s8 = flashattn::detail::cuda::sm80;

template <class T, int D>
static void emu_forward(const fd::FwdParams& p) {
  using Cfg = s8::FwdCfg<D>;
  s8::FwdSeqArgs args{s8::FwdArgs(p)};
  static_assert(Cfg::smem() <= emu::kSmemBytes, "emulated shared memory too small");
  const long long m_blocks = (p.seqlen_q + Cfg::BM - 1) / Cfg::BM, units = p.heads_q * p.batch;
  // Masked calls in the launcher's block order (launch_fwd.cuh order_masked_grid;
  // FLASHATTN_SM80_FWD_ORDER), against a 50 MB L2 and 132 SMs of two blocks each.
  if (s8::fwd_grouped_order() && m_blocks > 1 && units > 1 && (p.window_left >= 0 || p.window_right >= 0)) {
    const s8::GridGroups g = s8::fwd_grid_groups(fd::WindowMask(p), units, p.seqlen_q,
                                                 2 * p.seqlen_k * D * static_cast<long long>(sizeof(T)), 50 << 20,
                                                 Cfg::BM, Cfg::BN, [] { return 264LL; });
    args.group_units = static_cast<int>(g.group_units);
    args.full_groups = static_cast<int>(g.full_groups);
  }
  emu::launch({unsigned(m_blocks), unsigned(p.heads_q), unsigned(p.batch)}, Cfg::NW * 32,
              [&] { s8::fwd_kernel_for<T, D>(p, s8::FwdPlan{})(args); });
}

template <class T, int D>
static void emu_backward(const fd::BwdParams& p) {
  const s8::BwdWorkspace ws = s8::bwd_workspace(p, D);
  std::vector<unsigned char> buf(ws.total + 16);
  s8::BwdArgs args(p);
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  args.dsum = reinterpret_cast<float*>(buf.data() + ws.dsum_offset);
  if (!p.deterministic) {
    args.dq_accum = reinterpret_cast<float*>(buf.data() + ws.dq_offset);
    std::memset(args.dq_accum, 0, ws.total - ws.dq_offset);
  }
  emu::launch({unsigned((rows + 7) / 8), 1, 1}, 256, [&] { s8::bwd_preprocess_kernel<T>(args); });
  using Cfg = s8::BwdCfg<D>;
  args.n_blocks = static_cast<int>((p.seqlen_k + Cfg::BN - 1) / Cfg::BN);
  // FLASHATTN_SM80_BWD_ORDER as the launcher reads it, against a 50 MB L2 and
  // 132 SMs of one block each
  const s8::GridGroups g = s8::bwd_grid_groups(
      fd::WindowMask(p), p.heads_kv * p.batch, p.seqlen_q,
      s8::bwd_unit_bytes(p.heads_q / p.heads_kv, p.seqlen_q, D, sizeof(T)), 50 << 20, s8::bwd_order(), Cfg::BM,
      Cfg::BN, [] { return 132LL; });
  args.group_units = static_cast<int>(g.group_units);
  args.full_groups = static_cast<int>(g.full_groups);
  const emu::Dim3 grid{unsigned(s8::bwd_blocks(args.n_blocks, p.heads_kv, p.batch)), 1, 1};
  auto* kernel = s8::bwd_kernel_for<T, D>(p);  // the launcher's choice
  emu::launch(grid, Cfg::NW * 32, [&] { kernel(args); });
  if (p.deterministic) {
    using Dq = s8::DqCfg<D>;
    emu::launch({unsigned((p.seqlen_q + Dq::BM - 1) / Dq::BM), unsigned(p.heads_q), unsigned(p.batch)},
                Dq::NW * 32, [&] { s8::bwd_dq_kernel_for<T, D>(p)(args); });
  } else {
    const int64_t chunks = rows * (p.head_dim / 8);
    emu::launch({unsigned((chunks + 255) / 256), 1, 1}, 256, [&] { s8::bwd_dq_convert_kernel<T>(args, D); });
  }
}

template <class T>
static void dispatch(const Case& c, const fd::FwdParams* fp, const fd::BwdParams* bp) {
  const int tile = s8::tile_head_dim(c.D);
  auto run = [&](auto dtag) {
    constexpr int D = decltype(dtag)::value;
    if (fp) emu_forward<T, D>(*fp);
    if (bp) emu_backward<T, D>(*bp);
  };
  switch (tile) {
    case 64: run(std::integral_constant<int, 64>{}); break;
    case 96: run(std::integral_constant<int, 96>{}); break;
    case 128: run(std::integral_constant<int, 128>{}); break;
    case 192: run(std::integral_constant<int, 192>{}); break;
    case 256: run(std::integral_constant<int, 256>{}); break;
  }
}

static bool run_case(const Case& c, std::mt19937& rng) {
  print_case(c);
  const HostT q = make_random(c.B, c.Sq, c.Hq, c.D, c.bhsd, c.dt, rng);
  const HostT k = make_random(c.B, c.Sk, c.Hkv, c.D, c.bhsd, c.dt, rng);
  const HostT v = make_random(c.B, c.Sk, c.Hkv, c.D, c.bhsd, c.dt, rng);
  const HostT dout = make_random(c.B, c.Sq, c.Hq, c.D, c.bhsd, c.dt, rng);
  const Grads ref = cpu_attention(c, q, k, v, dout, false);
  const Grads nai = cpu_attention(c, q, k, v, dout, true);
  std::vector<uint16_t> pq = to_phys(q, c.dt), pk = to_phys(k, c.dt), pv = to_phys(v, c.dt),
                        pdo = to_phys(dout, c.dt);
  std::vector<uint16_t> po(q.numel(), 0xFFFF), gq(q.numel(), 0xFFFF), gk(k.numel(), 0xFFFF),
      gv(v.numel(), 0xFFFF);
  std::vector<float> lse(size_t(c.B) * c.Hq * c.Sq, std::nanf(""));

  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = base_params(c);
  fp.q = pq.data(), fp.k = pk.data(), fp.v = pv.data();
  fp.q_str = q.str(), fp.k_str = k.str(), fp.v_str = v.str();
  fp.out = po.data(), fp.o_str = q.str(), fp.lse = lse.data();
  const bool bf = c.dt == fa::DType::BF16;
  if (bf)
    dispatch<__nv_bfloat16>(c, &fp, nullptr);
  else
    dispatch<__half>(c, &fp, nullptr);
  bool ok = report("O", compare(from_phys(po, q, c.dt), ref.o, nai.o));
  ok = report_lse(lse, ref.lse) && ok;

  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = base_params(c);
  bp.q = pq.data(), bp.k = pk.data(), bp.v = pv.data();
  bp.q_str = q.str(), bp.k_str = k.str(), bp.v_str = v.str();
  bp.out = po.data(), bp.o_str = q.str(), bp.dout = pdo.data(), bp.do_str = dout.str(), bp.lse = lse.data();
  bp.dq = gq.data(), bp.dk = gk.data(), bp.dv = gv.data();
  bp.dq_str = q.str(), bp.dk_str = k.str(), bp.dv_str = v.str();
  bp.deterministic = c.det;
  if (bf)
    dispatch<__nv_bfloat16>(c, nullptr, &bp);
  else
    dispatch<__half>(c, nullptr, &bp);
  ok = report("dQ", compare(from_phys(gq, q, c.dt), ref.dq, nai.dq)) && ok;
  ok = report("dK", compare(from_phys(gk, k, c.dt), ref.dk, nai.dk)) && ok;
  ok = report("dV", compare(from_phys(gv, v, c.dt), ref.dv, nai.dv)) && ok;
  std::printf("    %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

int main(int argc, char** argv) {
  using fa::DType;
  const DType bf = DType::BF16, hf = DType::F16;
  const std::vector<Case> cases = {
      {"tiny", bf, 1, 1, 1, 1, 1, 64, false, -1, -1, 0.f, false, false},
      {"odd17 causal gqa d32", hf, 2, 17, 17, 4, 2, 32, true, -1, -1, 0.f, false, false},
      {"gqa4 d128", bf, 1, 70, 150, 4, 1, 128, false, -1, -1, 0.f, false, false},
      {"sq>sk causal d128", hf, 1, 150, 70, 2, 1, 128, true, -1, -1, 0.f, true, false},
      {"window d80", bf, 1, 90, 140, 2, 2, 80, false, 20, 8, 0.f, false, false},
      {"softcap bhsd d160", hf, 1, 70, 140, 2, 1, 160, false, -1, -1, 10.f, true, false},
      {"det causal d64", bf, 1, 140, 140, 2, 1, 64, true, -1, -1, 0.f, false, true},
      {"det softcap d256", bf, 1, 40, 90, 2, 2, 256, false, -1, -1, 5.f, false, true},
      {"d256 causal", hf, 1, 90, 70, 1, 1, 256, true, -1, -1, 0.f, false, false},
      {"det d96 window", hf, 1, 70, 70, 2, 2, 96, true, 16, -1, 0.f, true, true},
      {"det d192", bf, 1, 70, 90, 2, 1, 192, false, -1, -1, 0.f, false, true},
  };
  std::mt19937 rng(99);
  int run = 0, passed = 0;
  for (const Case& c : cases) {
    if (argc > 1 && c.name.find(argv[1]) == std::string::npos) continue;
    ++run;
    passed += run_case(c, rng);
  }
  std::printf("emulated sm80 kernels: %d/%d cases passed -> %s\n", passed, run, passed == run ? "PASS" : "FAIL");
  return passed == run ? 0 : 1;
}
