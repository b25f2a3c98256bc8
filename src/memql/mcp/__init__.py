"""The MCP endpoint: agents manage their user's memory through the same service as GraphQL.

`memql.mcp.server` holds the endpoint (it loads the MCP SDK); `memql.mcp.tools` the tools and
their arguments, which need no SDK.
"""
