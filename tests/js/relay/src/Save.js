import { graphql } from 'relay-runtime';

export const saveMutation = graphql`
  mutation SaveMutation($input: SaveMemoryInput!, $connections: [ID!]!) {
    saveMemory(input: $input) {
      outcome
      memory @prependNode(connections: $connections, edgeTypeName: "MemoryEdge") {
        id
        ...MemoryItem_memory
      }
    }
  }
`;
