"""Dynamic Resource Allocation: the structured allocator, its CEL environment, the plugin."""
