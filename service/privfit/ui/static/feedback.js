// privfit dashboard: how errors reach the user — the banner under the top bar (an error that happened while the
// page stays usable) and a view-level error state (the page's object could not be read: 404, 403, …). A failure
// is shown in one of the two, never both.

import { ApiError } from "./api.js";
import { el } from "./dom.js";

/**
 * Show an API error (or any error) in the banner with the problem's title and detail.
 * @param {unknown} error
 */
export function showError(error) {
  const title = error instanceof ApiError ? error.title : "Error";
  const detail = error instanceof ApiError ? error.detail : String(error && error.message ? error.message : error);
  document.getElementById("error-title").textContent = error instanceof ApiError && error.status
    ? `${title} (HTTP ${error.status})` : title;
  document.getElementById("error-detail").textContent = detail;
  document.getElementById("error-banner").hidden = false;
}

/** Hide the banner. */
export function clearError() {
  document.getElementById("error-banner").hidden = true;
}

/**
 * A problem as one line of text: "Title: detail".
 * @param {unknown} error
 * @returns {string}
 */
export function problemText(error) {
  return error instanceof ApiError ? `${error.title}: ${error.detail}` : String(error && error.message ? error.message : error);
}

/**
 * A view-level error state (404/403 and the like) with a way back.
 * @param {ApiError|Error} error
 * @returns {HTMLElement}
 */
export function errorState(error) {
  const title = error instanceof ApiError ? error.title : "Something went wrong";
  const detail = error instanceof ApiError ? error.detail : String(error.message || error);
  const status = error instanceof ApiError ? error.status : 0;
  const explain = status === 404
    ? "It does not exist, or this API key has not been granted access to it."
    : status === 403 ? "This API key's role does not allow this." : "";
  return el("section", { class: "panel empty-state", "data-testid": "view-error", "data-status": status },
    el("h1", { "data-testid": "view-error-title", text: status ? `${title} (HTTP ${status})` : title }),
    el("p", { "data-testid": "view-error-detail", text: detail }),
    explain ? el("p", { class: "muted", text: explain }) : null,
    el("a", { class: "button", href: "#/datasets", text: "Back to datasets" }));
}
