// The JSON of Triton's generate extension answers (docs/openai.md):
//
//   {"model_name": "m", "model_version": "1", "text_output": "..."}
//
// /generate answers once with the whole text; /generate_stream sends one such object per
// piece of text as an SSE data event (sse.h) and ends with the response (no [DONE]). An error
// is Triton's {"error": "..."}: the HTTP status when nothing was sent yet, a data event when
// the stream had begun. Text with ill-formed UTF-8 is written with U+FFFD, so the JSON is
// always valid; streamed pieces should pass through a Utf8Holdback first.
#pragma once

#include <string>
#include <string_view>

namespace harrier::openai {

std::string GenerateResponseJson(std::string_view model_name, std::string_view model_version,
                                 std::string_view text_output);

std::string GenerateErrorJson(std::string_view message);

}  // namespace harrier::openai
