"""The MCP endpoint: agents manage their user's memory through the same service as GraphQL."""

from memql.mcp.server import McpEndpoint, tool_names

__all__ = ["McpEndpoint", "tool_names"]
