"""``podium run``: the operator wiring, kopf's settings, the HTTP endpoints, logs and GC tuning.

Nothing imports this package but the CLI: the tools never do.
"""
