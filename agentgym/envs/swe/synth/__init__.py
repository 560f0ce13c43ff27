"""Synthesize validated SWE-v0 tasks from a local git repository: ``synthesize(repo, out)``.

See ``pipeline`` for the steps and ``docs/`` for the output format.
"""

from agentgym.envs.swe.synth.mutate import KINDS, Mutation, mutations
from agentgym.envs.swe.synth.pipeline import SynthResult, synthesize

__all__ = ["KINDS", "Mutation", "SynthResult", "mutations", "synthesize"]
