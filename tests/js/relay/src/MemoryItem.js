import { graphql } from 'relay-runtime';

// refetchable on its own: Relay fetches it again through Query.node(id:)
export const memoryItemFragment = graphql`
  fragment MemoryItem_memory on Memory @refetchable(queryName: "MemoryItemRefetchQuery") {
    id
    content
    kind
    scope
    category
    pinned
    occurredAt
    createdAt
    updatedAt
  }
`;
