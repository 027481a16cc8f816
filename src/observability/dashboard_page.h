// The status page's HTML (docs/dashboard.md): one self-contained document with inline CSS and
// JavaScript that polls GET /v2/dashboard/summary every second and draws its charts on
// <canvas>; it loads nothing else. The figures are also written into text elements, so that a
// headless browser's DOM dump shows them (tests/integration/dashboard_test.py).
#pragma once

#include <string_view>

namespace harrier {

std::string_view DashboardPageHtml();

}  // namespace harrier
