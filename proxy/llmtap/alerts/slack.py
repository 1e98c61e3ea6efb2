"""Alert text for Slack-compatible webhooks, built from values anyone could have written.

A label value (a model, a feature, a service) is an application's text. In Slack's markup ``<`` ``>``
``&`` are control characters: ``<!channel>`` pings a channel, ``<https://evil.example/login|Reset
your key>`` is a link whose target is hidden. Every value goes into the ``text`` as inline code
(:func:`code`): ``&``, ``<``, ``>`` as the entities Slack asks for, backquotes replaced (they would
end the code span), control characters escaped (:mod:`llmtap.safetext`) and cut to
:data:`MAX_VALUE` characters; inside code Slack neither formats nor links, and the webhook asks for
no unfurling. Consumers of the plain JSON get the values in ``labels`` and ``summary`` with control
characters escaped but no markup (:func:`plain`), as valid Unicode.
"""

from __future__ import annotations

from ..safetext import one_line

MAX_VALUE = 200
_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def plain(value: str) -> str:
    """A value for plain JSON consumers: one line, no control character, at most :data:`MAX_VALUE` characters."""
    v = one_line(value)
    return v if len(v) <= MAX_VALUE else v[: MAX_VALUE - 1] + "…"


def text(value: str) -> str:
    """llmtap's own words (a rule's title) for Slack's ``text``: only the markup characters escaped."""
    return one_line(value).translate(_ENTITIES)


def code(value: str) -> str:
    """A value inside Slack's ``text``: inline code that pings, links and formats nothing."""
    return "`" + plain(value).replace("`", "\u02cb").translate(_ENTITIES) + "`"
