"""The admin API: projects, API keys, browser-token trust, webhooks and the audit log, over
GraphQL at `/admin/graphql`, for the operators of `MEMQL_ADMIN_TOKENS` (none by default: the
path answers 404). Its schema is its own (`schema.admin.graphql`), apart from the memory API's;
its resolvers call `service/admin.py`, as the command line does."""
