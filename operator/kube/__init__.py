"""The Kubernetes API as Podium reads and writes it, with no scheduling in it.

The REST client and its credentials, the Lease elector, quantities, typed views
of pods and nodes, what a pod requests (kube-scheduler's request model), label
selectors and node selector terms, PodDisruptionBudgets, and manifest
builders. Imports only the standard library and third-party packages.
"""
