"""Bare mitmproxy for the benchmark: streams every response and does nothing else.

BENCH_CONNECT_TO=host:port:addr:port makes name resolution of host:port yield addr:port
(as llmtap's --connect-to does), so both proxies reach the same local origin.
"""

import asyncio
import os
from typing import Any

from mitmproxy import http


class Bare:
    def running(self) -> None:
        spec = os.environ.get("BENCH_CONNECT_TO", "")
        if not spec:
            return
        host, port, addr, aport = spec.split(":")
        loop = asyncio.get_running_loop()
        resolve = loop.getaddrinfo

        async def getaddrinfo(h: Any, p: Any, *a: Any, **kw: Any) -> Any:
            if h == host and int(p) == int(port):
                h, p = addr, int(aport)
            return await resolve(h, p, *a, **kw)

        loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None:
            flow.response.stream = True


addons = [Bare()]
