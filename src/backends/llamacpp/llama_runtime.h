// llama.cpp's process-wide set-up: its backend registry, and its log (and ggml's) routed to
// spdlog at debug level instead of stderr.
//
// llama.cpp keeps one log callback per process and setting it is not thread-safe, so it is set
// once, here, before the first model is loaded. Internal to the llama.cpp backend.
#pragma once

#include <string>

namespace harrier {

// Idempotent; thread-safe. Call before any other llama.cpp function.
void InitLlamaRuntime();

// The last error line llama.cpp logged on the calling thread ("" when none), then forgotten:
// llama.cpp reports why a load failed only in its log, and a Status should say it.
std::string TakeLastLlamaError();

}  // namespace harrier
