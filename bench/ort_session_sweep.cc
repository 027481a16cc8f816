// ort_session_sweep: compares ONNX Runtime session settings through Harrier's own backend
// (OnnxRuntimeBackend / ModelInstance::Run, the code path the server uses), for choosing the
// backend's defaults. Not a Google Benchmark: what matters here is p50/p99 and the CPU burnt,
// side by side for several settings in one run on a noisy machine.
//
// usage: ort_session_sweep MODEL.onnx [--runs N] [--warmup W] [--batch B] [--gap-us G]
// Every input must be FP32; each free dim becomes B for the first dim and 1 elsewhere.
// --gap-us sleeps between runs (a server that is not saturated): idle pool threads then either
// spin (burning CPU the I/O threads want) or sleep (and must be woken for the next run).
// Prints one line per setting: latency percentiles (µs) and CPU time per run (µs), where CPU
// time above the latency means other threads (ORT's pool) were busy, spinning or working.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/onnxruntime/onnxruntime_backend.h"
#include "harrier/tensor.h"

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Setting {
  const char* label;
  int intra;
  bool parallel;
  const char* spin;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [--runs N] [--warmup W] [--batch B] [--gap-us G]\n",
                 argv[0]);
    return 2;
  }
  const std::string model = argv[1];
  int runs = 200, warmup = 20, gap_us = 0;
  int64_t batch = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (k == "--runs")
      runs = static_cast<int>(v);
    else if (k == "--warmup")
      warmup = static_cast<int>(v);
    else if (k == "--batch")
      batch = v;
    else if (k == "--gap-us")
      gap_us = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }

  auto backend = harrier::OnnxRuntimeBackend::Create({});
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 1;
  }
  auto sig = (*backend)->Inspect(model);
  if (!sig.ok()) {
    std::fprintf(stderr, "%s\n", sig.status().ToString().c_str());
    return 1;
  }

  std::vector<harrier::Tensor> inputs;
  std::vector<std::shared_ptr<std::byte[]>> buffers;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd;
  for (const auto& spec : sig->inputs) {
    if (spec.dtype != harrier::DataType::kFp32) {
      std::fprintf(stderr, "input %s is not FP32\n", spec.name.c_str());
      return 2;
    }
    harrier::Tensor t;
    t.name = spec.name;
    t.dtype = spec.dtype;
    t.shape = spec.dims;
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (t.shape[d] < 0) t.shape[d] = d == 0 ? batch : 1;
    const auto n = static_cast<size_t>(*harrier::ElementCount(t.shape));
    buffers.push_back(harrier::AllocateTensorBuffer(n * sizeof(float)));
    auto* f = reinterpret_cast<float*>(buffers.back().get());
    for (size_t i = 0; i < n; ++i) f[i] = nd(rng);
    t.data = buffers.back().get();
    t.size_bytes = n * sizeof(float);
    inputs.push_back(std::move(t));
  }
  std::vector<std::string> output_names;
  for (const auto& spec : sig->outputs) output_names.push_back(spec.name);

  const Setting settings[] = {
      {"intra1 seq", 1, false, "0"},        {"intra2 seq spin=0", 2, false, "0"},
      {"intra2 seq spin=1", 2, false, "1"}, {"intra2 par2 spin=0", 2, true, "0"},
      {"intra2 par2 spin=1", 2, true, "1"},
  };
  std::printf("model=%s batch=%lld runs=%d gap_us=%d\n", model.c_str(),
              static_cast<long long>(batch), runs, gap_us);
  for (const auto& s : settings) {
    harrier::InstanceOptions options;
    options.intra_op_threads = s.intra;
    options.parallel_execution = s.parallel;
    options.inter_op_threads = s.parallel ? 2 : 1;
    options.parameters["session.intra_op.allow_spinning"] = s.spin;
    options.parameters["session.inter_op.allow_spinning"] = s.spin;
    auto instance = (*backend)->CreateInstance(model, options);
    if (!instance.ok()) {
      std::fprintf(stderr, "%s\n", instance.status().ToString().c_str());
      return 1;
    }
    std::vector<harrier::Tensor> outputs;
    auto run = [&] {
      harrier::Status st = (*instance)->Run(inputs, output_names, &outputs, {});
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.ToString().c_str());
        std::exit(1);
      }
    };
    for (int i = 0; i < warmup; ++i) run();
    std::vector<double> us(runs);
    const double cpu0 = CpuSeconds();
    const auto wall0 = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) {
      if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      const auto t0 = std::chrono::steady_clock::now();
      run();
      us[i] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    const double cpu = CpuSeconds() - cpu0;
    std::sort(us.begin(), us.end());
    auto pct = [&](double p) {
      return us[std::min<size_t>(us.size() - 1, static_cast<size_t>(p * us.size()))];
    };
    std::printf(
        "%-20s p50_us=%9.1f p90_us=%9.1f p99_us=%9.1f  cpu_per_run_us=%9.1f  cores_busy=%.2f\n",
        s.label, pct(0.5), pct(0.9), pct(0.99), cpu * 1e6 / runs, cpu / wall);
  }
  return 0;
}
