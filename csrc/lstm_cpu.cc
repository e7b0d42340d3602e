// The LSTM recurrence on the CPU as XLA FFI custom calls: forward (inference), forward saving
// what the backward pass needs (training), and backward.
//
// Same numbers as the pure-JAX scan in src/stacklstm/kernels/lstm.py (the portable path):
//
//   gates_t = x_t @ kernel_ih + bias + h_{t-1} @ kernel_hh          (batch, 4*hidden)
//   i, f, o = sigmoid(.), g = tanh(.)    with sigmoid(z) = 0.5 * tanh(0.5 * z) + 0.5
//   c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t)
//
// Why it is faster than the scan: the step's weight is packed ONCE per call for oneMKL's packed
// GEMM (cblas_sgemm_pack/compute, the API oneMKL offers for one matrix used at every step), each
// step is that GEMM plus one vectorised pass over its gates, so there is no per-step dispatch
// of separate XLA kernels and no while-loop bookkeeping; the rows of the batch, which are
// independent sequences, are split over threads for the whole call (a batch too small for that
// with a large hidden size splits each step by hidden units instead); and after the reverse loop
// the input, weight and bias gradients are one GEMM each over all steps. The threads are XLA's
// own intra-op pool (the FFI ThreadPool), oneMKL sequential inside: no OpenMP runtime.
//
// Layout: time-major, row-major, float32. Gates i, f, g, o along the last axis (PyTorch's).
// A mask of shape (time, batch) marks valid steps (1) and padding (0); a rank-0 mask means
// "all valid". Padded steps keep the state and output zeros.

#include <Python.h>
#include <mkl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "xla/ffi/api/c_api.h"
#include "xla/ffi/api/ffi.h"

#ifndef STACKLSTM_JAXLIB_VERSION
#define STACKLSTM_JAXLIB_VERSION "unknown"
#endif

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
  return p / q;
}

// The cell update of n units of one row: c = f * c + i * g, h = o * tanh(c), y = h. Inlined
// into its callers' vectorised clones, as fast_tanh is.
inline void update_cell(const float* __restrict i, const float* __restrict f,
                        const float* __restrict g, const float* __restrict o,
                        float* __restrict c, float* __restrict h, float* __restrict y,
                        int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    float cn = f[j] * c[j] + i[j] * g[j];
    float hn = o[j] * fast_tanh(cn);
    c[j] = cn;
    h[j] = hn;
    y[j] = hn;
  }
}

// gates (batch, 4H) holds x@W_ih + h@W_hh; adds the bias and applies the nonlinearities in
// place, then updates c, h (batch, hidden). mask: nullptr or (batch,) 1/0. ys: output row
// (batch, hidden) of this step.
STACKLSTM_SIMD
void forward_step_math(float* __restrict gates, const float* __restrict bias,
                       float* __restrict c, float* __restrict h, float* __restrict ys,
                       const float* __restrict mask, int64_t batch, int64_t hidden) {
  const int64_t g4 = 4 * hidden, g2 = 2 * hidden, g3 = 3 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    float* z = gates + b * g4;
    // sigmoid(i, f, o) = 0.5 * tanh(0.5 * z) + 0.5 and tanh(g), in one pass over the row.
#pragma omp simd
    for (int64_t j = 0; j < g4; ++j) {
      const bool is_g = j >= g2 && j < g3;
      const float s = is_g ? 1.0f : 0.5f, sh = is_g ? 0.0f : 0.5f;
      z[j] = fast_tanh((z[j] + bias[j]) * s) * s + sh;
    }
    const float *i = z, *f = z + hidden, *g = z + 2 * hidden, *o = z + 3 * hidden;
    float* cb = c + b * hidden;
    float* hb = h + b * hidden;
    float* yb = ys + b * hidden;
    if (mask == nullptr || mask[b] > 0.0f) {
      update_cell(i, f, g, o, cb, hb, yb, hidden);
    } else {
      std::memset(yb, 0, sizeof(float) * hidden);
    }
  }
}

// One reverse step over the units [lo, hi) (all units: 0, hidden). acts (batch, 4H) after the
// nonlinearities; writes the gate gradients (w.r.t. the pre-activations) of these units to dg
// and the cell gradient to pass back to dc (in place). dh holds the carried dh on entry.
STACKLSTM_SIMD
void backward_step_math(const float* __restrict acts, const float* __restrict c_t,
                        const float* __restrict c_prev, const float* __restrict dy,
                        const float* __restrict dh, float* __restrict dc, float* __restrict dg,
                        const float* __restrict mask, int64_t batch, int64_t hidden, int64_t lo,
                        int64_t hi) {
  const int64_t g4 = 4 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    float* d = dg + b * g4;
    if (mask != nullptr && mask[b] <= 0.0f) {
      for (int64_t q = 0; q < 4; ++q)
        std::memset(d + q * hidden + lo, 0, sizeof(float) * (hi - lo));
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
    for (int64_t j = lo; j < hi; ++j) {
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

// One forward step over the units [lo, lo + w) when the step is split by units (see
// run_phases): z (batch, 4w) holds this block's columns of the step's GEMM, its i, f, g, o
// side by side, and bias_w (4w,) the bias in the same order. Adds `proj` (nullptr, or the input
// projection in the full (batch, 4H) layout: training) and the bias, applies the
// nonlinearities, writes them back to proj's place (training's activations), then updates c
// (batch, hidden; in place), reads h_in and writes h_out (rows of length ld_h) and writes the
// output ys (batch, hidden), all for these units only. A padded row keeps its state and
// outputs zeros.
STACKLSTM_SIMD
void unit_step_math(float* __restrict z, const float* __restrict bias_w, float* __restrict proj,
                    float* __restrict c, const float* __restrict h_in, float* __restrict h_out,
                    float* __restrict ys, const float* __restrict mask, int64_t batch,
                    int64_t hidden, int64_t lo, int64_t w, int64_t ld_h) {
  for (int64_t b = 0; b < batch; ++b) {
    float* zb = z + b * 4 * w;
    for (int64_t q = 0; q < 4; ++q) {  // i, f, g, o
      const float s = q == 2 ? 1.0f : 0.5f, sh = q == 2 ? 0.0f : 0.5f;
      float* zq = zb + q * w;
      const float* bq = bias_w + q * w;
      float* pq = proj != nullptr ? proj + b * 4 * hidden + q * hidden + lo : nullptr;
      if (pq != nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          const float a = fast_tanh((zq[j] + pq[j] + bq[j]) * s) * s + sh;
          zq[j] = a;
          pq[j] = a;
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) zq[j] = fast_tanh((zq[j] + bq[j]) * s) * s + sh;
      }
    }
    const float *i = zb, *f = zb + w, *g = zb + 2 * w, *o = zb + 3 * w;
    float* cb = c + b * hidden + lo;
    const float* hb_in = h_in + b * ld_h + lo;
    float* hb = h_out + b * ld_h + lo;
    float* yb = ys + b * hidden + lo;
    if (mask == nullptr || mask[b] > 0.0f) {
      update_cell(i, f, g, o, cb, hb, yb, w);
    } else {
      std::memcpy(hb, hb_in, sizeof(float) * w);
      std::memset(yb, 0, sizeof(float) * w);
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (MKL_INT)n, (MKL_INT)g4,
                (MKL_INT)features, 1.0f, x + r * features, (MKL_INT)features, w_ih, (MKL_INT)g4,
                0.0f, out + r * g4, (MKL_INT)g4);
  }
}

// Whether the recurrent GEMMs use oneMKL's packed API (the default) or plain cblas_sgemm on
// the unpacked weight (STACKLSTM_PACKED_GEMM=0): a measurement switch, read once, for CPUs
// where the packed API may take a slower code path than sgemm (the numbers agree to float32
// rounding; tests/kernels/test_dispatch.py holds both to the oracle).
bool packed_gemm_on() {
  static const bool on = [] {
    const char* value = std::getenv("STACKLSTM_PACKED_GEMM");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return on;
}

// A weight packed once for oneMKL's packed GEMM, reused by every step of one call:
// C (m, n) = beta * C + A (m, k) @ op(w). Without packing (packed_gemm_on() false) it keeps
// the weight's address (a buffer that outlives it) and calls cblas_sgemm.
class PackedWeight {
 public:
  PackedWeight() = default;
  PackedWeight(const float* w, CBLAS_TRANSPOSE trans, int64_t m, int64_t n, int64_t k) {
    pack(w, trans, m, n, k);
  }
  ~PackedWeight() { mkl_free(data_); }
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;
  // Packs w: (k, n) row-major, or (n, k) with trans. Never throws; false when out of memory.
  bool pack(const float* w, CBLAS_TRANSPOSE trans, int64_t m, int64_t n, int64_t k) {
    mkl_free(data_);
    data_ = nullptr;
    m_ = m, n_ = n, k_ = k;
    if (!packed_gemm_on()) {
      plain_ = w, trans_ = trans;
      return true;
    }
    const size_t bytes =
        cblas_sgemm_pack_get_size(CblasBMatrix, (MKL_INT)m, (MKL_INT)n, (MKL_INT)k);
    data_ = static_cast<float*>(mkl_malloc(bytes, 64));
    if (data_ != nullptr)
      cblas_sgemm_pack(CblasRowMajor, CblasBMatrix, trans, (MKL_INT)m, (MKL_INT)n, (MKL_INT)k,
                       1.0f, w, trans == CblasNoTrans ? (MKL_INT)n : (MKL_INT)k, data_);
    return data_ != nullptr;
  }
  bool ok() const { return data_ != nullptr || plain_ != nullptr; }
  void multiply(const float* a, float beta, float* c) const {
    if (plain_ != nullptr) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_, (MKL_INT)m_, (MKL_INT)n_, (MKL_INT)k_,
                  1.0f, a, (MKL_INT)k_, plain_, trans_ == CblasNoTrans ? (MKL_INT)n_ : (MKL_INT)k_,
                  beta, c, (MKL_INT)n_);
      return;
    }
    cblas_sgemm_compute(CblasRowMajor, CblasNoTrans, CblasPacked, (MKL_INT)m_, (MKL_INT)n_,
                        (MKL_INT)k_, a, (MKL_INT)k_, data_, (MKL_INT)n_, beta, c, (MKL_INT)n_);
  }

 private:
  int64_t m_ = 0, n_ = 0, k_ = 0;
  float* data_ = nullptr;
  const float* plain_ = nullptr;  // the unpacked weight, when packing is off
  CBLAS_TRANSPOSE trans_ = CblasNoTrans;
};

// Threads: the calls run on XLA's intra-op thread pool (the FFI ThreadPool), with oneMKL
// sequential inside; no thread of their own, so concurrent calls share the pool's threads.
//
// run_blocks(pool, blocks, fn) runs fn(k) for k in [0, blocks) on the calling thread and up to
// blocks - 1 pool threads, and returns when all have run. Blocks are claimed from a shared
// counter: the caller never waits for a block that nobody has started, so a busy pool (or a
// call from inside the pool) only makes it serial, never deadlocks. fn must not throw.
struct BlockState {
  std::atomic<int> next{0};
  int blocks = 0, done = 0;
  std::mutex mutex;
  std::condition_variable all_done;
  const void* fn = nullptr;  // read only after claiming a block: the caller is still waiting
  void (*run)(const void*, int) = nullptr;
};

void work_on(BlockState& state) {
  for (int k; (k = state.next.fetch_add(1)) < state.blocks;) {
    state.run(state.fn, k);
    std::lock_guard<std::mutex> lock(state.mutex);
    if (++state.done == state.blocks) state.all_done.notify_all();
  }
}

template <typename Fn>
void run_blocks(ffi::ThreadPool& pool, int blocks, const Fn& fn) {
  if (blocks <= 1) {
    if (blocks == 1) fn(0);
    return;
  }
  std::shared_ptr<BlockState> state;  // shared: a helper may start after the call is over
  try {
    state = std::make_shared<BlockState>();
  } catch (const std::bad_alloc&) {
    for (int k = 0; k < blocks; ++k) fn(k);
    return;
  }
  state->blocks = blocks;
  state->fn = &fn;
  state->run = [](const void* f, int k) { (*static_cast<const Fn*>(f))(k); };
  for (int k = 1; k < blocks; ++k) {
    try {
      pool.Schedule([state] { work_on(*state); });
    } catch (const std::bad_alloc&) {
      break;  // the caller runs what is left
    }
  }
  work_on(*state);
  std::unique_lock<std::mutex> lock(state->mutex);
  state->all_done.wait(lock, [&] { return state->done == state->blocks; });
}

// Runs fn(phase, k) for every phase in [0, phases) and block k in [0, blocks), phase after
// phase: no block of a phase starts before every block of the one before has finished (a
// barrier per phase, e.g. one per step of the recurrence), on the calling thread and up to
// blocks - 1 pool threads. fn must not throw.
//
// The same no-deadlock rule as run_blocks: a block is claimed (per block, the last phase claimed,
// moved on by compare-and-swap) before it runs, so every claimed block is being run by a running
// thread, and a thread waits only for the blocks of the phase before, all of them claimed. A pool
// thread that starts late joins at the current phase; one that never starts leaves its blocks to
// the others (the caller alone runs them all when the pool is busy). Each thread tries its own
// block first (the caller block 0, the i-th helper block i), so a block's weights stay in one
// core's cache from step to step while all threads keep up. A waiting thread spins briefly, then
// yields its core (the machine may have fewer free cores than the pool has threads). The caller
// returns when all blocks of the last phase are done; a helper still in its loop then finds
// nothing to claim and never touches fn (the state is shared, as in run_blocks).
struct PhaseState {
  int blocks = 0;
  int64_t phases = 0;
  std::atomic<int64_t> done{0};  // blocks finished over all phases: phase p is over at (p+1)*blocks
  std::atomic<int> helpers{0};
  std::unique_ptr<std::atomic<int64_t>[]> claimed;  // per block: the last phase claimed
  const void* fn = nullptr;
  void (*run)(const void*, int64_t, int) = nullptr;
};

// A hint to the core that this thread is spinning (frees the pipeline for a sibling thread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Waits until done >= target: spins up to ~50 us (a few steps' worth), then yields its core.
void wait_for(const std::atomic<int64_t>& done, int64_t target) {
  if (done.load(std::memory_order_acquire) >= target) return;
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  bool spinning = true;
  for (int spins = 1; done.load(std::memory_order_acquire) < target; ++spins) {
    if (!spinning) {
      std::this_thread::yield();
    } else {
      cpu_relax();
      if (spins % 64 == 0) spinning = std::chrono::steady_clock::now() < spin_until;
    }
  }
}

void work_on_phases(PhaseState& state, int first) {
  const int blocks = state.blocks;
  for (int64_t p = state.done.load(std::memory_order_acquire) / blocks; p < state.phases; ++p) {
    wait_for(state.done, p * blocks);
    for (int i = 0; i < blocks; ++i) {
      const int k = (first + i) % blocks;
      int64_t last = p - 1;
      if (state.claimed[k].load(std::memory_order_relaxed) != last ||
          !state.claimed[k].compare_exchange_strong(last, p))
        continue;
      state.run(state.fn, p, k);
      state.done.fetch_add(1, std::memory_order_release);
    }
  }
}

template <typename Fn>
void run_phases(ffi::ThreadPool& pool, int blocks, int64_t phases, const Fn& fn) {
  std::shared_ptr<PhaseState> state;
  try {
    state = std::make_shared<PhaseState>();
    state->claimed.reset(new std::atomic<int64_t>[std::max(blocks, 1)]);
  } catch (const std::bad_alloc&) {
    state.reset();
  }
  if (state == nullptr || blocks <= 1) {
    for (int64_t p = 0; p < phases; ++p)
      for (int k = 0; k < blocks; ++k) fn(p, k);
    return;
  }
  state->blocks = blocks;
  state->phases = phases;
  for (int k = 0; k < blocks; ++k) state->claimed[k].store(-1, std::memory_order_relaxed);
  state->fn = &fn;
  state->run = [](const void* f, int64_t p, int k) { (*static_cast<const Fn*>(f))(p, k); };
  for (int k = 1; k < blocks; ++k) {
    try {
      pool.Schedule([state] { work_on_phases(*state, 1 + state->helpers.fetch_add(1)); });
    } catch (const std::bad_alloc&) {
      break;  // the caller runs what is left
    }
  }
  work_on_phases(*state, 0);
  wait_for(state->done, phases * blocks);
}

// How one call's recurrence is split over threads, from its batch, hidden size and the pool's
// threads (exposed to Python as _lstm_cpu.plan()).
//
// - rows: the rows of a batch are independent sequences, so each block runs the whole
//   recurrence over its own rows, with no synchronisation between steps: batches of 8 and more
//   (at least 4 rows a thread), once a step is big enough that waking a thread pays.
// - units: a smaller batch with a large hidden size splits each STEP by hidden units instead
//   (run_phases, one barrier per step): thread k owns the units [a, b), i.e. those columns of
//   each of the four gate blocks; it packs only its columns of the step weight, computes their
//   gates for all rows and updates c and h for its units; the next step starts when all of h is
//   new. The backward pass splits dh_{t-1} = dgates_t @ kernel_hh^T by output units the same way.
//   Measured on 2 free cores (benchmarks/README.md, benchmarks/small_batch.py): 1.4-2x faster
//   at hidden 128, 256 and 512 for batch 1, 4 and 7, forward and training; at hidden 64 the
//   training step was no faster (the barrier costs about what the halved step saves). On cores
//   taken by other processes a step waits for a thread that is not running, and the split is
//   slower than one thread (as every use of several cores is there).
// - else one thread.
struct Plan {
  int rows = 1, units = 1;
};

constexpr int64_t kUnitsMinHidden = 128;  // and at least 64 units a block
// Off only for measurements (_lstm_cpu.unit_split): the forward calls' and the backward's.
std::atomic<bool> units_split_on[2] = {{true}, {true}};

Plan plan_for(int64_t pool_threads, int64_t batch, int64_t hidden, bool backward = false) {
  Plan plan;
  const int64_t threads = std::max<int64_t>(1, pool_threads);
  const int64_t step_flops = 2 * batch * 4 * hidden * hidden;
  if (step_flops >= (int64_t{1} << 19))
    plan.rows = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, batch / 4)));
  if (plan.rows == 1 && hidden >= kUnitsMinHidden && units_split_on[backward].load())
    plan.units = static_cast<int>(std::min<int64_t>(threads, hidden / 64));
  return plan;
}

Plan plan_for(ffi::ThreadPool& pool, int64_t batch, int64_t hidden, bool backward) {
  return plan_for(pool.num_threads(), batch, hidden, backward);
}

// The units [lo, hi) of block k of `blocks`, in multiples of 16 (whole cache lines).
void unit_range(int64_t hidden, int blocks, int k, int64_t& lo, int64_t& hi) {
  lo = k == 0 ? 0 : (hidden * k / blocks) & ~int64_t{15};
  hi = k + 1 == blocks ? hidden : (hidden * (k + 1) / blocks) & ~int64_t{15};
}

// Runs fn(first_row, n_rows) once per block over a split of the rows; false if any call
// returned false.
template <typename Fn>
bool parallel_rows(ffi::ThreadPool& pool, int64_t batch, int threads, Fn fn) {
  std::atomic<bool> ok{true};
  run_blocks(pool, threads, [&](int k) {
    const int64_t lo = batch * k / threads, hi = batch * (k + 1) / threads;
    if (hi > lo && !fn(lo, hi - lo)) ok = false;
  });
  return ok;
}

// Blocks for a GEMM of `flops`: one per ~4 MFLOP, at most the pool's threads.
int gemm_blocks(ffi::ThreadPool& pool, double flops) {
  const int64_t most = std::max<int64_t>(1, pool.num_threads());
  return static_cast<int>(std::min<int64_t>(most, std::max<int64_t>(1, flops / 4e6)));
}

// Asks the kernel to back a big output buffer with transparent huge pages before its first
// write. XLA hands out fresh buffers for these outputs at every call; with 4 KiB pages, first
// touching them costs one page fault per 4 KiB (measured: ~15 ms for the 26 MB activations of
// a 64 x 100 x 1024 training step, more than the step's input projection itself).
void advise_huge_pages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  if (bytes < 2 * kHuge) return;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// From the gate gradients dg (rows, 4H) of all steps: d_x = dg @ w_ih^T, d_w_ih = x^T @ dg,
// d_w_hh = h_prev^T @ dg, d_bias = column sums of dg. h_prev's first `batch` rows are h_first,
// the others h_rest (so the outputs can stand in for h_prev: h_prev[t] = ys[t - 1]). On the
// pool: d_x by blocks of rows, the others (sums over all rows) by blocks of columns. Rows go in
// pieces that fit BLAS's ints. Allocates (may throw std::bad_alloc) before any block runs.
void gate_gradients(ffi::ThreadPool& pool, const float* dg, const float* x, const float* w_ih,
                    const float* h_first, const float* h_rest, int64_t rows, int64_t batch,
                    int64_t features, int64_t hidden, float* d_x, float* d_w_ih, float* d_w_hh,
                    float* d_bias) {
  const int64_t g4 = 4 * hidden, piece = int64_t{1} << 20;
  const MKL_INT f = (MKL_INT)features, h = (MKL_INT)hidden, g = (MKL_INT)g4;
  const std::vector<float> ones(std::min(piece, rows), 1.0f);
  const int blocks = gemm_blocks(pool, 2.0 * rows * g4 * (2.0 * features + hidden));
  if (features > 0) {
    run_blocks(pool, blocks, [&](int k) {
      const int64_t lo = rows * k / blocks, hi = rows * (k + 1) / blocks;
      for (int64_t r = lo; r < hi; r += piece) {
        const MKL_INT n = (MKL_INT)std::min(piece, hi - r);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, f, g, 1.0f, dg + r * g4, g, w_ih,
                    g, 0.0f, d_x + r * features, f);
      }
    });
  }
  run_blocks(pool, blocks, [&](int k) {
    // Columns [lo, hi), in multiples of 16 (whole cache lines).
    const int64_t lo = (g4 * k / blocks) & ~int64_t{15};
    const int64_t hi = k + 1 == blocks ? g4 : (g4 * (k + 1) / blocks) & ~int64_t{15};
    if (hi <= lo) return;
    const MKL_INT w = (MKL_INT)(hi - lo);
    for (int64_t r = 0; r < rows; r += piece) {
      const MKL_INT n = (MKL_INT)std::min(piece, rows - r);
      const float beta = r == 0 ? 0.0f : 1.0f;
      const float* dg_r = dg + r * g4 + lo;
      if (features > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f, w, n, 1.0f, x + r * features, f,
                    dg_r, g, beta, d_w_ih + lo, g);
      cblas_sgemv(CblasRowMajor, CblasTrans, n, w, 1.0f, dg_r, g, ones.data(), 1, beta,
                  d_bias + lo, 1);
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, w, (MKL_INT)batch, 1.0f, h_first, h,
                dg + lo, g, 0.0f, d_w_hh + lo, g);
    for (int64_t r = batch; r < rows; r += piece) {
      const MKL_INT n = (MKL_INT)std::min(piece, rows - r);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, w, n, 1.0f,
                  h_rest + (r - batch) * hidden, h, dg + r * g4 + lo, g, 1.0f, d_w_hh + lo, g);
    }
  });
}

// Shape checks: every buffer's rank and size is checked before it is read or written.
std::string shape_text(ffi::Span<const int64_t> dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

bool same_shape(ffi::Span<const int64_t> dims, std::initializer_list<int64_t> want) {
  if (dims.size() != want.size()) return false;
  size_t i = 0;
  for (int64_t w : want)
    if (dims[i++] != w) return false;
  return true;
}

// Appends "name must be (..), got (..); " to `problems` when the shape differs.
template <typename B>
void expect(std::string& problems, const char* name, const B& buffer,
            std::initializer_list<int64_t> want) {
  if (same_shape(buffer.dimensions(), want)) return;
  std::vector<int64_t> w(want);
  problems += std::string(name) + " must be " +
              shape_text(ffi::Span<const int64_t>(w.data(), w.size())) + ", got " +
              shape_text(buffer.dimensions()) + "; ";
}

ffi::Error shape_error(const std::string& problems) {
  // problems: "...; ...; " -> without the last "; ".
  return ffi::Error::InvalidArgument("stacklstm LSTM kernel: " +
                                     problems.substr(0, problems.size() - 2));
}

// A mask is () for "all valid" or (time, batch).
void expect_mask(std::string& problems, const ffi::Buffer<ffi::F32>& mask, int64_t time,
                 int64_t batch) {
  if (mask.dimensions().size() != 0) expect(problems, "mask", mask, {time, batch});
}

// The per-step 1/0 values, or nullptr for "all valid".
const float* valid_steps(ffi::Buffer<ffi::F32>& mask) {
  return mask.dimensions().size() == 0 ? nullptr : mask.typed_data();
}

// Errors instead of exceptions: a failed allocation outside the threaded regions (none is made
// inside them) becomes an FFI error for JAX to raise, never std::terminate.
ffi::Error out_of_memory() {
  return ffi::Error(ffi::ErrorCode::kResourceExhausted, "stacklstm LSTM kernel: out of memory");
}

// The forward recurrence split by hidden units (Plan::units; see plan_for and run_phases):
// phase 0 lays out and packs each block's columns of the step weight, phase 1 + t is step t.
// Shapes checked and the state copied in by forward().
ffi::Error forward_units(ffi::ThreadPool& pool, int blocks, int64_t time, int64_t batch,
                         int64_t f, int64_t hidden, const float* xp, const float* w_ih,
                         const float* w_hh, const float* bias, const float* m, float* ys,
                         float* h, float* c, float* acts, float* cs, float* h_prev) {
  const bool saving = acts != nullptr;
  // A step's GEMM rows: [x_t, h] (inference: one GEMM with [kernel_ih; kernel_hh], as on the
  // rows path) or h (training: the activations already hold x_t @ kernel_ih).
  const int64_t g4 = 4 * hidden, x_cols = saving ? 0 : f, k = x_cols + hidden;
  // Made here, before any thread runs: each block's columns of the step weight (k, 4w) and of
  // the bias (4w,), its i, f, g, o side by side, blocks one after the other; each block's gates
  // (batch, 4w); and two buffers of GEMM rows (batch, k), step t reading one and writing the
  // other (another block may still be reading this step's h when a block writes its units).
  std::vector<float> weights, biases, gates, step_rows;
  std::unique_ptr<PackedWeight[]> packed;
  try {
    weights.resize(k * g4);
    biases.resize(g4);
    gates.resize(batch * g4);
    step_rows.resize(2 * batch * k);
    packed.reset(new PackedWeight[blocks]);
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (x_cols > 0) std::memcpy(step_rows.data() + b * k, xp + b * f, sizeof(float) * f);
    std::memcpy(step_rows.data() + b * k + x_cols, h + b * hidden, sizeof(float) * hidden);
  }
  std::atomic<bool> ok{true};
  run_phases(pool, blocks, time + 1, [&](int64_t p, int kb) {
    int64_t lo, hi;
    unit_range(hidden, blocks, kb, lo, hi);
    const int64_t w = hi - lo;
    if (w <= 0) return;
    float* wk = weights.data() + k * 4 * lo;
    float* bk = biases.data() + 4 * lo;
    float* zk = gates.data() + batch * 4 * lo;
    if (p == 0) {
      for (int64_t r = 0; r < k; ++r) {
        const float* src = r < x_cols ? w_ih + r * g4 : w_hh + (r - x_cols) * g4;
        for (int64_t q = 0; q < 4; ++q)
          std::memcpy(wk + r * 4 * w + q * w, src + q * hidden + lo, sizeof(float) * w);
      }
      for (int64_t q = 0; q < 4; ++q)
        std::memcpy(bk + q * w, bias + q * hidden + lo, sizeof(float) * w);
      if (!packed[kb].pack(wk, CblasNoTrans, batch, 4 * w, k)) ok = false;
      return;
    }
    if (!packed[kb].ok()) return;
    const int64_t t = p - 1, row = t * batch;
    const float* in = step_rows.data() + (t % 2) * batch * k;
    float* out = step_rows.data() + ((t + 1) % 2) * batch * k;
    if (kb == 0 && x_cols > 0 && t + 1 < time)  // the next step's x_t
      for (int64_t b = 0; b < batch; ++b)
        std::memcpy(out + b * k, xp + (row + batch + b) * f, sizeof(float) * f);
    if (h_prev != nullptr)
      for (int64_t b = 0; b < batch; ++b)
        std::memcpy(h_prev + (row + b) * hidden + lo, in + b * k + x_cols + lo,
                    sizeof(float) * w);
    packed[kb].multiply(in, 0.0f, zk);  // this block's columns of the step's GEMM
    unit_step_math(zk, bk, saving ? acts + row * g4 : nullptr, c, in + x_cols, out + x_cols,
                   ys + row * hidden, m ? m + row : nullptr, batch, hidden, lo, w, k);
    if (saving)
      for (int64_t b = 0; b < batch; ++b)
        std::memcpy(cs + (row + b) * hidden + lo, c + b * hidden + lo, sizeof(float) * w);
  });
  if (!ok) return out_of_memory();
  const float* last = step_rows.data() + (time % 2) * batch * k + x_cols;
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(h + b * hidden, last + b * k, sizeof(float) * hidden);
  return ffi::Error::Success();
}

// The forward recurrence. With `saved` (training) the activations, the cell states and the h
// each step starts from are written for the backward pass; the input projection of all steps goes
// straight into the activations array. Without it, nothing of the sequence is stored but the
// outputs: a step is one GEMM of [x_t, h] with the stacked weights. Shapes checked by the caller.
ffi::Error forward(ffi::ThreadPool& pool, int64_t time, int64_t batch, int64_t features,
                   int64_t hidden, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih,
                   ffi::Buffer<ffi::F32> w_hh, ffi::Buffer<ffi::F32> bias,
                   ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> c0,
                   ffi::Buffer<ffi::F32> mask, float* ys, float* h, float* c, float* acts,
                   float* cs, float* h_prev) {
  const int64_t bh = batch * hidden, g4 = 4 * hidden, bg = batch * g4;
  if (bh > 0) {
    std::memcpy(h, h0.typed_data(), sizeof(float) * bh);
    std::memcpy(c, c0.typed_data(), sizeof(float) * bh);
  }
  // No steps, rows or units: the state passes through and every sequence output is empty.
  if (time == 0 || bh == 0) return ffi::Error::Success();
  const float* xp = x.typed_data();
  const float* m = valid_steps(mask);

  const bool saving = acts != nullptr;
  if (saving) {
    advise_huge_pages(acts, sizeof(float) * time * bg);
    advise_huge_pages(cs, sizeof(float) * time * bh);
    if (h_prev != nullptr) advise_huge_pages(h_prev, sizeof(float) * time * bh);
    // Training: the input projection of all steps as one GEMM (in blocks of rows on the pool),
    // straight into the activations.
    const int64_t rows = time * batch;
    const int blocks = gemm_blocks(pool, 2.0 * rows * features * g4);
    run_blocks(pool, blocks, [&](int k) {
      const int64_t lo = rows * k / blocks, hi = rows * (k + 1) / blocks;
      project(xp + lo * features, w_ih.typed_data(), acts + lo * g4, hi - lo, features, g4);
    });
  }
  advise_huge_pages(ys, sizeof(float) * time * bh);
  const Plan plan = plan_for(pool, batch, hidden, false);
  if (plan.units > 1)
    return forward_units(pool, plan.units, time, batch, features, hidden, xp, w_ih.typed_data(),
                         w_hh.typed_data(), bias.typed_data(), m, ys, h, c, acts, cs, h_prev);
  const float* bias_p = bias.typed_data();
  // Training: the gates already hold x_t @ kernel_ih; a step adds h @ kernel_hh. Inference: a
  // step is ONE GEMM [x_t, h] @ [kernel_ih; kernel_hh] (no projection array at all), its gates
  // and [x_t, h] rows in two buffers made here, each thread using its own rows of them.
  const int64_t f = features, k = saving ? hidden : f + hidden;
  std::vector<float> stacked, gate_rows, xh_rows;
  try {
    if (!saving) {
      stacked.resize(k * g4);
      gate_rows.resize(bg);
      xh_rows.resize(batch * k);
    }
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  }
  if (!saving) {
    std::memcpy(stacked.data(), w_ih.typed_data(), sizeof(float) * f * g4);
    std::memcpy(stacked.data() + f * g4, w_hh.typed_data(), sizeof(float) * hidden * g4);
  }
  const float* step_weight = saving ? w_hh.typed_data() : stacked.data();
  bool ok = parallel_rows(pool, batch, plan.rows, [&](int64_t lo, int64_t rows) {
    PackedWeight w(step_weight, CblasNoTrans, rows, g4, k);
    if (!w.ok()) return false;
    float* buffer = saving ? nullptr : gate_rows.data() + lo * g4;
    float* xh = saving ? nullptr : xh_rows.data() + lo * k;
    for (int64_t t = 0; t < time; ++t) {
      const int64_t row = t * batch + lo;  // first row of this step and thread
      float* h_rows = h + lo * hidden;
      float* c_rows = c + lo * hidden;
      float* gates;
      if (saving) {
        gates = acts + row * g4;
        if (h_prev != nullptr)
          std::memcpy(h_prev + row * hidden, h_rows, sizeof(float) * rows * hidden);
        w.multiply(h_rows, 1.0f, gates);  // gates += h @ kernel_hh
      } else {
        gates = buffer;
        for (int64_t b = 0; b < rows; ++b) {
          if (f > 0) std::memcpy(xh + b * k, xp + (row + b) * f, sizeof(float) * f);
          std::memcpy(xh + b * k + f, h_rows + b * hidden, sizeof(float) * hidden);
        }
        w.multiply(xh, 0.0f, gates);  // gates = [x_t, h] @ [kernel_ih; kernel_hh]
      }
      forward_step_math(gates, bias_p, c_rows, h_rows, ys + row * hidden, m ? m + row : nullptr,
                        rows, hidden);
      if (saving) std::memcpy(cs + row * hidden, c_rows, sizeof(float) * rows * hidden);
    }
    return true;
  });
  if (!ok) return out_of_memory();
  return ffi::Error::Success();
}

// The shapes both forward handlers check: the inputs, and ys, h, c.
std::string forward_problems(ffi::Buffer<ffi::F32>& x, ffi::Buffer<ffi::F32>& w_ih,
                             ffi::Buffer<ffi::F32>& w_hh, ffi::Buffer<ffi::F32>& bias,
                             ffi::Buffer<ffi::F32>& h0, ffi::Buffer<ffi::F32>& c0,
                             ffi::Buffer<ffi::F32>& mask, ffi::Buffer<ffi::F32>& ys,
                             ffi::Buffer<ffi::F32>& h, ffi::Buffer<ffi::F32>& c, int64_t dims[4]) {
  auto xd = x.dimensions(), wh = w_hh.dimensions();
  if (xd.size() != 3 || wh.size() != 2)
    return "x must be (time, batch, features) and kernel_hh (hidden, 4*hidden), got " +
           shape_text(xd) + " and " + shape_text(wh) + "; ";
  const int64_t time = xd[0], batch = xd[1], features = xd[2], hidden = wh[0];
  dims[0] = time, dims[1] = batch, dims[2] = features, dims[3] = hidden;
  std::string problems;
  expect(problems, "kernel_ih", w_ih, {features, 4 * hidden});
  expect(problems, "kernel_hh", w_hh, {hidden, 4 * hidden});
  expect(problems, "bias", bias, {4 * hidden});
  expect(problems, "h0", h0, {batch, hidden});
  expect(problems, "c0", c0, {batch, hidden});
  expect_mask(problems, mask, time, batch);
  expect(problems, "ys", ys, {time, batch, hidden});
  expect(problems, "h", h, {batch, hidden});
  expect(problems, "c", c, {batch, hidden});
  return problems;
}

ffi::Error ForwardInfer(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih,
                        ffi::Buffer<ffi::F32> w_hh, ffi::Buffer<ffi::F32> bias,
                        ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> c0,
                        ffi::Buffer<ffi::F32> mask, ffi::ResultBuffer<ffi::F32> ys,
                        ffi::ResultBuffer<ffi::F32> h, ffi::ResultBuffer<ffi::F32> c) {
  int64_t d[4];
  std::string problems = forward_problems(x, w_ih, w_hh, bias, h0, c0, mask, *ys, *h, *c, d);
  if (!problems.empty()) return shape_error(problems);
  return forward(pool, d[0], d[1], d[2], d[3], x, w_ih, w_hh, bias, h0, c0, mask, ys->typed_data(),
                 h->typed_data(), c->typed_data(), nullptr, nullptr, nullptr);
}

ffi::Error ForwardTrain(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih,
                        ffi::Buffer<ffi::F32> w_hh, ffi::Buffer<ffi::F32> bias,
                        ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> c0,
                        ffi::Buffer<ffi::F32> mask, ffi::ResultBuffer<ffi::F32> ys,
                        ffi::ResultBuffer<ffi::F32> h, ffi::ResultBuffer<ffi::F32> c,
                        ffi::ResultBuffer<ffi::F32> acts, ffi::ResultBuffer<ffi::F32> cs,
                        ffi::ResultBuffer<ffi::F32> h_prev) {
  int64_t d[4];
  std::string problems = forward_problems(x, w_ih, w_hh, bias, h0, c0, mask, *ys, *h, *c, d);
  if (!problems.empty()) return shape_error(problems);
  const int64_t time = d[0], batch = d[1], hidden = d[3];
  expect(problems, "acts", *acts, {time, batch, 4 * hidden});
  expect(problems, "cs", *cs, {time, batch, hidden});
  // h_prev: (time, batch, hidden), or (0,) when not needed (no mask: the outputs stand in).
  const bool no_h_prev = same_shape(h_prev->dimensions(), {0});
  if (!no_h_prev) expect(problems, "h_prev", *h_prev, {time, batch, hidden});
  if (!problems.empty()) return shape_error(problems);
  return forward(pool, time, batch, d[2], hidden, x, w_ih, w_hh, bias, h0, c0, mask,
                 ys->typed_data(), h->typed_data(), c->typed_data(), acts->typed_data(),
                 cs->typed_data(), no_h_prev ? nullptr : h_prev->typed_data());
}

// The reverse recurrence split by hidden units (Plan::units). Step t's gate gradients of a
// block's units need only those units of dh and dc, but dh_{t-1} = d_gates_t @ kernel_hh^T needs
// all of step t's gate gradients: each block computes its units of dh_{t-1} (its rows of
// kernel_hh, packed in phase 0) from the full d_gates_t, one phase after that step's gate
// gradients. Phase p: dh_{t} for t = time - p (p > 0), then the gate gradients of step
// time - 1 - p (p < time). dh_new: (batch, hidden) scratch, each block its (batch, w) piece.
// False when out of memory.
bool backward_units(ffi::ThreadPool& pool, int blocks, int64_t time, int64_t batch,
                    int64_t hidden, const float* a, const float* c, const float* c0,
                    const float* dy, const float* w_hh, const float* m, float* dh, float* dc,
                    float* dg, float* dh_new) {
  const int64_t g4 = 4 * hidden;
  std::unique_ptr<PackedWeight[]> packed;
  try {
    packed.reset(new PackedWeight[blocks]);
  } catch (const std::bad_alloc&) {
    return false;
  }
  std::atomic<bool> ok{true};
  run_phases(pool, blocks, time + 1, [&](int64_t p, int kb) {
    int64_t lo, hi;
    unit_range(hidden, blocks, kb, lo, hi);
    const int64_t w = hi - lo;
    if (w <= 0) return;
    if (p == 0 && !packed[kb].pack(w_hh + lo * g4, CblasTrans, batch, w, g4)) ok = false;
    if (!packed[kb].ok()) return;
    float* dh_w = dh_new + batch * lo;
    if (p > 0) {  // dh_{t-1} = d_gates_t @ kernel_hh^T; a padded row passes dh through unchanged.
      const int64_t row = (time - p) * batch;
      const float* m_t = m ? m + row : nullptr;
      packed[kb].multiply(dg + row * g4, 0.0f, dh_w);
      for (int64_t b = 0; b < batch; ++b)
        if (m_t == nullptr || m_t[b] > 0.0f)
          std::memcpy(dh + b * hidden + lo, dh_w + b * w, sizeof(float) * w);
    }
    if (p < time) {
      const int64_t t = time - 1 - p, row = t * batch;
      const float* c_prev = t > 0 ? c + (row - batch) * hidden : c0;
      backward_step_math(a + row * g4, c + row * hidden, c_prev, dy + row * hidden, dh, dc,
                         dg + row * g4, m ? m + row : nullptr, batch, hidden, lo, hi);
    }
  });
  return ok;
}

// The one gate-gradient buffer kept across calls (see Backward), at most 256 MB.
constexpr size_t kKeptGateGrads = size_t{1} << 26;
std::mutex kept_gate_grads_mutex;
std::vector<float> kept_gate_grads;

// The reverse recurrence: carries (dh, dc) from the last step to the first and writes the
// gate gradients of every step. dh0/dc0 double as the running carry.
ffi::Error Backward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> acts, ffi::Buffer<ffi::F32> cs,
                    ffi::Buffer<ffi::F32> c0, ffi::Buffer<ffi::F32> w_hh,
                    ffi::Buffer<ffi::F32> d_ys, ffi::Buffer<ffi::F32> d_h,
                    ffi::Buffer<ffi::F32> d_c, ffi::Buffer<ffi::F32> mask,
                    ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w_ih,
                    ffi::Buffer<ffi::F32> h0, ffi::Buffer<ffi::F32> h_seq, bool h_is_output,
                    ffi::ResultBuffer<ffi::F32> dh0, ffi::ResultBuffer<ffi::F32> dc0,
                    ffi::ResultBuffer<ffi::F32> d_x, ffi::ResultBuffer<ffi::F32> d_w_ih,
                    ffi::ResultBuffer<ffi::F32> d_w_hh, ffi::ResultBuffer<ffi::F32> d_bias) {
  auto cd = cs.dimensions();
  if (cd.size() != 3)
    return shape_error("cs must be (time, batch, hidden), got " + shape_text(cd) + "; ");
  const int64_t time = cd[0], batch = cd[1], hidden = cd[2];
  const int64_t bh = batch * hidden, g4 = 4 * hidden, bg = batch * g4;
  auto xd = x.dimensions();
  if (xd.size() != 3)
    return shape_error("x must be (time, batch, features), got " + shape_text(xd) + "; ");
  const int64_t features = xd[2];
  std::string problems;
  expect(problems, "acts", acts, {time, batch, g4});
  expect(problems, "c0", c0, {batch, hidden});
  expect(problems, "kernel_hh", w_hh, {hidden, g4});
  expect(problems, "d_ys", d_ys, {time, batch, hidden});
  expect(problems, "d_h", d_h, {batch, hidden});
  expect(problems, "d_c", d_c, {batch, hidden});
  expect_mask(problems, mask, time, batch);
  expect(problems, "x", x, {time, batch, features});
  expect(problems, "kernel_ih", w_ih, {features, g4});
  expect(problems, "h0", h0, {batch, hidden});
  expect(problems, "h_seq", h_seq, {time, batch, hidden});
  expect(problems, "dh0", *dh0, {batch, hidden});
  expect(problems, "dc0", *dc0, {batch, hidden});
  expect(problems, "d_x", *d_x, {time, batch, features});
  expect(problems, "d_kernel_ih", *d_w_ih, {features, g4});
  expect(problems, "d_kernel_hh", *d_w_hh, {hidden, g4});
  expect(problems, "d_bias", *d_bias, {g4});
  if (!problems.empty()) return shape_error(problems);
  const float* m = valid_steps(mask);
  float* dh = dh0->typed_data();
  float* dc = dc0->typed_data();
  if (bh > 0) {
    std::memcpy(dh, d_h.typed_data(), sizeof(float) * bh);
    std::memcpy(dc, d_c.typed_data(), sizeof(float) * bh);
  }
  // No steps, rows or units: the state's gradient passes through, the others are zero.
  if (time == 0 || bh == 0) {
    std::fill_n(d_x->typed_data(), d_x->element_count(), 0.0f);
    std::fill_n(d_w_ih->typed_data(), d_w_ih->element_count(), 0.0f);
    std::fill_n(d_w_hh->typed_data(), d_w_hh->element_count(), 0.0f);
    std::fill_n(d_bias->typed_data(), d_bias->element_count(), 0.0f);
    return ffi::Error::Success();
  }
  const float* a = acts.typed_data();
  const float* c = cs.typed_data();
  const float* dy = d_ys.typed_data();
  // The gate gradients of all steps live only in this call. Fresh pages cost more than the
  // work on them (see advise_huge_pages), so ONE buffer of at most kKeptGateGrads floats
  // (256 MB) is kept for the whole process across calls; a call that needs more, or finds it in
  // use by a concurrent call, makes its own for the call. dh_new: the new dh of each row, each
  // block using its own rows.
  const size_t need = static_cast<size_t>(time * bg);
  std::unique_lock<std::mutex> kept_lock(kept_gate_grads_mutex, std::try_to_lock);
  std::vector<float> own;
  std::vector<float>& gate_grads =
      kept_lock.owns_lock() && need <= kKeptGateGrads ? kept_gate_grads : own;
  std::vector<float> dh_rows_new;
  try {
    if (gate_grads.size() < need) {
      std::vector<float>().swap(gate_grads);
      gate_grads.reserve(need);
      advise_huge_pages(gate_grads.data(), sizeof(float) * need);
      gate_grads.resize(need);
    }
    dh_rows_new.resize(bh);
  } catch (const std::bad_alloc&) {
    std::vector<float>().swap(gate_grads);
    return out_of_memory();
  }
  float* dg = gate_grads.data();
  const Plan plan = plan_for(pool, batch, hidden, true);
  const auto by_rows = [&](int64_t lo, int64_t rows) {
    PackedWeight w(w_hh.typed_data(), CblasTrans, rows, hidden, g4);
    if (!w.ok()) return false;
    float* dh_new = dh_rows_new.data() + lo * hidden;
    float* dh_rows = dh + lo * hidden;
    float* dc_rows = dc + lo * hidden;
    for (int64_t t = time - 1; t >= 0; --t) {
      const int64_t row = t * batch + lo;
      const float* m_t = m ? m + row : nullptr;
      const float* c_prev = t > 0 ? c + (row - batch) * hidden : c0.typed_data() + lo * hidden;
      backward_step_math(a + row * g4, c + row * hidden, c_prev, dy + row * hidden, dh_rows,
                         dc_rows, dg + row * g4, m_t, rows, hidden, 0, hidden);
      // dh_{t-1} = d_gates_t @ kernel_hh^T; a padded row passes dh through unchanged.
      w.multiply(dg + row * g4, 0.0f, dh_new);
      for (int64_t b = 0; b < rows; ++b)
        if (m_t == nullptr || m_t[b] > 0.0f)
          std::memcpy(dh_rows + b * hidden, dh_new + b * hidden, sizeof(float) * hidden);
    }
    return true;
  };
  const bool ok = plan.units > 1 ? backward_units(pool, plan.units, time, batch, hidden, a, c,
                                                  c0.typed_data(), dy, w_hh.typed_data(), m, dh,
                                                  dc, dg, dh_rows_new.data())
                                 : parallel_rows(pool, batch, plan.rows, by_rows);
  if (!ok) return out_of_memory();
  // The input, weight and bias gradients: one GEMM each over all (time * batch) rows, on all
  // of oneMKL's threads.
  const float* hs = h_seq.typed_data();
  try {
    gate_gradients(pool, dg, x.typed_data(), w_ih.typed_data(), h_is_output ? h0.typed_data() : hs,
                   h_is_output ? hs : hs + bh, time * batch, batch, features, hidden,
                   d_x->typed_data(), d_w_ih->typed_data(), d_w_hh->typed_data(),
                   d_bias->typed_data());
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(StacklstmLstmForward, ForwardInfer,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
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
                                  .Ctx<ffi::ThreadPool>()
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
                                  .Ret<ffi::Buffer<ffi::F32>>()  // h_prev (time, batch, hidden),
                                                                 // or (0,): not needed
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(StacklstmLstmBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // acts (time, batch, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // cs (time, batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // c0 (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // kernel_hh (hidden, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // d_ys (time, batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // d_h (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // d_c (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // mask
                                  .Arg<ffi::Buffer<ffi::F32>>()  // x (time, batch, features)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // kernel_ih (features, 4H)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // h0 (batch, hidden)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // h_prev, or ys if h_is_output
                                  .Attr<bool>("h_is_output")
                                  .Ret<ffi::Buffer<ffi::F32>>()  // dh0
                                  .Ret<ffi::Buffer<ffi::F32>>()  // dc0
                                  .Ret<ffi::Buffer<ffi::F32>>()  // d_x (time, batch, features)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // d_kernel_ih
                                  .Ret<ffi::Buffer<ffi::F32>>()  // d_kernel_hh
                                  .Ret<ffi::Buffer<ffi::F32>>()  // d_bias
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

// What this build was made with, for the load-time check against the running jaxlib: the XLA
// FFI C API version of the headers it was compiled against (a runtime accepts handlers of the
// same major version and a minor version up to its own) and that jaxlib's version.
PyObject* build_info(PyObject*, PyObject*) {
  return Py_BuildValue("{s:(ii),s:s}", "ffi_api_version", XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR,
                       "jaxlib", STACKLSTM_JAXLIB_VERSION);
}

// oneMKL's version, the code path it chose for this CPU (its "Processor" string: AVX2,
// AVX-512, AVX-512 with AMX, ...) and its thread count: what the benchmarks print beside
// their figures, so that no reader takes one CPU's ratio for all.
PyObject* blas_info(PyObject*, PyObject*) {
  MKLVersion version;
  mkl_get_version(&version);
  char text[512] = {0};
  mkl_get_version_string(text, sizeof text - 1);
  return Py_BuildValue("{s:s,s:s,s:i,s:N}", "blas", text, "code_path", version.Processor,
                       "max_threads", mkl_get_max_threads(), "packed_gemm",
                       PyBool_FromLong(packed_gemm_on()));
}

// The split plan_for chooses for (batch, hidden, pool threads): {"rows": n, "units": n}.
PyObject* split_plan(PyObject*, PyObject* args) {
  long long batch, hidden, threads;
  if (!PyArg_ParseTuple(args, "LLL", &batch, &hidden, &threads)) return nullptr;
  const Plan p = plan_for(threads, batch, hidden);
  return Py_BuildValue("{s:i,s:i}", "rows", p.rows, "units", p.units);
}

// Turns the split by units of the forward calls and of the backward call on or off for the
// whole process; returns the previous settings. For measurements only
// (benchmarks/small_batch.py); both are on by default.
PyObject* unit_split(PyObject*, PyObject* args) {
  int forward, backward;
  if (!PyArg_ParseTuple(args, "pp", &forward, &backward)) return nullptr;
  const bool was_forward = units_split_on[0].exchange(forward != 0);
  const bool was_backward = units_split_on[1].exchange(backward != 0);
  return Py_BuildValue("(NN)", PyBool_FromLong(was_forward), PyBool_FromLong(was_backward));
}

PyMethodDef methods[] = {
    {"handlers", handlers, METH_NOARGS, "The XLA FFI handlers of the CPU LSTM kernel."},
    {"build_info", build_info, METH_NOARGS, "The FFI API and jaxlib versions of this build."},
    {"blas_info", blas_info, METH_NOARGS,
     "oneMKL's version, the code path it chose for this CPU and its thread count."},
    {"plan", split_plan, METH_VARARGS,
     "plan(batch, hidden, threads): how a call's recurrence is split over threads."},
    {"unit_split", unit_split, METH_VARARGS,
     "unit_split(forward, backward): the split by units on or off (for measurements); the "
     "previous settings."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lstm_cpu",
                      "The CPU LSTM kernel (XLA FFI custom calls).", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};
}  // namespace

PyMODINIT_FUNC PyInit__lstm_cpu() { return PyModule_Create(&module); }
