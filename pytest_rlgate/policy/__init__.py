"""Policies, the models that are sampled: loading a base (hub id, folder or a shipped tiny
policy, :mod:`.load`), LoRA adapters (:mod:`.lora`), seeded sampling into graded rows
(:mod:`.sampling`), and the tiny-policy builder (:mod:`.tiny`) with its built weights
(``shipped/``). torch and transformers load only when a model does."""
