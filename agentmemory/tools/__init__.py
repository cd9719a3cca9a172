"""Memory tools: the model asks for what was folded (law 16).

Two tools, defined once (`TOOLS`) and handed out per framework:

* ``memory_search``: the words and "quoted phrases" of what was said, searched in the
  originals of the thread's owner (or of the thread alone when it has no owner);
  each hit says where its message is now, verbatim or under which summary;
* ``memory_expand``: the originals behind a summary, by the handle its label shows,
  a page at a time within a token budget; nested summaries open one level at a time.

`chat_tools` and `response_tools` give the Chat Completions and Responses function
tools (strict JSON Schemas); `run` executes one call and returns text, never raising
for a bad call: the error is text the model can act on. `agents_tools` and
`langchain_tools` bind them to a thread for the Agents SDK and LangChain.

What a tool returns is data from the conversation, not instructions: it is framed as
retrieved memory, every field of it through `agentmemory.transcript.defuse` (no
invisible characters, no line of its own), and bounded in tokens. Stored as a tool
message by the agent loop, it is never indexed again (`search.index.MEMORY_TOOL_NAMES`).

Two modules: `definitions` (the tools, their shapes per API, and `run`) and
`frameworks` (the Agents SDK and LangChain bindings). Every name is importable from here.
"""

from __future__ import annotations

from agentmemory.tools.definitions import (
    DEFAULT_HITS,
    MAX_HITS,
    MEMORY_EXPAND,
    MEMORY_SEARCH,
    MEMORY_TOOL_NAMES_OFFERED,
    MIN_RESULT_TOKENS,
    RESULT_TOKENS,
    TOOLS,
    MemoryTool,
    ToolArgumentError,
    chat_tools,
    response_tools,
    run,
)
from agentmemory.tools.frameworks import agents_tools, langchain_tools

__all__ = [
    "DEFAULT_HITS",
    "MAX_HITS",
    "MEMORY_EXPAND",
    "MEMORY_SEARCH",
    "MEMORY_TOOL_NAMES_OFFERED",
    "MIN_RESULT_TOKENS",
    "RESULT_TOKENS",
    "TOOLS",
    "MemoryTool",
    "ToolArgumentError",
    "agents_tools",
    "chat_tools",
    "langchain_tools",
    "response_tools",
    "run",
]
