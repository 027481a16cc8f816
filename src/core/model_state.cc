#include "harrier/model_manager.h"

namespace harrier {

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnloading: return "UNLOADING";
    case ModelState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

}  // namespace harrier
