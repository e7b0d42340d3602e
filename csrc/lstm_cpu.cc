// The LSTM recurrence on the CPU as two XLA FFI custom calls, forward and backward.
//
// Same numbers as the pure-JAX scan in src/stacklstm/kernels/lstm.py (the portable path):
//
//   gates_t = x_t @ kernel_ih + bias + h_{t-1} @ kernel_hh          (batch, 4*hidden)
//   i, f, o = sigmoid(.), g = tanh(.)    with sigmoid(z) = 0.5 * tanh(0.5 * z) + 0.5
//   c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t)
//
// Why it is faster than the scan: kernel_hh is packed ONCE per call for oneMKL's packed GEMM
// (cblas_sgemm_pack/compute, the API MKL offers for the same matrix used at every step), each
// step is that GEMM plus one vectorised pass over its gates (split over the OpenMP threads for
// big batches), so there is no per-step dispatch of separate XLA kernels and no while-loop
// bookkeeping. The weight gradients are not done here: the backward call returns the gate
// gradients of all steps and JAX does one big matmul each.
//
// Layout: time-major, row-major, float32. Gates i, f, g, o along the last axis (PyTorch's).
// A mask of shape (time, batch) marks valid steps (1) and padding (0); a rank-0 mask means
// "all valid". Padded steps keep the state and output zeros.

#include <Python.h>
#include <mkl.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// tanh as a rational function, vectorisable (Eigen's and XLA's CPU float tanh).
#define STACKLSTM_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))

inline float fast_tanh(float x) {
  const float clamp = 7.90531110763549805f;
  const float a1 = 4.89352455891786e-03f, a3 = 6.37261928875436e-04f,
              a5 = 1.48572235717979e-05f, a7 = 5.12229709037114e-08f,
              a9 = -8.60467152213735e-11f, a11 = 2.00018790482477e-13f,
              a13 = -2.76076847742355e-16f;
  const float b0 = 4.89352518554385e-03f, b2 = 2.26843463243900e-03f,
              b4 = 1.18534705686654e-04f, b6 = 1.19825839466702e-06f;
  float small = std::fabs(x) < 0.0004f ? 1.0f : 0.0f;
  float xc = std::min(std::max(x, -clamp), clamp);
  float x2 = xc * xc;
  float p = a13;
  p = p * x2 + a11;
  p = p * x2 + a9;
  p = p * x2 + a7;
  p = p * x2 + a5;
  p = p * x2 + a3;
  p = p * x2 + a1;
  p = p * xc;
  float q = b6;
  q = q * x2 + b4;
  q = q * x2 + b2;
  q = q * x2 + b0;
  float r = p / q;
  return small * x + (1.0f - small) * r;
}

// gates (batch, 4H) holds x@W_ih + h@W_hh; adds the bias and applies the nonlinearities in
// place, then updates c, h (batch, hidden). mask: nullptr or (batch,) 1/0. ys: output row
// (batch, hidden) of this step.
STACKLSTM_SIMD
void forward_step_math(float* __restrict gates, const float* __restrict bias,
                       float* __restrict c, float* __restrict h, float* __restrict ys,
                       const float* __restrict mask, int64_t batch, int64_t hidden) {
  const int64_t g4 = 4 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    float* z = gates + b * g4;
    for (int k = 0; k < 4; ++k) {
      const float s = k == 2 ? 1.0f : 0.5f, sh = k == 2 ? 0.0f : 0.5f;
      float* zk = z + k * hidden;
      const float* bk = bias + k * hidden;
#pragma omp simd
      for (int64_t j = 0; j < hidden; ++j) zk[j] = fast_tanh((zk[j] + bk[j]) * s) * s + sh;
    }
    const float *i = z, *f = z + hidden, *g = z + 2 * hidden, *o = z + 3 * hidden;
    float* cb = c + b * hidden;
    float* hb = h + b * hidden;
    float* yb = ys + b * hidden;
    if (mask == nullptr || mask[b] > 0.0f) {
#pragma omp simd
      for (int64_t j = 0; j < hidden; ++j) {
        float cn = f[j] * cb[j] + i[j] * g[j];
        float hn = o[j] * fast_tanh(cn);
        cb[j] = cn;
        hb[j] = hn;
        yb[j] = hn;
      }
    } else {
      std::memset(yb, 0, sizeof(float) * hidden);
    }
  }
}

// One reverse step. acts (batch, 4H) after the nonlinearities; writes the gate gradients
// (w.r.t. the pre-activations) to dg and the cell gradient to pass back to dc (in place).
// dh holds the carried dh on entry.
STACKLSTM_SIMD
void backward_step_math(const float* __restrict acts, const float* __restrict c_t,
                        const float* __restrict c_prev, const float* __restrict dy,
                        const float* __restrict dh, float* __restrict dc, float* __restrict dg,
                        const float* __restrict mask, int64_t batch, int64_t hidden) {
  const int64_t g4 = 4 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    float* d = dg + b * g4;
    if (mask != nullptr && mask[b] <= 0.0f) {
      std::memset(d, 0, sizeof(float) * g4);
      continue;
    }
    const float* a = acts + b * g4;
    const float *i = a, *f = a + hidden, *g = a + 2 * hidden, *o = a + 3 * hidden;
    const float* cb = c_t + b * hidden;
    const float* cp = c_prev + b * hidden;
    const float* dyb = dy + b * hidden;
    const float* dhb = dh + b * hidden;
    float* dcb = dc + b * hidden;
#pragma omp simd
    for (int64_t j = 0; j < hidden; ++j) {
      float tc = fast_tanh(cb[j]);
      float dht = dhb[j] + dyb[j];
      float dct = dcb[j] + dht * o[j] * (1.0f - tc * tc);
      d[j] = dct * g[j] * i[j] * (1.0f - i[j]);
      d[hidden + j] = dct * cp[j] * f[j] * (1.0f - f[j]);
      d[2 * hidden + j] = dct * i[j] * (1.0f - g[j] * g[j]);
      d[3 * hidden + j] = dht * tc * o[j] * (1.0f - o[j]);
      dcb[j] = dct * f[j];
    }
  }
}

// out (rows, 4H) = x (rows, F) @ w_ih (F, 4H), in pieces that fit BLAS's int sizes.
void project(const float* x, const float* w_ih, float* out, int64_t rows, int64_t features,
             int64_t g4) {
  const int64_t piece = 1 << 16;
  for (int64_t r = 0; r < rows; r += piece) {
    int64_t n = std::min(piece, rows - r);
    if (features == 0) {
      std::memset(out + r * g4, 0, sizeof(float) * n * g4);
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)g4,
                      (int)features, 1.0f, x + r * features, (int)features, w_ih, (int)g4,
                      0.0f, out + r * g4, (int)g4);
  }
}

// kernel_hh packed once for oneMKL's packed GEMM, reused by every step of one call:
// C (m, n) = beta * C + A (m, k) @ op(kernel_hh).
class PackedWeight {
 public:
  PackedWeight(const float* w, CBLAS_TRANSPOSE trans, int64_t m, int64_t n, int64_t k)
      : m_(m), n_(n), k_(k) {
    data_ = static_cast<float*>(
        mkl_malloc(cblas_sgemm_pack_get_size(CblasBMatrix, (MKL_INT)m, (MKL_INT)n, (MKL_INT)k), 64));
    if (data_ != nullptr)
      cblas_sgemm_pack(CblasRowMajor, CblasBMatrix, trans, (MKL_INT)m, (MKL_INT)n, (MKL_INT)k,
                       1.0f, w, trans == CblasNoTrans ? (MKL_INT)n : (MKL_INT)k, data_);
  }
  ~PackedWeight() { mkl_free(data_); }
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;
  bool ok() const { return data_ != nullptr; }
  void multiply(const float* a, float beta, float* c) const {
    cblas_sgemm_compute(CblasRowMajor, CblasNoTrans, CblasPacked, (MKL_INT)m_, (MKL_INT)n_,
                        (MKL_INT)k_, a, (MKL_INT)k_, data_, (MKL_INT)n_, beta, c, (MKL_INT)n_);
  }

 private:
  int64_t m_, n_, k_;
  float* data_ = nullptr;
};

// Threads for one call: a step's GEMM smaller than this many FLOPs runs on one thread (waking
// the others costs more than it saves), bigger ones on all of OpenMP's threads.
int threads_for(int64_t batch, int64_t hidden) {
  const int64_t flops = 2 * batch * 4 * hidden * hidden;
  return flops >= (int64_t{1} << 23) ? omp_get_max_threads() : 1;
}

// Sets MKL's thread count for this thread for the lifetime of the object.
class MklThreads {
 public:
  explicit MklThreads(int n) : previous_(mkl_set_num_threads_local(n)) {}
  ~MklThreads() { mkl_set_num_threads_local(previous_); }

 private:
  int previous_;
};

// Runs fn(first_row, n_rows) over `batch` rows, split over the OpenMP threads when each step
// has enough elements to pay for it.
template <typename Fn>
void for_rows(int64_t batch, int max_threads, Fn fn) {
  int threads = std::min<int64_t>(max_threads, batch);
  if (threads <= 1) {
    fn(int64_t{0}, batch);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int part = 0; part < threads; ++part) {
    int64_t lo = batch * part / threads, hi = batch * (part + 1) / threads;
    fn(lo, hi - lo);
  }
}

struct Dims {
  int64_t time, batch, features, hidden;
};

ffi::Error check_dims(const Dims& d, ffi::Buffer<ffi::F32>& w_ih, ffi::Buffer<ffi::F32>& w_hh,
                      ffi::Buffer<ffi::F32>& bias, ffi::Buffer<ffi::F32>& mask) {
  auto wi = w_ih.dimensions(), wh = w_hh.dimensions(), bb = bias.dimensions(),
       m = mask.dimensions();
  const int64_t g4 = 4 * d.hidden;
  if (wi.size() != 2 || wi[0] != d.features || wi[1] != g4 || wh.size() != 2 ||
      wh[1] != g4 || bb.size() != 1 || bb[0] != g4)
    return ffi::Error::InvalidArgument("stacklstm LSTM kernel: inconsistent weight shapes");
  if (!(m.size() == 0 || (m.size() == 2 && m[0] == d.time && m[1] == d.batch)))
    return ffi::Error::InvalidArgument("stacklstm LSTM kernel: mask must be () or (time, batch)");
  return ffi::Error::Success();
}

// The forward recurrence. With `saved` (training) the activations, cell states and carried h
// of every step are written for the backward pass; the input projection of all steps goes
// straight into the activations array. Without it, the projection is done a block of steps
// at a time into a small scratch buffer.
ffi::Error forward(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih, ffi::Buffer<ffi::F32> w_hh,
                   ffi::Buffer<ffi::F32> bias, ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> c0,
                   ffi::Buffer<ffi::F32> mask, float* ys, float* h, float* c, float* acts,
                   float* cs, float* hs) {
  auto xd = x.dimensions();
  if (xd.size() != 3) return ffi::Error::InvalidArgument("stacklstm LSTM kernel: x must be 3-D");
  Dims d{xd[0], xd[1], xd[2], w_hh.dimensions()[0]};
  if (auto e = check_dims(d, w_ih, w_hh, bias, mask); e.failure()) return e;
  const int64_t bh = d.batch * d.hidden, g4 = 4 * d.hidden, bg = d.batch * g4;
  std::memcpy(h, h0.typed_data(), sizeof(float) * bh);
  std::memcpy(c, c0.typed_data(), sizeof(float) * bh);
  if (d.time == 0) return ffi::Error::Success();
  const float* xp = x.typed_data();
  const float* m = mask.dimensions().size() == 0 ? nullptr : mask.typed_data();

  const bool saving = acts != nullptr;
  int64_t block = d.time;
  static thread_local std::vector<float> scratch;
  if (saving) {
    project(xp, w_ih.typed_data(), acts, d.time * d.batch, d.features, g4);
  } else {
    block = std::max<int64_t>(1, std::min<int64_t>(d.time, (int64_t{1} << 20) / std::max<int64_t>(bg, 1)));
    scratch.resize(block * bg);
  }
  const int threads = threads_for(d.batch, d.hidden);
  MklThreads mkl_threads(threads);
  PackedWeight w(w_hh.typed_data(), CblasNoTrans, d.batch, g4, d.hidden);
  if (!w.ok()) return ffi::Error(ffi::ErrorCode::kResourceExhausted, "stacklstm: out of memory");
  for (int64_t t = 0; t < d.time; ++t) {
    float* gates;
    if (saving) {
      gates = acts + t * bg;
    } else {
      if (t % block == 0) {
        int64_t n = std::min(block, d.time - t);
        project(xp + t * d.batch * d.features, w_ih.typed_data(), scratch.data(), n * d.batch,
                d.features, g4);
      }
      gates = scratch.data() + (t % block) * bg;
    }
    w.multiply(h, 1.0f, gates);  // gates += h @ kernel_hh
    const float* m_t = m ? m + t * d.batch : nullptr;
    float* y_t = ys + t * bh;
    const float* b = bias.typed_data();
    for_rows(d.batch, threads, [&](int64_t r, int64_t n) {
      forward_step_math(gates + r * g4, b, c + r * d.hidden, h + r * d.hidden, y_t + r * d.hidden,
                        m_t ? m_t + r : nullptr, n, d.hidden);
    });
    if (saving) {
      std::memcpy(cs + t * bh, c, sizeof(float) * bh);
      std::memcpy(hs + t * bh, h, sizeof(float) * bh);
    }
  }
  return ffi::Error::Success();
}

ffi::Error ForwardInfer(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih,
                        ffi::Buffer<ffi::F32> w_hh, ffi::Buffer<ffi::F32> bias,
                        ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> c0,
                        ffi::Buffer<ffi::F32> mask, ffi::ResultBuffer<ffi::F32> ys,
                        ffi::ResultBuffer<ffi::F32> h, ffi::ResultBuffer<ffi::F32> c) {
  return forward(x, w_ih, w_hh, bias, h0, c0, mask, ys->typed_data(), h->typed_data(),
                 c->typed_data(), nullptr, nullptr, nullptr);
}

ffi::Error ForwardTrain(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih,
                        ffi::Buffer<ffi::F32> w_hh, ffi::Buffer<ffi::F32> bias,
                        ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> c0,
                        ffi::Buffer<ffi::F32> mask, ffi::ResultBuffer<ffi::F32> ys,
                        ffi::ResultBuffer<ffi::F32> h, ffi::ResultBuffer<ffi::F32> c,
                        ffi::ResultBuffer<ffi::F32> acts, ffi::ResultBuffer<ffi::F32> cs,
                        ffi::ResultBuffer<ffi::F32> hs) {
  return forward(x, w_ih, w_hh, bias, h0, c0, mask, ys->typed_data(), h->typed_data(),
                 c->typed_data(), acts->typed_data(), cs->typed_data(), hs->typed_data());
}

// The reverse recurrence: carries (dh, dc) from the last step to the first and writes the
// gate gradients of every step. dh0/dc0 double as the running carry.
ffi::Error Backward(ffi::Buffer<ffi::F32> acts, ffi::Buffer<ffi::F32> cs,
                    ffi::Buffer<ffi::F32> c0, ffi::Buffer<ffi::F32> w_hh,
                    ffi::Buffer<ffi::F32> d_ys, ffi::Buffer<ffi::F32> d_h,
                    ffi::Buffer<ffi::F32> d_c, ffi::Buffer<ffi::F32> mask,
                    ffi::ResultBuffer<ffi::F32> d_gates, ffi::ResultBuffer<ffi::F32> dh0,
                    ffi::ResultBuffer<ffi::F32> dc0) {
  auto cd = cs.dimensions();
  if (cd.size() != 3) return ffi::Error::InvalidArgument("stacklstm LSTM kernel: cs must be 3-D");
  const int64_t time = cd[0], batch = cd[1], hidden = cd[2];
  const int64_t bh = batch * hidden, g4 = 4 * hidden, bg = batch * g4;
  auto md = mask.dimensions();
  if (!(md.size() == 0 || (md.size() == 2 && md[0] == time && md[1] == batch)))
    return ffi::Error::InvalidArgument("stacklstm LSTM kernel: mask must be () or (time, batch)");
  const float* m = md.size() == 0 ? nullptr : mask.typed_data();
  float* dh = dh0->typed_data();
  float* dc = dc0->typed_data();
  std::memcpy(dh, d_h.typed_data(), sizeof(float) * bh);
  std::memcpy(dc, d_c.typed_data(), sizeof(float) * bh);
  static thread_local std::vector<float> dh_new;
  dh_new.resize(bh);
  const float* a = acts.typed_data();
  const float* c = cs.typed_data();
  const float* dy = d_ys.typed_data();
  float* dg = d_gates->typed_data();
  const int threads = threads_for(batch, hidden);
  MklThreads mkl_threads(threads);
  PackedWeight w(w_hh.typed_data(), CblasTrans, batch, hidden, g4);
  if (!w.ok()) return ffi::Error(ffi::ErrorCode::kResourceExhausted, "stacklstm: out of memory");
  for (int64_t t = time - 1; t >= 0; --t) {
    const float* m_t = m ? m + t * batch : nullptr;
    const float* c_prev = t > 0 ? c + (t - 1) * bh : c0.typed_data();
    const int64_t ta = t * bg, tc = t * bh;
    for_rows(batch, threads, [&](int64_t r, int64_t n) {
      backward_step_math(a + ta + r * g4, c + tc + r * hidden, c_prev + r * hidden,
                         dy + tc + r * hidden, dh + r * hidden, dc + r * hidden,
                         dg + ta + r * g4, m_t ? m_t + r : nullptr, n, hidden);
    });
    // dh_{t-1} = d_gates_t @ kernel_hh^T; a padded row passes dh through unchanged.
    w.multiply(dg + ta, 0.0f, dh_new.data());
    if (m_t == nullptr) {
      std::memcpy(dh, dh_new.data(), sizeof(float) * bh);
    } else {
      for (int64_t b = 0; b < batch; ++b)
        if (m_t[b] > 0.0f)
          std::memcpy(dh + b * hidden, dh_new.data() + b * hidden, sizeof(float) * hidden);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(StacklstmLstmForward, ForwardInfer,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // x (time, batch, features)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // kernel_ih (features, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // kernel_hh (hidden, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // bias (4H,)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // h0 (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // c0 (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // mask () or (time, batch)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // ys (time, batch, hidden)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // h (batch, hidden)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // c (batch, hidden)
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(StacklstmLstmForwardTrain, ForwardTrain,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // ys
                                  .Ret<ffi::Buffer<ffi::F32>>()  // h
                                  .Ret<ffi::Buffer<ffi::F32>>()  // c
                                  .Ret<ffi::Buffer<ffi::F32>>()  // acts (time, batch, 4H)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // cs (time, batch, hidden)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // carried h (time, batch, hidden)
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(StacklstmLstmBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // acts (time, batch, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // cs (time, batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // c0 (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // kernel_hh (hidden, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // d_ys (time, batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // d_h (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // d_c (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // mask
                                  .Ret<ffi::Buffer<ffi::F32>>()  // d_gates (time, batch, 4H)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // dh0
                                  .Ret<ffi::Buffer<ffi::F32>>()  // dc0
);

// A tiny Python module: `handlers()` returns the three handlers as PyCapsules for
// jax.ffi.register_ffi_target.
namespace {
PyObject* capsule(void* fn) { return PyCapsule_New(fn, nullptr, nullptr); }

PyObject* handlers(PyObject*, PyObject*) {
  return Py_BuildValue("{s:N,s:N,s:N}", "stacklstm_lstm_forward",
                       capsule(reinterpret_cast<void*>(StacklstmLstmForward)),
                       "stacklstm_lstm_forward_train",
                       capsule(reinterpret_cast<void*>(StacklstmLstmForwardTrain)),
                       "stacklstm_lstm_backward",
                       capsule(reinterpret_cast<void*>(StacklstmLstmBackward)));
}

PyMethodDef methods[] = {
    {"handlers", handlers, METH_NOARGS, "The XLA FFI handlers of the CPU LSTM kernel."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lstm_cpu",
                      "The CPU LSTM kernel (XLA FFI custom calls).", -1, methods};
}  // namespace

PyMODINIT_FUNC PyInit__lstm_cpu() { return PyModule_Create(&module); }
