"""What a model is offered of an agent's tools: `views` (a tool's schema within a token budget, by the edits of
`reductions`), `toolsearch` (the tools a run starts with, and the search that loads more), `index` and `query`
(the full-text index of a spec's operations and how a search request is read), `signals` (what multiplies the
index's candidates' BM25: the method asked for, what the path addresses, whose it is), `embeddings` (the hybrid ranking
with an embeddings endpoint), `fusion` (how the two rankings become one).
"""
