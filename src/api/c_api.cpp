// The C ABI: plain structs translated to the C++ API; nothing here throws.
#include <cstring>
#include <initializer_list>
#include <string>

#include "flashattn/flashattn.h"
#include "flashattn/flashattn.hpp"

namespace {

thread_local std::string g_last_error;

flashattn::TensorView to_view(const fa_tensor& t) {
  flashattn::TensorView v;
  v.data = t.data;
  v.dtype = static_cast<flashattn::DType>(t.dtype);
  v.device = static_cast<flashattn::Device>(t.device);
  v.device_index = t.device_index;
  v.ndim = t.ndim;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = t.shape[i];
    v.stride[i] = t.stride[i];
  }
  return v;
}

flashattn::Options to_options(const fa_options& o) {
  flashattn::Options r;
  r.softmax_scale = o.softmax_scale;
  r.softcap = o.softcap;
  r.window_left = o.window_left;
  r.window_right = o.window_right;
  r.causal = o.causal != 0;
  r.deterministic = o.deterministic != 0;
  r.stream = o.stream;
  r.alibi_slopes = to_view(o.alibi_slopes);
  r.dropout_p = o.dropout_p;
  r.dropout_seed = o.dropout_seed;
  r.dropout_offset = o.dropout_offset;
  return r;
}

fa_status finish(const flashattn::Status& s) {
  if (s.ok()) {
    g_last_error.clear();
    return FA_OK;
  }
  try {
    g_last_error = s.message;
  } catch (...) {
  }
  return static_cast<fa_status>(s.code);
}

fa_status null_args(const char* fn) {
  g_last_error = std::string(fn) + ": args is a null pointer";
  return FA_ERR_INVALID_ARGUMENT;
}

// A tensor view with ndim outside [0, 4] would make the C++ side read past
// shape[]; refuse it here, where the raw struct is seen.
fa_status check_ndim(const char* name, const fa_tensor& t) {
  if (t.ndim < 0 || t.ndim > 4) {
    g_last_error = std::string(name) + ": ndim must be in [0, 4], got " + std::to_string(t.ndim);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return FA_OK;
}

flashattn::ForwardArgs to_forward(const fa_forward_args& a) {
  flashattn::ForwardArgs r;
  r.q = to_view(a.q);
  r.k = to_view(a.k);
  r.v = to_view(a.v);
  r.out = to_view(a.out);
  r.lse = to_view(a.lse);
  r.options = to_options(a.options);
  r.dropout_mask = to_view(a.dropout_mask);
  return r;
}

flashattn::BackwardArgs to_backward(const fa_backward_args& a) {
  flashattn::BackwardArgs r;
  r.q = to_view(a.q);
  r.k = to_view(a.k);
  r.v = to_view(a.v);
  r.out = to_view(a.out);
  r.dout = to_view(a.dout);
  r.lse = to_view(a.lse);
  r.dq = to_view(a.dq);
  r.dk = to_view(a.dk);
  r.dv = to_view(a.dv);
  r.options = to_options(a.options);
  return r;
}

// check_ndim over a call's named tensors, in order; the first bad one wins.
fa_status check_ndims(std::initializer_list<std::pair<const char*, const fa_tensor*>> ts) {
  for (auto [n, t] : ts) {
    if (fa_status s = check_ndim(n, *t); s != FA_OK) return s;
  }
  return FA_OK;
}

fa_status check_forward_ndims(const fa_forward_args& a) {
  return check_ndims({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"out", &a.out}, {"lse", &a.lse},
                      {"options.alibi_slopes", &a.options.alibi_slopes}, {"dropout_mask", &a.dropout_mask}});
}

fa_status check_backward_ndims(const fa_backward_args& a) {
  return check_ndims({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"out", &a.out}, {"dout", &a.dout},
                      {"lse", &a.lse}, {"dq", &a.dq}, {"dk", &a.dk}, {"dv", &a.dv},
                      {"options.alibi_slopes", &a.options.alibi_slopes}});
}

fa_status check_varlen(const char* fn, const fa_varlen* vl) {
  if (vl == nullptr) {
    g_last_error = std::string(fn) + ": varlen is a null pointer";
    return FA_ERR_INVALID_ARGUMENT;
  }
  return check_ndims({{"cu_seqlens_q", &vl->cu_seqlens_q}, {"cu_seqlens_k", &vl->cu_seqlens_k}});
}

flashattn::Varlen to_varlen(const fa_varlen& v) {
  flashattn::Varlen r;
  r.cu_seqlens_q = to_view(v.cu_seqlens_q);
  r.cu_seqlens_k = to_view(v.cu_seqlens_k);
  r.max_seqlen_q = v.max_seqlen_q;
  r.max_seqlen_k = v.max_seqlen_k;
  return r;
}

fa_status check_kvcache_ndims(const fa_kvcache_args& a) {
  return check_ndims({{"q", &a.q}, {"k_cache", &a.k_cache}, {"v_cache", &a.v_cache},
                      {"cache_seqlens", &a.cache_seqlens}, {"block_table", &a.block_table},
                      {"k_new", &a.k_new}, {"v_new", &a.v_new}, {"out", &a.out}, {"lse", &a.lse},
                      {"options.alibi_slopes", &a.options.alibi_slopes},
                      {"cache_batch_idx", &a.cache_batch_idx}, {"cache_leftpad", &a.cache_leftpad},
                      {"rotary_cos", &a.rotary_cos}, {"rotary_sin", &a.rotary_sin}});
}

flashattn::KvCacheArgs to_kvcache(const fa_kvcache_args& a) {
  flashattn::KvCacheArgs r;
  r.q = to_view(a.q);
  r.k_cache = to_view(a.k_cache);
  r.v_cache = to_view(a.v_cache);
  r.cache_seqlens = to_view(a.cache_seqlens);
  r.block_table = to_view(a.block_table);
  r.k_new = to_view(a.k_new);
  r.v_new = to_view(a.v_new);
  r.out = to_view(a.out);
  r.lse = to_view(a.lse);
  r.options = to_options(a.options);
  r.num_splits = a.num_splits;
  r.cache_batch_idx = to_view(a.cache_batch_idx);
  r.cache_leftpad = to_view(a.cache_leftpad);
  r.rotary_cos = to_view(a.rotary_cos);
  r.rotary_sin = to_view(a.rotary_sin);
  r.rotary_interleaved = a.rotary_interleaved != 0;
  return r;
}

// The fp8 descale tensors of fa_forward_fp8 / fa_forward_varlen_fp8 into a
// (scales NULL: every factor 1).
fa_status set_fp8_descale(const fa_fp8_descale* scales, flashattn::ForwardArgs* a) {
  if (scales == nullptr) return FA_OK;
  if (fa_status s = check_ndims({{"fp8_descale.q", &scales->q}, {"fp8_descale.k", &scales->k},
                                 {"fp8_descale.v", &scales->v}});
      s != FA_OK) {
    return s;
  }
  a->fp8_descale.q = to_view(scales->q);
  a->fp8_descale.k = to_view(scales->k);
  a->fp8_descale.v = to_view(scales->v);
  return FA_OK;
}

}  // namespace

extern "C" {

void fa_options_init(fa_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->window_left = -1;
  o->window_right = -1;
}

fa_tensor fa_tensor_contiguous(void* data, fa_dtype dtype, fa_device device, int32_t device_index,
                               int32_t ndim, const int64_t* shape) {
  fa_tensor t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.device_index = device_index;
  t.ndim = ndim;
  if (ndim < 0 || ndim > 4 || (ndim > 0 && shape == nullptr)) {
    t.ndim = -1;  // rejected by every call that receives it
    return t;
  }
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride;
    stride *= shape[d];
  }
  return t;
}

fa_status fa_forward(const fa_forward_args* args) {
  if (args == nullptr) return null_args("fa_forward");
  if (fa_status s = check_forward_ndims(*args); s != FA_OK) return s;
  return finish(flashattn::forward(to_forward(*args)));
}

fa_status fa_backward(const fa_backward_args* args) {
  if (args == nullptr) return null_args("fa_backward");
  if (fa_status s = check_backward_ndims(*args); s != FA_OK) return s;
  return finish(flashattn::backward(to_backward(*args)));
}

fa_status fa_forward_varlen(const fa_forward_args* args, const fa_varlen* varlen) {
  if (args == nullptr) return null_args("fa_forward_varlen");
  if (fa_status s = check_forward_ndims(*args); s != FA_OK) return s;
  if (fa_status s = check_varlen("fa_forward_varlen", varlen); s != FA_OK) return s;
  flashattn::ForwardArgs a = to_forward(*args);
  a.varlen = to_varlen(*varlen);
  return finish(flashattn::forward(a));
}

fa_status fa_forward_fp8(const fa_forward_args* args, const fa_fp8_descale* scales) {
  if (args == nullptr) return null_args("fa_forward_fp8");
  if (fa_status s = check_forward_ndims(*args); s != FA_OK) return s;
  flashattn::ForwardArgs a = to_forward(*args);
  if (fa_status s = set_fp8_descale(scales, &a); s != FA_OK) return s;
  return finish(flashattn::forward(a));
}

fa_status fa_forward_varlen_fp8(const fa_forward_args* args, const fa_varlen* varlen,
                                const fa_fp8_descale* scales) {
  if (args == nullptr) return null_args("fa_forward_varlen_fp8");
  if (fa_status s = check_forward_ndims(*args); s != FA_OK) return s;
  if (fa_status s = check_varlen("fa_forward_varlen_fp8", varlen); s != FA_OK) return s;
  flashattn::ForwardArgs a = to_forward(*args);
  a.varlen = to_varlen(*varlen);
  if (fa_status s = set_fp8_descale(scales, &a); s != FA_OK) return s;
  return finish(flashattn::forward(a));
}

fa_status fa_backward_varlen(const fa_backward_args* args, const fa_varlen* varlen) {
  if (args == nullptr) return null_args("fa_backward_varlen");
  if (fa_status s = check_backward_ndims(*args); s != FA_OK) return s;
  if (fa_status s = check_varlen("fa_backward_varlen", varlen); s != FA_OK) return s;
  flashattn::BackwardArgs a = to_backward(*args);
  a.varlen = to_varlen(*varlen);
  return finish(flashattn::backward(a));
}

fa_status fa_forward_kvcache(const fa_kvcache_args* args) {
  if (args == nullptr) return null_args("fa_forward_kvcache");
  if (fa_status s = check_kvcache_ndims(*args); s != FA_OK) return s;
  return finish(flashattn::forward_kvcache(to_kvcache(*args)));
}

fa_status fa_forward_kvcache_workspace_bytes(const fa_kvcache_args* args, size_t* bytes) {
  if (args == nullptr) return null_args("fa_forward_kvcache_workspace_bytes");
  if (fa_status s = check_kvcache_ndims(*args); s != FA_OK) return s;
  return finish(flashattn::forward_kvcache_workspace_bytes(to_kvcache(*args), bytes));
}

fa_status fa_forward_workspace_bytes(const fa_forward_args* args, size_t* bytes) {
  if (args == nullptr) return null_args("fa_forward_workspace_bytes");
  if (fa_status s = check_forward_ndims(*args); s != FA_OK) return s;
  return finish(flashattn::forward_workspace_bytes(to_forward(*args), bytes));
}

fa_status fa_backward_workspace_bytes(const fa_backward_args* args, size_t* bytes) {
  if (args == nullptr) return null_args("fa_backward_workspace_bytes");
  if (fa_status s = check_backward_ndims(*args); s != FA_OK) return s;
  return finish(flashattn::backward_workspace_bytes(to_backward(*args), bytes));
}

const char* fa_last_error(void) { return g_last_error.c_str(); }

const char* fa_version_string(void) { return flashattn::version(); }

int32_t fa_version(void) {
  return FA_VERSION_MAJOR * 10000 + FA_VERSION_MINOR * 100 + FA_VERSION_PATCH;
}

int32_t fa_cuda_available(void) { return flashattn::cuda_available() ? 1 : 0; }

}  // extern "C"
