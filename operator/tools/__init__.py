"""Offline and read-only tools: explain, simulate, report, replay, shadow report, policy tests.

They run the live scheduler's decision code against clusters read from the API
(read-only) or from files, and never import the runtime (the operator, its
handlers and its HTTP endpoints).
"""
