// privfit dashboard: the dataset schema in the browser — a client-side check of its JSON shape.
//
// The API has no validate-only endpoint: the authoritative check is the upload itself (POST /v1/datasets answers
// 422 problem+json naming the field). This module mirrors the rules of service/privfit/datasets/schema.py
// (DatasetSchema and its parts; docs/datasets.md) closely enough to catch the usual mistakes before a file is
// sent: unknown or missing keys, wrong types, bounds, levels, duplicate names, budget ranges. Each problem names
// its field the way the API does ("schema.features.1.lower"). Pure functions, no DOM: the tests import them.

/** The keys each object of a schema may have (every object of the API's model forbids unknown keys). */
const ALLOWED = {
  schema: ["label", "features", "missing", "budget", "csv", "validation_fraction", "preprocessing"],
  preprocessing: ["share"],
  binary: ["name", "type", "positive", "negative"],
  categoricalLabel: ["name", "type", "levels"],
  numericLabel: ["name", "type", "lower", "upper"],
  numeric: ["name", "type", "lower", "upper", "fill", "transform"],
  categorical: ["name", "type", "levels"],
  ignore: ["name", "type"],
  transform: ["clip", "log", "standardize"],
  standardize: ["mean", "std", "clip_at"],
  budget: ["epsilon", "delta", "approximate_delta", "slack_delta"],
  csv: ["header", "columns", "na_values", "delimiter", "comment"],
};

/** At most this many classes for a categorical label (schema.py MAX_CLASSES). */
const MAX_CLASSES = 100;
/** The longest column name (schema.py Name). */
const MAX_NAME = 200;

/**
 * A schema to start from: a binary label, one numeric and one categorical feature, a budget.
 * @returns {object}
 */
export function starterSchema() {
  return {
    label: { name: "label", type: "binary", positive: "yes", negative: "no" },
    features: [
      { name: "age", type: "numeric", lower: 18, upper: 90 },
      { name: "segment", type: "categorical", levels: ["a", "b", "c"] },
    ],
    missing: "reject",
    budget: { epsilon: 2.0, delta: 1e-6 },
  };
}

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const isNumber = (value) => typeof value === "number" && Number.isFinite(value);

/**
 * Check a parsed schema. Returns the problems found, each naming its field; an empty list means the shape is
 * right (the upload may still be refused for what only the rows can show: a cell outside the levels, a missing
 * value under "reject", a header that does not match).
 * @param {unknown} schema The parsed JSON.
 * @returns {Array<{field: string, message: string}>}
 */
export function validateSchema(schema) {
  const problems = [];
  const report = (field, message) => problems.push({ field, message });
  if (!isObject(schema)) {
    report("schema", "the schema must be a JSON object with label, features and budget");
    return problems;
  }
  unknownKeys(schema, ALLOWED.schema, "schema", report);
  const missing = schema.missing === undefined ? "reject" : schema.missing;
  if (missing !== "reject" && missing !== "impute") report("schema.missing", 'must be "reject" or "impute"');
  const naValues = checkCsv(schema.csv, report);

  // label
  const label = schema.label;
  let labelName = null;
  if (!isObject(label)) {
    report("schema.label", "required: an object with name and type (binary, categorical or numeric)");
  } else {
    labelName = checkName(label.name, "schema.label.name", report);
    if (label.type === "binary") {
      unknownKeys(label, ALLOWED.binary, "schema.label", report);
      const positive = checkToken(label.positive, "schema.label.positive", report);
      const negative = checkToken(label.negative, "schema.label.negative", report);
      if (positive !== null && positive === negative) {
        report("schema.label", "positive and negative classes must differ");
      }
      for (const value of [positive, negative]) {
        if (value !== null && naValues.includes(value)) report("schema.label", `class "${value}" is also a csv.na_values entry`);
      }
    } else if (label.type === "categorical") {
      unknownKeys(label, ALLOWED.categoricalLabel, "schema.label", report);
      const levels = checkLevels(label.levels, "schema.label.levels", report);
      if (levels && levels.length < 3) {
        report("schema.label.levels", "a categorical label needs at least 3 levels; a label with 2 classes is binary");
      } else if (levels && levels.length > MAX_CLASSES) {
        report("schema.label.levels", `at most ${MAX_CLASSES} levels are supported, got ${levels.length}`);
      }
    } else if (label.type === "numeric") {
      unknownKeys(label, ALLOWED.numericLabel, "schema.label", report);
      checkBounds(label, "schema.label", report);
    } else {
      report("schema.label.type", 'must be "binary", "categorical" or "numeric"');
    }
  }

  // features
  const features = schema.features;
  if (!Array.isArray(features) || features.length === 0) {
    report("schema.features", "required: a non-empty list of columns");
  } else {
    const seen = new Set();
    let used = 0;
    features.forEach((feature, i) => {
      const at = `schema.features.${i}`;
      if (!isObject(feature)) {
        report(at, "each feature must be an object with name and type");
        return;
      }
      const name = checkName(feature.name, `${at}.name`, report);
      if (name !== null) {
        if (name === labelName) report(`${at}.name`, `"${name}" is also the label's name`);
        else if (seen.has(name)) report(`${at}.name`, `duplicate feature name "${name}"`);
        seen.add(name);
      }
      if (feature.type === "numeric") {
        used += 1;
        unknownKeys(feature, ALLOWED.numeric, at, report);
        const bounds = checkBounds(feature, at, report);
        if (feature.fill !== undefined && feature.fill !== null) {
          if (missing !== "impute") report(`${at}.fill`, 'only allowed when missing = "impute"');
          else if (!isNumber(feature.fill)) report(`${at}.fill`, "must be a number");
          else if (bounds && (feature.fill < bounds[0] || feature.fill > bounds[1])) {
            report(`${at}.fill`, "must lie within [lower, upper]");
          }
        } else if (missing === "impute") {
          report(`${at}.fill`, 'required when missing = "impute"');
        }
        checkTransform(feature.transform, bounds, `${at}.transform`, report);
      } else if (feature.type === "categorical") {
        used += 1;
        unknownKeys(feature, ALLOWED.categorical, at, report);
        const levels = checkLevels(feature.levels, `${at}.levels`, report);
        const clash = (levels || []).filter((level) => naValues.includes(level));
        if (clash.length) report(`${at}.levels`, `levels ${JSON.stringify(clash)} are also csv.na_values (ambiguous)`);
      } else if (feature.type === "ignore") {
        unknownKeys(feature, ALLOWED.ignore, at, report);
      } else {
        report(`${at}.type`, 'must be "numeric", "categorical" or "ignore"');
      }
    });
    if (used === 0) report("schema.features", "at least one feature must be numeric or categorical");
  }

  // budget
  const budget = schema.budget;
  if (!isObject(budget)) {
    report("schema.budget", "required: an object with epsilon > 0 and 0 < delta < 1");
  } else {
    unknownKeys(budget, ALLOWED.budget, "schema.budget", report);
    if (!isNumber(budget.epsilon) || budget.epsilon <= 0) report("schema.budget.epsilon", "must be a number > 0");
    if (!isNumber(budget.delta) || budget.delta <= 0 || budget.delta >= 1) {
      report("schema.budget.delta", "must be a number with 0 < delta < 1");
    }
    const approx = budget.approximate_delta;
    if (approx !== undefined && approx !== null) {
      if (!isNumber(approx) || approx < 0) report("schema.budget.approximate_delta", "must be a number ≥ 0");
      else if (isNumber(budget.delta) && approx >= budget.delta) {
        report("schema.budget.approximate_delta", `must be below delta = ${budget.delta}`);
      }
    }
    const slack = budget.slack_delta;  // its part for approximate-RDP slacks: 0 ≤ slack ≤ approximate_delta
    if (slack !== undefined && slack !== null) {
      const pot = isNumber(approx) ? approx : isNumber(budget.delta) ? 0.1 * budget.delta : undefined;
      if (!isNumber(slack) || slack < 0) report("schema.budget.slack_delta", "must be a number ≥ 0");
      else if (pot !== undefined && slack > pot) {
        report("schema.budget.slack_delta", `must be at most approximate_delta = ${pot}`);
      }
    }
  }

  const fraction = schema.validation_fraction;
  if (fraction !== undefined && fraction !== null && (!isNumber(fraction) || fraction <= 0 || fraction > 0.5)) {
    report("schema.validation_fraction", "must be a number with 0 < f ≤ 0.5");
  }
  const preprocessing = schema.preprocessing;  // absent or null: the default share; "none": opted out
  if (preprocessing !== undefined && preprocessing !== null && preprocessing !== "none") {
    if (!isObject(preprocessing)) {
      report("schema.preprocessing", 'must be "none" or an object {"share": s} with 0 < s ≤ 0.5');
    } else {
      unknownKeys(preprocessing, ALLOWED.preprocessing, "schema.preprocessing", report);
      const share = preprocessing.share;
      if (share !== undefined && (!isNumber(share) || share <= 0 || share > 0.5)) {
        report("schema.preprocessing.share", "must be a number with 0 < share ≤ 0.5");
      }
    }
  }
  return problems;
}

/**
 * Parse the JSON text of a schema and check it.
 * @param {string} text
 * @returns {{schema: object|null, problems: Array<{field: string, message: string}>}}
 */
export function checkSchemaText(text) {
  let schema;
  try {
    schema = JSON.parse(text);
  } catch (error) {
    return { schema: null, problems: [{ field: "schema", message: `not valid JSON: ${error.message}` }] };
  }
  return { schema, problems: validateSchema(schema) };
}

/**
 * @param {object} object
 * @param {string[]} allowed
 * @param {string} at
 * @param {(field: string, message: string) => void} report
 */
function unknownKeys(object, allowed, at, report) {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) report(`${at}.${key}`, `unknown key (allowed: ${allowed.join(", ")})`);
  }
}

/**
 * A column name: a non-empty string of at most 200 characters without surrounding whitespace.
 * @returns {string|null} The name when it is a string, else null.
 */
function checkName(name, at, report) {
  if (typeof name !== "string" || name.length === 0) {
    report(at, "required: a non-empty string");
    return null;
  }
  if (name.length > MAX_NAME) report(at, `at most ${MAX_NAME} characters`);
  if (name !== name.trim()) report(at, "has leading or trailing whitespace (headers are stripped)");
  return name;
}

/**
 * A class or level: a non-empty string without surrounding whitespace.
 * @returns {string|null}
 */
function checkToken(token, at, report) {
  if (typeof token !== "string" || token === "") {
    report(at, "required: a non-empty string");
    return null;
  }
  if (token !== token.trim()) report(at, "has leading or trailing whitespace (cells are stripped, so it could never match)");
  return token;
}

/**
 * A list of distinct levels.
 * @returns {string[]|null}
 */
function checkLevels(levels, at, report) {
  if (!Array.isArray(levels) || levels.length === 0) {
    report(at, "required: a non-empty list of strings");
    return null;
  }
  levels.forEach((level, i) => checkToken(level, `${at}.${i}`, report));
  const strings = levels.filter((level) => typeof level === "string");
  const duplicates = [...new Set(strings.filter((level, i) => strings.indexOf(level) !== i))];
  if (duplicates.length) report(at, `duplicate levels ${JSON.stringify(duplicates)}`);
  return strings;
}

/**
 * Numeric bounds lower < upper.
 * @returns {[number, number]|null}
 */
function checkBounds(object, at, report) {
  const { lower, upper } = object;
  if (!isNumber(lower)) report(`${at}.lower`, "required: a finite number");
  if (!isNumber(upper)) report(`${at}.upper`, "required: a finite number");
  if (!isNumber(lower) || !isNumber(upper)) return null;
  if (!(lower < upper)) {
    report(`${at}.lower`, `lower (${lower}) must be strictly less than upper (${upper})`);
    return null;
  }
  return [lower, upper];
}

/**
 * A numeric feature's optional transform (clip within [lower, upper], log on a non-negative range, standardize).
 * @param {unknown} transform
 * @param {[number, number]|null} bounds The feature's bounds when they are valid.
 */
function checkTransform(transform, bounds, at, report) {
  if (transform === undefined || transform === null) return;
  if (!isObject(transform)) {
    report(at, "must be an object with clip, log and/or standardize");
    return;
  }
  unknownKeys(transform, ALLOWED.transform, at, report);
  if (transform.clip !== undefined && transform.clip !== null) {
    const clip = transform.clip;
    if (!Array.isArray(clip) || clip.length !== 2 || !clip.every(isNumber) || !(clip[0] < clip[1])) {
      report(`${at}.clip`, "must be two numbers [a, b] with a < b");
    } else if (bounds && (clip[0] < bounds[0] || clip[1] > bounds[1])) {
      report(`${at}.clip`, "must lie within [lower, upper]");
    }
  }
  if (transform.log !== undefined && typeof transform.log !== "boolean") report(`${at}.log`, "must be true or false");
  const start = Array.isArray(transform.clip) && isNumber(transform.clip[0]) ? transform.clip[0] : bounds && bounds[0];
  if (transform.log === true && typeof start === "number" && start < 0) {
    report(`${at}.log`, `log needs a non-negative range (lower or clip ≥ 0), got ${start}`);
  }
  const standardize = transform.standardize;
  if (standardize !== undefined && standardize !== null) {
    if (!isObject(standardize)) {
      report(`${at}.standardize`, "must be an object with mean and std");
      return;
    }
    unknownKeys(standardize, ALLOWED.standardize, `${at}.standardize`, report);
    if (!isNumber(standardize.mean)) report(`${at}.standardize.mean`, "required: a finite number");
    if (!isNumber(standardize.std) || standardize.std <= 0) report(`${at}.standardize.std`, "must be a number > 0");
  }
}

/**
 * The optional CSV layout; returns its na_values (the defaults when absent).
 * @returns {string[]}
 */
function checkCsv(csv, report) {
  const defaults = ["", "NA", "?"];
  if (csv === undefined) return defaults;
  if (!isObject(csv)) {
    report("schema.csv", "must be an object (header, columns, na_values, delimiter, comment)");
    return defaults;
  }
  unknownKeys(csv, ALLOWED.csv, "schema.csv", report);
  const header = csv.header === undefined ? true : csv.header;
  if (typeof header !== "boolean") report("schema.csv.header", "must be true or false");
  if (header === true && csv.columns !== undefined && csv.columns !== null) {
    report("schema.csv.columns", "only allowed with csv.header = false (the header names the columns)");
  }
  if (header === false && !Array.isArray(csv.columns)) {
    report("schema.csv.columns", "required when csv.header = false (it gives the file's column order)");
  }
  if (csv.delimiter !== undefined && (typeof csv.delimiter !== "string" || csv.delimiter.length !== 1
      || ['"', "\n", "\r"].includes(csv.delimiter))) {
    report("schema.csv.delimiter", "must be one character, not a quote or a newline");
  }
  if (csv.na_values === undefined) return defaults;
  if (!Array.isArray(csv.na_values) || !csv.na_values.every((v) => typeof v === "string")) {
    report("schema.csv.na_values", "must be a list of strings");
    return defaults;
  }
  csv.na_values.forEach((value, i) => {
    if (value !== value.trim()) report(`schema.csv.na_values.${i}`, "has leading or trailing whitespace");
  });
  return csv.na_values;
}

/**
 * The fields a problem+json document points at: its `field` or `parameter` member, the CSV `column` (and `line`)
 * of an upload's data error, and each `errors[].loc` joined with dots (the API's spelling, e.g.
 * "features.1.numeric.lower").
 * @param {object} problem
 * @returns {string[]}
 */
export function problemFields(problem) {
  const fields = [];
  if (!problem || typeof problem !== "object") return fields;
  for (const key of ["field", "parameter"]) {
    if (typeof problem[key] === "string" && problem[key]) fields.push(problem[key]);
  }
  if (typeof problem.column === "string" && problem.column) {
    fields.push(typeof problem.line === "number" ? `column ${problem.column}, line ${problem.line}` : `column ${problem.column}`);
  }
  if (Array.isArray(problem.errors)) {
    for (const error of problem.errors) {
      if (error && Array.isArray(error.loc) && error.loc.length) fields.push(error.loc.join("."));
    }
  }
  return [...new Set(fields)];
}
