// Argument checks: each failure names the argument and what was expected.
#include "api/checks.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace flashattn::detail {
namespace {

constexpr int64_t kMaxHeadDim = 256;

std::string shape_str(const TensorView& t) {
  std::ostringstream s;
  s << "[";
  for (int i = 0; i < t.ndim && i < 4; ++i) s << (i ? ", " : "") << t.shape[i];
  s << "]";
  return s.str();
}

using Dims = std::array<int64_t, 4>;

std::string dims_str(const Dims& dims) {
  std::ostringstream s;
  s << "[";
  bool first = true;
  for (int64_t d : dims) {
    s << (first ? "" : ", ") << d;
    first = false;
  }
  s << "]";
  return s.str();
}

Status invalid(const std::string& msg) { return Status::Error(ErrorCode::InvalidArgument, msg); }

// Checks that hold for every tensor argument, whatever its role.
Status check_view(const char* name, const TensorView& t, int ndim) {
  if (t.ndim != ndim) {
    return invalid(std::string(name) + ": expected a " + std::to_string(ndim) +
                   "-d tensor, got ndim " + std::to_string(t.ndim));
  }
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16) {
    return invalid(std::string(name) + ": unknown dtype code " +
                   std::to_string(static_cast<int>(t.dtype)));
  }
  if (t.device != Device::CPU && t.device != Device::CUDA) {
    return invalid(std::string(name) + ": unknown device code " +
                   std::to_string(static_cast<int>(t.device)));
  }
  for (int i = 0; i < ndim; ++i) {
    if (t.shape[i] < 0) {
      return invalid(std::string(name) + ": negative size in shape " + shape_str(t));
    }
    if (t.stride[i] < 0) {
      return invalid(std::string(name) + ": negative stride " + std::to_string(t.stride[i]) +
                     " in dimension " + std::to_string(i) + " (only non-negative strides)");
    }
  }
  if (t.numel() > 0 && t.data == nullptr) {
    return invalid(std::string(name) + ": data is a null pointer for a tensor of shape " +
                   shape_str(t));
  }
  return Status::Ok();
}

template <size_t N>
bool same_shape(const TensorView& t, const std::array<int64_t, N>& dims) {
  for (size_t i = 0; i < N; ++i) {
    if (t.shape[i] != dims[i]) return false;
  }
  return true;
}

std::string dims_str(const std::array<int64_t, 3>& d) {
  return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + "]";
}

// Q/K/V/O-like tensors: [B, S, H, D] with the head dim contiguous.
Status check_bshd(const char* name, const TensorView& t, const Dims& dims) {
  if (Status s = check_view(name, t, 4); !s.ok()) return s;
  if (!same_shape(t, dims)) {
    return invalid(std::string(name) + ": expected shape [batch, seqlen, heads, head_dim] = " +
                   dims_str(dims) + ", got " + shape_str(t));
  }
  if (t.shape[3] > 1 && t.stride[3] != 1) {
    return invalid(std::string(name) + ": the head_dim (last) dimension must be contiguous "
                   "(stride 1), got stride " + std::to_string(t.stride[3]));
  }
  return Status::Ok();
}

// An output must not map two elements to one address, or threads would race
// on it: sorted by stride, each dimension must step past all smaller ones.
Status check_no_self_overlap(const char* name, const TensorView& t) {
  if (t.numel() <= 1) return Status::Ok();
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] > 1) dims.emplace_back(t.stride[i], t.shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements covered by the dims processed so far
  for (auto [stride, size] : dims) {
    if (stride < span) {
      return invalid(std::string(name) + ": output strides make elements overlap (shape " +
                     shape_str(t) + "); an output needs distinct memory per element");
    }
    span = stride * (size - 1) + span;
  }
  return Status::Ok();
}

// Address range [lo, hi) a tensor touches.
std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& t) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(t.data);
  int64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) last += (t.shape[i] - 1) * t.stride[i];
  return {lo, lo + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(dtype_size(t.dtype)))};
}

struct Named {
  const char* name;
  const TensorView* t;
};

// Outputs may overlap neither an input nor another output (inputs may share
// memory, e.g. a packed QKV buffer). Conservative: compares address ranges.
Status check_disjoint(const std::vector<Named>& outputs, const std::vector<Named>& inputs) {
  auto overlaps = [](const TensorView& a, const TensorView& b) {
    if (a.numel() == 0 || b.numel() == 0 || a.device != b.device) return false;
    auto [alo, ahi] = byte_span(a);
    auto [blo, bhi] = byte_span(b);
    return alo < bhi && blo < ahi;
  };
  for (auto o = outputs.begin(); o != outputs.end(); ++o) {
    for (const Named& in : inputs) {
      if (overlaps(*o->t, *in.t)) {
        return invalid(std::string(o->name) + ": output memory overlaps input " + in.name);
      }
    }
    for (auto o2 = std::next(o); o2 != outputs.end(); ++o2) {
      if (overlaps(*o->t, *o2->t)) {
        return invalid(std::string(o->name) + ": output memory overlaps output " + o2->name);
      }
    }
  }
  return Status::Ok();
}

Status check_same_place(const char* name, const TensorView& t, const TensorView& q,
                        DType expected_dtype) {
  if (t.dtype != expected_dtype) {
    return invalid(std::string(name) + ": expected dtype " + dtype_name(expected_dtype) +
                   ", got " + dtype_name(t.dtype));
  }
  if (t.device != q.device || t.device_index != q.device_index) {
    return invalid(std::string(name) + ": must be on the same device as q");
  }
  return Status::Ok();
}

Status check_lse(const char* name, const TensorView& lse, const TensorView& q, int64_t B,
                 int64_t Hq, int64_t Sq) {
  if (Status s = check_view(name, lse, 3); !s.ok()) return s;
  if (Status s = check_same_place(name, lse, q, DType::F32); !s.ok()) return s;
  const std::array<int64_t, 3> dims{B, Hq, Sq};
  if (!same_shape(lse, dims)) {
    return invalid(std::string(name) + ": expected shape [batch, heads_q, seqlen_q] = " +
                   dims_str(dims) + ", got " + shape_str(lse));
  }
  if ((Sq > 1 && lse.stride[2] != 1) || (Hq > 1 && lse.stride[1] != Sq) ||
      (B > 1 && lse.stride[0] != Hq * Sq)) {
    return invalid(std::string(name) + ": must be contiguous [batch, heads_q, seqlen_q]");
  }
  return Status::Ok();
}

Strides strides_of(const TensorView& t) { return {t.stride[0], t.stride[1], t.stride[2]}; }

// Shapes, dtypes, devices and options common to forward and backward.
Status fill_common(const TensorView& q, const TensorView& k, const TensorView& v,
                   const Options& opt, AttnParams* p) {
  if (Status s = check_view("q", q, 4); !s.ok()) return s;
  const int64_t B = q.shape[0], Sq = q.shape[1], Hq = q.shape[2], D = q.shape[3];
  if (Status s = check_bshd("q", q, {B, Sq, Hq, D}); !s.ok()) return s;
  if (Status s = check_view("k", k, 4); !s.ok()) return s;
  const int64_t Sk = k.shape[1], Hkv = k.shape[2];
  if (k.shape[0] != B) {
    return invalid("k: batch " + std::to_string(k.shape[0]) + " differs from q's batch " +
                   std::to_string(B));
  }
  if (k.shape[3] != D) {
    return invalid("k: head_dim " + std::to_string(k.shape[3]) + " differs from q's head_dim " +
                   std::to_string(D));
  }
  if (Status s = check_bshd("k", k, {B, Sk, Hkv, D}); !s.ok()) return s;
  if (Status s = check_bshd("v", v, {B, Sk, Hkv, D}); !s.ok()) return s;
  if (Status s = check_same_place("k", k, q, q.dtype); !s.ok()) return s;
  if (Status s = check_same_place("v", v, q, q.dtype); !s.ok()) return s;
  if (Hkv == 0 && Hq != 0) return invalid("k: heads_kv is 0 but q has " + std::to_string(Hq) + " heads");
  if (Hkv != 0 && Hq % Hkv != 0) {
    return invalid("q/k: heads_q (" + std::to_string(Hq) + ") must be a multiple of heads_kv (" +
                   std::to_string(Hkv) + ") for GQA/MQA");
  }
  if (D % 8 != 0 || D < 8 || D > kMaxHeadDim) {
    return invalid("q: head_dim must be a multiple of 8 in [8, " + std::to_string(kMaxHeadDim) +
                   "], got " + std::to_string(D));
  }
  if (!std::isfinite(opt.softmax_scale) || opt.softmax_scale < 0.0f) {
    return invalid("options.softmax_scale: expected a finite value >= 0 (0 = 1/sqrt(head_dim)), got " +
                   std::to_string(opt.softmax_scale));
  }
  if (!std::isfinite(opt.softcap) || opt.softcap < 0.0f) {
    return invalid("options.softcap: expected a finite value >= 0 (0 = off), got " +
                   std::to_string(opt.softcap));
  }
  if (opt.window_left < -1) {
    return invalid("options.window_left: expected >= -1 (-1 = unbounded), got " +
                   std::to_string(opt.window_left));
  }
  if (opt.window_right < -1) {
    return invalid("options.window_right: expected >= -1 (-1 = unbounded), got " +
                   std::to_string(opt.window_right));
  }

  p->dtype = q.dtype;
  p->device = q.device;
  p->device_index = q.device_index;
  p->stream = opt.stream;
  p->batch = B;
  p->seqlen_q = Sq;
  p->seqlen_k = Sk;
  p->heads_q = Hq;
  p->heads_kv = Hkv;
  p->head_dim = D;
  p->q = q.data;
  p->k = k.data;
  p->v = v.data;
  p->q_str = strides_of(q);
  p->k_str = strides_of(k);
  p->v_str = strides_of(v);
  p->scale = opt.softmax_scale > 0.0f ? opt.softmax_scale
                                      : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  p->softcap = opt.softcap;
  p->causal = opt.causal;
  p->window_left = opt.window_left;
  p->window_right = opt.causal ? 0 : opt.window_right;
  if (opt.causal && opt.window_right > 0) p->window_right = 0;
  return Status::Ok();
}

}  // namespace

Status make_forward_params(const ForwardArgs& a, FwdParams* p) noexcept {
  try {
    if (Status s = fill_common(a.q, a.k, a.v, a.options, p); !s.ok()) return s;
    const int64_t B = p->batch, Sq = p->seqlen_q, Hq = p->heads_q, D = p->head_dim;
    if (Status s = check_bshd("out", a.out, {B, Sq, Hq, D}); !s.ok()) return s;
    if (Status s = check_same_place("out", a.out, a.q, a.q.dtype); !s.ok()) return s;
    if (Status s = check_no_self_overlap("out", a.out); !s.ok()) return s;
    const bool has_lse = a.lse.data != nullptr;
    if (has_lse) {
      if (Status s = check_lse("lse", a.lse, a.q, B, Hq, Sq); !s.ok()) return s;
    }
    std::vector<Named> outputs{{"out", &a.out}};
    if (has_lse) outputs.push_back({"lse", &a.lse});
    if (Status s = check_disjoint(outputs, {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}});
        !s.ok()) {
      return s;
    }
    p->out = a.out.data;
    p->o_str = strides_of(a.out);
    p->lse = has_lse ? static_cast<float*>(a.lse.data) : nullptr;
    return Status::Ok();
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "argument check failed unexpectedly");
  }
}

Status make_backward_params(const BackwardArgs& a, BwdParams* p) noexcept {
  try {
    if (Status s = fill_common(a.q, a.k, a.v, a.options, p); !s.ok()) return s;
    const int64_t B = p->batch, Sq = p->seqlen_q, Sk = p->seqlen_k, Hq = p->heads_q,
                  Hkv = p->heads_kv, D = p->head_dim;
    const DType dt = a.q.dtype;
    struct Spec {
      const char* name;
      const TensorView* t;
      Dims dims;
    };
    const Spec specs[] = {{"out", &a.out, {B, Sq, Hq, D}}, {"dout", &a.dout, {B, Sq, Hq, D}},
                          {"dq", &a.dq, {B, Sq, Hq, D}},   {"dk", &a.dk, {B, Sk, Hkv, D}},
                          {"dv", &a.dv, {B, Sk, Hkv, D}}};
    for (const Spec& s : specs) {
      if (Status st = check_bshd(s.name, *s.t, s.dims); !st.ok()) return st;
      if (Status st = check_same_place(s.name, *s.t, a.q, dt); !st.ok()) return st;
    }
    for (const Spec& s : specs) {
      if (s.t == &a.out || s.t == &a.dout) continue;
      if (Status st = check_no_self_overlap(s.name, *s.t); !st.ok()) return st;
    }
    if (a.lse.data == nullptr) return invalid("lse: required for the backward (the forward's LSE)");
    if (Status s = check_lse("lse", a.lse, a.q, B, Hq, Sq); !s.ok()) return s;
    if (Status s = check_disjoint({{"dq", &a.dq}, {"dk", &a.dk}, {"dv", &a.dv}},
                                  {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"out", &a.out},
                                   {"dout", &a.dout}, {"lse", &a.lse}});
        !s.ok()) {
      return s;
    }
    p->out = a.out.data;
    p->dout = a.dout.data;
    p->o_str = strides_of(a.out);
    p->do_str = strides_of(a.dout);
    p->lse = static_cast<const float*>(a.lse.data);
    p->dq = a.dq.data;
    p->dk = a.dk.data;
    p->dv = a.dv.data;
    p->dq_str = strides_of(a.dq);
    p->dk_str = strides_of(a.dk);
    p->dv_str = strides_of(a.dv);
    p->deterministic = a.options.deterministic;
    return Status::Ok();
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "argument check failed unexpectedly");
  }
}

}  // namespace flashattn::detail
