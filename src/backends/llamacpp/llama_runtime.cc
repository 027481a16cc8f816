#include "backends/llamacpp/llama_runtime.h"

#include <llama.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <string_view>
#include <utility>

namespace harrier {
namespace {

// llama.cpp writes a line in pieces (GGML_LOG_LEVEL_CONT continues the previous one), so each
// thread assembles its own lines.
thread_local std::string t_line;
thread_local ggml_log_level t_line_level = GGML_LOG_LEVEL_INFO;
thread_local std::string t_last_error;

void EndLine() {
  while (!t_line.empty() && (t_line.back() == '\n' || t_line.back() == '\r')) t_line.pop_back();
  if (!t_line.empty()) {
    if (t_line_level == GGML_LOG_LEVEL_ERROR) t_last_error = t_line;
    spdlog::debug("llama.cpp: {}", t_line);
  }
  t_line.clear();
}

void LogToSpdlog(ggml_log_level level, const char* text, void* /*user_data*/) {
  if (level != GGML_LOG_LEVEL_CONT) {
    if (!t_line.empty()) EndLine();
    t_line_level = level;
  }
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) {
      t_line.append(rest);
      return;
    }
    t_line.append(rest.substr(0, newline));
    EndLine();
    rest.remove_prefix(newline + 1);
  }
}

}  // namespace

void InitLlamaRuntime() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(LogToSpdlog, nullptr);  // ggml's log too
    llama_backend_init();
  });
}

std::string TakeLastLlamaError() {
  if (!t_line.empty()) EndLine();  // an error line llama.cpp did not end
  return std::exchange(t_last_error, {});
}

}  // namespace harrier
