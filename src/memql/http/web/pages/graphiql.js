// GraphiQL as memql serves it (graphiql.html): its settings, and a welcome that says how to
// pass credentials.
const WELCOME = `# memql in GraphiQL
#
# Put your credentials in the Headers pane below, for example
#   {"Authorization": "Bearer mq_…", "X-User-Id": "alice"}
# or {"Authorization": "Bearer <a browser JWT>"}.
# Queries and mutations send them as HTTP headers; subscriptions send them
# in the websocket's connection_init. This page keeps them only while it is
# open: they are never written to the browser's storage.

{
  viewer { userId project consumer grant { user project } }
}
`;
const url = window.location.href.split(/[?#]/)[0];
const subscriptionUrl = url.replace(/^http/, "ws");
const fetcher = GraphiQL.createFetcher({ url, subscriptionUrl });
const explorer = GraphiQLPluginExplorer.explorerPlugin();

// GraphiQL 3 writes headers into localStorage even with shouldPersistHeaders off: in its
// history ("graphiql:queries", each run with its headers) and its favourites. This storage
// keeps operations, variables and the tabs' last responses (GraphiQL reads those back to show
// them) and drops every "headers" it is given.
const KEPT_OUT = new Set(["graphiql:headers"]);
const storage = {
  getItem: (key) => localStorage.getItem(key),
  removeItem: (key) => localStorage.removeItem(key),
  clear: () => localStorage.clear(),
  key: (index) => localStorage.key(index),
  get length() {
    return localStorage.length;
  },
  setItem(key, value) {
    if (KEPT_OUT.has(key)) return localStorage.removeItem(key);
    localStorage.setItem(key, withoutSecrets(value));
  },
};

function withoutSecrets(value) {
  let parsed;
  try {
    parsed = JSON.parse(value);
  } catch {
    return value; // plain text: a query, a flag
  }
  return JSON.stringify(parsed, (key, inner) =>
    key === "headers" ? null : inner,
  );
}

function Explorer() {
  return React.createElement(GraphiQL, {
    fetcher,
    storage,
    plugins: [explorer],
    // never from the address: a link must not plant an operation in the editor
    defaultQuery: WELCOME,
    defaultEditorToolsVisibility: true,
    isHeadersEditorEnabled: true,
    // credentials stay in the page, never in localStorage (nor does a toggle offer to)
    shouldPersistHeaders: false,
    inputValueDeprecation: true,
  });
}

ReactDOM.createRoot(document.getElementById("graphiql")).render(
  React.createElement(Explorer),
);
