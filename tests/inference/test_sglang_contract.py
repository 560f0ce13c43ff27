"""``SGLangEngine`` reads every answer recorded from SGLang (``tests/fixtures/sglang/``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from agentgym.error import InfraError
from agentgym.inference import SamplingParams, SGLangEngine
from agentgym.inference import sglang_api as api

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang"


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_every_fixture_names_its_source_and_status():
    files = sorted(FIXTURES.glob("*.json"))
    assert len(files) == 14
    for file in files:
        data = json.loads(file.read_text())
        assert set(data) == {"source", "status", "body"}, file.name
        assert len(data["source"]) > 40, file.name
        assert data["status"] in (200, 400), file.name


def _engine(answers: dict[str, dict]) -> tuple[SGLangEngine, list[str]]:
    """A client whose server answers each path with the recorded answer named for it."""
    paths: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        answer = answers.get(request.url.path)
        if answer is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(answer["status"], json=answer["body"])

    return SGLangEngine("http://sglang:30000", transport=httpx.MockTransport(handle)), paths


def _generate(name: str):
    async def run():
        engine, _ = _engine({"/generate": recorded(name)})
        try:
            return await engine.generate([1, 2, 3], SamplingParams(max_tokens=8))
        finally:
            await engine.close()

    return asyncio.run(run())


@pytest.mark.parametrize("name", ["generate_final", "generate_stream_chunk"])
def test_generate_answers_give_ids_logprobs_and_finish(name):
    body = recorded(name)["body"]
    out = _generate(name)
    assert out.token_ids == body["output_ids"]
    assert out.logprobs == [t[0] for t in body["meta_info"]["output_token_logprobs"]]
    assert out.logprob_mode == "temperature"  # SGLang's, when the server does not say
    assert out.weight_version == 0  # "default": the client's own count
    assert out.text == body["text"]
    assert out.info["meta_info"]["prompt_tokens"] == body["meta_info"]["prompt_tokens"]
    if name == "generate_final":
        assert (out.finish_reason, out.stop) == ("stop", 151645)
    else:  # a streamed chunk has no finish reason yet: never trained on as a finished turn
        assert out.finish_reason == "abort"


def test_an_answer_without_output_ids_takes_the_ids_of_its_logprobs():
    out = _generate("generate_text_prompt")
    assert out.token_ids == [12095, 13, 1084, 374, 7407, 304]
    assert out.logprobs[0] == pytest.approx(-0.73046875)
    assert out.finish_reason == "length"


def test_batch_answers_parse_one_by_one_with_the_server_version():
    answers = recorded("generate_batch")["body"]
    outs = [api.parse_generate_response(answer, 0) for answer in answers]
    assert [o.token_ids for o in outs] == [[16, 13], [12095]]
    assert [(o.finish_reason, o.stop) for o in outs] == [("stop", "\n"), ("length", None)]
    assert [o.weight_version for o in outs] == [7, 7]  # the server's numbered version wins


def test_a_rejected_generate_is_an_infra_error_with_the_servers_message():
    async def run():
        engine, _ = _engine({"/generate": recorded("generate_error")})
        try:
            with pytest.raises(InfraError, match="exceeds the vocabulary"):
                await engine.generate([1], SamplingParams())
        finally:
            await engine.close()

    asyncio.run(run())


def test_update_succeeds_on_the_recorded_success_and_fails_on_the_failure(tmp_path):
    ok = {
        "/pause_generation": recorded("pause_generation"),
        "/update_weights_from_disk": recorded("update_weights_from_disk_success"),
        "/flush_cache": {"status": 200, "body": None},
        "/continue_generation": recorded("continue_generation"),
    }
    failing = {**ok, "/update_weights_from_disk": recorded("update_weights_from_disk_failure")}

    async def run():
        engine, paths = _engine(ok)
        await engine.update_weights(tmp_path)
        assert engine.weight_version == 1
        refused, refused_paths = _engine(failing)
        with pytest.raises(InfraError, match="Failed to get weights iterator"):
            await refused.update_weights(tmp_path)
        assert refused.weight_version == 0
        await asyncio.gather(engine.close(), refused.close())
        return paths, refused_paths

    paths, refused_paths = asyncio.run(run())
    expected = [
        "/pause_generation",
        "/update_weights_from_disk",
        "/flush_cache",
        "/continue_generation",
    ]
    assert paths == expected
    assert refused_paths == [expected[0], expected[1], expected[3]]  # generation resumes


def test_model_info_and_versions():
    info = recorded("get_model_info")["body"]
    ours = api.model_info_response(model_path="m", tokenizer_path="m", weight_version="0")
    assert set(ours) == set(info)
    assert api.version_number(info["weight_version"]) is None

    async def server_version():
        engine, _ = _engine({"/get_model_info": recorded("get_model_info")})
        try:
            return await engine.server_weight_version()
        finally:
            await engine.close()

    assert asyncio.run(server_version()) is None  # "default": SGLang before any named update
    assert [api.version_number(v) for v in ("0", "12", 3, True, "v2")] == [0, 12, 3, None, None]


def test_sampling_params_round_trip():
    sampling = SamplingParams(
        temperature=0.7, top_p=0.9, top_k=20, max_tokens=3, stop=["\n"], stop_token_ids=[5], seed=5
    )
    assert api.parse_sampling_params(api.sampling_params(sampling)) == sampling
    assert api.parse_sampling_params({}) == SamplingParams(max_tokens=128)  # SGLang's defaults
    with pytest.raises(ValueError, match="frequency_penalty"):
        api.parse_sampling_params({"frequency_penalty": 0.5})
