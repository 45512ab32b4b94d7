// privfit dashboard: what owners and admins manage — upload a dataset (file + schema editor), delete it, grant and
// revoke analyst keys on it, allocate them shares of its budget, and (admins) create, list and revoke API keys.
//
// Every action is one v1 API call with the user's key (docs/client.md): POST /v1/datasets (multipart: file,
// schema, name, allow_duplicate, privacy_domain), DELETE /v1/datasets/{id}, POST|GET /v1/datasets/{id}/grants,
// DELETE /v1/datasets/{id}/grants/{api_key_id}, GET /v1/datasets/{id}/allocations,
// PUT|DELETE /v1/datasets/{id}/allocations/{api_key_id}, POST|GET /v1/keys, DELETE /v1/keys/{id}. The API decides
// who may do what (uploads: owners; a dataset's grants, allocations and deletion: its owner and admins; keys:
// admins); these views are only offered to those roles, so analysts never see an owner's control. Destructive
// actions ask for a second, explicit click.

import { ApiError, api, getSession, listAll } from "./api.js";
import { el, fmtDelta, fmtInt, fmtNumber, fmtTime, num, replace, shortId, sizeUnit } from "./dom.js";
import { errorState, problemText } from "./feedback.js";
import { checkSchemaText, problemFields, starterSchema } from "./schema.js";

/**
 * Whether the session's key may manage this dataset (its owner, or an admin): the API's own rule
 * (`visible_dataset(..., manage=True)`).
 * @param {object} dataset
 * @returns {boolean}
 */
export function canManage(dataset) {
  const session = getSession();
  if (!session) return false;
  return session.me.role === "admin" || (session.me.role === "owner" && dataset.owner_key_id === session.me.key_id);
}

/**
 * A problem shown inline: its title, detail and the fields it names.
 * @param {unknown} error
 * @param {string} testid Prefix of the test ids (`-title`, `-detail`, `-field`).
 * @returns {HTMLElement}
 */
function inlineProblem(error, testid) {
  const title = error instanceof ApiError ? `${error.title}${error.status ? ` (HTTP ${error.status})` : ""}` : "Error";
  const detail = error instanceof ApiError ? error.detail : String(error && error.message ? error.message : error);
  const fields = error instanceof ApiError ? problemFields(error.problem) : [];
  return el("div", { class: "inline-problem", role: "alert", "data-testid": testid },
    el("strong", { "data-testid": `${testid}-title`, text: title }),
    el("p", { "data-testid": `${testid}-detail`, text: detail }),
    fields.length ? el("p", { class: "small" }, "Field: ",
      fields.map((field) => el("code", { class: "field-name", "data-testid": `${testid}-field`, text: field }))) : null);
}

/**
 * A button that asks for confirmation: the first click shows the question with "confirm" and "keep" buttons.
 * @param {object} spec
 * @param {string} spec.label The button's text.
 * @param {string} spec.question What the confirmation says.
 * @param {string} spec.confirmLabel The confirming button's text.
 * @param {string} spec.testid Test id of the button (`-confirm`, `-keep` for the others).
 * @param {() => Promise<void>} spec.action Run on confirmation; an error is shown next to the buttons.
 * @param {boolean} [spec.small]
 * @returns {HTMLElement}
 */
function confirmButton({ label, question, confirmLabel, testid, action, small = false }) {
  const size = small ? " button-small" : "";
  const slot = el("span", { class: "confirm" });
  const start = el("button", { type: "button", class: `button button-danger${size}`, "data-testid": testid, text: label });
  /** Back to the single button. */
  const reset = () => replace(slot, start);
  start.addEventListener("click", () => {
    const yes = el("button", { type: "button", class: `button button-danger-solid${size}`, "data-testid": `${testid}-confirm`,
      text: confirmLabel });
    const no = el("button", { type: "button", class: `button${size}`, "data-testid": `${testid}-keep`, text: "Keep",
      onclick: reset });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      no.disabled = true;
      try {
        await action();
      } catch (error) {
        replace(slot, start, el("span", { class: "form-error small", "data-testid": `${testid}-error`, text: problemText(error) }));
      }
    });
    replace(slot, el("span", { class: "confirm-question", "data-testid": `${testid}-question`, text: question }), yes, no);
    no.focus();
  });
  reset();
  return slot;
}

// ---------------------------------------------------------------------------------------------------------
// upload

/**
 * The column-by-column schema builder, kept in step with the JSON text: editing a column rewrites the JSON;
 * editing the JSON redraws the columns (when it parses to an object).
 * @param {HTMLTextAreaElement} textarea The schema's JSON text (the source of truth).
 * @param {() => void} onChange Called after the builder rewrote the JSON.
 * @returns {{element: HTMLElement, load: () => void}}
 */
function schemaBuilder(textarea, onChange) {
  const root = el("div", { class: "builder", "data-testid": "schema-builder" });
  let state = null;

  /** Write the state to the textarea. */
  function write() {
    textarea.value = JSON.stringify(state, null, 2);
    onChange();
  }

  /**
   * A text or number input bound to `object[key]` (an empty field removes the key).
   * @returns {HTMLElement}
   */
  function field(label, object, key, { type = "text", testid, list = false, width = "" } = {}) {
    const current = object[key];
    const value = current === undefined || current === null ? "" : list ? current.join(", ") : String(current);
    const input = el("input", { type, value, "data-testid": testid, step: type === "number" ? "any" : null,
      spellcheck: "false", "aria-label": label });
    input.addEventListener("input", () => {
      const raw = input.value.trim();
      if (raw === "") delete object[key];
      else if (list) object[key] = raw.split(",").map((part) => part.trim()).filter(Boolean);
      else object[key] = type === "number" ? Number(raw) : input.value;
      write();
    });
    return el("label", { class: `builder-field ${width}` }, el("span", { text: label }), input);
  }

  /**
   * The type select of a column; changing it keeps the name and resets the type's own keys.
   * @returns {HTMLElement}
   */
  function typeSelect(object, types, testid) {
    const select = el("select", { "data-testid": testid, "aria-label": "type" },
      types.map((t) => el("option", { value: t, text: t })));
    select.value = object.type;
    select.addEventListener("change", () => {
      const name = object.name;
      for (const key of Object.keys(object)) delete object[key];
      Object.assign(object, { name, type: select.value }, DEFAULTS[select.value]);
      write();
      draw();
    });
    return el("label", { class: "builder-field" }, el("span", { text: "Type" }), select);
  }

  /** The fields of one column by its type. */
  function details(object, prefix) {
    switch (object.type) {
      case "numeric":
        return [field("Lower", object, "lower", { type: "number", testid: `${prefix}-lower`, width: "narrow" }),
          field("Upper", object, "upper", { type: "number", testid: `${prefix}-upper`, width: "narrow" })];
      case "categorical":
        return [field("Levels (comma-separated)", object, "levels", { list: true, testid: `${prefix}-levels`, width: "wide" })];
      case "binary":
        return [field("Positive class", object, "positive", { testid: `${prefix}-positive` }),
          field("Negative class", object, "negative", { testid: `${prefix}-negative` })];
      default:
        return [el("span", { class: "muted small builder-note", text: "present in the file, not used" })];
    }
  }

  /**
   * Whether the state has the shape the editor can show: label, budget (objects) and features (a list of
   * objects), each possibly absent (then created empty).
   * @returns {boolean}
   */
  function editable() {
    const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
    if (!isObject(state)) return false;
    if (state.label !== undefined && !isObject(state.label)) return false;
    if (state.budget !== undefined && !isObject(state.budget)) return false;
    return state.features === undefined || (Array.isArray(state.features) && state.features.every(isObject));
  }

  /** Redraw every row from the state. */
  function draw() {
    if (!editable()) {
      replace(root, el("p", { class: "muted small", "data-testid": "builder-unavailable",
        text: "The JSON below is not an object that the column editor can show; fix it (Validate says where) to edit it column by column." }));
      return;
    }
    if (state.label === undefined) state.label = { name: "", type: "binary" };
    if (state.features === undefined) state.features = [];
    if (state.budget === undefined) state.budget = {};
    const label = el("div", { class: "builder-row builder-label", "data-testid": "builder-label" },
      el("span", { class: "builder-role", text: "label" }),
      field("Name", state.label, "name", { testid: "builder-label-name" }),
      typeSelect(state.label, ["binary", "categorical", "numeric"], "builder-label-type"),
      details(state.label, "builder-label"));
    const features = state.features.map((feature, i) => el("div", { class: "builder-row", "data-testid": "builder-feature" },
      el("span", { class: "builder-role", text: `#${i + 1}` }),
      field("Name", feature, "name", { testid: "builder-feature-name" }),
      typeSelect(feature, ["numeric", "categorical", "ignore"], "builder-feature-type"),
      details(feature, "builder-feature"),
      el("button", { type: "button", class: "button button-small button-quiet builder-remove", "data-testid": "builder-remove",
        "aria-label": `remove column ${i + 1}`, text: "Remove",
        onclick: () => { state.features.splice(i, 1); write(); draw(); } })));
    const add = el("button", { type: "button", class: "button button-small", "data-testid": "builder-add", text: "+ Add column",
      onclick: () => { state.features.push({ name: `column_${state.features.length + 1}`, type: "numeric", lower: 0, upper: 1 }); write(); draw(); } });
    const missing = el("select", { "data-testid": "builder-missing", "aria-label": "missing values" },
      ["reject", "impute"].map((m) => el("option", { value: m, text: m })));
    missing.value = state.missing === "impute" ? "impute" : "reject";
    missing.addEventListener("change", () => { state.missing = missing.value; write(); });
    // Private preprocessing at upload (docs/datasets.md): the default share, a share of the owner's, or none.
    const preprocessing = el("select", { "data-testid": "builder-preprocessing", "aria-label": "private preprocessing" },
      [["default", "on (5 % of the budget)"], ["share", "on, with the share below"], ["none", "none"]]
        .map(([value, text]) => el("option", { value, text })));
    const declared = state.preprocessing;
    preprocessing.value = declared === "none" ? "none" : declared && typeof declared === "object" ? "share" : "default";
    preprocessing.addEventListener("change", () => {
      if (preprocessing.value === "none") state.preprocessing = "none";
      else if (preprocessing.value === "share") state.preprocessing = { share: 0.05 };
      else delete state.preprocessing;
      write();
      draw();
    });
    const share = state.preprocessing && typeof state.preprocessing === "object"
      ? field("Preprocessing share", state.preprocessing, "share", { type: "number", testid: "builder-preprocessing-share", width: "narrow" })
      : null;
    replace(root, label, features, el("div", { class: "builder-actions" }, add),
      el("div", { class: "builder-row builder-budget" },
        el("span", { class: "builder-role", text: "budget" }),
        field("ε max", state.budget, "epsilon", { type: "number", testid: "builder-epsilon", width: "narrow" }),
        field("δ", state.budget, "delta", { type: "number", testid: "builder-delta", width: "narrow" }),
        el("label", { class: "builder-field" }, el("span", { text: "Missing values" }), missing),
        field("Validation fraction (optional)", state, "validation_fraction", { type: "number", testid: "builder-validation", width: "narrow" }),
        el("label", { class: "builder-field" }, el("span", { text: "Private preprocessing" }), preprocessing), share));
  }

  /** Read the textarea into the state and redraw (a JSON that is not an object leaves the builder unavailable). */
  function load() {
    try {
      state = JSON.parse(textarea.value);
    } catch {
      state = null;
    }
    draw();
  }

  return { element: root, load };
}

/** The keys a column gets when its type is chosen in the builder. */
const DEFAULTS = {
  numeric: { lower: 0, upper: 1 },
  categorical: { levels: [] },
  ignore: {},
  binary: { positive: "yes", negative: "no" },
};

/**
 * The upload view (owners): a name, a CSV file, the schema (a JSON editor or column by column, or loaded from a
 * .json file), "Validate" (the JSON's shape, checked in the browser: see schema.js; then the API's own checks,
 * POST /v1/datasets/schema-check), an optional privacy domain (one of the owner's live datasets: the upload then
 * spends its budget, whose (ε, δ) the note shows and can put in the schema) and "Upload" (validated first; the API's
 * problem+json is shown with the fields it names, and a duplicate's 409 with a button that chooses the existing
 * dataset's privacy domain).
 * @param {{root: HTMLElement, alive: () => boolean}} view The view's root element and whether it is current.
 */
export function renderUpload(view) {
  const role = getSession().me.role;
  if (role !== "owner") {
    replace(view.root, errorState(new ApiError(403, "Forbidden", `uploads are for owner keys; this key is ${role === "admin" ? "an admin" : `an ${role}`} key`)));
    return;
  }
  const nameInput = el("input", { id: "upload-name", "data-testid": "upload-name", type: "text", maxlength: 200,
    placeholder: "default: the file's name", autocomplete: "off" });
  const fileInput = el("input", { id: "upload-file", "data-testid": "upload-file", type: "file", accept: ".csv,text/csv,.parquet,application/vnd.apache.parquet", required: true });
  const schemaFile = el("input", { id: "upload-schema-file", "data-testid": "upload-schema-file", type: "file", accept: ".json,application/json" });
  const duplicate = el("input", { id: "upload-allow-duplicate", "data-testid": "upload-allow-duplicate", type: "checkbox" });
  const domainSelect = el("select", { id: "upload-privacy-domain", "data-testid": "upload-privacy-domain",
    "aria-label": "privacy domain" }, el("option", { value: "", text: "its own budget" }));
  const domainSlot = el("div", { "data-testid": "upload-domain-note", "aria-live": "polite" });
  const textarea = el("textarea", { id: "upload-schema", "data-testid": "upload-schema", rows: 14, spellcheck: "false",
    "aria-label": "schema JSON" });
  textarea.value = JSON.stringify(starterSchema(), null, 2);
  const checkSlot = el("div", { class: "schema-check", "data-testid": "schema-check", "aria-live": "polite" });
  const resultSlot = el("div", { class: "upload-result", "data-testid": "upload-result", "aria-live": "polite" });
  const builder = schemaBuilder(textarea, () => replace(checkSlot));
  textarea.addEventListener("input", () => { replace(checkSlot); builder.load(); });
  builder.load();

  /** The owner's live datasets (GET /v1/datasets), offered as privacy domains to register into. */
  let owned = [];
  const me = getSession().me;
  /** (Re)list the owner's datasets in the privacy domain select, keeping the choice if it is still there. */
  async function loadOwned() {
    let datasets;
    try {
      datasets = await listAll("/v1/datasets");
    } catch (error) {
      if (view.alive()) replace(domainSlot, el("p", { class: "form-error small", text: `Your datasets could not be listed: ${problemText(error)}` }));
      return;
    }
    if (!view.alive()) return;
    const chosen = domainSelect.value;
    owned = datasets.filter((dataset) => dataset.owner_key_id === me.key_id);
    replace(domainSelect, el("option", { value: "", text: "its own budget" }),
      owned.map((dataset) => el("option", { value: dataset.id, text: `${dataset.name} (${shortId(dataset.id)})` })));
    domainSelect.value = owned.some((dataset) => dataset.id === chosen) ? chosen : "";
  }
  loadOwned();

  /**
   * Put (ε, δ) in the schema's budget (the JSON, then the column editor).
   * @param {{epsilon_max: number, delta_max: number}} budget
   */
  function declareBudget(budget) {
    let declared;
    try {
      declared = JSON.parse(textarea.value);
    } catch {
      declared = null;
    }
    if (declared === null || typeof declared !== "object" || Array.isArray(declared)) {
      replace(checkSlot, el("p", { class: "form-error", text: "Fix the schema's JSON first (Validate says where)." }));
      return;
    }
    const current = declared.budget !== null && typeof declared.budget === "object" && !Array.isArray(declared.budget)
      ? declared.budget : {};
    declared.budget = { ...current, epsilon: budget.epsilon_max, delta: budget.delta_max };
    textarea.value = JSON.stringify(declared, null, 2);
    replace(checkSlot);
    builder.load();
  }

  /** The chosen privacy domain's note: whose budget the upload spends and the (ε, δ) its schema must declare. */
  async function showDomain() {
    const chosen = domainSelect.value;
    if (!chosen) {
      replace(domainSlot);
      return;
    }
    const dataset = owned.find((other) => other.id === chosen);
    const root = dataset && dataset.privacy_domain && dataset.privacy_domain !== chosen
      ? owned.find((other) => other.id === dataset.privacy_domain) : null;
    replace(domainSlot, el("p", { class: "loading small", text: "Loading its budget…" }));
    let budget;
    try {
      budget = await api(`/v1/datasets/${encodeURIComponent(chosen)}/budget`);
    } catch (error) {
      if (view.alive() && domainSelect.value === chosen) replace(domainSlot, inlineProblem(error, "upload-domain-error"));
      return;
    }
    if (!view.alive() || domainSelect.value !== chosen) return;
    replace(domainSlot, el("p", { class: "muted small domain-budget", "data-testid": "upload-domain-budget",
      "data-epsilon": budget.epsilon_max, "data-delta": budget.delta_max },
    `The new dataset spends the budget of “${dataset ? dataset.name : chosen}”`,
    root ? ` (the privacy domain of “${root.name}”)` : "",
    ": one privacy filter and one ledger for both. Its schema must declare that budget: ε ",
    num(budget.epsilon_max, "upload-domain-epsilon", (v) => String(v)), ", δ ",
    num(budget.delta_max, "upload-domain-delta", fmtDelta), ".",
    el("button", { type: "button", class: "button button-small", "data-testid": "upload-domain-use-budget",
      text: "Put it in the schema", onclick: () => declareBudget(budget) })));
  }
  domainSelect.addEventListener("change", () => { showDomain(); });

  schemaFile.addEventListener("change", async () => {
    const [file] = schemaFile.files;
    if (!file) return;
    textarea.value = await file.text();
    builder.load();
    await validate();
  });

  /**
   * Check the schema: its shape in the browser (every problem at once), then against the API
   * (POST /v1/datasets/schema-check: the upload's own checks that need no rows).
   * @returns {Promise<boolean>} Whether it passed.
   */
  async function validate() {
    const { problems } = checkSchemaText(textarea.value);
    checkSlot.dataset.state = problems.length ? "invalid" : "checking";
    if (problems.length === 0) {
      try {
        const checked = await api("/v1/datasets/schema-check", { method: "POST", body: JSON.parse(textarea.value) });
        checkSlot.dataset.state = "valid";
        replace(checkSlot, el("p", { class: "ok", "data-testid": "schema-valid",
          text: `The API accepts the schema: ${fmtInt(checked.d)} encoded features, row-norm bound `
            + `${checked.row_norm_bound.toFixed(3)}. The rows are checked on upload.` }));
        return true;
      } catch (error) {
        checkSlot.dataset.state = "invalid";
        replace(checkSlot, inlineProblem(error, "schema-api-problem"));
        return false;
      }
    }
    replace(checkSlot, el("div", { class: "inline-problem", role: "alert" },
      el("strong", { text: `The schema has ${problems.length} problem${problems.length === 1 ? "" : "s"}` }),
      el("ul", { class: "problem-list" }, problems.map((p) => el("li", { "data-testid": "schema-problem", "data-field": p.field },
        el("code", { class: "field-name", text: p.field }), ` ${p.message}`)))));
    return false;
  }

  const validateButton = el("button", { type: "button", class: "button", "data-testid": "schema-validate", text: "Validate",
    onclick: () => { validate(); } });
  const uploadButton = el("button", { type: "submit", class: "button button-primary", "data-testid": "upload-submit", text: "Upload" });
  const form = el("form", { class: "upload-form", "data-testid": "upload-form" },
    el("div", { class: "form-row form-row-2" },
      el("label", {}, el("span", { text: "CSV file" }), fileInput),
      el("label", {}, el("span", { text: "Display name" }), nameInput)),
    el("fieldset", { class: "schema-editor" },
      el("legend", { text: "Schema (public: column types, bounds, levels, budget)" }),
      el("p", { class: "muted small", text: "Declare every column of the file: the label and the features, in any order. "
        + "Edit it column by column, or as JSON below (the two stay in step), or load a schema file. "
        + "Nothing here is derived from the rows: see docs/datasets.md." }),
      builder.element,
      el("label", { class: "block" }, el("span", { text: "Schema JSON" }), textarea),
      el("label", { class: "inline" }, el("span", { text: "Load a schema file (.json)" }), schemaFile)),
    el("div", { class: "form-row form-row-2" },
      el("label", {}, el("span", { text: "Privacy domain (optional)" }), domainSelect),
      el("p", { class: "muted small", text: "About people already in one of your datasets (a cleaned re-upload, a "
        + "second table of the same population)? Register it into that dataset's privacy domain: it then spends "
        + "that dataset's budget instead of a fresh one." })),
    domainSlot,
    el("label", { class: "checkbox" }, duplicate,
      el("span", { text: "Register even if I already own a dataset with the same content (it gets its own budget)" })),
    el("div", { class: "form-actions" }, validateButton, uploadButton),
    checkSlot, resultSlot);

  /**
   * Under a duplicate's 409 that proposes the existing dataset's privacy domain (`privacy_domain` in the problem):
   * a button that chooses it in the form (the upload then spends that budget; the schema must declare it).
   * @param {unknown} error
   * @returns {HTMLElement|null}
   */
  function joinOffer(error) {
    const proposed = error instanceof ApiError && error.status === 409 ? error.problem.privacy_domain : null;
    if (typeof proposed !== "string" || !owned.some((dataset) => dataset.id === proposed)
      || domainSelect.value === proposed) return null;
    const existing = owned.find((dataset) => dataset.id === proposed);
    return el("p", { class: "small", "data-testid": "upload-join-offer" },
      `The same people as “${existing.name}”? Register this upload into its privacy domain (one budget for both): `,
      el("button", { type: "button", class: "button button-small", "data-testid": "upload-join-domain",
        text: "Choose its privacy domain", onclick: () => {
          domainSelect.value = proposed;
          showDomain();
          domainSelect.scrollIntoView({ block: "center" });
        } }));
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    replace(resultSlot);
    if (!(await validate())) return;
    const [file] = fileInput.files;
    if (!file) {
      replace(resultSlot, el("p", { class: "form-error", "data-testid": "upload-no-file", text: "Choose the CSV file to upload." }));
      return;
    }
    const body = new FormData();
    body.append("file", file, file.name);
    body.append("schema", textarea.value);
    if (nameInput.value.trim()) body.append("name", nameInput.value.trim());
    if (duplicate.checked) body.append("allow_duplicate", "true");
    if (domainSelect.value) body.append("privacy_domain", domainSelect.value);
    uploadButton.disabled = true;
    replace(resultSlot, el("p", { class: "muted", text: `Uploading ${file.name}…` }));
    try {
      const dataset = await api("/v1/datasets", { method: "POST", form: body });
      if (!view.alive()) return;
      replace(resultSlot, el("p", { class: "ok", "data-testid": "upload-ok", "data-dataset-id": dataset.id },
        "Registered ", el("a", { href: `#/datasets/${encodeURIComponent(dataset.id)}`, "data-testid": "upload-dataset-link",
          text: dataset.name }),
        `: ${fmtInt(dataset.n)}${sizeUnit(dataset)}, ${fmtInt(dataset.d)} encoded features.`));
      await loadOwned(); // the new dataset can be a privacy domain too
    } catch (error) {
      if (!view.alive()) return;
      replace(resultSlot, inlineProblem(error, "upload-error"), joinOffer(error));
    } finally {
      uploadButton.disabled = false;
    }
  });

  replace(view.root,
    el("nav", { class: "crumbs", "aria-label": "breadcrumb" },
      el("a", { href: "#/datasets", text: "Datasets" }), el("span", { text: "/" }), el("span", { text: "Upload" })),
    el("div", { class: "page-head" }, el("div", {},
      el("h1", { text: "Upload a dataset" }),
      el("p", { class: "muted", text: "A CSV file and its public schema. The rows stay private: the service checks them "
        + "against the schema, encodes them and only ever releases differentially private fits." }))),
    el("section", { class: "panel", "data-testid": "upload-panel" }, form));
}

// ---------------------------------------------------------------------------------------------------------
// a dataset's grants, allocations and deletion

/**
 * An analyst key as a table cell shows it: its name with the id in the tooltip and shortened beside it, or the
 * whole id when the key has no name.
 * @param {string} name The key's name (may be empty).
 * @param {string} keyId
 * @param {string} testid Test id of the name's element.
 * @returns {HTMLElement[]}
 */
function keyName(name, keyId, testid) {
  return name
    ? [el("span", { "data-testid": testid, title: `key id ${keyId}`, text: name }),
      el("span", { class: "mono small muted", text: ` ${shortId(keyId)}` })]
    : [el("span", { class: "mono small", "data-testid": testid, title: "this key has no name", text: keyId })];
}

/**
 * The "Allocations" part of a dataset's Access panel (its owner and admins): each analyst key's share (ε, δ) of the
 * budget, with what its fits have committed and what it has left by the allocation's own privacy filter, why it is
 * closed (if it is) and a remove button; and a form that gives a granted analyst key without one a share. The API
 * checks the share (at most the budget's ε and δ: a 422 naming the field) and that it is the key's first (an
 * allocation is fixed once set: a 409); its problem is shown under the form.
 * @param {object} dataset
 * @param {{alive: () => boolean}} view
 * @returns {{element: HTMLElement, refresh: (grants: object[]) => Promise<void>}} `refresh` redraws the list and
 *   the form's choice of keys for the dataset's current grants.
 */
function allocationsSection(dataset, view) {
  const id = encodeURIComponent(dataset.id);
  const budget = (dataset.schema && dataset.schema.budget) || {};
  const list = el("div", { "data-testid": "allocations-list" }, el("p", { class: "loading", text: "Loading allocations…" }));
  const keySelect = el("select", { "data-testid": "allocation-key", required: true, "aria-label": "analyst key" });
  const epsilonInput = el("input", { "data-testid": "allocation-epsilon", type: "number", step: "any", required: true,
    inputmode: "decimal", placeholder: `at most ${budget.epsilon ?? "the budget's ε"}`, "aria-label": "allocation ε" });
  const deltaInput = el("input", { "data-testid": "allocation-delta", type: "number", step: "any", required: true,
    inputmode: "decimal", value: budget.delta ?? "", "aria-label": "allocation δ" });
  const submit = el("button", { type: "submit", class: "button", "data-testid": "allocation-submit", text: "Allocate" });
  const status = el("div", { "data-testid": "allocation-status", "aria-live": "polite" });
  let grants = [];

  /**
   * Reload the allocations and offer, in the form, the granted keys (not revoked) that have none.
   * @param {object[]} [current] The dataset's grants (default: those of the last refresh).
   */
  async function refresh(current = grants) {
    grants = current;
    let allocations;
    try {
      allocations = await listAll(`/v1/datasets/${id}/allocations`);
    } catch (error) {
      if (view.alive()) replace(list, inlineProblem(error, "allocations-error"));
      return;
    }
    if (!view.alive()) return;
    replace(list, allocationsList(allocations));
    const allocated = new Set(allocations.map((allocation) => allocation.api_key_id));
    const open = grants.filter((grant) => !grant.key_revoked && !allocated.has(grant.api_key_id));
    replace(keySelect, open.length
      ? open.map((grant) => el("option", { value: grant.api_key_id,
        text: grant.api_key_name ? `${grant.api_key_name} (${shortId(grant.api_key_id)})` : grant.api_key_id }))
      : el("option", { value: "", text: grants.length ? "every granted key has an allocation" : "grant an analyst key first" }));
    keySelect.disabled = open.length === 0;
    submit.disabled = open.length === 0;
  }

  /**
   * The allocations, one item each: the analyst key and a remove button, then its ε, δ, committed and remaining ε
   * (figures that wrap, so the list fits the page's narrow column) and, when it is closed, why.
   * @param {object[]} allocations
   * @returns {HTMLElement}
   */
  function allocationsList(allocations) {
    if (allocations.length === 0) {
      return el("p", { class: "muted empty-row", "data-testid": "allocations-empty",
        text: "No allocation: every granted analyst spends from the dataset's budget alone." });
    }
    /** A labelled figure of an allocation. */
    const figure = (label, value, testid, format) => el("span", {}, `${label} `, num(value, testid, format));
    return el("ul", { class: "allocation-list", "data-testid": "allocations-table" },
      allocations.map((allocation) => el("li", { class: "allocation-item", "data-testid": "allocation-row",
        "data-key-id": allocation.api_key_id },
      el("div", { class: "allocation-head" },
        el("span", {}, keyName(allocation.api_key_name, allocation.api_key_id, "allocation-key-name")),
        confirmButton({
          label: "Remove", confirmLabel: "Remove allocation", small: true, testid: "allocation-remove",
          question: `Remove the allocation of ${allocation.api_key_name || shortId(allocation.api_key_id)}? It then spends from the dataset's budget alone.`,
          action: async () => {
            await api(`/v1/datasets/${id}/allocations/${encodeURIComponent(allocation.api_key_id)}`, { method: "DELETE" });
            await refresh();
          },
        })),
      el("div", { class: "allocation-figures small" },
        figure("ε", allocation.epsilon_max, "allocation-epsilon-max"),
        figure("δ", allocation.delta_max, "allocation-delta-max", fmtDelta),
        figure("committed ε", allocation.committed_epsilon, "allocation-committed"),
        el("strong", {}, figure("remaining ε", allocation.remaining_epsilon, "allocation-remaining"))),
      allocation.closed_reason
        ? el("p", { class: "form-error small", "data-testid": "allocation-closed", text: `Closed: ${allocation.closed_reason}` })
        : null)));
  }

  const form = el("form", { class: "grant-form allocation-form", "data-testid": "allocation-form" },
    el("label", { class: "grow" }, el("span", { text: "Granted analyst key" }), keySelect),
    el("label", { class: "number-field" }, el("span", { text: "ε" }), epsilonInput),
    el("label", { class: "number-field" }, el("span", { text: "δ" }), deltaInput), submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    replace(status);
    try {
      const allocation = await api(`/v1/datasets/${id}/allocations/${encodeURIComponent(keySelect.value)}`,
        { method: "PUT", body: { epsilon: Number(epsilonInput.value), delta: Number(deltaInput.value) } });
      if (!view.alive()) return;
      replace(status, el("p", { class: "ok small", "data-testid": "allocation-ok",
        text: `${allocation.api_key_name || allocation.api_key_id} may now use ε ${fmtNumber(allocation.epsilon_max)}, `
          + `δ ${fmtDelta(allocation.delta_max)} of this budget.` }));
      epsilonInput.value = "";
    } catch (error) {
      if (view.alive()) replace(status, inlineProblem(error, "allocation-error"));
    } finally {
      submit.disabled = false;
    }
    await refresh();
  });

  const element = el("div", { class: "allocations", "data-testid": "allocations-section" },
    el("div", { class: "panel-head" }, el("h2", { text: "Allocations" }),
      el("span", { class: "muted small", text: "an analyst key's share (ε, δ) of this budget: its fits must fit both; fixed once set" })),
    list, form, status);
  return { element, refresh };
}

/**
 * The "Access" panel of a dataset (its owner and admins): the analyst keys granted (by name, the id in the tooltip
 * and shortened beside it), a form to grant one more by its key id, a revoke button per grant; their allocations
 * of the budget ({@link allocationsSection}); and deletion — each destructive step confirmed.
 * @param {object} dataset
 * @param {{alive: () => boolean, onChange: () => void}} view `onChange` is called after a grant changed.
 * @returns {HTMLElement}
 */
export function managePanel(dataset, view) {
  const id = encodeURIComponent(dataset.id);
  const list = el("div", { class: "table-wrap", "data-testid": "grants-list" }, el("p", { class: "loading", text: "Loading grants…" }));
  const keyInput = el("input", { "data-testid": "grant-key-id", type: "text", placeholder: "analyst key id (a UUID)",
    spellcheck: "false", autocomplete: "off", required: true, "aria-label": "analyst key id" });
  const status = el("div", { "data-testid": "grant-status", "aria-live": "polite" });
  const grantButton = el("button", { type: "submit", class: "button", "data-testid": "grant-submit", text: "Grant" });
  const allocations = allocationsSection(dataset, view);

  /** Reload the grants, then the allocations (whose form offers the granted keys). */
  async function refresh() {
    try {
      const grants = await listAll(`/v1/datasets/${id}/grants`);
      if (!view.alive()) return;
      replace(list, grantsTable(grants));
      await allocations.refresh(grants);
    } catch (error) {
      if (view.alive()) replace(list, inlineProblem(error, "grants-error"));
    }
  }

  /**
   * The grants as a table with a revoke button each.
   * @param {object[]} grants
   * @returns {HTMLElement}
   */
  function grantsTable(grants) {
    if (grants.length === 0) {
      return el("p", { class: "muted empty-row", "data-testid": "grants-empty", text: "No analyst key has been granted this dataset." });
    }
    return el("table", { class: "table grants-table", "data-testid": "grants-table" },
      el("thead", {}, el("tr", {}, ["Analyst key", "Granted", ""].map((h) => el("th", { text: h })))),
      el("tbody", {}, grants.map((grant) => el("tr", { "data-testid": "grant-row", "data-key-id": grant.api_key_id },
        el("td", {}, keyName(grant.api_key_name, grant.api_key_id, "grant-key-name"),
          grant.key_revoked ? el("span", { class: "status status-failed", text: "key revoked" }) : null),
        el("td", { class: "small nowrap", text: fmtTime(grant.created_at) }),
        el("td", { class: "actions" }, confirmButton({
          label: "Revoke", confirmLabel: "Revoke access", small: true, testid: "grant-revoke",
          question: `Revoke key ${grant.api_key_name || shortId(grant.api_key_id)}? Its queued and running fits on this dataset are cancelled.`,
          action: async () => {
            await api(`/v1/datasets/${id}/grants/${encodeURIComponent(grant.api_key_id)}`, { method: "DELETE" });
            await refresh();
            view.onChange();
          },
        }))))));
  }

  const form = el("form", { class: "grant-form", "data-testid": "grant-form" },
    el("label", { class: "grow" }, el("span", { text: "Grant an analyst key" }), keyInput), grantButton);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    grantButton.disabled = true;
    replace(status);
    try {
      await api(`/v1/datasets/${id}/grants`, { method: "POST", body: { api_key_id: keyInput.value.trim() } });
      if (!view.alive()) return;
      replace(status, el("p", { class: "ok small", "data-testid": "grant-ok", text: `Granted to key ${keyInput.value.trim()}.` }));
      keyInput.value = "";
      await refresh();
      view.onChange();
    } catch (error) {
      if (view.alive()) replace(status, inlineProblem(error, "grant-error"));
    } finally {
      grantButton.disabled = false;
    }
  });
  refresh();

  const remove = confirmButton({
    label: "Delete dataset", confirmLabel: "Delete permanently", testid: "dataset-delete",
    question: `Delete “${dataset.name}”? Its rows are purged and its queued fits cancelled; its budget, ledger and fits stay readable to you.`,
    action: async () => {
      await api(`/v1/datasets/${id}`, { method: "DELETE" });
      location.hash = "#/datasets";
    },
  });
  return el("section", { class: "panel", "data-testid": "manage-panel" },
    el("div", { class: "panel-head" }, el("h2", { text: "Access" }),
      el("span", { class: "muted small", text: "analyst keys that may estimate and fit this dataset (an analyst finds its key id on its datasets page)" })),
    list, form, status, allocations.element,
    el("div", { class: "danger-zone" }, el("h2", { text: "Delete" }), remove));
}

// ---------------------------------------------------------------------------------------------------------
// keys (admins)

/**
 * The keys view (admins): every key with its role, name, prefix, id, creation and revocation; a form that creates
 * one (its secret is shown once); a revoke button per valid key (not the admin's own: the API refuses it).
 * @param {{root: HTMLElement, alive: () => boolean}} view
 */
export async function renderKeys(view) {
  const me = getSession().me;
  if (me.role !== "admin") {
    replace(view.root, errorState(new ApiError(403, "Forbidden", "API keys are managed with an admin key")));
    return;
  }
  const list = el("div", { class: "table-wrap", "data-testid": "keys-list" }, el("p", { class: "loading", text: "Loading keys…" }));
  const created = el("div", { "data-testid": "key-created", "aria-live": "polite" });

  /** Reload the key list. */
  async function refresh() {
    const keys = await listAll("/v1/keys");
    if (!view.alive()) return;
    replace(list, el("table", { class: "table keys-table", "data-testid": "keys-table" },
      el("thead", {}, el("tr", {}, ["Name", "Role", "Prefix", "Key id", "Created", "Status"].map((h) => el("th", { text: h })))),
      el("tbody", {}, keys.map((key) => el("tr", { "data-testid": "key-row", "data-key-id": key.key_id, "data-revoked": String(Boolean(key.revoked_at)) },
        el("td", { text: key.name || "—" }),
        el("td", {}, el("span", { class: `role-badge role-${key.role}`, text: key.role })),
        el("td", { class: "mono small", text: key.prefix }),
        el("td", { class: "mono small", text: key.key_id }),
        el("td", { class: "small nowrap", text: fmtTime(key.created_at) }),
        el("td", { class: "actions" }, key.revoked_at
          ? el("span", { class: "status status-failed", title: fmtTime(key.revoked_at), text: "revoked" })
          : key.key_id === me.key_id ? el("span", { class: "muted small", text: "this key" })
            : confirmButton({
              label: "Revoke", confirmLabel: "Revoke key", small: true, testid: "key-revoke",
              question: `Revoke ${key.name || shortId(key.key_id)}? It is refused from its next request on; its queued fits are cancelled.`,
              action: async () => { await api(`/v1/keys/${encodeURIComponent(key.key_id)}`, { method: "DELETE" }); await refresh(); },
            })))))));
  }

  const role = el("select", { "data-testid": "key-role", "aria-label": "role" },
    ["analyst", "owner", "admin"].map((r) => el("option", { value: r, text: r })));
  const name = el("input", { "data-testid": "key-name", type: "text", maxlength: 200, placeholder: "e.g. alice (analytics)",
    autocomplete: "off", "aria-label": "name" });
  const submit = el("button", { type: "submit", class: "button button-primary", "data-testid": "key-create", text: "Create key" });
  const form = el("form", { class: "grant-form", "data-testid": "key-form" },
    el("label", {}, el("span", { text: "Role" }), role),
    el("label", { class: "grow" }, el("span", { text: "Name" }), name), submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    replace(created);
    try {
      const key = await api("/v1/keys", { method: "POST", body: { role: role.value, name: name.value.trim() } });
      if (!view.alive()) return;
      replace(created, el("div", { class: "secret-box", "data-testid": "key-secret-box" },
        el("p", {}, el("strong", { text: `New ${key.role} key ${key.name ? `“${key.name}” ` : ""}` }),
          el("span", { class: "muted", text: "— copy the secret now: it is shown only once." })),
        el("p", { class: "mono secret", "data-testid": "key-secret", text: key.key }),
        el("p", { class: "small muted" }, "Key id (for grants): ", el("span", { class: "mono", "data-testid": "key-created-id", text: key.key_id }))));
      name.value = "";
      await refresh();
    } catch (error) {
      if (view.alive()) replace(created, inlineProblem(error, "key-error"));
    } finally {
      submit.disabled = false;
    }
  });

  replace(view.root,
    el("div", { class: "page-head" }, el("div", {},
      el("h1", { text: "API keys" }),
      el("p", { class: "muted", text: "Owners upload datasets and grant them; analysts fit what they are granted; admins "
        + "read every budget and manage keys. Secrets are never stored in clear and never listed." }))),
    el("section", { class: "panel", "data-testid": "key-create-panel" },
      el("div", { class: "panel-head" }, el("h2", { text: "Create a key" })), form, created),
    el("section", { class: "panel", "data-testid": "keys-panel" },
      el("div", { class: "panel-head" }, el("h2", { text: "Keys" })), list));
  await refresh();
}
