// Test models for the ONNX Runtime backend tests: tools/make_test_models.py (and
// make_triton_models.py), run once per
// version of the script into the build tree and shared by every test process.
// Header-only because tests/CMakeLists.txt builds a test binary from its *_test.cc files.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <system_error>

namespace harrier::testing {

namespace test_models_internal {

// Runs tools/<script_name> into a directory of the build tree named for a hash of the script's
// text, with `args` after the output directory.
inline std::string Generate(const std::string& script_name, const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path script = fs::path(HARRIER_SOURCE_DIR) / "tools" / script_name;
  std::ifstream in(script, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", script.c_str());
    return "";
  }
  std::stringstream text;
  text << in.rdbuf();
  const size_t hash = std::hash<std::string>{}(text.str());
  const fs::path root = fs::path(HARRIER_BINARY_DIR) / "test_models";
  const fs::path dir = root / (script.stem().string() + "_" + std::to_string(hash));
  if (fs::exists(dir / "complete")) return dir.string();

  std::error_code ec;
  fs::create_directories(root, ec);
  const fs::path tmp = root / ("tmp_" + std::to_string(::getpid()) + "_" + std::to_string(hash));
  fs::remove_all(tmp, ec);
  const std::string command =
      "/usr/bin/python3 '" + script.string() + "' '" + tmp.string() + "' " + args + " > /dev/null";
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "failed: %s\n", command.c_str());
    return "";
  }
  std::ofstream(tmp / "complete") << "ok\n";
  fs::rename(tmp, dir, ec);  // loses the race harmlessly when another process got there first
  if (ec) fs::remove_all(tmp, ec);
  return fs::exists(dir / "complete") ? dir.string() : "";
}

}  // namespace test_models_internal

// The directory holding <model>/1/model.onnx for every model make_test_models.py writes
// (including the --with-unsupported ones). Generated on first use into a directory named for a
// hash of the script's text, so that a changed script regenerates and concurrent test
// processes do not race (each writes a temporary directory and renames it into place).
// Empty when generation failed (the reason is printed to stderr).
inline const std::string& TestModelDir() {
  static const std::string dir =
      test_models_internal::Generate("make_test_models.py", "--with-unsupported");
  return dir;
}

// The same for tools/make_triton_models.py: models as Triton users have them, with their
// config.pbtxt.
inline const std::string& TritonModelDir() {
  static const std::string dir = test_models_internal::Generate("make_triton_models.py", "");
  return dir;
}

// TestModelDir() + "/" + model + "/1/model.onnx".
inline std::string TestModelPath(const std::string& model) {
  return TestModelDir() + "/" + model + "/1/model.onnx";
}

}  // namespace harrier::testing
