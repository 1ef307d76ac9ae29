"""A PS message on the wire: a fixed header, then its keys and its values.

The same layout as the real van's (:mod:`backends.parameter_server.message`): a header of
:data:`HEADER_FIELDS` int64 fields, then the keys (8 B each, unless they form one range) and the
values (4 B each) as separate point-to-point messages (:func:`message_nbytes`). The tags are the
simulated van's: a request, its response, and a receiver's "receive posted" signal.
"""

from __future__ import annotations

HEADER_FIELDS = 14
"""int64 fields of a message header (``backends.parameter_server.message.Meta``)."""
HEADER_BYTES = 8 * HEADER_FIELDS


def message_nbytes(nkeys: int, nvals: int, keys_range: bool) -> list[int]:
    """The point-to-point messages one PS message is sent as: header, keys, values (bytes)."""
    parts = [HEADER_BYTES]
    if nkeys and not keys_range:
        parts.append(8 * nkeys)
    if nvals:
        parts.append(4 * nvals)
    return parts


REQUEST_TAG, RESPONSE_TAG, READY_TAG = 31, 32, 33
