// forged's console: line charts drawn by the page itself as inline SVG
// (no library, nothing fetched; the strict CSP allows it). Every label is
// set with textContent after esc().
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = esc(text);
  return e;
}

function formatBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n) || 0, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

// lineChart draws series of {t (ms), v} points over [t0, t1] against a
// y range from 0 to yMax; limits are horizontal dashed lines. Each series
// is one <polyline> with data-series set to its name.
//   opts: {title, width, height, t0, t1, yMax, yLabel(v), series: [{name, colour, points}], limits: [{name, value, colour}]}
function lineChart(opts) {
  const w = opts.width || 640, h = opts.height || 180;
  const pad = { left: 64, right: 12, top: 20, bottom: 22 };
  const svg = svgEl("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, class: "chart", role: "img" });
  svg.append(svgEl("title", {}, opts.title || "chart"));
  const t0 = opts.t0, t1 = Math.max(opts.t1, opts.t0 + 1);
  const yMax = opts.yMax > 0 ? opts.yMax : 1;
  const x = (t) => pad.left + ((t - t0) / (t1 - t0)) * (w - pad.left - pad.right);
  const y = (v) => h - pad.bottom - (Math.min(v, yMax) / yMax) * (h - pad.top - pad.bottom);
  const label = opts.yLabel || ((v) => String(v));
  svg.append(svgEl("rect", { x: pad.left, y: pad.top, width: w - pad.left - pad.right, height: h - pad.top - pad.bottom, fill: "#fff", stroke: "#cfd8dc" }));
  for (const frac of [0, 0.5, 1]) {
    const v = yMax * frac;
    svg.append(svgEl("text", { x: pad.left - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 10, fill: "#607d8b" }, label(v)));
  }
  svg.append(svgEl("text", { x: pad.left, y: h - 6, "font-size": 10, fill: "#607d8b" }, new Date(t0).toISOString().slice(11, 19)));
  svg.append(svgEl("text", { x: w - pad.right, y: h - 6, "text-anchor": "end", "font-size": 10, fill: "#607d8b" }, new Date(t1).toISOString().slice(11, 19)));
  for (const l of opts.limits || []) {
    if (!(l.value > 0)) continue;
    svg.append(svgEl("line", { x1: pad.left, x2: w - pad.right, y1: y(l.value), y2: y(l.value), stroke: l.colour, "stroke-dasharray": "4 3", "data-limit": l.name }));
    svg.append(svgEl("text", { x: w - pad.right - 4, y: y(l.value) - 3, "text-anchor": "end", "font-size": 10, fill: l.colour }, l.name + " " + label(l.value)));
  }
  let lx = pad.left + 4;
  for (const s of opts.series || []) {
    const points = s.points.map((p) => x(p.t).toFixed(1) + "," + y(p.v).toFixed(1)).join(" ");
    svg.append(svgEl("polyline", { points, fill: "none", stroke: s.colour, "stroke-width": 1.5, "data-series": s.name }));
    svg.append(svgEl("text", { x: lx, y: pad.top - 6, "font-size": 10, fill: s.colour }, s.name));
    lx += 12 + 7 * s.name.length;
  }
  return svg;
}
