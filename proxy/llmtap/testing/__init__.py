"""The testing wing: shipped on purpose, never imported by the traffic path.

The mock provider (:mod:`.mock`), synthetic history (:mod:`.synthetic`), the process harness
(:mod:`.harness`: real ``llmtap`` subprocesses on loopback; :mod:`.netns`: a pod in network
namespaces, for transparent mode), a raw HTTP client that sees the wire bytes (:mod:`.rawclient`),
fault injection (:mod:`.faults`, wired by the composition root only), and ``llmtap demo``
(:mod:`.demo`). Like ``mitmproxy.test``, it may import the runtime; nothing in ``intercept``,
``decode``, ``adapters``, ``capture`` or ``pipeline`` imports it.
"""
