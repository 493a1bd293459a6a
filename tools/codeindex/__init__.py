"""Code question answering: tree-sitter code units, BM25 + vector hybrid search, incremental index.

Entry points: `service.index_repo` / `service.reindex_changed` / `service.reconcile_all` (building),
`api.search_code` / `api.get_code_context` / `api.missing_citations` (tools and the answer check),
`githook.verify` / `githook.parse` (POST /hooks/git), `evaluate.evaluate` (the stdlib benchmark).
"""
