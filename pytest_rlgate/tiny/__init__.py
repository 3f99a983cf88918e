"""The embedded tiny refund policy: tokenizer, copy-head model, warm-start corpus and loop.

:func:`pytest_rlgate.policy.tiny_policy_dir` builds it once into the artifact cache; the
modules here are the recipe. Nothing is imported until a build runs (torch is heavy).
"""
