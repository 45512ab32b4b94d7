// privfit dashboard: DOM construction and number/time formatting.
//
// Every string from the server enters the page as a text node (createTextNode / textContent); nothing here
// parses HTML.

/**
 * Create an element.
 * @param {string} tag Tag name.
 * @param {object} [attrs] Attributes; `class`, `text` (textContent), `dataset`-style `data-*`, `on<event>`
 *   handlers (functions), booleans (present when true), others set with setAttribute.
 * @param {...(Node|string|number|null|undefined|false)} children Nodes or strings (as text nodes).
 * @returns {HTMLElement}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  append(node, children);
  return node;
}

/**
 * Append children (nodes or strings, nested arrays allowed; null/false skipped).
 * @param {Node} node
 * @param {Array} children
 * @returns {Node}
 */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * Replace all children of a node.
 * @param {Node} node
 * @param {...any} children
 * @returns {Node}
 */
export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/**
 * A number with a fixed count of decimals. The API writes an infinite ε as null (JSON has no ∞): null is shown
 * as ∞, a missing value as an em dash.
 * @param {number|null|undefined} value
 * @param {number} [digits=3]
 * @returns {string}
 */
export function fmtNumber(value, digits = 3) {
  if (value === null) return "∞";
  if (value === undefined) return "—";
  if (typeof value !== "number" || Number.isNaN(value)) return "—";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "−∞";
  return value.toFixed(digits);
}

/**
 * A δ such as 1e-6 or 2.5e-7.
 * @param {number|null|undefined} value
 * @returns {string}
 */
export function fmtDelta(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  if (value === 0) return "0";
  return Number(value.toPrecision(3)).toExponential().replace("e-", "e−").replace("e+", "e");
}

/**
 * An order α: integers without decimals, others with one.
 * @param {number|null|undefined} value
 * @returns {string}
 */
export function fmtOrder(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/**
 * An integer with thousands separators.
 * @param {number} value
 * @returns {string}
 */
export function fmtInt(value) {
  return typeof value === "number" ? value.toLocaleString("en-US") : "—";
}

/**
 * Parse an API timestamp. The API writes UTC with its offset ("2026-01-02T03:04:05.123456+00:00"); one without
 * an offset (older servers on SQLite) is taken as UTC. Fractions beyond milliseconds are dropped.
 * @param {string|null|undefined} text
 * @returns {Date|null}
 */
export function parseTime(text) {
  if (!text) return null;
  let iso = String(text).replace(/(\.\d{3})\d+/, "$1");
  if (!/(Z|[+-]\d\d:?\d\d)$/.test(iso)) iso += "Z";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? null : date;
}

/**
 * A timestamp in the browser's locale, to the second.
 * @param {string|null|undefined} text
 * @returns {string}
 */
export function fmtTime(text) {
  const date = parseTime(text);
  if (!date) return "—";
  return date.toLocaleString("en-GB", {
    year: "numeric", month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

/**
 * A compact timestamp: the time of day for today, else the day and the time to the minute.
 * @param {string|null|undefined} text
 * @returns {string}
 */
export function fmtClock(text) {
  const date = parseTime(text);
  if (!date) return "—";
  const now = new Date();
  if (date.toDateString() === now.toDateString()) {
    return date.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }
  return date.toLocaleString("en-GB", { day: "2-digit", month: "short", hour: "2-digit", minute: "2-digit" });
}

/**
 * A duration between two API timestamps, e.g. "4.2 s" or "3 min 5 s".
 * @param {string|null|undefined} start
 * @param {string|null|undefined} end
 * @returns {string}
 */
export function fmtDuration(start, end) {
  const a = parseTime(start);
  const b = parseTime(end);
  if (!a || !b) return "—";
  const seconds = Math.max(0, (b - a) / 1000);
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds - 60 * minutes)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/**
 * A short id for display (first block of a UUID).
 * @param {string} id
 * @returns {string}
 */
export function shortId(id) {
  return String(id).split("-")[0];
}

/**
 * A number element with its raw value in `data-value` (tests compare it with the API's JSON).
 * @param {number|null|undefined} value
 * @param {string} testid data-testid of the element.
 * @param {(v: any) => string} [format]
 * @param {string} [tag="span"]
 * @returns {HTMLElement}
 */
export function num(value, testid, format = (v) => fmtNumber(v), tag = "span") {
  const raw = value === null ? "inf" : value === undefined ? "" : value;
  return el(tag, { class: "num", "data-testid": testid, "data-value": raw, text: format(value) });
}

/**
 * What a dataset's `n` counts: rows, or the privacy units of a user-level dataset (its public size; the number of
 * rows is then not public).
 * @param {object} dataset The dataset (its `privacy_unit`: null, or {column, max_rows, units}).
 * @returns {string} " rows", or " units of “column” (≤ k rows each)".
 */
export function sizeUnit(dataset) {
  const unit = dataset.privacy_unit;
  return unit ? ` units of “${unit.column}” (≤ ${fmtInt(unit.max_rows)} rows each)` : " rows";
}
