"""The scheduling framework: the plugin contract, the registry, profiles and the cycle.

``plugin`` is what a filter or score implements; ``registry`` holds them by
name; ``profile`` is one schedulerName's plugins and knobs; ``cycle`` is one
decision (PreFilter, Filter, Score, select), ``preemption`` DefaultPreemption's
decision (the plugin itself is ``podium.algorithms.default_preemption``), and
``decision`` the record each attempt logs. Pure: no API calls.
May import ``podium.state``, ``podium.kube`` and ``podium.metrics``.
"""
