#include "auth/api_key_file.h"

#include <simdjson.h>

#include <map>
#include <set>
#include <string>
#include <unordered_set>

namespace harrier::auth {
namespace {

constexpr size_t kMaxIdBytes = 64;

bool ValidId(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status Bad(size_t index, std::string_view id, std::string_view what) {
  std::string where = "keys[" + std::to_string(index) + "]";
  if (!id.empty()) where += " (id '" + std::string(id) + "')";
  return InvalidArgument("API key file: " + where + ": " + std::string(what));
}

StatusOr<ApiKeyEntry> ParseKey(simdjson::dom::element value, size_t index) {
  simdjson::dom::object object;
  if (value.get_object().get(object)) return Bad(index, "", "is not an object");
  ApiKeyEntry key;
  bool has_id = false, has_digest = false, has_scopes = false;
  std::set<std::string_view> seen;
  // The id first, so that every later message names it.
  for (auto field : object) {
    if (field.key != "id") continue;
    std::string_view id;
    if (field.value.get_string().get(id) || !ValidId(id)) {
      return Bad(index, "", "\"id\" must be 1..64 of A-Z a-z 0-9 . _ -");
    }
    key.id = std::string(id);
    has_id = true;
  }
  if (!has_id) return Bad(index, "", "has no \"id\"");
  for (auto field : object) {
    const std::string_view name = field.key;
    if (!seen.insert(name).second) return Bad(index, key.id, "\"" + std::string(name) + "\" twice");
    if (name == "id") continue;
    if (name == "sha256") {
      std::string_view hex;
      std::optional<Sha256Digest> digest;
      if (!field.value.get_string().get(hex)) digest = ParseSha256Hex(hex);
      if (!digest) return Bad(index, key.id, "\"sha256\" must be 64 hex digits");
      key.sha256 = *digest;
      has_digest = true;
    } else if (name == "scopes") {
      simdjson::dom::array scopes;
      if (field.value.get_array().get(scopes)) {
        return Bad(index, key.id, "\"scopes\" must be an array of scope names");
      }
      for (auto s : scopes) {
        std::string_view scope_name;
        if (s.get_string().get(scope_name)) return Bad(index, key.id, "a scope is not a string");
        std::optional<Scope> scope = ParseScope(scope_name);
        if (!scope) {
          return Bad(index, key.id,
                     "unknown scope '" + std::string(scope_name) +
                         "' (known: inference, metadata, admin, metrics)");
        }
        if (key.scopes & ScopeBit(*scope)) {
          return Bad(index, key.id, "scope '" + std::string(scope_name) + "' twice");
        }
        key.scopes |= ScopeBit(*scope);
      }
      if (key.scopes == 0) return Bad(index, key.id, "\"scopes\" is empty");
      has_scopes = true;
    } else if (name == "rate_limit") {
      std::string_view text;
      if (field.value.get_string().get(text)) {
        return Bad(index, key.id, "\"rate_limit\" must be a string \"RPS[:BURST]\"");
      }
      StatusOr<RateLimit> limit = ParseRateLimit(text);
      if (!limit.ok()) return Bad(index, key.id, "\"rate_limit\": " + limit.status().message());
      key.rate_limit = *limit;
    } else {
      return Bad(index, key.id, "unknown field \"" + std::string(name) + "\"");
    }
  }
  if (!has_digest) return Bad(index, key.id, "has no \"sha256\"");
  if (!has_scopes) return Bad(index, key.id, "has no \"scopes\"");
  return key;
}

}  // namespace

StatusOr<std::vector<ApiKeyEntry>> ParseApiKeyFile(std::string_view text) {
  // A UTF-8 byte order mark, as some Windows editors write, is skipped (RFC 8259 §8.1 lets a
  // parser ignore it): it made the file "not JSON" with a message about commas (probe 47).
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(text)).get(root)) {
    return InvalidArgument(std::string("API key file: not JSON: ") + simdjson::error_message(err));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object)) return InvalidArgument("API key file: not a JSON object");
  simdjson::dom::array keys;
  bool has_keys = false;
  for (auto field : object) {
    if (field.key != "keys") {
      return InvalidArgument("API key file: unknown field \"" + std::string(field.key) + "\"");
    }
    if (has_keys) return InvalidArgument("API key file: \"keys\" twice");
    if (field.value.get_array().get(keys)) {
      return InvalidArgument("API key file: \"keys\" is not an array");
    }
    has_keys = true;
  }
  if (!has_keys) return InvalidArgument("API key file: no \"keys\" array");
  std::vector<ApiKeyEntry> out;
  // The ids and digests seen so far (by index in `out`): one lookup a key, not a comparison
  // with every earlier one (probe 47: 100,000 keys took more than 10 s to load).
  std::unordered_set<std::string> ids;
  std::map<Sha256Digest, size_t> digests;
  size_t index = 0;
  for (auto value : keys) {
    StatusOr<ApiKeyEntry> key = ParseKey(value, index);
    if (!key.ok()) return key.status();
    if (!ids.insert(key->id).second) return Bad(index, key->id, "the id is used twice");
    if (auto [earlier, fresh] = digests.emplace(key->sha256, out.size()); !fresh) {
      return Bad(index, key->id, "the same key (sha256) as '" + out[earlier->second].id + "'");
    }
    out.push_back(std::move(key).value());
    ++index;
  }
  return out;
}

}  // namespace harrier::auth
