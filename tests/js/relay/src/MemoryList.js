// What a Relay app writes against memql: a paginated memories connection, a refetchable
// fragment on Node, recall and save. The tests compile these with relay-compiler.
import { graphql } from 'relay-runtime';

export const memoryListQuery = graphql`
  query MemoryListQuery($count: Int!, $cursor: String) {
    ...MemoryList_query @arguments(count: $count, cursor: $cursor)
  }
`;

export const memoryListFragment = graphql`
  fragment MemoryList_query on Query
  @refetchable(queryName: "MemoryListPaginationQuery")
  @argumentDefinitions(count: { type: "Int", defaultValue: 20 }, cursor: { type: "String" }) {
    memories(first: $count, after: $cursor, orderBy: { field: UPDATED_AT, direction: DESC })
      @connection(key: "MemoryList_memories") {
      __id
      totalCount
      edges {
        node {
          id
          ...MemoryItem_memory
        }
      }
    }
  }
`;

// the same list read from the end backwards (last/before)
export const olderFirstFragment = graphql`
  fragment MemoryList_timeline on Query
  @refetchable(queryName: "MemoryListTimelineQuery")
  @argumentDefinitions(count: { type: "Int", defaultValue: 10 }, cursor: { type: "String" }) {
    memories(last: $count, before: $cursor, kind: EPISODIC)
      @connection(key: "MemoryListTimeline_memories") {
      edges {
        node {
          id
          occurredAt
          ...MemoryItem_memory
        }
      }
    }
  }
`;
