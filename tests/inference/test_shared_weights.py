"""An engine that shares the trainer's parameters decodes with the weights of the latest update,
also when the update changed them in place without moving their version counters (a fused
optimizer step does that): the push is what tells the engine, not the counters."""

from __future__ import annotations

import asyncio

import torch

from agentgym.inference import HFEngine, SamplingParams
from agentgym.models import load

from .test_hf_engine import teacher_forced


def test_a_push_of_shared_weights_changed_in_place_reaches_the_decode_step():
    model, tok = load(seed=0)
    prompt = list(range(5, 25))
    sampling = SamplingParams(temperature=1.0, max_tokens=6, seed=0, ignore_eos=True)

    async def go():
        engine = HFEngine(model, tok, seed=0)
        try:
            await engine.generate(prompt, sampling)  # the decode step derives its weights
            with torch.no_grad():
                generator = torch.Generator().manual_seed(1)
                for p in model.parameters():
                    # .data: the parameter's version counter stays where it was
                    p.data.add_(torch.randn(p.shape, generator=generator) * 0.05)
            await engine.update_weights(dict(model.state_dict()))
            assert engine.stats.weights_copied == 0  # shared: nothing to copy
            return await engine.generate(prompt, sampling), engine.stats.decode
        finally:
            await engine.close()

    completion, decode = asyncio.run(go())
    assert decode == "fused"  # the path that keeps derived (concatenated) weights
    expected = teacher_forced(model, prompt, completion, sampling)
    torch.testing.assert_close(torch.tensor(completion.logprobs), expected, rtol=0, atol=1e-4)
