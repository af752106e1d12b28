"""The running scheduler: the queue, the scheduling loop, binding, preemption and shadows.

Everything here acts on a live cluster through ``podium.kube.client.KubeClient``: it
pops pods from the queue, runs the framework's cycle, assumes the choice in
the cache, and binds (volumes first), preempts or reports. May import every
layer below it: policy, algorithms, framework, state and kube.
"""
