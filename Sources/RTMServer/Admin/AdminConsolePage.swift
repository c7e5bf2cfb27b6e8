import Crypto
import Foundation

/// The admin web console (`GET /console`): one static page, styles and script inline, no build
/// step and nothing fetched from the internet. It asks for the admin key (kept in
/// `sessionStorage`), then polls the admin API every second: node info and counts, a live chart
/// of messages/s and connections (drawn on a canvas by hand), the channels and the sessions, the
/// inspected channel's members and last messages; and it has forms to publish and to kick or
/// ban a user.
///
/// It is served with a Content-Security-Policy that lets only its own inline script run (by
/// its SHA-256) and lets it talk only to the server it came from, and may not be framed
/// (clickjacking): see `headers`.
enum AdminConsolePage {
    /// The headers the page is served with.
    static let headers: [(String, String)] = [
        ("Content-Security-Policy", contentSecurityPolicy),
        ("X-Frame-Options", "DENY"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// Nothing loads or runs but the page's own script and styles; requests go to this origin
    /// only; no framing, no form posts elsewhere, no `<base>` change.
    static let contentSecurityPolicy = "default-src 'none'; script-src '\(scriptHash)'; style-src 'unsafe-inline'; "
        + "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// `sha256-<base64>` of the inline script's text, as CSP hashes it (the bytes between the
    /// tags).
    static let scriptHash: String = {
        let start = html.range(of: "<script>")!.upperBound
        let end = html.range(of: "</script>", range: start..<html.endIndex)!.lowerBound
        return "sha256-" + Data(SHA256.hash(data: Data(html[start..<end].utf8))).base64EncodedString()
    }()

    static let html = #"""
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rtm admin console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:center}
header h1{font-size:17px;margin:0}header .status{margin-left:auto;font-size:12px;opacity:.8}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:14px;padding:14px}
section{background:#fff;border-radius:6px;padding:12px 14px;box-shadow:0 1px 2px #0002}
h2{font-size:14px;margin:0 0 8px;text-transform:uppercase;letter-spacing:.04em;color:#4a5468}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:3px 6px;border-bottom:1px solid #eee;font-size:13px}
th{color:#6b7487;font-weight:600}tr.sel{background:#e8f0ff}tr.click{cursor:pointer}
.kv{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;font-size:13px}.kv b{font-weight:600}
.on{color:#1a7f37}.off{color:#b26b00}.err{color:#c62828}.muted{color:#888}
form{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:6px 0}
input{padding:4px 6px;border:1px solid #ccd;border-radius:4px;font:inherit}button{padding:4px 10px;font:inherit;cursor:pointer}
canvas{width:100%;height:180px;display:block}
#login{max-width:420px;margin:80px auto}
.pager{margin-top:6px;font-size:12px}.pager button{margin-left:8px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
</style></head>
<body>
<header><h1>rtm admin console</h1><span id="node" class="muted"></span><span class="status" id="status">not connected</span>
<button id="logout" hidden>forget key</button></header>
<section id="login">
  <h2>Admin key</h2>
  <form id="keyForm"><input id="key" type="password" placeholder="admin key" size="36" autocomplete="off" required><button>Open</button></form>
  <div id="keyError" class="err"></div>
  <p class="muted">The key is kept in this tab's sessionStorage only.</p>
</section>
<main id="app" hidden>
  <section><h2>Node</h2><div class="kv" id="info"></div>
    <table id="nodesTable" hidden><thead><tr><th>node</th><th>state</th><th>sessions</th><th>run</th></tr></thead><tbody id="nodes"></tbody></table></section>
  <section><h2>Live: messages/s and connections</h2><canvas id="chart" width="600" height="180"></canvas>
    <div class="legend"><span><i style="background:#2563eb"></i>messages/s <b id="rate">0</b></span><span><i style="background:#16a34a"></i>connections <b id="conns">0</b></span></div></section>
  <section><h2>Channels</h2><table><thead><tr><th>channel</th><th>members</th><th>last seq</th></tr></thead><tbody id="channels"></tbody></table><div class="pager" id="channelsPager"></div></section>
  <section><h2>Channel inspector <span id="inspected" class="muted"></span></h2>
    <div><b>members</b> <span id="members" class="muted">—</span></div>
    <table><thead><tr><th>seq</th><th>time</th><th>publisher</th><th>message</th></tr></thead><tbody id="recent"></tbody></table></section>
  <section><h2>Connections (sessions)</h2><table><thead><tr><th>user</th><th>state</th><th>node</th><th>channels</th><th></th></tr></thead><tbody id="sessions"></tbody></table><div class="pager" id="sessionsPager"></div></section>
  <section><h2>Publish</h2>
    <form id="pubForm"><input id="pubChannel" placeholder="channel" required><input id="pubText" placeholder="message" size="30" required><button>Publish</button></form>
    <h2>Kick or ban</h2>
    <form id="kickForm"><input id="kickUser" placeholder="user" required><input id="kickReason" placeholder="reason"><input id="kickBan" type="number" min="0" placeholder="ban seconds (0: kick only)" style="width:190px"><button>Kick</button></form>
    <div id="actionResult" class="muted"></div></section>
</main>
<script>
"use strict";
const $ = id => document.getElementById(id);
let key = sessionStorage.getItem("rtmAdminKey");
let inspected = null, timer = null, thisNode = null;
// The channel and session lists come a page at a time (the API's cursors); each keeps the
// cursors of the pages before the one shown, so "previous" goes back.
const pageSize = 50;
const paging = {channels: [null], sessions: [null]};
const samples = [];   // {t, messages, connections}

function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; }
function row(cells) { const tr = el("tr"); for (const c of cells) { const td = el("td"); if (c instanceof Node) td.appendChild(c); else td.textContent = String(c); tr.appendChild(td); } return tr; }

async function api(method, path, body) {
  const res = await fetch(path, {method, headers: Object.assign({"Authorization": "Bearer " + key}, body ? {"Content-Type": "application/json"} : {}),
                                  body: body ? JSON.stringify(body) : undefined});
  const json = await res.json().catch(() => ({}));
  if (res.status === 401) { throw Object.assign(new Error(json.message || "unauthorized"), {unauthorized: true}); }
  if (!res.ok) throw new Error(json.message || res.statusText);
  return json;
}

function showLogin(message) {
  $("login").hidden = false; $("app").hidden = true; $("logout").hidden = true;
  $("keyError").textContent = message || ""; $("status").textContent = "not connected";
  if (timer) { clearInterval(timer); timer = null; }
}

function start() {
  $("login").hidden = true; $("app").hidden = false; $("logout").hidden = false;
  refresh(); timer = setInterval(refresh, 1000);
}

async function refresh() {
  try {
    const [info, channels, sessions] = await Promise.all([api("GET", "/v1/info"), api("GET", "/v1/channels" + pageQuery("channels")),
                                                          api("GET", "/v1/sessions" + pageQuery("sessions"))]);
    renderInfo(info); renderChannels(channels.channels); renderSessions(sessions.sessions);
    renderPager("channels", channels, channels.channels.length); renderPager("sessions", sessions, sessions.sessions.length);
    // By default the busiest channel (the most messages) is inspected; a click picks another.
    if (!inspected && channels.channels.length) inspected = channels.channels.reduce((a, b) => b.lastSeq > a.lastSeq ? b : a);
    if (inspected) {
      const q = "?appId=" + encodeURIComponent(inspected.appId);
      try { renderChannel(await api("GET", "/v1/channels/" + encodeURIComponent(inspected.name) + q)); }
      catch (e) { $("members").textContent = e.message; $("recent").replaceChildren(); }
    }
    $("status").textContent = "live · updated " + new Date().toLocaleTimeString();
    document.body.dataset.ready = "true";
  } catch (e) {
    if (e.unauthorized) { sessionStorage.removeItem("rtmAdminKey"); key = null; showLogin(e.message); }
    else $("status").textContent = "error: " + e.message;
  }
}

function renderInfo(info) {
  $("node").textContent = info.node + " · v" + info.version;
  const kv = $("info"); kv.replaceChildren();
  const cluster = info.cluster;
  thisNode = cluster ? cluster.node : null;
  const items = [["nodes", cluster ? cluster.nodes.length + " (" + cluster.liveNodes + " with a live lease; database " + cluster.database + ")" : 1],
    ["version", info.version], ["uptime", Math.round(info.uptimeSeconds) + " s"], ["apps", info.apps.join(", ")],
    ["MESSAGE connections", info.connections.message], ["STREAM connections", info.connections.stream], ["peak (PCU)", info.connections.peakMessage],
    ["sessions", info.sessions], ["channels", info.channels], ["active bans", info.bans],
    ["channel messages", info.counters.channelMessages], ["user messages", info.counters.userMessages],
    ["refused requests", info.refusals.reduce((sum, r) => sum + r.count, 0)]];
  for (const [k, v] of items) { kv.appendChild(el("b", k)); kv.appendChild(el("span", v)); }
  $("nodesTable").hidden = !cluster;
  const nodes = $("nodes"); nodes.replaceChildren();
  for (const n of cluster ? cluster.nodes : [])
    nodes.appendChild(row([n.node, el("span", n.state, n.state === "dead" ? "off" : "on"), n.sessions, el("span", n.instance, "muted")]));
  // One sample a second at most (a form's extra refresh would make a spike of a few ms).
  const previous = samples[samples.length - 1];
  if (!previous || info.now - previous.t >= 900)
    samples.push({t: info.now, messages: info.counters.channelMessages + info.counters.userMessages, connections: info.connections.message});
  while (samples.length > 61) samples.shift();
  drawChart();
}

function rates() {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = Math.max(1, samples[i].t - samples[i - 1].t) / 1000;
    out.push({rate: Math.max(0, (samples[i].messages - samples[i - 1].messages) / dt), connections: samples[i].connections});
  }
  return out;
}

function drawChart() {
  const canvas = $("chart"), ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 28;
  ctx.clearRect(0, 0, w, h);
  ctx.strokeStyle = "#e3e6ec"; ctx.fillStyle = "#6b7487"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) { const y = pad / 2 + (h - pad) * i / 4; ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(w - 4, y); ctx.stroke(); }
  const data = rates();
  const maxRate = Math.max(1, ...data.map(d => d.rate)), maxConn = Math.max(1, ...data.map(d => d.connections));
  ctx.fillText(maxRate.toFixed(maxRate < 10 ? 1 : 0), 2, pad / 2 + 4); ctx.fillText("0", 2, h - pad / 2 + 4);
  ctx.fillStyle = "#16a34a"; ctx.fillText(String(maxConn), w - 4 - ctx.measureText(String(maxConn)).width, pad / 2 + 12); ctx.fillStyle = "#6b7487";
  ctx.fillText("−60 s", pad, h - 2); ctx.fillText("now", w - 28, h - 2);
  const x = i => pad + (w - pad - 4) * (i + 60 - data.length) / 59;
  const y = (v, max) => pad / 2 + (h - pad) * (1 - v / max);
  for (const [field, max, color] of [["rate", maxRate, "#2563eb"], ["connections", maxConn, "#16a34a"]]) {
    ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.beginPath();
    data.forEach((d, i) => { const px = x(i), py = y(d[field], max); if (i === 0) ctx.moveTo(px, py); else ctx.lineTo(px, py); });
    ctx.stroke();
  }
  const last = data[data.length - 1] || {rate: 0, connections: samples.length ? samples[samples.length - 1].connections : 0};
  $("rate").textContent = last.rate.toFixed(1); $("conns").textContent = last.connections;
}

function pageQuery(name) {
  const cursor = paging[name][paging[name].length - 1];
  return "?limit=" + pageSize + (cursor ? "&page=" + encodeURIComponent(cursor) : "");
}

function renderPager(name, listing, shown) {
  const cursors = paging[name], pager = $(name + "Pager"); pager.replaceChildren();
  const first = (cursors.length - 1) * pageSize;
  pager.appendChild(el("span", shown ? (first + 1) + "–" + (first + shown) + " of " + listing.total : (first ? "no more" : ""), "muted"));
  if (cursors.length > 1) { const b = el("button", "‹ previous"); b.onclick = () => { cursors.pop(); refresh(); }; pager.appendChild(b); }
  if (listing.nextPage) { const b = el("button", "next ›"); b.onclick = () => { cursors.push(listing.nextPage); refresh(); }; pager.appendChild(b); }
}

function renderChannels(channels) {
  const body = $("channels"); body.replaceChildren();
  if (!channels.length) body.appendChild(row([el("span", "no channels", "muted"), "", ""]));
  for (const c of channels) {
    const tr = row([c.name, c.visibleMembers, c.lastSeq]); tr.className = "click";
    if (inspected && inspected.name === c.name && inspected.appId === c.appId) tr.classList.add("sel");
    tr.onclick = () => { inspected = c; $("pubChannel").value = c.name; refresh(); };
    body.appendChild(tr);
  }
}

function renderChannel(ch) {
  $("inspected").textContent = ch.name;
  $("members").textContent = ch.members.length ? ch.members.map(m => m.userId + (m.quiet ? " (quiet)" : "") +
    (Object.keys(m.state).length ? " " + JSON.stringify(m.state) : "")).join(", ") : "none";
  const body = $("recent"); body.replaceChildren();
  if (!ch.recent.length) body.appendChild(row([el("span", "no recent messages", "muted"), "", "", ""]));
  for (const m of ch.recent.slice(-15).reverse()) {
    body.appendChild(row([m.seq, new Date(m.ts).toLocaleTimeString(), m.publisher, m.text !== undefined ? m.text : "(" + (m.data || "").length + " base64 chars)"]));
  }
}

function renderSessions(sessions) {
  const body = $("sessions"); body.replaceChildren();
  if (!sessions.length) body.appendChild(row([el("span", "nobody logged in", "muted"), "", "", "", ""]));
  for (const s of sessions) {
    // Another node's session is kicked through that node's admin API.
    const kick = s.node && s.node !== thisNode ? el("span", "", "muted") : el("button", "kick");
    kick.onclick = () => { $("kickUser").value = s.userId; };
    body.appendChild(row([s.userId, el("span", s.online ? "online" : "in grace window", s.online ? "on" : "off"), s.node || "", s.channels.join(", "), kick]));
  }
}

$("keyForm").onsubmit = async ev => {
  ev.preventDefault(); key = $("key").value;
  try { await api("GET", "/v1/info"); sessionStorage.setItem("rtmAdminKey", key); start(); }
  catch (e) { key = null; showLogin(e.message); }
};
$("logout").onclick = () => { sessionStorage.removeItem("rtmAdminKey"); key = null; showLogin(""); };
$("pubForm").onsubmit = async ev => {
  ev.preventDefault();
  try { const r = await api("POST", "/v1/publish", {channel: $("pubChannel").value, message: $("pubText").value});
        $("actionResult").textContent = "published to " + r.channel + " as seq " + r.seq; $("pubText").value = ""; refresh(); }
  catch (e) { $("actionResult").textContent = "publish failed: " + e.message; }
};
$("kickForm").onsubmit = async ev => {
  ev.preventDefault();
  const body = {user: $("kickUser").value}; if ($("kickReason").value) body.reason = $("kickReason").value;
  const ban = Number($("kickBan").value); if (ban > 0) body.banSeconds = ban;
  try { const r = await api("POST", "/v1/kick", body);
        $("actionResult").textContent = (r.sessionEnded ? "kicked " : "no session for ") + r.user + (r.bannedUntil ? ", banned until " + new Date(r.bannedUntil).toLocaleString() : ""); refresh(); }
  catch (e) { $("actionResult").textContent = "kick failed: " + e.message; }
};
if (key) start(); else showLogin("");
</script>
</body></html>
"""#
}
