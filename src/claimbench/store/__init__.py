"""Evidence on disk: the record model and its schema versions, writing, the index, provenance and the
verified-record cache. No heavy imports."""
