"""The API's views, one module per resource: each parses input, calls a service and
shapes the output. Nothing else lives here.

``base`` holds what they share (the JSON parser, pagination, content negotiation that
leaves ``?format=`` to a view, `MemoryAPIView` and the error mapping); ``threads``,
``entries``, ``recall`` (recall and fold), ``summaries``, ``spans`` (compaction, folded
spans and their lookup), ``usage`` (the ledger, receipts and savings) and ``search``
serve one resource each; ``schema`` serves the OpenAPI document and answers unknown
paths.
"""
