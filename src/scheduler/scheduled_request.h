// ScheduledRequest: one validated inference request on its way through a ModelScheduler — the
// request, the outputs to compute, the callback that answers it, and what the scheduler derives
// from it at Submit() (priority level, deadlines, batch size, queue sequence number).
//
// Ownership: the scheduler owns it from Submit() until it hands it back through
// ModelScheduler::Options::on_complete, exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "harrier/clock.h"
#include "harrier/inference_request.h"
#include "scheduler/admission_controller.h"

namespace harrier {

struct ScheduledRequest {
  // --- Set by the caller ---------------------------------------------------------------------
  std::unique_ptr<InferenceRequest> request;  // validated (ValidateAndPrepare)
  std::vector<std::string> output_names;      // in response order, unless all_outputs is set
  // Set when the request asks for every output: the model's own list of them, in its order, which
  // outlives the request (LoadedModel's), so that the usual request copies no names (issue 10).
  // output_names is empty then.
  const std::vector<std::string>* all_outputs = nullptr;
  InferCallback done;             // called by the owner of on_complete, not here
  uint64_t compute_input_ns = 0;  // validation time before Submit(), for statistics
  // Admission (scheduler/admission_controller.h): held until the request is answered;
  // empty when the model has no admission control.
  AdmissionTicket ticket;

  // --- Set by the scheduler ------------------------------------------------------------------
  uint64_t seq = 0;        // arrival order, unique per scheduler
  size_t level = 0;        // 0-based index into the priority levels, 0 = most urgent
  int64_t batch_size = 1;  // items this request adds to a batch (its leading dim when batching)
  Clock::time_point enqueued_at{};
  // Hard deadline: the transport's deadline and, when the queue policy allows it, the request's
  // own timeout. Past it the request is answered kDeadlineExceeded.
  Clock::time_point deadline = Clock::time_point::max();
  // The queue policy's timeout: REJECT answers kDeadlineExceeded, DELAY moves it behind the
  // requests of its level that have not timed out.
  Clock::time_point policy_timeout = Clock::time_point::max();
  bool delay_on_timeout = false;
  uint64_t cancel_callback_id = 0;  // registered on request->cancellation; 0 = none
  uint64_t order = 0;               // answer position under preserve_ordering; 0 = answer at once

  // From a pool (issue 10): one is made per request and freed on a worker, so in a steady state
  // it costs no allocation. The pool keeps at most 256 free ones (model_scheduler.cc).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  // The outputs to compute, in response order.
  std::span<const std::string> outputs_to_compute() const {
    if (all_outputs != nullptr) return *all_outputs;
    return output_names;
  }
};

// What happened to one request, reported with its result.
struct RequestTiming {
  uint64_t queue_ns = 0;            // enqueue to the start of its execution (or to its answer)
  uint64_t compute_input_ns = 0;    // the batch's input gathering
  uint64_t compute_infer_ns = 0;    // the batch's model run
  int64_t executed_batch_size = 0;  // items in the batch it ran in; 0 when it never ran
  // For tracing (InferenceTiming): when its execution started, its engine run started and ended,
  // and the requests in that execution. Zero when it never ran.
  Clock::time_point batch_start{};
  Clock::time_point infer_start{};
  Clock::time_point infer_end{};
  size_t batch_requests = 0;
  // The server spans of every traced request of the execution (this one's included), one vector
  // shared by them; null when the request is untraced or the only traced one.
  std::shared_ptr<const std::vector<SpanContext>> batch_peers;
};

// One model execution, for Triton's batch_stats and execution_count.
struct BatchTiming {
  int64_t batch_size = 0;  // items (sum of the requests' batch sizes)
  size_t request_count = 0;
  size_t instance = 0;  // the index of the instance that ran it
  bool ok = false;
  uint64_t compute_input_ns = 0;   // gathering inputs into the batch
  uint64_t compute_infer_ns = 0;   // the model run
  uint64_t compute_output_ns = 0;  // splitting outputs and answering every request (0 before)
};

}  // namespace harrier
