#include "observability/dashboard_page.h"

namespace harrier {
namespace {

// The page. Requests/s come from counter differences between two polls, P50/P99 "last 1 s"
// from bucket differences (histogram_quantile's interpolation, as in dashboard_summary.cc),
// "all time" from the server's lifetime figures; for a model that generates text, tokens/s from
// its token counter's differences and time to first token over its lifetime. Charts keep the
// last 120 polls.
constexpr std::string_view kPage = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Harrier status</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 4px}
#updated{color:#666;font-size:12px}
table{border-collapse:collapse;margin:12px 0;background:#fff}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f0f0f0}td.l{text-align:left}
.READY{color:#17803d;font-weight:600}.UNAVAILABLE{color:#b91c1c;font-weight:600}
.LOADING,.UNLOADING{color:#a16207;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #ddd;padding:8px}
.card h2{font-size:14px;margin:0 0 4px}
canvas{display:block}
.legend span{margin-right:10px;font-size:12px}
</style>
</head>
<body>
<h1>Harrier status</h1>
<div id="updated">waiting for data&hellip;</div>
<table id="models">
<thead><tr><th class="l">model</th><th>version</th><th class="l">state</th><th>requests/s</th>
<th>P50 ms (1 s)</th><th>P99 ms (1 s)</th><th>P50 ms (all)</th><th>P99 ms (all)</th>
<th>tokens/s</th><th>TTFT P50 ms</th><th>TTFT P99 ms</th>
<th>success</th><th>failure</th><th>queue depth</th><th>in flight</th><th class="l">traffic</th></tr></thead>
<tbody></tbody>
</table>
<div class="charts" id="charts"></div>
<script>
"use strict";
const HISTORY = 120;
const prev = {};     // key -> {t, success, failure, buckets, tokens}
const series = {};   // key -> {rps: [], p50: [], p99: []}
let bounds = [];

function quantile(q, counts) {
  let total = 0;
  for (const c of counts) total += c;
  if (total <= 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < counts.length; i++) {
    const cum = below + counts[i];
    if (cum >= rank && counts[i] > 0) {
      if (i >= bounds.length) return bounds[bounds.length - 1];
      const lo = i === 0 ? 0 : bounds[i - 1];
      return lo + (bounds[i] - lo) * (rank - below) / counts[i];
    }
    below = cum;
  }
  return bounds[bounds.length - 1];
}

function fmt(x, digits) { return x === null || x === undefined ? "\u2013" : x.toFixed(digits); }
function ms(s) { return s === null || s === undefined ? null : s * 1000; }

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function draw(canvas, lines, unit) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 28;
  ctx.clearRect(0, 0, w, h);
  let max = 0;
  for (const l of lines) for (const v of l.data) if (v !== null && v > max) max = v;
  if (max <= 0) max = 1;
  max *= 1.1;
  ctx.strokeStyle = "#ccc"; ctx.fillStyle = "#666"; ctx.font = "10px sans-serif";
  ctx.beginPath(); ctx.moveTo(pad, 4); ctx.lineTo(pad, h - 14); ctx.lineTo(w - 4, h - 14); ctx.stroke();
  ctx.fillText(max.toPrecision(3) + unit, 2, 12);
  ctx.fillText("0", 2, h - 14);
  for (const l of lines) {
    ctx.strokeStyle = l.color; ctx.lineWidth = 1.5; ctx.beginPath();
    let started = false;
    l.data.forEach((v, i) => {
      if (v === null) { started = false; return; }
      const x = pad + (w - pad - 4) * i / (HISTORY - 1);
      const y = (h - 14) - (h - 18) * v / max;
      if (started) ctx.lineTo(x, y); else { ctx.moveTo(x, y); started = true; }
    });
    ctx.stroke();
  }
}

function chartCard(key) {
  let card = document.getElementById("card-" + key);
  if (card) return card;
  card = document.createElement("div");
  card.className = "card"; card.id = "card-" + key;
  card.innerHTML = "<h2></h2><div class='legend'><span style='color:#2563eb'>requests/s</span></div>" +
    "<canvas class='rps' width='360' height='110'></canvas>" +
    "<div class='legend'><span style='color:#16a34a'>P50 ms</span><span style='color:#dc2626'>P99 ms</span></div>" +
    "<canvas class='lat' width='360' height='110'></canvas>";
  card.querySelector("h2").textContent = key;
  document.getElementById("charts").appendChild(card);
  return card;
}

function push(arr, v) { arr.push(v); while (arr.length > HISTORY) arr.shift(); }

function render(doc, now) {
  bounds = doc.latency_bounds_seconds;
  const tbody = document.querySelector("#models tbody");
  tbody.textContent = "";
  for (const v of doc.versions) {
    const key = v.name + " v" + v.version;
    const p = prev[key];
    let rps = null, p50 = null, p99 = null, tps = null;
    if (p && now > p.t) {
      const dt = (now - p.t) / 1000;
      rps = Math.max(0, (v.success + v.failure - p.success - p.failure) / dt);
      if (v.generated_tokens !== undefined && p.tokens !== undefined)
        tps = Math.max(0, (v.generated_tokens - p.tokens) / dt);
      if (p.buckets.length === v.duration_buckets.length) {
        const d = v.duration_buckets.map((c, i) => Math.max(0, c - p.buckets[i]));
        p50 = ms(quantile(0.5, d)); p99 = ms(quantile(0.99, d));
      }
    }
    prev[key] = {t: now, success: v.success, failure: v.failure, buckets: v.duration_buckets,
                 tokens: v.generated_tokens};
    const tr = document.createElement("tr");
    tr.dataset.model = v.name;
    cell(tr, v.name, "l name");
    cell(tr, String(v.version), "version");
    const st = cell(tr, v.state, "l state " + v.state);
    if (v.reason) st.title = v.reason;
    cell(tr, fmt(rps, 1), "rps");
    cell(tr, fmt(p50, 3), "p50");
    cell(tr, fmt(p99, 3), "p99");
    cell(tr, fmt(ms(v.p50_seconds), 3), "p50-all");
    cell(tr, fmt(ms(v.p99_seconds), 3), "p99-all");
    cell(tr, fmt(tps, 1), "tps");
    cell(tr, fmt(ms(v.ttft_p50_seconds), 1), "ttft-p50");
    cell(tr, fmt(ms(v.ttft_p99_seconds), 1), "ttft-p99");
    cell(tr, String(v.success), "success");
    cell(tr, String(v.failure), "failure");
    cell(tr, String(v.queue_depth), "queue");
    cell(tr, String(v.in_flight), "inflight");
    cell(tr, v.traffic || "", "l traffic");
    tbody.appendChild(tr);
    if (v.state !== "READY") continue;
    const s = series[key] || (series[key] = {rps: [], p50: [], p99: []});
    push(s.rps, rps); push(s.p50, p50); push(s.p99, p99);
    const card = chartCard(key);
    draw(card.querySelector(".rps"), [{data: s.rps, color: "#2563eb"}], "/s");
    draw(card.querySelector(".lat"), [{data: s.p50, color: "#16a34a"}, {data: s.p99, color: "#dc2626"}], "ms");
  }
  document.getElementById("updated").textContent =
    "updated " + new Date(now).toISOString() + " \u00b7 " + doc.versions.length + " model versions";
}

async function poll() {
  try {
    const r = await fetch("/v2/dashboard/summary", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json(), Date.now());
  } catch (e) {
    document.getElementById("updated").textContent = "cannot read /v2/dashboard/summary: " + e;
  }
  setTimeout(poll, 1000);
}
poll();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view DashboardPageHtml() {
  return kPage;
}

}  // namespace harrier
