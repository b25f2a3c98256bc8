// memql over HTTP (queries, mutations), and the live feed over graphql-transport-ws through
// the graphql-ws library.

/** An error the API answered with; `code` is its `extensions.code`. */
export class ApiError extends Error {
  constructor(message, code, extensions = {}) {
    super(message);
    this.code = code;
    this.extensions = extensions;
  }
}

/** Credentials as the headers memql reads: an API key and a user id, or a browser JWT. */
export function credentialHeaders(credentials) {
  if (credentials.kind === "jwt") return { Authorization: `Bearer ${credentials.token}` };
  return { Authorization: `Bearer ${credentials.key}`, "X-User-Id": credentials.userId };
}

export class Api {
  constructor(endpoint, credentials) {
    this.endpoint = endpoint;
    this.headers = credentialHeaders(credentials);
  }

  /** The operation's `data`; an ApiError with the first error's code otherwise. */
  async request(query, variables = {}) {
    let response;
    try {
      response = await fetch(this.endpoint, {
        method: "POST",
        headers: { ...this.headers, "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ query, variables }),
      });
    } catch (error) {
      throw new ApiError(`memql is unreachable (${error.message})`, "NETWORK");
    }
    let body = null;
    try {
      body = await response.json();
    } catch {
      // a non-JSON answer (404 for a project without memory, 503 when the database is away)
    }
    const error = body?.errors?.[0];
    if (error) throw new ApiError(error.message, error.extensions?.code ?? "ERROR", error.extensions);
    if (!response.ok || !body?.data) {
      throw new ApiError(`memql answered HTTP ${response.status}`, `HTTP_${response.status}`);
    }
    return body.data;
  }
}

const RETRY_MS = [500, 1000, 2000, 5000, 10000];
// the graphql-ws client from the npm registry, copied into the package at build time
// (web/build.py); its UMD build defines `globalThis.graphqlWs`
const GRAPHQL_WS = "/assets/vendor/graphql-ws.min.js";
// the server closes with 4403 when it refuses the credentials: retrying cannot help
const REFUSED = 4403;

/** graphql-ws's client, loaded on first use: the inspector works without it, but no feed. */
async function graphqlWs() {
  if (!globalThis.graphqlWs) await import(GRAPHQL_WS);
  return globalThis.graphqlWs;
}

/**
 * One `memoryEvents` subscription that survives disconnects, spoken through the graphql-ws
 * library (graphql-transport-ws). After a drop the library reconnects and subscribes again;
 * its `since` is read when the subscription is sent, so it is always the last cursor this feed
 * delivered and the server replays what happened meanwhile (each event once, in cursor order).
 */
export class EventFeed {
  constructor(url, credentials, { query, since = null, onEvent, onStatus }) {
    this.url = url;
    this.params = credentialHeaders(credentials);
    this.query = query;
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    // the last delivered cursor (at first, where the feed starts): where a subscription resumes
    this.cursor = since;
    this.connections = 0;
    this.client = null;
    this.unsubscribe = null;
    this.stopped = false;
  }

  async start() {
    this.stopped = false;
    this.onStatus("connecting");
    let library;
    try {
      library = await graphqlWs();
    } catch {
      this.onStatus("ended", "the live feed's library (graphql-ws) is not built: run python web/build.py");
      return;
    }
    if (this.stopped) return;
    this.client = library.createClient({
      url: this.url,
      connectionParams: () => this.params,
      // connect now, and keep retrying while the page is open
      lazy: false,
      onNonLazyError: () => {},
      retryAttempts: Infinity,
      retryWait: (retries) => this.wait(retries),
      shouldRetry: (closed) => closed?.code !== REFUSED,
      on: {
        connecting: (isRetry) => this.onStatus(isRetry ? "reconnecting" : "connecting"),
        connected: (_socket, _payload, wasRetry) => {
          this.connections += 1;
          this.onStatus("live", wasRetry && this.cursor ? `resumed after cursor ${this.cursor}` : "");
        },
        closed: (event) => {
          if (this.stopped) return;
          if (event?.code === REFUSED) {
            this.stopped = true;
            this.onStatus("refused", event.reason || "the credentials were refused");
          } else {
            this.onStatus("reconnecting");
          }
        },
      },
    });
    this.subscribe();
  }

  subscribe() {
    const feed = this;
    // read by the library each time it sends the subscription (first, and after a reconnect)
    const variables = {
      get since() {
        return feed.cursor;
      },
    };
    let behind = false;
    this.unsubscribe = this.client.subscribe(
      { query: this.query, variables },
      {
        next: (result) => {
          const event = result?.data?.memoryEvents;
          if (event) {
            this.cursor = event.cursor;
            this.onEvent(event);
          }
          const error = result?.errors?.[0];
          if (error) behind = this.ended(error);
        },
        error: (error) => {
          if (this.stopped) return;
          // the server's errors for this subscription, or why the connection ended for good
          const first = Array.isArray(error) ? error[0] : error;
          if (first?.code === REFUSED) return; // said by `closed`
          const said = first?.message ?? first?.reason ?? "subscription refused";
          if (this.ended({ message: said, extensions: first?.extensions })) this.subscribe();
        },
        complete: () => {
          if (behind && !this.stopped) this.subscribe();
          else if (!this.stopped) this.end({ message: "the server ended the subscription" });
        },
      },
    );
  }

  /** True when the subscription should start again from `this.cursor` (too slow for the live
   * rate: the server says where to resume); otherwise the feed ends, saying why. */
  ended(error) {
    const code = error.extensions?.code;
    if (code === "SUBSCRIBER_BEHIND" && error.extensions?.since) {
      this.cursor = error.extensions.since;
      return true;
    }
    this.end(error);
    return false;
  }

  end(error) {
    const code = error.extensions?.code;
    this.stop(false);
    this.onStatus("ended", `${code ?? "ERROR"}: ${error.message}`);
  }

  async wait(retries) {
    const delay = RETRY_MS[Math.min(retries, RETRY_MS.length - 1)];
    this.onStatus("reconnecting", `retrying in ${delay / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }

  stop(say = true) {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.client?.dispose();
    this.client = null;
    if (say) this.onStatus("stopped");
  }
}
