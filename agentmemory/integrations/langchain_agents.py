"""A LangChain agent middleware backed by a Thread
(``pip install "django-agentmemory[langchain]"``).

``ThreadMemoryMiddleware`` is an ``AgentMiddleware`` for ``langchain.agents.create_agent``.
It appends every message of the agent's run to the thread as it comes (the input, each
model reply with its tool calls, each tool result) and hands the model the thread's
recalled context in place of the run's message list: verbatim turns while they fit the
budget, a summary (a ``SystemMessage``, first) in place of the oldest once they are
folded. It takes the place of LangChain's ``SummarizationMiddleware``, which rewrites the
agent's state with a summary and drops the originals: here the state is left as
LangGraph keeps it, and the originals stay in the thread, behind their summary.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, NotRequired

from agentmemory.extras import require

# Without the extra, importing this module raises MissingExtraError naming it.
require("The LangChain agent middleware (agentmemory.integrations.langchain_agents)",
        "langchain_core", "langchain.agents.middleware")

from asgiref.sync import sync_to_async  # noqa: E402
from langchain.agents.middleware.types import (  # noqa: E402
    AgentMiddleware,
    AgentState,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AnyMessage, BaseMessage  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402

from agentmemory import services  # noqa: E402
from agentmemory import tools as memory  # noqa: E402
from agentmemory.exceptions import ContextDeclinedError  # noqa: E402
from agentmemory.integrations.langchain import recalled_messages, stored_message  # noqa: E402
from agentmemory.integrations.openai_shapes import PROMPT_CACHE_KEY, prompt_cache_key  # noqa: E402
from agentmemory.models import Thread  # noqa: E402

__all__ = ["STORED_KEY", "ThreadMemoryMiddleware", "ThreadMemoryState"]

#: The agent state's key that lists the ids of the state's messages already appended.
STORED_KEY: Final = "agentmemory_stored"


class ThreadMemoryState(AgentState[Any]):
    """The agent's state, and which of its messages the thread already holds (private:
    not in the agent's input or output)."""

    agentmemory_stored: NotRequired[Annotated[list[str], PrivateStateAttr]]


class ThreadMemoryMiddleware(AgentMiddleware[ThreadMemoryState, Any, Any]):
    """The agent's memory in ``thread``, the model's context recalled within ``budget_tokens``.

    Before each model call the state's messages the thread does not hold yet are
    appended (the run's input, then the results of the tools the model called), and
    after it the model's reply, with its tool calls: a tool call is always stored before
    its results. The model is handed ``services.recall(thread, budget_tokens,
    **recall_options)`` as LangChain messages in place of the state's messages; the
    agent's ``system_prompt`` still goes first, and is not stored.

    Invoke the agent with the new messages of the turn only (no checkpointer is
    needed: the thread is the memory). With a checkpointer, messages the state already
    held are not appended again (each message is recognised by its id). A turn that no
    longer fits the budget raises `ContextDeclinedError` rather than calling the model
    with no messages.

    Create the thread with its owner (``Thread.objects.create(owner=user)``): the owner
    reads its folded originals in the admin and the API without a grant, and the memory
    tools search all of the owner's conversations.

    ``memory_tools=True`` offers the model ``memory_search`` and ``memory_expand``
    (`agentmemory.tools`) on this thread, each result at most a quarter of the budget;
    their calls and results are stored as tool messages like any other.
    ``cache_key=True`` sends the thread's ``prompt_cache_key`` with every model call
    (OpenAI models; another provider may refuse the parameter), unless a
    ``prompt_cache_key`` is already in the request's ``model_settings``.
    """

    state_schema = ThreadMemoryState

    def __init__(
        self,
        thread: Thread,
        *,
        budget_tokens: int,
        memory_tools: bool = False,
        cache_key: bool = False,
        **recall_options: Any,
    ) -> None:
        super().__init__()
        self.thread = thread
        self.budget_tokens = budget_tokens
        self.cache_key = cache_key
        self.recall_options = recall_options
        # A quarter of the budget, as chat_turn gives: the turn's calls and results
        # must stay in its context.
        self.tools = (memory.langchain_tools(thread, max_tokens=budget_tokens // 4)
                      if memory_tools else [])

    @property
    def prompt_cache_key(self) -> str:
        """The thread's ``prompt_cache_key`` (`openai_shapes.prompt_cache_key`), the one
        ``chat_turn`` sends; sent with every model call when ``cache_key=True``."""
        return prompt_cache_key(self.thread)

    # ------------------------------------------------------------ appending

    def before_model(
        self, state: ThreadMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._append_new(state)

    def after_model(
        self, state: ThreadMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._append_new(state)

    async def abefore_model(
        self, state: ThreadMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await sync_to_async(self._append_new)(state)

    async def aafter_model(
        self, state: ThreadMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await sync_to_async(self._append_new)(state)

    def _append_new(self, state: ThreadMemoryState) -> dict[str, Any] | None:
        """Append the state's messages the thread does not hold yet, in one transaction,
        and record their ids in the state. (LangGraph gives every message in the state
        an id.)"""
        stored = list(state.get("agentmemory_stored") or [])
        known = set(stored)
        new: list[BaseMessage] = [m for m in state["messages"] if m.id not in known]
        if not new:
            return None
        services.append(self.thread, [stored_message(message) for message in new])
        return {STORED_KEY: [*stored, *(str(message.id) for message in new)]}

    # ------------------------------------------------------------ the model's context

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> ModelCallResult:
        response: ModelResponse[Any] = handler(self._recalled(request, self._context()))
        return response

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Any
    ) -> ModelCallResult:
        context = await sync_to_async(self._context)()
        response: ModelResponse[Any] = await handler(self._recalled(request, context))
        return response

    def _context(self) -> list[AnyMessage]:
        context = services.recall(self.thread, self.budget_tokens, **self.recall_options)
        if not context.messages:
            reason = context.budget_decline or context.omitted_reason or "empty"
            raise ContextDeclinedError(
                f"The recall of thread {self.thread.pk} left nothing to send the model "
                f"({reason}): the newest turn, with its tool calls and results, must fit "
                f"budget_tokens={self.budget_tokens} less RESERVE_TOKENS. Give the "
                "middleware a larger budget_tokens.", reason=reason)
        messages: list[Any] = recalled_messages(context)
        return messages

    def _recalled(self, request: ModelRequest[Any], context: list[AnyMessage]) -> Any:
        if not self.cache_key or PROMPT_CACHE_KEY in request.model_settings:
            return request.override(messages=context)
        settings = {**request.model_settings, PROMPT_CACHE_KEY: self.prompt_cache_key}
        return request.override(messages=context, model_settings=settings)
