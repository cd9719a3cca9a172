"""The demo app of the example project: ``manage.py agentmemory_demo`` and its data.

It lives outside the installed package because it creates a login (``admin`` /
``admin``) for a local demo; no code of ``agentmemory`` creates users.
"""
