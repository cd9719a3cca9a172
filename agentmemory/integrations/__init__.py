"""Adapters to the shapes and frameworks agents already use.

``openai_shapes`` is plain dictionaries and needs nothing installed, nor does
``openai_loop`` (``chat_turn``, ``achat_turn``: you pass the client); ``openai_agents``
needs the ``agents`` extra, and ``langchain_agents`` (the middleware for
``create_agent``) and ``langchain`` (the chat history) the ``langchain`` extra. None of
them is imported by the core: import the one you use.
"""
