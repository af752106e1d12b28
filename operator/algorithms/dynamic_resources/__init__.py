"""Dynamic resource allocation: the structured-parameters allocator and its CEL environment."""
