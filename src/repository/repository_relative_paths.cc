#include "repository/repository_relative_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace harrier {
namespace {

std::string WithoutTrailingSlashes(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  return path;
}

// Whether a path may start right after `c`: the characters that delimit a path in the
// messages the server builds ("in /x", "'/x'", "(/x)", "path=/x", "a: /x").
bool StartsAPath(char c) {
  switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\'':
    case '"':
    case '`':
    case '(':
    case '[':
    case '{':
    case '<':
    case '=':
    case ':':
    case ',':
    case ';': return true;
    default: return false;
  }
}

}  // namespace

RepositoryRelativePaths::RepositoryRelativePaths(std::string_view repository_path) {
  const std::string given = WithoutTrailingSlashes(std::string(repository_path));
  roots_.push_back(given);
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(std::string(given), ec);
  if (!ec) {
    std::string normal = WithoutTrailingSlashes(absolute.lexically_normal().string());
    if (normal != given) roots_.push_back(std::move(normal));
  }
  // Longest first: of "/srv/models" and "models", the one that matches more is removed.
  std::sort(roots_.begin(), roots_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string RepositoryRelativePaths::Rewrite(std::string_view message) const {
  std::string out;
  out.reserve(message.size());
  std::size_t i = 0;
  while (i < message.size()) {
    if (i == 0 || StartsAPath(message[i - 1])) {
      bool removed = false;
      for (const std::string& root : roots_) {
        const std::size_t end = i + root.size();
        if (message.compare(i, root.size(), root) != 0 || end >= message.size() ||
            message[end] != '/')
          continue;
        i = end;
        while (i < message.size() && message[i] == '/') ++i;
        removed = true;
        break;
      }
      if (removed) continue;
    }
    out.push_back(message[i]);
    ++i;
  }
  return out;
}

}  // namespace harrier
