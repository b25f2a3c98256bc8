// memql over HTTP (queries, mutations) and graphql-transport-ws (the live feed), no library.

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

/**
 * One `memoryEvents` subscription that survives disconnects: after a drop it reconnects and
 * subscribes again with `since` set to the last cursor it delivered, so the server replays
 * what happened meanwhile (each event once, in cursor order).
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
    this.socket = null;
    this.stopped = false;
    this.attempt = 0;
    this.timer = null;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.socket) this.socket.close(1000, "closed by the inspector");
    this.socket = null;
    this.onStatus("stopped");
  }

  connect() {
    this.connections += 1;
    this.onStatus(this.attempt === 0 ? "connecting" : "reconnecting");
    const socket = new WebSocket(this.url, "graphql-transport-ws");
    this.socket = socket;
    socket.onopen = () => {
      socket.send(JSON.stringify({ type: "connection_init", payload: this.params }));
    };
    socket.onmessage = (message) => this.receive(socket, JSON.parse(message.data));
    socket.onclose = (event) => {
      if (this.socket !== socket || this.stopped) return;
      this.socket = null;
      if (event.code === 4403) {
        this.onStatus("refused", event.reason || "the credentials were refused");
        return;
      }
      this.retry();
    };
  }

  receive(socket, msg) {
    switch (msg.type) {
      case "connection_ack":
        this.attempt = 0;
        socket.send(
          JSON.stringify({
            id: "events",
            type: "subscribe",
            payload: { query: this.query, variables: { since: this.cursor } },
          }),
        );
        this.onStatus(
          "live",
          this.connections > 1 && this.cursor ? `resumed after cursor ${this.cursor}` : "",
        );
        break;
      case "ping":
        socket.send(JSON.stringify({ type: "pong" }));
        break;
      case "next": {
        const event = msg.payload?.data?.memoryEvents;
        if (event) {
          this.cursor = event.cursor;
          this.onEvent(event);
        }
        const error = msg.payload?.errors?.[0];
        if (error) this.ended(socket, error);
        break;
      }
      case "error":
        this.ended(socket, msg.payload?.[0] ?? { message: "subscription refused" });
        break;
      case "complete":
        this.ended(socket, { message: "the server ended the subscription" });
        break;
    }
  }

  ended(socket, error) {
    const code = error.extensions?.code;
    if (code === "SUBSCRIBER_BEHIND" && error.extensions?.since) {
      // too slow for the live rate: resume from the cursor the server gives
      this.cursor = error.extensions.since;
      socket.close(1000);
      return;
    }
    this.stopped = true;
    socket.close(1000);
    this.onStatus("ended", `${code ?? "ERROR"}: ${error.message}`);
  }

  retry() {
    const delay = RETRY_MS[Math.min(this.attempt, RETRY_MS.length - 1)];
    this.attempt += 1;
    this.onStatus("reconnecting", `retrying in ${delay / 1000} s`);
    this.timer = setTimeout(() => this.connect(), delay);
  }
}
