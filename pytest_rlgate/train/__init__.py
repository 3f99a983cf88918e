"""Training: GRPO (and DPO) with TRL + PEFT LoRA into run folders, watched by HackMonitor.

A run watched from outside (``GateCallback``, ``rlgate watch``) is :mod:`pytest_rlgate.watch`'s.

Modules: ``config`` (every knob with its default and reason), ``reward`` (any environment's
score as TRL's reward), ``grpo`` (the GRPO run), ``dpo`` and ``pairs`` (DPO rounds),
``monitor`` (``HackMonitor``), ``run`` (the run folder), ``pipeline`` (steps every method
shares), ``adapters`` (load, check, merge), ``cached`` (train once per configuration),
``methods`` (method registry), ``evaluate`` (re-sample a finished run). Importing this
package is cheap; torch, transformers and TRL load when a function needs them.
"""
