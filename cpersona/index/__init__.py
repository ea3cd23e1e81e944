"""The resident vector index: stored vectors of the active model kept in memory as numpy
matrices, so a vector search is one matrix–vector product, not a scan of BLOBs."""
