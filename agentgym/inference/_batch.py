"""The running batch of ``HFEngine``: left-padded rows that share one KV cache.

Rows join between decode steps (their prompts are prefilled together, then their cache is
left-padded to the batch's length and concatenated) and leave as soon as they finish (their cache
rows are dropped and fully padded columns trimmed). Each row's position ids count only its real
tokens, so padding never shifts a row's positions; padded key columns are masked out.

Everything here runs on the engine's worker thread, never on the event loop.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from agentgym.core.errors import Error
from agentgym.inference._fused import FusedDecoder
from agentgym.inference._prefix import KV, PrefixCache
from agentgym.inference._static import StaticDecoder
from agentgym.inference.base import Completion, FinishReason, SamplingParams
from agentgym.inference.kvcache import cache_keyword
from agentgym.inference.sampling import choice_next_tokens, sample_rows, sampling_logprobs

__all__ = ["MIN_SHARED_PREFIX", "Row", "RunningBatch"]

MIN_SHARED_PREFIX = 16
"""Distinct prompts joining together whose common prefix is at least this many tokens prefill it
once (a second forward costs more than a shorter shared prefix saves)."""


@dataclass(eq=False)
class Row:
    """One request being decoded."""

    prompt: list[int]
    sampling: SamplingParams
    stop_ids: frozenset[int]
    generator: torch.Generator | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: FinishReason | None = None
    stop: str | int | None = None


class RunningBatch:
    """Rows being decoded together, their KV cache ``[B, heads, T, dim]`` and mask ``[B, T]``."""

    def __init__(
        self,
        model: torch.nn.Module,
        decode: Callable[[list[int], bool], str],
        pad_id: int,
        max_positions: int | None,
        prefix_cache: PrefixCache | None = None,
        fused: bool = True,
        static: StaticDecoder | None = None,
    ) -> None:
        self.model = model
        self.fused = FusedDecoder.build(model) if fused else None
        self.static = static
        self.prefix_cache = prefix_cache
        self.decode = decode
        self.pad_id = pad_id
        self.max_positions = max_positions
        self.rows: list[Row] = []
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)
        self.positions = torch.zeros(0, dtype=torch.long)  # [B] real tokens in the cache
        self.prefilled = 0  # prompt tokens run through the model
        self._keep_arg = "logits_to_keep" in inspect.signature(model.forward).parameters
        self._cache_arg = cache_keyword(model)

    @property
    def decode_path(self) -> str:
        if self.static is not None:
            return self.static.mode
        return "transformers" if self.fused is None else "fused"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def weights_changed(self) -> None:
        """The model's weights were updated (in place or by a copy): drop what was derived."""
        if self.fused is not None:
            self.fused.invalidate()

    def step(self, joining: list[Row], version: int) -> list[tuple[Row, Completion]]:
        """Prefill ``joining``, decode one token for every row, and return the finished rows."""
        if self.static is not None:
            self.static.version = version
        done = self._retire()  # rows aborted since the last step
        logits: list[torch.Tensor] = []
        if self.rows:
            logits.append(self._decode())
        fresh, resumed = self._split(joining)
        if fresh:
            logits.append(self._prefill(fresh))
        if resumed:
            logits.append(self._prefill_cached(resumed))
        if logits:
            self._sample(torch.cat(logits))
        done += self._retire()
        return [(row, self.completion(row, version)) for row in done]

    def clear(self) -> list[Row]:
        rows, self.rows, self.cache = self.rows, [], None
        self.mask = torch.zeros(0, 0, dtype=torch.long)
        self.positions = torch.zeros(0, dtype=torch.long)
        return rows

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: DynamicCache
    ) -> torch.Tensor:
        kwargs: dict[str, object] = {self._cache_arg: cache}
        if self._keep_arg:
            kwargs["logits_to_keep"] = 1
        device = self.device
        out = self.model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=pos.to(device),
            use_cache=True,
            **kwargs,
        )
        return out.logits[:, -1].float()  # [B, V], left on the model's device

    def _decode(self) -> torch.Tensor:
        assert self.cache is not None
        ids = torch.tensor([[row.tokens[-1]] for row in self.rows])
        self.mask = torch.cat([self.mask, torch.ones(len(self.rows), 1, dtype=torch.long)], dim=1)
        positions = self.positions[:, None]
        decoder = self.static or self.fused
        if decoder is None:
            logits = self._forward(ids, self.mask, positions, self.cache)
        else:
            device = self.device
            step = decoder(ids.to(device), self.mask.to(device), positions.to(device), self.cache)
            logits = step.float()
        self.positions = self.positions + 1
        return logits

    def _prefill(self, joining: list[Row]) -> torch.Tensor:
        """Prefill each distinct prompt once (``n`` samples of a prompt arrive together), then
        give every row a copy of its prompt's cache. Distinct prompts that start alike (one
        system prompt, one tool schema) run their common prefix once, then only the rest."""
        distinct: dict[tuple[int, ...], int] = {}
        owner = [distinct.setdefault(tuple(row.prompt), len(distinct)) for row in joining]
        prompts = list(distinct)
        shared = _common_prefix(prompts)
        if shared >= MIN_SHARED_PREFIX:
            cache = DynamicCache()
            prefix = torch.tensor([prompts[0][:shared]])
            positions = torch.arange(shared)[None]
            self._forward(prefix, torch.ones_like(prefix), positions, cache)
            kv = _kv(cache)
            if self.prefix_cache is not None:
                # kept for prompts that start alike but join later, one or a few at a time (a
                # server's requests arrive one HTTP request at a time; an async collector's as
                # its episodes step): they then prefill only their own tokens
                self.prefix_cache.put(prompts[0][:shared], kv, reusable=True)
            cache, mask, logits = self._extend([(list(p), shared, kv) for p in prompts])
            self.prefilled += shared + sum(len(prompt) - shared for prompt in prompts)
        else:
            width = max(len(prompt) for prompt in prompts)
            ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros(len(prompts), width, dtype=torch.long)
            for i, prompt in enumerate(prompts):
                ids[i, width - len(prompt) :] = torch.tensor(prompt)
                mask[i, width - len(prompt) :] = 1
            pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
            cache = DynamicCache()
            logits = self._forward(ids, mask, pos, cache)
            self.prefilled += sum(len(prompt) for prompt in prompts)
        if len(prompts) < len(joining):
            index = torch.tensor(owner)
            cache.batch_select_indices(index.to(self.device))
            logits, mask = logits[index.to(logits.device)], mask[index]
        self._join(joining, cache, mask)
        return logits

    def _split(self, joining: list[Row]) -> tuple[list[Row], list[tuple[Row, int, KV]]]:
        """Rows to prefill from scratch, and rows whose prompt extends a kept cache."""
        if self.prefix_cache is None:
            return joining, []
        fresh, resumed = [], []
        for row in joining:
            found = self.prefix_cache.take(row.prompt)
            if found is None:
                fresh.append(row)
            else:
                resumed.append((row, *found))
        return fresh, resumed

    def _prefill_cached(self, resumed: list[tuple[Row, int, KV]]) -> torch.Tensor:
        """Prefill only the new tokens of rows whose prompt starts with a kept cache."""
        cache, mask, logits = self._extend([(row.prompt, n, kv) for row, n, kv in resumed])
        self.prefilled += sum(len(row.prompt) - n for row, n, _ in resumed)
        self._join([row for row, _, _ in resumed], cache, mask)
        return logits

    def _extend(
        self, prompts: list[tuple[list[int], int, KV]]
    ) -> tuple[DynamicCache, torch.Tensor, torch.Tensor]:
        """Run the rest of each prompt on the cache of its first ``n`` tokens: the batch's cache,
        its mask and the last position's logits.

        Columns: ``[pad | kept prefix][pad | new tokens]``, both parts left-padded to the widest
        row; padding columns are masked and positions count real tokens only.
        """
        kept = max(n for _, n, _ in prompts)
        width = max(len(prompt) - n for prompt, n, _ in prompts)
        rows = len(prompts)
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros(rows, kept + width, dtype=torch.long)
        pos = torch.zeros(rows, width, dtype=torch.long)
        for i, (prompt, n, _) in enumerate(prompts):
            new = prompt[n:]
            ids[i, width - len(new) :] = torch.tensor(new)
            mask[i, kept - n : kept] = 1
            mask[i, kept + width - len(new) :] = 1
            pos[i, width - len(new) :] = torch.arange(n, n + len(new))
        device = self.device
        layers = [
            (
                torch.cat([_pad_left(kv[layer][0], kept - n) for _, n, kv in prompts]).to(device),
                torch.cat([_pad_left(kv[layer][1], kept - n) for _, n, kv in prompts]).to(device),
            )
            for layer in range(len(prompts[0][2]))
        ]
        cache = DynamicCache(ddp_cache_data=layers)
        logits = self._forward(ids, mask, pos, cache)
        return cache, mask, logits

    def _keep_prefixes(self, done: list[int]) -> None:
        """Offer the caches of rows that finished normally to the prefix cache: the whole row
        (for the turn that continues it) and its prompt (for prompts that repeat it)."""
        if self.prefix_cache is None or self.cache is None:
            return
        kv = _kv(self.cache)
        for i in done:
            row = self.rows[i]
            if row.finish == "abort":
                continue
            cached = row.prompt + row.tokens[:-1]
            columns = self.mask[i].nonzero()[:, 0].to(self.device)
            if len(columns) != len(cached):
                continue
            row_kv = [(k[i : i + 1, :, columns], v[i : i + 1, :, columns]) for k, v in kv]
            self.prefix_cache.put(cached, row_kv)
            n = len(row.prompt) - 1  # the prompt alone, for prompts that repeat it
            if 0 < n < len(cached):
                prompt_kv = [(k[..., :n, :], v[..., :n, :]) for k, v in row_kv]
                self.prefix_cache.put(row.prompt[:n], prompt_kv, reusable=True)

    def _join(self, joining: list[Row], cache: DynamicCache, mask: torch.Tensor) -> None:
        lengths = torch.tensor([len(row.prompt) for row in joining])
        if not self.rows:
            self.rows, self.cache, self.mask, self.positions = list(joining), cache, mask, lengths
            return
        assert self.cache is not None
        width = max(self.mask.shape[1], mask.shape[1])
        old_kv, old_mask = _left_pad(self.cache, self.mask, width)
        new_kv, new_mask = _left_pad(cache, mask, width)
        merged = [
            (torch.cat([ka, kb]), torch.cat([va, vb]))
            for (ka, va), (kb, vb) in zip(old_kv, new_kv, strict=True)
        ]
        self.cache = DynamicCache(ddp_cache_data=merged)
        self.mask = torch.cat([old_mask, new_mask])
        self.positions = torch.cat([self.positions, lengths])
        self.rows += joining

    def _sample(self, logits: torch.Tensor) -> None:
        params = [row.sampling for row in self.rows]
        if any(p.choices for p in params):
            logits = self._constrain(logits)
        settings = {(p.temperature, p.top_k, p.top_p) for p in params}
        if len(settings) == 1:  # one setting for the batch: numbers, not per-row tensors
            temperature, top_k, top_p = settings.pop()
            logprobs = sampling_logprobs(logits, temperature, top_k, top_p)
        else:
            logprobs = sampling_logprobs(
                logits,
                temperature=torch.tensor([p.temperature for p in params]),
                top_k=torch.tensor([p.top_k for p in params]),
                top_p=torch.tensor([p.top_p for p in params]),
            )
        tokens = sample_rows(logprobs, [p.greedy for p in params], [r.generator for r in self.rows])
        chosen = logprobs.gather(1, tokens[:, None])[:, 0]
        # The only copy from the device per step: B token ids and their logprobs (ids are
        # exact in float64), never the [B, V] logits.
        picked = torch.stack([tokens.double(), chosen.double()]).cpu()
        ids, values = picked[0].long().tolist(), picked[1].tolist()
        for row, token, logprob, used in zip(
            self.rows, ids, values, self.positions.tolist(), strict=True
        ):
            row.tokens.append(token)
            row.logprobs.append(logprob)
            self._check_finish(row, used + 1)

    def _constrain(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` ``[B, V]`` with -inf for every token that continues none of a row's
        choices (rows without choices unchanged)."""
        banned = torch.zeros_like(logits, dtype=torch.bool)
        for i, row in enumerate(self.rows):
            if row.sampling.choices:
                banned[i] = True
                banned[i, choice_next_tokens(row.sampling.choices, row.tokens)] = False
        return logits.masked_fill(banned, float("-inf"))

    def _check_finish(self, row: Row, context: int) -> None:
        token = row.tokens[-1]
        if row.sampling.choices:
            # Only a complete choice ends a constrained row early: no stop id or string cuts it.
            if tuple(row.tokens) in row.sampling.choices:
                row.finish, row.stop = "stop", token
        elif token in row.stop_ids:
            row.finish, row.stop = "stop", token
        elif row.sampling.stop and (matched := self._stop_string(row)) is not None:
            row.finish, row.stop = "stop", matched
        if row.finish is None and (
            len(row.tokens) >= row.sampling.max_tokens
            or (self.max_positions is not None and context >= self.max_positions)
        ):
            row.finish = "length"

    def _stop_string(self, row: Row) -> str | None:
        # A stop string of n characters spans at most 4n byte-level tokens; decode only that tail.
        window = 4 * max(len(s) for s in row.sampling.stop) + 2
        tail = self.decode(row.tokens[-window:], False)
        return next((s for s in row.sampling.stop if s in tail), None)

    def _retire(self) -> list[Row]:
        keep = [i for i, row in enumerate(self.rows) if row.finish is None]
        if len(keep) == len(self.rows):
            return []
        self._keep_prefixes([i for i, row in enumerate(self.rows) if row.finish is not None])
        done = [row for row in self.rows if row.finish is not None]
        if not keep:
            self.clear()
            return done
        assert self.cache is not None
        index = torch.tensor(keep)
        self.cache.batch_select_indices(index.to(self.device))
        self.rows = [self.rows[i] for i in keep]
        self.mask, self.positions = self.mask[index], self.positions[index]
        self._trim()
        return done

    def _trim(self) -> None:
        """Drop leading cache columns that are padding in every row."""
        first = int(self.mask.any(dim=0).long().argmax())
        if first == 0:
            return
        assert self.cache is not None
        kv = [(k[..., first:, :], v[..., first:, :]) for k, v in _kv(self.cache)]
        self.cache = DynamicCache(ddp_cache_data=kv)
        self.mask = self.mask[:, first:]

    def completion(self, row: Row, version: int) -> Completion:
        text = self.decode(row.tokens, True)
        if isinstance(row.stop, str) and (cut := text.find(row.stop)) >= 0:
            text = text[:cut]
        return Completion(
            token_ids=list(row.tokens),
            logprobs=list(row.logprobs),
            finish_reason=row.finish or "abort",
            text=text,
            stop=row.stop,
            weight_version=version,
        )


def _left_pad(
    cache: DynamicCache, mask: torch.Tensor, width: int
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """The cache's per-layer ``(keys, values)`` and the mask, left-padded to ``width`` columns."""
    extra = width - mask.shape[1]
    kv = _kv(cache)
    if extra == 0:
        return kv, mask
    pad = (0, 0, extra, 0)  # dim -2 (sequence), on the left
    padded = [(torch.nn.functional.pad(k, pad), torch.nn.functional.pad(v, pad)) for k, v in kv]
    return padded, torch.nn.functional.pad(mask, (extra, 0))


def _common_prefix(prompts: list[tuple[int, ...]]) -> int:
    """How many leading tokens all of ``prompts`` (two or more) share, leaving each at least one
    token of its own to prefill (its logits are the next token's); 0 for a single prompt."""
    if len(prompts) < 2:
        return 0
    first, limit = prompts[0], min(len(prompt) for prompt in prompts) - 1
    shared = 0
    while shared < limit and all(prompt[shared] == first[shared] for prompt in prompts):
        shared += 1
    return shared


def _pad_left(tensor: torch.Tensor, extra: int) -> torch.Tensor:
    """``[1, heads, T, dim]`` with ``extra`` zero columns before the sequence."""
    return torch.nn.functional.pad(tensor, (0, 0, extra, 0)) if extra else tensor


def _kv(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer ``(keys, values)`` ``[B, heads, T, dim]`` of an attention KV cache."""
    kv = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if not isinstance(keys, torch.Tensor) or not isinstance(values, torch.Tensor):
            raise Error(
                f"HFEngine batches attention KV caches only; this model's cache has a "
                f"{type(layer).__name__} layer. Fix: serve it with SGLangEngine or OpenAIEngine."
            )
        kv.append((keys, values))
    return kv
