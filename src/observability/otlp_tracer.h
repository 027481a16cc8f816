// OtlpTracer: the Tracer (include/harrier/trace.h) behind `--trace-endpoint`. It samples
// (parent-based, else a ratio of trace ids: observability/trace_sampler.h), queues finished
// RequestTraces in a bounded queue and exports them from its own thread as OTLP/HTTP JSON
// (ExportTraceServiceRequest) POSTed with libcurl, in batches, every export interval or as soon
// as a batch is full. A request's record becomes eight spans: the server span and its children
// receive, decode, queue, batch (with links to the other traced requests of its batch), infer
// (child of batch), encode and send; a stage the request never reached has no span.
// docs/tracing.md has the span and attribute reference.
//
// Cost on the request path: Start() is a few loads and a thread-local random number; Submit()
// moves the record into the queue under a mutex (traced requests only). Spans are built and
// serialised on the export thread. When the queue is full, or an export fails after its retries,
// the spans are dropped and counted (AppendMetrics).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/status.h"
#include "harrier/trace.h"
#include "observability/text_exposition.h"

namespace harrier {

// `url` for a log line: a password in it (http://user:secret@collector) replaced by REDACTED.
std::string RedactedUrl(const std::string& url);

// Thread safety: Start, Submit, Flush and AppendMetrics may be called from any thread.
class OtlpTracer : public Tracer {
 public:
  static constexpr std::chrono::milliseconds kMaxExportInterval{3'600'000};  // an hour
  static constexpr size_t kMaxQueue = size_t{1} << 20;

  struct Options {
    // The OTLP/HTTP traces URL: http://host:4318/v1/traces. A URL with no path (or "/") gets
    // "/v1/traces" appended, as OTEL_EXPORTER_OTLP_ENDPOINT does. http and https.
    std::string endpoint;
    // The share of requests without a valid traceparent that are traced, 0..1.
    double sample_ratio = 0.01;
    // Traced requests waiting for export (1..kMaxQueue); a request submitted to a full queue is
    // dropped.
    size_t max_queue = 2048;
    // Requests per export (8 spans each at most).
    size_t max_export_batch = 256;
    // Each at most kMaxExportInterval.
    std::chrono::milliseconds export_interval{1000};
    std::chrono::milliseconds export_timeout{10000};
    // Resource attributes: service.name, service.version, service.instance.id (empty: the host
    // name and pid).
    std::string service_name = "harrier";
    std::string service_version;
    std::string service_instance_id;
    // Tests: replaces the HTTP POST. Returns whether the receiver accepted the body; false is
    // handled like a connection failure (retried with backoff within export_timeout). Called on
    // the export thread only.
    std::function<bool(const std::string& json_body)> post;
  };

  // An invalid endpoint or ratio is kInvalidArgument. Starts the export thread.
  static StatusOr<std::unique_ptr<OtlpTracer>> Create(Options options);
  // Stops: exports what is queued (within export_timeout), then joins the thread.
  ~OtlpTracer() override;

  std::optional<SpanContext> Start(const std::optional<SpanContext>& parent) override;
  void Submit(RequestTrace trace) override;

  // Exports everything submitted so far and waits for it, at most `timeout`. For shutdown and
  // tests. Returns false on timeout.
  bool Flush(std::chrono::milliseconds timeout);

  // harrier_trace_spans_exported_total, harrier_trace_spans_dropped_total{reason="queue_full"|
  // "export_failed"}, harrier_trace_export_requests_total{result="ok"|"failed"} (one per batch,
  // by its final outcome after retries). Every label is always present.
  void AppendMetrics(TextExposition* out) const;

 private:
  class Impl;
  explicit OtlpTracer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace harrier
