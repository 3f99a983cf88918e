"""Watched runs: the gate looked at again and again, checkpoint by checkpoint, over one error budget.

Modules: ``looks`` (``SequentialGate``: each checkpoint against step 0, the run's family level
spent across the looks), ``select`` (the checkpoint to ship, and its confirmation on a fresh
sample), ``frame`` (``LookFrame``: what every callback that watches a run from inside does at a
look, sampled once per look), ``callback`` (``GateCallback``, the gate inside a user's trainer)
and ``folder`` (``rlgate watch``: the ``checkpoint-N`` folders a job writes). It sits above
``gate/`` (one comparison, and the statistics the looks spend) and ``policy/`` (the sampler), and
below ``train/`` (whose ``HackMonitor`` looks through the same frame). Importing this package is
cheap; numpy and transformers load with the modules that need them.
"""
