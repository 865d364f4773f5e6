// forged's live console: renders the frames of /v1/inspect/stream.
// Read-only. Every string from the daemon is put into the page with
// textContent (never as HTML), after its control and bidirectional
// characters are replaced by visible escapes.
"use strict";

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function esc(value) {
  return String(value ?? "").replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? "\\x" + code.toString(16).padStart(2, "0") : "\\u" + code.toString(16).padStart(4, "0");
  });
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = esc(text);
  return e;
}

const PHASE_COLOURS = {
  admitted: "#90a4ae", preparing: "#4fc3f7", building: "#ffb74d", provisioning: "#ba68c8", running: "#66bb6a",
  collecting: "#4db6ac", importing: "#7986cb", publishing: "#f06292", tearing_down: "#a1887f",
};

let previous = null; // the last frame, for message rates
let latestFrame = null; // the last frame, for the attempt view
// history is the snapshot of each frame over the last historyMillis, for
// the slots and queue chart.
const historyMillis = 5 * 60 * 1000;
const history = [];
let manage = false; // the daemon allows cancelling, with the token

function rate(now, actor) {
  if (!previous || !actor.stats) return 0;
  const before = previous.byPID.get(actor.pid);
  if (!before || !before.stats) return 0;
  const seconds = (now - previous.at) / 1000;
  return seconds > 0 ? (actor.stats.messagesIn - before.stats.messagesIn) / seconds : 0;
}

function renderActor(frame, byPID, pid, now) {
  const actor = byPID.get(pid);
  if (!actor) return null;
  const box = el("div", "actor");
  box.dataset.pid = esc(pid);
  box.dataset.kind = esc(actor.kind);
  const head = el("div", "head");
  head.append(el("span", "kind", actor.kind), " ", el("span", "phase", "[" + (actor.phase || "") + "]"), " ", el("span", "pid", pid));
  box.append(head);
  if (actor.stats) {
    const s = actor.stats;
    const stats = el("div", "stats");
    stats.append(el("span", "", "mailbox " + s.mailboxDepth + " · in " + s.messagesIn + " · out " + s.messagesOut +
      " · " + rate(now, actor).toFixed(1) + " msg/s · "), el("span", s.restarts > 0 ? "restarts" : "", "restarts " + s.restarts));
    box.append(stats);
    if (s.recent && s.recent.length) {
      // Kinds with counts, most recent last; the console's own polling is
      // left out by the daemon.
      const recent = el("div", "recent", "recent: ");
      s.recent.forEach((m, i) => {
        const item = el("span", "msg", m.kind + (m.count > 1 ? " ×" + m.count : ""));
        item.dataset.kind = esc(m.kind);
        item.dataset.count = esc(m.count);
        recent.append(...(i ? [", ", item] : [item]));
      });
      box.append(recent);
    }
  }
  const keys = Object.keys(actor.facts || {}).filter((k) => actor.facts[k] !== "").sort();
  if (keys.length) {
    box.append(el("div", "facts", keys.map((k) => k + "=" + actor.facts[k]).join("  ")));
  }
  for (const child of actor.children || []) {
    const c = renderActor(frame, byPID, child, now);
    if (c) box.append(c);
  }
  return box;
}

function renderTimeline(attempt, now) {
  const bar = el("div", "timeline");
  const spans = attempt.timeline || [];
  const seconds = spans.map((s) => (s.seconds > 0 ? s.seconds : Math.max(0, (now - Date.parse(s.start)) / 1000)));
  const total = seconds.reduce((a, b) => a + b, 0) || 1;
  spans.forEach((s, i) => {
    const span = el("div", "span");
    span.style.width = (100 * seconds[i] / total).toFixed(2) + "%";
    span.style.background = PHASE_COLOURS[s.phase] || "#b0bec5";
    span.title = esc(s.phase + " " + seconds[i].toFixed(2) + "s");
    bar.append(span);
  });
  const legend = el("div", "legend", spans.map((s, i) => s.phase + " " + seconds[i].toFixed(1) + "s").join(" → "));
  const cell = el("td");
  cell.append(bar, legend);
  return cell;
}

function renderAttempts(frame, now) {
  const table = el("table");
  const head = el("tr");
  for (const h of ["attempt", "state", "status", "code", "events", "timeline"]) head.append(el("th", "", h));
  if (manage) head.append(el("th", "", ""));
  table.append(head);
  for (const a of frame.attempts || []) {
    const row = el("tr", "pick");
    row.dataset.attempt = esc(a.attemptId);
    if (selected && selected.id === a.attemptId) row.classList.add("selected");
    row.addEventListener("click", (e) => { if (!e.target.closest("button")) openAttempt(a.attemptId); });
    const o = a.outcome || {};
    row.append(el("td", "", a.attemptId), el("td", "", a.state), el("td", "", o.status || "-"), el("td", "", o.code || "-"),
      el("td", "", a.events), renderTimeline(a, now));
    if (manage) {
      const cell = el("td");
      if (a.state === "running") {
        const button = el("button", "cancel", "cancel");
        button.addEventListener("click", () => cancelAttempt(a.attemptId));
        cell.append(button);
      }
      row.append(cell);
    }
    table.append(row);
  }
  return table;
}

function render(frame) {
  const now = Date.parse(frame.at) || Date.now();
  const byPID = new Map((frame.actors || []).map((a) => [a.pid, a]));
  const tree = document.getElementById("tree");
  const root = frame.actors && frame.actors.length ? renderActor(frame, byPID, frame.actors[0].pid, now) : null;
  tree.replaceChildren(...(root ? [root] : []));
  document.getElementById("attempts").replaceChildren(renderAttempts(frame, now));
  const snap = frame.snapshot;
  document.getElementById("summary").textContent = snap
    ? esc("slots " + (snap.attempts || []).length + "/" + snap.slots + " · queued " + snap.queued + " · build queue " + snap.buildQueue + " · degraded " + snap.degraded + " · " + frame.at)
    : esc(frame.at);
  previous = { at: now, byPID };
  latestFrame = frame;
  if (snap) {
    history.push({ t: now, used: (snap.attempts || []).length, slots: snap.slots, queued: snap.queued });
    while (history.length && history[0].t < now - historyMillis) history.shift();
    drawSlots(now);
  }
  refreshAttempt(frame);
  document.body.dataset.frames = String((Number(document.body.dataset.frames) || 0) + 1);
}

// drawSlots charts the slots in use and the queue over the last minutes,
// against the slot count.
function drawSlots(now) {
  const slots = Math.max(...history.map((h) => h.slots || 0));
  const top = Math.max(slots, ...history.map((h) => h.queued || 0), 1);
  const svg = lineChart({
    title: "slots and queue", width: 520, height: 140, t0: Math.min(history[0].t, now - 60 * 1000), t1: now, yMax: top + 1,
    yLabel: (v) => v.toFixed(v % 1 ? 1 : 0),
    series: [
      { name: "slots used", colour: "#43a047", points: history.map((h) => ({ t: h.t, v: h.used })) },
      { name: "queued", colour: "#fb8c00", points: history.map((h) => ({ t: h.t, v: h.queued || 0 })) },
    ],
    limits: [{ name: "slots", value: slots, colour: "#546e7a" }],
  });
  document.getElementById("slots-chart").replaceChildren(svg);
}

// cancelAttempt asks the daemon to cancel an attempt, with the token the
// operator typed (sent only in the Authorization header). The JSON content
// type and X-Forged-Client are the daemon's guard on state-changing
// requests: a same-origin page may send them, another origin may not.
async function cancelAttempt(id) {
  const result = document.getElementById("manage-result");
  const token = document.getElementById("token").value.trim();
  try {
    const res = await fetch("/v1/console/attempts/" + encodeURIComponent(id), {
      method: "DELETE",
      headers: { Authorization: "Bearer " + token, "Content-Type": "application/json", "X-Forged-Client": "1" },
    });
    result.textContent = esc(res.ok ? "cancelling " + id : "refused (" + res.status + ")");
  } catch (err) {
    result.textContent = esc("failed: " + err);
  }
}

async function loadConfig() {
  try {
    const res = await fetch("/v1/console/config");
    if (res.ok) manage = Boolean((await res.json()).manage);
  } catch (err) { /* read-only */ }
  document.getElementById("manage").hidden = !manage;
}

function connect() {
  const status = document.getElementById("status");
  const source = new EventSource("/v1/inspect/stream");
  source.addEventListener("open", () => { status.textContent = "live"; status.className = "status ok"; });
  source.addEventListener("error", () => { status.textContent = "disconnected; retrying"; status.className = "status down"; });
  source.addEventListener("frame", (e) => {
    try { render(JSON.parse(e.data)); } catch (err) { status.textContent = esc("bad frame: " + err); status.className = "status down"; }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("av-close").addEventListener("click", closeAttempt);
  loadConfig().finally(connect);
});
