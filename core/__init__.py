"""The kernel: the domain's primitives every layer shares, importing no app and nothing of
HTTP, the console or the infrastructure (exceptions, actors, choices, limits, timestamps,
storable text, digests, receipts and their keys, payload JSON, context-file formats)."""
