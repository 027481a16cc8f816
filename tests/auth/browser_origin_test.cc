#include "auth/browser_origin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace harrier::auth {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

HttpRequest Request(std::string method, Headers headers) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = "/v2/repository/models/simple/load";
  r.headers = std::move(headers);
  return r;
}

// Probe 61: a page on another site replaced a served model with one form post, and unloaded
// models with script requests. Browsers mark such requests (Origin, Sec-Fetch-Site); clients
// that are not browsers send neither.
TEST(CrossSiteRefusalTest, BrowsersStateChangingRequestsFromOtherSitesAreRefused) {
  struct Case {
    const char* name;
    std::string method;
    Headers headers;
    std::vector<std::string> allowed;
    bool refused;
  };
  const Case cases[] = {
      {"curl, an SDK: no browser headers", "POST", {}, {}, false},
      {"a form post from another site", "POST", {{"origin", "http://evil.example"}}, {}, true},
      {"a fetch PUT", "PUT", {{"origin", "http://127.0.0.1:9000"}}, {}, true},
      {"a DELETE", "DELETE", {{"origin", "http://localhost:3000"}}, {}, true},
      {"a sandboxed page", "POST", {{"origin", "null"}}, {}, true},
      {"null is allowed only by *", "POST", {{"origin", "null"}}, {"http://a.example"}, true},
      {"an allowed origin",
       "POST",
       {{"origin", "https://ui.example"}},
       {"https://ui.example"},
       false},
      {"origins compare exactly",
       "POST",
       {{"origin", "https://ui.example:8443"}},
       {"https://ui.example"},
       true},
      {"a default port a client copied from the configured URL",
       "POST",
       {{"origin", "https://ui.example:443"}},
       {"https://ui.example"},
       false},
      {"another port is another origin",
       "POST",
       {{"origin", "https://ui.example:444"}},
       {"https://ui.example"},
       true},
      {"* allows every origin", "POST", {{"origin", "http://evil.example"}}, {"*"}, false},
      {"Origin twice",
       "POST",
       {{"origin", "https://ui.example"}, {"origin", "http://evil.example"}},
       {"https://ui.example"},
       true},
      {"cross-site without Origin", "POST", {{"sec-fetch-site", "cross-site"}}, {}, true},
      {"same-site without Origin", "POST", {{"sec-fetch-site", "same-site"}}, {}, true},
      {"same-origin without Origin", "POST", {{"sec-fetch-site", "same-origin"}}, {}, false},
      {"typed by the user", "POST", {{"sec-fetch-site", "none"}}, {}, false},
      {"reads pass: GET", "GET", {{"origin", "http://evil.example"}}, {}, false},
      {"reads pass: HEAD", "HEAD", {{"sec-fetch-site", "cross-site"}}, {}, false},
      {"OPTIONS passes (answered 405)", "OPTIONS", {{"origin", "http://evil.example"}}, {}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string why = CrossSiteRefusal(Request(c.method, c.headers), c.allowed);
    EXPECT_EQ(!why.empty(), c.refused) << why;
  }
  EXPECT_THAT(CrossSiteRefusal(Request("POST", {{"origin", "http://evil.example"}}), {}),
              ::testing::HasSubstr("origin 'http://evil.example'"));
}

// Probe 61: a page under a name rebound to this server read the status page as its own origin.
TEST(HostRefusalTest, OnlyListedNamesIpAddressesAndLocalhostWhenAListIsGiven) {
  auto host = [](std::string value) {
    HttpRequest r;
    r.method = "GET";
    r.headers = {{"host", std::move(value)}};
    return r;
  };
  const std::vector<std::string> allowed{"harrier.internal", "Models.Example."};
  for (const char* ok :
       {"harrier.internal", "HARRIER.internal:8000", "models.example", "models.example.:80",
        "127.0.0.1:8000", "10.1.2.3", "[::1]:8000", "localhost:8000", "localhost.", "127.1",
        "2130706433:8000", "0x7f.1"}) {  // inet_aton's forms too (probe 65)
    EXPECT_EQ(HostRefusal(host(ok), allowed), "") << ok;
  }
  for (const char* refused : {"rebind.attacker.test", "rebind.attacker.test:8000",
                              "harrier.internal.evil", "127.0.0.1.nip.io"}) {
    EXPECT_NE(HostRefusal(host(refused), allowed), "") << refused;
  }
  EXPECT_EQ(HostRefusal(host("anything.example"), {}), "");     // no list: any
  EXPECT_EQ(HostRefusal(host("anything.example"), {"*"}), "");  // "*": any
  HttpRequest no_host;
  EXPECT_EQ(HostRefusal(no_host, allowed), "");
}

// Probe 65: entries that could never match started the server silently.
TEST(NormalizedListsTest, EntriesAreLowerCasedOrRefusedNamingThem) {
  auto origins = NormalizedOrigins({"HTTPS://UI.Example:8443", "http://127.0.0.1:3000", "*"});
  ASSERT_TRUE(origins.ok()) << origins.status().ToString();
  EXPECT_EQ(*origins,
            (std::vector<std::string>{"https://ui.example:8443", "http://127.0.0.1:3000", "*"}));
  for (const char* bad :
       {"ui.example", "https://ui.example/", " https://ui.example", "https://ui.example/path",
        "ftp://ui.example", "https://", "", "https://ui.example:abc", "https://ui.example:65536",
        "https://ui.example:0", "https://:443", "http://[::1", "http://a:b:80", "http://[]",
        "http://[zz]", "http://a<b", "http://a%20b", "https://bücher.example"}) {
    auto refused = NormalizedOrigins({bad});
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("--allowed-origins"));
  }
  // A scheme's default port is left out, as browsers leave it out of Origin.
  auto defaults = NormalizedOrigins(
      {"https://ui.example:443", "http://ui.example:80", "http://ui.example:443", "http://[::1]:80",
       "https://ui.example:0443", "http://x:08080", "https://y:", "http://[0:0:0:0:0:0:0:1]:8080",
       "http://127.1:8080", "http://0x7f.0.0.1"});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(*defaults, (std::vector<std::string>{
                           "https://ui.example", "http://ui.example", "http://ui.example:443",
                           "http://[::1]", "https://ui.example", "http://x:8080", "https://y",
                           "http://[::1]:8080", "http://127.0.0.1:8080", "http://127.0.0.1"}));
  auto hosts = NormalizedHosts({"Harrier.Internal.", "*"});
  ASSERT_TRUE(hosts.ok());
  EXPECT_EQ(*hosts, (std::vector<std::string>{"harrier.internal", "*"}));
  for (const char* bad : {"harrier.internal:8000", " harrier", "a/b", ""}) {
    EXPECT_EQ(NormalizedHosts({bad}).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace harrier::auth
