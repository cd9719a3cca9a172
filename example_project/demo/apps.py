from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "example_project.demo"
    verbose_name = "agentmemory demo"
