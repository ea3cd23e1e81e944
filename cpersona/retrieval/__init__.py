"""The recall pipeline, one module per stage:

retrievers → fusion → scoring (penalties) → gate → (limit, reverse, response) in pipeline.
"""
