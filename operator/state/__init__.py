"""The cluster as the scheduler holds it: the cache, its columnar snapshot, and the object stores.

The cache keeps node usage (bound and assumed pods); the snapshot is the
generation-stamped, column-per-resource copy one scheduling cycle reads; the
volume and selector stores keep the storage objects and the workload selectors
the plugins consult. May import ``podium.kube`` only.
"""
