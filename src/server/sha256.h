// SHA-256 and a constant-time comparison of digests, for the API-key check (src/auth/): OpenSSL
// stays behind src/server/ (docs/architecture.md), so the auth module asks here rather than
// including OpenSSL itself. This header includes nothing of OpenSSL.
//
// Thread safety: pure functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace harrier {

using Sha256Digest = std::array<uint8_t, 32>;

// The SHA-256 of `bytes` (OpenSSL's EVP digest).
Sha256Digest Sha256(std::string_view bytes);

// Whether `a` and `b` are equal, in time that does not depend on where they differ
// (CRYPTO_memcmp), so that a client timing its refusals learns nothing about a digest.
bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b);

// `hex` (64 hex digits, either case) as a digest; nullopt for anything else.
std::optional<Sha256Digest> ParseSha256Hex(std::string_view hex);

// 64 lower-case hex digits.
std::string Sha256Hex(const Sha256Digest& digest);

}  // namespace harrier
