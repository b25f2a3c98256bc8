// The memql inspector: what a project's agents remember, live. Plain ES modules, no build.
import { Api, ApiError, EventFeed } from "./graphql.js";

const ENDPOINT = new URL("/graphql", window.location.href).href;
const WS_ENDPOINT = ENDPOINT.replace(/^http/, "ws");
const STORED = "memql.inspector.credentials";
const PAGE_SIZE = 25;
const FEED_KEEP = 200;

// every field of a Memory (tests/unit/test_api_records.py holds it to schema.graphql)
const MEMORY = `id kind scope content key category pinned sourceThreadIds source createdAt
  updatedAt expiresAt occurredAt invalidatedAt invalidationReason supersedes supersededBy
  embeddingModel`;
const VIEWER = `query Viewer {
  viewer { userId projectName consumer grant { user project } eventCursor }
}`;
const MEMORIES = `query Memories($scope: MemoryScope, $kinds: [MemoryKind!],
    $categories: [String!], $pinned: Boolean, $contains: String, $includeInvalidated: Boolean!,
    $first: Int!, $after: String) {
  memories(scope: $scope, kinds: $kinds, categories: $categories, pinned: $pinned,
           contains: $contains, includeInvalidated: $includeInvalidated, first: $first,
           after: $after) {
    edges { node { ${MEMORY} } }
    pageInfo { hasNextPage endCursor }
  }
}`;
const RECALL = `query Recall($query: String!, $limit: Int!, $scope: MemoryScope) {
  recall(query: $query, limit: $limit, scope: $scope) {
    score signals { vector lexical recency pinned } memory { ${MEMORY} }
  }
}`;
const HISTORY = `query History($id: ID!) { memoryHistory(id: $id) { ${MEMORY} } }`;
const SAVE = `mutation Save($input: SaveMemoryInput!) {
  saveMemory(input: $input) { outcome memory { ${MEMORY} } }
}`;
const RETIRE = `mutation Retire($id: ID!) { retireMemory(id: $id) { ${MEMORY} } }`;
const RESTORE = `mutation Restore($id: ID!) { restoreMemory(id: $id) { ${MEMORY} } }`;
const EVENTS = `subscription Events($since: String) {
  memoryEvents(since: $since) { cursor type scope memoryId changedAt memory { ${MEMORY} } }
}`;

const $ = (selector) => document.querySelector(selector);

const state = { api: null, viewer: null, feed: null, after: null, selected: null };

/** An element with text (never parsed as HTML) and attributes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value == null) continue;
    if (name === "class") node.className = value;
    // through the CSSOM: the page's policy refuses style attributes (no 'unsafe-inline')
    else if (name === "style") Object.assign(node.style, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child != null) node.append(child instanceof Node ? child : document.createTextNode(child));
  }
  return node;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

function say(target, message, isError = false) {
  target.textContent = message;
  target.classList.toggle("error", isError);
}

function explain(error) {
  return error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
}

// --- what the grant allows ----------------------------------------------------------------

function access(scope) {
  return state.viewer.grant[scope === "PROJECT" ? "project" : "user"];
}
const readable = (scope) => access(scope) !== "NONE";
const writable = (scope) => access(scope) === "READ_WRITE";

/** Hide what the grant does not allow: no write button is offered that would be refused. */
function applyGrant() {
  const anyWrite = writable("USER") || writable("PROJECT");
  for (const node of document.querySelectorAll("[data-needs-write]")) node.hidden = !anyWrite;
  for (const select of document.querySelectorAll("select[name=scope]")) {
    const writing = select.form.id === "save-form";
    for (const option of select.options) {
      if (!option.value) continue;
      option.hidden = writing ? !writable(option.value) : !readable(option.value);
    }
    if (writing) {
      const first = [...select.options].find((o) => !o.hidden);
      if (first) select.value = first.value;
    }
  }
}

// --- signing in -----------------------------------------------------------------------------

function credentialsFromForm(form) {
  const data = new FormData(form);
  if (data.get("kind") === "jwt") return { kind: "jwt", token: data.get("token").trim() };
  return { kind: "key", key: data.get("key").trim(), userId: data.get("userId").trim() };
}

async function signIn(credentials) {
  const api = new Api(ENDPOINT, credentials);
  const { viewer } = await api.request(VIEWER);
  state.api = api;
  state.viewer = viewer;
  sessionStorage.setItem(STORED, JSON.stringify(credentials));
  $("#viewer-user").textContent = viewer.userId;
  $("#viewer-project").textContent = viewer.projectName;
  $("#viewer-consumer").textContent = viewer.consumer.toLowerCase();
  const level = (access) => access.toLowerCase().replace("_", "-");
  $("#viewer-grant").textContent =
    `user ${level(viewer.grant.user)} · project ${level(viewer.grant.project)}`;
  $("#viewer").hidden = false;
  $("#sign-in").hidden = true;
  $("#app").hidden = false;
  applyGrant();
  startFeed(credentials, viewer.eventCursor);
  await loadMemories();
}

function signOut() {
  sessionStorage.removeItem(STORED);
  state.feed?.stop();
  Object.assign(state, { api: null, viewer: null, feed: null, after: null, selected: null });
  $("#feed").replaceChildren();
  $("#memory-list").replaceChildren();
  $("#recall-hits").replaceChildren();
  $("#detail").hidden = true;
  $("#app").hidden = true;
  $("#viewer").hidden = true;
  $("#sign-in").hidden = false;
}

// --- memories -------------------------------------------------------------------------------

function badges(memory) {
  return el(
    "div",
    { class: "badges" },
    el("span", { class: `badge kind-${memory.kind.toLowerCase()}` }, memory.kind.toLowerCase()),
    el("span", { class: "badge" }, memory.scope.toLowerCase()),
    el("span", { class: "badge" }, memory.category),
    memory.pinned ? el("span", { class: "badge pinned" }, "pinned") : null,
    memory.key ? el("span", { class: "badge key" }, `key ${memory.key}`) : null,
    memory.invalidatedAt
      ? el("span", { class: "badge retired" }, memory.invalidationReason ?? "retired")
      : null,
  );
}

function memoryCard(memory, extra = null) {
  return el(
    "li",
    {
      class: `card${memory.invalidatedAt ? " invalid" : ""}`,
      "data-id": memory.id,
      tabindex: "0",
      onclick: () => openMemory(memory),
      onkeydown: (e) => e.key === "Enter" && openMemory(memory),
    },
    el("p", { class: "content" }, memory.content),
    badges(memory),
    el("time", { datetime: memory.createdAt }, when(memory.createdAt)),
    extra,
  );
}

function filters() {
  const data = new FormData($("#filters"));
  const text = (name) => data.get(name).trim() || null;
  const one = (value) => (value ? [value] : null);
  return {
    scope: data.get("scope") || null,
    kinds: one(data.get("kind")),
    categories: one(text("category")),
    pinned: data.get("pinned") ? data.get("pinned") === "true" : null,
    contains: text("contains"),
    includeInvalidated: data.get("includeInvalidated") === "on",
  };
}

async function loadMemories({ more = false } = {}) {
  const list = $("#memory-list");
  const status = $("#memories-status");
  try {
    const { memories } = await state.api.request(MEMORIES, {
      ...filters(),
      first: PAGE_SIZE,
      after: more ? state.after : null,
    });
    const cards = memories.edges.map((edge) => memoryCard(edge.node));
    if (more) list.append(...cards);
    else list.replaceChildren(...cards);
    state.after = memories.pageInfo.endCursor;
    $("#more").hidden = !memories.pageInfo.hasNextPage;
    say(status, list.children.length ? "" : "No memories match.");
  } catch (error) {
    say(status, explain(error), true);
  }
}

let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => loadMemories(), 300);
}

// --- recall ---------------------------------------------------------------------------------

const SIGNALS = ["vector", "lexical", "recency", "pinned"];

function signalBars(hit) {
  return el(
    "div",
    { class: "signals" },
    el("span", { class: "score", title: "score" }, hit.score.toFixed(3)),
    SIGNALS.map((name) =>
      el(
        "span",
        { class: `signal ${name}`, title: `${name} ${hit.signals[name].toFixed(3)}` },
        el("span", { class: "name" }, name),
        el("span", { class: "bar" }, el("i", { style: { width: `${hit.signals[name] * 100}%` } })),
        el("span", { class: "value" }, hit.signals[name].toFixed(2)),
      ),
    ),
  );
}

async function recall(form) {
  const data = new FormData(form);
  const status = $("#recall-status");
  try {
    const { recall: hits } = await state.api.request(RECALL, {
      query: data.get("query"),
      limit: Number(data.get("limit")) || 5,
      scope: data.get("scope") || null,
    });
    $("#recall-hits").replaceChildren(...hits.map((hit) => memoryCard(hit.memory, signalBars(hit))));
    say(status, hits.length ? "" : "Nothing recalled.");
  } catch (error) {
    say(status, explain(error), true);
  }
}

// --- one memory and its versions ----------------------------------------------------------

async function openMemory(memory) {
  state.selected = memory;
  const detail = $("#detail");
  detail.hidden = false;
  $("#detail-content").textContent = memory.content;
  const fields = [
    ["id", memory.id],
    ["kind", memory.kind.toLowerCase()],
    ["scope", memory.scope.toLowerCase()],
    ["category", memory.category],
    ["key", memory.key],
    ["pinned", memory.pinned ? "yes" : "no"],
    ["threads", memory.sourceThreadIds.join(", ")],
    ["created", when(memory.createdAt)],
    ["updated", when(memory.updatedAt)],
    ["expires", when(memory.expiresAt)],
    ["occurred", when(memory.occurredAt)],
    ["source", memory.source && JSON.stringify(memory.source)],
    ["model", memory.embeddingModel],
    ["invalidated", memory.invalidatedAt && `${when(memory.invalidatedAt)} (${memory.invalidationReason})`],
  ].filter(([, value]) => value);
  $("#detail-fields").replaceChildren(
    ...fields.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]),
  );
  const canWrite = writable(memory.scope);
  $("#retire").hidden = !canWrite || Boolean(memory.invalidatedAt);
  $("#restore").hidden = !canWrite || memory.invalidationReason !== "retired";
  say($("#detail-status"), "");
  const history = $("#history");
  history.replaceChildren(el("li", { class: "status" }, "loading…"));
  try {
    const { memoryHistory } = await state.api.request(HISTORY, { id: memory.id });
    history.replaceChildren(
      ...memoryHistory.map((version) =>
        el(
          "li",
          { class: version.id === memory.id ? "current" : "" },
          el("p", {}, version.content),
          el(
            "small",
            {},
            `${when(version.createdAt)}`,
            version.invalidationReason ? ` · ${version.invalidationReason}` : " · live",
          ),
        ),
      ),
    );
  } catch (error) {
    history.replaceChildren(el("li", { class: "error" }, explain(error)));
  }
}

async function changeSelected(mutation, field) {
  try {
    const data = await state.api.request(mutation, { id: state.selected.id });
    await openMemory(data[field]);
  } catch (error) {
    say($("#detail-status"), explain(error), true);
  }
}

async function save(form) {
  const data = new FormData(form);
  const status = $("#save-status");
  const input = {
    content: data.get("content"),
    kind: data.get("kind"),
    scope: data.get("scope"),
    pinned: data.get("pinned") === "on",
  };
  if (data.get("category").trim()) input.category = data.get("category").trim();
  if (data.get("key").trim()) input.key = data.get("key").trim();
  try {
    const { saveMemory } = await state.api.request(SAVE, { input });
    say(status, `${saveMemory.outcome.toLowerCase()}: ${saveMemory.memory.id}`);
    form.content.value = "";
  } catch (error) {
    say(status, explain(error), true);
  }
}

// --- the live feed --------------------------------------------------------------------------

function showEvent(event) {
  const feed = $("#feed");
  const memory = event.memory;
  feed.prepend(
    el(
      "li",
      {
        class: `event ${event.type.replace(".", "-")}`,
        "data-cursor": event.cursor,
        onclick: memory ? () => openMemory(memory) : null,
      },
      el("span", { class: "type" }, event.type.replace("memory.", "")),
      el("span", { class: "cursor" }, `#${event.cursor}`),
      el("p", {}, memory ? memory.content : `memory ${event.memoryId ?? ""} erased`),
      el("small", {}, `${event.scope.toLowerCase()} · ${when(event.changedAt)}`),
    ),
  );
  while (feed.children.length > FEED_KEEP) feed.lastElementChild.remove();
  if (!$("#tab-memories").hidden) refreshSoon();
}

// `since`: the event log's position at sign-in, so the feed shows every change after it, even
// one made while the subscription is still being set up
function startFeed(credentials, since) {
  state.feed?.stop();
  const status = $("#feed-status");
  state.feed = new EventFeed(WS_ENDPOINT, credentials, {
    query: EVENTS,
    since,
    onEvent: showEvent,
    onStatus: (name, note = "") => {
      status.dataset.state = name;
      status.textContent = name;
      say($("#feed-note"), note, name === "ended" || name === "refused");
    },
  });
  state.feed.start();
}

// --- wiring ---------------------------------------------------------------------------------

function showTab(name) {
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
  }
  for (const panel of document.querySelectorAll(".tab")) panel.hidden = panel.id !== `tab-${name}`;
}

function wire() {
  const form = $("#sign-in-form");
  form.addEventListener("change", () => {
    const kind = new FormData(form).get("kind");
    for (const part of form.querySelectorAll("[data-kind]")) part.hidden = part.dataset.kind !== kind;
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    say($("#sign-in-error"), "");
    try {
      await signIn(credentialsFromForm(form));
    } catch (error) {
      say($("#sign-in-error"), explain(error), true);
    }
  });
  $("#sign-out").addEventListener("click", signOut);
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("click", () => showTab(tab.dataset.tab));
  }
  $("#filters").addEventListener("submit", (event) => {
    event.preventDefault();
    loadMemories();
  });
  $("#more").addEventListener("click", () => loadMemories({ more: true }));
  $("#recall-form").addEventListener("submit", (event) => {
    event.preventDefault();
    recall(event.target);
  });
  $("#save-form").addEventListener("submit", (event) => {
    event.preventDefault();
    save(event.target);
  });
  $("#close-detail").addEventListener("click", () => {
    $("#detail").hidden = true;
  });
  $("#retire").addEventListener("click", () => changeSelected(RETIRE, "retireMemory"));
  $("#restore").addEventListener("click", () => changeSelected(RESTORE, "restoreMemory"));
}

async function main() {
  wire();
  const stored = sessionStorage.getItem(STORED);
  if (stored) {
    try {
      await signIn(JSON.parse(stored));
      return;
    } catch (error) {
      say($("#sign-in-error"), explain(error), true);
    }
  }
  $("#sign-in").hidden = false;
}

main();
