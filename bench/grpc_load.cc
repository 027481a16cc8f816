// grpc_load: a closed-loop load generator for Harrier's gRPC ModelInfer (the gRPC counterpart
// of wrk with bench/../shared/peers/post.lua), for docs/benchmarks.md.
//
//   grpc_load --target 127.0.0.1:8001 --model tiny --input INPUT0:FP32:1x16
//             --connections 16 --streams 1 --duration 10 --warmup 2   (one command line)
//
// Opens --connections HTTP/2 connections (one channel each, never shared) and keeps --streams
// ModelInfer calls outstanding on each: as soon as one answers, the next is sent (grpc++'s
// callback client API, so no thread per call). Each input is filled with a fixed pseudo-random
// pattern and sent in raw_input_contents, as Triton's clients and perf_analyzer send it. After
// --warmup seconds it measures for --duration seconds and prints one line in wrk's RESULT form:
//   RESULT requests=N errors=N rps=X p50_us=N p90_us=N p99_us=N
// A plain program, not a Google Benchmark.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harrier/data_type.h"
#include "protocol/grpc/grpc_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string target = "127.0.0.1:8001";
  std::string model = "tiny";
  std::vector<std::string> inputs;  // NAME:DTYPE:DxDxD
  int connections = 1;
  int streams = 1;
  double duration_s = 10;
  double warmup_s = 2;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "grpc_load: %s\nusage: grpc_load --target HOST:PORT --model NAME "
               "--input NAME:DTYPE:1x16 [--input ...] [--connections C] [--streams S] "
               "[--duration SECS] [--warmup SECS]\n",
               why);
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--target")
      f.target = v;
    else if (a == "--model")
      f.model = v;
    else if (a == "--input")
      f.inputs.push_back(v);
    else if (a == "--connections")
      f.connections = std::atoi(v.c_str());
    else if (a == "--streams")
      f.streams = std::atoi(v.c_str());
    else if (a == "--duration")
      f.duration_s = std::atof(v.c_str());
    else if (a == "--warmup")
      f.warmup_s = std::atof(v.c_str());
    else
      Usage(("unknown flag " + a).c_str());
  }
  if (f.inputs.empty()) Usage("at least one --input is needed");
  if (f.connections < 1 || f.streams < 1) Usage("--connections and --streams must be >= 1");
  return f;
}

inference::ModelInferRequest BuildRequest(const Flags& f) {
  inference::ModelInferRequest r;
  r.set_model_name(f.model);
  uint32_t seed = 12345;
  for (const std::string& spec : f.inputs) {
    const size_t c1 = spec.find(':'), c2 = spec.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) Usage("--input is NAME:DTYPE:SHAPE");
    auto* in = r.add_inputs();
    in->set_name(spec.substr(0, c1));
    in->set_datatype(spec.substr(c1 + 1, c2 - c1 - 1));
    const auto dtype = harrier::DataTypeFromName(in->datatype());
    if (!dtype || harrier::DataTypeByteSize(*dtype) == 0) Usage("unsupported --input datatype");
    int64_t elements = 1;
    std::string shape = spec.substr(c2 + 1);
    for (size_t at = 0; at <= shape.size();) {
      size_t x = shape.find('x', at);
      if (x == std::string::npos) x = shape.size();
      const int64_t d = std::atoll(shape.substr(at, x - at).c_str());
      in->add_shape(d);
      elements *= d;
      at = x + 1;
    }
    std::string bytes(static_cast<size_t>(elements) * harrier::DataTypeByteSize(*dtype), '\0');
    if (*dtype == harrier::DataType::kFp32) {  // small finite values
      for (int64_t i = 0; i < elements; ++i) {
        seed = seed * 1664525u + 1013904223u;
        const float v = static_cast<float>(seed >> 8) / static_cast<float>(1 << 24) - 0.5f;
        std::memcpy(bytes.data() + i * 4, &v, 4);
      }
    } else {
      for (char& b : bytes) b = static_cast<char>((seed = seed * 1664525u + 1013904223u) >> 24);
    }
    r.add_raw_input_contents(std::move(bytes));
  }
  return r;
}

// Shared by every caller.
struct Run {
  Clock::time_point measure_from, measure_until;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable all_done;
  int running = 0;  // guarded by mu
};

// One outstanding call slot: sends, waits, records, sends again.
class Caller {
 public:
  Caller(inference::GRPCInferenceService::Stub* stub, const inference::ModelInferRequest* request,
         Run* run)
      : stub_(stub), request_(request), run_(run) {}

  void Start() { Send(); }

  std::vector<uint32_t> latencies_us;
  uint64_t errors = 0;
  std::string first_error;

 private:
  void Send() {
    context_ = std::make_unique<grpc::ClientContext>();
    response_.Clear();
    sent_at_ = Clock::now();
    stub_->async()->ModelInfer(context_.get(), request_, &response_,
                               [this](grpc::Status status) { OnDone(status); });
  }

  void OnDone(const grpc::Status& status) {
    const auto now = Clock::now();
    if (sent_at_ >= run_->measure_from && now <= run_->measure_until) {
      if (status.ok()) {
        latencies_us.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now - sent_at_).count()));
      } else {
        if (errors++ == 0) first_error = status.error_message();
      }
    }
    if (now < run_->measure_until && !run_->stop.load()) return Send();
    std::lock_guard lock(run_->mu);
    if (--run_->running == 0) run_->all_done.notify_all();
  }

  inference::GRPCInferenceService::Stub* const stub_;
  const inference::ModelInferRequest* const request_;
  Run* const run_;
  std::unique_ptr<grpc::ClientContext> context_;
  inference::ModelInferResponse response_;
  Clock::time_point sent_at_;
};

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const inference::ModelInferRequest request = BuildRequest(flags);

  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs;
  for (int c = 0; c < flags.connections; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetInt("harrier.bench_connection", c);
    args.SetMaxReceiveMessageSize(-1);
    stubs.push_back(inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(flags.target, grpc::InsecureChannelCredentials(), args)));
  }
  {  // one checked call first: a wrong setup is reported, not measured
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status s = stubs[0]->ModelInfer(&context, request, &response);
    if (!s.ok()) {
      std::fprintf(stderr, "grpc_load: the first call failed: %s\n", s.error_message().c_str());
      return 1;
    }
  }

  Run run;
  const auto start = Clock::now();
  const auto to_duration = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  run.measure_from = start + to_duration(flags.warmup_s);
  run.measure_until = run.measure_from + to_duration(flags.duration_s);
  std::vector<std::unique_ptr<Caller>> callers;
  for (auto& stub : stubs)
    for (int s = 0; s < flags.streams; ++s)
      callers.push_back(std::make_unique<Caller>(stub.get(), &request, &run));
  run.running = static_cast<int>(callers.size());
  for (auto& c : callers) c->Start();
  {
    std::unique_lock lock(run.mu);
    run.all_done.wait(lock, [&] { return run.running == 0; });
  }

  std::vector<uint32_t> all;
  uint64_t errors = 0;
  std::string first_error;
  for (const auto& c : callers) {
    all.insert(all.end(), c->latencies_us.begin(), c->latencies_us.end());
    errors += c->errors;
    if (first_error.empty()) first_error = c->first_error;
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0u : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf("RESULT requests=%zu errors=%llu rps=%.1f p50_us=%u p90_us=%u p99_us=%u\n",
              all.size(), static_cast<unsigned long long>(errors),
              static_cast<double>(all.size()) / flags.duration_s, pct(0.50), pct(0.90), pct(0.99));
  if (errors) std::fprintf(stderr, "grpc_load: first error: %s\n", first_error.c_str());
  return 0;
}
