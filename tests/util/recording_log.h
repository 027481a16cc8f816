// RecordingLog: while it lives, spdlog's default logger is one that keeps every message (level
// and text) for the test to read, at every level; the previous default logger comes back when
// it is destroyed. Messages may be logged from any thread; the test reads from its own.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace harrier::testing {

class RecordingLog {
 public:
  struct Line {
    spdlog::level::level_enum level;
    std::string message;
  };

  RecordingLog() : previous_(spdlog::default_logger()), sink_(std::make_shared<Sink>()) {
    auto logger = std::make_shared<spdlog::logger>("recording", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(std::move(logger));
  }
  ~RecordingLog() { spdlog::set_default_logger(previous_); }
  RecordingLog(const RecordingLog&) = delete;
  RecordingLog& operator=(const RecordingLog&) = delete;

  std::vector<Line> lines() const { return sink_->lines(); }

  // The lines at `level` or worse that contain `text`.
  std::vector<Line> Find(spdlog::level::level_enum level, std::string_view text) const {
    std::vector<Line> found;
    for (Line& line : lines())
      if (line.level >= level && line.message.find(text) != std::string::npos)
        found.push_back(std::move(line));
    return found;
  }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::vector<Line> lines() {
      std::lock_guard<std::mutex> lock(base_sink<std::mutex>::mutex_);
      return lines_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {  // under mutex_
      lines_.push_back({msg.level, std::string(msg.payload.data(), msg.payload.size())});
    }
    void flush_() override {}

   private:
    std::vector<Line> lines_;
  };

  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<Sink> sink_;
};

}  // namespace harrier::testing
