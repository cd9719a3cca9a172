"""The installed wheel works in a new project (run by scripts/wheel_smoke.sh).

Every step asserts; any failure exits non-zero with a traceback.
"""

import os
import sys
from pathlib import Path

os.environ["DJANGO_SETTINGS_MODULE"] = "smoke_settings"

import django  # noqa: E402

django.setup()

import agentmemory  # noqa: E402

installed = Path(agentmemory.__file__).resolve()
assert installed.is_relative_to(Path(sys.prefix).resolve()), f"not the wheel: {installed}"

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from agentmemory import services  # noqa: E402
from agentmemory.models import Thread  # noqa: E402
from agentmemory.summarizers import load_summarizer  # noqa: E402

call_command("migrate", verbosity=0)
call_command("check", fail_level="WARNING")

user = get_user_model().objects.create_superuser("ada", "ada@example.com", "smoke-pass")
thread = Thread.objects.create(owner=user, client_key="support-42", title="Support")
services.append(thread, [
    {"role": "user", "content": "Where is my order NW-48217?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "name": "lookup_order", "arguments": '{"order_id": "NW-48217"}'},
    ]},
    {"role": "tool", "tool_name": "lookup_order", "tool_call_id": "call_1",
     "content": '{"status": "in_transit"}'},
    {"role": "assistant", "content": "It is in transit."},
])
context = services.recall(thread, 1500)
assert "user: Where is my order NW-48217?" in context.text, context.text
assert len(context.messages) == 4, context.messages

# The extras of [all] import: the Celery tasks and the OpenAI summarizer.
from agentmemory.tasks import fold_thread  # noqa: E402

assert fold_thread.name == "agentmemory.fold_thread"
load_summarizer({"BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer",
                 "MODEL": "gpt-4o-mini", "OPTIONS": {}})

# The agent-loop integrations: the context in the OpenAI shapes, the Agents SDK session,
# the LangChain agent middleware and history (the agents and langchain extras; the
# langchain extra brings langchain-openai, which the docs' agent uses).
from langchain.agents import create_agent  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from agentmemory.integrations.langchain import ThreadChatMessageHistory  # noqa: E402
from agentmemory.integrations.langchain_agents import ThreadMemoryMiddleware  # noqa: E402
from agentmemory.integrations.openai_agents import ThreadSession  # noqa: E402

assert context.as_chat_messages()[1]["tool_calls"][0]["function"]["name"] == "lookup_order"
assert [i["type"] for i in context.as_response_input()][1:3] == [
    "function_call", "function_call_output"]
assert ThreadSession(thread, budget_tokens=1500).session_id == str(thread.pk)
assert len(ThreadChatMessageHistory(thread, budget_tokens=1500).messages) == 4
memory = ThreadMemoryMiddleware(thread, budget_tokens=1500, memory_tools=True)
assert [t.name for t in memory.tools] == ["memory_search", "memory_expand"]
create_agent(ChatOpenAI(model="gpt-4o-mini", api_key="sk-smoke"), middleware=[memory])

client = Client()
login = client.get("/admin/login/")
assert login.status_code == 200 and b'id="login-form"' in login.content, login.status_code
assert client.login(username="ada", password="smoke-pass")
change = client.get(f"/admin/agentmemory/thread/{thread.pk}/change/")
assert change.status_code == 200 and b"support-42" in change.content, change.status_code

created = client.post("/api/memory/threads/", {"client_key": "support-43", "title": "API"},
                      content_type="application/json")
assert created.status_code == 201, created.content
api_thread = created.json()["id"]
appended = client.post(f"/api/memory/threads/{api_thread}/entries/",
                       {"entries": [{"role": "user", "content": "Hello from the API"}]},
                       content_type="application/json")
assert appended.status_code == 201, appended.content
recalled = client.post(f"/api/memory/threads/{api_thread}/recall/", {"budget_tokens": 500},
                       content_type="application/json")
assert recalled.status_code == 200, recalled.content
assert "user: Hello from the API" in recalled.json()["text"], recalled.json()
schema = client.get("/api/memory/schema/")
assert schema.status_code == 200, schema.status_code

print(f"smoke project: ok (agentmemory {agentmemory.__version__} from {installed.parent})")
