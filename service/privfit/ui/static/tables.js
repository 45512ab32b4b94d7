// privfit dashboard: tables that sort by column and export as CSV (the coefficient tables).
//
// CSV follows RFC 4180: fields with a comma, a quote or a line break are quoted, quotes doubled, lines end with
// CRLF. A cell that a spreadsheet would run as a formula (=, +, -, @ at its start, on a text cell) is prefixed
// with a single quote. Numbers are written at full precision (the API's JSON value), not as displayed.

import { el } from "./dom.js";

/**
 * One CSV field.
 * @param {string|number|null|undefined} value
 * @returns {string}
 */
export function csvField(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "";
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * A CSV document from a header and rows.
 * @param {string[]} header
 * @param {Array<Array<string|number|null>>} rows
 * @returns {string}
 */
export function toCsv(header, rows) {
  return [header, ...rows].map((row) => row.map(csvField).join(",")).join("\r\n") + "\r\n";
}

/**
 * Offer a text as a file download (a Blob URL on a temporary link; nothing leaves the browser).
 * @param {string} filename
 * @param {string} text
 * @param {string} [type="text/csv"]
 */
export function download(filename, text, type = "text/csv") {
  const url = URL.createObjectURL(new Blob([text], { type: `${type};charset=utf-8` }));
  const link = el("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * Compare two cell values for sorting: numbers numerically, text in the locale's order; missing values last.
 * @param {string|number|null} a
 * @param {string|number|null} b
 * @returns {number}
 */
function compare(a, b) {
  const missingA = a === null || a === undefined;
  const missingB = b === null || b === undefined;
  if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), "en", { numeric: true });
}

/**
 * A table whose header cells sort its body rows (click: ascending, again: descending, a third time: the original
 * order). Rows marked `pinned` (an intercept) stay below the sorted ones.
 *
 * @param {object} spec
 * @param {Array<{label: string, key?: (row: any) => (string|number|null), numeric?: boolean, className?: string}>}
 *   spec.columns Columns; those with `key` are sortable by that value.
 * @param {any[]} spec.rows The data rows, in their original order.
 * @param {any[]} [spec.pinned] Rows kept at the bottom (not sorted).
 * @param {(row: any, pinned: boolean) => HTMLElement} spec.renderRow Build one <tr>.
 * @param {object} [spec.attrs] Attributes of the <table>.
 * @returns {HTMLTableElement}
 */
export function sortableTable({ columns, rows, pinned = [], renderRow, attrs = {} }) {
  const body = el("tbody", {});
  let sortIndex = -1;
  let direction = 0; // 0: original order, 1: ascending, -1: descending
  const headers = columns.map((column, index) => {
    if (!column.key) return el("th", { class: column.className || "", text: column.label });
    const button = el("button", { type: "button", class: "sort-button", "data-testid": "sort-column",
      "data-column": column.label, text: column.label });
    const th = el("th", { class: column.className || "", "aria-sort": "none" }, button);
    button.addEventListener("click", () => {
      if (sortIndex !== index) {
        sortIndex = index;
        direction = 1;
      } else {
        direction = direction === 1 ? -1 : direction === -1 ? 0 : 1;
      }
      draw();
    });
    return th;
  });

  /** Re-render the body in the current order and mark the sorted header. */
  function draw() {
    let ordered = rows;
    if (direction !== 0 && sortIndex >= 0) {
      const key = columns[sortIndex].key;
      ordered = rows.map((row, i) => [row, i])
        .sort(([a, i], [b, j]) => direction * compare(key(a), key(b)) || i - j)
        .map(([row]) => row);
    }
    body.replaceChildren(...ordered.map((row) => renderRow(row, false)), ...pinned.map((row) => renderRow(row, true)));
    headers.forEach((th, i) => {
      if (!columns[i].key) return;
      const state = i === sortIndex && direction !== 0 ? (direction === 1 ? "ascending" : "descending") : "none";
      th.setAttribute("aria-sort", state);
      th.dataset.sort = state;
    });
  }

  draw();
  return el("table", attrs, el("thead", {}, el("tr", {}, headers)), body);
}
