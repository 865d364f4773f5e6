// forged's console: the attempt view, opened by clicking an attempt. It
// follows the attempt's events (GET /v1/attempts/{id}/events, NDJSON)
// until its outcome, charts its memory (GET /v1/attempts/{id}/memory)
// against the container's limit, and shows its actor subtree and sidecars
// from the frames the page already receives. Every daemon string goes in
// with textContent after esc().
"use strict";

// maxEventLines bounds the events kept in the view (the daemon's log is
// bounded too; this keeps the page light).
const maxEventLines = 2000;

let selected = null; // {id, abort, outcome, memoryBusy, memoryDone}

function openAttempt(id) {
  if (selected && selected.id === id) return;
  closeAttempt();
  selected = { id, abort: new AbortController(), outcome: null, memoryBusy: false, memoryDone: false };
  const view = document.getElementById("attempt-view");
  view.hidden = false;
  view.dataset.attempt = esc(id);
  document.getElementById("av-title").textContent = esc("Attempt " + id);
  for (const part of ["av-outcome", "av-memory", "av-actors", "av-sidecars", "av-events"]) document.getElementById(part).replaceChildren();
  document.getElementById("av-outcome").append(el("span", "muted", "running…"));
  for (const row of document.querySelectorAll("tr[data-attempt]")) row.classList.toggle("selected", row.dataset.attempt === esc(id));
  followEvents(selected);
  refreshAttempt(latestFrame);
}

function closeAttempt() {
  if (selected) selected.abort.abort();
  selected = null;
  document.getElementById("attempt-view").hidden = true;
  for (const row of document.querySelectorAll("tr.selected")) row.classList.remove("selected");
}

// followEvents reads the NDJSON stream line by line as it arrives; the
// daemon ends it after the "finished" line.
async function followEvents(sel) {
  const list = document.getElementById("av-events");
  const status = document.getElementById("av-stream");
  status.textContent = "following…";
  try {
    const res = await fetch("/v1/attempts/" + encodeURIComponent(sel.id) + "/events", { signal: sel.abort.signal });
    if (!res.ok) { status.textContent = esc("events refused (" + res.status + ")"); return; }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.trim() !== "") onStreamLine(sel, list, JSON.parse(line));
      }
    }
    if (selected === sel) status.textContent = sel.outcome ? "finished" : "stream ended";
  } catch (err) {
    if (selected === sel && err.name !== "AbortError") status.textContent = esc("events failed: " + err);
  }
}

function onStreamLine(sel, list, line) {
  if (selected !== sel) return;
  if (line.type === "event" && line.event) {
    const e = line.event;
    const li = el("li", "event " + (e.kind === "error" ? "error" : ""));
    li.dataset.eventType = esc(e.eventType);
    li.append(el("span", "at", (e.occurredAt || "").slice(11, 23)), " ", el("span", "role", e.role), " ",
      el("span", "type", e.eventType), " ", el("span", "content", e.content));
    const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    list.append(li);
    while (list.children.length > maxEventLines) list.firstChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
  } else if (line.type === "finished" && line.outcome) {
    sel.outcome = line.outcome;
    renderOutcome(line.outcome);
    refreshMemory(sel);
  }
}

function renderOutcome(o) {
  const box = document.getElementById("av-outcome");
  const head = el("div", "outcome-head");
  head.dataset.status = esc(o.status);
  head.append(el("span", "status-" + (o.status === "succeeded" ? "ok" : "bad"), o.status), " ",
    el("span", "code", o.code || ""), " ", el("span", "", o.message || ""));
  const facts = [];
  if (o.phase) facts.push("phase " + o.phase);
  if (o.workerExitCode !== undefined && o.workerExitCode !== null) facts.push("exit " + o.workerExitCode);
  if (o.peakMemoryBytes) facts.push("peak " + formatBytes(o.peakMemoryBytes));
  if (o.resultCommitSha) facts.push("commit " + o.resultCommitSha.slice(0, 12));
  if (o.degraded) facts.push("DEGRADED");
  if (o.finishedAt) facts.push("finished " + o.finishedAt);
  box.replaceChildren(head, el("div", "facts", facts.join(" · ")));
  const tel = o.telemetry;
  if (tel && tel.containers && tel.containers.length) {
    const t = el("table", "telemetry");
    const hr = el("tr");
    for (const h of ["container", "role", "source", "peak", "cpu", "throttled", "oom kills"]) hr.append(el("th", "", h));
    t.append(hr);
    for (const c of tel.containers) {
      const r = el("tr");
      r.append(el("td", "", c.name), el("td", "", c.role), el("td", "", c.source), el("td", "", formatBytes(c.peakMemoryBytes)),
        el("td", "", ((c.cpuUsageNanos || 0) / 1e9).toFixed(2) + "s"), el("td", "", ((c.cpuThrottledNanos || 0) / 1e9).toFixed(2) + "s"),
        el("td", "", c.oomKills || 0));
      t.append(r);
    }
    box.append(t);
  }
  const cleanup = el("div", "cleanup");
  if (o.cleanup) {
    const c = o.cleanup;
    cleanup.append(el("div", "", "cleanup (" + c.source + "): " + (c.actions || []).length + " removals, " +
      c.remaining + (c.remainingUnknown ? "+ (engine not listed)" : "") + " remaining"));
    const t = el("table", "cleanup-actions");
    for (const a of c.actions || []) {
      const r = el("tr");
      r.append(el("td", "", a.resourceType), el("td", "", a.resourceId), el("td", "", a.outcome),
        el("td", "", a.message || ""));
      t.append(r);
    }
    cleanup.append(t);
  } else {
    cleanup.append(el("div", "muted", "no cleanup report"));
  }
  box.append(cleanup);
}

// refreshAttempt redraws the parts that come from the frame (the actor
// subtree and the sidecars) and refreshes the memory chart.
function refreshAttempt(frame) {
  const sel = selected;
  if (!sel || !frame) return;
  const byPID = new Map((frame.actors || []).map((a) => [a.pid, a]));
  const attempt = (frame.actors || []).find((a) => a.kind === "attempt" && a.facts && a.facts.attemptId === sel.id);
  const actors = document.getElementById("av-actors");
  const sidecars = document.getElementById("av-sidecars");
  if (attempt) {
    actors.replaceChildren(renderActor(frame, byPID, attempt.pid, Date.parse(frame.at) || Date.now()));
    const found = [];
    const walk = (pid) => {
      const a = byPID.get(pid);
      if (!a) return;
      if (a.kind === "service" || a.kind === "egress") found.push(a);
      for (const c of a.children || []) walk(c);
    };
    walk(attempt.pid);
    const t = el("table", "sidecars");
    const hr = el("tr");
    for (const h of ["sidecar", "phase", "health", "image", "container"]) hr.append(el("th", "", h));
    t.append(hr);
    for (const s of found) {
      const f = s.facts || {};
      const r = el("tr");
      r.dataset.kind = esc(s.kind);
      r.append(el("td", "", s.kind + " " + (f.service || f.alias || "")), el("td", "", s.phase), el("td", "health", f.health || "-"),
        el("td", "", f.image || ""), el("td", "", f.container || (f.containerId || "").slice(0, 12)));
      t.append(r);
    }
    sidecars.replaceChildren(found.length ? t : el("div", "muted", "no sidecars"));
  } else {
    actors.replaceChildren(el("div", "muted", sel.outcome || isFinished(frame, sel.id) ? "finished: its actors are gone" : "not in the tree yet"));
    if (!sidecars.firstChild) sidecars.replaceChildren(el("div", "muted", "no live sidecars"));
  }
  refreshMemory(sel);
}

function isFinished(frame, id) {
  const a = (frame.attempts || []).find((x) => x.attemptId === id);
  return Boolean(a && a.state === "finished");
}

// refreshMemory fetches the memory series (one request at a time; once
// more after the outcome, then no more) and redraws the chart.
async function refreshMemory(sel) {
  if (sel.memoryBusy || sel.memoryDone) return;
  sel.memoryBusy = true;
  const last = Boolean(sel.outcome);
  try {
    const res = await fetch("/v1/attempts/" + encodeURIComponent(sel.id) + "/memory", { signal: sel.abort.signal });
    if (res.ok && selected === sel) drawMemory(await res.json());
    sel.memoryDone = last;
  } catch (err) { /* next frame retries */ }
  sel.memoryBusy = false;
}

function drawMemory(series) {
  const box = document.getElementById("av-memory");
  const samples = series.samples || [];
  if (!samples.length) {
    box.replaceChildren(el("div", "muted", "no memory readings yet"));
    return;
  }
  const points = samples.map((s) => ({ t: Date.parse(s.at), v: s.usageBytes }));
  const peak = Math.max(...points.map((p) => p.v));
  const lastSample = samples[samples.length - 1];
  const svg = lineChart({
    title: "memory of " + series.attemptId, t0: points[0].t, t1: points[points.length - 1].t,
    yMax: Math.max(series.limitBytes || 0, peak) * 1.05, yLabel: formatBytes,
    series: [{ name: "memory", colour: "#1e88e5", points }],
    limits: [{ name: "limit", value: series.limitBytes, colour: "#e53935" }],
  });
  const caption = el("div", "legend", samples.length + " readings · last " + formatBytes(lastSample.usageBytes) + " · peak " + formatBytes(peak) +
    (series.limitBytes ? " · limit " + formatBytes(series.limitBytes) : "") +
    " · CPU throttled " + ((lastSample.cpuThrottledNanos || 0) / 1e9).toFixed(2) + "s");
  box.replaceChildren(svg, caption);
}
