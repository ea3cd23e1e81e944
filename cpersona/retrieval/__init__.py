"""The recall pipeline: a frozen plan (plan.py), the channels read through one injected fetcher
(fetch.py), then stages that each return a value — fused and ranked (ranking.py), gated and cut
to the limit (pipeline.py) — over one module per rule (retrievers, lexical, fusion, scoring,
neighbours, alternatives, confidence, gate, …)."""
