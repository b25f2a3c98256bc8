// Apollo Client (in node) with its persisted-queries link against a running memql.
// node apq.mjs URL KEY USER NAME -> prints one JSON line: every request the link sent, with the
// answer's status and body, and the data each query got.
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { createHash } from 'node:crypto';

const [url, key, user, name] = process.argv.slice(2);
const exchanges = [];

async function recordingFetch(input, init = {}) {
  const response = await fetch(input, init);
  const text = await response.clone().text();
  const target = new URL(typeof input === 'string' ? input : input.url);
  exchanges.push({
    method: init.method || 'GET',
    params: Object.fromEntries(target.searchParams),
    body: init.body ? JSON.parse(init.body) : null,
    status: response.status,
    answer: JSON.parse(text),
  });
  return response;
}

function client(useGETForHashedQueries) {
  const persisted = new PersistedQueryLink({
    sha256: (query) => createHash('sha256').update(query).digest('hex'),
    useGETForHashedQueries,
  });
  const http = new HttpLink({
    uri: url,
    fetch: recordingFetch,
    headers: { Authorization: `Bearer ${key}`, 'X-User-Id': user },
  });
  return new ApolloClient({ link: persisted.concat(http), cache: new InMemoryCache() });
}

const results = {};
for (const [label, get] of [['post', false], ['get', true]]) {
  const query = gql(`query ${name}_${label} { viewer { userId } memories(first: 1) { totalCount } }`);
  const apollo = client(get);
  const first = await apollo.query({ query, fetchPolicy: 'network-only' });
  const second = await apollo.query({ query, fetchPolicy: 'network-only' });
  results[label] = [first.data, second.data];
}
console.log(JSON.stringify({ exchanges, results }));
