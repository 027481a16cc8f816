#include "observability/access_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>
#include <utility>

#include "core/json_writer.h"
#include "core/utf8.h"
#include "observability/text_exposition.h"

namespace harrier {
namespace {

uint64_t Us(uint64_t ns) {
  return (ns + 500) / 1000;
}

// `v` when it is valid UTF-8; otherwise a copy in `scratch` with every non-ASCII byte replaced
// by '?' (a percent-decoded model name in an error, a target sent with raw bytes): a log line
// is always valid UTF-8, and valid JSON.
std::string_view Utf8OrAscii(std::string_view v, std::string* scratch) {
  if (IsValidUtf8(v)) return v;
  scratch->assign(v);
  for (char& c : *scratch)
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  return *scratch;
}

// The length of a character at `at` of valid UTF-8 `v` that a log line must not hold raw, or 0:
// a C0 control or DEL (one byte), a C1 control (U+0080-U+009F: NEL ends a line for some tools,
// CSI starts a terminal escape), U+2028 or U+2029 (line and paragraph separators).
size_t UnsafeInLog(std::string_view v, size_t at) {
  const auto c = static_cast<unsigned char>(v[at]);
  if (c < 0x20 || c == 0x7f) return 1;
  if (c == 0xc2 && at + 1 < v.size() && static_cast<unsigned char>(v[at + 1]) < 0xa0) return 2;
  if (c == 0xe2 && at + 2 < v.size() && static_cast<unsigned char>(v[at + 1]) == 0x80 &&
      (static_cast<unsigned char>(v[at + 2]) == 0xa8 ||
       static_cast<unsigned char>(v[at + 2]) == 0xa9)) {
    return 3;
  }
  return 0;
}

// How AppendLogEscaped writes `v`.
enum class LogEscape {
  kJsonString,  // a JSON string: quoted, quotes and backslashes escaped too
  kJsonText,    // JSON text already, whose unsafe characters can only be inside its strings
                // (JSON's own syntax is ASCII), where the escape means the same
  kText,        // plain text: backslashes doubled too, so that each escape reads one way back
};

// Valid UTF-8 `v` in which the characters UnsafeInLog names are escaped as \uXXXX (\n, \r, \t
// for those three): a log line holds none of them raw, in any format.
void AppendLogEscaped(std::string* out, std::string_view v, LogEscape how) {
  const bool quoted = how == LogEscape::kJsonString;
  static constexpr char kHex[] = "0123456789abcdef";
  auto escape = [out](unsigned cp) {
    const char e[6] = {
        '\\',          'u', kHex[(cp >> 12) & 0xF], kHex[(cp >> 8) & 0xF], kHex[(cp >> 4) & 0xF],
        kHex[cp & 0xF]};
    out->append(e, 6);
  };
  if (quoted) out->push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    const size_t n = UnsafeInLog(v, i);
    const bool special = n != 0 || (c == '\\' && how != LogEscape::kJsonText) ||
                         (c == '"' && how == LogEscape::kJsonString);
    if (!special) {
      ++i;
      continue;
    }
    out->append(v.data() + run, i - run);
    if (c == '"') {
      out->append("\\\"");
    } else if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (n == 1) {
      escape(c);
    } else if (n == 2) {
      escape(static_cast<unsigned char>(v[i + 1]));  // U+0080-U+009F: C2 80-9F
    } else {
      escape(0x2000u | (static_cast<unsigned char>(v[i + 2]) - 0x80u));  // U+2028, U+2029
    }
    i += n == 0 ? 1 : n;
    run = i;
  }
  out->append(v.data() + run, v.size() - run);
  if (quoted) out->push_back('"');
}

void AppendLogString(std::string* out, std::string_view v) {
  AppendLogEscaped(out, v, LogEscape::kJsonString);
}

// A JSON value (the decoded inputs' array, whose names the client chose) with the characters
// UnsafeInLog names escaped (probe 52: DEL, NEL, CSI and U+2028 went into the line raw).
void AppendLogJson(std::string* out, std::string_view json) {
  std::string scratch;
  AppendLogEscaped(out, Utf8OrAscii(json, &scratch), LogEscape::kJsonText);
}

void AppendTextValue(std::string* out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" \"\\") != std::string_view::npos;
  for (size_t i = 0; !quote && i < v.size(); ++i) quote = UnsafeInLog(v, i) != 0;
  if (quote) {
    AppendLogString(out, v);
  } else {
    out->append(v);
  }
}

// The fields shared by both formats, written through `field` callbacks.
template <typename StringField, typename NumberField, typename RawField>
void VisitFields(const AccessRecord& r, StringField str, NumberField num, RawField raw) {
  str("request_id", r.request_id);
  if (!r.client_request_id.empty()) str("client_request_id", r.client_request_id);
  str("protocol", r.protocol);
  if (r.http_version != HttpVersion::kUnknown) str("http_version", HttpVersionName(r.http_version));
  if (!r.tls_version.empty()) str("tls", r.tls_version);
  str("method", r.method);
  str("target", r.target);
  num("status", static_cast<uint64_t>(r.status < 0 ? 0 : r.status));
  if (!r.key_id.empty()) str("key", r.key_id);
  if (!r.model.empty()) str("model", r.model);
  // Versions are >= 1; 0 is "no version chosen" (a gRPC call's model that does not exist).
  if (!r.model.empty() && r.model_version > 0)
    num("version", static_cast<uint64_t>(r.model_version));
  if (!r.input_shapes_json.empty()) raw("inputs", r.input_shapes_json);
  num("request_bytes", r.request_bytes);
  num("response_bytes", r.response_bytes);
  if (r.prompt_tokens >= 0) {
    num("prompt_tokens", static_cast<uint64_t>(r.prompt_tokens));
    num("completion_tokens", static_cast<uint64_t>(std::max<int64_t>(0, r.completion_tokens)));
    if (r.first_token_ns != 0) num("ttft_us", Us(r.first_token_ns));
    if (r.total_ns != 0) num("total_us", Us(r.total_ns));
  } else if (r.total_ns != 0) {
    num("queue_us", Us(r.timing.queue_ns));
    num("input_us", Us(r.timing.compute_input_ns));
    num("infer_us", Us(r.timing.compute_infer_ns));
    num("output_us", Us(r.output_ns));
    num("total_us", Us(r.total_ns));
  }
  if (!r.error.empty()) str("error", r.error);
}

// `value` as exactly `width` decimal digits (the low ones), zero-padded.
void AppendDigits(std::string* out, int64_t value, int width) {
  char digits[8];
  for (int i = width - 1; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  out->append(digits, static_cast<size_t>(width));
}

// "2026-11-29T19:40:01.123456" (UTC) of `now`, with `separator` between date and time and
// `fraction_digits` (3 or 6) of the second; the calendar part is computed once per second per
// thread.
void AppendUtcTime(std::chrono::system_clock::time_point now, char separator, int fraction_digits,
                   std::string* out) {
  thread_local int64_t cached_second = -1;
  thread_local std::tm tm{};
  const int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const int64_t second = us / 1'000'000;
  if (second != cached_second) {
    const std::time_t t = static_cast<std::time_t>(second);
    gmtime_r(&t, &tm);
    cached_second = second;
  }
  AppendDigits(out, tm.tm_year + 1900, 4);
  out->push_back('-');
  AppendDigits(out, tm.tm_mon + 1, 2);
  out->push_back('-');
  AppendDigits(out, tm.tm_mday, 2);
  out->push_back(separator);
  AppendDigits(out, tm.tm_hour, 2);
  out->push_back(':');
  AppendDigits(out, tm.tm_min, 2);
  out->push_back(':');
  AppendDigits(out, tm.tm_sec, 2);
  out->push_back('.');
  const int64_t fraction = us % 1'000'000;
  AppendDigits(out, fraction_digits == 3 ? fraction / 1000 : fraction, fraction_digits);
}

}  // namespace

void AppendLogText(std::string* out, std::string_view text) {
  std::string scratch;
  AppendLogEscaped(out, Utf8OrAscii(text, &scratch), LogEscape::kText);
}

namespace {

// The access log file at `path`, opened to append (created 0644 when missing); -1 with errno.
int OpenForAppend(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

}  // namespace

void AppendAccessRecordJson(const AccessRecord& record, std::string* out) {
  bool first = true;
  auto key = [&](std::string_view k) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonKey(out, k);
  };
  VisitFields(
      record,
      [&](std::string_view k, std::string_view v) {
        key(k);
        std::string scratch;
        AppendLogString(out, Utf8OrAscii(v, &scratch));
      },
      [&](std::string_view k, uint64_t v) {
        key(k);
        AppendJsonNumber(out, v);
      },
      [&](std::string_view k, std::string_view json) {
        key(k);
        AppendLogJson(out, json);
      });
}

void AppendAccessRecordText(const AccessRecord& record, std::string* out) {
  bool first = true;
  auto key = [&](std::string_view k) {
    if (!first) out->push_back(' ');
    first = false;
    out->append(k);
    out->push_back('=');
  };
  VisitFields(
      record,
      [&](std::string_view k, std::string_view v) {
        key(k);
        std::string scratch;
        AppendTextValue(out, Utf8OrAscii(v, &scratch));
      },
      [&](std::string_view k, uint64_t v) {
        key(k);
        AppendJsonNumber(out, v);
      },
      [&](std::string_view k, std::string_view json) {
        key(k);
        // As it is while it holds no space (the usual array of names, types and shapes): a
        // space would split the line's fields, so it is then written as one JSON string.
        if (json.find(' ') == std::string_view::npos) {
          AppendLogJson(out, json);
        } else {
          std::string scratch;
          AppendLogString(out, Utf8OrAscii(json, &scratch));
        }
      });
}

StatusOr<std::unique_ptr<AsyncAccessLog>> AsyncAccessLog::Create(const Options& options) {
  int fd = STDERR_FILENO;
  if (!options.file.empty()) {
    fd = OpenForAppend(options.file);
    if (fd < 0) {
      return InvalidArgument("cannot open the access log file '" + options.file +
                             "': " + std::strerror(errno));
    }
  }
  struct stat st {};
  const bool regular_file = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  return std::unique_ptr<AsyncAccessLog>(
      new AsyncAccessLog(options, fd, /*owns_fd=*/!options.file.empty(), regular_file));
}

AsyncAccessLog::AsyncAccessLog(const Options& options, int fd, bool owns_fd, bool regular_file)
    : format_(options.format),
      path_(options.file),
      owns_fd_(owns_fd),
      regular_file_(regular_file),
      buffer_bytes_(options.buffer_bytes),
      flush_interval_(options.flush_interval),
      stop_grace_(options.stop_grace),
      fd_(fd) {
  pending_.reserve(buffer_bytes_);
  writing_.reserve(buffer_bytes_);
  writer_.Start([this] { WriterLoop(); });
}

AsyncAccessLog::~AsyncAccessLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  // Writes out what is pending first, unless the descriptor takes nothing for stop_grace (a
  // pipe whose reader stopped reading): the stop must end.
  if (!writer_.Join(stop_grace_)) {
    spdlog::warn("access log: lines not written within {} ms of the stop are dropped",
                 stop_grace_.count());
  }
  if (owns_fd_) ::close(fd_);
}

namespace {

constexpr int kPackedStrings = 10;

// A record as Write() packs it into the buffer: this header, then the strings' bytes in the
// order of its lengths. The writer thread unpacks and formats it.
struct PackedRecord {
  int64_t time_us;  // system clock, since the epoch
  int64_t status;
  int64_t model_version;
  uint64_t request_bytes, response_bytes;
  uint64_t queue_ns, input_ns, infer_ns, output_ns, total_ns;
  // A generation's (AccessRecord's): prompt_tokens -1 for anything else.
  int64_t prompt_tokens, completion_tokens;
  uint64_t first_token_ns;
  HttpVersion http_version;
  // request_id, protocol, method, target, error, model, input_shapes_json, key_id,
  // client_request_id, tls_version
  uint32_t lengths[kPackedStrings];
};

}  // namespace

void AsyncAccessLog::Write(const AccessRecord& record) {
  // Packed, not formatted: the caller is often a model's worker thread, whose time is the
  // model's throughput; the writer thread does the formatting.
  const std::string_view strings[kPackedStrings] = {record.request_id,
                                                    record.protocol,
                                                    record.method,
                                                    record.target,
                                                    record.error,
                                                    record.model,
                                                    record.input_shapes_json,
                                                    record.key_id,
                                                    record.client_request_id,
                                                    record.tls_version};
  PackedRecord packed;
  packed.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  packed.status = record.status;
  packed.model_version = record.model_version;
  packed.request_bytes = record.request_bytes;
  packed.response_bytes = record.response_bytes;
  packed.queue_ns = record.timing.queue_ns;
  packed.input_ns = record.timing.compute_input_ns;
  packed.infer_ns = record.timing.compute_infer_ns;
  packed.output_ns = record.output_ns;
  packed.total_ns = record.total_ns;
  packed.prompt_tokens = record.prompt_tokens;
  packed.completion_tokens = record.completion_tokens;
  packed.first_token_ns = record.first_token_ns;
  packed.http_version = record.http_version;
  size_t size = sizeof(packed);
  for (int k = 0; k < kPackedStrings; ++k) {
    packed.lengths[k] = static_cast<uint32_t>(std::min<size_t>(strings[k].size(), 1u << 20));
    size += packed.lengths[k];
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.size() + size > buffer_bytes_) {
      ++dropped_lines_;
      return;
    }
    pending_.append(reinterpret_cast<const char*>(&packed), sizeof(packed));
    for (int k = 0; k < kPackedStrings; ++k) pending_.append(strings[k].data(), packed.lengths[k]);
    // Half full: write now rather than at the next interval, so that the buffer does not fill.
    if (!kicked_ && pending_.size() >= buffer_bytes_ / 2) wake = kicked_ = true;
  }
  if (wake) wake_.notify_one();
}

void AsyncAccessLog::FormatPacked() {
  text_.clear();
  size_t at = 0;
  while (at + sizeof(PackedRecord) <= writing_.size()) {
    PackedRecord packed;
    std::memcpy(&packed, writing_.data() + at, sizeof(packed));
    at += sizeof(packed);
    std::string_view strings[kPackedStrings];
    for (int k = 0; k < kPackedStrings; ++k) {
      strings[k] = std::string_view(writing_.data() + at, packed.lengths[k]);
      at += packed.lengths[k];
    }
    AccessRecord r;
    r.request_id = strings[0];
    r.protocol = strings[1];
    r.method = strings[2];
    r.target = strings[3];
    r.error = strings[4];
    r.model = strings[5];
    r.input_shapes_json = strings[6];
    r.key_id = strings[7];
    r.client_request_id = strings[8];
    r.tls_version = strings[9];
    r.http_version = packed.http_version;
    r.status = static_cast<int>(packed.status);
    r.model_version = packed.model_version;
    r.request_bytes = packed.request_bytes;
    r.response_bytes = packed.response_bytes;
    r.timing.queue_ns = packed.queue_ns;
    r.timing.compute_input_ns = packed.input_ns;
    r.timing.compute_infer_ns = packed.infer_ns;
    r.output_ns = packed.output_ns;
    r.total_ns = packed.total_ns;
    r.prompt_tokens = packed.prompt_tokens;
    r.completion_tokens = packed.completion_tokens;
    r.first_token_ns = packed.first_token_ns;
    const std::chrono::system_clock::time_point time{std::chrono::microseconds(packed.time_us)};
    if (format_ == LogFormat::kJson) {
      text_.append("{\"time\":\"");
      AppendUtcTime(time, 'T', 6, &text_);
      text_.append("Z\",\"level\":\"info\",\"log\":\"access\",");
      AppendAccessRecordJson(r, &text_);
      text_.append("}\n");
    } else {
      AppendUtcTime(time, ' ', 3, &text_);
      text_.append(" access ");
      AppendAccessRecordText(r, &text_);
      text_.push_back('\n');
    }
  }
  writing_.clear();
}

uint64_t AsyncAccessLog::dropped_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_lines_;
}

void AsyncAccessLog::AppendMetrics(TextExposition* out) const {
  constexpr std::string_view kDropped = "harrier_access_log_dropped_lines_total";
  out->Declare(kDropped, TextExposition::Type::kCounter,
               "Access log lines dropped because the writer fell behind or writing failed");
  out->Add(kDropped, {}, dropped_lines());
}

void AsyncAccessLog::WriterLoop() {
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, flush_interval_, [this] { return stopping_ || kicked_; });
      pending_.swap(writing_);
      kicked_ = false;
      stop = stopping_;
    }
    ReopenWhenMoved();
    WriteOut();
    if (stop) return;
  }
}

void AsyncAccessLog::ReopenWhenMoved() {
  if (!owns_fd_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_reopen_check_ < std::chrono::seconds(1)) return;
  last_reopen_check_ = now;
  struct stat at_path {
  }, open_file{};
  const bool there = ::stat(path_.c_str(), &at_path) == 0;
  if (there && ::fstat(fd_, &open_file) == 0 && at_path.st_dev == open_file.st_dev &&
      at_path.st_ino == open_file.st_ino) {
    return;  // the file at the path is still the one being written
  }
  const int fd = OpenForAppend(path_);
  if (fd < 0) {
    const int error = errno;
    // A file that was removed (not renamed) is written to no purpose, and keeps its disk space
    // while it is held: let go of it, and drop the lines until the path can be opened again.
    struct stat old_file {};
    const bool removed = fd_ >= 0 && ::fstat(fd_, &old_file) == 0 && old_file.st_nlink == 0;
    if (removed) {
      ::close(fd_);
      fd_ = -1;
    }
    // Once per run of failures (probe 52: a warning a second while a directory was gone).
    if (!reopen_failing_) {
      spdlog::warn(
          "access log: '{}' was moved or removed and cannot be opened again ({}); {}; tried "
          "again every second",
          path_, std::strerror(error),
          fd_ < 0 ? "its lines are dropped, and counted in harrier_access_log_dropped_lines_total"
                  : "writing on to the moved file");
    }
    reopen_failing_ = true;
    return;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  reopen_failing_ = false;
  spdlog::info("access log: '{}' was moved or removed; writing to a new file at that path", path_);
}

void AsyncAccessLog::WriteOut() {
  FormatPacked();
  if (fd_ < 0) {  // the file was removed and its path cannot be opened (ReopenWhenMoved)
    const auto lost = static_cast<uint64_t>(std::count(text_.begin(), text_.end(), '\n'));
    std::lock_guard<std::mutex> lock(mu_);
    dropped_lines_ += lost;
    text_.clear();
    return;
  }
  // A line a failed write cut short (a full disk) is ended first, so that the next one starts
  // a line of its own rather than being glued to the fragment (probe 52).
  const size_t ending = line_cut_ && !text_.empty() ? 1 : 0;  // not a line of its own
  if (ending != 0) text_.insert(text_.begin(), '\n');
  const size_t written = writer_.Write(fd_, text_, regular_file_);
  const int write_error = errno;  // the write's, before the truncation below can change it
  if (written > 0) line_cut_ = written < text_.size() && text_[written - 1] != '\n';
  if (written > 0 && line_cut_ && regular_file_ && owns_fd_) {  // this write cut a line
    // A file's cut line is taken back off its end, so the file holds whole lines only; what is
    // left to end (ftruncate failed; stderr, which the server log shares, so that a line of its
    // written meanwhile would go too; a pipe) is ended by the next write. The file is opened
    // O_APPEND, so the next write goes to the new end.
    const size_t line_start = text_.rfind('\n', written - 1);
    const auto fragment =
        static_cast<off_t>(written - (line_start == std::string::npos ? 0 : line_start + 1));
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    if (end >= fragment && ::ftruncate(fd_, end - fragment) == 0) line_cut_ = false;
  }
  if (written < text_.size()) {
    // The lines from here on are lost: counted as dropped, and the first failure of a run
    // logged (to the server log; when the access log is stderr that may fail too).
    const auto lost = static_cast<uint64_t>(std::count(
        text_.begin() + static_cast<std::ptrdiff_t>(std::max(written, ending)), text_.end(), '\n'));
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped_lines_ += lost;
    }
    if (!write_failing_ && !writer_.abandoned()) {
      spdlog::warn(
          "access log: writing failed ({}); {} line(s) dropped, and counted in "
          "harrier_access_log_dropped_lines_total while it fails",
          write_error != 0 ? std::strerror(write_error) : "nothing written", lost);
    }
    write_failing_ = true;
  } else if (!text_.empty()) {  // all of it written
    if (write_failing_) spdlog::info("access log: writing again");
    write_failing_ = false;
  }
  text_.clear();
}

}  // namespace harrier
