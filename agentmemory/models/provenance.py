"""What every stored fold records of how it was made, and that it was not edited: a
summary's coverage and a window span alike (`folding.Draft.provenance` fills it)."""

from __future__ import annotations

from django.db import models


class FoldProvenance(models.Model):
    """The call (model, usage, prompt, sampling, library), the checks (the fact gate's
    score and missing facts, the injection flags) and the keyed fingerprint."""

    model = models.CharField(max_length=200)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    prompt_hash = models.CharField(max_length=64, blank=True, default="")
    temperature = models.FloatField(null=True, blank=True)
    seed = models.IntegerField(null=True, blank=True)
    library_version = models.CharField(max_length=32, blank=True, default="")
    signature = models.CharField(max_length=80, blank=True, default="")
    tampered_at = models.DateTimeField(null=True, blank=True)
    fact_score = models.FloatField(null=True, blank=True)
    missing_facts = models.JSONField(default=list, blank=True)
    injection_flags = models.JSONField(default=list, blank=True)

    class Meta:
        abstract = True
