"""Message and episode types, spaces, the ``AgentEnv`` base and the multi-agent env contract
(``MultiAgentEnv``), tools and tool-call parsing, errors; ``agentgym.core.reaper`` (not imported
here) kills child process groups with their parent."""

from agentgym.core.aio import deadline, run_sync
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.core.parsing import (
    MalformedCall,
    ParsedAction,
    ParsedCall,
    call_format,
    get_parser,
    parse_action,
    parser_names,
    register_parser,
)
from agentgym.core.spaces import AssistantTurn, Messages, is_valid_message
from agentgym.core.tools import Tool, ToolCallFailed, tool
from agentgym.core.types import (
    Action,
    Episode,
    Message,
    Observation,
    ToolCall,
    Turn,
    action_text,
    as_assistant_message,
    assistant,
    is_turn,
    message_text,
    system,
    tool_call,
    tool_message,
    user,
)

__all__ = [
    "Action",
    "AgentEnv",
    "AssistantTurn",
    "Episode",
    "MalformedCall",
    "Message",
    "Messages",
    "MultiAgentEnv",
    "Observation",
    "ParsedAction",
    "ParsedCall",
    "StepResult",
    "Tool",
    "ToolCall",
    "ToolCallFailed",
    "Turn",
    "action_text",
    "as_assistant_message",
    "assistant",
    "call_format",
    "deadline",
    "get_parser",
    "is_turn",
    "is_valid_message",
    "message_text",
    "parse_action",
    "parser_names",
    "register_parser",
    "run_sync",
    "system",
    "tool",
    "tool_call",
    "tool_message",
    "user",
]
