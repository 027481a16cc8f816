// grpc_async_infer_proto: a prototype of ModelInfer on grpc++'s asynchronous completion-queue
// API, for comparing with the callback API that GrpcServer uses (docs/benchmarks.md, "gRPC
// (issue 4)"). Not a server: ModelInfer only, no cancellation, no TLS, no shutdown grace.
//
//   grpc_async_infer_proto --model-repository DIR --port N [--threads T]
//
// Loads the repository like `harrier serve`, then serves ModelInfer through the same
// GrpcInferenceHandler (decode, model, encode) with T threads (default 2) each draining one
// completion queue: a call is requested and decoded on a queue thread, runs on the model's
// worker, and is finished from the worker; the queue thread then frees it. Runs until killed.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/onnxruntime/onnxruntime_backend.h"
#include "core/status_mapping.h"
#include "lifecycle/model_repository_manager.h"
#include "protocol/grpc/grpc_inference_handler.h"
#include "protocol/grpc/grpc_service.grpc.pb.h"
#include "scheduler/admission_controller.h"

namespace {

using harrier::grpc_frontend::GrpcInferenceHandler;
using harrier::grpc_frontend::InferCallContext;
using Service = inference::GRPCInferenceService::AsyncService;

class Call {
 public:
  Call(Service* service, grpc::ServerCompletionQueue* cq, const GrpcInferenceHandler* handler)
      : service_(service), cq_(cq), handler_(handler), responder_(&context_) {
    service_->RequestModelInfer(&context_, &request_, &responder_, cq_, cq_, this);
  }

  // The queue delivered this call's tag: the call arrived (first time) or finished (second).
  void Proceed(bool ok) {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    new Call(service_, cq_, handler_);  // the next call of this queue
    finishing_ = true;
    InferCallContext call;
    call.received_at = std::chrono::steady_clock::now();
    handler_->ModelInfer(&request_, std::move(call), &response_, [this](harrier::Status s) {
      responder_.Finish(
          response_,
          s.ok() ? grpc::Status::OK
                 : grpc::Status(static_cast<grpc::StatusCode>(harrier::GrpcStatusCodeFor(s.code())),
                                s.message()),
          this);
    });
  }

 private:
  Service* const service_;
  grpc::ServerCompletionQueue* const cq_;
  const GrpcInferenceHandler* const handler_;
  grpc::ServerContext context_;
  inference::ModelInferRequest request_;
  inference::ModelInferResponse response_;
  grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder_;
  bool finishing_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  std::string repository;
  int port = 8001, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model-repository")
      repository = argv[i + 1];
    else if (a == "--port")
      port = std::atoi(argv[i + 1]);
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
  }
  if (repository.empty()) {
    std::fprintf(stderr, "usage: grpc_async_infer_proto --model-repository DIR --port N\n");
    return 2;
  }
  auto backend = harrier::OnnxRuntimeBackend::Create({});
  auto admission = harrier::AdmissionController::Create({});
  if (!backend.ok() || !admission.ok()) return 1;
  harrier::ModelRepositoryManager::Options manager_options;
  manager_options.repository_path = repository;
  harrier::BackendRegistry backends;
  backends.AddTensorBackend(backend->get());
  manager_options.backends = &backends;
  manager_options.admission = admission->get();
  auto manager = harrier::ModelRepositoryManager::Create(manager_options);
  if (!manager.ok()) return 1;
  (*manager)->LoadAll();
  GrpcInferenceHandler handler(manager->get(), {});

  Service service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int t = 0; t < threads; ++t) queues.push_back(builder.AddCompletionQueue());
  auto server = builder.BuildAndStart();
  if (!server) return 1;
  std::fprintf(stderr, "listening on gRPC 127.0.0.1:%d (async prototype)\n", port);
  std::vector<std::thread> pollers;
  for (auto& cq : queues) {
    pollers.emplace_back([&service, &handler, q = cq.get()] {
      new Call(&service, q, &handler);
      void* tag = nullptr;
      bool ok = false;
      while (q->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
    });
  }
  for (auto& t : pollers) t.join();
  return 0;
}
