"""The environment contract: what a task supplies (prompts, cases, a score, markers, hacks) and
how a spec names one (``load_env``). Generic code takes an :class:`Env` from here and never
names a task; the tasks themselves live in :mod:`pytest_rlgate.envs`."""
