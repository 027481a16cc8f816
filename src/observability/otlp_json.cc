#include "observability/otlp_json.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/json_writer.h"
#include "core/utf8.h"
#include "observability/trace_ids.h"

namespace harrier {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = RequestTrace::TimePoint;

// A JSON string for any bytes: AppendJsonString wants UTF-8, and a model name or an error
// message may carry anything a client sent; invalid UTF-8 has its non-ASCII bytes replaced by
// '?', so the body always parses.
void AppendText(std::string* out, std::string_view s) {
  if (IsValidUtf8(s)) {
    AppendJsonString(out, s);
    return;
  }
  std::string ascii(s);
  for (char& c : ascii)
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  AppendJsonString(out, ascii);
}

template <size_t N>
void AppendHexString(std::string* out, const std::array<uint8_t, N>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (uint8_t b : bytes) {
    out->push_back(kHex[b >> 4]);
    out->push_back(kHex[b & 0xF]);
  }
  out->push_back('"');
}

// int64 and fixed64 are strings in the protobuf JSON mapping.
void AppendQuotedInt(std::string* out, int64_t v) {
  out->push_back('"');
  AppendJsonNumber(out, v);
  out->push_back('"');
}

bool IsSet(TimePoint t) {
  return t != TimePoint{};
}

// AppendText of at most kMaxAttributeValueBytes of `value`, cut at a character and marked: a
// model name or an error message echoing a 64 KB request target made one span 64 KB, and a
// batch of them could pass a collector's request limit and lose every span in it. For string
// attributes and a span's status message alike (probe 79: the message was left whole).
void AppendBoundedText(std::string* out, std::string_view value) {
  if (value.size() <= kMaxAttributeValueBytes) {
    AppendText(out, value);
    return;
  }
  std::string cut(Utf8Prefix(value, kMaxAttributeValueBytes));
  cut += "...(truncated)";
  AppendText(out, cut);
}

// An attribute list being written: handles the commas.
class Attributes {
 public:
  explicit Attributes(std::string* out) : out_(out) { out_->append("\"attributes\":["); }
  ~Attributes() { out_->push_back(']'); }

  void String(std::string_view key, std::string_view value) {
    Key(key);
    out_->append("{\"stringValue\":");
    AppendBoundedText(out_, value);
    out_->append("}}");
  }
  void Int(std::string_view key, int64_t value) {
    Key(key);
    out_->append("{\"intValue\":");
    AppendQuotedInt(out_, value);
    out_->append("}}");
  }

 private:
  void Key(std::string_view key) {
    if (!first_) out_->push_back(',');
    first_ = false;
    out_->append("{\"key\":");
    AppendJsonString(out_, key);
    out_->append(",\"value\":");
  }
  std::string* out_;
  bool first_ = true;
};

constexpr int kSpanKindInternal = 1;
constexpr int kSpanKindServer = 2;
constexpr int kStatusCodeError = 2;

// The stage spans of a record, in the order they are written. Index kInfer's parent is kBatch.
// A tensor inference has batch and infer, a generation prompt and generate.
enum StageIndex {
  kReceive,
  kDecode,
  kQueue,
  kBatch,
  kInfer,
  kPrompt,
  kGenerate,
  kEncode,
  kSend,
  kStageCount
};
struct Stage {
  std::string_view name;
  TimePoint start;
  TimePoint end;
  bool emitted() const { return IsSet(start) && IsSet(end); }
};

std::array<Stage, kStageCount> Stages(const RequestTrace& t) {
  // A request that failed before running has no batch_end; its encode (of the error) starts
  // when it was decoded, or when its body was in.
  // A generation's answer is encoded after its last token.
  const TimePoint encode_start = IsSet(t.batch_end)    ? t.batch_end
                                 : IsSet(t.last_token) ? t.last_token
                                 : IsSet(t.decoded)    ? t.decoded
                                                       : t.body_received;
  return {{
      {"receive", t.received, t.body_received},
      {"decode", t.body_received, t.decoded},
      {"queue", t.decoded, IsSet(t.batch_start) ? t.batch_start : t.prompt_start},
      {"batch", t.batch_start, t.batch_end},
      {"infer", t.infer_start, t.infer_end},
      {"prompt", t.prompt_start, t.first_token},
      {"generate", t.first_token, t.last_token},
      {"encode", encode_start, t.encoded},
      {"send", t.encoded, t.sent},
  }};
}

}  // namespace

size_t CountSpans(const RequestTrace& t) {
  size_t n = 1;  // the server span is always written
  for (const Stage& s : Stages(t)) n += s.emitted() ? 1 : 0;
  return n;
}

namespace {

bool SameSpan(const SpanContext& a, const SpanContext& b) {
  return a.trace_id == b.trace_id && a.span_id == b.span_id;
}

bool IsGrpcServerError(int code) {
  switch (code) {
    case 2:   // UNKNOWN
    case 4:   // DEADLINE_EXCEEDED
    case 12:  // UNIMPLEMENTED
    case 13:  // INTERNAL
    case 14:  // UNAVAILABLE
    case 15:  // DATA_LOSS
      return true;
    default: return false;
  }
}

class SpanJson {
 public:
  SpanJson(std::string* out, int64_t steady_to_unix_ns)
      : out_(out), steady_to_unix_ns_(steady_to_unix_ns) {}

  // Writes the common head of a span, up to and including `"endTimeUnixNano":"..."`.
  void Head(const std::array<uint8_t, 16>& trace_id, const std::array<uint8_t, 8>& span_id,
            const std::array<uint8_t, 8>* parent_span_id, std::string_view trace_state,
            std::string_view name, int kind, TimePoint start, TimePoint end) {
    if (!first_) out_->push_back(',');
    first_ = false;
    out_->append("{\"traceId\":");
    AppendHexString(out_, trace_id);
    out_->append(",\"spanId\":");
    AppendHexString(out_, span_id);
    if (parent_span_id != nullptr) {
      out_->append(",\"parentSpanId\":");
      AppendHexString(out_, *parent_span_id);
    }
    if (!trace_state.empty()) {
      out_->append(",\"traceState\":");
      AppendText(out_, trace_state);
    }
    out_->append(",\"name\":");
    AppendText(out_, name);
    out_->append(",\"kind\":");
    AppendJsonNumber(out_, kind);
    out_->append(",\"startTimeUnixNano\":");
    AppendQuotedInt(out_, UnixNanos(start));
    out_->append(",\"endTimeUnixNano\":");
    AppendQuotedInt(out_, UnixNanos(end));
  }

  int64_t UnixNanos(TimePoint t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() +
           steady_to_unix_ns_;
  }

 private:
  std::string* out_;
  int64_t steady_to_unix_ns_;
  bool first_ = true;
};

void AppendServerAttributes(const RequestTrace& t, std::string* out) {
  Attributes a(out);
  if (t.protocol == "grpc") {
    a.String("rpc.system", "grpc");
    a.String("rpc.service", "inference.GRPCInferenceService");
    a.String("rpc.method", t.name);
    a.Int("rpc.grpc.status_code", t.status);
  } else {
    const size_t space = t.name.find(' ');
    a.String("http.request.method", space == std::string::npos
                                        ? std::string_view("POST")
                                        : std::string_view(t.name).substr(0, space));
    // The route the span is named by: "POST /v2/models/{model}/infer" -> its template.
    if (space != std::string::npos)
      a.String("http.route", std::string_view(t.name).substr(space + 1));
    a.String("url.path", std::string_view(t.target).substr(0, t.target.find('?')));
    a.Int("http.response.status_code", t.status);
    a.String("url.scheme", t.tls_version.empty() ? "http" : "https");
    a.String("network.protocol.name", "http");
    if (t.transport == "HTTP/1.1") {
      a.String("network.protocol.version", "1.1");
    } else if (t.transport == "HTTP/2") {
      a.String("network.protocol.version", "2");
    }
  }
  // OpenTelemetry's TLS conventions: "tls" and the bare version ("1.3"), from "TLSv1.3".
  if (std::string_view tls = t.tls_version; !tls.empty()) {
    a.String("tls.protocol.name", "tls");
    a.String("tls.protocol.version", tls.substr(tls.starts_with("TLSv") ? 4 : 0));
  }
  a.String("harrier.request_id", t.request_id);
  if (!t.client_request_id.empty()) a.String("harrier.client_request_id", t.client_request_id);
  if (!t.key_id.empty()) a.String("harrier.auth.key_id", t.key_id);
  if (!t.model.empty()) a.String("harrier.model", t.model);
  if (t.model_version > 0) a.Int("harrier.model_version", t.model_version);
  a.Int("harrier.request_bytes", static_cast<int64_t>(t.request_bytes));
  a.Int("harrier.response_bytes", static_cast<int64_t>(t.response_bytes));
  if (t.prompt_tokens >= 0) {
    // OpenTelemetry's semantic conventions for generative AI.
    a.Int("gen_ai.usage.input_tokens", t.prompt_tokens);
    a.Int("gen_ai.usage.output_tokens", t.completion_tokens);
    a.Int("harrier.generation.reused_prompt_tokens", t.reused_prompt_tokens);
  }
  if (!t.error.empty()) a.String("harrier.error", t.error);
}

void AppendRecord(const RequestTrace& t, SpanJson* spans, std::string* out) {
  const auto stages = Stages(t);

  // The server span covers the request; a record missing its ends uses its stages'.
  TimePoint start = t.received;
  TimePoint end = t.sent;
  if (!IsSet(start) || !IsSet(end)) {
    TimePoint earliest = TimePoint::max();
    TimePoint latest = TimePoint::min();
    for (TimePoint p :
         {t.received, t.body_received, t.decoded, t.batch_start, t.infer_start, t.infer_end,
          t.batch_end, t.prompt_start, t.first_token, t.last_token, t.encoded, t.sent}) {
      if (!IsSet(p)) continue;
      earliest = std::min(earliest, p);
      latest = std::max(latest, p);
    }
    if (earliest == TimePoint::max()) earliest = latest = Clock::now();  // no stage at all
    if (!IsSet(start)) start = earliest;
    if (!IsSet(end)) end = latest;
  }

  spans->Head(t.server.trace_id, t.server.span_id, t.parent.valid() ? &t.parent.span_id : nullptr,
              t.tracestate, t.name, kSpanKindServer, start, end);
  out->push_back(',');
  AppendServerAttributes(t, out);
  const bool server_error = t.protocol == "grpc" ? IsGrpcServerError(t.status) : t.status >= 500;
  if (!t.error.empty() && server_error) {
    out->append(",\"status\":{\"code\":");
    AppendJsonNumber(out, kStatusCodeError);
    out->append(",\"message\":");
    AppendBoundedText(out, t.error);
    out->push_back('}');
  }
  out->push_back('}');

  std::array<uint8_t, 8> batch_span_id{};
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    if (!s.emitted()) continue;
    const auto id = NewSpanId();
    const bool under_batch = i == kInfer && stages[kBatch].emitted();
    spans->Head(t.server.trace_id, id, under_batch ? &batch_span_id : &t.server.span_id, {}, s.name,
                kSpanKindInternal, s.start, s.end);
    if (i == kBatch) {
      batch_span_id = id;
      out->push_back(',');
      {
        Attributes a(out);
        a.Int("harrier.batch.size", t.batch_size);
        a.Int("harrier.batch.requests", static_cast<int64_t>(t.batch_requests));
      }
      out->append(",\"links\":[");
      bool first = true;
      if (t.batch_peers) {
        for (const SpanContext& peer : *t.batch_peers) {
          if (SameSpan(peer, t.server) || !peer.valid()) continue;
          if (!first) out->push_back(',');
          first = false;
          out->append("{\"traceId\":");
          AppendHexString(out, peer.trace_id);
          out->append(",\"spanId\":");
          AppendHexString(out, peer.span_id);
          out->push_back('}');
        }
      }
      out->push_back(']');
    }
    out->push_back('}');
  }
}

}  // namespace

const std::string& DefaultInstanceId() {
  static const std::string id = [] {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
    return std::string(host) + "-" + std::to_string(getpid());
  }();
  return id;
}

std::string OtlpTraceJson(std::span<const RequestTrace> traces, const OtlpTracer::Options& resource,
                          int64_t steady_to_unix_ns) {
  std::string out;
  out.reserve(512 + traces.size() * 3000);
  out.append("{\"resourceSpans\":[{\"resource\":{");
  {
    Attributes a(&out);
    a.String("service.name", resource.service_name);
    a.String("service.version", resource.service_version);
    a.String("service.instance.id", resource.service_instance_id.empty()
                                        ? DefaultInstanceId()
                                        : resource.service_instance_id);
    a.String("telemetry.sdk.name", "harrier");
    a.String("telemetry.sdk.language", "cpp");
  }
  out.append("},\"scopeSpans\":[{\"scope\":{\"name\":\"harrier\",\"version\":");
  AppendText(&out, resource.service_version);
  out.append("},\"spans\":[");
  SpanJson spans(&out, steady_to_unix_ns);
  for (const RequestTrace& t : traces) AppendRecord(t, &spans, &out);
  out.append("]}]}]}");
  return out;
}

}  // namespace harrier
