"""The scheduling framework: the plugin contract, the registry, profiles and the cycle.

``plugin`` is what a filter or score implements; ``registry`` holds them by
name; ``profile`` is one schedulerName's plugins and knobs; ``cycle`` is one
decision (PreFilter, Filter, Score, select), ``preemption`` the PostFilter dry
run, and ``decision`` the record each attempt logs. Pure: no API calls.
May import ``podium.state`` and ``podium.kube``.
"""
