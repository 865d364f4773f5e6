// The console's fleet view: the directory of GET /v1/fleet (members,
// their capacity and running attempts, draining or cut off from etcd),
// shown when the daemon is a member of a fleet. Read every fleetMillis,
// not every frame: each read asks every member for its state. Uses esc and
// el (console.js); every string goes in with textContent.
"use strict";

const fleetMillis = 5000;

function memberState(m) {
  if (m.error) return "unreachable: " + m.error;
  if (m.cutOff) return "cut off from etcd";
  if (m.draining) return "draining";
  return m.preflightAvailable ? "ok" : "preflight: " + (m.preflightCode || "unavailable");
}

function renderFleet(dir) {
  const table = el("table");
  const head = el("tr");
  for (const h of ["runner", "address", "slots", "free", "active", "queued", "state", "attempts"]) head.append(el("th", "", h));
  table.append(head);
  for (const m of dir.members || []) {
    const row = el("tr", m.error ? "member unreachable" : m.cutOff || m.draining ? "member draining" : "member");
    row.dataset.runner = esc(m.runnerId || "");
    const self = m.runnerId && m.runnerId === dir.runnerId;
    const runner = el("td", "", (m.runnerId || "?") + (self ? " (this daemon)" : ""));
    if (m.error) {
      row.append(runner, el("td", "", m.address), el("td", "", "-"), el("td", "", "-"), el("td", "", "-"), el("td", "", "-"),
        el("td", "state", memberState(m)), el("td", "", "-"));
    } else {
      row.append(runner, el("td", "", m.address), el("td", "", m.slots), el("td", "", m.freeSlots), el("td", "", m.active),
        el("td", "", m.queued), el("td", "state", memberState(m)), el("td", "", (m.attempts || []).join(", ") || "-"));
    }
    table.append(row);
  }
  return table;
}

// loadFleet reads the directory once and shows it; false when the daemon
// is no member (nothing more to read).
async function loadFleet() {
  const view = document.getElementById("fleet-view");
  try {
    const res = await fetch("/v1/fleet");
    if (!res.ok) return true; // try again later
    const dir = await res.json();
    if (!dir.member) {
      view.hidden = true;
      document.body.dataset.fleet = "alone";
      return false;
    }
    document.getElementById("fleet-name").textContent = esc(dir.fleet + " · " + (dir.members || []).length + " members");
    document.getElementById("fleet").replaceChildren(renderFleet(dir));
    view.hidden = false;
    document.body.dataset.fleetReads = String((Number(document.body.dataset.fleetReads) || 0) + 1);
  } catch (err) { /* the daemon is away: the next read tells */ }
  return true;
}

async function followFleet() {
  if (await loadFleet()) setTimeout(followFleet, fleetMillis);
}

document.addEventListener("DOMContentLoaded", followFleet);
