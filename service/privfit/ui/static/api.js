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
 * @param {{method?: string, body?: object, form?: FormData, headers?: object}} [options] `body` is sent as JSON,
 *   `form` as multipart/form-data (uploads).
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
  return response.json();
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
