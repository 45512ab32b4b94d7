// privfit dashboard: hash router and views (login, datasets, dataset, fit; upload and keys are in manage.js).
//
// The page is a static shell; every datum comes from the v1 API with the key kept in sessionStorage (api.js).
// Views are rebuilt on navigation; a "generation" counter retires the timers and late responses of the view
// that was left, so polling stops as soon as the user navigates away.

import { ApiError, api, clearSession, fitEvents, getSession, ledgerEntries, listAll, login, onUnauthorized } from "./api.js";
import { clearError, errorState, problemText, showError } from "./feedback.js";
import { canManage, managePanel, renderKeys, renderUpload } from "./manage.js";
import { download, sortableTable, toCsv } from "./tables.js";
import { budgetGauge, burndownChart, burndownSeries, rdpChart, svg } from "./charts.js";
import {
  el, fmtClock, fmtDelta, fmtDuration, fmtInt, fmtNumber, fmtOrder, fmtTime, num, replace, shortId, sizeUnit,
} from "./dom.js";

const POLL_MS = 1000;
const ACTIVE = new Set(["queued", "running"]);

const viewRoot = document.getElementById("view");

/** Incremented on each navigation: async work started by an older view checks it and stops. */
let generation = 0;
/** Timers of the current view, cleared on navigation. */
const timers = new Set();
/** Open fit-event streams of the current view (their AbortControllers), closed on navigation. */
const streams = new Set();
/** Where to go after logging in (the route the user asked for). */
let afterLogin = "#/datasets";

// ---------------------------------------------------------------------------------------------------------
// banner, session header, small widgets

/**
 * The conversion behind a fit's own ε: its optimal RDP order, or (null) the exact Gaussian curve of its Gaussian-DP
 * bound (docs/privacy.md).
 * @param {number|null} order
 * @returns {string}
 */
function fmtConversion(order) {
  return order === null ? "the exact Gaussian curve" : fmtOrder(order);
}

/** Show or hide the session box and navigation according to the stored session. */
function renderSessionHeader() {
  const session = getSession();
  document.getElementById("session").hidden = !session;
  document.getElementById("topnav").hidden = !session;
  document.getElementById("nav-upload").hidden = !session || session.me.role !== "owner";
  document.getElementById("nav-keys").hidden = !session || session.me.role !== "admin";
  if (session) {
    document.getElementById("session-name").textContent = session.me.name || `key ${shortId(session.me.key_id)}`;
    const role = document.getElementById("session-role");
    role.textContent = session.me.role;
    role.className = `role-badge role-${session.me.role}`;
  }
}

/**
 * A status badge for a fit.
 * @param {string} status queued | running | succeeded | failed | cancelled
 * @param {string} [testid]
 * @returns {HTMLElement}
 */
function statusBadge(status, testid = "fit-status") {
  return el("span", { class: `status status-${status}`, "data-testid": testid, text: status });
}

/**
 * A progress bar with its percentage.
 * @param {number} progress 0..1
 * @param {string} [testid]
 * @returns {HTMLElement}
 */
function progressBar(progress, testid = "fit-progress") {
  const value = Math.max(0, Math.min(1, Number(progress) || 0));
  const pct = `${Math.round(100 * value)}%`;
  return el("div", { class: "progress", "data-testid": testid, "data-progress": value },
    el("progress", { max: 1, value, "aria-label": `progress ${pct}` }),
    el("span", { class: "progress-text", "data-testid": `${testid}-text`, text: pct }));
}

/** The class of a noise outlook's badge, by level (the colours of the fit statuses). */
const OUTLOOK_CLASSES = { low: "status-succeeded", moderate: "status-cancelled", high: "status-failed" };

/** The committed ε's hint by the filter's certificate that measures it (an RDP order's names the order). */
const CERTIFICATE_HINTS = { pure: "by the pure-ε certificate", gaussian: "by the Gaussian-DP certificate" };

/**
 * A fit's noise outlook (public, computed before any row is read): a badge with its level and the ratio of the
 * expected noise norm to the parameters' radius, and its warning when the fit is expected to be no better than a
 * constant model. "—" when the solver has no outlook.
 * @param {object|null|undefined} outlook The ``outlook`` member of a fit or an estimate.
 * @param {string} testid Prefix of the badge's (``-level``) and the warning's (``-warning``) test ids.
 * @returns {Node}
 */
function outlookView(outlook, testid) {
  if (!outlook) return el("span", { class: "muted", "data-testid": `${testid}-level`, "data-value": "", text: "—" });
  const badge = el("span", {
    class: `status ${OUTLOOK_CLASSES[outlook.level] || ""}`, "data-testid": `${testid}-level`,
    "data-value": outlook.level, title: `expected noise norm ${fmtNumber(outlook.noise_norm)} vs radius `
      + `${fmtNumber(outlook.radius)}`,
    text: `${outlook.level} (noise/radius = ${fmtNumber(outlook.ratio, 2)})`,
  });
  if (!outlook.warning) return badge;
  return el("span", {}, badge,
    el("p", { class: "outlook-warning", role: "note", "data-testid": `${testid}-warning`, text: outlook.warning }));
}

/**
 * A labelled figure (stat tile).
 * @param {string} label
 * @param {Node} value
 * @param {string} [hint]
 * @param {string} [extraClass]
 * @returns {HTMLElement}
 */
function stat(label, value, hint, extraClass = "") {
  return el("div", { class: `stat ${extraClass}` },
    el("div", { class: "stat-label", text: label }),
    el("div", { class: "stat-value" }, value),
    hint ? el("div", { class: "stat-hint" }, hint) : null);
}

/**
 * A definition list from [label, value] pairs.
 * @param {Array<[string, Node|string]>} rows
 * @param {string} [testid]
 * @returns {HTMLElement}
 */
function facts(rows, testid) {
  return el("dl", { class: "facts", "data-testid": testid },
    rows.map(([label, value]) => [el("dt", { text: label }), el("dd", {}, value)]));
}

/**
 * Run `fn` after `ms` unless the view has changed meanwhile.
 * @param {number} token The generation of the view that schedules.
 * @param {() => void} fn
 * @param {number} ms
 */
function later(token, fn, ms) {
  const id = setTimeout(() => {
    timers.delete(id);
    if (token === generation) fn();
  }, ms);
  timers.add(id);
}

/**
 * A random UUID for the Idempotency-Key header (crypto.randomUUID needs a secure context; plain-HTTP
 * deployments fall back to getRandomValues).
 * @returns {string}
 */
function newIdempotencyKey() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// ---------------------------------------------------------------------------------------------------------
// login

/**
 * The login view: an API key field checked against GET /v1/me.
 * @param {string} [notice] A message to show in the form (e.g. why the stored key was dropped).
 */
function renderLogin(notice) {
  const input = el("input", {
    id: "login-key", "data-testid": "login-key", type: "password", autocomplete: "off", spellcheck: "false",
    placeholder: "pf_…", required: true,
  });
  const error = el("p", { class: "form-error", id: "login-error", "data-testid": "login-error", role: "alert" });
  error.hidden = !notice;
  if (notice) error.textContent = notice;
  const button = el("button", { type: "submit", class: "button button-primary", id: "login-submit",
    "data-testid": "login-submit", text: "Log in" });
  const form = el("form", { class: "login-form", id: "login-form", "data-testid": "login-form" },
    el("label", { for: "login-key", text: "API key" }), input, error, button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    button.disabled = true;
    try {
      await login(input.value.trim());
      renderSessionHeader();
      const target = afterLogin;
      afterLogin = "#/datasets";
      if (location.hash === target) render();
      else location.hash = target;
    } catch (failure) {
      error.textContent = failure instanceof ApiError
        ? `${failure.title}: ${failure.detail}` : String(failure.message || failure);
      error.hidden = false;
      button.disabled = false;
      input.select();
    }
  });
  replace(viewRoot, el("section", { class: "login-card panel", "data-testid": "login-view" },
    el("h1", { text: "Sign in to privfit" }),
    el("p", { class: "muted", text: "Paste an API key (owner, analyst or admin). The dashboard shows exactly what "
      + "this key may read through the API." }),
    form,
    el("p", { class: "fineprint", text: "The key is checked with GET /v1/me and kept in this tab's session "
      + "storage only: it is gone when the tab closes, and “Log out” forgets it." })));
  input.focus();
}

// ---------------------------------------------------------------------------------------------------------
// datasets list

/** How the datasets list can be ordered: label, and a comparison of two entries {dataset, budget}. */
const DATASET_SORTS = {
  "created-desc": ["Newest first", (a, b) => compareText(b.dataset.created_at, a.dataset.created_at)],
  "created-asc": ["Oldest first", (a, b) => compareText(a.dataset.created_at, b.dataset.created_at)],
  "name-asc": ["Name (A–Z)", (a, b) => compareText(a.dataset.name, b.dataset.name)],
  "n-desc": ["Most rows", (a, b) => b.dataset.n - a.dataset.n],
  "remaining-desc": ["Most ε remaining", (a, b) => remainingOf(b) - remainingOf(a)],
  "remaining-asc": ["Least ε remaining", (a, b) => remainingOf(a) - remainingOf(b)],
};

/**
 * Text order (locale, numbers inside names by value).
 * @param {string} a
 * @param {string} b
 * @returns {number}
 */
function compareText(a, b) {
  return String(a).localeCompare(String(b), "en", { numeric: true, sensitivity: "base" });
}


/**
 * A dataset's remaining ε for sorting; a budget not loaded (yet) sorts as −∞ (last when most-first).
 * @param {{budget: object|null}} entry
 * @returns {number}
 */
function remainingOf(entry) {
  return entry.budget ? entry.budget.remaining_epsilon : -Infinity;
}

/** The datasets visible to the key, each with its budget gauge; searchable by name and sortable. */
async function renderDatasets() {
  const token = generation;
  replace(viewRoot, el("p", { class: "loading", text: "Loading datasets…" }));
  const datasets = await listAll("/v1/datasets");
  if (token !== generation) return;
  const { me } = getSession();
  const role = me.role;
  const count = el("p", { class: "muted", "data-testid": "datasets-count",
    text: `${datasets.length} dataset${datasets.length === 1 ? "" : "s"} visible to this key` });
  const head = el("div", { class: "page-head" },
    el("div", {}, el("h1", { text: "Datasets" }), count),
    role === "owner" ? el("a", { class: "button button-primary", href: "#/upload", "data-testid": "upload-link", text: "Upload a dataset" }) : null);
  const keyHint = role === "analyst" ? el("p", { class: "muted small", "data-testid": "analyst-key-id" },
    "Your key id, for a dataset's owner to grant you access: ", el("code", { class: "selectable", text: me.key_id })) : null;
  if (datasets.length === 0) {
    const hint = role === "analyst"
      ? "No dataset has been shared with this analyst key yet. A dataset's owner grants access on the dataset's page "
        + "(or with POST /v1/datasets/{id}/grants) with this key's id."
      : role === "owner" ? "This key has not uploaded any dataset yet: upload a CSV with its schema."
        : "No dataset has been uploaded yet.";
    replace(viewRoot, head, el("section", { class: "panel empty-state", "data-testid": "datasets-empty" },
      el("h2", { text: "No datasets" }), el("p", { text: hint }), keyHint,
      role === "owner" ? el("a", { class: "button", href: "#/upload", text: "Upload a dataset" }) : null));
    return;
  }
  const search = el("input", { type: "search", "data-testid": "datasets-search", placeholder: "Search by name",
    "aria-label": "search datasets by name", autocomplete: "off" });
  const sort = el("select", { "data-testid": "datasets-sort", "aria-label": "sort datasets" },
    Object.entries(DATASET_SORTS).map(([value, [label]]) => el("option", { value, text: label })));
  const noMatch = el("p", { class: "muted", "data-testid": "datasets-no-match", hidden: true, text: "No dataset matches the search." });
  const grid = el("div", { class: "dataset-grid", "data-testid": "dataset-list" });
  replace(viewRoot, head, keyHint,
    el("div", { class: "toolbar", "data-testid": "datasets-toolbar" },
      el("label", { class: "grow" }, el("span", { text: "Search" }), search),
      el("label", {}, el("span", { text: "Sort" }), sort)),
    grid, noMatch);

  const entries = datasets.map((dataset) => ({ dataset, budget: null, card: null }));
  /** Show the cards that match the search, in the chosen order. */
  function arrange() {
    const query = search.value.trim().toLocaleLowerCase();
    const compare = DATASET_SORTS[sort.value][1];
    const ordered = entries.slice().sort(compare);
    let shown = 0;
    for (const entry of ordered) {
      const match = !query || entry.dataset.name.toLocaleLowerCase().includes(query);
      entry.card.hidden = !match;
      shown += match ? 1 : 0;
      grid.append(entry.card); // moves it to the end: the grid follows `ordered`
    }
    noMatch.hidden = shown > 0;
    count.textContent = query
      ? `${shown} of ${datasets.length} datasets match “${search.value.trim()}”`
      : `${datasets.length} dataset${datasets.length === 1 ? "" : "s"} visible to this key`;
  }
  search.addEventListener("input", arrange);
  sort.addEventListener("change", arrange);

  for (const entry of entries) {
    const { dataset } = entry;
    const gaugeSlot = el("div", { class: "gauge-slot" }, el("p", { class: "loading", text: "Loading budget…" }));
    const features = dataset.feature_names || [];
    const shown = features.slice(0, 6);
    entry.card = el("a", {
      class: "panel dataset-card", href: `#/datasets/${encodeURIComponent(dataset.id)}`,
      "data-testid": `dataset-card-${dataset.id}`, "data-dataset-id": dataset.id,
    },
    el("div", { class: "card-head" },
      el("h2", { class: "dataset-name", "data-testid": "dataset-name", text: dataset.name }),
      el("span", { class: "muted small", text: fmtTime(dataset.created_at) })),
    el("p", { class: "dataset-meta" },
      el("span", { "data-testid": "dataset-n", "data-value": dataset.n, text: fmtInt(dataset.n) }), sizeUnit(dataset), " · ",
      el("span", { "data-testid": "dataset-d", "data-value": dataset.d, text: fmtInt(dataset.d) }), " features"),
    el("div", { class: "chips" }, shown.map((f) => el("span", { class: "chip", text: f })),
      features.length > shown.length ? el("span", { class: "chip chip-more", text: `+${features.length - shown.length}` })
        : null),
    gaugeSlot);
    api(`/v1/datasets/${encodeURIComponent(dataset.id)}/budget`).then((budget) => {
      if (token !== generation) return;
      entry.budget = budget;
      replace(gaugeSlot, budgetGauge(budget));
      if (sort.value.startsWith("remaining")) arrange();
    }, (error) => {
      if (token === generation) replace(gaugeSlot, el("p", { class: "form-error", text: `Budget unavailable: ${error.detail || error.message}` }));
    });
  }
  arrange();
}

// ---------------------------------------------------------------------------------------------------------
// dataset page

/**
 * Fetch the object a page is about; on 404/403 show the readable error state instead (only there: the banner
 * stays hidden, so the message appears once) and return null (also null when the user has navigated away
 * meanwhile). Other errors propagate to render(), which shows them the same way.
 * @param {string} path The API path, e.g. "/v1/fits/<id>".
 * @param {number} token The view generation the caller started with.
 * @returns {Promise<object|null>}
 */
async function fetchOrShowMissing(path, token) {
  try {
    return await api(path);
  } catch (error) {
    if (token !== generation) return null;
    if (error instanceof ApiError && (error.status === 404 || error.status === 403)) {
      replace(viewRoot, errorState(error)); // shown once: in the view, not in the banner as well
      return null;
    }
    throw error;
  }
}

/**
 * The dataset page: budget figures and gauge, burn-down chart, spent RDP curve, fits (polled while any is
 * active) and, for owners and analysts, the estimate / run form.
 * @param {string} datasetId
 */
function derivedText(derived) {
  if (!derived) return "declared encoding kept";
  if (derived.clip) {
    return `clip to [${fmtNumber(derived.clip[0])}, ${fmtNumber(derived.clip[1])}]${derived.log ? ", then log1p" : ""}`;
  }
  return `bounds [${fmtNumber(derived.lower)}, ${fmtNumber(derived.upper)}]`;
}

function preprocessingPanel(preprocessing) {
  // Private preprocessing at upload (public statistics, charged to the budget): what was derived per column.
  if (!preprocessing) return null;
  return el("section", { class: "panel", "data-testid": "preprocessing-panel" },
    el("div", { class: "panel-head" }, el("h2", { text: "Private preprocessing" }),
      el("span", { class: "muted small", "data-testid": "preprocessing-summary",
        text: `${+(preprocessing.share * 100).toPrecision(3)} % of the budget (committed ε ${fmtNumber(preprocessing.committed_epsilon)}) ` +
          "on noisy histograms of the numeric columns; the encodings below were derived from them" })),
    el("div", { class: "table-wrap" },
      el("table", { class: "table", "data-testid": "preprocessing-table" },
        el("thead", {}, el("tr", {}, ["Column", "Role", "Derived encoding"].map((h) => el("th", { text: h })))),
        el("tbody", {}, preprocessing.columns.map((column) => el("tr", { "data-testid": "preprocessing-row" },
          el("td", { class: "mono", text: column.name }),
          el("td", { class: "muted small", text: column.role }),
          el("td", { text: derivedText(column.derived) })))))));
}

async function renderDataset(datasetId) {
  const token = generation;
  const id = encodeURIComponent(datasetId);
  const role = getSession().me.role;
  const canFit = role === "owner" || role === "analyst";
  replace(viewRoot, el("p", { class: "loading", text: "Loading dataset…" }));
  const dataset = await fetchOrShowMissing(`/v1/datasets/${id}`, token);
  if (!dataset) return;
  const [solvers, fits, visibleDatasets] = await Promise.all([
    canFit ? api("/v1/solvers") : Promise.resolve([]),
    listAll(`/v1/fits?dataset_id=${id}`),
    listAll("/v1/datasets"), // the privacy domain's datasets, by name (those this key can see)
  ]);
  if (token !== generation) return;

  const budgetSlot = el("div", { class: "budget-body" }, el("p", { class: "loading", text: "Loading budget…" }));
  const burndownSlot = el("div", { class: "chart-slot", "data-testid": "burndown-slot" });
  const rdpSlot = el("div", { class: "chart-slot", "data-testid": "rdp-slot" });
  const rdpNote = el("p", { class: "chart-note", "data-testid": "rdp-note" });
  const ledgerNote = el("p", { class: "chart-note", "data-testid": "ledger-note" });
  const burndownLegend = el("div", { class: "legend" },
    el("span", { class: "key key-start", text: "registered" }),
    el("span", { class: "key key-reservation", text: "reservation" }),
    el("span", { class: "key key-charge", text: "charge" }),
    el("span", { class: "key key-release", text: "release" }),
    el("span", { class: "key key-max", text: "ε_max" }));
  const ledgerSlot = el("div", { class: "table-wrap" });
  const fitsBody = el("tbody", { "data-testid": "fits-body" });
  const fitsEmpty = el("p", { class: "muted empty-row", "data-testid": "fits-empty",
    text: "No fits yet. Estimate one and run it with the form." });

  replace(viewRoot,
    el("nav", { class: "crumbs", "aria-label": "breadcrumb" },
      el("a", { href: "#/datasets", text: "Datasets" }), el("span", { text: "/" }),
      el("span", { text: dataset.name })),
    el("div", { class: "page-head" },
      el("div", {},
        el("h1", { "data-testid": "dataset-title", text: dataset.name }),
        el("p", { class: "muted" },
          el("span", { "data-testid": "dataset-n", "data-value": dataset.n, text: fmtInt(dataset.n) }), sizeUnit(dataset), " · ",
          dataset.n_validation ? el("span", { "data-testid": "dataset-n-validation", "data-value": dataset.n_validation,
            text: `${fmtInt(dataset.n_validation)} private validation rows · ` }) : null,
          el("span", { "data-testid": "dataset-d", "data-value": dataset.d, text: fmtInt(dataset.d) }),
          " features · registered ", fmtTime(dataset.created_at)),
        el("p", { class: "muted small mono", text: `id ${dataset.id}` }))),
    el("section", { class: "panel", "data-testid": "budget-panel" },
      el("div", { class: "panel-head" }, el("h2", { text: "Privacy budget" }),
        el("span", { class: "muted small",
          text: "(ε, δ)-DP for every sequence of admitted fits, adaptive or concurrent, by the dataset's privacy filter" })),
      domainNote(dataset, visibleDatasets),
      budgetSlot),
    preprocessingPanel(dataset.preprocessing),
    el("div", { class: "grid-2" },
      el("section", { class: "panel" },
        el("div", { class: "panel-head" }, el("h2", { text: "Budget burn-down" }),
          el("span", { class: "muted small", text: "remaining ε after each ledger entry" })),
        burndownSlot,
        burndownLegend,
        ledgerNote),
      el("section", { class: "panel" },
        el("div", { class: "panel-head" }, el("h2", { text: "Spent RDP curve" }),
          el("span", { class: "muted small", text: "committed ε(α) by Rényi order" })),
        rdpSlot, rdpNote)),
    el("div", { class: "grid-fits" },
      el("div", { class: "column" },
        el("section", { class: "panel", "data-testid": "fits-panel" },
          el("div", { class: "panel-head" }, el("h2", { text: "Fits" }),
            el("span", { class: "muted small", "data-testid": "fits-polling", text: "" })),
          el("div", { class: "table-wrap" },
            el("table", { class: "table fits-table", "data-testid": "fits-table" },
              el("thead", {}, el("tr", {},
                ["Fit", "Solver · model", "ε", "Status", "Progress", "Created", ""].map((h) => el("th", { text: h })))),
              fitsBody)),
          fitsEmpty),
        el("section", { class: "panel", "data-testid": "ledger-panel" },
          el("div", { class: "panel-head" }, el("h2", { text: "Ledger" }),
            el("span", { class: "muted small", text: "append-only; newest first" })),
          ledgerSlot)),
      el("div", { class: "column" },
        canFit ? estimatePanel() : el("section", { class: "panel", "data-testid": "estimate-unavailable" },
          el("h2", { text: "Estimate & run" }),
          el("p", { class: "muted", text: `A ${role} key reads budgets and ledgers; fits are estimated and requested `
            + "by owner and analyst keys." })),
        canManage(dataset) ? managePanel(dataset, { alive: () => token === generation, onChange: () => refreshFits() })
          : null)));

  // --- budget, burn-down, RDP curve --------------------------------------------------------------------
  let budgetRequest = null;
  /** Reload the budget and the ledger and redraw their views (coalesces concurrent calls). */
  function refreshBudget() {
    if (budgetRequest) return budgetRequest;
    // the RDP chart needs the grid's orders and the committed curve, left out of the API's default answer
    budgetRequest = Promise.all([api(`/v1/datasets/${id}/budget?include=rdp`), ledgerEntries(datasetId)])
      .then(([budget, ledger]) => {
        if (token === generation) drawBudget(budget, ledger);
      }, (error) => {
        if (token === generation) showError(error);
      })
      .finally(() => { budgetRequest = null; });
    return budgetRequest;
  }

  /**
   * @param {object} budget
   * @param {{view: string, entries: object[]}} ledger
   */
  function drawBudget(budget, { view, entries }) {
    const certificate = CERTIFICATE_HINTS[budget.committed_certificate]
      ?? `by the RDP certificate at α = ${fmtOrder(budget.committed_certifying_order ?? budget.filter.orders[0])}`;
    const committedHint = budget.committed_epsilon > 0 ? certificate : "filter share of ε max";
    replace(budgetSlot,
      el("div", { class: "stats" },
        stat("ε max", num(budget.epsilon_max, "budget-epsilon-max")),
        stat("δ", num(budget.delta_max, "budget-delta", fmtDelta)),
        stat("Charged ε", num(budget.charged_epsilon, "budget-charged"), "fits that have started"),
        stat("Reserved ε", num(budget.reserved_epsilon, "budget-reserved"), "queued, not yet started"),
        stat("Committed ε", num(budget.committed_epsilon, "budget-committed"), committedHint),
        stat("Remaining ε", num(budget.remaining_epsilon, "budget-remaining"), "ε max − committed", "stat-key")),
      budgetGauge(budget),
      budget.allocation ? allocationNote(budget.allocation) : null,
      el("p", { class: "chart-note", "data-testid": "budget-measure", text: budget.closed_reason
        ? `Closed: ${budget.closed_reason}` : `${budget.measure.charAt(0).toUpperCase()}${budget.measure.slice(1)}.` }));
    const own = view === "own";
    // an analyst's entries carry no running total: the remaining ε after each is its owner's and admins' to see
    replace(burndownSlot, own
      ? el("p", { class: "chart-note", "data-testid": "burndown-own-view", text: "The remaining ε after each ledger "
        + "entry is shown to the dataset's owner and admins: between your entries it would reveal other keys' "
        + "activity. The budget above has the current totals." })
      : burndownChart(burndownSeries(dataset, budget, entries), budget.epsilon_max));
    burndownLegend.hidden = own;
    const count = `${entries.length} ${own ? "of your " : ""}ledger entr${entries.length === 1 ? "y" : "ies"}`;
    ledgerNote.textContent = `${count}${own ? " (your fits and evaluations, and the preprocessing)" : ""} · `
      + `${budget.entries} budget version${budget.entries === 1 ? "" : "s"} · grid ${budget.grid_name}`;
    replace(ledgerSlot, ledgerTable(entries, budget.epsilon_max, new Set(statuses.keys())));
    const rdp = rdpChart(budget.orders, budget.committed_rdp, budget.filter.orders[0]);
    replace(rdpSlot, rdp.chart);
    rdpNote.textContent = rdp.note;
    rdpNote.classList.toggle("note-infinite", rdp.infinite > 0);
    rdpNote.dataset.testid = rdp.infinite > 0 ? "rdp-infinite-note" : "rdp-note";
  }

  // --- fits, polled while any is queued or running ---------------------------------------------------
  const rows = new Map();
  let statuses = new Map(fits.map((f) => [f.id, f.status]));
  let polling = false;

  /**
   * Create or update the row of one fit.
   * @param {object} fit
   */
  function upsertRow(fit) {
    let row = rows.get(fit.id);
    const cancelCell = el("td", { class: "actions" });
    if (ACTIVE.has(fit.status)) {
      cancelCell.append(el("button", {
        type: "button", class: "button button-small button-danger", "data-testid": "fit-cancel", text: "Cancel",
        onclick: (event) => cancelFit(fit.id, event.currentTarget),
      }));
    }
    const cost = fit.cost || {};
    const cells = [
      el("td", {}, el("a", { class: "mono", href: `#/fits/${encodeURIComponent(fit.id)}`, "data-testid": "fit-link",
        text: shortId(fit.id) })),
      el("td", {}, el("span", { class: "cell-main", "data-testid": "fit-solver", text: fit.solver }),
        el("span", { class: "cell-sub", "data-testid": "fit-model", text: fit.model })),
      el("td", { class: "numcell" }, num(cost.epsilon, "fit-epsilon")),
      el("td", {}, statusBadge(fit.status)),
      el("td", { class: "progress-cell" }, progressBar(fit.progress)),
      el("td", { class: "small nowrap muted", title: fmtTime(fit.created_at), text: fmtClock(fit.created_at) }),
      cancelCell,
    ];
    if (!row) {
      row = el("tr", { "data-testid": `fit-row-${fit.id}`, "data-fit-id": fit.id });
      rows.set(fit.id, row);
      fitsBody.prepend(row); // newest first
    }
    row.dataset.status = fit.status;
    row.dataset.progress = String(fit.progress);
    replace(row, cells);
  }

  /** @param {object[]} list All fits of the dataset (API order: oldest first). */
  function drawFits(list) {
    for (const fit of list) upsertRow(fit);
    fitsEmpty.hidden = list.length > 0;
  }

  /**
   * Reload the fit list; when a status changed (or a fit appeared), reload the budget and the ledger too.
   * @returns {Promise<boolean>} Whether to keep polling: a fit is queued or running, or the request failed
   *   (a transient error; a 401 logs out, which retires this view).
   */
  async function refreshFits() {
    let list;
    try {
      list = await listAll(`/v1/fits?dataset_id=${id}`);
    } catch (error) {
      if (token === generation) showError(error);
      return true;
    }
    if (token !== generation) return false;
    drawFits(list);
    const next = new Map(list.map((f) => [f.id, f.status]));
    const changed = list.some((f) => statuses.get(f.id) !== f.status) || next.size !== statuses.size;
    statuses = next;
    if (changed) await refreshBudget();
    return list.some((f) => ACTIVE.has(f.status));
  }

  /** Poll every second while a fit is queued or running (one loop at a time). */
  function ensurePolling() {
    if (polling) return;
    polling = true;
    const indicator = viewRoot.querySelector("[data-testid=fits-polling]");
    indicator.textContent = "updating every second…";
    const tick = async () => {
      const active = await refreshFits();
      if (token !== generation) return;
      if (active) later(token, tick, POLL_MS);
      else {
        polling = false;
        indicator.textContent = "";
      }
    };
    later(token, tick, POLL_MS);
  }

  /**
   * Cancel a fit from its row.
   * @param {string} fitId
   * @param {HTMLButtonElement} button
   */
  async function cancelFit(fitId, button) {
    button.disabled = true;
    try {
      await api(`/v1/fits/${encodeURIComponent(fitId)}/cancel`, { method: "POST" });
      await refreshFits();
      ensurePolling();
    } catch (error) {
      showError(error);
      button.disabled = false;
    }
  }

  drawFits(fits);
  await refreshBudget();
  if (fits.some((f) => ACTIVE.has(f.status))) ensurePolling();

  // --- estimate and run --------------------------------------------------------------------------------
  /**
   * The estimate / run form: solver, model, ε, optional params JSON.
   * @returns {HTMLElement}
   */
  function estimatePanel() {
    // A solver this server does not run (GET /v1/solvers: available false) is listed but cannot be chosen: its
    // option is disabled and says why and which setting enables it; the note under the form lists the same.
    const unavailable = solvers.filter((s) => s.available === false);
    const solverSelect = el("select", { id: "estimate-solver", "data-testid": "estimate-solver", name: "solver" },
      solvers.map((s) => s.available === false
        ? el("option", { value: s.name, text: `${s.name} (not on this server)`, disabled: true,
          title: `${s.unavailable_reason || "Not available on this server."} Enabled by ${s.enabled_by}.` })
        : el("option", { value: s.name, text: s.name })));
    const unavailableNote = unavailable.length === 0 ? null
      : el("details", { class: "solver-about small", "data-testid": "unavailable-solvers" },
        el("summary", { text: `Not available on this server: ${unavailable.map((s) => s.name).join(", ")}` }),
        el("dl", { class: "param-list" }, unavailable.map((s) => [
          el("dt", {}, el("code", { text: s.name }), el("span", { class: "muted", text: ` enabled by ${s.enabled_by}` })),
          el("dd", { class: "small", "data-testid": "unavailable-reason", "data-solver": s.name,
            text: s.unavailable_reason || "" }),
        ])));
    const modelSelect = el("select", { id: "estimate-model", "data-testid": "estimate-model", name: "model" });
    const epsilonInput = el("input", {
      id: "estimate-epsilon", "data-testid": "estimate-epsilon", name: "epsilon", type: "number", min: "0.000001",
      max: "100", step: "any", value: "0.5", inputmode: "decimal",
    });
    const paramsInput = el("textarea", {
      id: "estimate-params", "data-testid": "estimate-params", name: "params", rows: 3, spellcheck: "false",
      placeholder: '{"steps": 200}',
    });
    const about = el("details", { class: "solver-about", "data-testid": "solver-about" });
    const result = el("div", { class: "estimate-result", id: "estimate-result", "data-testid": "estimate-result",
      "aria-live": "polite" });
    result.hidden = true;
    const runStatus = el("div", { class: "run-status", id: "run-status", "data-testid": "run-status",
      "aria-live": "polite" });
    runStatus.hidden = true;
    const estimateButton = el("button", { type: "submit", class: "button", id: "estimate-submit",
      "data-testid": "estimate-submit", text: "Estimate" });
    const runButton = el("button", { type: "button", class: "button button-primary", id: "run-fit",
      "data-testid": "run-fit", text: "Run fit" });

    const runnable = solvers.filter((s) => s.available !== false);
    if (runnable.some((s) => s.name === "dp_gd")) solverSelect.value = "dp_gd";
    else if (runnable.length > 0) solverSelect.value = runnable[0].name;

    /** Fill the model select and the parameter reference for the chosen solver. */
    function syncSolver() {
      const solver = solvers.find((s) => s.name === solverSelect.value);
      if (!solver) return;
      const previous = modelSelect.value;
      replace(modelSelect, solver.models.map((m) => el("option", { value: m, text: m })));
      if (solver.models.includes(previous)) modelSelect.value = previous;
      const props = (solver.params_schema && solver.params_schema.properties) || {};
      const params = Object.entries(props).filter(([name]) => name !== "model");
      replace(about,
        el("summary", { text: `About ${solver.name} and its parameters` }),
        el("p", { class: "small", text: solver.description || "" }),
        el("dl", { class: "param-list" }, params.map(([name, spec]) => [
          el("dt", {}, el("code", { text: name }),
            "default" in spec ? el("span", { class: "muted", text: ` = ${JSON.stringify(spec.default)}` }) : null),
          el("dd", { class: "small", text: spec.description || "" }),
        ])));
    }
    solverSelect.addEventListener("change", syncSolver);
    syncSolver();

    /**
     * The request body of the form, or null (with an inline message) when the params are not a JSON object.
     * @returns {object|null}
     */
    function body() {
      let params = {};
      const raw = paramsInput.value.trim();
      if (raw) {
        try {
          params = JSON.parse(raw);
        } catch (error) {
          showInlineProblem(result, "Invalid parameters", `the parameters are not valid JSON: ${error.message}`);
          return null;
        }
        if (params === null || typeof params !== "object" || Array.isArray(params)) {
          showInlineProblem(result, "Invalid parameters", "the parameters must be a JSON object, e.g. {\"steps\": 200}");
          return null;
        }
      }
      const epsilon = epsilonInput.value.trim();
      const privacy = epsilon === "" ? {} : { epsilon: Number(epsilon) };
      return { dataset_id: datasetId, model: modelSelect.value, solver: solverSelect.value, privacy, params };
    }

    const form = el("form", { class: "estimate-form", id: "estimate-form", "data-testid": "estimate-form" },
      el("div", { class: "form-row" },
        el("label", {}, el("span", { text: "Solver" }), solverSelect),
        el("label", {}, el("span", { text: "Model" }), modelSelect),
        el("label", {}, el("span", { text: "Target ε" }), epsilonInput)),
      unavailableNote,
      el("label", { class: "block" }, el("span", { text: "Parameters (JSON object, optional)" }), paramsInput),
      about,
      el("div", { class: "form-actions" }, estimateButton, runButton),
      result, runStatus);

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const request = body();
      if (!request) return;
      estimateButton.disabled = true;
      result.classList.add("stale");
      try {
        const estimate = await api("/v1/fits/estimate", { method: "POST", body: request });
        if (token === generation) showEstimate(result, estimate, useLargest);
      } catch (error) {
        if (token !== generation) return;
        if (error instanceof ApiError && error.status !== 401) showInlineProblem(result, error.title, error.detail);
        else showError(error);
      } finally {
        estimateButton.disabled = false;
        result.classList.remove("stale");
      }
    });

    /**
     * A button that puts the largest admissible ε (stated by an estimate and by a budget refusal) into the target ε
     * field; null when there is none (0: nothing is admissible now).
     * @param {number|undefined} value
     * @returns {HTMLElement|null}
     */
    function useLargest(value) {
      if (typeof value !== "number" || !(value > 0)) return null;
      return el("button", { type: "button", class: "button button-small", "data-testid": "use-max-epsilon",
        text: `Use ε = ${value}`, onclick: () => { epsilonInput.value = String(value); } });
    }

    runButton.addEventListener("click", async () => {
      if (!form.reportValidity()) return;
      const request = body();
      if (!request) return;
      const key = newIdempotencyKey(); // one per click: a retried request never starts a second fit
      runButton.disabled = true;
      runStatus.hidden = false;
      replace(runStatus, el("span", { class: "muted", text: "Submitting…" }));
      try {
        const fit = await api("/v1/fits", { method: "POST", body: request, headers: { "Idempotency-Key": key } });
        if (token !== generation) return;
        replace(runStatus, el("span", { class: "ok", "data-testid": "run-ok" }, "Fit ",
          el("a", { class: "mono", href: `#/fits/${encodeURIComponent(fit.id)}`, "data-testid": "run-fit-link",
            "data-fit-id": fit.id, text: shortId(fit.id) }),
          ` admitted (${fit.status}); its ε ${fmtNumber(fit.cost && fit.cost.epsilon)} is reserved.`));
        upsertRow(fit);
        fitsEmpty.hidden = true;
        await refreshFits(); // a new fit id: the budget and the ledger (its reservation) are reloaded too
        ensurePolling();
      } catch (error) {
        if (token !== generation || (error instanceof ApiError && error.status === 401)) return; // 401: logged out
        replace(runStatus, el("span", { class: "form-error", "data-testid": "run-error", text: problemText(error) }),
          error instanceof ApiError && error.status === 409 ? [" ", useLargest(error.problem.max_admissible_epsilon)] : null);
      } finally {
        runButton.disabled = false;
      }
    });

    return el("section", { class: "panel estimate-panel", "data-testid": "estimate-panel" },
      el("div", { class: "panel-head" }, el("h2", { text: "Estimate & run a fit" })),
      el("p", { class: "muted small", text: "An estimate is a dry run: nothing is charged. Running a fit reserves "
        + "its ε now and charges it when a worker starts." }),
      form);
  }
}

/**
 * A dataset's privacy domain (datasets about the same people that spend one budget: one privacy filter, one ledger),
 * as a line of the budget panel: on a dataset registered into another's domain, "Privacy domain: shares the budget of
 * <that dataset> (<short id>)"; on a domain's first dataset, the other datasets of the domain this key can see; on a
 * dataset with a budget of its own and no other dataset in it, nothing.
 * @param {object} dataset The dataset (its `privacy_domain`: the id of the dataset whose budget it spends).
 * @param {object[]} visible The datasets this key can see (GET /v1/datasets), for the names.
 * @returns {HTMLElement|null}
 */
function domainNote(dataset, visible) {
  const domain = dataset.privacy_domain || dataset.id;
  /** A dataset as a link by its name with its short id. */
  const link = (other, testid) => [el("a", { href: `#/datasets/${encodeURIComponent(other.id)}`, "data-testid": testid,
    "data-dataset-id": other.id, title: `dataset id ${other.id}`, text: other.name }), ` (${shortId(other.id)})`];
  if (domain !== dataset.id) {
    const root = visible.find((other) => other.id === domain);
    return el("p", { class: "domain-note", "data-testid": "dataset-domain", "data-domain-id": domain },
      el("strong", { text: "Privacy domain: " }), "shares the budget of ",
      root ? link(root, "domain-dataset")
        : el("span", { class: "mono", "data-testid": "domain-dataset", title: `dataset id ${domain} (not listed for this key)`,
          text: `dataset ${shortId(domain)}` }),
      el("span", { class: "muted", text: " · one privacy filter and one ledger for every dataset of the domain: the "
        + "figures below are the domain's" }));
  }
  const members = visible.filter((other) => other.privacy_domain === dataset.id && other.id !== dataset.id);
  if (members.length === 0) return null;
  return el("p", { class: "domain-note", "data-testid": "dataset-domain", "data-domain-id": domain },
    el("strong", { text: "Privacy domain: " }),
    `its budget is shared with ${members.length === 1 ? "" : `${members.length} other datasets: `}`,
    members.map((member, i) => [i ? ", " : "", el("span", { "data-testid": "domain-member", "data-dataset-id": member.id },
      link(member, "domain-member-link"))]),
    el("span", { class: "muted", text: " · their fits spend this budget and appear in its ledger" }));
}

/**
 * The caller's own allocation of a dataset's budget (an analyst key its owner gave a share): "Your allocation: ε …
 * (δ …) of which … remaining", what its fits have committed of it by the allocation's own filter, and why it is
 * closed, if it is.
 * @param {object} allocation The `allocation` member of GET /v1/datasets/{id}/budget.
 * @returns {HTMLElement}
 */
function allocationNote(allocation) {
  return el("p", { class: "allocation-note", "data-testid": "budget-allocation",
    title: "Your fits on this dataset are admitted only if both your allocation and the dataset's budget admit them." },
  el("strong", { text: "Your allocation: " }), "ε ", num(allocation.epsilon_max, "budget-allocation-epsilon"),
  " (δ ", num(allocation.delta_max, "budget-allocation-delta", fmtDelta), ") of which ",
  num(allocation.remaining_epsilon, "budget-allocation-remaining"), " remaining",
  el("span", { class: "muted" }, " · your fits have committed ", num(allocation.committed_epsilon, "budget-allocation-committed"),
    " of it"),
  allocation.closed_reason
    ? el("span", { class: "form-error", "data-testid": "budget-allocation-closed", text: `Closed: ${allocation.closed_reason}` })
    : null);
}

/** How many ledger entries the dataset page lists (the chart shows them all). */
const LEDGER_ROWS = 8;

/**
 * The latest ledger entries, newest first: number, time, kind, fit, ε of the entry, remaining ε after it. A granted
 * analyst's entries (its own and the preprocessing's) come without number and running total: those cells are "—".
 * A fit this key may open is a link; one missing from its fit list (listed a moment later) is a plain id.
 * @param {object[]} entries The entries this key reads, oldest first.
 * @param {number} epsilonMax
 * @param {Set<string>} visibleFits The ids of the fits GET /v1/fits?dataset_id= lists for this key.
 * @returns {HTMLElement}
 */
function ledgerTable(entries, epsilonMax, visibleFits) {
  if (entries.length === 0) {
    return el("p", { class: "muted empty-row", "data-testid": "ledger-empty", text: "No entries yet: nothing has been reserved or charged." });
  }
  const latest = entries.slice(-LEDGER_ROWS).reverse();
  /** ε_max − committed after the entry; 0 past an unbounded committed ε (null); undefined (shown "—") when absent. */
  const remaining = (committed) => committed === undefined ? undefined
    : committed === null ? 0 : Math.max(0, epsilonMax - committed);
  return el("div", {},
    el("table", { class: "table ledger-table", "data-testid": "ledger-table" },
      el("thead", {}, el("tr", {}, ["#", "Time", "Entry", "Fit", "ε", "Remaining after"].map((h, i) =>
        el("th", { class: i >= 4 ? "numcell" : "", text: h })))),
      el("tbody", {}, latest.map((entry) => el("tr", { "data-testid": "ledger-row", "data-kind": entry.kind },
        el("td", { class: "muted small", "data-testid": "ledger-id", text: entry.id === undefined ? "—" : String(entry.id) }),
        el("td", { class: "small nowrap", title: fmtTime(entry.created_at), text: fmtClock(entry.created_at) }),
        el("td", {}, el("span", { class: `kind kind-${entry.kind}`, text: entry.kind }),
          entry.description ? el("span", { class: "muted small", text: ` ${entry.description}` }) : null),
        el("td", {}, entry.job_id
          ? visibleFits.has(entry.job_id)
            ? el("a", { class: "mono", href: `#/fits/${encodeURIComponent(entry.job_id)}`, "data-testid": "ledger-fit-link",
              text: shortId(entry.job_id) })
            : el("span", { class: "mono muted", "data-testid": "ledger-fit-id", title: `fit ${entry.job_id}`,
              text: shortId(entry.job_id) })
          : el("span", { class: "muted small", text: entry.evaluation_id ? `evaluation ${shortId(entry.evaluation_id)}`
            : entry.preprocessing_dataset_id ? "preprocessing" : "—" })),
        el("td", { class: "numcell" }, num(entry.epsilon, "ledger-epsilon")),
        el("td", { class: "numcell" }, num(remaining(entry.committed_epsilon_after), "ledger-remaining")))))),
    entries.length > LEDGER_ROWS
      ? el("p", { class: "muted small empty-row", text: `The latest ${LEDGER_ROWS} of ${entries.length} entries.` })
      : null);
}

/**
 * Show an estimate: the fit's ε (at its optimal order), committed before → after, remaining after, what it would do
 * to the caller's allocation (when it has one), admissible, and the largest target ε the filters would admit now for
 * the same solver, model and parameters.
 * @param {HTMLElement} target
 * @param {object} estimate The JSON of POST /v1/fits/estimate.
 * @param {(value: number) => HTMLElement|null} [useLargest] A button that puts that ε into the form.
 */
const REFUSALS = {
  epsilon: "over the ε budget",
  delta: "its δ part overflows the pot for δ parts",
  closed: "the dataset admits no more fits",
  allocation: "over your allocation of this budget",
};

function showEstimate(target, estimate, useLargest = () => null) {
  const cost = estimate.cost || {};
  target.hidden = false;
  target.dataset.state = "ok";
  target.className = `estimate-result ${estimate.admissible ? "admissible" : "inadmissible"}`;
  replace(target, facts([
    ["This fit's ε", [num(cost.epsilon, "estimate-cost-epsilon"), el("span", { class: "muted" },
      cost.optimal_order === null ? " on " : " at optimal α = ",
      num(cost.optimal_order, "estimate-optimal-order", fmtConversion))]],
    ["δ", num(cost.delta, "estimate-delta", fmtDelta)],
    ["Committed ε (filter)", [num(estimate.committed_epsilon_before, "estimate-committed-before"), " → ",
      num(estimate.committed_epsilon_after, "estimate-committed-after"),
      el("span", { class: "muted" }, " of ", num(estimate.epsilon_max, "estimate-epsilon-max"))]],
    ["Remaining after", num(estimate.remaining_epsilon_after, "estimate-remaining-after")],
    ...(estimate.allocation ? [["Your allocation", [
      num(estimate.allocation.committed_epsilon_before, "estimate-allocation-before"), " → ",
      num(estimate.allocation.committed_epsilon_after, "estimate-allocation-after"),
      el("span", { class: "muted" }, " of ", num(estimate.allocation.epsilon_max, "estimate-allocation-max"),
        "; remaining after "),
      num(estimate.allocation.remaining_epsilon_after, "estimate-allocation-remaining")]]] : []),
    ["Noise outlook", outlookView(estimate.outlook, "estimate-outlook")],
    ["Admissible", el("span", {
      class: `status ${estimate.admissible ? "status-succeeded" : "status-failed"}`,
      "data-testid": "estimate-admissible", "data-value": String(estimate.admissible),
      text: estimate.admissible ? "yes" : `no — ${REFUSALS[estimate.refusal_reason] || "over budget"}`,
    })],
    ["Largest admissible ε now", estimate.max_admissible_epsilon === 0
      ? el("span", { "data-testid": "estimate-max-epsilon", "data-value": "0", text: "none — nothing is admissible now" })
      : [num(estimate.max_admissible_epsilon, "estimate-max-epsilon", (v) => (v === undefined ? "—" : String(v))),
        " ", useLargest(estimate.max_admissible_epsilon)]],
  ], "estimate-facts"));
}

/**
 * Show a problem (title and detail) inside a result box.
 * @param {HTMLElement} target
 * @param {string} title
 * @param {string} detail
 */
function showInlineProblem(target, title, detail) {
  target.hidden = false;
  target.dataset.state = "error";
  target.className = "estimate-result problem";
  replace(target, el("div", { "data-testid": "estimate-error" },
    el("strong", { "data-testid": "estimate-error-title", text: title }),
    el("p", { "data-testid": "estimate-error-detail", text: detail })));
}

// ---------------------------------------------------------------------------------------------------------
// fit page

/**
 * The fit page: status, progress, solver/model, times, privacy cost, settings, and the coefficients when it
 * succeeded (or the error when it failed); polled while queued or running, with a cancel button.
 * @param {string} fitId
 */
async function renderFit(fitId) {
  const token = generation;
  const id = encodeURIComponent(fitId);
  replace(viewRoot, el("p", { class: "loading", text: "Loading fit…" }));
  // the whole release metadata: "Release metadata" below shows what it adds to the settings, and how many repeat them
  const fit = await fetchOrShowMissing(`/v1/fits/${id}?include=metadata`, token);
  if (!fit) return;
  let dataset = null;
  try {
    dataset = await api(`/v1/datasets/${encodeURIComponent(fit.dataset_id)}`);
  } catch {
    dataset = null; // e.g. the dataset was deleted; the fit is still shown
  }
  if (token !== generation) return;

  const datasetHref = `#/datasets/${encodeURIComponent(fit.dataset_id)}`;
  const statusSlot = el("span", { class: "status-slot" });
  const cancelSlot = el("span", { class: "cancel-slot" });
  const progressSlot = el("div", { class: "progress-slot" });
  const timesSlot = el("div", {});
  const outcomeSlot = el("div", { "data-testid": "fit-outcome" });
  const evaluationsSlot = el("div", {});
  const cost = fit.cost || {};

  replace(viewRoot,
    el("nav", { class: "crumbs", "aria-label": "breadcrumb" },
      el("a", { href: "#/datasets", text: "Datasets" }), el("span", { text: "/" }),
      el("a", { href: datasetHref, "data-testid": "fit-dataset-link", text: dataset ? dataset.name : shortId(fit.dataset_id) }),
      el("span", { text: "/" }), el("span", { text: `Fit ${shortId(fit.id)}` })),
    el("div", { class: "page-head" },
      el("div", {},
        el("h1", { class: "fit-title" }, el("span", { text: `Fit ${shortId(fit.id)}` }), statusSlot),
        el("p", { class: "muted small mono", "data-testid": "fit-id", text: `id ${fit.id}` })),
      cancelSlot),
    el("section", { class: "panel", "data-testid": "fit-summary" },
      el("div", { class: "stats" },
        stat("Solver", el("span", { "data-testid": "fit-solver", text: fit.solver })),
        stat("Model", el("span", { "data-testid": "fit-model", text: fit.model })),
        stat("Privacy cost ε", num(cost.epsilon, "fit-cost-epsilon")),
        stat("δ", num(cost.delta, "fit-cost-delta", fmtDelta)),
        stat("Optimal order α", num(cost.optimal_order, "fit-cost-order", fmtConversion),
          cost.at_grid_edge ? "at the edge of the order grid" : ""),
        stat("Dataset", el("a", { href: datasetHref, text: dataset ? dataset.name : shortId(fit.dataset_id) })),
        stat("Noise outlook", outlookView(fit.outlook, "fit-outlook"))),
      progressSlot, timesSlot),
    evaluationsSlot, // before the result: its form is at the top of the page, not under the coefficient table
    outcomeSlot,
    el("details", { class: "panel settings", "data-testid": "fit-settings" },
      el("summary", { text: "Resolved settings and accounting" }),
      el("div", { class: "table-wrap" }, settingsTable(fit.settings || {}, cost, "settings-table"))));

  let drawnOutcome = null;
  let cancelling = false;
  const cancelButton = el("button", {
    type: "button", class: "button button-danger", "data-testid": "fit-cancel", text: "Cancel fit",
    onclick: async () => {
      cancelling = true;
      cancelButton.disabled = true;
      try {
        draw(await api(`/v1/fits/${id}/cancel?include=metadata`, { method: "POST" }));
        follow();
      } catch (error) {
        showError(error);
      } finally {
        cancelling = false;
      }
    },
  });
  /**
   * Update the dynamic parts of the page from a fit's JSON.
   * @param {object} current
   */
  function draw(current) {
    viewRoot.dataset.fitStatus = current.status;
    replace(statusSlot, statusBadge(current.status));
    replace(progressSlot, el("div", { class: "progress-row" },
      el("span", { class: "muted small", text: "Progress" }), progressBar(current.progress)));
    replace(timesSlot, facts([
      ["Created", el("span", { "data-testid": "fit-created", text: fmtTime(current.created_at) })],
      ["Started", el("span", { "data-testid": "fit-started", text: fmtTime(current.started_at) })],
      ["Finished", el("span", { "data-testid": "fit-finished", text: fmtTime(current.finished_at) })],
      ["Duration", el("span", { text: current.finished_at ? fmtDuration(current.started_at || current.created_at, current.finished_at) : "—" })],
    ], "fit-times"));
    // one button, updated in place: an event arriving as the user clicks must not swap the button under the pointer
    if (ACTIVE.has(current.status)) {
      cancelButton.textContent = current.cancel_requested ? "Cancelling…" : "Cancel fit";
      cancelButton.disabled = current.cancel_requested || cancelling;
      if (cancelButton.parentNode !== cancelSlot) replace(cancelSlot, cancelButton);
    } else {
      replace(cancelSlot, null);
    }
    if (drawnOutcome !== current.status) {
      drawnOutcome = current.status;
      replace(outcomeSlot, outcome(current));
      if (current.status === "succeeded" && current.result && current.result.predictor !== false) {
        replace(evaluationsSlot, evaluationsPanel(current.id, dataset, token));
      }
    }
  }

  let following = false;
  /**
   * Follow the fit's event stream (GET /v1/fits/{id}/events) while it is queued or running; poll instead when the
   * stream is refused (429: every slot taken), fails, or ends before the fit does (a timeout, a stopping server).
   */
  function follow() {
    if (following || polling) return;
    following = true;
    const controller = new AbortController();
    streams.add(controller);
    fitEvents(`/v1/fits/${id}/events?include=metadata`, (current) => {
      if (token === generation) draw(current);
    }, controller.signal).then((reason) => {
      following = false;
      streams.delete(controller);
      if (token === generation && reason !== "finished") poll();
    }, () => {
      following = false;
      streams.delete(controller);
      if (token === generation && !controller.signal.aborted) poll();
    });
  }

  let polling = false;
  /** Poll every second while the fit is queued or running (where its event stream is not available). */
  function poll() {
    if (polling) return;
    polling = true;
    const tick = async () => {
      try {
        const current = await api(`/v1/fits/${id}?include=metadata`);
        if (token !== generation) return;
        draw(current);
        if (ACTIVE.has(current.status)) later(token, tick, POLL_MS);
        else polling = false;
      } catch (error) {
        if (token !== generation) return; // e.g. a 401 logged out
        showError(error); // transient: keep trying
        later(token, tick, POLL_MS);
      }
    };
    later(token, tick, POLL_MS);
  }

  draw(fit);
  if (ACTIVE.has(fit.status)) follow();
}

/**
 * The private evaluations of a succeeded fit (GET /v1/fits/{id}/evaluations), newest first, each with its ε and
 * every metric's noisy value and interval; for owners and analysts, when the dataset has validation rows, a form
 * that runs one (POST /v1/fits/{id}/evaluate, charged to the dataset's budget, sent with an Idempotency-Key).
 * @param {string} fitId
 * @param {object|null} dataset The fit's dataset (null when it could not be read, e.g. deleted).
 * @param {number} token The view generation.
 * @returns {HTMLElement}
 */
function evaluationsPanel(fitId, dataset, token) {
  const id = encodeURIComponent(fitId);
  const role = getSession().me.role;
  const rows = dataset ? dataset.n_validation || 0 : 0;
  const list = el("div", { class: "table-wrap", "data-testid": "evaluations-list" },
    el("p", { class: "loading", text: "Loading evaluations…" }));

  async function refresh() {
    const evaluations = await listAll(`/v1/fits/${id}/evaluations`);
    if (token !== generation) return;
    replace(list, evaluationsTable(evaluations));
  }

  let form = null;
  if (rows > 0 && (role === "owner" || role === "analyst")) {
    const epsilonInput = el("input", { "data-testid": "evaluate-epsilon", name: "epsilon", type: "number",
      min: "0.000001", max: "100", step: "any", value: "0.1", inputmode: "decimal" });
    const button = el("button", { type: "submit", class: "button", "data-testid": "evaluate-run", text: "Evaluate privately" });
    const status = el("span", { class: "form-error", "data-testid": "evaluate-error" });
    form = el("form", { class: "estimate-form", "data-testid": "evaluate-form" },
      el("div", { class: "form-row" }, el("label", {}, el("span", { text: "ε of the evaluation" }), epsilonInput)),
      el("div", { class: "form-actions" }, button), status);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      button.disabled = true;
      replace(status);
      try {
        await api(`/v1/fits/${id}/evaluate`, { method: "POST", body: { privacy: { epsilon: Number(epsilonInput.value) } },
          headers: { "Idempotency-Key": newIdempotencyKey() } });
        await refresh();
      } catch (error) {
        if (token !== generation || (error instanceof ApiError && error.status === 401)) return; // 401: logged out
        replace(status, problemText(error));
      } finally {
        button.disabled = false;
      }
    });
  }
  refresh().catch((error) => { if (token === generation) showError(error); });
  return el("section", { class: "panel", "data-testid": "fit-evaluations" },
    el("div", { class: "panel-head" }, el("h2", { text: "Private evaluations" }),
      el("span", { class: "muted small", "data-testid": "evaluations-note", text: rows > 0
        ? `on the dataset's ${rows} private validation rows; each is charged to its budget, and its intervals account for the noise`
        : "the dataset has no private validation rows (its owner declares them with validation_fraction at upload)" })),
    form, list);
}

/**
 * The evaluations of a fit as a table, newest first: time, ε, status, and one cell per metric.
 * @param {object[]} evaluations Oldest first.
 * @returns {HTMLElement}
 */
function evaluationsTable(evaluations) {
  if (evaluations.length === 0) {
    return el("p", { class: "muted empty-row", "data-testid": "evaluations-empty", text: "No evaluations yet." });
  }
  const metric = (r) => el("div", { class: "small", "data-testid": "evaluation-metric", "data-metric": r.metric, "data-value": r.value },
    el("span", { class: "mono", text: `${r.metric} ${fmtNumber(r.value, 4)}` }),
    el("span", { class: "muted", text: ` [${fmtNumber(r.interval[0], 4)}, ${fmtNumber(r.interval[1], 4)}] at ${Math.round(r.confidence * 100)}%` }),
    el("span", { class: "muted", text: ` · ${r.noise} b = ${fmtNumber(r.scale)}, ε ${fmtNumber(r.epsilon)}` }));
  return el("table", { class: "table", "data-testid": "evaluations-table" },
    el("thead", {}, el("tr", {}, ["Time", "ε", "Status", "Metrics (noisy value, interval)"].map((h) => el("th", { text: h })))),
    el("tbody", {}, evaluations.slice().reverse().map((e) => el("tr", { "data-testid": "evaluation-row", "data-status": e.status },
      el("td", { class: "small nowrap", text: fmtTime(e.created_at) }),
      el("td", { class: "numcell" }, num(e.epsilon, "evaluation-epsilon")),
      el("td", {}, statusBadge(e.status, "evaluation-status")),
      el("td", {}, ...(e.results || []).map(metric),
        e.error ? el("span", { class: "muted small", text: e.error.detail }) : null)))));
}

/**
 * A settings-like object as a two-column table (nested values as JSON), with optional `cost.*` rows.
 * @param {object} settings
 * @param {object} cost
 * @param {string} [testid]
 * @returns {HTMLElement}
 */
function settingsTable(settings, cost, testid) {
  const rows = Object.entries(settings).map(([k, v]) => [k, settingText(v)]);
  for (const k of ["grid", "formula_version", "extra_delta", "approx_delta"]) {
    if (k in cost) rows.push([`cost.${k}`, String(cost[k])]);
  }
  return el("table", { class: "table kv-table", "data-testid": testid }, el("tbody", {},
    rows.map(([k, v]) => el("tr", { "data-testid": "setting-row", "data-key": k },
      el("th", { class: "mono", text: k }), el("td", { class: "mono", text: v })))));
}

/**
 * One setting's value as text (objects and arrays as JSON).
 * @param {unknown} value
 * @returns {string}
 */
function settingText(value) {
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

/**
 * The release metadata of a result, less what the fit's resolved settings already say (the metadata starts from
 * the resolved settings: each value is shown once, in "Resolved settings" unless the release's differs).
 * @param {object} result The fit's result.
 * @param {object} settings The fit's resolved settings.
 * @returns {HTMLElement|null}
 */
function metadataDetails(result, settings) {
  const metadata = result.metadata || {};
  const own = Object.fromEntries(Object.entries(metadata)
    .filter(([k, v]) => !(k in settings) || settingText(settings[k]) !== settingText(v)));
  const repeated = Object.keys(metadata).length - Object.keys(own).length;
  if (Object.keys(metadata).length === 0) return null;
  return el("details", { class: "metadata", "data-testid": "release-metadata" },
    el("summary", { text: "Release metadata (data-independent)" }),
    Object.keys(own).length ? el("div", { class: "table-wrap" }, settingsTable(own, {}, "release-metadata-table"))
      : el("p", { class: "muted small", text: "Nothing beyond the resolved settings." }),
    repeated ? el("p", { class: "muted small", "data-testid": "release-metadata-note",
      text: `${repeated} more value${repeated === 1 ? " is" : "s are"} the same as in “Resolved settings and accounting” below.` }) : null);
}

/**
 * A "Download CSV" button for a coefficient table.
 * @param {string} fitId
 * @param {string[]} header
 * @param {Array<Array<string|number>>} rows
 * @returns {HTMLElement}
 */
function csvButton(fitId, header, rows) {
  return el("button", { type: "button", class: "button button-small", "data-testid": "coefficients-csv",
    text: "Download CSV", onclick: () => download(`fit-${shortId(fitId)}-coefficients.csv`, toCsv(header, rows)) });
}

/**
 * The coefficients of a multinomial fit (a categorical label with k classes): a table with one row per feature
 * (and the intercept) and one column per class, each cell tinted by its sign; sortable by any column, exported
 * as CSV.
 * @param {object} fit the fit; its result has classes (k names), coefficients (k rows of d numbers), intercept
 *   (k or null)
 * @returns {HTMLElement}
 */
function multiclassOutcome(fit) {
  const result = fit.result;
  const classes = result.classes;
  const d = result.coefficients.length ? result.coefficients[0].length : 0;
  const names = result.feature_names || Array.from({ length: d }, (_, i) => `x${i}`);
  const rows = names.map((name, i) => ({ name, values: result.coefficients.map((r) => r[i]) }));
  const intercept = Array.isArray(result.intercept) ? { name: "(intercept)", values: result.intercept } : null;
  /**
   * One row of the matrix: a feature's coefficient in every class.
   * @param {{name: string, values: number[]}} row
   * @param {boolean} pinned the intercept
   * @returns {HTMLElement}
   */
  const renderRow = (row, pinned) => el("tr", { "data-testid": pinned ? "coefficient-matrix-intercept" : "coefficient-matrix-row",
    "data-feature": row.name },
  el("th", { class: "mono", text: row.name }),
  row.values.map((v, j) => el("td", { class: `numcell mono ${v >= 0 ? "coef-pos-text" : "coef-neg-text"}`,
    "data-class": classes[j], "data-value": v, text: v.toFixed(4) })));
  const table = sortableTable({
    columns: [{ label: "Feature", key: (r) => r.name },
      ...classes.map((c, j) => ({ label: c, key: (r) => r.values[j], className: "numcell mono" }))],
    rows, pinned: intercept ? [intercept] : [], renderRow,
    attrs: { class: "table coef-table coef-matrix", "data-testid": "coefficients-matrix" },
  });
  const csvRows = [...rows, ...(intercept ? [intercept] : [])].map((r) => [r.name, ...r.values]);
  return el("section", { class: "panel", "data-testid": "fit-result" },
    el("div", { class: "panel-head panel-head-wrap" }, el("h2", { text: "Coefficients" }),
      el("span", { class: "muted small", text: `${result.solver} · ${result.model} (multinomial, ${classes.length} classes) · predicts the most probable class of softmax(Θx + b)` }),
      selectedNote(result), csvButton(fit.id, ["feature", ...classes], csvRows)),
    el("div", { class: "table-scroll" }, table),
    metadataDetails(result, fit.settings || {}));
}

/**
 * For a private selection (solver "auto"): which candidate the released model is (part of the release).
 * @param {object} result the fit's result
 * @returns {HTMLElement|null}
 */
function selectedNote(result) {
  if (!result.selected) return null;
  return el("span", { class: "role-badge", "data-testid": "selected-candidate",
    text: `selected: ${result.selected.solver}` });
}

/**
 * The coefficients of a fit with one coefficient per feature: name, value and a diverging bar; sortable by
 * feature, value or magnitude (the intercept stays last), exported as CSV.
 * @param {object} fit
 * @returns {HTMLElement}
 */
function coefficientsOutcome(fit) {
  const result = fit.result;
  const names = result.feature_names || result.coefficients.map((_, i) => `x${i}`);
  const hasIntercept = result.intercept !== null && result.intercept !== undefined;
  const values = [...result.coefficients, ...(hasIntercept ? [result.intercept] : [])];
  const scale = Math.max(1e-12, ...values.map((v) => Math.abs(v)));
  /**
   * A diverging bar for one coefficient, scaled by the largest magnitude.
   * @param {number} value
   * @returns {SVGElement}
   */
  const bar = (value) => {
    const half = 50 * Math.min(1, Math.abs(value) / scale);
    return svg("svg", { viewBox: "0 0 100 10", preserveAspectRatio: "none", class: "coef-bar", "aria-hidden": "true" },
      svg("rect", { x: value >= 0 ? 50 : 50 - half, width: half, y: 1.5, height: 7,
        class: value >= 0 ? "coef-pos" : "coef-neg" }),
      svg("line", { x1: 50, x2: 50, y1: 0, y2: 10, class: "coef-axis" }));
  };
  /**
   * One row of the coefficients table.
   * @param {{name: string, value: number}} row
   * @param {boolean} pinned the intercept
   * @returns {HTMLElement}
   */
  const renderRow = (row, pinned) => el("tr", { "data-testid": pinned ? "coefficient-intercept" : "coefficient-row",
    "data-feature": row.name, "data-value": row.value },
  el("th", { class: "mono", text: row.name }),
  el("td", { class: "numcell mono", text: row.value.toFixed(4) }),
  el("td", { class: "barcell" }, bar(row.value)));
  const rows = result.coefficients.map((value, i) => ({ name: names[i], value }));
  const intercept = hasIntercept ? { name: "(intercept)", value: result.intercept } : null;
  const table = sortableTable({
    columns: [{ label: "Feature", key: (r) => r.name },
      { label: "Coefficient", key: (r) => r.value, className: "numcell" },
      { label: "|Coefficient|", key: (r) => Math.abs(r.value) }],
    rows, pinned: intercept ? [intercept] : [], renderRow,
    attrs: { class: "table coef-table", "data-testid": "coefficients-table" },
  });
  const csvRows = [...rows, ...(intercept ? [intercept] : [])].map((r) => [r.name, r.value]);
  return el("section", { class: "panel", "data-testid": "fit-result" },
    el("div", { class: "panel-head panel-head-wrap" }, el("h2", { text: "Coefficients" }),
      el("span", { class: "muted small", text: `${result.solver} · ${result.model}${result.predictor === false ? " · an estimate of a feature statistic (no predictions)" : " · predicts ⟨θ, x⟩ + b"}` }),
      selectedNote(result), csvButton(fit.id, ["feature", "coefficient"], csvRows)),
    el("div", { class: "table-scroll" }, table),
    metadataDetails(result, fit.settings || {}));
}

/**
 * The outcome section of a fit: coefficients when it succeeded, the error when it failed or was cancelled,
 * a waiting note otherwise.
 * @param {object} fit
 * @returns {HTMLElement}
 */
function outcome(fit) {
  if (fit.status === "succeeded" && fit.result && Array.isArray(fit.result.classes)) {
    return multiclassOutcome(fit);
  }
  if (fit.status === "succeeded" && fit.result) {
    return coefficientsOutcome(fit);
  }
  if (fit.status === "failed" || fit.status === "cancelled") {
    const error = fit.error || {};
    return el("section", { class: `panel outcome-${fit.status}`, "data-testid": "fit-error" },
      el("h2", { text: fit.status === "failed" ? "The fit failed" : "The fit was cancelled" }),
      el("p", { "data-testid": "fit-error-detail", text: error.detail || "no detail was recorded" }),
      error.type ? el("p", { class: "muted small mono", text: `type: ${error.type}` }) : null,
      el("p", { class: "muted small", text: "No result was released. A fit that ended before reading any row is "
        + "refunded; one that read rows keeps its privacy charge (the ledger below shows which)." }));
  }
  return el("section", { class: "panel waiting", "data-testid": "fit-waiting" },
    el("p", { class: "muted", text: fit.status === "queued" ? "Waiting for a worker…" : "Fitting… the page updates every second." }));
}

// ---------------------------------------------------------------------------------------------------------
// router

/**
 * The current route from the location hash.
 * @returns {{name: string, id?: string}}
 */
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { name: "home" };
  if (parts[0] === "login" && parts.length === 1) return { name: "login" };
  if (parts[0] === "datasets" && parts.length === 1) return { name: "datasets" };
  if (parts[0] === "datasets" && parts.length === 2) return { name: "dataset", id: parts[1] };
  if (parts[0] === "fits" && parts.length === 2) return { name: "fit", id: parts[1] };
  if (parts[0] === "upload" && parts.length === 1) return { name: "upload" };
  if (parts[0] === "keys" && parts.length === 1) return { name: "keys" };
  return { name: "unknown" };
}

/** Render the view of the current route (the login view when there is no session). */
async function render() {
  generation += 1;
  const token = generation;
  timers.forEach((t) => clearTimeout(t));
  timers.clear();
  streams.forEach((controller) => controller.abort());
  streams.clear();
  clearError();
  renderSessionHeader();
  const current = route();
  document.body.dataset.route = current.name;
  if (!getSession()) {
    if (current.name !== "login" && current.name !== "home") afterLogin = location.hash;
    renderLogin();
    return;
  }
  try {
    switch (current.name) {
      case "home":
      case "login":
      case "datasets":
        if (current.name !== "datasets") {
          location.replace("#/datasets");
          return;
        }
        await renderDatasets();
        break;
      case "dataset":
        await renderDataset(current.id);
        break;
      case "fit":
        await renderFit(current.id);
        break;
      case "upload":
        renderUpload({ root: viewRoot, alive: () => token === generation });
        break;
      case "keys":
        await renderKeys({ root: viewRoot, alive: () => token === generation });
        break;
      default:
        replace(viewRoot, errorState(new ApiError(404, "Not Found", `no page at ${location.hash}`)));
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return; // handled by onUnauthorized
    if (token !== generation) return;
    replace(viewRoot, errorState(error)); // the view says what failed; the banner would repeat it
  }
}

onUnauthorized((error) => {
  clearSession();
  generation += 1;
  timers.forEach((t) => clearTimeout(t));
  timers.clear();
  streams.forEach((controller) => controller.abort());
  streams.clear();
  renderSessionHeader();
  afterLogin = location.hash || "#/datasets";
  renderLogin(`${error.title}: ${error.detail}`);
});

document.getElementById("logout").addEventListener("click", () => {
  clearSession();
  afterLogin = "#/datasets";
  if (location.hash === "#/login") render();
  else location.hash = "#/login";
});
document.getElementById("error-dismiss").addEventListener("click", clearError);
window.addEventListener("hashchange", render);
render();
