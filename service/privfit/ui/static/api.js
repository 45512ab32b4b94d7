// privfit dashboard: the v1 API client and the session (API key in sessionStorage).
//
// Every request carries the user's key as a Bearer token. Errors come back as RFC 9457 problem+json
// documents; they are raised as ApiError with the problem's title and detail, so views can show them.

const KEY_STORAGE = "privfit.apiKey";
const ME_STORAGE = "privfit.me";

/** An error response of the API (or a network failure), carrying the problem+json members. */
export class ApiError extends Error {
  /**
   * @param {number} status HTTP status (0 for a network error).
   * @param {string} title The problem's short title.
   * @param {string} detail The problem's human-readable detail.
   * @param {object} [problem] The whole problem document.
   */
  constructor(status, title, detail, problem = {}) {
    super(detail || title);
    this.name = "ApiError";
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.problem = problem;
  }
}

/**
 * The stored session, or null when logged out.
 * @returns {{key: string, me: {key_id: string, role: string, name: string}} | null}
 */
export function getSession() {
  const key = sessionStorage.getItem(KEY_STORAGE);
  const me = sessionStorage.getItem(ME_STORAGE);
  if (!key || !me) return null;
  try {
    return { key, me: JSON.parse(me) };
  } catch {
    return null;
  }
}

/** Forget the key (log out). */
export function clearSession() {
  sessionStorage.removeItem(KEY_STORAGE);
  sessionStorage.removeItem(ME_STORAGE);
}

/**
 * Turn a non-2xx response into an ApiError, reading its problem+json body when there is one.
 * @param {Response} response
 * @returns {Promise<ApiError>}
 */
async function problemOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (body && typeof body === "object") {
    const title = typeof body.title === "string" ? body.title : response.statusText || "Error";
    const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? "");
    return new ApiError(response.status, title, detail, body);
  }
  return new ApiError(response.status, response.statusText || "Error", `the server answered HTTP ${response.status}`);
}

/**
 * Call the API with an explicit key (used by the login form before the key is stored).
 * @param {string} key The API key.
 * @param {string} path A path such as "/v1/me".
 * @param {{method?: string, body?: object, form?: FormData, headers?: object, withLink?: boolean}} [options] `body`
 *   is sent as JSON, `form` as multipart/form-data (uploads); `withLink` answers `{body, link}`, with the answer's
 *   `Link` header (a page of a list: see listAll).
 * @returns {Promise<any>} The decoded JSON body.
 * @throws {ApiError}
 */
export async function requestWithKey(key, path, options = {}) {
  const headers = { Accept: "application/json, application/problem+json", Authorization: `Bearer ${key}` };
  Object.assign(headers, options.headers || {});
  const init = { method: options.method || "GET", headers, cache: "no-store", credentials: "omit" };
  if (options.form !== undefined) {
    init.body = options.form; // FormData: the browser sets multipart/form-data with its boundary
  } else if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, "Network error", `the privfit API could not be reached (${error.message})`);
  }
  if (!response.ok) throw await problemOf(response);
  if (response.status === 204) return null;
  if (options.withLink) return { body: await response.json(), link: response.headers.get("Link") };
  return response.json();
}

/**
 * Follow a fit's Server-Sent Events stream (GET /v1/fits/{id}/events) with the stored key: fetch, not EventSource,
 * which cannot send the Authorization header. Calls `onFit(fit)` for every `fit` event.
 * @param {string} path The stream's path (with its query).
 * @param {(fit: object) => void} onFit
 * @param {AbortSignal} signal Aborts the stream (the view changed).
 * @returns {Promise<string>} The `end` event's reason ("finished", "timeout", "server_stopping"), or "closed".
 * @throws {ApiError} The API's problem when the stream is refused (e.g. 429: every stream slot is taken).
 */
export async function fitEvents(path, onFit, signal) {
  const session = getSession();
  if (!session) throw new ApiError(401, "Unauthorized", "log in with an API key first");
  const headers = { Accept: "text/event-stream", Authorization: `Bearer ${session.key}` };
  const response = await fetch(path, { headers, cache: "no-store", credentials: "omit", signal });
  if (!response.ok) throw await problemOf(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return "closed";
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") name = text;
        else if (field === "data") data.push(text);
      }
      if (!data.length) continue;
      const payload = JSON.parse(data.join("\n"));
      if (name === "fit") onFit(payload);
      else if (name === "end") {
        reader.cancel().catch(() => {});
        return payload.reason;
      }
    }
  }
}

/** Listeners called when a stored key stops being accepted (401): the app logs out. */
const unauthorizedListeners = [];

/**
 * Register a callback for a 401 on a stored key.
 * @param {(error: ApiError) => void} listener
 */
export function onUnauthorized(listener) {
  unauthorizedListeners.push(listener);
}

/**
 * Call the API with the stored key.
 * @param {string} path
 * @param {{method?: string, body?: object, form?: FormData, headers?: object}} [options]
 * @returns {Promise<any>}
 * @throws {ApiError}
 */
export async function api(path, options = {}) {
  const session = getSession();
  if (!session) throw new ApiError(401, "Unauthorized", "log in with an API key first");
  try {
    return await requestWithKey(session.key, path, options);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      unauthorizedListeners.forEach((listener) => listener(error));
    }
    throw error;
  }
}

/**
 * Check a key against GET /v1/me and store it with the principal if it is accepted.
 * @param {string} key
 * @returns {Promise<{key_id: string, role: string, name: string}>}
 * @throws {ApiError} 401 with the API's detail when the key is refused.
 */
export async function login(key) {
  const me = await requestWithKey(key, "/v1/me");
  sessionStorage.setItem(KEY_STORAGE, key);
  sessionStorage.setItem(ME_STORAGE, JSON.stringify(me));
  return me;
}

/**
 * Every ledger entry of a dataset this key may read, oldest first (pages of 1000), and which view the API gave:
 * "all" (the dataset's owner or an admin) or "own" (a granted analyst: its own fits' and evaluations' entries and
 * the preprocessing's, without `id`, `budget_version` and `committed_epsilon_after`).
 * @param {string} datasetId
 * @returns {Promise<{view: string, entries: object[]}>}
 */
export async function ledgerEntries(datasetId) {
  const entries = [];
  const id = encodeURIComponent(datasetId);
  for (;;) {
    const page = await api(`/v1/datasets/${id}/ledger?limit=1000&offset=${entries.length}`);
    entries.push(...page.entries);
    if (page.entries.length === 0 || entries.length >= page.total) return { view: page.view, entries };
  }
}

/** The API's largest page (GET /v1/fits?limit=…): listAll asks for it. */
const MAX_PAGE_SIZE = 1000;

/**
 * Every item of a paged list (GET /v1/datasets, /v1/fits?dataset_id=…, /v1/keys, a dataset's grants and
 * allocations, a fit's evaluations), oldest first: pages of MAX_PAGE_SIZE, each answer's `Link: <…>; rel="next"`
 * followed until the last page, which has none.
 * @param {string} path The list's path, with its query if any.
 * @returns {Promise<object[]>}
 */
export async function listAll(path) {
  const items = [];
  let next = `${path}${path.includes("?") ? "&" : "?"}limit=${MAX_PAGE_SIZE}`;
  while (next) {
    const page = await api(next, { withLink: true });
    items.push(...page.body);
    const link = /<([^>]*)>\s*;\s*rel="?next"?/.exec(page.link || "");
    next = link ? link[1] : null;
  }
  return items;
}
