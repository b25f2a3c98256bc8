"""The security headers of every HTTP answer, pages and API alike.

Pages (any `text/html` answer: GraphiQL, the inspector, the missing-assets page) may run only
the scripts and styles memql serves itself, talk only to this origin, and never be framed;
every other answer (JSON, files) may run nothing at all. Everything is `nosniff`, so a JSON body
or an uploaded-looking text is never read as a script or a page.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        # CSP 3: 'self' covers ws:// and wss:// to the same host (the subscriptions)
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
OTHER_POLICY = "default-src 'none'; frame-ancestors 'none'"

_COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """ASGI middleware adding the headers above to every HTTP response that lacks them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                content_type = next(
                    (value for name, value in headers if name.lower() == b"content-type"), b""
                )
                policy = PAGE_POLICY if content_type.startswith(b"text/html") else OTHER_POLICY
                for name, value in [*_COMMON, (b"content-security-policy", policy.encode())]:
                    if name not in present:
                        headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
