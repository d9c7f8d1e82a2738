// Argument checks: each failure names the argument and what was expected.
#include "api/checks.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/rotary.hpp"

namespace flashattn::detail {
namespace {

constexpr int64_t kMaxHeadDim = 256;
// Largest size, element count or element span (last offset + 1) of any
// tensor: 2^48 elements is beyond any memory, and small enough that every
// index, offset, tile count and workspace byte count derived from the sizes
// fits in 64 bits without overflow (kernels use int64 offsets throughout).
constexpr int64_t kMaxElements = int64_t(1) << 48;

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
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16 &&
      t.dtype != DType::F8E4M3) {
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
  // Sizes and the memory they span, with overflow checks, before anything
  // multiplies them (numel, byte ranges, tile counts).
  int64_t count = 1, last = 0;
  for (int i = 0; i < ndim; ++i) {
    if (t.shape[i] > kMaxElements) {
      return invalid(std::string(name) + ": size " + std::to_string(t.shape[i]) +
                     " in dimension " + std::to_string(i) + " exceeds the limit of 2^48");
    }
    if (__builtin_mul_overflow(count, t.shape[i], &count) || count > kMaxElements) {
      return invalid(std::string(name) + ": shape " + shape_str(t) +
                     " has more than 2^48 elements");
    }
  }
  if (count > 0) {
    for (int i = 0; i < ndim; ++i) {
      int64_t step = 0;
      if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &step) ||
          __builtin_add_overflow(last, step, &last) || last >= kMaxElements) {
        return invalid(std::string(name) + ": strides make the tensor span more than 2^48 "
                       "elements (shape " + shape_str(t) + ")");
      }
    }
    const uintptr_t bytes = uintptr_t(last + 1) * dtype_size(t.dtype);
    if (reinterpret_cast<uintptr_t>(t.data) > UINTPTR_MAX - bytes) {
      return invalid(std::string(name) + ": data pointer + extent (" + std::to_string(bytes) +
                     " bytes) wraps around the address space");
    }
  }
  if (count > 0 && t.data == nullptr) {
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

// fp8 inputs are for forward() only, padded or varlen (flashattn.hpp, Fp8Descale).
Status refuse_fp8(const AttnParams& p, const char* call) {
  if (p.dtype != DType::F8E4M3) return Status::Ok();
  return Status::Error(ErrorCode::Unsupported,
                       std::string("q: float8_e4m3 inputs are supported by forward() (padded or varlen) "
                                   "only, not by ") + call);
}

// The optional per-tensor fp8 dequantisation factors: fp32 [1] on q's
// device, and only with fp8 inputs.
Status fill_fp8_descale(const ForwardArgs& a, FwdParams* p) {
  const struct {
    const char* name;
    const TensorView* t;
    const float** dst;
  } ds[] = {{"fp8_descale.q", &a.fp8_descale.q, &p->q_descale},
            {"fp8_descale.k", &a.fp8_descale.k, &p->k_descale},
            {"fp8_descale.v", &a.fp8_descale.v, &p->v_descale}};
  for (const auto& d : ds) {
    if (d.t->data == nullptr) continue;
    if (a.q.dtype != DType::F8E4M3) {
      return invalid(std::string(d.name) + ": only for float8_e4m3 inputs, q is " +
                     dtype_name(a.q.dtype));
    }
    if (Status s = check_view(d.name, *d.t, 1); !s.ok()) return s;
    if (Status s = check_same_place(d.name, *d.t, a.q, DType::F32); !s.ok()) return s;
    if (d.t->shape[0] != 1) {
      return invalid(std::string(d.name) + ": expected shape [1] (one per-tensor factor), got " +
                     shape_str(*d.t));
    }
    *d.dst = static_cast<const float*>(d.t->data);
  }
  return Status::Ok();
}

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
  // v may have a head dim of its own (out, dout and dv follow it), as in
  // DeepSeek's 192 / 128 attention; the scale defaults to q's 1/sqrt(D).
  const int64_t Dv = v.ndim == 4 ? v.shape[3] : D;
  if (Status s = check_bshd("v", v, {B, Sk, Hkv, Dv}); !s.ok()) return s;
  if (Status s = check_same_place("k", k, q, q.dtype); !s.ok()) return s;
  if (Status s = check_same_place("v", v, q, q.dtype); !s.ok()) return s;
  if (Hkv == 0 && Hq != 0) return invalid("k: heads_kv is 0 but q has " + std::to_string(Hq) + " heads");
  if (Hkv != 0 && Hq % Hkv != 0) {
    return invalid("q/k: heads_q (" + std::to_string(Hq) + ") must be a multiple of heads_kv (" +
                   std::to_string(Hkv) + ") for GQA/MQA");
  }
  // Positions inside a sequence are int32 in the kernels' masks (the CPU's
  // per-column key bounds, the CUDA tile indices); offsets stay int64.
  if (Sq > INT32_MAX || Sk > INT32_MAX) {
    return invalid(std::string(Sq > INT32_MAX ? "q" : "k") + ": seqlen " +
                   std::to_string(std::max(Sq, Sk)) + " exceeds the limit of 2^31 - 1");
  }
  // Any head dim up to 256: one that the kernels do not take as it is (not
  // a multiple of 8, or 16 for fp8) runs on zero-padded copies
  // (common/head_dim_pad.hpp), except in the KV cache (make_kvcache_params).
  if (D < 1 || D > kMaxHeadDim) {
    return invalid("q: head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " + std::to_string(D));
  }
  if (Dv < 1 || Dv > kMaxHeadDim) {
    return invalid("v: head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " + std::to_string(Dv));
  }
  if (Dv != D && q.dtype == DType::F8E4M3) {
    return Status::Error(ErrorCode::Unsupported,
                         "v: float8_e4m3 inputs need v's head_dim equal to q's (" + std::to_string(D) +
                             "), got " + std::to_string(Dv));
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
  p->head_dim_v = Dv;
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
  // A window wider than any sequence (sizes are <= 2^48) is unbounded in
  // effect; clamping keeps i + offset +- window from overflowing in the masks.
  p->window_left = std::min(opt.window_left, kMaxElements);
  p->window_right = opt.causal ? 0 : std::min(opt.window_right, kMaxElements);
  if (opt.causal && opt.window_right > 0) p->window_right = 0;
  return Status::Ok();
}

// ---- varlen and KV cache ------------------------------------------------------

// An int32 index tensor (cu_seqlens, cache_seqlens, block_table): `ndim`-d,
// contiguous, on q's device.
Status check_index(const char* name, const TensorView& t, int ndim, const TensorView& q) {
  if (t.ndim != ndim) {
    return invalid(std::string(name) + ": expected a " + std::to_string(ndim) +
                   "-d int32 tensor, got ndim " + std::to_string(t.ndim));
  }
  if (t.dtype != DType::I32) {
    return invalid(std::string(name) + ": expected dtype int32, got dtype code " +
                   std::to_string(static_cast<int>(t.dtype)));
  }
  if (t.device != q.device || t.device_index != q.device_index) {
    return invalid(std::string(name) + ": must be on the same device as q");
  }
  int64_t want = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (t.shape[i] < 0) return invalid(std::string(name) + ": negative size in shape " + shape_str(t));
    if (t.shape[i] > 1 && t.stride[i] != want) {
      return invalid(std::string(name) + ": must be contiguous (row-major), got stride " +
                     std::to_string(t.stride[i]) + " in dimension " + std::to_string(i));
    }
    want *= t.shape[i];
  }
  if (t.numel() > 0 && t.data == nullptr) {
    return invalid(std::string(name) + ": data is a null pointer for a tensor of shape " + shape_str(t));
  }
  return Status::Ok();
}

// ALiBi slopes and dropout (flashattn.hpp, Options), after fill_common.
// batch: the number of sequences (varlen's fill_common sees one packed entry).
Status fill_variants(const Options& opt, const TensorView& q, int64_t batch, AttnParams* p) {
  const bool alibi = opt.alibi_slopes.data != nullptr;
  if (!std::isfinite(opt.dropout_p) || opt.dropout_p < 0.0f || opt.dropout_p >= 1.0f) {
    return invalid("options.dropout_p: expected a value in [0, 1), got " + std::to_string(opt.dropout_p));
  }
  if (alibi) {
    const TensorView& a = opt.alibi_slopes;
    const int64_t B = batch, Hq = p->heads_q;
    if (a.ndim != 1 && a.ndim != 2) {
      return invalid("options.alibi_slopes: expected fp32 [heads_q] or [batch, heads_q], got ndim " +
                     std::to_string(a.ndim));
    }
    if (a.dtype != DType::F32) {
      return invalid("options.alibi_slopes: expected dtype fp32, got dtype code " +
                     std::to_string(static_cast<int>(a.dtype)));
    }
    if (a.device != q.device || a.device_index != q.device_index) {
      return invalid("options.alibi_slopes: must be on the same device as q");
    }
    const bool per_batch = a.ndim == 2;
    if ((per_batch && (a.shape[0] != B || a.shape[1] != Hq)) || (!per_batch && a.shape[0] != Hq)) {
      return invalid("options.alibi_slopes: expected shape [" + std::to_string(Hq) + "] or [" +
                     std::to_string(B) + ", " + std::to_string(Hq) + "], got " + shape_str(a));
    }
    const int last = a.ndim - 1;
    if (a.shape[last] > 1 && a.stride[last] != 1) {
      return invalid("options.alibi_slopes: the heads dimension must be contiguous (stride 1), got " +
                     std::to_string(a.stride[last]));
    }
    if (per_batch && (a.stride[0] < 0 || a.stride[0] > kMaxElements)) {
      return invalid("options.alibi_slopes: batch stride must be in [0, 2^48], got " +
                     std::to_string(a.stride[0]));
    }
    p->alibi_slopes = static_cast<const float*>(a.data);
    p->alibi_batch_stride = per_batch ? a.stride[0] : 0;
  }
  p->dropout_p = opt.dropout_p;
  p->dropout_seed = opt.dropout_seed;
  p->dropout_offset = opt.dropout_offset;
  return Status::Ok();
}

// The dropout keep mask a forward may return (ForwardArgs::dropout_mask).
Status check_dropout_mask(const ForwardArgs& a, const AttnParams& p) {
  const TensorView& m = a.dropout_mask;
  if (m.data == nullptr) return Status::Ok();
  if (p.dropout_p <= 0.0f) {
    return invalid("dropout_mask: only returned with options.dropout_p > 0");
  }
  if (Status s = check_index("dropout_mask", m, 4, a.q); !s.ok()) return s;
  const Dims want{p.batch, p.heads_q, p.seqlen_q, p.seqlen_k};
  for (int i = 0; i < 4; ++i) {
    if (m.shape[i] != want[size_t(i)]) {
      return invalid("dropout_mask: expected shape [batch, heads_q, seqlen_q, seqlen_k] = " +
                     dims_str(want) + ", got " + shape_str(m));
    }
  }
  return Status::Ok();
}

// A packed varlen tensor [total, heads, head_dim] as the [1, total, heads,
// head_dim] view the common checks take (batch stride 0: the sequence offsets
// come from cu_seqlens).
Status as_packed(const char* name, const TensorView& t, TensorView* out) {
  if (t.ndim != 3) {
    return invalid(std::string(name) + ": varlen expects a 3-d [total_tokens, heads, head_dim] "
                   "tensor, got ndim " + std::to_string(t.ndim));
  }
  *out = t;
  out->ndim = 4;
  for (int i = 3; i > 0; --i) {
    out->shape[i] = t.shape[i - 1];
    out->stride[i] = t.stride[i - 1];
  }
  out->shape[0] = 1;
  out->stride[0] = 0;
  return Status::Ok();
}

// cu_seqlens_q / cu_seqlens_k: shapes here, values (CPU only) in
// check_cu_values. Returns the batch.
Status check_cu(const Varlen& vl, const TensorView& q, int64_t* batch) {
  if (vl.cu_seqlens_q.data == nullptr || vl.cu_seqlens_k.data == nullptr) {
    return invalid(std::string(vl.cu_seqlens_q.data ? "cu_seqlens_k" : "cu_seqlens_q") +
                   ": varlen needs both cu_seqlens_q and cu_seqlens_k");
  }
  if (Status s = check_index("cu_seqlens_q", vl.cu_seqlens_q, 1, q); !s.ok()) return s;
  if (Status s = check_index("cu_seqlens_k", vl.cu_seqlens_k, 1, q); !s.ok()) return s;
  if (vl.cu_seqlens_q.shape[0] < 1) return invalid("cu_seqlens_q: expected shape [batch + 1], got [0]");
  if (vl.cu_seqlens_k.shape[0] != vl.cu_seqlens_q.shape[0]) {
    return invalid("cu_seqlens_k: expected shape [batch + 1] = [" +
                   std::to_string(vl.cu_seqlens_q.shape[0]) + "] like cu_seqlens_q, got " +
                   shape_str(vl.cu_seqlens_k));
  }
  if (vl.max_seqlen_q < 0 || vl.max_seqlen_k < 0) {
    return invalid(std::string(vl.max_seqlen_q < 0 ? "max_seqlen_q" : "max_seqlen_k") +
                   ": expected >= 0");
  }
  *batch = vl.cu_seqlens_q.shape[0] - 1;
  return Status::Ok();
}

Status check_cu_values(const char* name, const TensorView& cu, int64_t total, int64_t max_len,
                       const char* max_name) {
  if (cu.device != Device::CPU) return Status::Ok();  // not read on the host (see the header)
  const int32_t* c = static_cast<const int32_t*>(cu.data);
  const int64_t n = cu.shape[0];
  if (c[0] != 0) return invalid(std::string(name) + "[0]: expected 0, got " + std::to_string(c[0]));
  for (int64_t i = 1; i < n; ++i) {
    const int64_t len = int64_t(c[i]) - c[i - 1];
    if (len < 0) {
      return invalid(std::string(name) + ": must be non-decreasing, but [" + std::to_string(i) +
                     "] = " + std::to_string(c[i]) + " < [" + std::to_string(i - 1) + "] = " +
                     std::to_string(c[i - 1]));
    }
    if (len > max_len) {
      return invalid(std::string(name) + ": sequence " + std::to_string(i - 1) + " has length " +
                     std::to_string(len) + " > " + max_name + " = " + std::to_string(max_len));
    }
  }
  if (c[n - 1] > total) {
    return invalid(std::string(name) + "[batch] = " + std::to_string(c[n - 1]) +
                   " exceeds the rows of the packed tensor (" + std::to_string(total) + ")");
  }
  return Status::Ok();
}

// Varlen LSE: fp32 [heads_q, total_q], contiguous.
Status check_lse_varlen(const char* name, const TensorView& lse, const TensorView& q, int64_t Hq,
                        int64_t total) {
  if (Status s = check_view(name, lse, 2); !s.ok()) return s;
  if (Status s = check_same_place(name, lse, q, DType::F32); !s.ok()) return s;
  if (lse.shape[0] != Hq || lse.shape[1] != total) {
    return invalid(std::string(name) + ": varlen expects shape [heads_q, total_q] = [" +
                   std::to_string(Hq) + ", " + std::to_string(total) + "], got " + shape_str(lse));
  }
  if ((total > 1 && lse.stride[1] != 1) || (Hq > 1 && lse.stride[0] != total)) {
    return invalid(std::string(name) + ": must be contiguous [heads_q, total_q]");
  }
  return Status::Ok();
}

// After fill_common on the packed views: per-sequence lengths replace the
// [1, total] shape.
void apply_varlen(const Varlen& vl, int64_t batch, int64_t total_q, int64_t total_k,
                  AttnParams* p) {
  p->batch = batch;
  p->seqlen_q = vl.max_seqlen_q;
  p->seqlen_k = vl.max_seqlen_k;
  p->total_q = total_q;
  p->total_k = total_k;
  p->cu_seqlens_q = static_cast<const int32_t*>(vl.cu_seqlens_q.data);
  p->cu_seqlens_k = static_cast<const int32_t*>(vl.cu_seqlens_k.data);
}

Status make_forward_params_varlen(const ForwardArgs& a, FwdParams* p) {
  int64_t B = 0;
  if (Status s = check_cu(a.varlen, a.q, &B); !s.ok()) return s;
  TensorView q, k, v, out;
  if (Status s = as_packed("q", a.q, &q); !s.ok()) return s;
  if (Status s = as_packed("k", a.k, &k); !s.ok()) return s;
  if (Status s = as_packed("v", a.v, &v); !s.ok()) return s;
  if (Status s = as_packed("out", a.out, &out); !s.ok()) return s;
  if (Status s = fill_common(q, k, v, a.options, p); !s.ok()) return s;
  if (Status s = fill_fp8_descale(a, p); !s.ok()) return s;
  if (Status s = fill_variants(a.options, a.q, B, p); !s.ok()) return s;
  if (a.dropout_mask.data) return invalid("dropout_mask: returned for padded batches only (not varlen)");
  if (p->alibi_slopes) {
    if (Status s = check_disjoint({{"out", &a.out}},
                                  {{"options.alibi_slopes", &a.options.alibi_slopes}});
        !s.ok()) {
      return s;
    }
  }
  const int64_t total_q = q.shape[1], total_k = k.shape[1], Hq = p->heads_q, Dv = p->head_dim_v;
  if (Status s = check_bshd("out", out, {1, total_q, Hq, Dv}); !s.ok()) return s;
  if (Status s = check_same_place("out", a.out, a.q, out_dtype_for(a.q.dtype)); !s.ok()) return s;
  if (Status s = check_no_self_overlap("out", a.out); !s.ok()) return s;
  const bool has_lse = a.lse.data != nullptr;
  if (has_lse) {
    if (Status s = check_lse_varlen("lse", a.lse, a.q, Hq, total_q); !s.ok()) return s;
  }
  std::vector<Named> outputs{{"out", &a.out}};
  if (has_lse) outputs.push_back({"lse", &a.lse});
  std::vector<Named> inputs{{"q", &a.q}, {"k", &a.k}, {"v", &a.v},
                            {"cu_seqlens_q", &a.varlen.cu_seqlens_q},
                            {"cu_seqlens_k", &a.varlen.cu_seqlens_k}};
  if (p->q_descale) inputs.push_back({"fp8_descale.q", &a.fp8_descale.q});
  if (p->k_descale) inputs.push_back({"fp8_descale.k", &a.fp8_descale.k});
  if (p->v_descale) inputs.push_back({"fp8_descale.v", &a.fp8_descale.v});
  if (Status s = check_disjoint(outputs, inputs); !s.ok()) return s;
  if (Status s = check_cu_values("cu_seqlens_q", a.varlen.cu_seqlens_q, total_q,
                                 a.varlen.max_seqlen_q, "max_seqlen_q");
      !s.ok()) {
    return s;
  }
  if (Status s = check_cu_values("cu_seqlens_k", a.varlen.cu_seqlens_k, total_k,
                                 a.varlen.max_seqlen_k, "max_seqlen_k");
      !s.ok()) {
    return s;
  }
  apply_varlen(a.varlen, B, total_q, total_k, p);
  p->out = a.out.data;
  p->o_str = strides_of(out);
  p->lse = has_lse ? static_cast<float*>(a.lse.data) : nullptr;
  p->lse_batch_stride = 0;
  p->lse_head_stride = total_q;
  return Status::Ok();
}

Status make_backward_params_varlen(const BackwardArgs& a, BwdParams* p) {
  int64_t B = 0;
  if (Status s = check_cu(a.varlen, a.q, &B); !s.ok()) return s;
  TensorView q, k, v, out, dout, dq, dk, dv;
  const std::pair<const char*, std::pair<const TensorView*, TensorView*>> views[] = {
      {"q", {&a.q, &q}},       {"k", {&a.k, &k}},   {"v", {&a.v, &v}},   {"out", {&a.out, &out}},
      {"dout", {&a.dout, &dout}}, {"dq", {&a.dq, &dq}}, {"dk", {&a.dk, &dk}}, {"dv", {&a.dv, &dv}}};
  for (const auto& [name, tv] : views) {
    if (Status s = as_packed(name, *tv.first, tv.second); !s.ok()) return s;
  }
  if (Status s = fill_common(q, k, v, a.options, p); !s.ok()) return s;
  if (Status s = refuse_fp8(*p, "backward()"); !s.ok()) return s;
  if (Status s = fill_variants(a.options, a.q, B, p); !s.ok()) return s;
  if (p->alibi_slopes) {
    if (Status s = check_disjoint({{"dq", &a.dq}, {"dk", &a.dk}, {"dv", &a.dv}},
                                  {{"options.alibi_slopes", &a.options.alibi_slopes}});
        !s.ok()) {
      return s;
    }
  }
  const int64_t Tq = q.shape[1], Tk = k.shape[1], Hq = p->heads_q, Hkv = p->heads_kv,
                D = p->head_dim, Dv = p->head_dim_v;
  struct Spec {
    const char* name;
    const TensorView* t;
    const TensorView* orig;
    Dims dims;
  };
  const Spec specs[] = {{"out", &out, &a.out, {1, Tq, Hq, Dv}}, {"dout", &dout, &a.dout, {1, Tq, Hq, Dv}},
                        {"dq", &dq, &a.dq, {1, Tq, Hq, D}},     {"dk", &dk, &a.dk, {1, Tk, Hkv, D}},
                        {"dv", &dv, &a.dv, {1, Tk, Hkv, Dv}}};
  for (const Spec& s : specs) {
    if (Status st = check_bshd(s.name, *s.t, s.dims); !st.ok()) return st;
    if (Status st = check_same_place(s.name, *s.orig, a.q, a.q.dtype); !st.ok()) return st;
  }
  for (const Spec& s : specs) {
    if (s.t == &out || s.t == &dout) continue;
    if (Status st = check_no_self_overlap(s.name, *s.orig); !st.ok()) return st;
  }
  if (a.lse.data == nullptr) return invalid("lse: required for the backward (the forward's LSE)");
  if (Status s = check_lse_varlen("lse", a.lse, a.q, Hq, Tq); !s.ok()) return s;
  if (Status s = check_disjoint({{"dq", &a.dq}, {"dk", &a.dk}, {"dv", &a.dv}},
                                {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"out", &a.out},
                                 {"dout", &a.dout}, {"lse", &a.lse},
                                 {"cu_seqlens_q", &a.varlen.cu_seqlens_q},
                                 {"cu_seqlens_k", &a.varlen.cu_seqlens_k}});
      !s.ok()) {
    return s;
  }
  if (Status s = check_cu_values("cu_seqlens_q", a.varlen.cu_seqlens_q, Tq, a.varlen.max_seqlen_q,
                                 "max_seqlen_q");
      !s.ok()) {
    return s;
  }
  if (Status s = check_cu_values("cu_seqlens_k", a.varlen.cu_seqlens_k, Tk, a.varlen.max_seqlen_k,
                                 "max_seqlen_k");
      !s.ok()) {
    return s;
  }
  apply_varlen(a.varlen, B, Tq, Tk, p);
  p->out = a.out.data;
  p->dout = a.dout.data;
  p->o_str = strides_of(out);
  p->do_str = strides_of(dout);
  p->lse = static_cast<const float*>(a.lse.data);
  p->lse_batch_stride = 0;
  p->lse_head_stride = Tq;
  p->dq = a.dq.data;
  p->dk = a.dk.data;
  p->dv = a.dv.data;
  p->dq_str = strides_of(dq);
  p->dk_str = strides_of(dk);
  p->dv_str = strides_of(dv);
  p->deterministic = a.options.deterministic;
  return Status::Ok();
}

}  // namespace

Status make_forward_params(const ForwardArgs& a, FwdParams* p) noexcept {
  try {
    if (a.varlen.enabled()) return make_forward_params_varlen(a, p);
    if (Status s = fill_common(a.q, a.k, a.v, a.options, p); !s.ok()) return s;
    if (Status s = fill_variants(a.options, a.q, p->batch, p); !s.ok()) return s;
    if (Status s = check_dropout_mask(a, *p); !s.ok()) return s;
    const int64_t B = p->batch, Sq = p->seqlen_q, Hq = p->heads_q, Dv = p->head_dim_v;
    if (Status s = check_bshd("out", a.out, {B, Sq, Hq, Dv}); !s.ok()) return s;
    if (Status s = check_same_place("out", a.out, a.q, out_dtype_for(a.q.dtype)); !s.ok()) return s;
    if (Status s = check_no_self_overlap("out", a.out); !s.ok()) return s;
    if (Status s = fill_fp8_descale(a, p); !s.ok()) return s;
    const bool has_lse = a.lse.data != nullptr;
    if (has_lse) {
      if (Status s = check_lse("lse", a.lse, a.q, B, Hq, Sq); !s.ok()) return s;
    }
    std::vector<Named> outputs{{"out", &a.out}};
    if (has_lse) outputs.push_back({"lse", &a.lse});
    if (a.dropout_mask.data) outputs.push_back({"dropout_mask", &a.dropout_mask});
    std::vector<Named> inputs{{"q", &a.q}, {"k", &a.k}, {"v", &a.v}};
    if (p->alibi_slopes) inputs.push_back({"options.alibi_slopes", &a.options.alibi_slopes});
    if (p->q_descale) inputs.push_back({"fp8_descale.q", &a.fp8_descale.q});
    if (p->k_descale) inputs.push_back({"fp8_descale.k", &a.fp8_descale.k});
    if (p->v_descale) inputs.push_back({"fp8_descale.v", &a.fp8_descale.v});
    if (Status s = check_disjoint(outputs, inputs); !s.ok()) return s;
    p->dropout_mask = static_cast<int32_t*>(a.dropout_mask.data);
    p->out = a.out.data;
    p->o_str = strides_of(a.out);
    p->lse = has_lse ? static_cast<float*>(a.lse.data) : nullptr;
    p->lse_batch_stride = Hq * Sq;
    p->lse_head_stride = Sq;
    return Status::Ok();
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "argument check failed unexpectedly");
  }
}

Status make_backward_params(const BackwardArgs& a, BwdParams* p) noexcept {
  try {
    if (a.varlen.enabled()) return make_backward_params_varlen(a, p);
    if (Status s = fill_common(a.q, a.k, a.v, a.options, p); !s.ok()) return s;
    if (Status s = refuse_fp8(*p, "backward()"); !s.ok()) return s;
    if (Status s = fill_variants(a.options, a.q, p->batch, p); !s.ok()) return s;
    const int64_t B = p->batch, Sq = p->seqlen_q, Sk = p->seqlen_k, Hq = p->heads_q,
                  Hkv = p->heads_kv, D = p->head_dim, Dv = p->head_dim_v;
    const DType dt = a.q.dtype;
    struct Spec {
      const char* name;
      const TensorView* t;
      Dims dims;
    };
    const Spec specs[] = {{"out", &a.out, {B, Sq, Hq, Dv}}, {"dout", &a.dout, {B, Sq, Hq, Dv}},
                          {"dq", &a.dq, {B, Sq, Hq, D}},    {"dk", &a.dk, {B, Sk, Hkv, D}},
                          {"dv", &a.dv, {B, Sk, Hkv, Dv}}};
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
    if (p->alibi_slopes) {
      if (Status s = check_disjoint({{"dq", &a.dq}, {"dk", &a.dk}, {"dv", &a.dv}},
                                    {{"options.alibi_slopes", &a.options.alibi_slopes}});
          !s.ok()) {
        return s;
      }
    }
    p->out = a.out.data;
    p->dout = a.dout.data;
    p->o_str = strides_of(a.out);
    p->do_str = strides_of(a.dout);
    p->lse = static_cast<const float*>(a.lse.data);
    p->lse_batch_stride = Hq * Sq;
    p->lse_head_stride = Sq;
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

Status make_kvcache_params(const KvCacheArgs& a, FwdParams* p) noexcept {
  try {
    const bool paged = a.block_table.data != nullptr;
    const bool batch_idx = a.cache_batch_idx.data != nullptr;
    const bool leftpad = a.cache_leftpad.data != nullptr;
    const bool rotary = a.rotary_cos.data != nullptr || a.rotary_sin.data != nullptr;
    if (Status s = check_view("q", a.q, 4); !s.ok()) return s;
    const int64_t B = a.q.shape[0], Sq = a.q.shape[1], Hq = a.q.shape[2];
    if (paged && (batch_idx || leftpad)) {
      return invalid(std::string(batch_idx ? "cache_batch_idx" : "cache_leftpad") +
                     ": not supported with a paged cache (block_table); the block table already "
                     "places each sequence's rows");
    }
    const int64_t cache_entries = a.k_cache.ndim == 4 ? a.k_cache.shape[0] : 0;
    if (Status s = check_view("k_cache", a.k_cache, 4); !s.ok()) return s;
    if (Status s = check_view("v_cache", a.v_cache, 4); !s.ok()) return s;
    for (int i = 0; i < 4; ++i) {
      if (a.v_cache.shape[i] != a.k_cache.shape[i]) {
        return invalid("v_cache: shape " + shape_str(a.v_cache) + " differs from k_cache's " +
                       shape_str(a.k_cache) +
                       (i == 3 ? " (forward_kvcache takes one head_dim for K and V)" : ""));
      }
    }
    // The cache as the [B, capacity, Hkv, D] view the common checks take; a
    // paged cache becomes [B, page_size, ...] with the page stride as the batch
    // stride (the kernels add block_table pages instead of batch offsets).
    TensorView kc = a.k_cache, vc = a.v_cache;
    int64_t capacity = a.k_cache.shape[1], num_pages = 0, page_size = 0;
    if (paged) {
      if (Status s = check_index("block_table", a.block_table, 2, a.q); !s.ok()) return s;
      if (a.block_table.shape[0] != B) {
        return invalid("block_table: expected shape [batch, max_pages] with batch " +
                       std::to_string(B) + ", got " + shape_str(a.block_table));
      }
      num_pages = a.k_cache.shape[0];
      page_size = a.k_cache.shape[1];
      if (page_size <= 0 || page_size % 16 != 0) {
        return invalid("k_cache: paged KV needs page_size (dimension 1 of [num_pages, page_size, "
                       "heads_kv, head_dim]) a positive multiple of 16, got " +
                       std::to_string(page_size));
      }
      capacity = a.block_table.shape[1] * page_size;
      kc.shape[0] = vc.shape[0] = B;
    } else if (batch_idx) {
      // Entries are picked per sequence: the common checks see B of them.
      kc.shape[0] = vc.shape[0] = B;
    } else if (a.k_cache.shape[0] != B) {
      return invalid("k_cache: batch " + std::to_string(a.k_cache.shape[0]) +
                     " differs from q's batch " + std::to_string(B) +
                     " (pass block_table for a paged [num_pages, page_size, heads_kv, head_dim] cache, "
                     "or cache_batch_idx to pick entries)");
    }
    {
      // Reuse the common checks with the names callers see.
      Status s = fill_common(a.q, kc, vc, a.options, p);
      if (s.ok()) s = refuse_fp8(*p, "forward_kvcache()");
      if (s.ok()) s = fill_variants(a.options, a.q, B, p);
      if (!s.ok()) {
        std::string m = s.message;
        if (m.rfind("k:", 0) == 0) m = "k_cache:" + m.substr(2);
        if (m.rfind("v:", 0) == 0) m = "v_cache:" + m.substr(2);
        return Status::Error(s.code, m);
      }
    }
    const int64_t Hkv = p->heads_kv, D = p->head_dim;
    // The kernels read (and append into) the cache in place, so its rows must
    // be whole 16-byte chunks: padded copies would copy the whole cache per call.
    if (D % 8 != 0) {
      return invalid("q: forward_kvcache needs a head_dim that is a multiple of 8 (the cache is read in "
                     "place), got " + std::to_string(D));
    }
    if (Status s = check_index("cache_seqlens", a.cache_seqlens, 1, a.q); !s.ok()) return s;
    if (a.cache_seqlens.shape[0] != B) {
      return invalid("cache_seqlens: expected shape [batch] = [" + std::to_string(B) + "], got " +
                     shape_str(a.cache_seqlens));
    }
    const bool append = a.k_new.data != nullptr || a.v_new.data != nullptr;
    int64_t s_new = 0;
    if (append) {
      if (a.k_new.data == nullptr || a.v_new.data == nullptr) {
        return invalid(std::string(a.k_new.data ? "v_new" : "k_new") +
                       ": k_new and v_new go together (both or neither)");
      }
      if (Status s = check_view("k_new", a.k_new, 4); !s.ok()) return s;
      s_new = a.k_new.shape[1];
      if (Status s = check_bshd("k_new", a.k_new, {B, s_new, Hkv, D}); !s.ok()) return s;
      if (Status s = check_bshd("v_new", a.v_new, {B, s_new, Hkv, D}); !s.ok()) return s;
      if (Status s = check_same_place("k_new", a.k_new, a.q, a.q.dtype); !s.ok()) return s;
      if (Status s = check_same_place("v_new", a.v_new, a.q, a.q.dtype); !s.ok()) return s;
      if (Status s = check_no_self_overlap("k_cache", a.k_cache); !s.ok()) return s;
      if (Status s = check_no_self_overlap("v_cache", a.v_cache); !s.ok()) return s;
    }
    for (auto [name, t] : {std::pair<const char*, const TensorView*>{"cache_batch_idx", &a.cache_batch_idx},
                           {"cache_leftpad", &a.cache_leftpad}}) {
      if (t->data == nullptr) continue;
      if (Status s = check_index(name, *t, 1, a.q); !s.ok()) return s;
      if (t->shape[0] != B) {
        return invalid(std::string(name) + ": expected shape [batch] = [" + std::to_string(B) + "], got " +
                       shape_str(*t));
      }
    }
    int64_t rotary_dim = 0, ro_len = 0;
    if (rotary) {
      if (a.rotary_cos.data == nullptr || a.rotary_sin.data == nullptr) {
        return invalid(std::string(a.rotary_cos.data ? "rotary_sin" : "rotary_cos") +
                       ": rotary_cos and rotary_sin go together (both or neither)");
      }
      if (!append) {
        return invalid("rotary_cos: the rotary embedding applies to the appended keys; pass k_new and v_new "
                       "(or rotate q and k before the call)");
      }
      for (auto [name, t] : {std::pair<const char*, const TensorView*>{"rotary_cos", &a.rotary_cos},
                             {"rotary_sin", &a.rotary_sin}}) {
        if (Status s = check_view(name, *t, 2); !s.ok()) return s;
        if (Status s = check_same_place(name, *t, a.q, a.q.dtype); !s.ok()) return s;
        if (t->shape[1] > 1 && t->stride[1] != 1) {
          return invalid(std::string(name) + ": the last dimension must be contiguous (stride 1), got stride " +
                         std::to_string(t->stride[1]));
        }
      }
      if (a.rotary_sin.shape[0] != a.rotary_cos.shape[0] || a.rotary_sin.shape[1] != a.rotary_cos.shape[1]) {
        return invalid("rotary_sin: shape " + shape_str(a.rotary_sin) + " differs from rotary_cos's " +
                       shape_str(a.rotary_cos));
      }
      ro_len = a.rotary_cos.shape[0];
      rotary_dim = 2 * a.rotary_cos.shape[1];
      if (rotary_dim < 2 || rotary_dim > D) {
        return invalid("rotary_cos: expected shape [seqlen_ro, rotary_dim / 2] with 2 <= rotary_dim <= head_dim " +
                       std::to_string(D) + ", got " + shape_str(a.rotary_cos));
      }
    }
    if (Status s = check_bshd("out", a.out, {B, Sq, Hq, D}); !s.ok()) return s;
    if (Status s = check_same_place("out", a.out, a.q, a.q.dtype); !s.ok()) return s;
    if (Status s = check_no_self_overlap("out", a.out); !s.ok()) return s;
    const bool has_lse = a.lse.data != nullptr;
    if (has_lse) {
      if (Status s = check_lse("lse", a.lse, a.q, B, Hq, Sq); !s.ok()) return s;
    }
    if (a.num_splits < 0) {
      return invalid("num_splits: expected >= 0 (0 = heuristic), got " + std::to_string(a.num_splits));
    }
    std::vector<Named> inputs{{"q", &a.q},
                              {"k_cache", &a.k_cache},
                              {"v_cache", &a.v_cache},
                              {"cache_seqlens", &a.cache_seqlens}};
    if (paged) inputs.push_back({"block_table", &a.block_table});
    if (append) {
      inputs.push_back({"k_new", &a.k_new});
      inputs.push_back({"v_new", &a.v_new});
    }
    std::vector<Named> side{};  // the optional index and rotary tensors
    if (batch_idx) side.push_back({"cache_batch_idx", &a.cache_batch_idx});
    if (leftpad) side.push_back({"cache_leftpad", &a.cache_leftpad});
    if (rotary) {
      side.push_back({"rotary_cos", &a.rotary_cos});
      side.push_back({"rotary_sin", &a.rotary_sin});
    }
    inputs.insert(inputs.end(), side.begin(), side.end());
    std::vector<Named> outputs{{"out", &a.out}};
    if (has_lse) outputs.push_back({"lse", &a.lse});
    if (Status s = check_disjoint(outputs, inputs); !s.ok()) return s;
    if (append) {
      // The caches are written: nothing else the call reads may share their memory.
      std::vector<Named> read{{"q", &a.q}, {"cache_seqlens", &a.cache_seqlens},
                              {"k_new", &a.k_new}, {"v_new", &a.v_new}};
      if (paged) read.push_back({"block_table", &a.block_table});
      read.insert(read.end(), side.begin(), side.end());
      if (Status s = check_disjoint({{"k_cache", &a.k_cache}, {"v_cache", &a.v_cache}}, read);
          !s.ok()) {
        return s;
      }
    }
    if (a.q.device == Device::CPU) {
      const int32_t* lens = static_cast<const int32_t*>(a.cache_seqlens.data);
      const int32_t* bt = static_cast<const int32_t*>(a.block_table.data);
      const int32_t* idx = static_cast<const int32_t*>(a.cache_batch_idx.data);
      const int32_t* left = static_cast<const int32_t*>(a.cache_leftpad.data);
      std::vector<int64_t> owner(batch_idx && append ? size_t(cache_entries) : 0, -1);
      const bool q_per_row = rotary_q_per_row(*p);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = lens[b];
        const std::string at = "[" + std::to_string(b) + "] = ";
        if (batch_idx) {
          const int32_t e = idx[b];
          if (e < 0 || e >= cache_entries) {
            return invalid("cache_batch_idx" + at + std::to_string(e) + " is not an entry of k_cache (0 .. " +
                           std::to_string(cache_entries - 1) + ")");
          }
          if (append) {
            if (owner[size_t(e)] >= 0) {
              return invalid("cache_batch_idx" + at + std::to_string(e) + ": sequences " +
                             std::to_string(owner[size_t(e)]) + " and " + std::to_string(b) +
                             " share a cache entry, and k_new is appended to it; entries must be distinct "
                             "when appending");
            }
            owner[size_t(e)] = b;
          }
        }
        if (leftpad && (left[b] < 0 || left[b] > len)) {
          return invalid("cache_leftpad" + at + std::to_string(left[b]) + ": expected 0 <= cache_leftpad[b] <= "
                         "cache_seqlens[b] = " + std::to_string(len));
        }
        if (rotary && len >= 0) {
          const int64_t last = len + std::max<int64_t>(s_new, q_per_row ? Sq : 1);
          if (last > ro_len) {
            return invalid("rotary_cos: " + std::to_string(ro_len) + " rows, but sequence " + std::to_string(b) +
                           " needs positions up to " + std::to_string(last - 1) + " (cache_seqlens" + at +
                           std::to_string(len) + ")");
          }
        }
        if (len < 0 || len + s_new > capacity) {
          return invalid("cache_seqlens[" + std::to_string(b) + "] = " + std::to_string(len) +
                         (s_new ? " plus " + std::to_string(s_new) + " new tokens" : std::string()) +
                         " does not fit the cache capacity " + std::to_string(capacity) +
                         (paged ? " (max_pages * page_size)" : ""));
        }
        if (paged) {
          const int64_t pages = (len + s_new + page_size - 1) / page_size;
          for (int64_t i = 0; i < pages; ++i) {
            const int32_t pg = bt[b * a.block_table.shape[1] + i];
            if (pg < 0 || pg >= num_pages) {
              return invalid("block_table[" + std::to_string(b) + "][" + std::to_string(i) +
                             "] = " + std::to_string(pg) + " is not a page of k_cache (0 .. " +
                             std::to_string(num_pages - 1) + ")");
            }
          }
        }
      }
    }
    p->seqlen_k = capacity;
    p->seqlens_k = static_cast<const int32_t*>(a.cache_seqlens.data);
    p->seqlens_k_add = s_new;
    if (paged) {
      p->block_table = static_cast<const int32_t*>(a.block_table.data);
      p->block_table_stride = a.block_table.shape[1];
      p->page_size = page_size;
    }
    if (append) {
      p->k_new = a.k_new.data;
      p->v_new = a.v_new.data;
      p->knew_str = strides_of(a.k_new);
      p->vnew_str = strides_of(a.v_new);
    }
    p->kv_batch_idx = static_cast<const int32_t*>(a.cache_batch_idx.data);
    p->leftpad_k = static_cast<const int32_t*>(a.cache_leftpad.data);
    p->kv_entries = cache_entries;  // pages, when paged
    if (rotary) {
      p->rotary_cos = a.rotary_cos.data;
      p->rotary_sin = a.rotary_sin.data;
      p->rotary_dim = rotary_dim;
      p->rotary_cos_stride = a.rotary_cos.stride[0];
      p->rotary_sin_stride = a.rotary_sin.stride[0];
      p->rotary_interleaved = a.rotary_interleaved;
    }
    p->out = a.out.data;
    p->o_str = strides_of(a.out);
    p->lse = has_lse ? static_cast<float*>(a.lse.data) : nullptr;
    p->lse_batch_stride = Hq * Sq;
    p->lse_head_stride = Sq;
    p->num_splits = a.num_splits;
    return Status::Ok();
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "argument check failed unexpectedly");
  }
}

}  // namespace flashattn::detail
