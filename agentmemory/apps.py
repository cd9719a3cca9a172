from django.apps import AppConfig


class AgentMemoryConfig(AppConfig):
    name = "agentmemory"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agentmemory import checks, journal_check  # noqa: F401  (registers the checks)

        try:
            import celery  # noqa: F401
        except ImportError:
            return  # no background folds without the celery extra (agentmemory.E014)
        # Registers the tasks with every Celery app, so senders find them by name
        # (`broker.registered_task`) without importing the tasks themselves.
        from agentmemory import tasks  # noqa: F401
