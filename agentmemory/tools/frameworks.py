"""The memory tools bound to a thread for agent frameworks, each an optional extra.

`agents_tools` gives Agents SDK ``FunctionTool``s (the ``agents`` extra) and
`langchain_tools` LangChain ``StructuredTool``s (the ``langchain`` extra): the same
definitions (`agentmemory.tools.definitions.TOOLS`), each call executed by `run`.
"""

from __future__ import annotations

from typing import Any

from agentmemory.models import Thread
from agentmemory.tools.definitions import RESULT_TOKENS, TOOLS, run


def agents_tools(thread: Thread) -> list[Any]:
    """The tools as Agents SDK ``FunctionTool``s bound to ``thread`` (the ``agents``
    extra); each runs `run` through ``sync_to_async``, inside the SDK's event loop."""
    from asgiref.sync import sync_to_async

    from agentmemory.extras import require

    agents = require("The Agents SDK memory tools (agentmemory.tools.agents_tools)", "agents")

    def bound(name: str) -> Any:
        async def invoke(context: Any, arguments: str) -> str:
            del context
            return await sync_to_async(run, thread_sensitive=True)(thread, name, arguments)

        return invoke

    return [
        agents.FunctionTool(name=t.name, description=t.description,
                            params_json_schema=t.parameters, on_invoke_tool=bound(t.name),
                            strict_json_schema=True)
        for t in TOOLS
    ]


def langchain_tools(thread: Thread, *, max_tokens: int = RESULT_TOKENS) -> list[Any]:
    """The tools as LangChain ``StructuredTool``s bound to ``thread`` (the ``langchain``
    extra), with the same JSON Schemas; sync and async. Each result is at most
    ``max_tokens`` (`run`)."""
    from asgiref.sync import sync_to_async

    from agentmemory.extras import require

    tools = require("The LangChain memory tools (agentmemory.tools.langchain_tools)",
                    "langchain_core.tools")

    def bound(name: str) -> tuple[Any, Any]:
        def call(**arguments: Any) -> str:
            return run(thread, name, arguments, max_tokens=max_tokens)

        async def acall(**arguments: Any) -> str:
            return await sync_to_async(run, thread_sensitive=True)(
                thread, name, arguments, max_tokens=max_tokens)

        return call, acall

    out = []
    for t in TOOLS:
        call, acall = bound(t.name)
        out.append(tools.StructuredTool.from_function(
            func=call, coroutine=acall, name=t.name, description=t.description,
            args_schema=t.parameters,
        ))
    return out
