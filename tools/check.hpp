// `flashattn run --check`: the run's outputs against the fp64 reference on
// whole sampled heads (every row of one GQA group), judged by DESIGN.md's rule.
#pragma once

#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"

namespace fa_cli {

struct HostProblem {
  int64_t B, Sq, Sk, Hq, Hkv, D, Dv;  // Dv: v / out's head dim
  flashattn::DType dtype;
  flashattn::Options opt;
  // Host copies in the run's dtype storage, dense BSHD (out in
  // out_dtype: bf16 for fp8 inputs); lse [B, Hq, Sq].
  std::vector<char> q, k, v, out, dout, dq, dk, dv;
  std::vector<float> lse;
  // fp8 (e4m3) inputs: the per-tensor factors the stored values are
  // multiplied by (1 otherwise).
  float q_descale = 1.f, k_descale = 1.f, v_descale = 1.f;
};

struct CheckLine {
  std::string what;
  double max_err, naive_err, tolerance;
  bool pass;
};

// Checks `groups` (batch, kv head) groups spread over the problem.
std::vector<CheckLine> check_against_reference(const HostProblem& hp, bool backward, int groups);

}  // namespace fa_cli
