#include "protocol/common/content_coding.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "core/http_text.h"

namespace harrier {
namespace {

// zlib's window bits: 15 (a 32 KiB window), +16 for a gzip wrapper, negative for raw deflate.
constexpr int kZlibWindow = 15;
constexpr int kGzipWindow = 15 + 16;
constexpr int kRawWindow = -15;
// Output grows by at most this much per inflate() call.
constexpr size_t kInflateStep = 64 * 1024;

// The q value of one Accept-Encoding element's parameters ("; q=0.5"); 1 when absent, 0 when
// it does not parse (a malformed preference is not an acceptance).
double Quality(std::string_view params) {
  while (!params.empty()) {
    const size_t semi = params.find(';');
    std::string_view p = TrimOws(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') continue;
    p.remove_prefix(2);
    if (p.empty() || p.size() > 5 || (p[0] != '0' && p[0] != '1')) return 0;
    double q = p[0] - '0';
    if (p.size() > 1) {
      if (p[1] != '.') return 0;
      double scale = 0.1;
      for (char c : p.substr(2)) {
        if (c < '0' || c > '9') return 0;
        q += (c - '0') * scale;
        scale /= 10;
      }
    }
    return std::min(q, 1.0);
  }
  return 1;
}

// One inflate stream over `in` into `out` (appending), at most `max_bytes` in total. Returns the
// input bytes it used.
StatusOr<size_t> InflateOne(std::string_view in, int window_bits, uint64_t max_bytes,
                            std::string* out) {
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) return Internal("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), std::numeric_limits<uInt>::max()));
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out->size() >= max_bytes) {
      inflateEnd(&z);
      // Triton's words first (its QA tests match them), then Harrier's.
      return PayloadTooLarge(
          "Request JSON size exceeds the maximum allowed value of " + std::to_string(max_bytes) +
          " bytes. Use --http-max-input-size to increase the limit: the request body decodes to "
          "more than " +
          std::to_string(max_bytes) + " bytes");
    }
    const size_t step =
        static_cast<size_t>(std::min<uint64_t>(kInflateStep, max_bytes - out->size()));
    const size_t before = out->size();
    if (out->capacity() < before + step) {
      // Doubling, but never past the limit: a bomb's buffer stops at max_bytes.
      out->reserve(static_cast<size_t>(
          std::min<uint64_t>(std::max<uint64_t>(2 * out->capacity(), before + step), max_bytes)));
    }
    out->resize(before + step);
    z.next_out = reinterpret_cast<Bytef*>(out->data() + before);
    z.avail_out = static_cast<uInt>(step);
    rc = inflate(&z, Z_NO_FLUSH);
    out->resize(before + step - z.avail_out);
    if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR) {
      const std::string why = z.msg != nullptr ? z.msg : "invalid data";
      inflateEnd(&z);
      return InvalidArgument("the request body is not valid: " + why);
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      inflateEnd(&z);
      return InvalidArgument("the request body is not valid: it ends before the compressed stream");
    }
  }
  const size_t used = in.size() - z.avail_in;
  inflateEnd(&z);
  return used;
}

}  // namespace

std::optional<ContentCoding> ParseContentEncoding(std::string_view value) {
  value = TrimOws(value);
  if (value.empty() || IEquals(value, "identity")) return ContentCoding::kIdentity;
  if (IEquals(value, "gzip") || IEquals(value, "x-gzip")) return ContentCoding::kGzip;
  if (IEquals(value, "deflate")) return ContentCoding::kDeflate;
  return std::nullopt;
}

ContentCoding NegotiateContentCoding(std::string_view accept_encoding) {
  // q of each coding as listed; "*" stands for any coding not listed (RFC 9110 §12.5.3).
  std::optional<double> gzip, deflate;
  double any = 0;
  while (!accept_encoding.empty()) {
    const size_t comma = accept_encoding.find(',');
    std::string_view element = accept_encoding.substr(0, comma);
    accept_encoding =
        comma == std::string_view::npos ? std::string_view() : accept_encoding.substr(comma + 1);
    const size_t semi = element.find(';');
    const std::string_view name = TrimOws(element.substr(0, semi));
    const double q = semi == std::string_view::npos ? 1.0 : Quality(element.substr(semi + 1));
    if (IEquals(name, "gzip") || IEquals(name, "x-gzip")) {
      gzip = q;
    } else if (IEquals(name, "deflate")) {
      deflate = q;
    } else if (name == "*") {
      any = q;
    }
  }
  const double q_gzip = gzip.value_or(any);
  const double q_deflate = deflate.value_or(any);
  if (q_gzip > 0 && q_gzip >= q_deflate) return ContentCoding::kGzip;
  if (q_deflate > 0) return ContentCoding::kDeflate;
  return ContentCoding::kIdentity;
}

std::string_view ContentCodingName(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kGzip: return "gzip";
    case ContentCoding::kDeflate: return "deflate";
    case ContentCoding::kIdentity: break;
  }
  return "";
}

StatusOr<std::string> DecodeContent(std::string_view encoded, ContentCoding coding,
                                    uint64_t max_bytes, size_t padding) {
  if (coding == ContentCoding::kIdentity)
    return Internal("DecodeContent: identity is not a coding");
  if (encoded.size() > std::numeric_limits<uInt>::max())
    return PayloadTooLarge("the compressed request body is over 4 GiB");
  std::string out;
  out.reserve(static_cast<size_t>(std::min<uint64_t>(max_bytes, encoded.size() * 4)) + padding);
  if (coding == ContentCoding::kDeflate) {
    // HTTP's deflate is the zlib format; a raw deflate stream has no 2-byte zlib header (its
    // first byte's low nibble is 8 and the pair is a multiple of 31 in a zlib header).
    const bool zlib_header =
        encoded.size() >= 2 && (static_cast<unsigned char>(encoded[0]) & 0x0f) == 8 &&
        ((static_cast<unsigned char>(encoded[0]) << 8) | static_cast<unsigned char>(encoded[1])) %
                31 ==
            0;
    ASSIGN_OR_RETURN(size_t used,
                     InflateOne(encoded, zlib_header ? kZlibWindow : kRawWindow, max_bytes, &out));
    if (used != encoded.size())
      return InvalidArgument("the request body has bytes after its deflate stream");
  } else {
    // gzip members may be concatenated (RFC 1952 §2.2): each is decoded in turn.
    while (!encoded.empty()) {
      ASSIGN_OR_RETURN(size_t used, InflateOne(encoded, kGzipWindow, max_bytes, &out));
      encoded.remove_prefix(used);
    }
  }
  if (out.capacity() < out.size() + padding) out.reserve(out.size() + padding);
  return out;
}

std::optional<std::string> EncodeContent(std::string_view body, ContentCoding coding) {
  if (body.size() > std::numeric_limits<uInt>::max()) return std::nullopt;
  z_stream z{};
  const int window = coding == ContentCoding::kGzip ? kGzipWindow : kZlibWindow;
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return std::nullopt;
  std::string out(deflateBound(&z, static_cast<uLong>(body.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

Status DecodeRequestBody(const HttpRequest& request, uint64_t max_bytes, size_t padding,
                         std::shared_ptr<const std::string>* body) {
  const std::string_view name = request.Header("content-encoding");
  if (name.empty()) return Status::Ok();
  const std::optional<ContentCoding> coding = ParseContentEncoding(name);
  if (!coding) {
    constexpr size_t kShown = 32;  // the client's text, bounded
    return InvalidArgument("unsupported Content-Encoding '" + std::string(name.substr(0, kShown)) +
                           (name.size() > kShown ? "...'" : "'") +
                           "; this server decodes gzip and deflate");
  }
  if (*coding == ContentCoding::kIdentity || *body == nullptr) return Status::Ok();
  ASSIGN_OR_RETURN(std::string decoded, DecodeContent(**body, *coding, max_bytes, padding));
  *body = std::make_shared<const std::string>(std::move(decoded));
  return Status::Ok();
}

}  // namespace harrier
