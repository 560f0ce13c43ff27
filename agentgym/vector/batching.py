"""Batching as ``SyncVectorEnv`` does: actions split with Gymnasium's ``iterate``, observations
joined with its ``concatenate``.

Text envs' spaces (``Messages``, ``AssistantTurn``) and other custom spaces batch as tuples: a
list or tuple of one action per env in, a tuple of one observation per env out (the sub-envs' own
objects, not copies). Gymnasium's array spaces (``Box``, ``Discrete``, ``Tuple``, ``Dict``, ...)
batch as in ``SyncVectorEnv``: an ``AgentEnv`` with such spaces gets batched numpy actions in and
returns batched numpy observations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.error import CustomSpaceError
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Space, Tuple
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from agentgym.core.errors import ConfigError, ConfigTypeError
from agentgym.vector.checks import check_actions
from agentgym.vector.runner import Transition

__all__ = ["join_observations", "split_actions"]

_ARRAY_SPACES = (Box, Discrete, MultiBinary, MultiDiscrete, Tuple, Dict)


def split_actions(actions: Any, single_space: Space[Any], num_envs: int) -> list[Any]:
    """One action per env from a batch of actions, as ``SyncVectorEnv`` splits them."""
    if not isinstance(single_space, _ARRAY_SPACES):
        return list(check_actions(actions, num_envs))
    space = batch_space(single_space, num_envs)
    try:
        batch = list(iterate(space, actions))
    except (TypeError, KeyError, IndexError, CustomSpaceError) as error:
        raise ConfigTypeError(
            "actions",
            actions,
            f"is not a batch of {space} ({type(error).__name__}: {error})",
            "pass one action per env, shaped like action_space.sample()",
        ) from None
    except ValueError:  # the parts of a Tuple or Dict batch hold different numbers of actions
        batch = []
    if len(batch) != num_envs:
        raise ConfigError(
            "actions",
            actions,
            f"must hold num_envs={num_envs} actions",
            "pass one action per env, shaped like action_space.sample()",
        )
    return batch


def join_observations(space: Space[Any], ends: Sequence[Transition | None]) -> Any:
    """The batch of each env's latest observation. An env with none (never reset, or a failed
    call, whose observation is ``()``) shows ``()`` under custom spaces and zeros under array
    spaces, as ``SyncVectorEnv``'s empty buffer does."""
    if not isinstance(space, _ARRAY_SPACES):
        return tuple(() if t is None else t.observation for t in ends)
    blank = None
    items = []
    for t in ends:
        if t is None or (isinstance(t.observation, tuple) and not t.observation):
            if blank is None:
                blank = next(iterate(batch_space(space, 1), create_empty_array(space, 1, np.zeros)))
            items.append(blank)
        else:
            items.append(t.observation)
    return concatenate(space, items, create_empty_array(space, len(items), np.zeros))
