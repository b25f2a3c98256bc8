// A memoryEvents subscriber written with the graphql-ws client (graphql-transport-ws).
// usage: node subscribe.mjs WS_URL API_KEY USER_ID SINCE COUNT
// Prints "connected" once acknowledged, then one JSON line per event; exits 0 after COUNT.
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const [url, key, user, since, count] = process.argv.slice(2);
const wanted = Number(count);

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { Authorization: `Bearer ${key}`, "X-User-Id": user },
  retryAttempts: 0,
  on: { connected: () => console.log("connected") },
});

const query = `subscription Events($since: String) {
  memoryEvents(since: $since) { cursor type scope memoryId memory { id content } }
}`;
const events = client.iterate({ query, variables: { since } });
let received = 0;
const timer = setTimeout(() => {
  console.error(`timed out after ${received} of ${wanted} events`);
  process.exit(2);
}, 30000);

for await (const result of events) {
  if (result.errors) {
    console.error(JSON.stringify(result.errors));
    process.exit(1);
  }
  console.log(JSON.stringify(result.data.memoryEvents));
  received += 1;
  if (received >= wanted) break;
}
clearTimeout(timer);
await client.dispose();
process.exit(0);
