// The sm80 forward's per-sequence features run on the CPU through src/cuda/emu
// (see sm80_emu_check.cpp): varlen cu_seqlens, KV-cache lengths with the
// append kernel, paged K/V through a block table (pages of 16 and 48 rows, so
// key tiles span pages), packed GQA and split-KV with the combine kernel.
// Each sequence is checked against the fp64 reference under DESIGN.md's rule
// (src/reference). No GPU needed; small shapes (the emulator runs one thread
// per CUDA thread).
//
//   sm80_emu_varlen [substring]
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_emu.hpp"  // first: the CUDA keywords and intrinsics

#include "attn_cpu_ref.hpp"
#include "reference/naive_same_dtype.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "sm80/append_kernel.cuh"
#include "sm80/combine_kernel.cuh"
#include "sm80/fwd_kernel.cuh"
#include "sm80/fwd_plan.hpp"

EMU_DEFINE_SMEM

namespace s8 = flashattn::detail::cuda::sm80;
namespace ref = flashattn::reference;

namespace {

struct VCase {
  std::string name;
  fa::DType dt;
  std::vector<int> lens_q, lens_k;  // varlen when lens_q is not empty... see mode
  bool varlen;                      // else KV cache: lens_k = cached tokens, Sq = lens_q[0]
  int Hq, Hkv, D;
  bool causal;
  int s_new, capacity, page;  // KV cache only
  int nsplit;                 // 0 = heuristic (with 132 SMs)
  // KV cache, contiguous only: cache_leftpad per sequence (empty = none), and
  // cache_batch_idx over a shuffled cache of B + 2 entries.
  std::vector<int> leftpad = {};
  bool by_idx = false;
  // The masked prefill's block order (kernel_traits.hpp grid_block): groups of
  // group_units (batch, head) units, full_groups of them before the last; 0:
  // each unit's query tiles in turn.
  int group_units = 0, full_groups = 0;
};

std::vector<float> randn(size_t n, fa::DType dt, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (auto& x : v) x = round16(nd(rng), dt);
  return v;
}
std::vector<uint16_t> phys(const std::vector<float>& v, fa::DType dt) {
  std::vector<uint16_t> p(v.size());
  for (size_t i = 0; i < v.size(); ++i) p[i] = to16(v[i], dt);
  return p;
}

template <class T, int D>
void run(const fd::FwdParams& p, const VCase& c) {
  if (p.k_new != nullptr) {
    // launch_append's argument block, built the same way.
    s8::AppendArgs a{};
    a.k_new = static_cast<const uint4*>(p.k_new);
    a.v_new = static_cast<const uint4*>(p.v_new);
    a.k_cache = static_cast<uint4*>(const_cast<void*>(p.k));
    a.v_cache = static_cast<uint4*>(const_cast<void*>(p.v));
    a.kn = p.knew_str, a.vn = p.vnew_str, a.kc = p.k_str, a.vc = p.v_str;
    a.seqlens = p.seqlens_k, a.kv_batch_idx = p.kv_batch_idx, a.block_table = p.block_table;
    a.bt_stride = p.block_table_stride;
    a.page_size = int(p.page_size), a.batch = int(p.batch), a.s_new = int(p.seqlens_k_add);
    a.heads_kv = int(p.heads_kv), a.chunks = int(p.head_dim / 8);
    const int64_t total = p.batch * p.seqlens_k_add * p.heads_kv * a.chunks;
    emu::launch({unsigned((total + 255) / 256), 1, 1}, 256, [&] { s8::append_kv_kernel<T>(a); });
  }
  using Cfg = s8::FwdCfg<D>;
  const s8::FwdPlan plan = s8::fwd_plan(p, 132, Cfg::BM, Cfg::BN);
  std::vector<unsigned char> ws(plan.workspace_bytes + 256);
  s8::FwdSeqArgs args(p);
  args.pack = plan.pack, args.nsplit = plan.nsplit, args.max_q = int(p.seqlen_q);
  args.group_units = c.group_units, args.full_groups = c.full_groups;
  if (plan.nsplit > 1) {
    args.o_accum = reinterpret_cast<float*>(ws.data());
    args.lse_accum = reinterpret_cast<float*>(ws.data() + plan.o_accum_bytes);
  }
  std::printf("    decode tiles %d, pack %d, nsplit %d, grid %lld x %lld x %lld, groups of %d (%d, then the rest)\n", int(plan.decode), plan.pack, plan.nsplit, (long long)plan.m_blocks,
              (long long)plan.heads_y, (long long)(p.batch * plan.nsplit), c.group_units, c.full_groups);
  const emu::Dim3 grid{unsigned(plan.m_blocks), unsigned(plan.heads_y), unsigned(p.batch * plan.nsplit)};
  if (plan.decode)
    emu::launch(grid, s8::FwdDecodeCfg<D>::NW * 32, [&] { s8::fwd_kernel<T, D, s8::FwdDecodeCfg<D>>(args); });
  else
    emu::launch(grid, Cfg::NW * 32, [&] { s8::fwd_kernel<T, D>(args); });
  if (plan.nsplit > 1) {
    const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
    emu::launch({s8::combine_blocks(rows), 1, 1}, s8::kCombineThreads,
                [&] { s8::combine_kernel<T>(args); });
  }
}

bool run_case(const VCase& c, std::mt19937& rng) {
  std::printf("%s\n", c.name.c_str());
  const int B = int(c.varlen ? c.lens_q.size() : c.lens_k.size());
  const int hq = c.Hq * c.D, hk = c.Hkv * c.D;
  fd::FwdParams p;
  p.dtype = c.dt;
  p.batch = B;
  p.heads_q = c.Hq, p.heads_kv = c.Hkv, p.head_dim = c.D;
  p.scale = 1.0f / std::sqrt(float(c.D));
  p.causal = c.causal;
  p.window_right = c.causal ? 0 : -1;
  p.num_splits = c.nsplit;
  std::vector<int32_t> cu_q{0}, cu_k{0}, lens, table, left, entry;
  std::vector<float> q, k, v, kn, vn;
  std::vector<uint16_t> pq, pk, pv, pkn, pvn;
  int total_q = 0, Sq = 0;
  // Per sequence b: logical key t is row where[b][t] of the [rows, Hkv, D] K/V storage.
  std::vector<std::vector<int>> where(B);
  if (c.varlen) {
    for (int b = 0; b < B; ++b) cu_q.push_back(cu_q.back() + c.lens_q[b]), cu_k.push_back(cu_k.back() + c.lens_k[b]);
    total_q = cu_q.back();
    q = randn(size_t(total_q) * hq, c.dt, rng);
    k = randn(size_t(cu_k.back()) * hk, c.dt, rng);
    v = randn(size_t(cu_k.back()) * hk, c.dt, rng);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < c.lens_k[b]; ++t) where[b].push_back(cu_k[b] + t);
    p.seqlen_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
    p.seqlen_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
    p.cu_seqlens_q = cu_q.data(), p.cu_seqlens_k = cu_k.data();
    p.q_str = {0, hq, c.D}, p.k_str = {0, hk, c.D}, p.v_str = {0, hk, c.D}, p.o_str = {0, hq, c.D};
    p.total_q = total_q;
    p.lse_batch_stride = 0, p.lse_head_stride = total_q;
  } else {
    Sq = c.lens_q[0];
    total_q = B * Sq;
    q = randn(size_t(total_q) * hq, c.dt, rng);
    int rows = B * c.capacity;
    if (c.page) {
      const int pages_per = (c.capacity + c.page - 1) / c.page, num_pages = B * pages_per + 2;
      std::vector<int> perm(num_pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      table.assign(perm.begin(), perm.begin() + B * pages_per);
      rows = num_pages * c.page;
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < pages_per * c.page; ++t) where[b].push_back(table[b * pages_per + t / c.page] * c.page + t % c.page);
      p.block_table = table.data(), p.block_table_stride = pages_per, p.page_size = c.page;
      p.k_str = p.v_str = {int64_t(c.page) * hk, hk, c.D};
      p.seqlen_k = int64_t(pages_per) * c.page;
    } else {
      const int entries = B + (c.by_idx ? 2 : 0);
      entry.resize(size_t(entries));
      std::iota(entry.begin(), entry.end(), 0);
      if (c.by_idx) {
        std::shuffle(entry.begin(), entry.end(), rng);
        p.kv_batch_idx = entry.data();
      }
      rows = entries * c.capacity;
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < c.capacity; ++t) where[b].push_back(entry[size_t(b)] * c.capacity + t);
      p.k_str = p.v_str = {int64_t(c.capacity) * hk, hk, c.D};
      p.seqlen_k = c.capacity;
    }
    left.assign(size_t(B), 0);
    if (!c.leftpad.empty()) {
      left.assign(c.leftpad.begin(), c.leftpad.end());
      p.leftpad_k = left.data();
    }
    k = randn(size_t(rows) * hk, c.dt, rng);
    v = randn(size_t(rows) * hk, c.dt, rng);
    kn = randn(size_t(B) * c.s_new * hk, c.dt, rng);
    vn = randn(size_t(B) * c.s_new * hk, c.dt, rng);
    lens.assign(c.lens_k.begin(), c.lens_k.end());
    p.seqlen_q = Sq;
    p.seqlens_k = lens.data(), p.seqlens_k_add = c.s_new;
    p.q_str = p.o_str = {int64_t(Sq) * hq, hq, c.D};
    p.knew_str = p.vnew_str = {int64_t(c.s_new) * hk, hk, c.D};
    p.lse_batch_stride = int64_t(c.Hq) * Sq, p.lse_head_stride = Sq;
  }
  pq = phys(q, c.dt), pk = phys(k, c.dt), pv = phys(v, c.dt), pkn = phys(kn, c.dt), pvn = phys(vn, c.dt);
  std::vector<uint16_t> po(q.size(), 0xFFFF);
  std::vector<float> lse(size_t(total_q) * c.Hq, std::nanf(""));
  p.q = pq.data(), p.k = pk.data(), p.v = pv.data(), p.out = po.data(), p.lse = lse.data();
  if (!c.varlen && c.s_new) p.k_new = pkn.data(), p.v_new = pvn.data();
  const bool bf16 = c.dt == fa::DType::BF16;
  switch (c.D) {
    case 96: bf16 ? run<__nv_bfloat16, 96>(p, c) : run<__half, 96>(p, c); break;
    case 192: bf16 ? run<__nv_bfloat16, 192>(p, c) : run<__half, 192>(p, c); break;
    case 256: bf16 ? run<__nv_bfloat16, 256>(p, c) : run<__half, 256>(p, c); break;
    default: bf16 ? run<__nv_bfloat16, 128>(p, c) : run<__half, 128>(p, c); break;
  }

  bool ok = true;
  for (int b = 0; b < B; ++b) {
    const int k0 = c.varlen ? 0 : left[size_t(b)];  // first key row (cache_leftpad)
    const int lq = c.varlen ? c.lens_q[b] : Sq, lk = c.varlen ? c.lens_k[b] : c.lens_k[b] + c.s_new - k0;
    const int q0 = c.varlen ? cu_q[b] : b * Sq;
    if (!c.varlen)  // the cache after the append, in double, for the reference
      for (int s = 0; s < c.s_new; ++s)
        for (int x = 0; x < hk; ++x) {
          const int row = where[b][c.lens_k[b] + s];
          if (from16(pk[size_t(row) * hk + x], c.dt) != kn[(size_t(b) * c.s_new + s) * hk + x]) {
            std::printf("    FAIL: append did not write k row %d of sequence %d\n", c.lens_k[b] + s, b);
            return false;
          }
          k[size_t(row) * hk + x] = kn[(size_t(b) * c.s_new + s) * hk + x];
          v[size_t(row) * hk + x] = vn[(size_t(b) * c.s_new + s) * hk + x];
        }
    if (lq == 0) continue;
    ref::Problem pb;
    pb.batch = 1, pb.seqlen_q = lq, pb.seqlen_k = lk, pb.heads_q = c.Hq, pb.heads_kv = c.Hkv, pb.head_dim = c.D;
    pb.causal = c.causal;
    std::vector<double> qs(q.begin() + size_t(q0) * hq, q.begin() + size_t(q0 + lq) * hq), ks, vs;
    for (int t = 0; t < lk; ++t)
      for (int x = 0; x < hk; ++x) {
        ks.push_back(k[size_t(where[b][k0 + t]) * hk + x]);
        vs.push_back(v[size_t(where[b][k0 + t]) * hk + x]);
      }
    std::vector<double> ro(qs.size()), rl(size_t(c.Hq) * lq), no, nl;
    ref::forward(pb, qs.data(), ks.data(), vs.data(), ro.data(), rl.data());
    ref::naive_forward(pb, c.dt, qs, ks, vs, &no, &nl);
    std::vector<double> got(qs.size()), got_lse(rl.size());
    for (size_t i = 0; i < got.size(); ++i) got[i] = from16(po[size_t(q0) * hq + i], c.dt);
    for (int h = 0; h < c.Hq; ++h)
      for (int i = 0; i < lq; ++i) {
        const size_t at = c.varlen ? size_t(h) * total_q + q0 + i : (size_t(b) * c.Hq + h) * Sq + i;
        got_lse[size_t(h) * lq + i] = lse[at];
      }
    const auto m = ref::magnitudes(qs, ks, vs, {}, c.D, p.scale);
    const auto eo = ref::judge(c.dt, got, ro, no, std::max(lk, 1), c.D, m.out);
    const auto el = ref::judge_lse(got_lse, rl, nl, c.D);
    std::printf("    seq %d (q %d, k %d): O err %.3g tol %.3g bad %lld | LSE err %.3g tol %.3g bad %lld\n", b, lq, lk,
                eo.max_err, eo.tol, (long long)eo.bad, el.max_err, el.tol, (long long)el.bad);
    ok = ok && eo.pass() && el.pass();
  }
  std::printf("    %s\n", ok ? "PASS" : "FAIL");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const fa::DType hf = fa::DType::F16, bf = fa::DType::BF16;
  const std::vector<VCase> cases = {
      {"varlen causal gqa", hf, {5, 0, 70}, {9, 3, 130}, true, 4, 2, 128, true, 0, 0, 0, 1},
      // Masked prefill in groups (grid_block): 3 query tiles x 12 (sequence, head)
      // units in a group of 5 and a last group of 7; blocks of the empty and the
      // short sequences exit.
      {"varlen causal gqa grouped grid", bf, {5, 0, 300}, {9, 3, 290}, true, 4, 2, 128, true, 0, 0, 0, 1, {}, false, 5, 1},
      {"varlen split 3", bf, {1, 33}, {200, 0}, true, 2, 1, 128, false, 0, 0, 0, 3},
      {"kvcache paged 48 pack8 split4 append", hf, {1}, {100, 7}, false, 8, 1, 128, false, 1, 160, 48, 4},
      {"kvcache paged 16 causal sq3 append", bf, {3}, {40, 0}, false, 4, 2, 128, true, 2, 64, 16, 0},
      {"kvcache contiguous heuristic split", hf, {1}, {300}, false, 8, 2, 128, false, 0, 320, 0, 0},
      // Decode tiles over many key tiles in one slice, and at head dim 256.
      {"kvcache decode 8 tiles no split", bf, {1}, {470, 200}, false, 4, 1, 128, false, 0, 480, 0, 1},
      {"kvcache decode d256 paged split 3", hf, {1}, {300, 161}, false, 2, 1, 256, false, 1, 320, 32, 3},
      // Head dims 96 and 192 have their own decode key tiles (32, 16: fwd_plan.hpp).
      {"kvcache decode d96 split 2 append", bf, {1}, {203, 77}, false, 4, 1, 96, false, 1, 224, 0, 2},
      {"kvcache decode d192 paged 16 causal sq2 heuristic split", hf, {2}, {150, 35}, false, 4, 2, 192, true, 0, 160, 16, 0},
      // Seven pieces: the combine block's four warps take two, two, two and one.
      {"kvcache decode split 7", bf, {2}, {700, 650}, false, 8, 2, 128, true, 0, 704, 0, 7},
      // cache_leftpad and cache_batch_idx (the kernel's per-sequence K/V base and length).
      {"kvcache leftpad idx decode split 3 append", hf, {1}, {300, 40}, false, 8, 2, 128, false, 1, 320, 0, 3,
       {120, 40}, true},
      {"kvcache leftpad causal sq3 append", bf, {3}, {90, 33}, false, 2, 2, 128, true, 2, 96, 0, 1, {17, 0}},
  };
  std::mt19937 rng(7);
  int run = 0, passed = 0;
  for (const VCase& c : cases) {
    if (argc > 1 && c.name.find(argv[1]) == std::string::npos) continue;
    ++run;
    passed += run_case(c, rng);
  }
  std::printf("emulated sm80 varlen/kvcache: %d/%d cases passed -> %s\n", passed, run, passed == run ? "PASS" : "FAIL");
  return passed == run ? 0 : 1;
}
