// raftq's web console: a client of the REST API (/v1/...) on this origin. The API key the
// operator signs in with stays in sessionStorage (never in a URL) and goes out as the bearer
// token; every rule is the API's, and its refusals are shown where they belong. Pages are
// rendered only once every request they need has answered, so a refusal never leaves a page
// half-updated. Pages: #/queues, #/queue/<name>, #/cluster (and the sign-in page).
"use strict";

const KEY_STORAGE = "raftq.console.key";
const POLL_MS = 1000;
const PEEK_PAGE = 10;
const CHART_SECONDS = 300;

// ---------- small helpers ----------

// Builds an element: h("a", {href: "#"}, "text", child...). Attributes starting with "on" are
// listeners; children may be nested in arrays; `null`, `undefined` and `false` children and
// attributes are skipped.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function byId(id) {
  return document.getElementById(id);
}

function queueHref(name) {
  return "#/queue/" + encodeURIComponent(name);
}

function queueLink(ref) {
  if (!ref) return "none";
  return h("a", {href: queueHref(ref.name)}, ref.name);
}

function plural(n, one, many) {
  return n + " " + (n === 1 ? one : many);
}

function age(seconds) {
  if (!seconds) return "–";
  if (seconds < 120) return seconds + " s";
  if (seconds < 7200) return Math.floor(seconds / 60) + " min";
  if (seconds < 172800) return Math.floor(seconds / 3600) + " h";
  return Math.floor(seconds / 86400) + " d";
}

function rate(perSecond) {
  if (perSecond === null || perSecond === undefined) return "–";
  return perSecond < 10 ? perSecond.toFixed(1) : Math.round(perSecond).toString();
}

// Goes to `hash`, rendering again when it is the page shown already.
function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

// Brings the rows of `tbody` to `items`: when the same keys come in the same order, only cells
// whose text changed are updated, so focus and a pending click stay where they are; otherwise
// the rows are rebuilt and focus returns to the element of the same id.
function syncRows(tbody, items, keyOf, build) {
  const old = [...tbody.rows];
  const same = old.length === items.length && old.every((r, i) => r.dataset.key === String(keyOf(items[i])));
  if (!same) {
    const focused = tbody.contains(document.activeElement) ? document.activeElement.id : "";
    tbody.replaceChildren(...items.map((item) => {
      const row = build(item);
      row.dataset.key = keyOf(item);
      return row;
    }));
    if (focused && byId(focused)) byId(focused).focus();
    return;
  }
  items.forEach((item, i) => {
    const fresh = build(item);
    [...fresh.cells].forEach((cell, j) => {
      const current = old[i].cells[j];
      if (current.textContent !== cell.textContent) current.replaceChildren(...cell.childNodes);
    });
  });
}

// A short message at the foot of the window, gone after a while or at the next one.
let noticeTimer = null;

function notice(text) {
  const el = byId("notice");
  el.textContent = text;
  el.classList.toggle("shown", Boolean(text));
  clearTimeout(noticeTimer);
  if (text) noticeTimer = setTimeout(() => notice(""), 8000);
}

// An account's name from a queue's CRN (crn:v1:raftq:public:queues:<region>:a/<account>:<id>::).
function accountOf(crn) {
  const part = (crn || "").split(":")[6] || "";
  return part.startsWith("a/") ? part.slice(2) : null;
}

// ---------- the API ----------

class ApiError extends Error {
  constructor(status, error) {
    super(error.message || "HTTP " + status);
    this.status = status;
    this.code = error.code || "http_" + status;
    this.field = error.field || null;
    this.sources = error.sources || null;
  }
}

const session = {
  key: sessionStorage.getItem(KEY_STORAGE),
  admin: false,
  open: false,
};

async function api(method, path, body) {
  const headers = {Accept: "application/json"};
  if (session.key) headers.Authorization = "Bearer " + session.key;
  const init = {method, headers, cache: "no-store"};
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, {code: "unreachable", message: "the node did not answer (" + e.message + ")"});
  }
  const text = await response.text();
  let data = null;
  if (text && (response.headers.get("Content-Type") || "").includes("json")) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      data = null;
    }
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {message: text || response.statusText};
    if (response.status === 401 && session.signedIn && session.key !== null) {
      signOut(error.message);
    }
    throw new ApiError(response.status, error);
  }
  return data !== null ? data : text;
}

function q(name) {
  return "/v1/queues/" + encodeURIComponent(name);
}

// Prometheus text as [{name, labels, value}].
function parseMetrics(text) {
  const samples = [];
  const line = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const row of text.split("\n")) {
    if (!row || row.startsWith("#")) continue;
    const m = line.exec(row);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(label)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({name: m[1], labels, value: Number(m[3])});
  }
  return samples;
}

function metricValue(samples, name) {
  const s = samples.find((x) => x.name === name);
  return s ? s.value : null;
}

// ---------- forms ----------

let fieldSerial = 0;

// A labelled input; `name` is the API's field name, so an error naming it lands beside it.
function field(spec) {
  const id = "f" + ++fieldSerial;
  const errorId = id + "-error";
  const hintId = spec.hint ? id + "-hint" : null;
  let input;
  const common = {
    id,
    name: spec.name,
    "data-field": spec.name,
    "aria-describedby": [hintId, errorId].filter(Boolean).join(" "),
    required: spec.required,
  };
  if (spec.type === "checkbox") {
    input = h("input", {...common, type: "checkbox", checked: Boolean(spec.value)});
  } else if (spec.type === "textarea") {
    input = h("textarea", {...common, rows: spec.rows || 3}, spec.value || "");
  } else if (spec.type === "select") {
    input = h("select", common, spec.options.map(([value, text]) =>
      h("option", {value, selected: value === spec.value}, text)));
  } else {
    input = h("input", {
      ...common,
      type: spec.type || "text",
      value: spec.value === undefined || spec.value === null ? "" : spec.value,
      inputmode: spec.numeric ? "numeric" : null,
      autocomplete: spec.autocomplete || "off",
      spellcheck: "false",
      list: spec.list,
    });
  }
  const cls = "field" + (spec.type === "checkbox" ? " check" : "");
  return h("div", {class: cls},
    h("label", {for: id}, spec.label),
    input,
    spec.hint ? h("p", {class: "hint", id: hintId}, spec.hint) : null,
    h("p", {class: "field-error", id: errorId, role: "alert"}));
}

function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error, .form-error")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

// Shows an API error beside the field it names (or the closest field above it, such as
// `attributes` for `attributes.color`), else at the form's foot.
function showError(form, error) {
  clearErrors(form);
  let target = null;
  if (error.field) {
    const inputs = [...form.querySelectorAll("[data-field]")];
    target = inputs.find((i) => i.dataset.field === error.field) ||
      inputs.find((i) => error.field.startsWith(i.dataset.field + ".") ||
        error.field.startsWith(i.dataset.field + "["));
  }
  if (target) {
    target.setAttribute("aria-invalid", "true");
    const place = byId(target.id + "-error");
    place.textContent = error.message;
    target.focus();
    return;
  }
  const foot = form.querySelector(".form-error");
  foot.textContent = (error.field ? error.field + ": " : "") + error.message;
}

// Reads a text input as a JSON integer when it is one, else as the text itself, so the API
// (not the browser) judges it; an empty input is left out.
function numberOrText(value) {
  const text = value.trim();
  if (text === "") return undefined;
  return /^-?\d+$/.test(text) ? Number(text) : text;
}

// The numeric settings `numeric` and the redrive policy a queue form holds, as the API takes
// them; empty fields are left out, and so is a redrive policy with both fields empty.
function settingsFrom(form, numeric) {
  const body = {};
  for (const n of numeric) {
    const v = numberOrText(formValue(form, n));
    if (v !== undefined) body[n] = v;
  }
  const target = formValue(form, "redrive_policy.dead_letter_target").trim();
  const count = numberOrText(formValue(form, "redrive_policy.max_receive_count"));
  if (target || count !== undefined) {
    body.redrive_policy = {};
    if (target) body.redrive_policy.dead_letter_target = target;
    if (count !== undefined) body.redrive_policy.max_receive_count = count;
  }
  return body;
}

function formValue(form, name) {
  const el = form.querySelector('[data-field="' + name + '"]');
  if (!el) return undefined;
  return el.type === "checkbox" ? el.checked : el.value;
}

// Submits a form through `send`; while it runs the submit button is disabled, an API error is
// shown beside its field and the form keeps what was typed.
function onSubmit(form, send) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    clearErrors(form);
    try {
      await send();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      showError(form, e);
    } finally {
      button.disabled = false;
    }
  });
}

function formShell(attrs, ...children) {
  return h("form", {novalidate: true, ...attrs}, ...children, h("p", {class: "form-error", role: "alert"}));
}

// A modal confirmation; resolves true when confirmed.
function confirmAction(title, text, action) {
  return new Promise((resolve) => {
    const dialog = h("dialog", {"aria-labelledby": "confirm-title", class: "confirm"},
      h("h2", {id: "confirm-title"}, title),
      h("p", {}, text),
      h("div", {class: "actions"},
        h("button", {type: "button", class: "danger", id: "confirm-yes"}, action),
        h("button", {type: "button", id: "confirm-no"}, "Cancel")));
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    dialog.querySelector("#confirm-yes").addEventListener("click", () => finish(true));
    dialog.querySelector("#confirm-no").addEventListener("click", () => finish(false));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector("#confirm-no").focus();
  });
}

// ---------- pages and polling ----------

// Each page render gets a generation; timers of an older page stop by themselves.
let generation = 0;

function poll(gen, step) {
  const run = async () => {
    if (gen !== generation) return;
    try {
      await step();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (gen === generation) notice("Refresh failed: " + e.message);
    }
    if (gen === generation) setTimeout(run, POLL_MS);
  };
  setTimeout(run, POLL_MS);
}

function routeName() {
  const hash = location.hash || "#/queues";
  if (hash.startsWith("#/queue/")) return "queue";
  if (hash === "#/cluster") return "cluster";
  if (hash === "#/sign-in") return "sign-in";
  return "queues";
}

// The queue a #/queue/<name> address names; a name that is not valid percent-encoding is
// taken as it stands (the API then says whether such a queue exists).
function queueInHash() {
  const raw = location.hash.slice("#/queue/".length);
  try {
    return decodeURIComponent(raw);
  } catch (e) {
    return raw;
  }
}

function show(title, ...content) {
  const main = byId("main");
  main.replaceChildren(...content.filter(Boolean));
  document.title = title + " · raftq console";
  for (const [id, route] of [["nav-queues", "queues"], ["nav-cluster", "cluster"]]) {
    const link = byId(id);
    if (route === routeName() || (route === "queues" && routeName() === "queue")) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
}

function tableWrap(label, table) {
  return h("div", {class: "table-wrap", role: "region", "aria-label": label, tabindex: 0}, table);
}

async function render() {
  const gen = ++generation;
  notice("");
  if (!session.signedIn) {
    renderSignIn();
    return;
  }
  byId("sections").hidden = false;
  byId("sign-out").hidden = session.open;
  byId("who").textContent = session.open
    ? "account dev (open mode: no key file)"
    : "signed in" + (session.admin ? " (admin key)" : "");
  const name = routeName();
  try {
    if (name === "queue") {
      await renderQueue(gen, queueInHash());
    } else if (name === "cluster") {
      await renderCluster(gen);
    } else {
      await renderQueues(gen);
    }
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (gen !== generation) return;
    show("Error", h("h1", {}, "Cannot show this page"), h("p", {class: "error", role: "alert"}, e.message),
      h("p", {}, h("a", {href: "#/queues"}, "Back to the queues")));
  }
}

// ---------- sign-in ----------

// Whether the API answers with the key held (or with none: open mode).
async function probe() {
  const cluster = await api("GET", "/v1/cluster");
  session.admin = cluster.cluster_id !== undefined || cluster.clock_offset_ms !== undefined;
  return cluster;
}

function signOut(reason) {
  sessionStorage.removeItem(KEY_STORAGE);
  session.key = null;
  session.signedIn = false;
  session.reason = reason || "";
  go("#/sign-in");
}

function renderSignIn() {
  byId("sections").hidden = true;
  byId("sign-out").hidden = true;
  byId("who").textContent = "";
  const form = formShell({id: "sign-in", class: "card narrow"},
    h("h1", {}, "Sign in"),
    h("p", {}, "This node serves API keys. Sign in with yours: it is kept in this browser tab only."),
    field({name: "key", label: "API key", type: "password", autocomplete: "current-password"}),
    h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, "Sign in")));
  onSubmit(form, async () => {
    const key = formValue(form, "key").trim();
    if (!key) throw new ApiError(400, {field: "key", message: "is required"});
    const before = session.key;
    session.key = key;
    try {
      await probe();
    } catch (e) {
      session.key = before;
      if (e instanceof ApiError) e.field = "key";
      throw e;
    }
    sessionStorage.setItem(KEY_STORAGE, key);
    session.signedIn = true;
    session.reason = "";
    go("#/queues");
  });
  show("Sign in", form);
  if (session.reason) showError(form, {field: "key", message: session.reason});
  form.querySelector("input").focus();
}

// ---------- queues ----------

// Per queue, the last counters seen, for the send and ack rates.
const lastCounters = new Map();

function queueFigures(samples, account) {
  const figures = new Map();
  const wanted = {
    raftq_queue_visible_messages: "visible",
    raftq_queue_leased_messages: "leased",
    raftq_queue_delayed_messages: "delayed",
    raftq_queue_pending_redrive_messages: "pending_redrive",
    raftq_queue_oldest_message_age_seconds: "oldest",
    raftq_queue_sent_messages_total: "sent",
    raftq_queue_acked_messages_total: "acked",
  };
  for (const s of samples) {
    const key = wanted[s.name];
    if (!key || s.labels.account !== account) continue;
    if (!figures.has(s.labels.queue)) figures.set(s.labels.queue, {});
    figures.get(s.labels.queue)[key] = s.value;
  }
  const now = performance.now();
  for (const [name, f] of figures) {
    const last = lastCounters.get(account + "/" + name);
    if (last && now > last.at) {
      const seconds = (now - last.at) / 1000;
      f.sendRate = Math.max(0, (f.sent - last.sent) / seconds);
      f.ackRate = Math.max(0, (f.acked - last.acked) / seconds);
    }
    lastCounters.set(account + "/" + name, {at: now, sent: f.sent, acked: f.acked});
  }
  return figures;
}

function queueRow(figures, onChanged) {
  return (queue) => {
    const f = figures.get(queue.name) || {};
    const cell = (v) => h("td", {class: "num"}, v === undefined ? "–" : v);
    return h("tr", {"data-queue": queue.name},
      h("th", {scope: "row"}, h("a", {href: queueHref(queue.name)}, queue.name)),
      h("td", {}, queue.type),
      cell(f.visible), cell(f.leased), cell(f.delayed), cell(f.pending_redrive),
      h("td", {class: "num"}, age(f.oldest)),
      h("td", {class: "num"}, rate(f.sendRate)),
      h("td", {class: "num"}, rate(f.ackRate)),
      h("td", {class: "row-actions"},
        h("button", {type: "button", class: "small", id: "purge-" + queue.name, "aria-label": "Purge " + queue.name,
          onclick: () => purge(queue.name, onChanged)}, "Purge"),
        h("button", {type: "button", class: "small danger", id: "delete-" + queue.name, "aria-label": "Delete " + queue.name,
          onclick: () => removeQueue(queue.name, onChanged)}, "Delete")));
  };
}

async function purge(name, onChanged) {
  if (!(await confirmAction("Purge " + name + "?", "Every message of " + name + " is deleted. The queue and its settings stay.", "Purge"))) return;
  await change(() => api("POST", q(name) + "/purge"), "Purged " + name + ".", onChanged);
}

// Deletes a queue after confirmation; a refusal is shown (with the sources that still bind a
// dead-letter queue) and nothing else changes.
async function removeQueue(name, onChanged, refused) {
  if (!(await confirmAction("Delete " + name + "?", "The queue and all its messages are deleted. This cannot be undone.", "Delete queue"))) return;
  try {
    await api("DELETE", q(name));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    notice("Delete refused: " + e.message);
    if (refused) refused(e);
    return;
  }
  await onChanged(true);
  notice("Deleted " + name + ".");
}

function createQueueForm(onCreated) {
  const form = formShell({id: "create-queue", class: "grid-form"},
    field({name: "name", label: "Name", hint: "Ends in .fifo for a FIFO queue", required: true}),
    field({name: "lease_seconds", label: "Lease (s)", numeric: true}),
    field({name: "delay_seconds", label: "Delay (s)", numeric: true}),
    field({name: "retention_seconds", label: "Retention (s)", numeric: true}),
    field({name: "max_message_bytes", label: "Max message bytes", numeric: true}),
    field({name: "redrive_policy.dead_letter_target", label: "Dead-letter queue", list: "queue-names", hint: "Optional; an existing queue"}),
    field({name: "redrive_policy.max_receive_count", label: "Max receives before dead-lettering", numeric: true}),
    field({name: "content_based_deduplication", label: "Content-based deduplication (FIFO)", type: "checkbox"}),
    h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, "Create queue")));
  onSubmit(form, async () => {
    const body = {
      name: formValue(form, "name").trim(),
      ...settingsFrom(form, ["lease_seconds", "delay_seconds", "retention_seconds", "max_message_bytes"]),
    };
    if (formValue(form, "content_based_deduplication")) body.content_based_deduplication = true;
    const created = await api("POST", "/v1/queues", body);
    form.reset();
    await onCreated();
    notice("Created " + created.name + ".");
  });
  return form;
}

async function renderQueues(gen) {
  const filter = sessionStorage.getItem("raftq.console.prefix") || "";
  let account = null;
  const load = async (prefix) => {
    const query = prefix ? "?prefix=" + encodeURIComponent(prefix) : "";
    const [list, metrics] = await Promise.all([api("GET", "/v1/queues" + query), api("GET", "/metrics")]);
    if (list.queues.length) account = accountOf(list.queues[0].crn);
    return {queues: list.queues, figures: queueFigures(parseMetrics(metrics), account)};
  };
  let data = await load(filter);
  if (gen !== generation) return;

  const body = h("tbody", {id: "queue-rows"});
  const empty = h("p", {class: "empty", id: "no-queues"});
  const names = h("datalist", {id: "queue-names"});
  // Loads overlap (typing in the filter while a poll runs): only the latest one is shown.
  let asked = 0;
  const refresh = async () => {
    const ask = ++asked;
    const fresh = await load(prefixInput.value);
    if (gen !== generation || ask !== asked) return;
    data = fresh;
    fill();
  };
  const refreshShowingFailure = async () => {
    try {
      await refresh();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      notice("Refresh failed: " + e.message);
    }
  };
  const fill = () => {
    syncRows(body, data.queues, (queue) => queue.name, queueRow(data.figures, refreshShowingFailure));
    names.replaceChildren(...data.queues.map((x) => h("option", {value: x.name})));
    empty.textContent = data.queues.length ? "" : (prefixInput.value ? "No queue starts with “" + prefixInput.value + "”." : "No queues yet.");
  };
  const prefixInput = h("input", {id: "prefix", type: "search", value: filter, autocomplete: "off", spellcheck: "false"});
  prefixInput.addEventListener("input", () => {
    sessionStorage.setItem("raftq.console.prefix", prefixInput.value);
    refreshShowingFailure();
  });
  const table = h("table", {id: "queues"},
    h("caption", {}, "Queues of this account; counts and rates from this node, refreshed every second"),
    h("thead", {}, h("tr", {},
      ["Queue", "Type", "Visible", "Leased", "Delayed", "Pending redrive", "Oldest", "Sends/s", "Acks/s", "Actions"]
        .map((t) => h("th", {scope: "col"}, t)))),
    body);
  fill();
  show("Queues",
    h("div", {class: "page-head"}, h("h1", {}, "Queues"),
      h("div", {class: "filter"}, h("label", {for: "prefix"}, "Filter by prefix"), prefixInput)),
    tableWrap("Queues", table),
    empty,
    h("details", {class: "card", id: "new-queue", open: data.queues.length === 0},
      h("summary", {}, "New queue"),
      names,
      createQueueForm(refreshShowingFailure)));
  poll(gen, refresh);
}

// ---------- one queue ----------

function settingsList(queue) {
  const rows = [
    ["Type", queue.type],
    ["ID", queue.id],
    ["CRN", queue.crn],
    ["Created", queue.created_at],
    ["Settings changed", queue.modified_at],
    ["Lease", queue.lease_seconds + " s"],
    ["Delay", queue.delay_seconds + " s"],
    ["Retention", queue.retention_seconds + " s"],
    ["Max message", queue.max_message_bytes + " bytes"],
    ["Receive wait", queue.receive_wait_seconds + " s"],
    ["Content-based deduplication", queue.content_based_deduplication ? "on" : "off"],
    ["Dead-letter queue", queue.redrive_policy
      ? h("span", {}, queueLink(queue.redrive_policy.dead_letter_target),
        " after " + plural(queue.redrive_policy.max_receive_count, "receive", "receives"))
      : "none"],
    ["Sources allowed", queue.redrive_allow_policy ? queue.redrive_allow_policy.permission : "–"],
    ["Retry backoff", queue.retry_backoff
      ? queue.retry_backoff.initial_seconds + " s × " + queue.retry_backoff.multiplier + " up to " + queue.retry_backoff.max_seconds + " s"
      : "none"],
    ["Tags", Object.keys(queue.tags || {}).length
      ? Object.entries(queue.tags).map(([k, v]) => k + "=" + v).join(", ") : "none"],
  ];
  if (queue.type !== "fifo") {
    rows.push(["Default priority", String(queue.default_priority)],
      ["Priority order", queue.priority_weights
        ? "weights " + queue.priority_weights.join(", ") + " (from priority 0)" : "strict, highest first"]);
  }
  return h("dl", {class: "settings", id: "settings"}, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function editForm(queue, onSaved) {
  const fifo = queue.type === "fifo";
  const policy = queue.redrive_policy;
  const form = formShell({id: "edit-queue", class: "grid-form"},
    field({name: "lease_seconds", label: "Lease (s)", value: queue.lease_seconds, numeric: true}),
    field({name: "delay_seconds", label: "Delay (s)", value: queue.delay_seconds, numeric: true}),
    field({name: "retention_seconds", label: "Retention (s)", value: queue.retention_seconds, numeric: true}),
    field({name: "max_message_bytes", label: "Max message bytes", value: queue.max_message_bytes, numeric: true}),
    field({name: "receive_wait_seconds", label: "Receive wait (s)", value: queue.receive_wait_seconds, numeric: true}),
    field({name: "redrive_policy.dead_letter_target", label: "Dead-letter queue", value: policy ? policy.dead_letter_target.name : "", hint: "Empty: no dead-letter queue"}),
    field({name: "redrive_policy.max_receive_count", label: "Max receives before dead-lettering", value: policy ? policy.max_receive_count : "", numeric: true}),
    fifo ? field({name: "content_based_deduplication", label: "Content-based deduplication", type: "checkbox", value: queue.content_based_deduplication}) : null,
    h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, "Save settings")));
  onSubmit(form, async () => {
    const body = settingsFrom(form,
      ["lease_seconds", "delay_seconds", "retention_seconds", "max_message_bytes", "receive_wait_seconds"]);
    if (fifo) body.content_based_deduplication = formValue(form, "content_based_deduplication");
    // An emptied dead-letter queue field detaches the queue.
    if (!body.redrive_policy && policy) body.redrive_policy = null;
    await api("PATCH", q(queue.name), body);
    await onSaved();
    notice("Saved the settings of " + queue.name + ".");
  });
  return form;
}

function sendForm(queue, onSent) {
  const fifo = queue.type === "fifo";
  const form = formShell({id: "send-message", class: "grid-form"},
    field({name: "body", label: "Body", type: "textarea", required: true}),
    field({name: "attributes", label: "Attributes", type: "textarea", rows: 2, hint: "One name=value a line"}),
    field({name: "delay_seconds", label: "Delay (s)", numeric: true}),
    field({name: "deliver_at", label: "Deliver at", hint: "RFC 3339, e.g. 2030-01-01T09:00:00Z; instead of a delay"}),
    fifo ? null : field({name: "priority", label: "Priority", numeric: true, hint: "0-9, higher first"}),
    fifo ? field({name: "message_group_id", label: "Message group ID"}) : null,
    fifo ? field({name: "message_deduplication_id", label: "Deduplication ID"}) : null,
    h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, "Send message")));
  onSubmit(form, async () => {
    const body = {body: formValue(form, "body")};
    const attributes = {};
    for (const line of formValue(form, "attributes").split("\n")) {
      if (!line.trim()) continue;
      const at = line.indexOf("=");
      if (at < 0) throw new ApiError(400, {field: "attributes", message: "each line must be name=value"});
      attributes[line.slice(0, at).trim()] = line.slice(at + 1);
    }
    if (Object.keys(attributes).length) body.attributes = attributes;
    const delay = numberOrText(formValue(form, "delay_seconds"));
    if (delay !== undefined) body.delay_seconds = delay;
    const priority = fifo ? undefined : numberOrText(formValue(form, "priority"));
    if (priority !== undefined) body.priority = priority;
    for (const n of ["message_group_id", "message_deduplication_id", "deliver_at"]) {
      const v = formValue(form, n);
      if (v) body[n] = v;
    }
    const sent = await api("POST", q(queue.name) + "/messages", body);
    form.reset();
    await onSent();
    notice((sent.duplicate ? "Duplicate of " : "Sent ") + sent.message_id + ".");
  });
  return form;
}

function messageRow(m) {
  const attributes = Object.entries(m.attributes || {}).map(([k, v]) => k + "=" + v).join(", ");
  const short = m.body.length > 80 ? m.body.slice(0, 80) + "…" : m.body;
  return h("tr", {"data-message": m.message_id},
    h("td", {class: "mono"}, m.message_id),
    h("td", {}, h("span", {class: "state state-" + m.state},
      (m.scheduled ? "scheduled" : m.state.replace("_", " ")) +
      (m.priority ? " · priority " + m.priority : ""))),
    h("td", {class: "body-cell"}, short),
    h("td", {}, attributes || "–"),
    h("td", {class: "num"}, m.receive_count),
    h("td", {}, m.message_group_id || "–"),
    h("td", {}, m.dead_letter_source ? queueLink(m.dead_letter_source) : "–"),
    h("td", {}, m.moved_at || "–"),
    h("td", {}, m.sent_at));
}

// The peek panel: pages of messages, no lease taken and no count changed.
function peekPanel(queue) {
  const rows = h("tbody", {id: "peek-rows"});
  const status = h("p", {class: "hint", id: "peek-status"});
  const pages = [null];
  let next = null;
  const prev = h("button", {type: "button", id: "peek-prev"}, "Previous page");
  const nextButton = h("button", {type: "button", id: "peek-next"}, "Next page");
  const refresh = h("button", {type: "button", id: "peek-refresh"}, "Refresh");
  const load = async (index) => {
    const after = pages[index];
    const query = "?limit=" + PEEK_PAGE + (after !== null ? "&after=" + after : "");
    const page = await api("GET", q(queue.name) + "/messages" + query);
    pages.length = index + 1;
    next = page.messages.length === PEEK_PAGE ? page.next_after : null;
    rows.replaceChildren(...page.messages.map(messageRow));
    status.textContent = page.messages.length
      ? "Page " + (index + 1) + ": " + plural(page.messages.length, "message", "messages") + " (peeked: no lease taken, no receive counted)"
      : (index === 0 ? "No messages." : "No more messages.");
    prev.disabled = index === 0;
    nextButton.disabled = next === null;
  };
  const guarded = (f) => async () => {
    try {
      await f();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      status.textContent = "Peek failed: " + e.message;
    }
  };
  prev.addEventListener("click", guarded(() => load(Math.max(0, pages.length - 2))));
  nextButton.addEventListener("click", guarded(async () => {
    pages.push(next);
    await load(pages.length - 1);
  }));
  refresh.addEventListener("click", guarded(() => load(pages.length - 1)));
  const table = h("table", {id: "peek"},
    h("caption", {}, "Messages in queue order"),
    h("thead", {}, h("tr", {}, ["Message ID", "State", "Body", "Attributes", "Receives", "Group", "Dead-letter source", "Moved at", "Sent at"]
      .map((t) => h("th", {scope: "col"}, t)))),
    rows);
  const panel = h("section", {class: "card", "aria-labelledby": "peek-title"},
    h("h2", {id: "peek-title"}, "Peek"),
    status,
    tableWrap("Peeked messages", table),
    h("div", {class: "actions"}, prev, nextButton, refresh));
  return {panel, first: () => load(0), reload: () => load(pages.length - 1)};
}

function detachButton(id, source, target, onChanged) {
  return h("button", {type: "button", class: "small", id: id + source,
    onclick: () => detach(source, target, onChanged)}, "Detach " + source);
}

function bindingPanel(queue, sources, onChanged) {
  const items = sources.map((s) => h("li", {"data-source": s.name},
    queueLink(s), " ", detachButton("detach-", s.name, queue.name, onChanged)));
  return h("section", {class: "card", id: "bindings", "aria-labelledby": "bindings-title"},
    h("h2", {id: "bindings-title"}, "Dead-letter bindings"),
    h("p", {id: "dead-letter-target"}, "Dead-letter queue of this queue: ",
      queue.redrive_policy ? queueLink(queue.redrive_policy.dead_letter_target) : "none"),
    h("p", {}, sources.length
      ? "Queues that send their failed messages here (deleting this queue is refused while they do):"
      : "No queue uses this queue as its dead-letter queue."),
    sources.length ? h("ul", {id: "dead-letter-sources"}, items) : null);
}

// Runs one change the operator confirmed: a refusal is shown and changes nothing on the page;
// after a success the page is brought up to date, then the success is shown.
async function change(request, done, onChanged) {
  try {
    await request();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    notice("Refused: " + e.message);
    return false;
  }
  await onChanged();
  notice(done);
  return true;
}

async function detach(source, target, onChanged) {
  if (!(await confirmAction("Detach " + source + "?", source + " stops sending failed messages to " + target + " (its redrive policy is removed).", "Detach"))) return;
  await change(() => api("PATCH", q(source), {redrive_policy: null}), "Detached " + source + " from " + target + ".", onChanged);
}

function taskRow(queue, onChanged) {
  return (task) => {
    const cancel = task.status === "running"
      ? h("button", {type: "button", class: "small", id: "cancel-" + task.task_handle,
        "aria-label": "Cancel move task " + task.task_handle.slice(0, 8), onclick: () => change(
        () => api("POST", q(queue.name) + "/move_tasks/" + encodeURIComponent(task.task_handle) + "/cancel"),
        "Cancelled the move task.", onChanged)}, "Cancel")
      : null;
    return h("tr", {"data-task": task.task_handle},
      h("td", {class: "mono"}, task.task_handle.slice(0, 8)),
      h("td", {}, h("span", {class: "task task-" + task.status}, task.status)),
      h("td", {}, task.destination ? queueLink(task.destination) : "each message's source"),
      h("td", {class: "num"}, task.moved + " / " + task.to_move),
      h("td", {class: "num"}, task.skipped),
      h("td", {class: "num"}, task.max_messages_per_second),
      h("td", {}, task.dry_run ? "yes" : "no"),
      h("td", {}, task.started_at),
      h("td", {}, task.ended_at || task.failure_reason || "–"),
      h("td", {}, cancel));
  };
}

// Dead-letter triage: start, watch and cancel move tasks back to the sources. Returns the panel
// and a function that brings its task table up to date.
function movePanel(queue, onChanged) {
  const form = formShell({id: "start-move", class: "grid-form"},
    field({name: "destination", label: "Destination", hint: "Empty: each message back to the queue it was dead-lettered from"}),
    field({name: "max_messages_per_second", label: "Messages per second", numeric: true, hint: "1–500; 500 when empty"}),
    field({name: "dry_run", label: "Dry run (count only)", type: "checkbox"}),
    h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, "Start moving")));
  onSubmit(form, async () => {
    const body = {};
    const destination = formValue(form, "destination").trim();
    if (destination) body.destination = destination;
    const pace = numberOrText(formValue(form, "max_messages_per_second"));
    if (pace !== undefined) body.max_messages_per_second = pace;
    if (formValue(form, "dry_run")) body.dry_run = true;
    await api("POST", q(queue.name) + "/move_tasks", body);
    form.reset();
    await onChanged();
    notice("Started a move task.");
  });
  const rows = h("tbody", {id: "task-rows"});
  const empty = h("p", {class: "hint", id: "no-tasks"});
  const table = h("table", {id: "move-tasks"},
    h("caption", {}, "The last move tasks, newest first"),
    h("thead", {}, h("tr", {}, ["Task", "Status", "Destination", "Moved", "Skipped", "Rate", "Dry run", "Started", "Ended", "Action"]
      .map((t) => h("th", {scope: "col"}, t)))),
    rows);
  const wrap = tableWrap("Move tasks", table);
  const panel = h("section", {class: "card", id: "move", "aria-labelledby": "move-title"},
    h("h2", {id: "move-title"}, "Move messages back"),
    form, wrap, empty);
  const update = (tasks) => {
    syncRows(rows, tasks, (t) => t.task_handle, taskRow(queue, onChanged));
    wrap.hidden = tasks.length === 0;
    empty.textContent = tasks.length ? "" : "No move task yet.";
  };
  return {panel, update};
}

function statsLine(stats) {
  return h("p", {class: "stats", id: "queue-stats"},
    [["visible", stats.visible], ["leased", stats.leased], ["delayed", stats.delayed],
      ["scheduled", stats.scheduled], ["pending redrive", stats.pending_redrive]]
      .map(([k, v]) => h("span", {}, h("strong", {}, v), " " + k)),
    h("span", {}, "oldest ", h("strong", {}, age(stats.oldest_message_age_seconds))));
}

// The figures that change without the operator: counts and move tasks.
async function liveFigures(name) {
  const [stats, tasks] = await Promise.all([
    api("GET", q(name) + "/stats"),
    api("GET", q(name) + "/move_tasks"),
  ]);
  return {stats, tasks: tasks.tasks};
}

async function renderQueue(gen, name) {
  const [queue, bound, live] = await Promise.all([
    api("GET", q(name)),
    api("GET", q(name) + "/dead_letter_sources"),
    liveFigures(name),
  ]);
  const sources = bound.queues;
  if (gen !== generation) return;
  const peek = peekPanel(queue);
  await peek.first();
  if (gen !== generation) return;

  // After a change the whole page is read again; a refusal left it as it was.
  const afterChange = async (deleted) => {
    if (deleted === true) go("#/queues");
    else await render();
  };
  const refused = h("div", {id: "delete-refusal", role: "alert"});
  const onRefusal = (e) => {
    const bound = e.sources || sources;
    refused.replaceChildren(h("p", {class: "error"}, "Delete refused: " + e.message),
      bound.length ? h("ul", {id: "refusal-sources"}, bound.map((s) => h("li", {}, queueLink(s), " ",
        detachButton("refusal-detach-", s.name, name, afterChange)))) : null);
  };
  const stats = h("div", {id: "stats-box"}, statsLine(live.stats));
  const move = sources.length > 0 || live.tasks.length > 0 ? movePanel(queue, afterChange) : null;
  if (move) move.update(live.tasks);
  show(name,
    h("nav", {class: "crumbs", "aria-label": "Breadcrumb"}, h("a", {href: "#/queues"}, "Queues"), " / ", name),
    h("div", {class: "page-head"}, h("h1", {}, name),
      h("div", {class: "actions"},
        h("button", {type: "button", id: "purge-queue", onclick: () => purge(name, afterChange)}, "Purge"),
        h("button", {type: "button", class: "danger", id: "delete-queue", onclick: () => removeQueue(name, afterChange, onRefusal)}, "Delete queue"))),
    refused,
    stats,
    bindingPanel(queue, sources, afterChange),
    move ? move.panel : null,
    h("section", {class: "card", "aria-labelledby": "send-title"}, h("h2", {id: "send-title"}, "Send a test message"),
      sendForm(queue, () => peek.reload())),
    peek.panel,
    h("section", {class: "card", "aria-labelledby": "settings-title"}, h("h2", {id: "settings-title"}, "Settings"),
      settingsList(queue),
      h("details", {id: "edit-queue-details"}, h("summary", {}, "Edit settings"), editForm(queue, afterChange))));
  let running = live.tasks.some((t) => t.status === "running");
  poll(gen, async () => {
    // Live parts only: the forms and the peeked page stay as the operator left them, except
    // that the page is peeked again when a move task ends. A queue deleted elsewhere is read
    // again as a whole, which shows that it is gone.
    let fresh;
    try {
      fresh = await liveFigures(name);
    } catch (e) {
      if (e instanceof ApiError && e.code === "queue_not_found" && gen === generation) {
        await render();
        return;
      }
      throw e;
    }
    if (gen !== generation) return;
    stats.replaceChildren(statsLine(fresh.stats));
    if (move) move.update(fresh.tasks);
    const stillRunning = fresh.tasks.some((t) => t.status === "running");
    if (running && !stillRunning) await peek.reload();
    running = stillRunning;
  });
}

// ---------- cluster ----------

// The last minutes of this node's figures, one sample a poll.
const history = [];

function sample(samples) {
  let requests = 0;
  let writes = 0;
  let writeSeconds = 0;
  let sent = 0;
  let acked = 0;
  for (const s of samples) {
    if (s.name === "raftq_requests_total" && s.labels.route !== "/metrics") requests += s.value;
    if (s.name === "raftq_request_duration_seconds_count" && s.labels.method !== "GET") writes += s.value;
    if (s.name === "raftq_request_duration_seconds_sum" && s.labels.method !== "GET") writeSeconds += s.value;
    if (s.name === "raftq_queue_sent_messages_total") sent += s.value;
    if (s.name === "raftq_queue_acked_messages_total") acked += s.value;
  }
  const now = performance.now();
  const last = history[history.length - 1];
  const point = {at: now, requests, writes, writeSeconds, sent, acked, sendRate: 0, ackRate: 0, latencyMs: null};
  if (last) {
    const seconds = (now - last.at) / 1000;
    point.sendRate = Math.max(0, (sent - last.sent) / seconds);
    point.ackRate = Math.max(0, (acked - last.acked) / seconds);
    const n = writes - last.writes;
    point.latencyMs = n > 0 ? ((writeSeconds - last.writeSeconds) / n) * 1000 : null;
  }
  history.push(point);
  while (history.length && now - history[0].at > CHART_SECONDS * 1000) history.shift();
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

// A line chart of `series` ([{label, cls, values: [{t, v}]}]) over the last CHART_SECONDS.
function chart(id, title, unit, series) {
  const width = 600;
  const height = 160;
  const pad = {l: 44, r: 8, t: 10, b: 22};
  const now = performance.now();
  const all = series.flatMap((s) => s.values.map((p) => p.v)).filter((v) => v !== null);
  const max = Math.max(1, ...all) * 1.1;
  const x = (t) => pad.l + (width - pad.l - pad.r) * (1 - (now - t) / (CHART_SECONDS * 1000));
  const y = (v) => pad.t + (height - pad.t - pad.b) * (1 - v / max);
  const grid = [0, 0.5, 1].map((f) => [
    svg("line", {x1: pad.l, x2: width - pad.r, y1: y(max * f / 1.1), y2: y(max * f / 1.1), class: "grid"}),
    svg("text", {x: pad.l - 4, y: y(max * f / 1.1) + 4, class: "axis", "text-anchor": "end"}, (max * f / 1.1).toFixed(max < 11 ? 1 : 0)),
  ]).flat();
  const ticks = [300, 240, 180, 120, 60, 0].map((s) =>
    svg("text", {x: x(now - s * 1000), y: height - 6, class: "axis", "text-anchor": s ? "middle" : "end"}, s ? "-" + s / 60 + " min" : "now"));
  const lines = series.map((s) => {
    const points = s.values.filter((p) => p.v !== null).map((p) => x(p.t).toFixed(1) + "," + y(p.v).toFixed(1));
    return svg("polyline", {points: points.join(" "), class: "line " + s.cls});
  });
  const latest = series.map((s) => {
    const last = [...s.values].reverse().find((p) => p.v !== null);
    return h("span", {class: "legend " + s.cls}, s.label + ": " + (last ? last.v.toFixed(1) : "–") + " " + unit);
  });
  return h("figure", {class: "chart", id},
    h("figcaption", {}, title, " ", latest),
    svg("svg", {viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": title}, ...grid, ...ticks, ...lines));
}

function clusterCharts() {
  const rates = [
    {label: "sends/s", cls: "s1", values: history.map((p) => ({t: p.at, v: p.sendRate}))},
    {label: "acks/s", cls: "s2", values: history.map((p) => ({t: p.at, v: p.ackRate}))},
  ];
  const latency = [{label: "mean write latency", cls: "s3", values: history.map((p) => ({t: p.at, v: p.latencyMs}))}];
  return h("div", {class: "charts"},
    chart("throughput-chart", "Throughput (messages, all queues)", "/s", rates),
    chart("latency-chart", "Commit latency: mean time of this node's writes (REST, gRPC, SQS)", "ms", latency));
}

async function renderCluster(gen) {
  const load = async () => {
    const [cluster, metrics, state] = await Promise.all([
      api("GET", "/v1/cluster"),
      api("GET", "/metrics"),
      session.admin ? api("GET", "/v1/cluster/state") : Promise.resolve(null),
    ]);
    const samples = parseMetrics(metrics);
    sample(samples);
    return {cluster, samples, state};
  };
  let data = await load();
  if (gen !== generation) return;
  const live = h("div", {id: "cluster-live"});
  const fill = () => {
    const {cluster, state} = data;
    // Every figure of the table and of the facts comes from one reading, the cluster answer:
    // this node's own row holds its applied and last log index as of its commit index.
    const own = cluster.nodes.find((n) => n.id === cluster.node_id) || {};
    const applied = own.applied_index ?? null;
    const committed = cluster.commit_index;
    const lastLog = own.last_log_index ?? null;
    const answeringCount = cluster.nodes.filter((n) => n.answering).length;
    const leading = cluster.leader === cluster.node_id;
    const known = (v) => (v === null || v === undefined ? "–" : v);
    const rows = cluster.nodes.map((n) => {
      const self = n.id === cluster.node_id;
      const matched = n.matched_index;
      const behind = n.applied_index === null || n.applied_index === undefined ? null : Math.max(0, committed - n.applied_index);
      return h("tr", {"data-node": n.id, class: n.role === "leader" ? "leader" : null},
        h("th", {scope: "row"}, n.id + (self ? " (this node)" : "")),
        h("td", {}, n.raft_addr),
        h("td", {}, n.role),
        h("td", {}, n.answering ? "yes" : "no"),
        h("td", {class: "num", "data-field": "last_log_index"}, known(n.last_log_index)),
        h("td", {class: "num", "data-field": "commit_index"}, known(n.commit_index)),
        h("td", {class: "num", "data-field": "applied_index"}, known(n.applied_index)),
        h("td", {class: "num", "data-field": "lag"}, known(behind)),
        h("td", {class: "num"}, known(matched)));
    });
    const table = h("table", {id: "nodes"},
      h("caption", {}, "Members as node " + cluster.node_id + " sees them: each one's indexes as it last answered this node's pings; " +
        "lag: entries applied behind the commit index" +
        (leading ? "; replicated to: how far this leader knows each one's log is replicated" : "")),
      h("thead", {}, h("tr", {}, ["Node", "Peer address", "Role", "Answers", "Last log", "Commit", "Applied", "Lag", "Replicated to"]
        .map((t) => h("th", {scope: "col"}, t)))),
      h("tbody", {}, rows));
    const facts = [
      ["Leader", cluster.leader === null ? "none" : "node " + cluster.leader],
      ["Term", cluster.term],
      ["Commit index", committed],
      ["Applied index (this node)", applied === null ? "–" : applied],
      ["Apply lag (this node)", applied === null ? "–" : Math.max(0, committed - applied)],
      ["Last log index (this node)", lastLog === null ? "–" : lastLog],
      ["Members answering", answeringCount + " of " + cluster.nodes.length],
      ["Region", cluster.region],
    ];
    if (cluster.cluster_id) facts.push(["Cluster ID", cluster.cluster_id]);
    if (state) facts.push(["State digest (this node)", state.state_digest.slice(0, 16) + "…"]);
    const groupRows = cluster.groups.map((g) =>
      h("tr", {"data-group": g.group, class: g.leader === cluster.node_id ? "leader" : null},
        h("th", {scope: "row"}, String(g.group)),
        h("td", {}, g.leader === null ? "none" : "node " + g.leader),
        h("td", {}, g.members.join(", ")),
        h("td", {class: "num", "data-field": "queues"}, g.queues),
        h("td", {}, known(g.role)),
        h("td", {class: "num", "data-field": "commit_index"}, known(g.commit_index)),
        h("td", {class: "num", "data-field": "applied_index"}, known(g.applied_index))));
    const groups = h("table", {id: "groups"},
      h("caption", {}, "Raft groups as node " + cluster.node_id + " sees them: each group's queues, and this node's role and indexes where it holds a replica; the figures above are group 1's"),
      h("thead", {}, h("tr", {}, ["Group", "Leader", "Members", "Queues", "Role here", "Commit", "Applied"]
        .map((t) => h("th", {scope: "col"}, t)))),
      h("tbody", {}, groupRows));
    live.replaceChildren(
      h("dl", {class: "settings", id: "cluster-facts"}, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      tableWrap("Nodes", table),
      tableWrap("Groups", groups),
      clusterCharts());
  };
  fill();
  show("Cluster", h("h1", {}, "Cluster"), live);
  poll(gen, async () => {
    const fresh = await load();
    if (gen !== generation) return;
    data = fresh;
    fill();
  });
}

// ---------- start ----------

async function start() {
  byId("sign-out").addEventListener("click", () => signOut(""));
  window.addEventListener("hashchange", () => {
    if (routeName() === "sign-in" && session.signedIn) {
      location.hash = "#/queues";
      return;
    }
    render();
  });
  try {
    await probe();
    session.signedIn = true;
    session.open = session.key === null;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (e.status !== 401) {
      show("Error", h("h1", {}, "The node did not answer"), h("p", {class: "error", role: "alert"}, e.message));
      return;
    }
    session.signedIn = false;
    if (session.key !== null) session.reason = e.message;
    sessionStorage.removeItem(KEY_STORAGE);
    session.key = null;
  }
  if (session.signedIn && routeName() === "sign-in") location.hash = "#/queues";
  await render();
}

start();
