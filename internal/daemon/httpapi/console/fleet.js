// The console's fleet view: the directory of GET /v1/fleet (members,
// their capacity and running attempts, draining or cut off from etcd),
// shown when the daemon is a member of a fleet. Read every fleetMillis,
// not every frame: each read asks every member for its state. A member's
// "tree" button opens its live actor tree (GET
// /v1/fleet/members/{runnerId}/inspect, read through the cluster), read
// again with each directory read while it is open. Uses esc, el and
// renderActor (console.js); every string goes in with textContent.
"use strict";

const fleetMillis = 5000;
let shownMember = null; // the runner id whose tree is open, or null

function memberState(m) {
  if (m.error) return "unreachable: " + m.error;
  if (m.cutOff) return "cut off from etcd";
  if (m.draining) return "draining";
  return m.preflightAvailable ? "ok" : "preflight: " + (m.preflightCode || "unavailable");
}

function renderFleet(dir) {
  const table = el("table");
  const head = el("tr");
  for (const h of ["runner", "address", "slots", "free", "active", "queued", "state", "attempts", ""]) head.append(el("th", "", h));
  table.append(head);
  for (const m of dir.members || []) {
    const row = el("tr", m.error ? "member unreachable" : m.cutOff || m.draining ? "member draining" : "member");
    row.dataset.runner = esc(m.runnerId || "");
    const self = m.runnerId && m.runnerId === dir.runnerId;
    const runner = el("td", "", (m.runnerId || "?") + (self ? " (this daemon)" : ""));
    if (m.error) {
      row.append(runner, el("td", "", m.address), el("td", "", "-"), el("td", "", "-"), el("td", "", "-"), el("td", "", "-"),
        el("td", "state", memberState(m)), el("td", "", "-"), el("td"));
    } else {
      const open = el("button", "member-tree", "tree");
      open.type = "button";
      open.addEventListener("click", () => showMember(m.runnerId));
      const cell = el("td");
      cell.append(open);
      row.append(runner, el("td", "", m.address), el("td", "", m.slots), el("td", "", m.freeSlots), el("td", "", m.active),
        el("td", "", m.queued), el("td", "state", memberState(m)), el("td", "", (m.attempts || []).join(", ") || "-"), cell);
    }
    table.append(row);
  }
  return table;
}

// loadMember reads the open member's tree once and shows it, or the
// daemon's refusal (a member gone from the fleet, one that did not answer).
async function loadMember() {
  const id = shownMember;
  if (id === null) return;
  const state = document.getElementById("mv-state");
  const tree = document.getElementById("mv-tree");
  try {
    const res = await fetch("/v1/fleet/members/" + encodeURIComponent(id) + "/inspect");
    if (shownMember !== id) return; // closed or switched meanwhile
    const body = await res.json();
    if (!res.ok) {
      state.textContent = esc("unreachable: " + (body.code || res.status) + ": " + (body.message || ""));
      tree.replaceChildren();
    } else {
      const byPID = new Map(body.map((a) => [a.pid, a]));
      const root = body.length ? renderActor(null, byPID, body[0].pid, Date.now()) : null;
      tree.replaceChildren(...(root ? [root] : []));
      state.textContent = esc("read " + new Date().toLocaleTimeString());
    }
    document.body.dataset.memberReads = String((Number(document.body.dataset.memberReads) || 0) + 1);
  } catch (err) {
    state.textContent = esc("unreachable: " + err);
  }
}

function showMember(id) {
  shownMember = id;
  document.getElementById("mv-title").textContent = esc(id);
  document.getElementById("mv-state").textContent = "reading…";
  document.getElementById("mv-tree").replaceChildren();
  document.getElementById("member-view").hidden = false;
  loadMember();
}

function closeMember() {
  shownMember = null;
  document.getElementById("member-view").hidden = true;
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
    loadMember();
  } catch (err) { /* the daemon is away: the next read tells */ }
  return true;
}

async function followFleet() {
  if (await loadFleet()) setTimeout(followFleet, fleetMillis);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("mv-close").addEventListener("click", closeMember);
  followFleet();
});
