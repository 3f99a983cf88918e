"""The tiny-policy builder: one build-spec format, one builder, for any environment's CPU policy.

An environment supplies a :class:`~.spec.TinySpec` (its corpus, reply mix, added tokens
and options such as refund's copy head); :func:`.build.build_policy` turns it into a plain
Llama folder. The built-in environments' policies ship built (``pytest_rlgate/policy/shipped/``);
:mod:`pytest_rlgate.policy.load` loads and verifies them and rebuilds on request. Nothing heavy is
imported until a build runs (torch, tokenizers, transformers).
"""
