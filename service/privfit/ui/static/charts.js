// privfit dashboard: hand-written SVG charts (budget gauge, burn-down step chart, spent RDP curve).
//
// Charts are drawn in a fixed viewBox and scaled by CSS; all labels are SVG text nodes (textContent), all
// styling comes from classes in app.css (the CSP forbids inline styles).

import { el, fmtNumber, fmtOrder, parseTime } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * Create an SVG element.
 * @param {string} tag
 * @param {object} [attrs] Attributes (`text` sets textContent).
 * @param {...Node} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) if (child) node.appendChild(child);
  return node;
}

/**
 * Round-number ticks covering [min, max] (about `count` of them).
 * @param {number} min
 * @param {number} max
 * @param {number} [count=5]
 * @returns {number[]}
 */
export function niceTicks(min, max, count = 5) {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) || 10 * power;
  const ticks = [];
  for (let t = Math.ceil(min / step - 1e-9) * step; t <= max + step * 1e-9; t += step) {
    ticks.push(Math.round(t / step) * step);
  }
  return ticks;
}

/** A linear scale from [d0, d1] to [r0, r1]. */
function linear(d0, d1, r0, r1) {
  const span = d1 - d0 || 1;
  return (v) => r0 + ((v - d0) / span) * (r1 - r0);
}

/** Fixed-precision SVG coordinate. */
const c = (v) => Math.round(v * 10) / 10;

/**
 * The budget gauge: committed ε as a bar over ε_max, the charged part and the reserved (queued, not yet
 * charged) part in distinct colours, with a one-line summary "ε 1.00 of 3.00 spent · 2.00 left".
 * @param {object} budget The JSON of GET /v1/datasets/{id}/budget.
 * @returns {HTMLElement}
 */
export function budgetGauge(budget) {
  const max = budget.epsilon_max;
  const committed = budget.committed_epsilon;
  // ε of a composition is at most the sum of the parts' ε: the charged part alone is <= committed, and the rest
  // of the committed ε is due to reservations of fits that have not started yet.
  const charged = Math.min(budget.charged_epsilon, committed);
  const reserved = Math.max(0, committed - charged);
  const pct = (v) => Math.max(0, Math.min(100, (100 * v) / max));
  const bar = svg("svg", {
    class: "gauge-bar", viewBox: "0 0 100 8", preserveAspectRatio: "none", role: "img",
    "aria-label": `ε ${fmtNumber(committed, 2)} of ${fmtNumber(max, 2)} committed`,
  },
  svg("rect", { class: "gauge-track", x: 0, y: 0, width: 100, height: 8, rx: 0 }),
  svg("rect", { class: "gauge-charged", x: 0, y: 0, width: pct(charged), height: 8, "data-testid": "gauge-charged-bar" }),
  svg("rect", {
    class: "gauge-reserved", x: pct(charged), y: 0, width: Math.max(0, pct(charged + reserved) - pct(charged)),
    height: 8, "data-testid": "gauge-reserved-bar",
  }));
  const exhausted = budget.remaining_epsilon <= 1e-12;
  const summary = el("div", { class: "gauge-text" },
    el("span", {}, "ε "),
    el("strong", { "data-testid": "gauge-committed", "data-value": committed, text: fmtNumber(committed, 2) }),
    " of ",
    el("span", { "data-testid": "gauge-max", "data-value": max, text: fmtNumber(max, 2) }),
    " spent · ",
    el("strong", {
      class: exhausted ? "gauge-left gauge-left-none" : "gauge-left", "data-testid": "gauge-remaining",
      "data-value": budget.remaining_epsilon, text: fmtNumber(budget.remaining_epsilon, 2),
    }),
    " left",
    reserved > 0
      ? el("span", { class: "gauge-reserved-note" }, " (",
        el("span", { "data-testid": "gauge-reserved", "data-value": reserved, text: fmtNumber(reserved, 2) }),
        " reserved by queued fits)")
      : null);
  return el("div", { class: "gauge", "data-testid": "budget-gauge" }, bar, summary);
}

/** Candidate tick spacings of a time axis, in milliseconds. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
  172800, 604800, 1209600, 2592000, 7776000, 31536000].map((s) => s * 1000);

/**
 * Ticks of a time axis in local time, with a label format that suits the span.
 * @param {number} t0 Start (ms since epoch).
 * @param {number} t1 End (ms since epoch).
 * @returns {{ticks: number[], label: (t: number) => string}}
 */
function timeTicks(t0, t1) {
  const span = t1 - t0;
  const step = TIME_STEPS.find((s) => span / s <= 6) || TIME_STEPS[TIME_STEPS.length - 1];
  const offset = new Date(t0).getTimezoneOffset() * 60000; // align day-sized steps on local midnight
  const ticks = [];
  for (let t = Math.ceil((t0 - offset) / step) * step + offset; t <= t1; t += step) ticks.push(t);
  const pad = (n) => String(n).padStart(2, "0");
  const label = (t) => {
    const d = new Date(t);
    if (step >= 86400000) return d.toLocaleDateString("en-GB", { day: "2-digit", month: "short" });
    if (step >= 60000) return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  };
  return { ticks, label };
}

/**
 * The burn-down series: the start (dataset creation, ε_max), then one point per ledger entry with the
 * remaining ε right after it (ε_max − committed_epsilon_after).
 * @param {object} dataset The dataset JSON (for created_at).
 * @param {object} budget The budget JSON (for epsilon_max).
 * @param {object[]} entries Ledger entries, oldest first.
 * @returns {{time: number, remaining: number, kind: string, entry: object|null}[]}
 */
export function burndownSeries(dataset, budget, entries) {
  const max = budget.epsilon_max;
  const start = parseTime(dataset.created_at);
  const points = [{ time: start ? start.getTime() : Date.now(), remaining: max, kind: "start", entry: null }];
  for (const entry of entries) {
    const time = parseTime(entry.created_at);
    const committed = entry.committed_epsilon_after;
    points.push({
      time: time ? time.getTime() : points[points.length - 1].time,
      remaining: committed === null || committed === undefined ? 0 : Math.max(0, max - committed),
      kind: entry.kind,
      entry,
    });
  }
  return points;
}

const KIND_LABEL = { start: "dataset registered", reservation: "reservation", charge: "charge", release: "release" };

/**
 * The burn-down chart: remaining ε as a step function of time, the ε_max line, axes and labels, and one
 * circle (`data-point`) per point of the series. The last level is drawn on to `now`.
 * @param {ReturnType<typeof burndownSeries>} points
 * @param {number} epsilonMax
 * @param {number} [now] ms since epoch (defaults to the current time).
 * @returns {SVGElement}
 */
export function burndownChart(points, epsilonMax, now = Date.now()) {
  const W = 560, H = 250, M = { left: 46, right: 18, top: 18, bottom: 40 };
  const t0 = points[0].time;
  const last = points[points.length - 1].time;
  let t1 = Math.max(last, now);
  if (t1 - t0 < 10000) t1 = t0 + 10000;
  const padT = (t1 - t0) * 0.02;
  const x = linear(t0 - padT, t1 + padT, M.left, W - M.right);
  const yMax = epsilonMax * 1.1;
  const y = linear(0, yMax, H - M.bottom, M.top);

  const root = svg("svg", {
    class: "chart chart-burndown", viewBox: `0 0 ${W} ${H}`, role: "img", "data-testid": "burndown-chart",
    "data-points": points.length, "aria-label": `Remaining ε over time, ${points.length} points`,
  });
  // grid and y axis
  const yAxis = svg("g", { class: "axis axis-y" });
  for (const tick of niceTicks(0, yMax, 5)) {
    if (tick > yMax) continue;
    yAxis.append(
      svg("line", { class: "grid", x1: M.left, x2: W - M.right, y1: c(y(tick)), y2: c(y(tick)) }),
      svg("text", { x: M.left - 6, y: c(y(tick)) + 3.5, "text-anchor": "end", text: fmtNumber(tick, 2) }),
    );
  }
  yAxis.append(svg("text", {
    class: "axis-title", x: 12, y: (M.top + H - M.bottom) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(M.top + H - M.bottom) / 2})`, text: "remaining ε",
  }));
  // x axis
  const xAxis = svg("g", { class: "axis axis-x" },
    svg("line", { class: "axis-line", x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom }));
  const { ticks, label } = timeTicks(t0, t1);
  for (const tick of ticks) {
    xAxis.append(
      svg("line", { class: "tick", x1: c(x(tick)), x2: c(x(tick)), y1: H - M.bottom, y2: H - M.bottom + 4 }),
      svg("text", { x: c(x(tick)), y: H - M.bottom + 16, "text-anchor": "middle", text: label(tick) }),
    );
  }
  xAxis.append(svg("text", {
    class: "axis-title", x: (M.left + W - M.right) / 2, y: H - 4, "text-anchor": "middle", text: "time (local)",
  }));
  root.append(yAxis, xAxis);

  // ε_max reference line
  root.append(svg("g", { class: "ref-line" },
    svg("line", { x1: M.left, x2: W - M.right, y1: c(y(epsilonMax)), y2: c(y(epsilonMax)) }),
    svg("text", { x: W - M.right - 2, y: c(y(epsilonMax)) - 5, "text-anchor": "end",
      text: `ε_max = ${fmtNumber(epsilonMax, 2)}` })));

  // the step function: horizontal to the next entry's time, then vertical to its level
  let d = `M${c(x(points[0].time))},${c(y(points[0].remaining))}`;
  for (const p of points.slice(1)) d += `H${c(x(p.time))}V${c(y(p.remaining))}`;
  d += `H${c(x(t1))}`;
  const area = `${d}V${c(y(0))}H${c(x(points[0].time))}Z`;
  root.append(svg("path", { class: "burndown-area", d: area }), svg("path", { class: "burndown-line", d }));

  // one marker per point
  const markers = svg("g", { class: "points" });
  points.forEach((p, i) => {
    const what = p.entry
      ? `${KIND_LABEL[p.kind] || p.kind}${p.entry.description ? ` (${p.entry.description})` : ""}: ` +
        `fit ε ${fmtNumber(p.entry.epsilon)}`
      : KIND_LABEL.start;
    // a reservation is a ring around the spot, so the charge that follows it a moment later stays visible
    markers.append(svg("circle", {
      class: `point point-${p.kind}`, cx: c(x(p.time)), cy: c(y(p.remaining)), r: p.kind === "reservation" ? 6 : 3.5,
      "data-point": i,
      "data-kind": p.kind, "data-remaining": p.remaining,
    }, svg("title", { text: `${new Date(p.time).toLocaleString("en-GB")} · ${what} · remaining ε ${fmtNumber(p.remaining)}` })));
  });
  root.append(markers);
  return root;
}

/** Log-scale ticks 1, 2, 5, 10, 20, 50, … inside [lo, hi]. */
function logTicks(lo, hi) {
  const ticks = [];
  for (let p = Math.floor(Math.log10(lo)); 10 ** p <= hi; p += 1) {
    for (const m of [1, 2, 5]) {
      const t = m * 10 ** p;
      if (t >= lo && t <= hi) ticks.push(t);
    }
  }
  return ticks;
}

/**
 * The spent RDP curve: committed ε(α) against the order α (log scale). Orders where ε(α) is null (+∞) are
 * not plotted; the returned note says how many there are.
 * @param {number[]} orders The budget's grid of orders.
 * @param {(number|null)[]} values committed_rdp, one per order.
 * @param {number} [optimalOrder] The order at which the committed ε is attained (marked).
 * @returns {{chart: SVGElement, note: string, plotted: number, infinite: number}}
 */
export function rdpChart(orders, values, optimalOrder) {
  const W = 560, H = 250, M = { left: 52, right: 18, top: 18, bottom: 40 };
  const finite = [];
  let infinite = 0;
  orders.forEach((a, i) => {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) infinite += 1;
    else finite.push([a, v]);
  });
  const lo = Math.min(...orders);
  const hi = Math.max(...orders);
  const lx = linear(Math.log10(lo), Math.log10(hi), M.left, W - M.right);
  const x = (a) => lx(Math.log10(a));
  const top = Math.max(0, ...finite.map(([, v]) => v));
  const yMax = top > 0 ? top * 1.1 : 1;
  const y = linear(0, yMax, H - M.bottom, M.top);

  const root = svg("svg", {
    class: "chart chart-rdp", viewBox: `0 0 ${W} ${H}`, role: "img", "data-testid": "rdp-chart",
    "data-plotted": finite.length, "data-infinite": infinite,
    "aria-label": `Committed RDP ε(α) at ${finite.length} orders`,
  });
  const yAxis = svg("g", { class: "axis axis-y" });
  const yTicks = niceTicks(0, yMax, 5).filter((t) => t <= yMax);
  const digits = yMax < 0.05 ? 4 : yMax < 1 ? 3 : yMax < 100 ? 2 : 0;
  for (const tick of yTicks) {
    yAxis.append(
      svg("line", { class: "grid", x1: M.left, x2: W - M.right, y1: c(y(tick)), y2: c(y(tick)) }),
      svg("text", { x: M.left - 6, y: c(y(tick)) + 3.5, "text-anchor": "end", text: fmtNumber(tick, digits) }),
    );
  }
  yAxis.append(svg("text", {
    class: "axis-title", x: 12, y: (M.top + H - M.bottom) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(M.top + H - M.bottom) / 2})`, text: "committed ε(α)",
  }));
  const xAxis = svg("g", { class: "axis axis-x" },
    svg("line", { class: "axis-line", x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom }));
  for (const tick of logTicks(lo, hi)) {
    xAxis.append(
      svg("line", { class: "grid grid-x", x1: c(x(tick)), x2: c(x(tick)), y1: M.top, y2: H - M.bottom }),
      svg("text", { x: c(x(tick)), y: H - M.bottom + 16, "text-anchor": "middle", text: String(tick) }),
    );
  }
  xAxis.append(svg("text", {
    class: "axis-title", x: (M.left + W - M.right) / 2, y: H - 4, "text-anchor": "middle",
    text: "Rényi order α (log scale)",
  }));
  root.append(yAxis, xAxis);

  // the curve, broken where ε(α) is infinite
  const segments = [];
  let current = [];
  orders.forEach((a, i) => {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      if (current.length) segments.push(current);
      current = [];
    } else current.push(`${c(x(a))},${c(y(v))}`);
  });
  if (current.length) segments.push(current);
  for (const seg of segments) {
    if (seg.length === 1) {
      const [cx, cy] = seg[0].split(",");
      root.append(svg("circle", { class: "rdp-dot", cx, cy, r: 2.5 }));
    } else {
      root.append(svg("polyline", { class: "rdp-line", points: seg.join(" ") }));
    }
  }
  // the filter's pinned order α*, where its RDP certificate reads the committed curve
  const optimalIndex = orders.indexOf(optimalOrder);
  if (top > 0 && optimalIndex >= 0 && Number.isFinite(values[optimalIndex])) {
    const ox = c(x(optimalOrder));
    const oy = c(y(values[optimalIndex]));
    root.append(svg("g", { class: "rdp-optimal", "data-testid": "rdp-optimal" },
      svg("line", { x1: ox, x2: ox, y1: M.top, y2: H - M.bottom }),
      svg("circle", { cx: ox, cy: oy, r: 4 }),
      svg("text", { x: ox + (ox > W - 120 ? -6 : 6), y: M.top + 12, "text-anchor": ox > W - 120 ? "end" : "start",
        text: `filter order α* = ${fmtOrder(optimalOrder)}` })));
  }
  let note;
  if (infinite > 0) {
    const infOrders = orders.filter((a, i) => !Number.isFinite(values[i] ?? NaN));
    note = `ε(α) = ∞ at ${infinite} of ${orders.length} orders (α ${infOrders.length > 1
      ? `${fmtOrder(Math.min(...infOrders))} … ${fmtOrder(Math.max(...infOrders))}`
      : `= ${fmtOrder(infOrders[0])}`}); they are not plotted.`;
  } else if (top === 0) {
    note = "Nothing committed yet: ε(α) = 0 at every order.";
  } else {
    note = `${finite.length} orders from α = ${fmtOrder(lo)} to ${fmtOrder(hi)}; every ε(α) is finite.`;
  }
  return { chart: root, note, plotted: finite.length, infinite };
}
