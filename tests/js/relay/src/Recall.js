import { graphql } from 'relay-runtime';

export const recallQuery = graphql`
  query RecallQuery($query: String!, $minScore: Float) {
    recall(query: $query, minScore: $minScore, limit: 5) {
      score
      memory {
        id
        ...MemoryItem_memory
      }
    }
  }
`;
