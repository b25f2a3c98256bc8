// The graphql-http server audit (GraphQL over HTTP) against a running memql.
// node audit.mjs URL KEY USER -> prints one JSON line {ok, warn, error, failures: [...]}
import { serverAudits } from 'graphql-http';

const [url, key, user] = process.argv.slice(2);
const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set('Authorization', `Bearer ${key}`);
  headers.set('X-User-Id', user);
  return fetch(input, { ...init, headers });
};
const counts = { ok: 0, warn: 0, error: 0, failures: [] };
for (const audit of serverAudits({ url, fetchFn })) {
  const result = await audit.fn();
  counts[result.status] += 1;
  if (result.status !== 'ok') counts.failures.push(`${result.status}: ${audit.name}: ${result.reason}`);
}
console.log(JSON.stringify(counts));
