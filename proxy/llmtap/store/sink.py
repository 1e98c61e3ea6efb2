"""The store's :class:`~llmtap.pipeline.RecordSink`: record → ``otel_traces`` row (RowBinary) → spool → writer."""

from __future__ import annotations

from ..record import CallRecord
from .rows import encode_record
from .writer import StoreWriter


class StoreSink:
    def __init__(self, writer: StoreWriter, resource: dict[str, str] | None = None) -> None:
        self.writer = writer
        self.resource = resource or {}

    def emit(self, record: CallRecord) -> None:
        """On the recorder's thread: encodes the row and appends it to the spool (disk, never the store)."""
        self.writer.submit_encoded(encode_record(record, self.resource))

    def flush(self, timeout: float) -> bool:
        return self.writer.flush(timeout)

    def close(self) -> None:
        self.writer.close()
