// cuDNN's recurrent networks through vmcuda's libcudnn.so.9 (issue 12 point 3; the v8 RNN API
// PyTorch's nn.LSTM and nn.GRU call): a single-layer unidirectional fp32 LSTM and GRU with two
// biases, sequences of different lengths (padded input and output, a padding symbol), initial
// states; weights written through the pointers cudnnGetRNNWeightParams answers (cuDNN's gate
// order: LSTM i, f, g, o; GRU r, z, n, each the input matrix then the recurrent one), forward in
// training and inference mode, backward data and backward weights. Results are checked against a
// CPU forward in double precision written here from cudnnRNNMode_t's formulas, and the gradients
// against central differences of that forward (a loss of the outputs weighted by dy, dhy, dcy),
// printed as ok/WRONG so the output is the same natively, through vmcuda and on the test
// executor. Also run by tests/cuda/suspend_resume_test.sh, suspended at a random point: the RNN,
// RNN data and dropout descriptors are carried.
// Built with nvcc -cudart shared -lcudnn (scripts/build-cuda-tests.sh).
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "library_check.h"

#define DNN(call) CHECK_STATUS(call, cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

namespace {

bool all_ok = true;
void report(const char* cell, const char* what, bool ok) {
  all_ok = all_ok && ok;
  std::printf("%s: %s: %s\n", cell, what, ok ? "ok" : "WRONG");
}
bool near(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])))) {
      std::printf("  element %zu: %.6f, want %.6f\n", i, got[i], want[i]);
      return false;
    }
  return true;
}
// Small values of both signs, different for each `salt`.
std::vector<float> values(size_t n, int salt, float scale = 0.1f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int((i * 7 + size_t(salt) * 5) % 13) - 6) * scale;
  return v;
}

constexpr int T = 4, B = 3, I = 5, H = 4;  // steps, sequences, input and hidden sizes
const int kLengths[B] = {4, 3, 2};         // the sequences' lengths (padded to T)

// The CPU's network: every parameter as a double, the matrices [id] (H x cols, row-major) and
// biases [id] (H) by linLayerID (the input matrices 0..G-1, the recurrent ones G..2G-1).
struct Net {
  cudnnRNNMode_t mode;
  int g;
  std::vector<std::vector<double>> m, b;
  std::vector<double> x, hx, cx;  // x [t][b][I] (padded), hx and cx [b][H]
};
struct Out {
  std::vector<double> y, hy, cy;  // y [t][b][H] (valid positions; padding 0)
};
double sig(double v) { return 1 / (1 + std::exp(-v)); }
// cudnnRNNMode_t's formulas (cudnn_adv.h; cuDNN's documentation of the mode).
Out forward(const Net& n) {
  Out o;
  o.y.assign(size_t(T) * B * H, 0);
  o.hy.assign(size_t(B) * H, 0);
  o.cy.assign(size_t(B) * H, 0);
  for (int b = 0; b < B; ++b) {
    std::vector<double> h(n.hx.begin() + b * H, n.hx.begin() + (b + 1) * H);
    std::vector<double> c(n.cx.begin() + b * H, n.cx.begin() + (b + 1) * H);
    for (int t = 0; t < kLengths[b]; ++t) {
      const double* x = &n.x[(size_t(t) * B + b) * I];
      auto wx = [&](int id, int j) {
        double s = n.b[size_t(id)][size_t(j)];
        for (int i = 0; i < I; ++i) s += n.m[size_t(id)][size_t(j) * I + i] * x[i];
        return s;
      };
      auto rh = [&](int id, int j) {
        double s = n.b[size_t(id)][size_t(j)];
        for (int i = 0; i < H; ++i) s += n.m[size_t(id)][size_t(j) * H + i] * h[size_t(i)];
        return s;
      };
      std::vector<double> hn(static_cast<size_t>(H)), cn(static_cast<size_t>(H));
      for (int j = 0; j < H; ++j) {
        if (n.mode == CUDNN_LSTM) {
          const double ig = sig(wx(0, j) + rh(4, j)), fg = sig(wx(1, j) + rh(5, j)), gg = std::tanh(wx(2, j) + rh(6, j)),
                       og = sig(wx(3, j) + rh(7, j));
          cn[size_t(j)] = fg * c[size_t(j)] + ig * gg;
          hn[size_t(j)] = og * std::tanh(cn[size_t(j)]);
        } else {
          const double r = sig(wx(0, j) + rh(3, j)), z = sig(wx(1, j) + rh(4, j));
          const double nn = std::tanh(wx(2, j) + r * rh(5, j));
          hn[size_t(j)] = (1 - z) * nn + z * h[size_t(j)];
        }
      }
      h = hn;
      if (n.mode == CUDNN_LSTM) c = cn;
      for (int j = 0; j < H; ++j) o.y[(size_t(t) * B + b) * H + j] = h[size_t(j)];
    }
    for (int j = 0; j < H; ++j) o.hy[size_t(b) * H + j] = h[size_t(j)], o.cy[size_t(b) * H + j] = c[size_t(j)];
  }
  return o;
}
// The loss whose gradients the backward passes give: outputs weighted by dy, dhy, dcy.
double loss(const Net& n, const std::vector<float>& dy, const std::vector<float>& dhy, const std::vector<float>& dcy) {
  const Out o = forward(n);
  double s = 0;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < kLengths[b]; ++t)
      for (int j = 0; j < H; ++j) s += o.y[(size_t(t) * B + b) * H + j] * dy[(size_t(t) * B + b) * H + j];
  for (size_t i = 0; i < o.hy.size(); ++i) s += o.hy[i] * dhy[i];
  if (n.mode == CUDNN_LSTM)
    for (size_t i = 0; i < o.cy.size(); ++i) s += o.cy[i] * dcy[i];
  return s;
}
// d loss / d v for each element of v, by central differences.
std::vector<double> numeric(Net& n, std::vector<double>& v, const std::function<double()>& f) {
  std::vector<double> g(v.size());
  const double e = 1e-5;
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + e;
    const double up = f();
    v[i] = keep - e;
    const double down = f();
    v[i] = keep;
    g[i] = (up - down) / (2 * e);
  }
  (void)n;
  return g;
}
std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
// Only the positions of steps each sequence has ([t][b][vec] layout).
std::vector<float> valid(const std::vector<float>& v, int vec) {
  std::vector<float> out;
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t < kLengths[b]) out.insert(out.end(), v.begin() + (size_t(t) * B + b) * vec, v.begin() + (size_t(t) * B + b + 1) * vec);
  return out;
}
std::vector<double> valid(const std::vector<double>& v, int vec) {
  std::vector<double> out;
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t < kLengths[b]) out.insert(out.end(), v.begin() + (size_t(t) * B + b) * vec, v.begin() + (size_t(t) * B + b + 1) * vec);
  return out;
}

void run(cudnnHandle_t handle, cudnnRNNMode_t mode) {
  const char* cell = mode == CUDNN_LSTM ? "LSTM" : "GRU";
  const int g = mode == CUDNN_LSTM ? 4 : 3;
  const bool lstm = mode == CUDNN_LSTM;

  // A dropout descriptor of probability 0 (PyTorch's for a single layer).
  cudnnDropoutDescriptor_t dropout;
  DNN(cudnnCreateDropoutDescriptor(&dropout));
  size_t states_bytes = 0;
  DNN(cudnnDropoutGetStatesSize(handle, &states_bytes));
  void* states = nullptr;
  CUDA(cudaMalloc(&states, states_bytes));
  DNN(cudnnSetDropoutDescriptor(dropout, handle, 0.f, states, states_bytes, 1234));

  cudnnRNNDescriptor_t rnn;
  DNN(cudnnCreateRNNDescriptor(&rnn));
  DNN(cudnnSetRNNDescriptor_v8(rnn, CUDNN_RNN_ALGO_STANDARD, mode, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                               CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, I, H, H, 1,
                               dropout, CUDNN_RNN_PADDED_IO_ENABLED));

  cudnnRNNDataDescriptor_t xd, yd;
  DNN(cudnnCreateRNNDataDescriptor(&xd));
  DNN(cudnnCreateRNNDataDescriptor(&yd));
  float fill = 0.f;
  DNN(cudnnSetRNNDataDescriptor(xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, I, kLengths, &fill));
  DNN(cudnnSetRNNDataDescriptor(yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, H, kLengths, &fill));
  cudnnTensorDescriptor_t hd, cd;
  const int hdims[3] = {1, B, H}, hstrides[3] = {B * H, H, 1};
  DNN(cudnnCreateTensorDescriptor(&hd));
  DNN(cudnnCreateTensorDescriptor(&cd));
  DNN(cudnnSetTensorNdDescriptor(hd, CUDNN_DATA_FLOAT, 3, hdims, hstrides));
  DNN(cudnnSetTensorNdDescriptor(cd, CUDNN_DATA_FLOAT, 3, hdims, hstrides));

  // The weight space, filled through the pointers cuDNN answers for each matrix and bias.
  size_t wbytes = 0;
  DNN(cudnnGetRNNWeightSpaceSize(handle, rnn, &wbytes));
  const size_t want_floats = size_t(g) * (H * I + H * H) + size_t(2 * g) * H;
  report(cell, "the weight space holds every matrix and bias", wbytes >= want_floats * 4);
  char* w = nullptr;
  CUDA(cudaMalloc(&w, wbytes));
  CUDA(cudaMemset(w, 0, wbytes));
  Net net;
  net.mode = mode;
  net.g = g;
  std::vector<char*> maddr(size_t(2 * g)), baddr(size_t(2 * g));
  bool shapes = true, inside = true;
  cudnnTensorDescriptor_t md, bd;
  DNN(cudnnCreateTensorDescriptor(&md));
  DNN(cudnnCreateTensorDescriptor(&bd));
  std::vector<std::pair<char*, size_t>> spans;
  for (int id = 0; id < 2 * g; ++id) {
    void *m = nullptr, *bb = nullptr;
    DNN(cudnnGetRNNWeightParams(handle, rnn, 0, wbytes, w, id, md, &m, bd, &bb));
    const int cols = id < g ? I : H;
    cudnnDataType_t type;
    int nb = 0, dims[8] = {}, strides[8] = {};
    DNN(cudnnGetTensorNdDescriptor(md, 8, &type, &nb, dims, strides));
    // cuDNN's shapes: {1, rows, cols} and {1, rows, 1}.
    shapes &= type == CUDNN_DATA_FLOAT && nb == 3 && dims[0] == 1 && dims[1] == H && dims[2] == cols;
    DNN(cudnnGetTensorNdDescriptor(bd, 8, &type, &nb, dims, strides));
    shapes &= type == CUDNN_DATA_FLOAT && nb == 3 && dims[0] == 1 && dims[1] == H && dims[2] == 1;
    maddr[size_t(id)] = static_cast<char*>(m);
    baddr[size_t(id)] = static_cast<char*>(bb);
    spans.push_back({maddr[size_t(id)], size_t(H) * cols * 4});
    spans.push_back({baddr[size_t(id)], size_t(H) * 4});
    net.m.push_back(as_double(values(size_t(H) * cols, 10 + id, 0.05f)));
    net.b.push_back(as_double(values(size_t(H), 30 + id, 0.05f)));
    CUDA(cudaMemcpy(m, values(size_t(H) * cols, 10 + id, 0.05f).data(), size_t(H) * cols * 4, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(bb, values(size_t(H), 30 + id, 0.05f).data(), size_t(H) * 4, cudaMemcpyHostToDevice));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 0; i < spans.size(); ++i) {
    inside &= spans[i].first >= w && spans[i].first + spans[i].second <= w + wbytes;
    if (i > 0) inside &= spans[i - 1].first + spans[i - 1].second <= spans[i].first;
  }
  report(cell, "matrix and bias shapes (hidden x input, hidden x hidden, hidden)", shapes);
  report(cell, "matrices and biases lie apart inside the weight space", inside);
  // A matrix alone and a bias alone, as PyTorch's flatten_weight asks (the other descriptor and
  // address NULL): the same addresses and shapes.
  bool alone = true;
  for (int id = 0; id < 2 * g; ++id) {
    void *m = nullptr, *bb = nullptr;
    DNN(cudnnGetRNNWeightParams(handle, rnn, 0, wbytes, w, id, md, &m, nullptr, nullptr));
    DNN(cudnnGetRNNWeightParams(handle, rnn, 0, wbytes, w, id, nullptr, nullptr, bd, &bb));
    cudnnDataType_t type;
    int nb = 0, dims[8] = {}, strides[8] = {};
    DNN(cudnnGetTensorNdDescriptor(bd, 3, &type, &nb, dims, strides));
    alone &= m == maddr[size_t(id)] && bb == baddr[size_t(id)] && nb == 3 && dims[1] == H && dims[2] == 1;
  }
  report(cell, "a matrix alone and a bias alone (PyTorch's queries) give the same addresses and shapes", alone);

  // Inputs (padding positions hold garbage the network must not read).
  std::vector<float> x = values(size_t(T) * B * I, 1, 0.2f), hx = values(size_t(B) * H, 2), cx = values(size_t(B) * H, 3);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t >= kLengths[b])
        for (int i = 0; i < I; ++i) x[(size_t(t) * B + b) * I + i] = 1e3f;
  net.x = as_double(x), net.hx = as_double(hx), net.cx = as_double(cx);
  float *x_ = upload(x), *hx_ = upload(hx), *cx_ = upload(cx);
  float *y_ = upload(std::vector<float>(size_t(T) * B * H, -9.f)), *hy_ = upload(std::vector<float>(size_t(B) * H)),
        *cy_ = upload(std::vector<float>(size_t(B) * H));
  int32_t* lengths_ = upload(std::vector<int32_t>(kLengths, kLengths + B));

  size_t work_bytes = 0, reserve_bytes = 0;
  DNN(cudnnGetRNNTempSpaceSizes(handle, rnn, CUDNN_FWD_MODE_TRAINING, xd, &work_bytes, &reserve_bytes));
  void *work = nullptr, *reserve = nullptr;
  CUDA(cudaMalloc(&work, std::max<size_t>(work_bytes, 1)));
  CUDA(cudaMalloc(&reserve, std::max<size_t>(reserve_bytes, 1)));
  DNN(cudnnRNNForward(handle, rnn, CUDNN_FWD_MODE_TRAINING, lengths_, xd, x_, yd, y_, hd, hx_, hy_, lstm ? cd : nullptr,
                      lstm ? cx_ : nullptr, lstm ? cy_ : nullptr, wbytes, w, work_bytes, work, reserve_bytes, reserve));
  const Out want = forward(net);
  const std::vector<float> y = download(y_, size_t(T) * B * H), hy = download(hy_, size_t(B) * H),
                           cy = download(cy_, size_t(B) * H);
  bool fwd = near(valid(y, H), valid(want.y, H), 1e-4) && near(hy, want.hy, 1e-4);
  if (lstm) fwd = fwd && near(cy, want.cy, 1e-4);
  report(cell, lstm ? "forward (training) y, hy, cy match the CPU" : "forward (training) y, hy match the CPU", fwd);
  bool padded = true;
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < H; ++j)
        if (t >= kLengths[b]) padded &= y[(size_t(t) * B + b) * H + j] == fill;
  report(cell, "y's padding holds the padding symbol", padded);

  // Inference gives the same outputs (no reserve space).
  size_t iwork = 0, ireserve = 0;
  DNN(cudnnGetRNNTempSpaceSizes(handle, rnn, CUDNN_FWD_MODE_INFERENCE, xd, &iwork, &ireserve));
  void* iwork_ = nullptr;
  CUDA(cudaMalloc(&iwork_, std::max<size_t>(iwork, 1)));
  float* y2_ = upload(std::vector<float>(size_t(T) * B * H, -9.f));
  DNN(cudnnRNNForward(handle, rnn, CUDNN_FWD_MODE_INFERENCE, lengths_, xd, x_, yd, y2_, hd, hx_, nullptr,
                      lstm ? cd : nullptr, lstm ? cx_ : nullptr, nullptr, wbytes, w, iwork, iwork_, 0, nullptr));
  report(cell, "forward (inference) y matches the CPU", near(valid(download(y2_, size_t(T) * B * H), H), valid(want.y, H), 1e-4));

  // Backward data, then weights: the gradients of loss() (central differences of the CPU forward).
  const std::vector<float> dy = values(size_t(T) * B * H, 4), dhy = values(size_t(B) * H, 5), dcy = values(size_t(B) * H, 6);
  float *dy_ = upload(dy), *dhy_ = upload(dhy), *dcy_ = upload(dcy);
  float *dx_ = upload(std::vector<float>(size_t(T) * B * I)), *dhx_ = upload(std::vector<float>(size_t(B) * H)),
        *dcx_ = upload(std::vector<float>(size_t(B) * H));
  DNN(cudnnRNNBackwardData_v8(handle, rnn, lengths_, yd, y_, dy_, xd, dx_, hd, hx_, dhy_, dhx_, lstm ? cd : nullptr,
                              lstm ? cx_ : nullptr, lstm ? dcy_ : nullptr, lstm ? dcx_ : nullptr, wbytes, w, work_bytes,
                              work, reserve_bytes, reserve));
  char* dw = nullptr;
  CUDA(cudaMalloc(&dw, wbytes));
  CUDA(cudaMemset(dw, 0, wbytes));
  DNN(cudnnRNNBackwardWeights_v8(handle, rnn, CUDNN_WGRAD_MODE_ADD, lengths_, xd, x_, hd, hx_, yd, y_, wbytes, dw,
                                 work_bytes, work, reserve_bytes, reserve));
  auto f = [&] { return loss(net, dy, dhy, dcy); };
  const std::vector<double> gx = numeric(net, net.x, f), ghx = numeric(net, net.hx, f), gcx = numeric(net, net.cx, f);
  bool bwd = near(valid(download(dx_, size_t(T) * B * I), I), valid(gx, I), 1e-3) &&
             near(download(dhx_, size_t(B) * H), ghx, 1e-3);
  if (lstm) bwd = bwd && near(download(dcx_, size_t(B) * H), gcx, 1e-3);
  report(cell, lstm ? "backward data dx, dhx, dcx match the CPU's gradients" : "backward data dx, dhx match the CPU's gradients", bwd);
  bool wgrad = true;
  for (int id = 0; id < 2 * g; ++id) {
    const int cols = id < g ? I : H;
    const std::vector<double> gm = numeric(net, net.m[size_t(id)], f), gb = numeric(net, net.b[size_t(id)], f);
    const std::vector<float> dm = download(reinterpret_cast<float*>(dw + (maddr[size_t(id)] - w)), size_t(H) * cols),
                             db = download(reinterpret_cast<float*>(dw + (baddr[size_t(id)] - w)), size_t(H));
    wgrad &= near(dm, gm, 1e-3) && near(db, gb, 1e-3);
  }
  report(cell, "backward weights (every matrix and bias, found by cudnnGetRNNWeightParams) match the CPU's gradients", wgrad);

  // The descriptors read back: the RNN descriptor names the program's dropout descriptor; the
  // output's sequence lengths and padding symbol.
  cudnnRNNAlgo_t algo;
  cudnnRNNMode_t got_mode;
  cudnnRNNBiasMode_t bias;
  cudnnDirectionMode_t dir;
  cudnnRNNInputMode_t input;
  cudnnDataType_t type, prec;
  cudnnMathType_t math;
  int32_t in = 0, hidden = 0, proj = 0, layers = 0;
  cudnnDropoutDescriptor_t named = nullptr;
  uint32_t aux = 0;
  DNN(cudnnGetRNNDescriptor_v8(rnn, &algo, &got_mode, &bias, &dir, &input, &type, &prec, &math, &in, &hidden, &proj,
                               &layers, &named, &aux));
  cudnnDataType_t dtype;
  cudnnRNNDataLayout_t layout;
  int max_seq = 0, batch = 0, vec = 0, lengths[B + 1] = {-7, -7, -7, -7};
  float got_fill = 5.f;
  DNN(cudnnGetRNNDataDescriptor(yd, &dtype, &layout, &max_seq, &batch, &vec, B + 1, lengths, &got_fill));
  // What NVIDIA's library answers, printed as it is (what vmcuda answers must be the same; the
  // test executor's fake is not compared here).
  std::printf("%s: read back: algo %d mode %d bias %d dir %d input %d type %d in %d hidden %d proj %d layers %d "
              "dropout named %s aux %u; data: type %d layout %d max_seq %d batch %d vec %d lengths %d %d %d %d "
              "fill %g [GPU only]\n",
              cell, int(algo), int(got_mode), int(bias), int(dir), int(input), int(type), in, hidden, proj, layers,
              named == dropout ? "yes" : "no", aux, int(dtype), int(layout), max_seq, batch, vec, lengths[0],
              lengths[1], lengths[2], lengths[3], double(got_fill));

  // The LSTM's cell clipping, set and read back.
  if (lstm) {
    DNN(cudnnRNNSetClip_v9(rnn, CUDNN_RNN_CLIP_MINMAX, -0.5, 0.75));
    cudnnRNNClipMode_t clip;
    double lo = 0, hi = 0;
    DNN(cudnnRNNGetClip_v9(rnn, &clip, &lo, &hi));
    std::printf("%s: clipping read back: mode %d, [%g, %g]\n", cell, int(clip), lo, hi);
  }

  for (void* p : {static_cast<void*>(x_), static_cast<void*>(hx_), static_cast<void*>(cx_), static_cast<void*>(y_),
                  static_cast<void*>(hy_), static_cast<void*>(cy_), static_cast<void*>(lengths_), work, reserve,
                  iwork_, static_cast<void*>(y2_), static_cast<void*>(dy_), static_cast<void*>(dhy_),
                  static_cast<void*>(dcy_), static_cast<void*>(dx_), static_cast<void*>(dhx_),
                  static_cast<void*>(dcx_), static_cast<void*>(dw), static_cast<void*>(w), states})
    CUDA(cudaFree(p));
  DNN(cudnnDestroyTensorDescriptor(md));
  DNN(cudnnDestroyTensorDescriptor(bd));
  DNN(cudnnDestroyTensorDescriptor(hd));
  DNN(cudnnDestroyTensorDescriptor(cd));
  DNN(cudnnDestroyRNNDataDescriptor(xd));
  DNN(cudnnDestroyRNNDataDescriptor(yd));
  DNN(cudnnDestroyRNNDescriptor(rnn));
  DNN(cudnnDestroyDropoutDescriptor(dropout));
}

}  // namespace

int main() {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  run(h, CUDNN_LSTM);
  run(h, CUDNN_GRU);
  DNN(cudnnDestroy(h));
  std::printf("cudnn_rnn: %s\n", all_ok ? "all passed" : "FAILED");
  return all_ok ? 0 : 1;
}
