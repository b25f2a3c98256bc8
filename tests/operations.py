"""GraphQL documents shared by the tests."""

MEMORY_FIELDS = """
    id kind scope content key category pinned sourceThreadIds source createdAt updatedAt
    expiresAt invalidatedAt invalidationReason supersedes supersededBy embeddingModel occurredAt
"""

SAVE = f"""
mutation Save($input: SaveMemoryInput!) {{
  saveMemory(input: $input) {{
    outcome
    memory {{ {MEMORY_FIELDS} }}
    nearDuplicates {{ similarity memory {{ id kind content }} }}
    superseded {{ id invalidationReason supersededBy }}
  }}
}}
"""

SAVE_MANY = f"""
mutation SaveMany($inputs: [SaveMemoryInput!]!) {{
  saveMemories(inputs: $inputs) {{ outcome memory {{ {MEMORY_FIELDS} }} }}
}}
"""

RECALL = """
query Recall($query: String!, $limit: Int, $scope: MemoryScope, $kinds: [MemoryKind!],
             $categories: [String!]) {
  recall(query: $query, limit: $limit, scope: $scope, kinds: $kinds, categories: $categories) {
    score
    signals { vector lexical recency pinned }
    memory { id content kind category pinned }
  }
}
"""

LIST = f"""
query List($scope: MemoryScope, $kinds: [MemoryKind!], $categories: [String!], $pinned: Boolean,
           $contains: String, $includeInvalidated: Boolean, $first: Int, $after: String) {{
  memories(scope: $scope, kinds: $kinds, categories: $categories, pinned: $pinned,
           contains: $contains, includeInvalidated: $includeInvalidated, first: $first,
           after: $after) {{
    edges {{ cursor node {{ {MEMORY_FIELDS} }} }}
    pageInfo {{ hasNextPage endCursor }}
  }}
}}
"""

GET = f"query Get($id: ID!) {{ memory(id: $id) {{ {MEMORY_FIELDS} }} }}"

HISTORY = f"query History($id: ID!) {{ memoryHistory(id: $id) {{ {MEMORY_FIELDS} }} }}"

CONTEXT = """
query Context($query: String, $budget: Int) {
  memoryContext(query: $query, budget: $budget) { text count omitted }
}
"""

RETIRE = f"""
mutation Retire($id: ID, $key: String, $scope: MemoryScope) {{
  retireMemory(id: $id, key: $key, scope: $scope) {{ {MEMORY_FIELDS} }}
}}
"""

RESTORE = f"mutation Restore($id: ID!) {{ restoreMemory(id: $id) {{ {MEMORY_FIELDS} }} }}"

SUPERSEDE = f"""
mutation Supersede($id: ID, $key: String, $scope: MemoryScope, $input: SaveMemoryInput!) {{
  supersedeMemory(id: $id, key: $key, scope: $scope, input: $input) {{
    memory {{ {MEMORY_FIELDS} }}
    superseded {{ {MEMORY_FIELDS} }}
  }}
}}
"""

ERASE = "mutation Erase($id: ID!) { eraseMemory(id: $id) { erased } }"
ERASE_USER = "mutation { eraseUserMemories { erased } }"


def contents(list_data: dict) -> list[str]:
    return [e["node"]["content"] for e in list_data["memories"]["edges"]]
