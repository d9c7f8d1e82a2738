// The C ABI's structs made from the C++ API's, for tests that call both and
// compare (the reverse of src/api/c_api.cpp's translation).
#pragma once

#include "flashattn/flashattn.h"
#include "flashattn/flashattn.hpp"

namespace fa_test {

inline fa_tensor to_c(const flashattn::TensorView& v) {
  fa_tensor t{};
  t.data = v.data;
  t.dtype = static_cast<int32_t>(v.dtype);
  t.device = static_cast<int32_t>(v.device);
  t.device_index = v.device_index;
  t.ndim = v.ndim;
  for (int i = 0; i < 4; ++i) {
    t.shape[i] = v.shape[i];
    t.stride[i] = v.stride[i];
  }
  return t;
}

inline fa_options to_c(const flashattn::Options& o) {
  fa_options c;
  fa_options_init(&c);
  c.softmax_scale = o.softmax_scale;
  c.softcap = o.softcap;
  c.window_left = o.window_left;
  c.window_right = o.window_right;
  c.causal = o.causal;
  c.deterministic = o.deterministic;
  c.stream = o.stream;
  return c;
}

inline fa_forward_args to_c(const flashattn::ForwardArgs& a) {
  return {to_c(a.q), to_c(a.k), to_c(a.v), to_c(a.out), to_c(a.lse), to_c(a.options)};
}

inline fa_backward_args to_c(const flashattn::BackwardArgs& a) {
  return {to_c(a.q),  to_c(a.k),  to_c(a.v),  to_c(a.out), to_c(a.dout), to_c(a.lse),
          to_c(a.dq), to_c(a.dk), to_c(a.dv), to_c(a.options)};
}

}  // namespace fa_test
